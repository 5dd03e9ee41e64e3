"""Offsets and range planning of the ``amqp`` source in stream mode (pure functions, no I/O).

An offset is ``{"streams": {stream: next offset}}``: for each stream the stream offset the
next batch starts at (RabbitMQ's own offsets, the ``x-stream-offset`` header of each
delivery). Spark stores offsets as JSON and compares them as strings (lessons §1.4), so
:meth:`StreamOffset.to_dict` is canonical: ``json.dumps(..., sort_keys=True)`` of it is the
same string for equal offsets, and streams are sorted by name.

A batch ``(start, end]`` reads, per stream, the offsets ``[start[s], end[s])``. The planner only
makes ends whose ``end - 1`` is at or below an offset seen on the broker, so some offset
``>= end - 1`` exists and a reader of ``[a, b)`` with ``b <= end`` can always stop: it stops
at the first delivery whose offset is ``>= b - 1`` and keeps the offsets in ``[a, b)``. This
holds for any split of a range, with gaps in the offsets (filtered or non-AMQP entries)
anywhere, so splitting never loses nor duplicates a message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

from ..fair_split import fair_split

__all__ = ["StreamOffset", "StreamRange", "plan_ends", "split_ranges"]


@dataclass(frozen=True)
class StreamOffset:
    """Immutable stream-mode offset: ``streams`` maps stream name -> next offset (>= 0)."""

    streams: tuple[tuple[str, int], ...]

    @classmethod
    def make(cls, streams: Mapping[str, int]) -> "StreamOffset":
        return cls(tuple(sorted((str(s), int(n)) for s, n in streams.items())))

    @classmethod
    def from_dict(cls, d) -> "StreamOffset":
        """Parse what Spark hands back (dict or JSON string).

        Raises ``ValueError`` for an offset not written by the stream mode (e.g. a queue-mode
        checkpoint: ``{"queues": ..., "session": ...}``), saying to use a new checkpoint.
        """
        if isinstance(d, str):
            d = json.loads(d)
        try:
            streams = d["streams"]
            if not isinstance(streams, dict) or set(d) != {"streams"} or any(
                    isinstance(v, bool) or not isinstance(v, int) or v < 0
                    for v in streams.values()):
                raise TypeError
            return cls.make(streams)
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"Offset {d!r} was not written by the amqp source in stream mode (expected "
                '{"streams": {stream: next offset}}); a checkpoint of the queue mode or of '
                "another source cannot be resumed in stream mode: use a new "
                "checkpointLocation") from None

    def to_dict(self) -> dict:
        return {"streams": {s: n for s, n in self.streams}}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def as_map(self) -> dict[str, int]:
        return dict(self.streams)


@dataclass(frozen=True)
class StreamRange:
    """Offsets ``[start, end)`` of ``stream`` (``end > start``)."""

    stream: str
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_ends(start: Mapping[str, int], tails: Mapping[str, int], max_rows: int | None,
              caps: Mapping[str, int] | None = None) -> dict[str, int]:
    """The next batch's end per stream.

    ``start``: the batch start per stream; ``tails``: the next offset after the last one seen
    on the broker per stream (a stream missing here keeps its start); ``max_rows``: cap of
    offsets in the batch, split fairly across streams (water-filling, as Kafka's
    ``maxOffsetsPerTrigger``), None = all; ``caps``: optional highest end per stream
    (Trigger.AvailableNow's snapshot). Returns ``{stream: end}`` with ``start <= end <=
    tail``. Offsets count positions, gaps included, so a capped batch may hold fewer rows.
    """
    avail = {}
    for s, a in start.items():
        t = tails.get(s, a)
        if caps is not None and s in caps:
            t = min(t, caps[s])
        avail[s] = max(0, t - a)
    take = fair_split(avail, max_rows)
    return {s: start[s] + take.get(s, 0) for s in start}


def split_ranges(start: Mapping[str, int], end: Mapping[str, int], max_per_partition: int,
                 min_partitions: int | None = None) -> list[StreamRange]:
    """The input partitions of batch ``(start, end]``: per stream ``[start, end)`` cut into
    ranges of at most ``max_per_partition`` offsets, then the largest ranges halved until
    there are at least ``min_partitions`` (or every range holds one offset). Streams sorted
    by name, ranges in offset order; the ranges tile each stream's interval exactly.
    """
    out: list[StreamRange] = []
    for s in sorted(end):
        a, b = start.get(s, end[s]), end[s]
        for lo in range(a, b, max_per_partition):
            out.append(StreamRange(s, lo, min(lo + max_per_partition, b)))
    if min_partitions:
        while len(out) < min_partitions:
            i = max(range(len(out)), key=lambda k: out[k].size, default=None)
            if i is None or out[i].size < 2:
                break
            r = out[i]
            mid = r.start + r.size // 2
            out[i:i + 1] = [StreamRange(r.stream, r.start, mid), StreamRange(r.stream, mid, r.end)]
    return out
