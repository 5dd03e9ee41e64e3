"""Raw delivery runs: consecutive ``basic.deliver`` messages kept as their wire frames.

A consumer that only stores messages and hands them on (the Spark source's driver ships them
to the executors) does not need them decoded where they are received. For a channel marked
raw (:attr:`.frames.Decoder.raw_channels`), the decoder cuts runs of complete, well-formed
``basic.deliver`` messages out of the received bytes with :func:`scan_deliveries` and returns
each run as one :class:`RawDeliveries` event: the frames' bytes, the count, the first delivery
tag and where each message ends. No per-message Python object is made; the messages are
decoded later, wherever they end up, by :meth:`RawDeliveries.decode` (or :func:`decode_frames`
on a slice of the bytes).

What the scan checks is the framing (AMQP 0-9-1 §4.2.3 and §4.2.6): frame types, channel,
sizes against frame-max, frame-end octets, the method index and argument layout of
basic.deliver (§1.8.3.9), the content header's class id (60), weight (0) and body size (at most
``max_body_size``), and body frames adding up to exactly that size. Delivery tags in a run are
consecutive (tag, tag + 1, ...): RabbitMQ and the embedded broker number a channel's
deliveries that way (RabbitMQ docs/confirms.md, "Delivery Identifiers"); a gap ends the run.
Anything the scan does not take - a message not complete in the buffer, a shortstr that is not
ASCII, any frame out of the expected shape - is left to the decoder's general path, which
decodes it or raises the typed error with the reply code, so the scan never changes which
errors a stream produces. The property flags and values are *not* checked here: a malformed
property list surfaces when the run is decoded (as :class:`~.errors.AMQPError`), not as a
connection error.

``scan_deliveries`` has a compiled twin (``_speedups.scan_deliveries``), used when built; the
differential tests in ``tests/protocol/test_raw_deliveries.py`` check they agree.
"""

from __future__ import annotations

import struct
import sys
from array import array
from itertools import accumulate
from typing import Any

from .spec import Basic

__all__ = ["RawDeliveries", "scan_deliveries", "decode_frames", "deliver_columns",
           "DELIVER_INDEX"]

#: (class id << 16) | method id of basic.deliver (60, 60)
DELIVER_INDEX = (60 << 16) | 60
_IDS = struct.Struct(">BHII").unpack_from           # frame header + method index
_HEADER = struct.Struct(">BHIHHQ").unpack_from      # header frame: type..body size
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
        """The run's messages as :class:`.frames.ContentMessage` events (see
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
    :attr:`RawDeliveries.data`) into :class:`.frames.ContentMessage` events, in order.

    ``expect``: the number of messages the bytes must hold (None: any). Raises the typed
    :class:`~.errors.AMQPError` of the decoder for malformed frames or properties, and
    ``ValueError`` when the bytes end inside a message or hold another number of messages or
    anything but content messages.
    """
    from .frames import ContentMessage, Decoder

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
    h = mend + 1
    if n - h < 21:
        return None
    htype, hch, hsize, class_id, weight, body_size = _HEADER(buf, h)
    hend = h + 7 + hsize
    if (htype != 2 or hch != channel or hsize < 14 or hsize > fmax8 or class_id != 60 or weight
            or body_size > max_body or hend >= n or buf[hend] != 206):
        return None
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


def deliver_columns(data: bytes, expect: int | None = None,
                    packed_bodies: bool = False) -> tuple[Any, list, list, list, list]:
    """Decode the frames of complete basic.deliver messages into columns, in order:
    ``(bodies, redelivered, exchanges, routing_keys, properties)``, each a list with one entry
    per message (bytes, bool, str, str, and a ``BasicProperties`` or None when the message has
    no properties at all).

    ``packed_bodies``: bodies come as ``(offsets, values)`` instead, the two buffers of an
    Arrow binary column (``offsets``: n + 1 int32 little-endian; ``values``: the bodies
    concatenated), unless they add up to more than 2 GiB - 1 (then the list).

    The executors' decode of what the driver shipped (a pure function of the bytes; the
    compiled twin ``_speedups.deliver_columns`` is used when built and gives the same
    result). ``expect`` and errors as :func:`decode_frames`; a content method other than
    basic.deliver raises ``ValueError``.
    """
    bodies, red, exchanges, keys, props = [], [], [], [], []
    for ev in decode_frames(data, expect):
        m = ev.method
        if m.INDEX != DELIVER_INDEX:
            raise ValueError(f"the frames hold {m.NAME}, expected basic.deliver")
        bodies.append(ev.body)
        red.append(m.redelivered)
        exchanges.append(m.exchange)
        keys.append(m.routing_key)
        p = ev.properties
        props.append(None if p == _EMPTY else p)
    if packed_bodies:
        return _pack_bodies(bodies), red, exchanges, keys, props
    return bodies, red, exchanges, keys, props


def _pack_bodies(bodies: list) -> Any:
    lengths = [0]
    lengths.extend(map(len, bodies))
    offsets = list(accumulate(lengths))
    if offsets[-1] > 0x7FFFFFFF:
        return bodies
    a = array("i", offsets)
    if a.itemsize != 4:  # pragma: no cover - every CPython platform has a 4-byte C int
        raise RuntimeError("array('i') is not 32-bit here")
    if sys.byteorder != "little":  # pragma: no cover - big-endian hosts
        a.byteswap()
    return a.tobytes(), b"".join(bodies)


def _empty_properties():
    from .properties import BasicProperties

    return BasicProperties()


_EMPTY = _empty_properties()


def _columns_fast():
    from .properties import SPEEDUPS

    if SPEEDUPS is None or not hasattr(SPEEDUPS, "deliver_columns"):
        return deliver_columns
    SPEEDUPS.setup_columns(deliver_columns)
    return SPEEDUPS.deliver_columns


#: :func:`deliver_columns`, compiled when the speedups are built
deliver_columns_fast = _columns_fast()
