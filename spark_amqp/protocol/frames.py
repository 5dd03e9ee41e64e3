"""AMQP 0-9-1 framing: encode frames, and an incremental sans-IO decoder.

Wire format (0-9-1 spec §4.2.3; frame-end value from [002]):
``type:octet channel:short size:long payload[size] frame-end:octet(0xCE)``.
Frame types: 1 method, 2 content header, 3 content body, 8 heartbeat.
A content method (basic.publish/deliver/get-ok/return) is followed on the same channel by one
content header frame and as many body frames as needed for ``body_size`` bytes; each body
frame payload is at most ``frame_max - 8`` bytes.

:class:`Decoder` takes bytes in chunks of any size and returns events:
:class:`MethodFrame` for methods without content, :class:`ContentMessage` for a complete
method + header + body, :class:`Heartbeat`, and (when constructed with
``expect_protocol_header=True``, i.e. in the server role) a :class:`ProtocolHeader` first.
For channels in :attr:`Decoder.raw_channels`, runs of complete basic.deliver messages come out
undecoded as one :class:`~.raw_deliveries.RawDeliveries` event each (see that module).
Memory is bounded: a frame header announcing more than ``frame_max`` is rejected before its
payload is buffered, and a content body is bounded by ``max_body_size``.
"""

from __future__ import annotations

import struct
from array import array
from typing import Any, Iterable

from .errors import (AMQPError, BodyTooLarge, ChannelErrorCode, CommandInvalid, FrameError,
                     UnexpectedFrame)
from .properties import (_DECODERS, SPEEDUPS, BasicProperties, decode_properties,
                         properties_decoder)
from .raw_publish import PUBLISH_INDEX as _PUBLISH_INDEX
from .raw_publish import RawPublish, basic_header_at, scan_publish
from .spec import METHODS, Basic, Method

__all__ = [
    "FRAME_METHOD", "FRAME_HEADER", "FRAME_BODY", "FRAME_HEARTBEAT", "FRAME_END",
    "FRAME_MIN_SIZE", "PROTOCOL_HEADER", "MethodFrame", "ContentMessage", "Heartbeat",
    "ProtocolHeader", "Decoder", "encode_method", "encode_message", "encode_heartbeat",
    "parse_protocol_header", "HEARTBEAT_FRAME", "OversizedContent", "RawPublish",
    "RawDeliveries", "scan_deliveries", "decode_frames", "DELIVER_INDEX",
]

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_END = 0xCE
FRAME_END_BYTE = b"\xce"
FRAME_MIN_SIZE = 4096
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
HEARTBEAT_FRAME = b"\x08\x00\x00\x00\x00\x00\x00\xce"
DEFAULT_MAX_BODY_SIZE = 512 * 1024 * 1024  # RabbitMQ's max_message_size ceiling (512 MiB)

_FRAME_HDR = struct.Struct(">BHI")
_HDR_FIELDS = struct.Struct(">HHQ")
_new = object.__new__
_frame_hdr_pack = _FRAME_HDR.pack
_frame_hdr_unpack = _FRAME_HDR.unpack_from
_frame_ids_unpack = struct.Struct(">BHII").unpack_from  # frame header + method index
END_HEADER_HEAD = struct.Struct(">BBHIHHQ").pack  # frame-end + content header frame start
END_BODY_HEAD = struct.Struct(">BBHI").pack          # frame-end + body frame header
# (both also used by protocol/publish.py, the client's publish encoder)
_HEADER_AT = struct.Struct(">BHIHHQH").unpack_from    # header frame: type..property flags
_END_BODY_AT = struct.Struct(">BBHI").unpack_from     # frame-end + body frame header


# --------------------------------------------------------------------------------- events

class MethodFrame:
    """A method without content, received on ``channel``."""

    __slots__ = ("channel", "method")

    def __init__(self, channel: int, method: Method):
        self.channel = channel
        self.method = method

    def __repr__(self) -> str:
        return f"MethodFrame(channel={self.channel}, method={self.method!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, MethodFrame) and self.channel == other.channel
                and self.method == other.method)


class ContentMessage:
    """A complete content-bearing method: method + properties + body (bytes)."""

    __slots__ = ("channel", "method", "properties", "body")

    def __init__(self, channel: int, method: Method, properties: BasicProperties, body: bytes):
        self.channel = channel
        self.method = method
        self.properties = properties
        self.body = body

    def __repr__(self) -> str:
        return (f"ContentMessage(channel={self.channel}, method={self.method!r}, "
                f"properties={self.properties!r}, body={self.body[:32]!r}{'...' if len(self.body) > 32 else ''})")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ContentMessage) and self.channel == other.channel
                and self.method == other.method and self.properties == other.properties
                and self.body == other.body)


