"""Trigger.AvailableNow's budget in queue mode: how many messages per queue the run may still
plan. Pure (no I/O).

``prepareForTriggerAvailableNow`` snapshots each queue's ready messages (the declare-ok
message-count taken before consuming, AMQP 0-9-1 §1.7.2.2); every planned batch uses up its
messages; a lost session gives back what was planned but not acked (the broker requeues it,
so the run must still read it); the run ends when nothing is left (or when the reader gives
up: messages that did not arrive in time stay in the queues for the next run).
"""

from __future__ import annotations

from typing import Mapping

from ..fair_split import fair_split

__all__ = ["AvailableNowBudget"]


class AvailableNowBudget:
    """Messages still to plan per queue (>= 0 each). ``counts``: the snapshot, queue ->
    ready messages."""

    def __init__(self, counts: Mapping[str, int]):
        self._left = {q: int(n) for q, n in counts.items()}

    @property
    def remaining(self) -> dict[str, int]:
        """A copy of queue -> messages still to plan."""
        return dict(self._left)

    @property
    def done(self) -> bool:
        """True when no queue has anything left to plan: the run ends."""
        return not any(self._left.values())

    def planned(self, queue: str, n: int) -> None:
        """``n`` messages of ``queue`` were planned (never below 0: redeliveries may come
        beyond the snapshot)."""
        self._left[queue] = max(0, self._left.get(queue, 0) - n)

    def give_back(self, queue: str, n: int) -> None:
        """``n`` planned but unacked messages of ``queue`` went back to the queue (session
        lost): the run must read them again."""
        self._left[queue] = self._left.get(queue, 0) + n

    def give_up(self) -> None:
        """End the run: nothing more is planned (the rest stays for the next run)."""
        self._left = {q: 0 for q in self._left}

    def goal(self, max_rows: int | None) -> dict[str, int]:
        """The per-queue sizes of a full batch under ``max_rows`` (None = no cap): the
        remaining budget split fairly (:func:`..fair_split.fair_split`)."""
        return fair_split(dict(self._left), max_rows)

    def __repr__(self) -> str:
        return repr(self._left)
