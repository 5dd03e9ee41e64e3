"""Conversions between AMQP 0-9-1 messages and AMQP 1.0 messages, as RabbitMQ does them.

A RabbitMQ stream stores AMQP 1.0 messages whichever protocol wrote them: a message published
over 0-9-1 is converted when it is written, and converted back for a 0-9-1 consumer of the
stream. Two RabbitMQ versions, two conversions (the embedded broker behaves like one of them,
``broker/versions.py``):

- **RabbitMQ 3.10** (``rabbit_msg_record.erl`` and ``rabbit_stream_queue.erl``
  ``msg_to_iodata/1`` / ``binary_to_msg/2`` at v3.10.8): :func:`from_amqp091_v310`,
  :func:`to_amqp091_v310`. Checked byte for byte against RabbitMQ 3.10.8
  (tests/protocol/test_amqp10_convert.py, its recorded bytes and the live check).
- **RabbitMQ 4.3** (``mc_amqpl.erl``, ``mc_amqp.erl``, ``rabbit_stream_queue.erl``
  ``stream_message/1`` / ``entry_to_msg/6`` at v4.3.5): :func:`from_amqp091_v43`,
  :func:`to_amqp091_v43`. Read from the source; there is no 4.3 broker here to compare with.
  One guess: the order of the ``x-routing-key`` and ``x-exchange`` annotations comes from the
  iteration order of an Erlang map with atom keys, taken to be the one 3.10 writes.

0-9-1 messages are ``(exchange, routing key, properties bytes, body)``; the properties are the
content header's flags and values. Going back, the properties have no ``x-stream-offset``
header (the broker adds it per delivery, in the sorted place: both versions deliver the
headers sorted by name) and their headers are sorted already.

What RabbitMQ cannot convert crashes its channel or queue process: a 0-9-1 client is closed
with 541 INTERNAL_ERROR. The functions here raise :class:`ConversionError` for those cases
(a decimal header value; a stored message 3.10 cannot read back, such as one with a header
section or a body that is not one data section), and the broker answers 541 as RabbitMQ does.
"""

from __future__ import annotations

import uuid as _uuid
from urllib.parse import quote, unquote_to_bytes

from .message import (AMQP_VALUE, DATA, FOOTER, HEADER, BODY_DATA, Header, Message, Properties,
                      decode_message, encode_message)
from .props091 import encode_properties, parse_properties
from .types import (RABBIT_310, RABBIT_4, Array, Boolean, Byte, Char, DecodeError, Described, Float,
                    Int, Short, Symbol, Timestamp, UByte, UInt, ULong, UShort, decode_value)

__all__ = ["ConversionError", "from_amqp091_v310", "to_amqp091_v310", "from_amqp091_v43",
           "to_amqp091_v43", "route_of", "DATA_SECTION_HEAD", "data_entry"]


class ConversionError(ValueError):
    """A message RabbitMQ fails to convert (its channel or queue process crashes; the 0-9-1
    client gets 541 INTERNAL_ERROR)."""


def DATA_SECTION_HEAD(n: int, encoder=RABBIT_4) -> bytes:
    """The bytes before a data section's ``n`` payload bytes: descriptor, constructor, size."""
    if n <= encoder.short_max:
        return bytes((0x00, 0x53, DATA, 0xa0, n))
    return bytes((0x00, 0x53, DATA, 0xb0)) + n.to_bytes(4, "big")


def data_entry(prefix: bytes, body, short_max: int = 255) -> bytes:
    """``size (u32) | prefix | a data section holding body``: the osiris simple entry of a
    message whose sections before the body are ``prefix`` (``short_max``: the encoder's, 255
    for RabbitMQ 4.x, 254 for 3.10). Compiled in ``_speedups.pyx`` when built."""
    n = len(body)
    head = bytes((0x00, 0x53, DATA, 0xa0, n)) if n <= short_max else bytes((0x00, 0x53, DATA, 0xb0)) + n.to_bytes(4, "big")
    return (len(prefix) + len(head) + n).to_bytes(4, "big") + prefix + head + bytes(body)