class Heartbeat:
    """A heartbeat frame (type 8, channel 0)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Heartbeat()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Heartbeat)

    def __hash__(self) -> int:
        return 8


_HEARTBEAT = Heartbeat()  # immutable: one shared instance


# ------------------------------------------------------------------ raw delivery runs
# (described in :mod:`.raw_deliveries`, which re-exports them: they live here, next to the
# decoder that cuts them and that decodes them again, so that no import goes both ways)

#: (class id << 16) | method id of basic.deliver (60, 60)
DELIVER_INDEX = (60 << 16) | 60
_IDS = struct.Struct(">BHII").unpack_from           # frame header + method index
_FRAME = struct.Struct(">BHI").unpack_from          # type, channel, size
_TAG = struct.Struct(">Q").unpack_from
_ENDS = "I"  # array typecode of RawDeliveries.ends (message end offsets, < 4 GiB per run)


class RawDeliveries:
    """A run of ``count`` complete basic.deliver messages received on ``channel``.

    Attributes:
        channel: int, the channel they arrived on (their delivery tags are scoped to it).
        data: bytes, the messages' frames exactly as received (method, header, body frames).
        first_tag: int, delivery tag of the first message; message ``i`` has ``first_tag + i``.
        count: int, number of messages (>= 1).
        ends: ``array('I')`` of ``count`` offsets into ``data``: message ``i`` is
            ``data[ends[i-1]:ends[i]]`` (``ends[-1] == len(data)``).

    ``method`` is a basic.deliver instance standing for the run when the connection's state
    machine validates it (it only looks at the method's class and index).
    """

    __slots__ = ("channel", "data", "first_tag", "count", "ends")

    method = Basic.Deliver("", 0, False, "", "")

    def __init__(self, channel: int, data: bytes, first_tag: int, count: int, ends: Any):
        self.channel = channel
        self.data = data
        self.first_tag = first_tag
        self.count = count
        self.ends = ends

    @property
    def last_tag(self) -> int:
        """Delivery tag of the last message of the run."""
        return self.first_tag + self.count - 1

    def frames(self, lo: int, hi: int) -> bytes:
        """The frames of messages ``lo .. hi-1`` of the run (0 <= lo <= hi <= count)."""
        if not 0 <= lo <= hi <= self.count:
            raise IndexError(f"messages [{lo}, {hi}) are outside the run of {self.count}")
        a = self.ends[lo - 1] if lo else 0
        b = self.ends[hi - 1] if hi else 0
        if a == 0 and b == len(self.data):
            return self.data
        return self.data[a:b]

    def head(self, k: int) -> "RawDeliveries":
        """The run of its first ``k`` messages (1 <= k <= count; ``self`` when k == count)."""
        if k == self.count:
            return self
        if not 1 <= k < self.count:
            raise IndexError(f"a head of {k} messages of a run of {self.count}")
        return RawDeliveries(self.channel, self.data[:self.ends[k - 1]], self.first_tag, k,
                             self.ends[:k])

    def decode(self) -> list:
        """The run's messages as :class:`.ContentMessage` events (see
        :func:`decode_frames`)."""
        return decode_frames(self.data, self.count)

    def __repr__(self) -> str:
        return (f"RawDeliveries(channel={self.channel}, count={self.count}, "
                f"tags={self.first_tag}..{self.last_tag}, bytes={len(self.data)})")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, RawDeliveries) and self.channel == other.channel
                and self.data == other.data and self.first_tag == other.first_tag
                and self.count == other.count and list(self.ends) == list(other.ends))


def decode_frames(data: bytes, expect: int | None = None) -> list:
    """Decode the frames of complete content messages (e.g. slices of
    :attr:`RawDeliveries.data`) into :class:`.ContentMessage` events, in order.

    ``expect``: the number of messages the bytes must hold (None: any). Raises the typed
    :class:`~.errors.AMQPError` of the decoder for malformed frames or properties, and
    ``ValueError`` when the bytes end inside a message or hold another number of messages or
    anything but content messages.
    """
    # no body limit here: the scan that cut these frames applied the connection's own
    dec = Decoder(frame_max=0, max_body_size=(1 << 64) - 1)
    events = dec.feed(data)
    if dec.buffered or dec.pending_channels():
        raise ValueError(f"the frames end inside a message ({dec.buffered} bytes undecoded)")
    if any(e.__class__ is not ContentMessage for e in events):
        raise ValueError("the frames hold something other than content messages")
    if expect is not None and len(events) != expect:
        raise ValueError(f"the frames hold {len(events)} messages, expected {expect}")
    return events


def _ascii_shortstr_end(buf: bytes, i: int, end: int) -> int:
    """Offset after the ASCII shortstr at ``buf[i]`` (within ``end``), or -1."""
    if i >= end:
        return -1
    k = buf[i]
    if i + 1 + k > end or not buf[i + 1:i + 1 + k].isascii():
        return -1
    return i + 1 + k


def _one(buf: bytes, p: int, n: int, channel: int, fmax8: int, max_body: int):
    """(delivery tag, end offset) of one complete, well-formed basic.deliver message at
    ``buf[p:n]`` on ``channel``, or None (see the module doc for what is checked)."""
    if n - p < 11:
        return None
    ftype, ch, size, index = _IDS(buf, p)
    if ftype != 1 or ch != channel or index != DELIVER_INDEX or size > fmax8:
        return None
    mend = p + 7 + size
    if mend >= n or buf[mend] != 206:
        return None
    # consumer-tag shortstr, delivery-tag longlong, redelivered bit, exchange and routing-key
    # shortstrs (§1.8.3.9), filling the frame exactly; the strings ASCII (else: general path,
    # which validates UTF-8)
    i = _ascii_shortstr_end(buf, p + 11, mend)
    if i < 0 or i + 9 >= mend:
        return None
    tag = _TAG(buf, i)[0]
    i = _ascii_shortstr_end(buf, i + 9, mend)
    if i >= 0:
        i = _ascii_shortstr_end(buf, i, mend)
    if i != mend:
        return None
    r = basic_header_at(buf, mend + 1, n, channel, fmax8, max_body)
    if r is None:
        return None
    hend, body_size = r
    q = hend + 1
    got = 0
    while got < body_size:
        if n - q < 7:
            return None
        btype, bch, bsize = _FRAME(buf, q)
        bend = q + 7 + bsize
        if (btype != 3 or bch != channel or bsize > fmax8 or got + bsize > body_size
                or bend >= n or buf[bend] != 206):
            return None
        got += bsize
        q = bend + 1
    return tag, q


def scan_deliveries(buf: bytes, pos: int, n: int, channel: int, fmax8: int,
                    max_body: int) -> tuple[RawDeliveries, int] | None:
    """Cut a run of complete basic.deliver messages on ``channel`` from ``buf[pos:n]``.

    ``pos`` is the start of a method frame. ``fmax8``: the largest frame payload accepted
    (frame-max - 8); ``max_body``: the largest body accepted (bytes). Returns
    ``(RawDeliveries, offset after the run)``, or None when not even the first message is
    complete and well formed there (the caller decodes it the general way).
    """
    ends = array(_ENDS)
    first = expect = 0
    p = pos
    while True:
        r = _one(buf, p, n, channel, fmax8, max_body)
        if r is None:
            break
        tag, q = r
        if ends:
            if tag != expect:
                break
        else:
            first = tag
        expect = tag + 1
        p = q
        ends.append(p - pos)
    if not ends:
        return None
    return RawDeliveries(channel, buf[pos:p], first, len(ends), ends), p




def _bind(speedups) -> None:
    """Give the compiled twin (``_frames.pyx``) this module's classes and fallbacks."""
    speedups.bind_frames(ContentMessage, METHODS, RawDeliveries, scan_deliveries)


