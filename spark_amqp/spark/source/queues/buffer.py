"""Driver-side bookkeeping of consumed deliveries: per-queue buffers, planning and acks.

Pure (no I/O): the offset reader feeds drained items in (undecoded runs of deliveries, or single
decoded deliveries), cuts batch ends, slices planned ranges for
partitions and asks which delivery tag to ack. One :class:`QueueBuffer` per queue per session;
its deliveries come from one channel, in delivery-tag order, so ``basic.ack(tag,
multiple=True)`` of the delivery at offset ``n - 1`` acks exactly offsets ``< n`` of that queue
(AMQP 0-9-1 §1.8.3.13: "up to and including" the tag, scoped to the channel; RabbitMQ
docs/confirms.md: tags are per channel, so one channel per queue keeps ``multiple`` per queue).

Offsets: ``acked <= planned <= received``; deliveries below ``acked`` are forgotten.

Bytes: every buffer also counts the bytes it holds, per message (:func:`item_bytes`): a raw
run's frames (body plus its ~60-byte method/header framing and properties, i.e. what the
message weighs on the wire and in a partition), a decoded delivery's body plus
:data:`DECODED_OVERHEAD`. The offset reader and the partitioner cut batches and partitions by these byte positions
(``maxBytesPerTrigger``, ``maxBytesPerPartition``) and bounds what it holds unplanned
(``maxBufferedBytes``).
"""

from __future__ import annotations

import uuid
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from spark_amqp.protocol.raw_deliveries import RawDeliveries

from .offsets import SourceOffset

__all__ = ["QueueBuffer", "Session", "item_bytes", "DECODED_OVERHEAD"]

#: bytes counted for a decoded delivery besides its body (its frames' header, method and a
#: few properties; a raw run counts its real frames)
DECODED_OVERHEAD = 64


def _count(item: Any) -> int:
    """Deliveries in a drained item: a run's count, or 1."""
    return item.count if item.__class__ is RawDeliveries else 1


def item_bytes(item: Any) -> int:
    """Bytes counted for a drained item (see module doc)."""
    if item.__class__ is RawDeliveries:
        return len(item.data)
    return len(item.body) + DECODED_OVERHEAD


