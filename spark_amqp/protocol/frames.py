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
from typing import Any, Iterable

from .errors import (AMQPError, BodyTooLarge, ChannelErrorCode, CommandInvalid, FrameError,
                     UnexpectedFrame)
from .properties import (_DECODERS, SPEEDUPS, BasicProperties, decode_properties,
                         properties_decoder)
from .raw_deliveries import DELIVER_INDEX as _DELIVER_INDEX
from .raw_deliveries import RawDeliveries, scan_deliveries
from .spec import METHODS, Method

__all__ = [
    "FRAME_METHOD", "FRAME_HEADER", "FRAME_BODY", "FRAME_HEARTBEAT", "FRAME_END",
    "FRAME_MIN_SIZE", "PROTOCOL_HEADER", "MethodFrame", "ContentMessage", "Heartbeat",
    "ProtocolHeader", "Decoder", "encode_method", "encode_message", "encode_heartbeat",
    "parse_protocol_header", "HEARTBEAT_FRAME",
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
_END_HEADER_HEAD = struct.Struct(">BBHIHHQ").pack  # frame-end + content header frame start
_END_BODY_HEAD = struct.Struct(">BBHI").pack          # frame-end + body frame header
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


def _content_fast(speedups):
    """The compiled fast path of :meth:`Decoder._parse` for a content header and body
    (``_speedups.content_after_method``), or ``None`` for pure Python."""
    if speedups is None:
        return None
    speedups.setup_frames(ContentMessage)
    return speedups.content_after_method


_CONTENT_FAST = _content_fast(SPEEDUPS)


def _scan_fast(speedups):
    """The compiled :func:`.raw_deliveries.scan_deliveries`, or the pure-Python one."""
    if speedups is None or not hasattr(speedups, "scan_deliveries"):
        return scan_deliveries
    speedups.setup_raw(RawDeliveries)
    speedups.setup_raw_fallback(scan_deliveries)
    return speedups.scan_deliveries


_SCAN_DELIVERIES = _scan_fast(SPEEDUPS)

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
    blen = len(body)
    # frame-end octets are packed together with the next frame's header
    mid = _END_HEADER_HEAD(0xCE, 2, channel, 12 + len(props), method.CLASS_ID, 0, blen)
    if not blen:
        return b"".join((*method.frame_parts(channel), mid, props, FRAME_END_BYTE))
    if not frame_max or blen <= frame_max - 8:
        return method.message_bytes(channel, mid, props, _END_BODY_HEAD(0xCE, 3, channel, blen),
                                    body)
    chunk = frame_max - 8
    if chunk <= 0:
        raise ValueError(f"frame_max {frame_max} leaves no room for a body")
    parts = [*method.frame_parts(channel), mid, props]
    mv = memoryview(body)
    for start in range(0, blen, chunk):
        piece = mv[start:start + chunk]
        parts.append(_END_BODY_HEAD(0xCE, 3, channel, len(piece)))
        parts.append(piece)
    parts.append(FRAME_END_BYTE)
    return b"".join(parts)


def encode_frames(frames: Iterable[tuple[int, Method]]) -> bytes:
    """Encode several (channel, method) method frames into one bytes object."""
    return b"".join(encode_method(ch, m) for ch, m in frames)


# --------------------------------------------------------------------------------- decode

class _Pending:
    """Per-channel content being assembled."""

    __slots__ = ("method", "properties", "body_size", "parts", "received")

    def __init__(self, method: Method):
        self.method = method
        self.properties: BasicProperties | None = None
        self.body_size = -1
        self.parts: list[bytes] = []
        self.received = 0


class Decoder:
    """Incremental AMQP 0-9-1 decoder: ``feed(bytes) -> list of events``.

    Args:
        frame_max: the largest frame accepted, framing included (default 131072, RabbitMQ's
            default; before tune, peers must accept 4096). Change it with
            :meth:`set_frame_max` after ``connection.tune``; 0 means no limit.
        expect_protocol_header: the server role; the first 8 bytes are a protocol header and
            produce a :class:`ProtocolHeader` event.
        max_body_size: the largest content body accepted (bytes).

    Errors (raised from :meth:`feed`, after which the decoder refuses further input with the
    same error): :class:`FrameError` 501 for a bad frame end, unknown frame type, a frame over
    ``frame_max``, truncated or garbled payloads; :class:`UnexpectedFrame` 505 for content
    frames out of sequence; :class:`CommandInvalid` 503 for unknown class/method ids
    (RabbitMQ 3.10 resets the socket without a reply here; 503 is the spec's "invalid
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
                 "max_body_size", "error", "raw_channels")

    def __init__(self, frame_max: int = 131072, expect_protocol_header: bool = False,
                 max_body_size: int = DEFAULT_MAX_BODY_SIZE):
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

    def feed(self, data: bytes) -> list[Any]:
        """Add received bytes; return the events completed by them (possibly none).

        ``data`` may be any bytes-like object of any length. Raises the typed errors listed
        in the class docstring; the events decoded before the error from the same call are in
        ``exc.events``.
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
            pos = self._parse(buf, events) if self._header_done else self._parse_header(buf, events)
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

    def _parse_header(self, buf: bytes, events: list) -> int:
        """Server role: the 8-byte protocol header comes first (then frames); ``feed``
        only calls this with at least 8 bytes (``_need`` starts at 8)."""
        header = ProtocolHeader(buf[:8])
        events.append(header)
        self._header_done = True
        if not header.is_supported:
            # the server answers and closes; nothing after a bad header is parsed
            self._need = 1 << 62
            return len(buf)
        self._need = 7
        if len(buf) < 15:
            return 8
        return 8 + self._parse(buf[8:], events)

    def _parse(self, buf: bytes, events: list) -> int:
        """Decode complete frames from ``buf`` into ``events``; return the bytes consumed.

        One loop over the frames; a content method whose header and single body frame are
        already in ``buf`` is assembled in place (the common case) without per-channel state.
        """
        append = events.append
        pos = 0
        n = len(buf)
        fmax8 = (self.frame_max or (1 << 40)) - 8  # largest payload size accepted
        pending = self._pending
        new = _new
        decoders = _DECODERS
        content_fast = _CONTENT_FAST
        raw_channels = self.raw_channels
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
                    raise UnexpectedFrame(f"method frame on channel {channel} while content for {pending[channel].method.NAME} is incomplete")
                if index == _DELIVER_INDEX and channel and raw_channels and channel in raw_channels:
                    # a raw channel: cut a run of complete deliveries as frames (.raw_deliveries)
                    r = scan(buf, start - 7, n, channel, fmax8, self.max_body_size)
                    if r is not None:
                        ev, pos = r
                        append(ev)
                        continue
                cls = METHODS.get(index)
                if cls is None:
                    raise CommandInvalid(f"unknown method: class {index >> 16}, method {index & 0xFFFF}",
                                         index >> 16, index & 0xFFFF)
                method = cls.decode(buf, start + 4, end)
                if not cls.has_content:
                    ev = new(MethodFrame)
                    ev.channel = channel
                    ev.method = method
                    append(ev)
                    continue
                if not channel:
                    raise ChannelErrorCode(f"{cls.NAME} on channel 0", cls.CLASS_ID, cls.METHOD_ID)
                # Fast path: header (and a single body frame) already in the buffer, on the
                # same channel, well formed: decode them here without per-channel state.
                # Anything unusual falls through to the general frame-by-frame path below.
                if n - pos >= 21:
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
                if p is None or p.body_size < 0:
                    raise UnexpectedFrame(f"content body frame on channel {channel} without a content header before it")
                if size:
                    p.parts.append(buf[start:end])
                    p.received += size
                if p.received >= p.body_size:
                    if p.received > p.body_size:
                        raise UnexpectedFrame(f"content body on channel {channel} is {p.received} bytes, longer than the {p.body_size} announced")
                    del pending[channel]
                    parts = p.parts
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
                    raise UnexpectedFrame(f"content header of class {class_id} after {p.method.NAME}")
                if weight != 0:
                    raise FrameError(f"content header weight is {weight}, must be 0")
                if body_size > self.max_body_size:
                    raise BodyTooLarge(f"content body of {body_size} bytes on channel {channel} "
                                       f"exceeds the limit of {self.max_body_size}", channel,
                                       body_size, self.max_body_size)
                p.properties = decode_properties(buf, start + 12, end)
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
                append(_HEARTBEAT)
                continue
            raise FrameError(f"unknown frame type {ftype} on channel {channel}")
        self._need = 7
        return pos
