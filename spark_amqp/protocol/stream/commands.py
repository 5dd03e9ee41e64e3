"""The stream protocol's commands: one class per command and direction, encode and decode.

Every command RabbitMQ 3.10-4.3 speaks (PROTOCOL.adoc of v3.10.8 and v4.3.5; the exact layouts
are those of ``rabbit_stream_core.erl``, which the reader uses on both sides, where the document
and the code differ), in both roles: a client encodes requests and decodes responses and
server-sent commands; a server (the embedded broker) does the reverse with the same classes.

A frame is ``Size:uint32`` then ``Key:uint16 Version:uint16`` and the command's fields. A
response sets the key's top bit (``0x8000``). Requests carry a ``correlation_id:uint32`` that
the response repeats; responses carry a ``code:uint16`` (:class:`~.constants.Code`) after it.

Irregular layouts, as RabbitMQ has them:

* ``Tune`` (0x0014) and its answer carry no correlation id; the server sends it as a request,
  the client answers with the same fields, as a response (0x8014) here; RabbitMQ accepts
  either form (``handle_frame_pre_auth``), and so does :func:`decode`.
* ``CreditResponse`` (0x8009) carries ``code`` then ``subscription_id``, no correlation id; it
  is sent only for a problem (crediting an unknown subscription).
* ``MetadataResponse`` has no response code: brokers, then per stream a code.
* RabbitMQ 3.10.x and 3.11.0 write the ``route`` and ``partitions`` responses *without* the
  response bit (``rabbit_stream_reader.erl`` v3.10.8 builds ``<<?COMMAND_ROUTE:16, ...>>`` by
  hand); :func:`decode` with ``role="client"`` reads a frame of key 0x0018/0x0019 as the
  response (a client never receives those requests). 3.10's route response also lists
  several streams (``[Stream]``), not the single one its PROTOCOL.adoc shows.
* ``SaslAuthenticateResponse``'s optional challenge is written as a ``string`` (int16 length,
  ``?STRING`` in rabbit_stream_core), not as ``bytes``; both are read.
* ``Subscribe``'s and ``ResolveOffsetSpec``'s properties, and ``OpenResponse``'s connection
  properties, are left out entirely when empty (as RabbitMQ writes them); read either way.
* ``PublishError`` lists ``(publishing_id, code)`` pairs.

Hot paths have their own code: :class:`Publish` (see :func:`encode_publish`), :class:`Deliver`
(the chunk stays bytes; :mod:`.chunk` reads it), :class:`PublishConfirm`.

:func:`decode` raises :class:`~.errors.UnknownFrame` for anything it cannot parse: an unknown
key or version, a field past the end, bytes left over, invalid UTF-8.
"""

from __future__ import annotations

import struct
from array import array
from typing import Any, NamedTuple

from .constants import RESPONSE_FLAG, Code, Compression, Key, OffsetType
from .errors import UnknownFrame
from .wire import (I16, U8, U16, U32, U64, Reader, put_bytes, put_str, put_str_list,
                   put_str_map, str_bytes)

__all__ = [
    "Command", "Request", "Response", "OffsetSpec", "Broker", "StreamMetadata", "SubBatch",
    "CommandVersion", "decode", "command_class", "COMMANDS", "encode_publish",
    "encode_publish_entries", "encode_publish_ids", "split_publish", "py_encode_publish",
    "py_encode_publish_ids", "py_split_publish", "CLIENT_SENDS", "SERVER_SENDS",
    # the commands
    "DeclarePublisher", "DeclarePublisherResponse", "Publish", "PublishConfirm",
    "PublishError", "QueryPublisherSequence", "QueryPublisherSequenceResponse",
    "DeletePublisher", "DeletePublisherResponse", "Subscribe", "SubscribeResponse", "Deliver",
    "Credit", "CreditResponse", "StoreOffset", "QueryOffset", "QueryOffsetResponse",
    "Unsubscribe", "UnsubscribeResponse", "CreateStream", "CreateStreamResponse",
    "DeleteStream", "DeleteStreamResponse", "Metadata", "MetadataResponse", "MetadataUpdate",
    "PeerProperties", "PeerPropertiesResponse", "SaslHandshake", "SaslHandshakeResponse",
    "SaslAuthenticate", "SaslAuthenticateResponse", "Tune", "TuneResponse", "Open",
    "OpenResponse", "Close", "CloseResponse", "Heartbeat", "Route", "RouteResponse",
    "Partitions", "PartitionsResponse", "ConsumerUpdate", "ConsumerUpdateResponse",
    "ExchangeCommandVersions", "ExchangeCommandVersionsResponse", "StreamStats",
    "StreamStatsResponse", "CreateSuperStream", "CreateSuperStreamResponse",
    "DeleteSuperStream", "DeleteSuperStreamResponse", "ResolveOffsetSpec",
    "ResolveOffsetSpecResponse",
]

_HEAD = struct.Struct(">IHH")        # size, key, version
_HEAD_CORR = struct.Struct(">IHHI")  # size, key, version, correlation id
_KV = struct.Struct(">HH").unpack_from
_new = object.__new__


# ------------------------------------------------------------------------- value types