def _content_fast(speedups):
    """The compiled fast path of :meth:`Decoder._parse` for a content header and body
    (``_frames.content_after_method``), or ``None`` for pure Python."""
    if speedups is None:
        return None
    _bind(speedups)
    return speedups.content_after_method


_CONTENT_FAST = _content_fast(SPEEDUPS)


def _scan_fast(speedups):
    """The compiled :func:`scan_deliveries` (``_frames.scan_deliveries``), or the pure-Python
    one."""
    if speedups is None:
        return scan_deliveries
    _bind(speedups)
    return speedups.scan_deliveries


_SCAN_DELIVERIES = _scan_fast(SPEEDUPS)


def _message_fast(speedups):
    """The compiled step of :meth:`Decoder._parse` for a whole content message
    (``_frames.content_messages``), or ``None`` for pure Python."""
    if speedups is None:
        return None
    _bind(speedups)
    return speedups.content_messages


_MESSAGE_FAST = _message_fast(SPEEDUPS)


def _encode_fast(speedups):
    """The compiled common case of :func:`encode_message` (``_frames.encode_content``), or
    ``None`` for pure Python."""
    return getattr(speedups, "encode_content", None) if speedups is not None else None


_ENCODE_FAST = _encode_fast(SPEEDUPS)

class ProtocolHeader:
    """The 8-byte protocol header a client sends first.

    ``version`` is ``"0-9-1"`` (``AMQP 0 0 9 1``), ``"0-9"`` (``AMQP 1 1 0 9``, also the
    AMQP/Fast 0.9a0 header of seed 003), ``"0-8"`` (``AMQP 1 1 8 0`` or the ``AMQP 1 1 9 1``
    spelled by the 0-8 document, seed 001), ``"1.0"`` (``AMQP x 1 0 0``) or ``None`` when the
    bytes are not an AMQP header at all. A server supporting only 0-9-1 answers anything but
    0-9-1 by writing :data:`PROTOCOL_HEADER` and closing (0-9-1 spec §4.2.2).
    """

    __slots__ = ("raw",)

    def __init__(self, raw: bytes):
        self.raw = bytes(raw)

    @property
    def version(self) -> str | None:
        r = self.raw
        if len(r) != 8 or r[:4] != b"AMQP":
            return None
        tail = tuple(r[4:])
        if tail == (0, 0, 9, 1):
            return "0-9-1"
        if tail == (1, 1, 0, 9):
            return "0-9"
        if tail in ((1, 1, 8, 0), (1, 1, 9, 1)):
            return "0-8"
        if tail[1:] == (1, 0, 0):
            return "1.0"
        return "unknown"

    @property
    def is_supported(self) -> bool:
        """True for 0-9-1 and for the 0-9 header ``AMQP 1 1 0 9``, which RabbitMQ 3.10 also
        answers with a 0-9-1 ``connection.start`` (checked on the real broker); 0-8, 1.0 and
        anything else are answered with :data:`PROTOCOL_HEADER` and a close."""
        return self.version in ("0-9-1", "0-9")

    def __repr__(self) -> str:
        return f"ProtocolHeader({self.raw!r}, version={self.version!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProtocolHeader) and self.raw == other.raw


