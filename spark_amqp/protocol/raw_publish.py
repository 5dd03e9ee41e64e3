"""Raw publishes: a ``basic.publish`` with its content, the properties left as wire bytes.

The server role of :class:`.frames.Decoder` (``raw_content=True``, what the embedded broker
runs) cuts a basic.publish whose content header and single body frame are already buffered
into one :class:`RawPublish` event with :func:`scan_publish`: the method's exchange and
routing key decoded, its two bits, the exchange and routing-key short strings as received
(``enc``, reused when the message is delivered) and the content header's property flags and
list *undecoded* (the broker stores and forwards them as they came; it decodes them only when
routing needs a property). No per-frame or per-property object is made.

What the scan checks is what the decoder's general path would check on the same frames
(0-9-1 spec §4.2.3 framing, §4.2.6 content, §1.8.3.7 basic.publish): the method arguments fill
the frame exactly (reserved short, two UTF-8 short strings, one octet of bits); the header is
type 2 on the same channel, at least 14 bytes, at most frame-max, frame-end 0xCE, class 60,
weight 0, body size at most ``max_body``; the body is one type-3 frame on the same channel of
exactly that size with its frame-end. Anything else returns ``None`` and the general path
decodes the frames or raises the typed error with its reply code, so the scan never changes
which errors a stream produces. The property list is not validated (as the properties of a
``raw_content`` decoder's :class:`.frames.ContentMessage` are not).

``scan_publish`` has a compiled twin (``_raw_publish.scan_publish``), used when built; the
differential tests in ``tests/protocol/test_raw_publish.py`` check they agree.
"""

from __future__ import annotations

import struct

__all__ = ["RawPublish", "scan_publish", "PUBLISH_INDEX"]

#: (class id << 16) | method id of basic.publish (60, 40)
PUBLISH_INDEX = (60 << 16) | 40
_HEADER = struct.Struct(">BHIHHQ").unpack_from      # header frame: type..body size
_FRAME = struct.Struct(">BHI").unpack_from          # type, channel, size
_new = object.__new__


class RawPublish:
    """A complete basic.publish received on ``channel``, its properties undecoded.

    Attributes:
        channel: int.
        exchange, routing_key: str (the method's arguments, §1.8.3.7).
        mandatory, immediate: bool.
        enc: bytes, the exchange and routing-key short strings as on the wire (length octet,
            UTF-8 bytes, twice).
        properties: bytes, the content header's property flags and property list, as sent
            (``b"\\x00\\x00"`` when no property is set); decode with
            :func:`.properties.decode_properties`.
        body: bytes.
    """

    __slots__ = ("channel", "exchange", "routing_key", "mandatory", "immediate", "enc",
                 "properties", "body")

    def __init__(self, channel: int, exchange: str, routing_key: str, mandatory: bool,
                 immediate: bool, enc: bytes, properties: bytes, body: bytes):
        self.channel = channel
        self.exchange = exchange
        self.routing_key = routing_key
        self.mandatory = mandatory
        self.immediate = immediate
        self.enc = enc
        self.properties = properties
        self.body = body

    def __repr__(self) -> str:
        return (f"RawPublish(channel={self.channel}, exchange={self.exchange!r}, "
                f"routing_key={self.routing_key!r}, mandatory={self.mandatory}, "
                f"immediate={self.immediate}, properties={self.properties!r}, "
                f"body={self.body[:32]!r}{'...' if len(self.body) > 32 else ''})")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, RawPublish) and self.channel == other.channel
                and self.exchange == other.exchange and self.routing_key == other.routing_key
                and self.mandatory == other.mandatory and self.immediate == other.immediate
                and self.enc == other.enc and self.properties == other.properties
                and self.body == other.body)


def basic_header_at(buf: bytes, h: int, n: int, channel: int, fmax8: int,
                    max_body: int) -> tuple[int, int] | None:
    """``(offset of its frame-end octet, body size)`` of a complete, well-formed content
    header frame of class basic (60) at ``buf[h:n]`` on ``channel``, or None: type 2, at least
    14 bytes, at most ``fmax8``, weight 0, body size at most ``max_body`` (§4.2.6.1). Shared
    by the raw scans (this module's and :func:`.frames.scan_deliveries`)."""
    if n - h < 21:
        return None
    htype, hch, hsize, class_id, weight, body_size = _HEADER(buf, h)
    hend = h + 7 + hsize
    if (htype != 2 or hch != channel or hsize < 14 or hsize > fmax8 or class_id != 60 or weight
            or body_size > max_body or hend >= n or buf[hend] != 206):
        return None
    return hend, body_size


def scan_publish(buf: bytes, args: int, mend: int, n: int, channel: int, fmax8: int,
                 max_body: int) -> tuple[RawPublish, int] | None:
    """Cut one complete basic.publish on ``channel`` out of ``buf[:n]``.

    ``buf[args:mend]`` are the arguments of a basic.publish method frame whose framing the
    caller checked (``mend`` is the offset of its frame-end octet). ``fmax8``: the largest
    frame payload accepted (frame-max - 8); ``max_body``: the largest body accepted (bytes).
    Returns ``(RawPublish, offset after the body frame)``, or None when the header and body
    are not complete in the buffer or anything is out of the expected shape (the caller then
    decodes the frames the general way; see the module doc).
    """
    o = args + 2
    if o >= mend:
        return None
    o2 = o + 1 + buf[o]
    if o2 >= mend:
        return None
    o3 = o2 + 1 + buf[o2]
    if o3 + 1 != mend:
        return None
    h = mend + 1
    r = basic_header_at(buf, h, n, channel, fmax8, max_body)
    if r is None:
        return None
    hend, body_size = r
    if body_size:
        q = hend + 1
        bend = q + 7 + body_size
        if bend >= n or body_size > fmax8:
            return None
        btype, bch, bsize = _FRAME(buf, q)
        if btype != 3 or bch != channel or bsize != body_size or buf[bend] != 206:
            return None
        body = buf[q + 7:bend]
        end = bend + 1
    else:
        body = b""
        end = hend + 1
    try:
        exchange = buf[o + 1:o2].decode("utf-8")
        routing_key = buf[o2 + 1:o3].decode("utf-8")
    except UnicodeDecodeError:
        return None
    bits = buf[o3]
    ev = _new(RawPublish)
    ev.channel = channel
    ev.exchange = exchange
    ev.routing_key = routing_key
    ev.mandatory = bool(bits & 1)
    ev.immediate = bool(bits & 2)
    ev.enc = buf[o:o3]
    ev.properties = buf[h + 19:hend]
    ev.body = body
    return ev, end