class OffsetSpec(NamedTuple):
    """Where a subscription starts: ``type`` (:class:`~.constants.OffsetType`) and ``value``
    (the offset for ``OFFSET``, milliseconds since the epoch for ``TIMESTAMP``, else 0).

    Build with :meth:`first`, :meth:`last`, :meth:`next`, :meth:`offset`, :meth:`timestamp`.
    """

    type: int
    value: int = 0

    @classmethod
    def first(cls) -> "OffsetSpec":
        return cls(OffsetType.FIRST)

    @classmethod
    def last(cls) -> "OffsetSpec":
        return cls(OffsetType.LAST)

    @classmethod
    def next(cls) -> "OffsetSpec":
        return cls(OffsetType.NEXT)

    @classmethod
    def offset(cls, offset: int) -> "OffsetSpec":
        return cls(OffsetType.OFFSET, int(offset))

    @classmethod
    def timestamp(cls, millis: int) -> "OffsetSpec":
        return cls(OffsetType.TIMESTAMP, int(millis))

    def put(self, out: bytearray) -> None:
        t = int(self.type)
        out += U16.pack(t)
        if t == OffsetType.OFFSET:
            out += U64.pack(self.value)
        elif t == OffsetType.TIMESTAMP:
            out += struct.pack(">q", self.value)
        elif t not in (OffsetType.FIRST, OffsetType.LAST, OffsetType.NEXT, OffsetType.NONE):
            raise ValueError(f"unknown offset type {t}")

    @classmethod
    def read(cls, r: Reader, allow_none: bool = False) -> "OffsetSpec":
        t = r.u16()
        if t == OffsetType.OFFSET:
            return cls(t, r.u64())
        if t == OffsetType.TIMESTAMP:
            return cls(t, r.i64())
        if t in (OffsetType.FIRST, OffsetType.LAST, OffsetType.NEXT) or (
                allow_none and t == OffsetType.NONE):
            return cls(t, 0)
        raise UnknownFrame(f"{r.what}: unknown offset type {t}")


class Broker(NamedTuple):
    """A node in a metadata response: ``reference`` (uint16, the index streams point at),
    ``host`` and ``port`` as the node *advertises* them."""

    reference: int
    host: str
    port: int


class StreamMetadata(NamedTuple):
    """A stream in a metadata response: ``code`` (OK, STREAM_DOES_NOT_EXIST,
    STREAM_NOT_AVAILABLE or ACCESS_REFUSED), the leader's broker reference (65535 when none)
    and the replicas' references."""

    stream: str
    code: int
    leader: int
    replicas: tuple


class CommandVersion(NamedTuple):
    """One command's supported version range in ``exchange_command_versions``."""

    key: int
    min_version: int
    max_version: int


class SubBatch:
    """A sub-batch entry (osiris ``SubBatchEntry``): ``count`` records in ``data``, compressed
    with ``compression`` (:class:`~.constants.Compression`); ``uncompressed_size`` is the size
    of the records' simple-entry encoding. Build one from messages with
    :func:`.chunk.make_sub_batch`."""

    __slots__ = ("compression", "count", "uncompressed_size", "data")

    def __init__(self, compression: int, count: int, uncompressed_size: int, data: bytes):
        self.compression = compression
        self.count = count
        self.uncompressed_size = uncompressed_size
        self.data = data

    def header(self) -> bytes:
        """The entry's 11-byte header (flag bit, compression, count, sizes)."""
        return struct.pack(">BHII", 0x80 | ((int(self.compression) & 7) << 4), self.count,
                           self.uncompressed_size, len(self.data))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, SubBatch) and self.compression == other.compression
                and self.count == other.count
                and self.uncompressed_size == other.uncompressed_size
                and self.data == other.data)

    def __repr__(self) -> str:
        return (f"SubBatch(compression={Compression(self.compression).name if self.compression in Compression._value2member_map_ else self.compression}, "
                f"count={self.count}, uncompressed_size={self.uncompressed_size}, "
                f"data=<{len(self.data)} bytes>)")


# ------------------------------------------------------------------------- base classes

class Command:
    """Base of every command. Subclasses set ``KEY`` (with :data:`RESPONSE_FLAG` for
    responses), ``VERSION`` and ``__slots__`` (the fields, in wire order after the
    correlation id / code)."""

    __slots__ = ()
    KEY: int = 0
    VERSION: int = 1
    #: does the frame carry a correlation id after key and version
    CORRELATED = False

    def __init__(self, *args: Any, **kwargs: Any):
        names = self.__slots__
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} arguments")
        for name, value in zip(names, args):
            object.__setattr__(self, name, value)
        for name in names[len(args):]:
            if name in kwargs:
                object.__setattr__(self, name, kwargs.pop(name))
            else:
                object.__setattr__(self, name, self._default(name))
        if kwargs:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(kwargs)}")

    def _default(self, name: str) -> Any:
        d = getattr(type(self), "DEFAULTS", {})
        if name in d:
            v = d[name]
            return v() if callable(v) else v
        raise TypeError(f"{type(self).__name__} needs {name!r}")

    @property
    def name(self) -> str:
        return type(self).__name__

    def fields(self) -> dict:
        return {n: getattr(self, n) for n in self.__slots__}

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __repr__(self) -> str:
        args = ", ".join(f"{n}={_short(getattr(self, n))}" for n in self.__slots__)
        return f"{type(self).__name__}({args})"

    # subclasses implement _put (fields after the head) and _read (classmethod)
    def _put(self, out: bytearray) -> None:
        raise NotImplementedError

    def encode(self) -> bytes:
        """The whole frame, size prefix included."""
        out = bytearray(b"\0\0\0\0")
        out += U16.pack(self.KEY)
        out += U16.pack(self.VERSION)
        self._put(out)
        struct.pack_into(">I", out, 0, len(out) - 4)
        return bytes(out)


def _short(v: Any) -> str:
    if isinstance(v, (bytes, bytearray, memoryview)) and len(v) > 32:
        return f"<{len(v)} bytes>"
    return repr(v)


