"""Driver-side bookkeeping of consumed deliveries: per-queue buffers, planning and acks.

Pure (no I/O): the reader feeds deliveries in, cuts batch ends, slices planned ranges for
partitions and asks which delivery tag to ack. One :class:`QueueBuffer` per queue per session;
its deliveries come from one channel, in delivery-tag order, so ``basic.ack(tag,
multiple=True)`` of the delivery at offset ``n - 1`` acks exactly offsets ``< n`` of that queue
(AMQP 0-9-1 §1.8.3.13: "up to and including" the tag, scoped to the channel; RabbitMQ
docs/confirms.md: tags are per channel, so one channel per queue keeps ``multiple`` per queue).

Offsets: ``acked <= planned <= received``; deliveries below ``acked`` are forgotten.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .source_offsets import SourceOffset

__all__ = ["QueueBuffer", "Session", "fair_split"]


class QueueBuffer:
    """Deliveries of one queue in one session, in arrival (delivery-tag) order.

    ``deliveries[i]`` has offset ``base + i``. Each delivery needs a ``delivery_tag`` attribute.
    """

    __slots__ = ("queue", "base", "deliveries", "acked", "planned")

    def __init__(self, queue: str):
        self.queue = queue
        self.base = 0
        self.deliveries: list[Any] = []
        self.acked = 0
        self.planned = 0

    @property
    def received(self) -> int:
        """Offset one past the last delivery received."""
        return self.base + len(self.deliveries)

    @property
    def unplanned(self) -> int:
        """Deliveries received but not yet in a planned batch."""
        return self.received - self.planned

    def add(self, deliveries: Iterable[Any]) -> None:
        self.deliveries.extend(deliveries)

    def plan(self, n: int) -> int:
        """Advance the planned end by up to ``n`` (bounded by what was received); return it."""
        if n > 0:
            self.planned += min(n, self.unplanned)
        return self.planned

    def slice(self, start: int, end: int) -> list:
        """Deliveries with offsets in ``[start, end)``.

        Raises ``LookupError`` when part of the range is no longer (or not yet) buffered, i.e.
        it was acked already or never received: a bookkeeping error, never silently truncated.
        """
        if start < self.base or end > self.received or start > end:
            raise LookupError(
                f"queue {self.queue!r}: range [{start}, {end}) is not buffered "
                f"(buffered: [{self.base}, {self.received}))")
        return self.deliveries[start - self.base:end - self.base]

    def ack_upto(self, upto: int) -> int | None:
        """Forget deliveries below ``upto`` and return the tag to ack with ``multiple=True``.

        Returns None when nothing new is to be acked (``upto <= acked``: idempotent). ``upto``
        is clamped to the planned end: only planned (Spark-logged) deliveries are ever acked.
        """
        upto = min(upto, self.planned)
        if upto <= self.acked:
            return None
        tag = self.deliveries[upto - 1 - self.base].delivery_tag
        del self.deliveries[:upto - self.base]
        self.base = upto
        self.acked = upto
        return tag

    def drop_unplanned(self) -> int:
        """Forget received-but-unplanned deliveries (after a channel loss they are requeued by
        the broker and come back as redeliveries). Returns how many were dropped."""
        n = self.unplanned
        if n:
            del self.deliveries[self.planned - self.base:]
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


def fair_split(available: Mapping[str, int], limit: int | None,
               caps: Mapping[str, int] | None = None) -> dict[str, int]:
    """Split ``limit`` rows across queues fairly (water-filling), like Kafka's
    ``maxOffsetsPerTrigger`` split across topic-partitions.

    ``available``: rows each queue can give; ``limit``: total cap (None = no cap); ``caps``:
    optional per-queue upper bounds (Trigger.AvailableNow targets). Every queue gets
    ``min(available, cap, fair share)``; what a queue cannot use is shared among the others.
    Returns ``{queue: n}`` with ``sum(n) <= limit`` and ``n <= available[q]``.
    """
    room = {q: max(0, min(a, caps.get(q, a) if caps else a)) for q, a in available.items()}
    if limit is None:
        return room
    out = {q: 0 for q in room}
    remaining = max(0, limit)
    active = sorted(q for q, r in room.items() if r > 0)
    while remaining > 0 and active:
        share, extra = divmod(remaining, len(active))
        nxt = []
        given = 0
        for i, q in enumerate(active):
            want = share + (1 if i < extra else 0)
            take = min(want, room[q] - out[q])
            out[q] += take
            given += take
            if out[q] < room[q]:
                nxt.append(q)
        remaining -= given
        if given == 0:
            break
        active = nxt
    return out
