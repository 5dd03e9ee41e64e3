"""Batch planning of the queue mode: from what is buffered, the read limits and
Trigger.AvailableNow's budget to the number of messages each queue gives the next batch.

Pure (no I/O, no clock): the offset reader (:mod:`.offset_reader`) drains the consumer into
the buffers (:mod:`.buffer`) and asks here; the counterpart of the per-trigger rate limit of Spark's
Kafka source (``KafkaMicroBatchStream``, ``maxOffsetsPerTrigger``), for queues whose offsets
count deliveries.

* the trigger's limits (a row cap, a byte cap, a minimum) come from :mod:`..read_limits`,
  shared with the stream mode.
* :func:`plan_batch`: messages per queue: the row cap split fairly across queues (capped by
  the budget), then the byte cap split fairly over those messages' bytes (never below one
  message for a queue that has any: a message above the cap goes alone).
* :func:`available_now_full` and :func:`cannot_grow`: whether a batch is as big as it can
  get (Trigger.AvailableNow waits for that; pacing lets such a batch go below its minimum).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..fair_split import fair_split
from .buffer import QueueBuffer

__all__ = ["BatchPlan", "plan_batch", "available_now_full", "cannot_grow", "with_framing"]


def with_framing(max_bytes: int) -> int:
    """A byte limit plus the allowance for framing: the buffers count messages' frames (body
    + ~60-100 B of method/header frames + 8 B per body frame), the options mean bodies; 1/1024
    of the limit covers the framing of messages from ~100 KiB up, so e.g. two 8 MiB bodies fit
    a 16 MiB batch. (Small messages' framing is not covered: their batches hold a little less
    than the limit in bodies.)"""
    return max_bytes + max_bytes // 1024


@dataclass(frozen=True)
class BatchPlan:
    """Messages to plan per queue (``want``: queue -> n >= 0) and whether the byte cap cut
    the batch (``byte_capped``: it is full)."""

    want: dict[str, int]
    byte_capped: bool = False

    @property
    def total(self) -> int:
        return sum(self.want.values())


def plan_batch(buffers: Mapping[str, QueueBuffer], max_rows: int | None,
               max_bytes: int | None, budget: Mapping[str, int] | None = None) -> BatchPlan:
    """Messages to plan per queue from the unplanned deliveries in ``buffers``: the row limit
    split fairly (:func:`..fair_split.fair_split`, each queue capped by ``budget``, the
    Trigger.AvailableNow messages still to plan), then the byte limit (``max_bytes`` plus
    :func:`with_framing`'s allowance) split fairly over the bytes of those messages, rounded
    down to whole messages but never below one message for a queue that has any (a message
    larger than the limit goes alone)."""
    avail = {q: b.unplanned for q, b in buffers.items()}
    want = fair_split(avail, max_rows, budget)
    if max_bytes is None:
        return BatchPlan(want)
    weights = {q: buffers[q].bytes_between(buffers[q].planned, buffers[q].planned + n)
               for q, n in want.items() if n}
    cap = with_framing(max_bytes)
    if sum(weights.values()) <= cap:
        return BatchPlan(want)
    shares = fair_split(weights, cap)
    capped = False
    for q in weights:
        b = buffers[q]
        n = b.end_within(b.planned, shares[q], b.planned + want[q]) - b.planned
        if n < want[q]:
            capped = True
        want[q] = n
    return BatchPlan(want, capped)


def _window_full(b: QueueBuffer, window: int) -> bool:
    """The queue's prefetch window (``window`` unacked deliveries; 0 = unlimited) is full:
    nothing more arrives before an ack."""
    return bool(window) and b.received - b.acked >= window


def available_now_full(plan: BatchPlan, goal: Mapping[str, int],
                       buffers: Mapping[str, QueueBuffer], window: int) -> bool:
    """Trigger.AvailableNow: is the batch complete? Every queue reached its share of the goal
    (:meth:`.budget.AvailableNowBudget.goal`), or its prefetch window is full (a prefetch
    below the trigger share: it gets nothing more until this batch is acked); or the byte
    cap cut the batch."""
    if plan.byte_capped:
        return True
    return all(plan.want.get(q, 0) >= g or _window_full(buffers[q], window)
               for q, g in goal.items())


def cannot_grow(plan: BatchPlan, max_rows: int | None, buffers: Mapping[str, QueueBuffer],
                unplanned_bytes: int, max_buffered_bytes: int, window: int) -> bool:
    """Pacing: the batch goes even below its minimum when it cannot grow before it is planned:
    a cap cut it (the byte cap, or ``max_rows`` reached), the driver holds
    ``max_buffered_bytes`` (the socket is not read), or every queue's prefetch window is
    full."""
    return (plan.byte_capped
            or (max_rows is not None and plan.total >= max_rows)
            or unplanned_bytes >= max_buffered_bytes
            or bool(window) and all(_window_full(b, window) for b in buffers.values()))