class Request(Command):
    """A request: ``correlation_id`` (uint32) first; its response repeats it."""

    __slots__ = ()
    CORRELATED = True
    #: the response class
    RESPONSE: type = None  # type: ignore[assignment]


class Response(Command):
    """A response: ``correlation_id`` then ``code`` (:class:`~.constants.Code`) first."""

    __slots__ = ()
    CORRELATED = True

    @property
    def ok(self) -> bool:
        return self.code == Code.OK  # type: ignore[attr-defined]


# Field kinds of the table-driven commands: each (write, read) pair
def _w_u8(o, v): o += U8.pack(v)
def _w_u16(o, v): o += U16.pack(v)
def _w_u32(o, v): o += U32.pack(v)
def _w_u64(o, v): o += U64.pack(v)
def _w_i64(o, v): o += struct.pack(">q", v)
def _w_bool(o, v): o += b"\x01" if v else b"\x00"
def _w_cmd_versions(o, v):
    o += U32.pack(len(v))
    for key, lo, hi in v:
        o += struct.pack(">HHH", key, lo, hi)
def _w_stats(o, v):
    o += U32.pack(len(v))
    for k, n in v.items():
        put_str(o, k, "statistic name")
        o += struct.pack(">q", n)
def _w_opt_map(o, v):
    if v:
        put_str_map(o, v)


def _r_bool(r: Reader) -> bool:
    b = r.u8()
    if b > 1:
        raise UnknownFrame(f"{r.what}: a boolean octet of {b} (0 or 1 expected)")
    return bool(b)


def _r_cmd_versions(r: Reader) -> list:
    return [CommandVersion(r.u16(), r.u16(), r.u16()) for _ in range(r.count(6))]


def _r_stats(r: Reader) -> dict:
    return {r.string(): r.i64() for _ in range(r.count(10))}


def _r_opt_map(r: Reader) -> dict:
    return r.str_map() if r.left() else {}


def _r_offset_spec(r: Reader) -> OffsetSpec:
    return OffsetSpec.read(r)


def _r_offset_spec_none(r: Reader) -> OffsetSpec:
    return OffsetSpec.read(r, allow_none=True)


FIELD_KINDS = {
    "u8": (_w_u8, Reader.u8), "u16": (_w_u16, Reader.u16), "u32": (_w_u32, Reader.u32),
    "u64": (_w_u64, Reader.u64), "i64": (_w_i64, Reader.i64), "bool": (_w_bool, _r_bool),
    "str": (put_str, Reader.string), "bytes": (put_bytes, Reader.bytes_),
    "map": (put_str_map, Reader.str_map), "list": (put_str_list, Reader.str_list),
    "opt_map": (_w_opt_map, _r_opt_map), "offset_spec": (lambda o, v: OffsetSpec(*v).put(o),
                                                         _r_offset_spec),
    "offset_spec_none": (lambda o, v: OffsetSpec(*v).put(o), _r_offset_spec_none),
    "cmd_versions": (_w_cmd_versions, _r_cmd_versions), "stats": (_w_stats, _r_stats),
}


def _table(cls: type) -> type:
    """Give ``cls`` (with ``FIELDS = ((name, kind), ...)``) its slots, _put and _read."""
    kinds = [(n, FIELD_KINDS[k]) for n, k in cls.FIELDS]
    head = ("correlation_id",) if cls.CORRELATED else ()
    if issubclass(cls, Response):
        head += ("code",)

    def _put(self, out: bytearray) -> None:
        if self.CORRELATED:
            out += U32.pack(self.correlation_id)
        if "code" in head:
            out += U16.pack(self.code)
        for name, (w, _) in kinds:
            w(out, getattr(self, name))

    def _read(klass, r: Reader):
        obj = _new(klass)
        if klass.CORRELATED:
            object.__setattr__(obj, "correlation_id", r.u32())
        if "code" in head:
            object.__setattr__(obj, "code", r.u16())
        for name, (_, rd) in kinds:
            object.__setattr__(obj, name, rd(r))
        r.done()
        return obj

    cls._put = _put
    cls._read = classmethod(_read)
    return cls


def _command(key: int, fields=(), response: bool = False, base: type | None = None,
             version: int = 1, defaults: dict | None = None, doc: str = "") -> type:
    """Make a table-driven command class."""
    base = base or (Response if response else Request)
    names = tuple(n for n, _ in fields)
    head = ("correlation_id",) if base.CORRELATED else ()
    if issubclass(base, Response):
        head += ("code",)
    ns = {"__slots__": head + names, "KEY": key | (RESPONSE_FLAG if response else 0),
          "VERSION": version, "FIELDS": tuple(fields), "__doc__": doc,
          "DEFAULTS": dict(defaults or {}), "__module__": __name__}
    return ns, base


def _define(name: str, key: int, fields=(), response: bool = False, base: type | None = None,
            defaults: dict | None = None, doc: str = "") -> type:
    ns, b = _command(key, fields, response, base, defaults=defaults, doc=doc)
    if issubclass(b, Response):
        ns["DEFAULTS"].setdefault("code", Code.OK)
    if b.CORRELATED:
        ns["DEFAULTS"].setdefault("correlation_id", 0)
    return _table(type(name, (b,), ns))


class _OneWay(Command):
    __slots__ = ()
    CORRELATED = False


# -------------------------------------------------------------- request / response pairs

_D_PUBLISHER = "DeclarePublisher: ``publisher_id`` (uint8, per connection), ``reference`` " \
    "(the producer name for deduplication, '' for none; at most 256 bytes), ``stream``."
