"""The frames a broker writes: basic.deliver, basic.get-ok, basic.return and method frames.

May import: the rest of :mod:`spark_amqp.protocol`. Imported by: the embedded broker
(``broker/channel.py``, ``broker/connection.py``), which frames no bytes itself.

Wire format (0-9-1 spec §4.2.3 frames, §4.2.6 content; methods from the spec's XML, class 60):
a content method frame, a content header frame (class 60, weight 0, body size, the property
flags and list as received from the publisher) and the body in frames of at most
``frame_max - 8`` bytes (none for an empty body); each frame ends with 0xCE.

The delivery fast path: a broker delivers runs of messages that differ only in the delivery
tag (and the redelivered flag, and for a stream the ``x-stream-offset`` header value). So
:func:`deliver_parts` (and :func:`stream_deliver_parts`) build the bytes around those fields
once, and :func:`append_deliver` (and :func:`append_stream_deliver`) write one delivery from
them; the latter two are compiled in ``_server_frames.pyx`` when it is built (same bytes, checked by
``tests/protocol/test_server_frames.py``).

Names: ``ctag`` is the consumer tag as an encoded shortstr, ``enc`` the exchange and routing
key as two encoded shortstrs (as the broker keeps them from the publish), ``props_raw`` the
encoded property flags and list.
"""

from __future__ import annotations

import struct

from .properties import SPEEDUPS

__all__ = ["method_frame", "content_frames", "deliver_frames", "deliver_parts",
           "stream_deliver_parts", "append_deliver", "append_stream_deliver",
           "get_ok_payload", "return_payload"]

_P_FRAME = struct.Struct(">BHI").pack            # frame header: type, channel, size
_P_END_FRAME = struct.Struct(">BBHI").pack       # frame-end + the next frame's header
_P_END_HDR = struct.Struct(">BBHIHHQ").pack      # frame-end + content header frame start
_P_QB = struct.Struct(">QB").pack                # delivery tag, redelivered
_P_q = struct.Struct(">q").pack                  # x-stream-offset value (long-long, tag 'l')
_P_H = struct.Struct(">H").pack
_P_I = struct.Struct(">I").pack
_DELIVER_ID = b"\x00\x3c\x00\x3c"  # basic.deliver (60, 60)
_GETOK_ID = b"\x00\x3c\x00\x47"    # basic.get-ok (60, 71)
_RETURN_ID = b"\x00\x3c\x00\x32"   # basic.return (60, 50)
_CE = b"\xce"


def method_frame(channel: int, method) -> bytes:
    """One method frame of ``method`` (a :mod:`.spec` method) on ``channel`` (0..65535).

    Raises AMQPSyntaxError for unencodable fields (from ``method.encode()``)."""
    payload = method.encode()
    return _P_FRAME(1, channel, len(payload)) + payload + _CE


def content_frames(out: bytearray, channel: int, method_payload: bytes, props_raw: bytes,
                   body: bytes, frame_max: int) -> None:
    """Append to ``out`` a content method (its encoded payload), its content header and body
    frames; ``frame_max`` is the negotiated frame size with its 8 bytes of framing (0 = no
    limit)."""
    out += _P_FRAME(1, channel, len(method_payload))
    out += method_payload
    _content_tail(out, channel, props_raw, body, frame_max)


def _content_tail(out: bytearray, channel: int, props_raw: bytes, body: bytes,
                  frame_max: int) -> None:
    """The frame end of a content method, then its content header and body frames."""
    blen = len(body)
    out += _P_END_HDR(0xCE, 2, channel, 12 + len(props_raw), 60, 0, blen)
    out += props_raw
    if blen:
        chunk = frame_max - 8 if frame_max else blen
        if blen <= chunk:
            out += _P_END_FRAME(0xCE, 3, channel, blen)
            out += body
        else:
            for start in range(0, blen, chunk):
                piece = body[start:start + chunk]
                out += _P_END_FRAME(0xCE, 3, channel, len(piece))
                out += piece
    out += _CE


def deliver_frames(out: bytearray, channel: int, ctag: bytes, tag: int, redelivered: bool,
                   enc: bytes, props_raw: bytes, body: bytes, frame_max: int) -> None:
    """Append one basic.deliver (delivery ``tag``, 1..2**64-1) with its content to ``out``:
    the general form (any body size), without cached parts."""
    out += _P_FRAME(1, channel, 13 + len(ctag) + len(enc))
    out += _DELIVER_ID
    out += ctag
    out += _P_QB(tag, redelivered)
    out += enc
    _content_tail(out, channel, props_raw, body, frame_max)


