"""Fair split of a row (or byte) limit across queues or streams by water-filling, the
source's counterpart of Kafka's ``maxOffsetsPerTrigger`` split across topic-partitions.
Pure (no I/O); used by both modes' batch planning (queue mode :mod:`.queues.planner`, stream
mode :mod:`.streams.offsets`).
"""

from __future__ import annotations

from typing import Mapping

__all__ = ["fair_split"]


def fair_split(available: Mapping[str, int], limit: int | None,
               caps: Mapping[str, int] | None = None) -> dict[str, int]:
    """Split ``limit`` rows across queues fairly (water-filling), like Kafka's
    ``maxOffsetsPerTrigger`` split across topic-partitions.

    ``available``: rows each queue can give; ``limit``: total cap (None = no cap); ``caps``:
    optional per-queue upper bounds (Trigger.AvailableNow targets). Every queue gets
    ``min(available, cap, fair share)``; what a queue cannot use is shared equally among the
    others (the odd rows of an uneven split go to the queues first by name).
    Returns ``{queue: n}`` with ``sum(n) <= limit`` and ``n <= available[q]``.
    """
    room = {q: max(0, min(a, caps.get(q, a) if caps else a)) for q, a in available.items()}
    if limit is None:
        return room
    out = {q: 0 for q in room}
    remaining = max(0, limit)
    # water-filling: the queues with the least room are filled first while their room is
    # within an equal share of what is left; the rest split the remainder equally (the odd
    # rows to the first by name, so the split is deterministic)
    order = sorted((q for q, r in room.items() if r > 0), key=lambda q: (room[q], q))
    i = 0
    while i < len(order) and remaining > 0:
        q = order[i]
        if room[q] * (len(order) - i) > remaining:
            break
        out[q] = room[q]
        remaining -= room[q]
        i += 1
    rest = sorted(order[i:])
    if rest and remaining > 0:
        share, extra = divmod(remaining, len(rest))
        for j, q in enumerate(rest):
            out[q] = share + (1 if j < extra else 0)
    return out