DeclarePublisher = _define("DeclarePublisher", Key.DECLARE_PUBLISHER,
                           (("publisher_id", "u8"), ("reference", "str"), ("stream", "str")),
                           defaults={"reference": ""}, doc=_D_PUBLISHER)
DeclarePublisherResponse = _define("DeclarePublisherResponse", Key.DECLARE_PUBLISHER,
                                   response=True)
QueryPublisherSequence = _define(
    "QueryPublisherSequence", Key.QUERY_PUBLISHER_SEQUENCE,
    (("reference", "str"), ("stream", "str")),
    doc="The last publishing id the stream stored for producer ``reference`` (0: none).")
QueryPublisherSequenceResponse = _define("QueryPublisherSequenceResponse",
                                         Key.QUERY_PUBLISHER_SEQUENCE, (("sequence", "u64"),),
                                         response=True, defaults={"sequence": 0})
DeletePublisher = _define("DeletePublisher", Key.DELETE_PUBLISHER, (("publisher_id", "u8"),))
DeletePublisherResponse = _define("DeletePublisherResponse", Key.DELETE_PUBLISHER,
                                  response=True)
QueryOffset = _define("QueryOffset", Key.QUERY_OFFSET, (("reference", "str"), ("stream", "str")),
                      doc="The offset stored for consumer ``reference`` on ``stream``.")
QueryOffsetResponse = _define("QueryOffsetResponse", Key.QUERY_OFFSET, (("offset", "u64"),),
                              response=True, defaults={"offset": 0})
Unsubscribe = _define("Unsubscribe", Key.UNSUBSCRIBE, (("subscription_id", "u8"),))
UnsubscribeResponse = _define("UnsubscribeResponse", Key.UNSUBSCRIBE, response=True)
CreateStream = _define("CreateStream", Key.CREATE_STREAM, (("stream", "str"), ("arguments", "map")),
                       defaults={"arguments": dict},
                       doc="Create ``stream``; ``arguments`` (str -> str): ``max-length-bytes``, "
                           "``max-age``, ``stream-max-segment-size-bytes``, "
                           "``initial-cluster-size``, ``queue-leader-locator``.")
CreateStreamResponse = _define("CreateStreamResponse", Key.CREATE_STREAM, response=True)
DeleteStream = _define("DeleteStream", Key.DELETE_STREAM, (("stream", "str"),))
DeleteStreamResponse = _define("DeleteStreamResponse", Key.DELETE_STREAM, response=True)
Metadata = _define("Metadata", Key.METADATA, (("streams", "list"),),
                   doc="The leader and replicas of each of ``streams``.")
PeerProperties = _define("PeerProperties", Key.PEER_PROPERTIES, (("properties", "map"),),
                         defaults={"properties": dict})
PeerPropertiesResponse = _define("PeerPropertiesResponse", Key.PEER_PROPERTIES,
                                 (("properties", "map"),), response=True,
                                 defaults={"properties": dict})
SaslHandshake = _define("SaslHandshake", Key.SASL_HANDSHAKE)
SaslHandshakeResponse = _define("SaslHandshakeResponse", Key.SASL_HANDSHAKE,
                                (("mechanisms", "list"),), response=True,
                                defaults={"mechanisms": list})
SaslAuthenticate = _define("SaslAuthenticate", Key.SASL_AUTHENTICATE,
                           (("mechanism", "str"), ("data", "bytes")),
                           doc="``data``: the SASL response (PLAIN: ``\\0user\\0password``); "
                               "None or b'' is written as length -1, as RabbitMQ does.")
Open = _define("Open", Key.OPEN, (("vhost", "str"),))
OpenResponse = _define("OpenResponse", Key.OPEN, (("properties", "opt_map"),), response=True,
                       defaults={"properties": dict},
                       doc="``properties``: the node's ``advertised_host`` and "
                           "``advertised_port`` (on OK).")
Close = _define("Close", Key.CLOSE, (("closing_code", "u16"), ("reason", "str")),
                defaults={"closing_code": Code.OK, "reason": ""})
CloseResponse = _define("CloseResponse", Key.CLOSE, response=True)
Route = _define("Route", Key.ROUTE, (("routing_key", "str"), ("super_stream", "str")))
RouteResponse = _define("RouteResponse", Key.ROUTE, (("streams", "list"),), response=True,
                        defaults={"streams": list})
Partitions = _define("Partitions", Key.PARTITIONS, (("super_stream", "str"),))
PartitionsResponse = _define("PartitionsResponse", Key.PARTITIONS, (("streams", "list"),),
                             response=True, defaults={"streams": list})
ConsumerUpdate = _define("ConsumerUpdate", Key.CONSUMER_UPDATE,
                         (("subscription_id", "u8"), ("active", "bool")),
                         doc="Server to client (3.11+, single active consumer): the "
                             "subscription becomes ``active`` or not.")
ConsumerUpdateResponse = _define(
    "ConsumerUpdateResponse", Key.CONSUMER_UPDATE, (("offset_spec", "offset_spec_none"),),
    response=True, defaults={"offset_spec": lambda: OffsetSpec(OffsetType.NEXT)},
    doc="Client to server: where the newly active consumer starts.")
ExchangeCommandVersions = _define("ExchangeCommandVersions", Key.EXCHANGE_COMMAND_VERSIONS,
                                  (("commands", "cmd_versions"),), defaults={"commands": list})
ExchangeCommandVersionsResponse = _define("ExchangeCommandVersionsResponse",
                                          Key.EXCHANGE_COMMAND_VERSIONS,
                                          (("commands", "cmd_versions"),), response=True,
                                          defaults={"commands": list})
