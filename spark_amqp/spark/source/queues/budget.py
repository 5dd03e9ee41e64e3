"""Trigger.AvailableNow's budget in queue mode: how many messages per queue the run may still
plan, derived from the buffers. Pure (no I/O).

``prepareForTriggerAvailableNow`` snapshots each queue's ready messages (the declare-ok
message-count taken before consuming, AMQP 0-9-1 §1.7.2.2). What the run has taken of it is
what earlier sessions acked plus what the current session planned: a lost session's planned
but unacked deliveries went back to the queue (the broker requeues them), so the run must
still read them, and only its acked part is kept (:meth:`AvailableNowBudget.session_lost`).
The run ends when nothing is left, or when the offset reader gives up (messages that did not arrive
in time stay in the queues for the next run).
"""

from __future__ import annotations

from typing import Mapping

from ..fair_split import fair_split
from .buffer import QueueBuffer

__all__ = ["AvailableNowBudget"]


class AvailableNowBudget:
    """Messages still to plan per queue (>= 0 each), from the snapshot ``counts`` (queue ->
    ready messages) and the current session's ``buffers`` (queue -> :class:`.buffer.QueueBuffer`,
    passed to each method)."""

    def __init__(self, counts: Mapping[str, int]):
        self._snapshot = {q: int(n) for q, n in counts.items()}
        self._acked_before = {q: 0 for q in self._snapshot}   # acked by lost sessions
        self._given_up = False

    def remaining(self, buffers: Mapping[str, QueueBuffer]) -> dict[str, int]:
        """Queue -> messages still to plan: the snapshot less what lost sessions acked and
        what the current session planned (never below 0: redeliveries may come beyond the
        snapshot)."""
        if self._given_up:
            return {q: 0 for q in self._snapshot}
        return {q: max(0, n - self._acked_before[q] - _planned(buffers, q))
                for q, n in self._snapshot.items()}

    def done(self, buffers: Mapping[str, QueueBuffer]) -> bool:
        """True when no queue has anything left to plan: the run ends."""
        return not any(self.remaining(buffers).values())

    def session_lost(self, buffers: Mapping[str, QueueBuffer]) -> None:
        """The session of ``buffers`` is gone: what it acked stays taken; what it planned but
        did not ack went back to the queues and counts as still to plan."""
        for q in self._snapshot:
            b = buffers.get(q)
            if b is not None:
                self._acked_before[q] += b.acked

    def give_up(self) -> None:
        """End the run: nothing more is planned (the rest stays for the next run)."""
        self._given_up = True

    def goal(self, buffers: Mapping[str, QueueBuffer], max_rows: int | None) -> dict[str, int]:
        """The per-queue sizes of a full batch under ``max_rows`` (None = no cap): the
        remaining budget split fairly (:func:`..fair_split.fair_split`)."""
        return fair_split(self.remaining(buffers), max_rows)

    def __repr__(self) -> str:
        return (f"AvailableNowBudget(snapshot={self._snapshot}, acked_before="
                f"{self._acked_before}, given_up={self._given_up})")


def _planned(buffers: Mapping[str, QueueBuffer], queue: str) -> int:
    b = buffers.get(queue)
    return b.planned if b is not None else 0