def parse_protocol_header(data: bytes) -> ProtocolHeader:
    """Parse 8 bytes as a protocol header (see :class:`ProtocolHeader`)."""
    return ProtocolHeader(data[:8])


# --------------------------------------------------------------------------------- encode

def encode_method(channel: int, method: Method) -> bytes:
    """Encode one method frame. Returns bytes. Raises AMQPSyntaxError on bad field values."""
    return b"".join((*method.frame_parts(channel), FRAME_END_BYTE))


def encode_heartbeat() -> bytes:
    """The 8-byte heartbeat frame."""
    return HEARTBEAT_FRAME


def encode_message(channel: int, method: Method, properties: BasicProperties | None,
                   body: bytes, frame_max: int = 131072) -> bytes:
    """Encode a content method, its content header and its body frames as one bytes object.

    ``frame_max`` is the negotiated maximum frame size including the 8 bytes of framing
    (0 = no limit); the body is split into frames of at most ``frame_max - 8`` bytes.
    Raises AMQPSyntaxError (502) for unencodable fields, ValueError for a frame_max < 9.
    """
    props = properties.encode() if properties is not None else b"\x00\x00"
    if _ENCODE_FAST is not None and props.__class__ is bytes:
        data = _ENCODE_FAST(channel, method, props, body, frame_max)
        if data is not None:
            return data
    blen = len(body)
    # frame-end octets are packed together with the next frame's header
    mid = END_HEADER_HEAD(0xCE, 2, channel, 12 + len(props), method.CLASS_ID, 0, blen)
    if not blen:
        return b"".join((*method.frame_parts(channel), mid, props, FRAME_END_BYTE))
    if not frame_max or blen <= frame_max - 8:
        return method.message_bytes(channel, mid, props, END_BODY_HEAD(0xCE, 3, channel, blen),
                                    body)
    chunk = frame_max - 8
    if chunk <= 0:
        raise ValueError(f"frame_max {frame_max} leaves no room for a body")
    parts = [*method.frame_parts(channel), mid, props]
    mv = memoryview(body)
    for start in range(0, blen, chunk):
        piece = mv[start:start + chunk]
        parts.append(END_BODY_HEAD(0xCE, 3, channel, len(piece)))
        parts.append(piece)
    parts.append(FRAME_END_BYTE)
    return b"".join(parts)