StreamStats = _define("StreamStats", Key.STREAM_STATS, (("stream", "str"),),
                      doc="3.11+: ``first_chunk_id``, ``committed_chunk_id`` (and more on "
                          "newer brokers) of ``stream``.")
StreamStatsResponse = _define("StreamStatsResponse", Key.STREAM_STATS, (("stats", "stats"),),
                              response=True, defaults={"stats": dict})
CreateSuperStream = _define(
    "CreateSuperStream", Key.CREATE_SUPER_STREAM,
    (("name", "str"), ("partitions", "list"), ("binding_keys", "list"), ("arguments", "map")),
    defaults={"arguments": dict}, doc="3.13+: the exchange, partition streams and bindings.")
CreateSuperStreamResponse = _define("CreateSuperStreamResponse", Key.CREATE_SUPER_STREAM,
                                    response=True)
DeleteSuperStream = _define("DeleteSuperStream", Key.DELETE_SUPER_STREAM, (("name", "str"),))
DeleteSuperStreamResponse = _define("DeleteSuperStreamResponse", Key.DELETE_SUPER_STREAM,
                                    response=True)
ResolveOffsetSpec = _define("ResolveOffsetSpec", Key.RESOLVE_OFFSET_SPEC,
                            (("stream", "str"), ("offset_spec", "offset_spec"),
                             ("properties", "opt_map")), defaults={"properties": dict},
                            doc="4.3+: the offset an offset specification points at now.")
ResolveOffsetSpecResponse = _define("ResolveOffsetSpecResponse", Key.RESOLVE_OFFSET_SPEC,
                                    (("offset_type", "u16"), ("offset", "u64")), response=True,
                                    defaults={"offset_type": OffsetType.OFFSET, "offset": 0})

# one-way commands (no correlation id)
StoreOffset = _define("StoreOffset", Key.STORE_OFFSET,
                      (("reference", "str"), ("stream", "str"), ("offset", "u64")),
                      base=_OneWay, doc="Store ``offset`` for consumer ``reference`` (no reply).")
MetadataUpdate = _define("MetadataUpdate", Key.METADATA_UPDATE,
                         (("code", "u16"), ("stream", "str")), base=_OneWay,
                         doc="Server to client: ``stream`` changed (``code`` "
                             "STREAM_NOT_AVAILABLE: its leader moved or it was deleted).")
Heartbeat = _define("Heartbeat", Key.HEARTBEAT, base=_OneWay)
Tune = _define("Tune", Key.TUNE, (("frame_max", "u32"), ("heartbeat", "u32")), base=_OneWay,
               doc="Server to client: proposed ``frame_max`` (bytes, 0 = no limit) and "
                   "``heartbeat`` (seconds, 0 = none).")
Credit = _define("Credit", Key.CREDIT, (("subscription_id", "u8"), ("credit", "u16")),
                 base=_OneWay, doc="Client to server: ``credit`` more chunks may be sent.")


class _OneWayResponse(_OneWay):
    __slots__ = ()


TuneResponse = _define("TuneResponse", Key.TUNE | RESPONSE_FLAG,
                       (("frame_max", "u32"), ("heartbeat", "u32")), base=_OneWayResponse,
                       doc="Client to server: the agreed ``frame_max`` and ``heartbeat``.")
CreditResponse = _define("CreditResponse", Key.CREDIT | RESPONSE_FLAG,
                         (("code", "u16"), ("subscription_id", "u8")), base=_OneWayResponse,
                         doc="Server to client, only on a problem (an unknown subscription).")


class Subscribe(Request):
    """Subscribe ``subscription_id`` (uint8, per connection) to ``stream`` from
    ``offset_spec`` (:class:`OffsetSpec`) with ``credit`` chunks; ``properties`` (str -> str):
    ``single-active-consumer``, ``name``, ``super-stream``, ``filter.N``, ``match-unfiltered``,
    ``chunk_selector`` (left out of the frame when empty, as RabbitMQ writes it)."""

    __slots__ = ("correlation_id", "subscription_id", "stream", "offset_spec", "credit",
                 "properties")
    KEY = Key.SUBSCRIBE
    DEFAULTS = {"correlation_id": 0, "offset_spec": lambda: OffsetSpec(OffsetType.NEXT),
                "credit": 1, "properties": dict}

    def _put(self, out: bytearray) -> None:
        out += struct.pack(">IB", self.correlation_id, self.subscription_id)
        put_str(out, self.stream, "stream name")
        OffsetSpec(*self.offset_spec).put(out)
        out += U16.pack(self.credit)
        if self.properties:
            put_str_map(out, self.properties, "subscription property")

    @classmethod
    def _read(cls, r: Reader) -> "Subscribe":
        obj = cls(r.u32(), r.u8(), r.string(), OffsetSpec.read(r), r.u16())
        obj.properties = r.str_map() if r.left() else {}
        r.done()
        return obj


class SubscribeResponse(Response):
    __slots__ = ("correlation_id", "code")
    KEY = Key.SUBSCRIBE | RESPONSE_FLAG
    DEFAULTS = {"correlation_id": 0, "code": Code.OK}

    def _put(self, out):
        out += struct.pack(">IH", self.correlation_id, self.code)

    @classmethod
    def _read(cls, r):
        obj = cls(r.u32(), r.u16())
        r.done()
        return obj