class QueueBuffer:
    """Deliveries of one queue in one session, in arrival (delivery-tag) order.

    Items are what the channel's ``drain`` returns: a
    :class:`~spark_amqp.protocol.raw_deliveries.RawDeliveries` run (``count`` messages,
    consecutive tags, undecoded frames) or a single decoded delivery (an object with a
    ``delivery_tag`` attribute, e.g. ``spark_amqp.client.Delivery``). ``items[i]`` holds the
    messages from offset ``starts[i]`` on.
    """

    __slots__ = ("queue", "items", "starts", "bstarts", "received", "received_bytes", "acked",
                 "planned", "planned_bytes")

    def __init__(self, queue: str):
        self.queue = queue
        self.items: list[Any] = []
        self.starts: list[int] = []
        self.bstarts: list[int] = []  # byte position (since the session began) of items[i]
        self.received = 0  # offset one past the last delivery received
        self.received_bytes = 0  # byte position one past the last delivery received
        self.acked = 0
        self.planned = 0
        self.planned_bytes = 0  # byte position of offset ``planned``

    @property
    def unplanned(self) -> int:
        """Deliveries received but not yet in a planned batch."""
        return self.received - self.planned

    @property
    def unplanned_bytes(self) -> int:
        """Bytes of the deliveries received but not yet in a planned batch."""
        return self.received_bytes - self.planned_bytes

    def add(self, items: Iterable[Any]) -> None:
        """Append drained items (runs or single deliveries)."""
        received = self.received
        rb = self.received_bytes
        for it in items:
            self.items.append(it)
            self.starts.append(received)
            self.bstarts.append(rb)
            received += _count(it)
            rb += item_bytes(it)
        self.received = received
        self.received_bytes = rb

    def plan(self, n: int) -> int:
        """Advance the planned end by up to ``n`` (bounded by what was received); return it."""
        if n > 0:
            self.planned += min(n, self.unplanned)
            self.planned_bytes = self.byte_pos(self.planned)
        return self.planned

    def byte_pos(self, offset: int) -> int:
        """Byte position of ``offset`` (``acked <= offset <= received``): the bytes of this
        session's deliveries below it."""
        if offset >= self.received:
            return self.received_bytes
        i = self._index(offset)
        it = self.items[i]
        k = offset - self.starts[i]
        if k == 0:
            return self.bstarts[i]
        return self.bstarts[i] + it.ends[k - 1]  # inside a raw run

    def bytes_between(self, start: int, end: int) -> int:
        """Bytes of the deliveries with offsets in ``[start, end)`` (buffered ones)."""
        return self.byte_pos(end) - self.byte_pos(start) if end > start else 0

    def end_within(self, start: int, max_bytes: int, limit: int | None = None) -> int:
        """The largest ``end`` (``start < end <= min(received, limit)``) whose deliveries
        ``[start, end)`` weigh at most ``max_bytes``, but at least ``start + 1`` (one message
        always fits, however large). ``start`` when nothing is buffered from ``start`` on."""
        top = self.received if limit is None else min(limit, self.received)
        if top <= start:
            return start
        goal = self.byte_pos(start) + max_bytes
        if self.byte_pos(top) <= goal:
            return top
        # the last item starting at or below the goal, then inside it if it is a run
        i = bisect_right(self.bstarts, goal) - 1
        it = self.items[i]
        end = self.starts[i]
        if it.__class__ is RawDeliveries:
            end += bisect_right(it.ends, goal - self.bstarts[i])
        elif self.bstarts[i] + item_bytes(it) <= goal:
            end += 1
        return max(start + 1, min(end, top))

    def _index(self, offset: int) -> int:
        """Index of the item holding ``offset`` (which must be buffered)."""
        return bisect_right(self.starts, offset) - 1

    def slice(self, start: int, end: int) -> list[tuple[Any, int, int]]:
        """The deliveries with offsets in ``[start, end)`` as ``(item, lo, hi)`` pieces in
        order: messages ``lo .. hi-1`` of a run, or ``(delivery, 0, 1)``.

        Raises ``LookupError`` when part of the range is no longer (or not yet) buffered, i.e.
        it was acked already or never received: a bookkeeping error, never silently truncated.
        """
        if start < self.acked or end > self.received or start > end:
            raise LookupError(
                f"queue {self.queue!r}: range [{start}, {end}) is not buffered "
                f"(buffered: [{self.acked}, {self.received}))")
        out = []
        i = self._index(start) if start < end else len(self.items)
        items, starts = self.items, self.starts
        while i < len(items) and starts[i] < end:
            it, s = items[i], starts[i]
            out.append((it, max(start - s, 0), min(end - s, _count(it))))
            i += 1
        return out

    def tag_at(self, offset: int) -> int:
        """Delivery tag of the buffered delivery at ``offset``."""
        i = self._index(offset)
        it = self.items[i]
        if it.__class__ is RawDeliveries:
            return it.first_tag + offset - self.starts[i]
        return it.delivery_tag

    def ack_tag(self, upto: int) -> int | None:
        """The delivery tag that acks (``multiple=True``) every delivery below ``upto``, without
        changing the buffer; None when nothing new is to be acked. Same clamping as
        :meth:`ack_upto`. Send the ack first, then call :meth:`ack_upto`: an ack that fails
        leaves the range counted as unacked (the broker requeues it)."""
        upto = min(upto, self.planned)
        if upto <= self.acked:
            return None
        return self.tag_at(upto - 1)

    def ack_upto(self, upto: int) -> int | None:
        """Forget deliveries below ``upto`` and return the tag to ack with ``multiple=True``.

        Returns None when nothing new is to be acked (``upto <= acked``: idempotent). ``upto``
        is clamped to the planned end: only planned (Spark-logged) deliveries are ever acked.
        """
        upto = min(upto, self.planned)
        tag = self.ack_tag(upto)
        if tag is None:
            return None
        # forget the items wholly below upto (a run reaching past it stays until later)
        k = self._index(upto) if upto < self.received else len(self.items)
        if k > 0:
            del self.items[:k]
            del self.starts[:k]
            del self.bstarts[:k]
        self.acked = upto
        return tag

    def drop_unplanned(self) -> int:
        """Forget received-but-unplanned deliveries (after a channel loss they are requeued by
        the broker and come back as redeliveries). Returns how many were dropped."""
        n = self.unplanned
        if not n:
            return 0
        cut = self.planned
        i = self._index(cut)
        if i >= 0 and self.starts[i] < cut:  # a run straddling the planned end: keep its head
            self.items[i] = self.items[i].head(cut - self.starts[i])
            i += 1
        del self.items[i:]
        del self.starts[i:]
        del self.bstarts[i:]
        self.received = cut
        self.received_bytes = self.planned_bytes
        return n


@dataclass
class Session:
    """One driver connection's worth of buffers. ``id`` goes into every offset it plans."""

    queues: Sequence[str]
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    buffers: dict[str, QueueBuffer] = field(init=False)

    def __post_init__(self) -> None:
        self.buffers = {q: QueueBuffer(q) for q in self.queues}

    def planned_offset(self) -> SourceOffset:
        return SourceOffset.make(self.id, {q: b.planned for q, b in self.buffers.items()})

    def zero_offset(self) -> SourceOffset:
        return SourceOffset.zero(self.id, self.queues)