def _str(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _bytes(s) -> bytes:
    if isinstance(s, (bytes, bytearray)):
        return bytes(s)
    return str(s).encode("utf-8", "surrogateescape")


def _div1000(v: int) -> int:
    """Erlang's ``V div 1000`` (truncates toward zero)."""
    q = abs(v) // 1000
    return q if v >= 0 else -q


# ================================================================== RabbitMQ 3.10.8

#: ``rabbit_msg_record:from_091/2``: 0-9-1 tag -> the AMQP 1.0 value of a header's value
_FROM_091 = {"S": _str, "l": int, "L": int, "B": UByte, "s": Short, "u": UShort, "i": UInt, "I": Int,
             "d": float, "f": Float, "t": Boolean, "x": bytes, "T": lambda v: Timestamp(v * 1000),
             "b": Byte, "V": lambda v: None}


def _from_091_v310(tag: str, v):
    """``rabbit_msg_record:from_091/2``: a 0-9-1 header value as an AMQP 1.0 value."""
    fn = _FROM_091.get(tag)
    if fn is None:
        raise ConversionError(f"a header value of type {_TAG_NAMES.get(tag, tag)} has no AMQP 1.0 conversion "
                              f"in RabbitMQ 3.10 (rabbit_msg_record:from_091/2)")
    return fn(v)


_TAG_NAMES = {"D": "decimal", "A": "array", "F": "table"}


def from_amqp091_v310(exchange: str, routing_key: str, props_raw, body) -> bytes:
    """The AMQP 1.0 message RabbitMQ 3.10.8 stores for a 0-9-1 message published to a stream
    (``rabbit_stream_queue:msg_to_iodata/1``): message annotations ``x-routing-key``,
    ``x-exchange``, ``x-basic-priority`` / ``-delivery-mode`` / ``-expiration``; properties
    (all 13 fields, or none); application properties ``x-basic-type``, ``x-basic-app-id``
    and the headers (arrays and tables dropped); one data section.

    Raises :class:`ConversionError` for a header value RabbitMQ 3.10 cannot convert (decimal:
    the publisher's connection is closed with 541)."""
    p = parse_properties(props_raw)
    prefix = _prefix_v310(exchange, routing_key, p)
    return prefix + DATA_SECTION_HEAD(len(body), RABBIT_310) + bytes(body)


def prefix_v310(exchange: str, routing_key: str, props_raw) -> bytes:
    """The sections before the data section of :func:`from_amqp091_v310` (they depend only
    on the route and the properties: the broker caches them)."""
    return _prefix_v310(exchange, routing_key, parse_properties(props_raw))


def _prefix_v310(exchange: str, routing_key: str, p: dict) -> bytes:
    ts = p.get("timestamp")
    props = Properties(
        message_id=_opt_str(p.get("message_id")), user_id=p.get("user_id"),
        reply_to=_opt_str(p.get("reply_to")), correlation_id=_opt_str(p.get("correlation_id")),
        content_type=_opt_sym(p.get("content_type")), content_encoding=_opt_sym(p.get("content_encoding")),
        creation_time=None if ts is None else Timestamp(ts * 1000))
    ap: dict = {}
    if p.get("type") is not None:
        ap["x-basic-type"] = _str(p["type"])
    if p.get("app_id") is not None:
        ap["x-basic-app-id"] = _str(p["app_id"])
    for k, tag, v in p.get("headers") or ():
        if tag in ("A", "F"):
            continue
        ap[_str(k)] = _from_091_v310(tag, v)
    ma: dict = {Symbol("x-routing-key"): routing_key, Symbol("x-exchange"): exchange}
    if p.get("priority") is not None:
        ma[Symbol("x-basic-priority")] = UByte(p["priority"])
    if p.get("delivery_mode") is not None:
        ma[Symbol("x-basic-delivery-mode")] = UByte(p["delivery_mode"])
    if p.get("expiration") is not None:
        ma[Symbol("x-basic-expiration")] = _str(p["expiration"])
    msg = Message(b"", message_annotations=ma, properties=props, application_properties=ap)
    full = encode_message(msg, RABBIT_310, trim=False)
    return full[:-5]        # without the empty data section (00 53 75 a0 00)


def _opt_str(b):
    return None if b is None else _str(b)


def _opt_sym(b):
    return None if b is None else Symbol(_str(b))


#: ``rabbit_msg_record:to_091/2``: the AMQP 1.0 type of an application property -> (0-9-1 tag,
#: its value)
_TO_091 = {str: lambda v: ("S", _bytes(v)), int: lambda v: ("l", v), Byte: lambda v: ("b", int(v)),
           UByte: lambda v: ("B", int(v)), Short: lambda v: ("s", int(v)), UShort: lambda v: ("u", int(v)),
           UInt: lambda v: ("i", int(v)), Int: lambda v: ("I", int(v)), float: lambda v: ("d", v),
           Float: lambda v: ("f", float(v)), Timestamp: lambda v: ("T", _div1000(int(v))),
           bytes: lambda v: ("x", v), bool: lambda v: ("t", v), type(None): lambda v: ("V", None)}


def _to_091_v310(v):
    """``rabbit_msg_record:to_091/2``: (tag, value) of an AMQP 1.0 application property."""
    fn = _TO_091.get(type(v))
    if fn is None:
        raise ConversionError(f"an application property of AMQP type {_amqp_type(v)} has no 0-9-1 conversion "
                              f"in RabbitMQ 3.10 (rabbit_msg_record:to_091/2)")
    return fn(v)


def _amqp_type(v) -> str:
    return {Symbol: "symbol", ULong: "ulong", Char: "char", list: "list", dict: "map", Array: "array",
            _uuid.UUID: "uuid", Described: "described"}.get(type(v), type(v).__name__)


def _message_id_v310(mid, hkey: bytes, headers: list):
    """``rabbit_msg_record:message_id/3``: (0-9-1 message-id bytes or None) and headers."""
    if mid is None:
        return None
    t = type(mid)
    if t is _uuid.UUID:
        headers.insert(0, (hkey, "S", b"uuid"))
        return str(mid).encode()
    if t is ULong:
        headers.insert(0, (hkey, "S", b"ulong"))
        return str(int(mid)).encode()
    if t is bytes:
        import base64
        e = base64.b64encode(mid)
        if len(e) > 256:
            headers.insert(0, (hkey.replace(b"-type", b""), "S", mid))
            return None
        headers.insert(0, (hkey, "S", b"binary"))
        return e
    if t is str:
        raw = _bytes(mid)
        if len(raw) > 256:
            headers.insert(0, (hkey.replace(b"-type", b""), "S", raw))
            return None
        return raw
    return _short(mid, "message-id")


def _short(v, what: str) -> bytes:
    """An unwrapped AMQP 1.0 value used as a 0-9-1 short string (RabbitMQ crashes on anything
    but a binary of at most 255 bytes)."""
    if isinstance(v, (str, bytes)) and not isinstance(v, bool):
        raw = _bytes(v)
        if len(raw) <= 255:
            return raw
    raise ConversionError(f"{what} {v!r} cannot be a 0-9-1 short string")


def _octet(v, what: str) -> int:
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255:
        return int(v)
    raise ConversionError(f"{what} {v!r} is not an octet")


def route_of(msg: Message, queue_name: str) -> tuple[str, str]:
    """(exchange, routing key) of a stored message for a 0-9-1 delivery: its annotations
    ``x-exchange`` / ``x-routing-key``, else ``""`` and the queue's name (what the stream
    plugin's messages get: "simulate use of the direct exchange", rabbit_stream_queue.erl).
    Raises :class:`ConversionError` for an annotation that is not a string."""
    ma = msg.message_annotations or {}
    x = ma.get("x-exchange", "")
    rk = ma.get("x-routing-key", queue_name)
    if type(x) is not str or type(rk) is not str:
        raise ConversionError("the annotations x-exchange / x-routing-key are not strings")
    return x, rk


def to_amqp091_v310(data, queue_name: str) -> tuple[str, str, bytes, bytes]:
    """A stored AMQP 1.0 message as RabbitMQ 3.10.8 delivers it to a 0-9-1 consumer of the
    stream (``rabbit_stream_queue:binary_to_msg/2``, ``rabbit_msg_record:to_amqp091/1``):
    ``(exchange, routing key, properties bytes, body)``; headers sorted, no ``x-stream-offset``.

    Raises :class:`ConversionError` where RabbitMQ 3.10 crashes (the consumer's connection is
    closed with 541): a section other than message annotations, properties, application
    properties and data; no data section; an application property of a type 0-9-1 has no
    tag for (symbol, ulong, list, map, array, uuid, char); an annotation of the wrong type."""
    try:
        msg = decode_message(data)
    except DecodeError as e:
        raise ConversionError(f"not an AMQP 1.0 message: {e}") from None
    if (msg.header is not None or msg.delivery_annotations is not None or msg.footer is not None
            or msg.body_type != BODY_DATA):
        raise ConversionError("RabbitMQ 3.10 reads back only message annotations, properties, application "
                              "properties and data sections (rabbit_msg_record:decode/2)")
    body = msg.body if isinstance(msg.body, bytes) else msg.body[-1]   # the last data section wins
    exchange, rk = route_of(msg, queue_name)
    return exchange, rk, properties_v310(msg), body


def properties_v310(msg: Message) -> bytes:
    """The 0-9-1 properties bytes of :func:`to_amqp091_v310` (sorted headers, no offset)."""
    p = msg.properties or Properties()
    ap = dict(msg.application_properties or {})
    ma = msg.message_annotations or {}
    typ = _take_utf8_key(ap, "x-basic-type")
    app_id = _take_utf8_key(ap, "x-basic-app-id")
    priority = ma.get("x-basic-priority")
    dmode = ma.get("x-basic-delivery-mode")
    expiration = ma.get("x-basic-expiration")
    headers = []
    for k, v in ap.items():
        if not isinstance(k, str):
            raise ConversionError(f"application property key {k!r} is not a string")
        tag, val = _to_091_v310(v)
        headers.append((_bytes(k), tag, val))
    mid = _message_id_v310(p.message_id, b"x-message-id-type", headers)
    cid = _message_id_v310(p.correlation_id, b"x-correlation-id-type", headers)
    ts = p.creation_time
    out = {
        "content_type": None if p.content_type is None else _short(p.content_type, "content-type"),
        "content_encoding": None if p.content_encoding is None else _short(p.content_encoding, "content-encoding"),
        "headers": sorted(headers, key=_key) if headers else None,
        "delivery_mode": None if dmode is None else _octet(dmode, "x-basic-delivery-mode"),
        "priority": None if priority is None else _octet(priority, "x-basic-priority"),
        "correlation_id": cid,
        "reply_to": None if p.reply_to is None else _short(p.reply_to, "reply-to"),
        "expiration": None if expiration is None else _short(expiration, "x-basic-expiration"),
        "message_id": mid,
        "timestamp": None if ts is None else _div1000(int(ts)),
        "type": None if typ is None else _short(typ, "x-basic-type"),
        "user_id": None if p.user_id is None else _short(p.user_id, "user-id"),
        "app_id": None if app_id is None else _short(app_id, "x-basic-app-id"),
    }
    if out["timestamp"] is not None and out["timestamp"] < 0:
        raise ConversionError(f"creation-time {ts} before 1970 has no 0-9-1 timestamp")
    try:
        return encode_properties(out)
    except ValueError as e:
        raise ConversionError(str(e)) from None


def _key(h):
    return h[0]


def _take_utf8_key(ap: dict, key: str):
    """``lists:keytake({utf8, Key}, 1, AP)`` then unwrap: the value of string key ``key`` (not a
    symbol key), removed from ``ap``; None when absent."""
    for k in ap:
        if k == key and type(k) is str:
            return ap.pop(k)
    return None


# ================================================================== RabbitMQ 4.3.5

def _is_utf8_no_null_limited(b: bytes) -> bool:
    """``mc_util:is_utf8_no_null_limited/1``: valid UTF-8 without NUL, at most 4096 bytes."""
    if len(b) > 4096 or b"\x00" in b:
        return False
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _from_091_v43(tag: str, v):
    """``mc_amqpl:from_091/2``."""
    if tag == "S":
        return _str(v) if _is_utf8_no_null_limited(v) else bytes(v)
    if tag == "A":
        return [_from_091_v43(t, x) for t, x in v]
    if tag == "F":
        return {Symbol(_str(k)): _from_091_v43(t, x) for k, t, x in v}
    return _from_091_v310(tag, v)


def _urn_to_uuid(b: bytes | None):
    """``mc_util:urn_string_to_uuid/1``: the UUID of ``urn:uuid:`` + 36 characters, else None."""
    if b is None or len(b) != 45 or not b.startswith(b"urn:uuid:"):
        return None
    try:
        return _uuid.UUID(b[9:].decode("ascii"))
    except ValueError:
        return None


def _amqp10_section_header(headers, name: bytes):
    for k, tag, v in headers:
        if k == name:
            if tag in ("S", "x"):
                try:
                    val, _ = decode_value(v)
                except DecodeError as e:
                    raise ConversionError(f"header {name.decode()}: {e}") from None
                return val
            return None
    return None


def from_amqp091_v43(exchange: str, routing_key: str, props_raw, body) -> bytes:
    """The AMQP 1.0 message RabbitMQ 4.3.5 stores for a 0-9-1 message published to a stream
    (``mc_amqpl:convert_to/3`` to ``mc_amqp``, then ``mc_amqp:protocol_state/2`` with the
    message's annotations): a header (durable, priority, ttl from the expiration,
    first-acquirer true, delivery-count 0), message annotations (``x-routing-key``,
    ``x-exchange``, ``x-basic-type``, the ``x-`` headers, ``CC`` as ``x-cc``), properties
    (message-id / correlation-id as UUIDs when they are ``urn:uuid:`` strings, reply-to as
    ``/queues/<name>``, app-id as group-id), application properties (the other headers but
    arrays and tables), the body (one data section; the decoded sections of a body of type
    ``amqp-1.0``). The ``x-amqp-1.0-*`` headers replace the sections they name.

    Raises :class:`ConversionError` for a decimal header value (RabbitMQ 4.3's conversion
    crashes on it)."""
    p = parse_properties(props_raw)
    prefix, tail = _sections_v43(exchange, routing_key, p, body)
    if tail is None:
        return prefix + DATA_SECTION_HEAD(len(body)) + bytes(body)
    return prefix + tail


def prefix_v43(exchange: str, routing_key: str, props_raw):
    """The sections before the data section of :func:`from_amqp091_v43`, or None when the
    body is not one plain data section (type ``amqp-1.0``, or an ``x-amqp-1.0-footer``)."""
    p = parse_properties(props_raw)
    prefix, tail = _sections_v43(exchange, routing_key, p, None)
    return prefix if tail is None else None


def _sections_v43(exchange, routing_key, p: dict, body):
    headers = p.get("headers") or []
    dmode = p.get("delivery_mode")
    priority = p.get("priority")
    expiration = p.get("expiration")
    ttl = None
    if expiration is not None:
        try:
            ttl = UInt(int(expiration))
        except ValueError:
            raise ConversionError(f"expiration {expiration!r} is not an integer") from None
    header = Header(durable=dmode == 2, priority=None if priority is None else UByte(priority), ttl=ttl,
                    first_acquirer=True, delivery_count=UInt(0))
    props = _amqp10_section_header(headers, b"x-amqp-1.0-properties")
    if isinstance(props, Described) and isinstance(props.value, list):
        properties = Properties.from_list(props.value)
    else:
        reply_to = p.get("reply_to")
        cid = p.get("correlation_id")
        mid = p.get("message_id")
        ts = p.get("timestamp")
        properties = Properties(
            message_id=_urn_to_uuid(mid) or _opt_str(mid), user_id=p.get("user_id"),
            reply_to=None if reply_to is None else "/queues/" + quote(_str(reply_to), safe="~"),
            correlation_id=_urn_to_uuid(cid) or _opt_str(cid),
            content_type=_opt_sym(p.get("content_type")), content_encoding=_opt_sym(p.get("content_encoding")),
            creation_time=None if ts is None else Timestamp(ts * 1000),
            group_id=_opt_str(p.get("app_id")))
    aps = _amqp10_section_header(headers, b"x-amqp-1.0-app-properties")
    if isinstance(aps, Described) and isinstance(aps.value, dict):
        ap = aps.value
    else:
        ap = {}
        for k, tag, v in headers:
            if tag in ("A", "F") or k.startswith(b"x-"):
                continue
            ap[_str(k)] = _from_091_v43(tag, v)
    mas = _amqp10_section_header(headers, b"x-amqp-1.0-message-annotations")
    if isinstance(mas, Described) and isinstance(mas.value, dict):
        ma0 = dict(mas.value)
    else:
        ma0 = {}
        for k, tag, v in headers:
            if k.startswith(b"x-"):
                ma0[Symbol(_str(k))] = _from_091_v43(tag, v)
            elif k == b"CC" and tag == "A":
                ma0[Symbol("x-cc")] = _from_091_v43(tag, v)
        if p.get("type") is not None:
            ma0 = {Symbol("x-basic-type"): _str(p["type"]), **ma0}
    # mc_amqp:protocol_state_message_annotations/2: the exchange and routing key annotations
    # replace any the message had, in front of the others
    ma = {Symbol("x-routing-key"): routing_key, Symbol("x-exchange"): exchange}
    for k, v in ma0.items():
        if k not in ("x-exchange", "x-routing-key"):
            ma[k] = v
    msg = Message(b"", header=header, message_annotations=ma, properties=properties,
                  application_properties=ap)
    prefix = encode_message(msg)[:-5]
    footer = _amqp10_section_header(headers, b"x-amqp-1.0-footer")
    if p.get("type") == b"amqp-1.0" or isinstance(footer, Described):
        if body is None:
            return prefix, b""
        tail = bytearray()
        if p.get("type") == b"amqp-1.0":
            try:
                inner = decode_message(body) if body else None
            except DecodeError as e:
                raise ConversionError(f"a body of type amqp-1.0 that is not AMQP 1.0 sections: {e}") from None
            if inner is not None:
                m = Message(inner.body, body_type=inner.body_type)
                tail += encode_message(m)
        else:
            tail += DATA_SECTION_HEAD(len(body)) + bytes(body)
        if isinstance(footer, Described) and isinstance(footer.value, dict) and footer.value:
            tail += encode_message(Message(b"", footer=footer.value))[5:]
        return prefix, bytes(tail)
    return prefix, None


def _to_091_v43(v):
    """``mc_amqpl:to_091/2``: (tag, value) of an AMQP 1.0 value, or None (dropped)."""
    t = type(v)
    if t is str or t is Symbol:
        return "S", _bytes(v)
    if t is ULong:
        return "l", int(v)
    if t is bytes:
        return "S", v
    if t is list or t is Array:
        return "A", [x for x in (_to_091_v43(e) for e in v) if x is not None]
    if t is dict:
        out = []
        for k, x in v.items():
            tv = _to_091_v43(x)
            if tv is not None and isinstance(k, (str, bytes)):
                out.append((_bytes(k), tv[0], tv[1]))
        return "F", out
    if t in _TO_091:
        return _to_091_v310(v)
    raise ConversionError(f"a value of AMQP type {_amqp_type(v)} has no 0-9-1 conversion in "
                          f"RabbitMQ 4.3 (mc_amqpl:to_091/2)")


_INTERNAL = (b"x-routing-key", b"x-exchange", b"x-death")


def _unwrap_shortstr(v):
    if type(v) is str:
        raw = _bytes(v)
        if len(raw) < 256:
            return raw
    return None


def to_amqp091_v43(data, queue_name: str) -> tuple[str, str, bytes, bytes]:
    """A stored AMQP 1.0 message as RabbitMQ 4.3.5 delivers it to a 0-9-1 consumer of the
    stream (``mc_amqp:init_from_stream/2``, ``mc_amqpl:convert_from/3`` and
    ``protocol_state/2``): ``(exchange, routing key, properties bytes, body)``, headers sorted
    and deduplicated, no ``x-stream-offset``. A body of data sections is their bytes joined;
    any other body is the encoded body and footer sections, with type ``amqp-1.0``.

    Raises :class:`ConversionError` for a value 4.3 cannot convert (uuid or char application
    properties) or bytes that are not an AMQP 1.0 message."""
    try:
        msg = decode_message(data)
    except DecodeError as e:
        raise ConversionError(f"not an AMQP 1.0 message: {e}") from None
    exchange, rk = route_of(msg, queue_name)
    return exchange, rk, properties_v43(msg, data), body_v43(msg, data)


def body_v43(msg: Message, data) -> bytes:
    """The 0-9-1 body of a stored message (4.3): data sections joined, else the encoded body
    and footer sections."""
    if msg.body_type == BODY_DATA:
        return msg.body if isinstance(msg.body, bytes) else b"".join(msg.body)
    from .message import scan_sections
    secs = scan_sections(data)
    start = next(s for code, s, _, _ in secs if code >= DATA)
    return bytes(data[start:])


def properties_v43(msg: Message, data=None) -> bytes:
    """The 0-9-1 properties bytes of :func:`to_amqp091_v43` (sorted headers, no offset)."""
    h = msg.header
    ma = msg.message_annotations or {}
    p = msg.properties or Properties()
    ap = msg.application_properties or {}
    # DelMode, Priority, Expiration: the header first, else the x-basic-* annotations
    if h is not None and h.durable is True:
        dmode = 2
    elif h is not None and h.durable is False:
        dmode = 1
    else:
        dmode = ma.get("x-basic-delivery-mode")
    if h is not None and h.priority is not None:
        priority = h.priority
    else:
        priority = ma.get("x-basic-priority")
    if h is not None and h.ttl is not None:
        expiration = str(int(h.ttl)).encode()
    else:
        expiration = ma.get("x-basic-expiration")
    typ = "amqp-1.0" if msg.body_type != BODY_DATA else ma.get("x-basic-type")
    headers = []
    for k, v in ap.items():
        if type(k) is not str or len(_bytes(k)) >= 256:
            continue
        headers.append((_bytes(k), *_to_091_v43(v)))
    xheaders = []
    for k, v in ma.items():
        kb = _bytes(k)
        if kb == b"x-cc":
            xheaders.append((b"CC", *_to_091_v43(v)))
        elif kb == b"x-opt-rabbitmq-received-time" and type(v) is Timestamp:
            xheaders.append((b"timestamp_in_ms", "l", int(v)))
        elif kb == b"x-opt-deaths":
            continue
        elif kb.startswith(b"x-") and len(kb) < 256 and type(k) is Symbol:
            if kb.startswith(b"x-basic-") or kb in _INTERNAL:
                continue
            xheaders.append((kb, *_to_091_v43(v)))
    mid = _message_id_v43(p.message_id, b"x-message-id", headers)
    cid = _message_id_v43(p.correlation_id, b"x-correlation-id", headers)
    user_id = p.user_id
    if user_id is not None:
        try:
            ok = len(user_id) < 256 and b"\x00" not in user_id and user_id.decode("utf-8") is not None
        except UnicodeDecodeError:
            ok = False
        if not ok:
            user_id = None
    reply_to = _unwrap_shortstr(p.reply_to)
    if reply_to is not None and reply_to.startswith(b"/queues/"):
        try:
            reply_to = _cow_urldecode(reply_to[8:])
        except ValueError:
            reply_to = None
    ts = p.creation_time
    # mc_amqpl:protocol_state/2: x-stream-offset (added per delivery) joins the headers, which
    # are then sorted by name with duplicates dropped (the first of a name stays)
    allh = xheaders + headers
    uniq: dict = {}
    for k, tag, v in allh:
        if k not in uniq:
            uniq[k] = (k, tag, v)
    hs = sorted(uniq.values(), key=_key)
    # annotations the message had decide delivery mode / priority / expiration when unset
    # (protocol_state/2): durable (header, else x-basic-delivery-mode 2) -> 2 when unset
    if dmode is None:
        durable = (h.durable if h is not None and isinstance(h.durable, bool)
                   else ma.get("x-basic-delivery-mode") == 2)
        dmode = 2 if durable else None
    out = {
        "content_type": None if p.content_type is None else _short(p.content_type, "content-type"),
        "content_encoding": None if p.content_encoding is None else _short(p.content_encoding, "content-encoding"),
        "headers": hs or None,
        "delivery_mode": None if dmode is None else _octet(dmode, "delivery mode"),
        "priority": None if priority is None else _octet(priority, "priority"),
        "correlation_id": cid,
        "reply_to": reply_to,
        "expiration": None if expiration is None else _short(expiration, "expiration"),
        "message_id": mid,
        "timestamp": None if ts is None else _div1000(int(ts)),
        "type": None if typ is None else _short(typ, "x-basic-type"),
        "user_id": user_id,
        "app_id": _unwrap_shortstr(p.group_id),
    }
    if out["timestamp"] is not None and out["timestamp"] < 0:
        raise ConversionError(f"creation-time {ts} before 1970 has no 0-9-1 timestamp")
    try:
        return encode_properties(out)
    except ValueError as e:
        raise ConversionError(str(e)) from None


def _cow_urldecode(b: bytes) -> bytes:
    """``cow_uri:urldecode/1``: percent-decoding; a bad escape raises ValueError."""
    i = b.find(b"%")
    while i >= 0:
        h = b[i + 1:i + 3]
        if len(h) != 2 or not all(c in b"0123456789abcdefABCDEF" for c in h):
            raise ValueError("bad percent escape")
        i = b.find(b"%", i + 3)
    return unquote_to_bytes(b)


def _message_id_v43(mid, hkey: bytes, headers: list):
    """``mc_amqpl:message_id/3``."""
    if mid is None:
        return None
    t = type(mid)
    if t is _uuid.UUID:
        return f"urn:uuid:{mid}".encode()
    if t is ULong:
        return str(int(mid)).encode()
    if t is bytes:
        headers.insert(0, (hkey, "x", mid))
        return None
    if t is str:
        raw = _bytes(mid)
        if len(raw) < 256:
            return raw
        headers.insert(0, (hkey, "S", raw))
        return None
    raise ConversionError(f"message-id of AMQP type {_amqp_type(mid)}")