class SaslAuthenticateResponse(Response):
    """``challenge``: the SASL challenge (b'' when none), written as RabbitMQ does (a
    ``string``, int16 length, and nothing at all when empty); read as string or bytes."""

    __slots__ = ("correlation_id", "code", "challenge")
    KEY = Key.SASL_AUTHENTICATE | RESPONSE_FLAG
    DEFAULTS = {"correlation_id": 0, "code": Code.OK, "challenge": b""}

    def _put(self, out):
        out += struct.pack(">IH", self.correlation_id, self.code)
        if self.challenge:
            if len(self.challenge) > 0x7FFF:
                raise ValueError("a SASL challenge over 32,767 bytes cannot be written")
            out += U16.pack(len(self.challenge)) + bytes(self.challenge)

    @classmethod
    def _read(cls, r):
        obj = cls(r.u32(), r.u16())
        left = r.left()
        if left == 0:
            obj.challenge = b""
        elif left >= 2 and U16.unpack_from(r.buf, r.pos)[0] == left - 2:
            obj.challenge = r.raw(r.u16())
        elif left >= 4 and U32.unpack_from(r.buf, r.pos)[0] == left - 4:
            obj.challenge = r.raw(r.u32())
        else:
            raise UnknownFrame(f"{r.what}: a challenge of {left} byte(s) whose length prefix "
                               "does not match")
        return obj


class MetadataResponse(Command):
    """``brokers`` (list of :class:`Broker`) and ``streams`` (list of :class:`StreamMetadata`);
    no response code of its own. Look a stream's leader up with :meth:`leader_of`."""

    __slots__ = ("correlation_id", "brokers", "streams")
    KEY = Key.METADATA | RESPONSE_FLAG
    CORRELATED = True
    DEFAULTS = {"correlation_id": 0, "brokers": list, "streams": list}

    def _put(self, out):
        out += U32.pack(self.correlation_id)
        out += U32.pack(len(self.brokers))
        for b in self.brokers:
            out += U16.pack(b[0])
            put_str(out, b[1], "host")
            out += U32.pack(b[2])
        out += U32.pack(len(self.streams))
        for s in self.streams:
            put_str(out, s[0], "stream name")
            out += struct.pack(">HH", s[1], s[2] & 0xFFFF)
            out += U32.pack(len(s[3]))
            for ref in s[3]:
                out += U16.pack(ref)

    @classmethod
    def _read(cls, r):
        corr = r.u32()
        brokers = [Broker(r.u16(), r.string(), r.u32()) for _ in range(r.count(8))]
        streams = []
        for _ in range(r.count(10)):
            name, code, leader = r.string(), r.u16(), r.u16()
            n = r.count(2)
            streams.append(StreamMetadata(name, code, leader,
                                          tuple(r.u16() for _ in range(n))))
        r.done()
        return cls(corr, brokers, streams)

    def broker(self, reference: int) -> Broker | None:
        for b in self.brokers:
            if b.reference == reference:
                return b
        return None

    def leader_of(self, stream: str) -> Broker | None:
        for s in self.streams:
            if s.stream == stream:
                return self.broker(s.leader)
        return None

    def replicas_of(self, stream: str) -> list:
        for s in self.streams:
            if s.stream == stream:
                return [b for b in (self.broker(ref) for ref in s.replicas) if b is not None]
        return []


# ------------------------------------------------------------------------- hot paths

class Publish(_OneWay):
    """Client to server: messages of publisher ``publisher_id``.

    ``publishing_ids``: one uint64 per entry; ``messages``: one entry each, ``bytes`` (a
    simple entry: one message) or :class:`SubBatch`; ``filter_values``: None (version 1) or
    one ``str | None`` per entry (version 2, RabbitMQ 3.13+ stream filtering; sub-batches
    cannot carry one). Encoding a publish per call of :func:`encode_publish` is the fast path.
    """

    __slots__ = ("publisher_id", "publishing_ids", "messages", "filter_values")
    KEY = Key.PUBLISH
    DEFAULTS = {"filter_values": None}

    @property
    def VERSION(self) -> int:  # type: ignore[override]
        return 1 if self.filter_values is None else 2

    def encode(self) -> bytes:
        return encode_publish_entries(self.publisher_id, self.publishing_ids, self.messages,
                                      self.filter_values)

    @classmethod
    def _read_version(cls, r: Reader, version: int) -> "Publish":
        pid = r.u8()
        n = r.count(12 if version == 1 else 14)
        ids, msgs = [], []
        fvs: list | None = [] if version == 2 else None
        for _ in range(n):
            ids.append(r.u64())
            if fvs is not None:
                fvs.append(r.string())
            msgs.append(_read_entry(r))
        r.done()
        return cls(pid, ids, msgs, fvs)


def _read_entry(r: Reader):
    """A simple entry (its data bytes) or a sub-batch entry (:class:`SubBatch`)."""
    head = r.u32()
    if head & 0x80000000 == 0:
        return r.raw(head)
    b0 = head >> 24
    count = (head >> 8) & 0xFFFF
    rest = r.raw(7)
    uncompressed = ((head & 0xFF) << 24) | int.from_bytes(rest[:3], "big")
    size = int.from_bytes(rest[3:], "big")
    return SubBatch((b0 >> 4) & 7, count, uncompressed, r.raw(size))