def encode_frames(frames: Iterable[tuple[int, Method]]) -> bytes:
    """Encode several (channel, method) method frames into one bytes object."""
    return b"".join(encode_method(ch, m) for ch, m in frames)


# --------------------------------------------------------------------------------- decode

class _Pending:
    """Per-channel content being assembled (``parts`` is None while an oversized body is
    read and dropped, see ``Decoder(drop_oversized=True)``)."""

    __slots__ = ("method", "properties", "body_size", "parts", "received")

    def __init__(self, method: Method):
        self.method = method
        self.properties: Any = None
        self.body_size = -1
        self.parts: list[bytes] | None = []
        self.received = 0


class OversizedContent:
    """Event of a ``drop_oversized`` decoder: a content message whose body was above
    ``max_body_size`` was read completely and dropped (RabbitMQ 3.10 reads such a message,
    then closes the channel with 406 PRECONDITION_FAILED, ``rabbit_channel:check_msg_size``).

    Attributes: ``channel`` (int), ``method`` (the content method), ``body_size`` (bytes, as
    the content header announced it)."""

    __slots__ = ("channel", "method", "body_size")

    def __init__(self, channel: int, method: Method, body_size: int):
        self.channel = channel
        self.method = method
        self.body_size = body_size

    def __repr__(self) -> str:
        return (f"OversizedContent(channel={self.channel}, method={self.method!r}, "
                f"body_size={self.body_size})")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, OversizedContent) and self.channel == other.channel
                and self.method == other.method and self.body_size == other.body_size)


def _publish_fast(speedups):
    """The compiled :func:`.raw_publish.scan_publish` (``_raw_publish.scan_publish``), or the
    pure-Python one."""
    if speedups is None:
        return scan_publish
    speedups.bind_raw_publish(RawPublish)
    return speedups.scan_publish


_SCAN_PUBLISH = _publish_fast(SPEEDUPS)