def deliver_parts(channel: int, ctag: bytes, enc: bytes, props_raw: bytes,
                  blen: int) -> tuple[bytes, bytes]:
    """``(pre, post)``: the bytes of a basic.deliver before its delivery tag and after its
    redelivered octet up to its body, for a body of ``blen`` bytes (1..frame_max-8: one body
    frame). Write a delivery with :func:`append_deliver`."""
    pre = _P_FRAME(1, channel, 13 + len(ctag) + len(enc)) + _DELIVER_ID + ctag
    post = (enc + _P_END_HDR(0xCE, 2, channel, 12 + len(props_raw), 60, 0, blen) + props_raw
            + _P_END_FRAME(0xCE, 3, channel, blen))
    return pre, post


def stream_deliver_parts(channel: int, ctag: bytes, enc: bytes, before: bytes, after: bytes,
                         blen: int) -> tuple[bytes, bytes, bytes]:
    """``(pre, mid, post)`` of a stream's basic.deliver: as :func:`deliver_parts`, with the
    properties split around the 8-byte value of their ``x-stream-offset`` header (``before``
    ends with its tag ``l``, ``after`` is the rest: ``broker/stream.py``
    ``offset_header_split``). Write a delivery with :func:`append_stream_deliver`."""
    pre = _P_FRAME(1, channel, 13 + len(ctag) + len(enc)) + _DELIVER_ID + ctag
    mid = enc + _P_END_HDR(0xCE, 2, channel, 12 + len(before) + 8 + len(after), 60, 0,
                           blen) + before
    post = after + _P_END_FRAME(0xCE, 3, channel, blen)
    return pre, mid, post


def _append_deliver(out: bytearray, pre: bytes, tag: int, redelivered: bool, post: bytes,
                    body: bytes) -> None:
    """Append one basic.deliver from :func:`deliver_parts`' ``pre``/``post``: delivery ``tag``
    (0..2**64-1), ``redelivered`` and ``body`` (of the size the parts were made for)."""
    out += pre
    out += _P_QB(tag, redelivered)
    out += post
    out += body
    out += _CE


def _append_stream_deliver(out: bytearray, pre: bytes, tag: int, mid: bytes, offset: int,
                           post: bytes, body: bytes) -> None:
    """Append one stream basic.deliver from :func:`stream_deliver_parts`: delivery ``tag``,
    redelivered false, the header ``x-stream-offset`` = ``offset`` (signed 64-bit)."""
    out += pre
    out += _P_QB(tag, False)
    out += mid
    out += _P_q(offset)
    out += post
    out += body
    out += _CE


def _append_stream_run(out: bytearray, pre: bytes, tag: int, mid: bytes, offset: int,
                       post: bytes, entries: list, i: int, enc: bytes, props_raw: bytes,
                       blen: int) -> int:
    """Append the stream deliveries ``entries[i:]`` (``(enc, props_raw, body)`` tuples, as
    the broker's stream log returns them) with :func:`append_stream_deliver` while each entry
    has the ``enc``, ``props_raw`` and body size ``blen`` that ``pre``/``mid``/``post`` were
    made for (:func:`stream_deliver_parts`): entry ``i + k`` gets delivery tag ``tag + k`` and
    offset ``offset + k``. Returns the index of the first entry not appended (``len(entries)``
    when all were): the caller builds the parts for that one and calls again."""
    n = len(entries)
    j = i
    while j < n:
        e_enc, e_props, body = entries[j]
        if len(body) != blen or e_props != props_raw or e_enc != enc:
            break
        k = j - i
        _append_stream_deliver(out, pre, tag + k, mid, offset + k, post, body)
        j += 1
    return j


def get_ok_payload(tag: int, redelivered: bool, enc: bytes, message_count: int) -> bytes:
    """The method payload of basic.get-ok (delivery ``tag``, ``message_count`` left)."""
    return b"".join((_GETOK_ID, _P_QB(tag, redelivered), enc, _P_I(message_count)))


def return_payload(code: int, text: str, enc: bytes) -> bytes:
    """The method payload of basic.return (reply ``code``, ``text`` of ≤ 255 UTF-8 bytes)."""
    t = text.encode()
    return b"".join((_RETURN_ID, _P_H(code), bytes((len(t),)), t, enc))


def _fast(name: str, pure):
    """The compiled ``name`` from ``_server_frames`` when built, else the pure-Python
    ``pure``."""
    return getattr(SPEEDUPS, name, pure) if SPEEDUPS is not None else pure


#: :func:`_append_deliver`, compiled when the speedups are built
append_deliver = _fast("append_deliver", _append_deliver)
#: :func:`_append_stream_deliver`, compiled when the speedups are built
append_stream_deliver = _fast("append_stream_deliver", _append_stream_deliver)
#: :func:`_append_stream_run`, compiled when the speedups are built
append_stream_run = _fast("append_stream_run", _append_stream_run)