def encode_publish_entries(publisher_id: int, publishing_ids, messages,
                           filter_values=None) -> bytes:
    """A whole publish frame: one entry per message (bytes: a simple entry; :class:`SubBatch`:
    a sub-batch entry) with its publishing id; version 2 when ``filter_values`` is given (one
    ``str | None`` per message). Raises ``ValueError`` for mismatched lengths, a message of
    2 GiB or more, or a filter value on a sub-batch."""
    n = len(messages)
    if len(publishing_ids) != n or (filter_values is not None and len(filter_values) != n):
        raise ValueError("publishing_ids, messages (and filter_values) must have one entry each")
    out = bytearray(b"\0\0\0\0")
    out += struct.pack(">HHBI", Key.PUBLISH, 1 if filter_values is None else 2, publisher_id, n)
    for i, m in enumerate(messages):
        out += U64.pack(publishing_ids[i])
        if filter_values is not None:
            fv = filter_values[i]
            if fv is not None and isinstance(m, SubBatch):
                raise ValueError("a sub-batch cannot carry a filter value (RabbitMQ reads none)")
            put_str(out, fv, "filter value")
        if isinstance(m, SubBatch):
            out += m.header()
            out += m.data
        else:
            if len(m) > 0x7FFFFFFF:
                raise ValueError(f"a message of {len(m)} bytes: the stream protocol's limit is "
                                 "2 GiB - 1 (a 31-bit entry size)")
            out += U32.pack(len(m))
            out += m
    struct.pack_into(">I", out, 0, len(out) - 4)
    return bytes(out)


def py_encode_publish(publisher_id: int, first_id: int, messages) -> bytes:
    """A publish frame (version 1) of ``messages`` (a list of bytes) with the consecutive
    publishing ids ``first_id, first_id + 1, ...``: the client's publish path."""
    n = len(messages)
    size = 9 + 12 * n + sum(map(len, messages))
    out = bytearray(U32.pack(size))
    out += struct.pack(">HHBI", Key.PUBLISH, 1, publisher_id, n)
    pack = struct.Struct(">QI").pack
    pid = first_id
    for m in messages:
        ln = len(m)
        if ln > 0x7FFFFFFF:
            raise ValueError(f"a message of {ln} bytes: the stream protocol's limit is 2 GiB - 1 "
                             "(a 31-bit entry size)")
        out += pack(pid, ln)
        out += m
        pid += 1
    return bytes(out)


def py_encode_publish_ids(publisher_id: int, publishing_ids, messages) -> bytes:
    """A publish frame (version 1) of ``messages`` (bytes) with one publishing id each from
    ``publishing_ids`` (e.g. offsets of a source, for deduplicated writes). Raises
    ``ValueError`` for lengths that differ, an id outside uint64 or a message of 2 GiB."""
    if len(publishing_ids) != len(messages):
        raise ValueError(f"{len(publishing_ids)} publishing id(s) for {len(messages)} message(s)")
    for v in publishing_ids:
        if not 0 <= v <= 0xFFFFFFFFFFFFFFFF:
            raise ValueError(f"publishing id {v} is not a uint64")
    return encode_publish_entries(publisher_id, list(publishing_ids), list(messages))


def py_split_publish(buf: bytes, pos: int, end: int) -> tuple:
    """Server role: the publish frame ``buf[pos:end]`` (from its key) as ``(publisher_id,
    publishing_ids, messages, filter_values)`` (lists; a sub-batch entry is a
    :class:`SubBatch`; ``filter_values`` None for version 1). Raises UnknownFrame."""
    cmd = decode(buf, pos, end)
    if type(cmd) is not Publish:
        raise UnknownFrame(f"a {type(cmd).__name__} frame is not a publish")
    return cmd.publisher_id, cmd.publishing_ids, cmd.messages, cmd.filter_values


# the compiled versions when built (installed by speedups.py)
encode_publish = py_encode_publish
encode_publish_ids = py_encode_publish_ids
split_publish = py_split_publish


class PublishConfirm(_OneWay):
    """Server to client: ``publishing_ids`` (an ``array('Q')``) of ``publisher_id`` are
    stored (deduplicated ones too)."""

    __slots__ = ("publisher_id", "publishing_ids")
    KEY = Key.PUBLISH_CONFIRM

    def encode(self) -> bytes:
        ids = array("Q", self.publishing_ids)
        if struct.pack("=H", 1) != b"\x00\x01":
            ids.byteswap()
        n = len(ids)
        return struct.pack(">IHHBI", 9 + 8 * n, Key.PUBLISH_CONFIRM, 1, self.publisher_id,
                           n) + ids.tobytes()

    @classmethod
    def _read(cls, r: Reader) -> "PublishConfirm":
        pid = r.u8()
        n = r.count(8)
        if r.left() != 8 * n:
            raise UnknownFrame(f"{r.what}: {r.left()} byte(s) for {n} publishing id(s)")
        ids = array("Q", bytes(r.buf[r.pos:r.end]))
        if struct.pack("=H", 1) != b"\x00\x01":
            ids.byteswap()
        r.pos = r.end
        obj = _new(cls)
        obj.publisher_id = pid
        obj.publishing_ids = ids
        return obj

    def __eq__(self, other: object) -> bool:
        return (type(other) is PublishConfirm and self.publisher_id == other.publisher_id
                and list(self.publishing_ids) == list(other.publishing_ids))


class PublishError(_OneWay):
    """Server to client: ``errors``, a list of ``(publishing_id, code)`` of ``publisher_id``
    not stored (PUBLISHER_DOES_NOT_EXIST, PRECONDITION_FAILED, ACCESS_REFUSED, ...)."""

    __slots__ = ("publisher_id", "errors")
    KEY = Key.PUBLISH_ERROR

    def _put(self, out):
        out += U8.pack(self.publisher_id)
        out += U32.pack(len(self.errors))
        for pid, code in self.errors:
            out += struct.pack(">QH", pid, code)

    @classmethod
    def _read(cls, r):
        pid = r.u8()
        errors = [(r.u64(), r.u16()) for _ in range(r.count(10))]
        r.done()
        return cls(pid, errors)