class Decoder:
    """Incremental AMQP 0-9-1 decoder: ``feed(bytes) -> list of events``.

    The one framing path of the package: the client (through
    :class:`~.connection.AMQPConnection` or ``spark_amqp.client``) and the embedded broker
    (``spark_amqp.broker.connection``, server role with ``raw_content``) both split frames
    here, so limits, frame-end checks and reply codes are the same everywhere.

    Args:
        frame_max: the largest frame accepted, framing included (default 131072, RabbitMQ's
            default; before tune, peers must accept 4096). Change it with
            :meth:`set_frame_max` after ``connection.tune`` (also from inside an ``emit``
            callback: it applies from the next frame on); 0 means no limit.
        expect_protocol_header: the server role; the first 8 bytes are a protocol header and
            produce a :class:`ProtocolHeader` event.
        max_body_size: the largest content body accepted (bytes).
        raw_content: keep content headers' property lists undecoded: a basic.publish whose
            header and single body frame are buffered comes out as one
            :class:`~.raw_publish.RawPublish`, any other content message as a
            :class:`ContentMessage` whose ``properties`` is the raw property flags and list
            (bytes). Properties are then not validated here.
        drop_oversized: a body above ``max_body_size`` is read and dropped, and an
            :class:`OversizedContent` event comes out when it is complete, instead of
            :class:`BodyTooLarge` (501) being raised.
        on_content: called as ``on_content(channel, method)`` when a content method frame
            starts a message that is not complete in the buffer (not for
            :class:`~.raw_publish.RawPublish` runs); it may raise a typed error to refuse
            the content method before its header arrives (the broker's 503/504 replies).

    Errors (raised from :meth:`feed`, after which the decoder refuses further input with the
    same error): :class:`FrameError` 501 for a bad frame end, unknown frame type, a frame over
    ``frame_max``, a heartbeat with a payload, truncated or garbled payloads (with the
    class/method ids of the method whose arguments were bad); :class:`UnexpectedFrame` 505
    for content frames out of sequence (with the ids of the content method when one was
    pending, as RabbitMQ 3.10 replies); :class:`CommandInvalid` 503 for unknown class/method
    ids (RabbitMQ 3.10 resets the socket without a reply here; 503 is the spec's "invalid
    command"), :class:`UnexpectedFrame` 505 for a heartbeat on a channel other than 0 (as
    RabbitMQ 3.10 replies); :class:`ChannelErrorCode` 504 for content on channel 0;
    :class:`AMQPSyntaxError` 502 for invalid UTF-8. The events decoded before the error in
    the same :meth:`feed` call are attached to the exception as ``exc.events``.

    Speed: a content method whose header and (single) body frame are already buffered is
    assembled in place, without per-channel state, its properties decoded by the decoder
    generated for the header's property-flags word (:func:`.properties.properties_decoder`);
    other sequences (bodies split over frames, content interleaved across channels, frames
    arriving in pieces) take the general path.
    """

    __slots__ = ("_chunks", "_buffered", "_need", "frame_max", "_pending", "_header_done",
                 "max_body_size", "error", "raw_channels", "raw_content", "drop_oversized",
                 "on_content")

    def __init__(self, frame_max: int = 131072, expect_protocol_header: bool = False,
                 max_body_size: int = DEFAULT_MAX_BODY_SIZE, raw_content: bool = False,
                 drop_oversized: bool = False, on_content=None):
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._need = 8 if expect_protocol_header else 7
        self._header_done = not expect_protocol_header
        self.frame_max = frame_max
        self.max_body_size = max_body_size
        self._pending: dict[int, _Pending] = {}
        self.error: AMQPError | None = None
        #: channels whose basic.deliver messages come out as :class:`.raw_deliveries.RawDeliveries`
        #: runs of undecoded frames where complete and well formed (others: ContentMessage)
        self.raw_channels: set[int] = set()
        self.raw_content = raw_content
        self.drop_oversized = drop_oversized
        self.on_content = on_content

    def set_frame_max(self, frame_max: int) -> None:
        """Apply the negotiated frame-max (bytes, framing included; 0 = no limit)."""
        self.frame_max = frame_max

    @property
    def buffered(self) -> int:
        """Bytes received but not yet decoded into a complete frame."""
        return self._buffered

    def pending_channels(self) -> list[int]:
        """Channels with a content message partly received."""
        return list(self._pending)

    def feed(self, data: bytes, emit=None, emit_method=None) -> list[Any]:
        """Add received bytes; return the events completed by them (possibly none).

        ``data`` may be any bytes-like object of any length. With ``emit`` (a callable),
        each event is passed to ``emit(event)`` as soon as it is decoded, before the next
        frame is looked at, and ``[]`` is returned: the caller can act on a method (open a
        channel, apply a negotiated frame-max) before the frames after it are checked, as a
        server must. With ``emit_method`` too, a method without content is passed as
        ``emit_method(channel, method)`` instead of a :class:`MethodFrame` (no event object:
        the broker's path for acks and the like). An :class:`AMQPError` raised by a callback
        fails the decoder like a decoding error (and propagates); any other exception
        propagates and leaves the decoder unusable.

        Raises the typed errors listed in the class docstring; the events decoded before the
        error from the same call are in ``exc.events`` (``[]`` with ``emit``).
        """
        if self.error is not None:
            raise self.error
        chunks = self._chunks
        if chunks:
            if data:
                # a copy: the caller may reuse its buffer (``recv_into``) before the frame completes
                chunks.append(data if data.__class__ is bytes else bytes(data))
                self._buffered += len(data)
            if self._buffered < self._need:
                return []
            buf = b"".join(chunks)
        else:
            if len(data) < self._need:
                if data:
                    chunks.append(bytes(data))
                    self._buffered = len(data)
                return []
            buf = data if data.__class__ is bytes else bytes(data)
        events: list[Any] = []
        try:
            append = events.append if emit is None else emit
            if self._header_done:
                whole = _MESSAGE_FAST  # None in pure Python: one test
                if (whole is not None and not self._pending and not self.raw_content
                        and not self.raw_channels and self.on_content is None):
                    # the compiled steps for whole content messages, where no per-channel
                    # state or raw mode changes how they decode; the frame loop after them
                    n = len(buf)
                    pos = whole(buf, 0, n, (self.frame_max or (1 << 40)) - 8,
                                self.max_body_size, append)
                    if pos != n:
                        pos = self._parse(buf, append, emit_method, pos)
                    else:
                        self._need = 7  # as _parse leaves it after whole frames
                else:
                    pos = self._parse(buf, append, emit_method)
            else:
                pos = self._parse_header(buf, append, emit_method)
        except AMQPError as exc:
            self.error = exc
            self._chunks = []
            self._buffered = 0
            exc.events = events
            raise
        rest = len(buf) - pos
        if rest:
            self._chunks = [buf[pos:]] if pos else [buf]
            self._buffered = rest
        elif chunks:
            self._chunks = []
            self._buffered = 0
        return events

    def _parse_header(self, buf: bytes, append, emit_method=None) -> int:
        """Server role: the 8-byte protocol header comes first (then frames); ``feed``
        only calls this with at least 8 bytes (``_need`` starts at 8)."""
        header = ProtocolHeader(buf[:8])
        self._header_done = True
        if header.version not in ("0-9-1", "0-9", "0-8"):
            # not a header of the 0-x family: the server answers and closes; nothing after it
            # is parsed (a server may answer 0-8 with a 0-8 connection.start, as RabbitMQ
            # 3.10 does, and the frames that follow are framed alike)
            self._need = 1 << 62
            append(header)
            return len(buf)
        self._need = 7
        append(header)
        if len(buf) < 15:
            return 8
        return 8 + self._parse(buf[8:], append, emit_method)

    def _parse(self, buf: bytes, append, emit_method=None, pos: int = 0) -> int:
        """Decode complete frames from ``buf[pos:]``, passing each event to ``append``; return
        the offset after the last complete frame.

        One loop over the frames; a content method whose header and single body frame are
        already in ``buf`` is assembled in place (the common case) without per-channel state.
        """
        n = len(buf)
        fmax8 = (self.frame_max or (1 << 40)) - 8  # largest payload size accepted
        pending = self._pending
        new = _new
        decoders = _DECODERS
        content_fast = _CONTENT_FAST
        raw_channels = self.raw_channels
        raw_content = self.raw_content
        scan = _SCAN_DELIVERIES
        while n - pos >= 7:
            if n - pos >= 11:  # header and (for a method frame) its class and method ids
                ftype, channel, size, index = _frame_ids_unpack(buf, pos)
            else:  # too short for a whole method frame: `end >= n` or `size < 4` below
                ftype, channel, size = _frame_hdr_unpack(buf, pos)
            end = pos + 7 + size
            if size > fmax8:
                raise FrameError(f"frame of {size + 8} bytes on channel {channel} exceeds frame-max {fmax8 + 8}")
            if end >= n:
                self._need = end + 1 - pos
                return pos
            if buf[end] != 206:
                raise FrameError(f"frame-end octet is 0x{buf[end]:02x}, expected 0xce (type {ftype}, channel {channel}, size {size})")
            start = pos + 7
            pos = end + 1
            if ftype == 1:  # method
                if size < 4:
                    raise FrameError(f"method frame of {size} bytes on channel {channel} is too short for class and method ids")
                if pending and channel in pending:
                    m = pending[channel].method
                    raise UnexpectedFrame(f"method frame on channel {channel} while content for {m.NAME} is incomplete",
                                          m.CLASS_ID, m.METHOD_ID)
                if index == DELIVER_INDEX:
                    if channel and raw_channels and channel in raw_channels:
                        # a raw channel: cut a run of complete deliveries as frames (.raw_deliveries)
                        r = scan(buf, start - 7, n, channel, fmax8, self.max_body_size)
                        if r is not None:
                            ev, pos = r
                            append(ev)
                            continue
                elif index == _PUBLISH_INDEX and raw_content and channel:
                    # server role: a whole publish in the buffer, properties kept raw (.raw_publish)
                    r = _SCAN_PUBLISH(buf, start + 4, end, n, channel, fmax8, self.max_body_size)
                    if r is not None:
                        ev, pos = r
                        append(ev)
                        continue
                cls = METHODS.get(index)
                if cls is None:
                    raise CommandInvalid(f"unknown method: class {index >> 16}, method {index & 0xFFFF}",
                                         index >> 16, index & 0xFFFF)
                try:
                    method = cls.decode(buf, start + 4, end)
                except AMQPError as exc:
                    if not exc.class_id:
                        exc.class_id, exc.method_id = cls.CLASS_ID, cls.METHOD_ID
                    raise
                if not cls.has_content:
                    if emit_method is None:
                        ev = new(MethodFrame)
                        ev.channel = channel
                        ev.method = method
                        append(ev)
                    else:
                        emit_method(channel, method)
                    if not channel:  # connection.tune-ok may have changed the frame-max
                        fmax8 = (self.frame_max or (1 << 40)) - 8
                    continue
                if self.on_content is not None:
                    self.on_content(channel, method)
                if not channel:
                    raise ChannelErrorCode(f"{cls.NAME} on channel 0", cls.CLASS_ID, cls.METHOD_ID)
                # Fast path: header (and a single body frame) already in the buffer, on the
                # same channel, well formed: decode them here without per-channel state.
                # Anything unusual falls through to the general frame-by-frame path below.
                if n - pos >= 21 and not raw_content:
                    if content_fast is not None:  # the compiled fast path (same checks)
                        r = content_fast(buf, pos, n, channel, method, cls.CLASS_ID, fmax8,
                                         self.max_body_size)
                        if r is not None:
                            ev, pos = r
                            append(ev)
                            continue
                    htype, hch, hsize, class_id, weight, body_size, flags = _HEADER_AT(buf, pos)
                    hend = pos + 7 + hsize
                    if (htype == 2 and hch == channel and hend < n and class_id == cls.CLASS_ID
                            and 14 <= hsize <= fmax8 and not weight and buf[hend] == 206
                            and body_size <= self.max_body_size):
                        props = (decoders.get(flags) or properties_decoder(flags))(buf, pos + 19, hend)
                        pos = hend + 1
                        ev = new(ContentMessage)
                        ev.channel = channel
                        ev.method = method
                        ev.properties = props
                        if not body_size:
                            ev.body = b""
                            append(ev)
                            continue
                        bend = hend + 8 + body_size
                        if bend < n and body_size <= fmax8:
                            _, btype, bch, bsize = _END_BODY_AT(buf, hend)
                            if btype == 3 and bch == channel and bsize == body_size and buf[bend] == 206:
                                pos = bend + 1
                                ev.body = buf[hend + 8:bend]
                                append(ev)
                                continue
                        p = pending[channel] = _Pending(method)
                        p.properties = props
                        p.body_size = body_size
                        continue
                pending[channel] = _Pending(method)
                continue
            if ftype == 3:  # body
                p = pending.get(channel)
                if p is None:
                    raise UnexpectedFrame(f"content body frame on channel {channel} without a content method before it")
                if p.body_size < 0:
                    raise UnexpectedFrame(f"content body frame on channel {channel} instead of the content header",
                                          p.method.CLASS_ID, p.method.METHOD_ID)
                if size:
                    if p.parts is not None:
                        p.parts.append(buf[start:end])
                    p.received += size
                if p.received >= p.body_size:
                    if p.received > p.body_size:
                        raise UnexpectedFrame(f"content body on channel {channel} is {p.received} bytes, longer than the {p.body_size} announced",
                                              p.method.CLASS_ID, p.method.METHOD_ID)
                    del pending[channel]
                    parts = p.parts
                    if parts is None:
                        append(OversizedContent(channel, p.method, p.body_size))
                    else:
                        append(ContentMessage(channel, p.method, p.properties,
                                              parts[0] if len(parts) == 1 else b"".join(parts)))
                continue
            if ftype == 2:  # content header
                p = pending.get(channel)
                if p is None or p.body_size >= 0:
                    raise UnexpectedFrame(f"content header frame on channel {channel} without a content method before it")
                if size < 14:
                    raise FrameError(f"content header frame of {size} bytes on channel {channel} is too short")
                class_id, weight, body_size = _HDR_FIELDS.unpack_from(buf, start)
                if class_id != p.method.CLASS_ID:
                    raise UnexpectedFrame(f"content header of class {class_id} after {p.method.NAME}",
                                          p.method.CLASS_ID, p.method.METHOD_ID)
                if weight != 0:
                    raise FrameError(f"content header weight is {weight}, must be 0")
                p.properties = buf[start + 12:end] if raw_content else decode_properties(buf, start + 12, end)
                if body_size > self.max_body_size:
                    if not self.drop_oversized:
                        raise BodyTooLarge(f"content body of {body_size} bytes on channel {channel} "
                                           f"exceeds the limit of {self.max_body_size}", channel,
                                           body_size, self.max_body_size)
                    p.parts = None  # read and dropped; OversizedContent when complete
                if body_size == 0:
                    del pending[channel]
                    append(ContentMessage(channel, p.method, p.properties, b""))
                else:
                    p.body_size = body_size
                continue
            if ftype == 8:
                if channel:
                    # RabbitMQ 3.10 answers 505 UNEXPECTED_FRAME here (checked on the real broker)
                    raise UnexpectedFrame(f"heartbeat frame on channel {channel}; heartbeats must use channel 0")
                if size:
                    # RabbitMQ 3.10: 501 "type 8, all octets = <<...>>: unknown_frame"
                    raise FrameError(f"heartbeat frame with a {size}-byte payload; heartbeats are empty")
                append(_HEARTBEAT)
                continue
            raise FrameError(f"unknown frame type {ftype} on channel {channel}")
        self._need = 7
        return pos