class Deliver(_OneWay):
    """Server to client: one osiris chunk for ``subscription_id``. ``chunk``: the chunk's
    bytes (header and entries; read with :func:`.chunk.parse_chunk`); ``committed_chunk_id``:
    version 2 only (3.11+, after ``exchange_command_versions``), else None."""

    __slots__ = ("subscription_id", "chunk", "committed_chunk_id")
    KEY = Key.DELIVER
    DEFAULTS = {"committed_chunk_id": None}

    @property
    def VERSION(self) -> int:  # type: ignore[override]
        return 1 if self.committed_chunk_id is None else 2

    def encode(self) -> bytes:
        if self.committed_chunk_id is None:
            head = struct.pack(">IHHB", 5 + len(self.chunk), Key.DELIVER, 1,
                               self.subscription_id)
        else:
            head = struct.pack(">IHHBQ", 13 + len(self.chunk), Key.DELIVER, 2,
                               self.subscription_id, self.committed_chunk_id)
        return head + bytes(self.chunk)

    @classmethod
    def _read_version(cls, r: Reader, version: int) -> "Deliver":
        obj = _new(cls)
        obj.subscription_id = r.u8()
        obj.committed_chunk_id = r.u64() if version == 2 else None
        obj.chunk = r.rest()
        return obj


# ------------------------------------------------------------------------- decoding

COMMANDS: dict[tuple[int, int], type] = {}
"""``(key with response flag, version) -> class`` of every command :func:`decode` knows."""

for _cls in list(globals().values()):
    if isinstance(_cls, type) and issubclass(_cls, Command) and _cls.KEY and \
            _cls not in (Publish, Deliver):
        COMMANDS[(_cls.KEY, _cls.VERSION)] = _cls
for _v in (1, 2):
    COMMANDS[(Key.PUBLISH, _v)] = Publish
    COMMANDS[(Key.DELIVER, _v)] = Deliver

for _req in (DeclarePublisher, QueryPublisherSequence, DeletePublisher, Subscribe, QueryOffset,
             Unsubscribe, CreateStream, DeleteStream, Metadata, PeerProperties, SaslHandshake,
             SaslAuthenticate, Open, Close, Route, Partitions, ConsumerUpdate,
             ExchangeCommandVersions, StreamStats, CreateSuperStream, DeleteSuperStream,
             ResolveOffsetSpec):
    _req.RESPONSE = COMMANDS[(_req.KEY | RESPONSE_FLAG, 1)]

_ALL_KEYS = {k for k in Key}
CLIENT_SENDS = frozenset({
    DeclarePublisher, Publish, QueryPublisherSequence, DeletePublisher, Subscribe, Credit,
    StoreOffset, QueryOffset, Unsubscribe, CreateStream, DeleteStream, Metadata,
    PeerProperties, SaslHandshake, SaslAuthenticate, TuneResponse, Open, Close, CloseResponse,
    Heartbeat, Route, Partitions, ConsumerUpdateResponse, ExchangeCommandVersions, StreamStats,
    CreateSuperStream, DeleteSuperStream, ResolveOffsetSpec,
})
"""The command classes a client sends (PROTOCOL.adoc's "From" column; ``close`` both ways)."""
SERVER_SENDS = frozenset({
    DeclarePublisherResponse, PublishConfirm, PublishError, QueryPublisherSequenceResponse,
    DeletePublisherResponse, SubscribeResponse, Deliver, CreditResponse, QueryOffsetResponse,
    UnsubscribeResponse, CreateStreamResponse, DeleteStreamResponse, MetadataResponse,
    MetadataUpdate, PeerPropertiesResponse, SaslHandshakeResponse, SaslAuthenticateResponse,
    Tune, OpenResponse, Close, CloseResponse, Heartbeat, RouteResponse, PartitionsResponse,
    ConsumerUpdate, ExchangeCommandVersionsResponse, StreamStatsResponse,
    CreateSuperStreamResponse, DeleteSuperStreamResponse, ResolveOffsetSpecResponse,
})
"""The command classes a server sends."""

# 3.10.x / 3.11.0 send the route and partitions responses without the response bit
_UNFLAGGED_RESPONSES = {Key.ROUTE: RouteResponse, Key.PARTITIONS: PartitionsResponse}


def command_class(key: int, version: int, role: str | None = None) -> type:
    """The class of frames with ``key`` (response flag included) and ``version``; ``role``
    (``"client"``: the receiver is a client) applies the 3.10 route/partitions quirk.
    Raises :class:`~.errors.UnknownFrame` when there is none."""
    if role == "client" and key in _UNFLAGGED_RESPONSES and version == 1:
        return _UNFLAGGED_RESPONSES[key]
    cls = COMMANDS.get((key, version))
    if cls is None:
        k = key & 0x7FFF
        what = Key(k).name if k in _ALL_KEYS else f"key {k:#06x}"
        kind = "response" if key & RESPONSE_FLAG else "request"
        raise UnknownFrame(f"unknown command: {what} {kind} version {version}")
    return cls


def decode(frame: bytes, pos: int = 0, end: int | None = None, role: str | None = None) -> Command:
    """Decode one frame's content ``frame[pos:end]`` (after the 4-byte size): key, version and
    fields. ``role``: the receiving side (``"client"`` or ``"server"``; None accepts any
    command). Raises :class:`~.errors.UnknownFrame` (see the module docstring)."""
    if end is None:
        end = len(frame)
    if end - pos < 4:
        raise UnknownFrame(f"a frame of {end - pos} byte(s) has no key and version")
    key, version = _KV(frame, pos)
    cls = command_class(key, version, role)
    r = Reader(frame, pos + 4, end, cls.__name__)
    if cls is Publish or cls is Deliver:
        return cls._read_version(r, version)
    return cls._read(r)
