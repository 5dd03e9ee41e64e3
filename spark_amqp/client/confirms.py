"""Publisher-confirm bookkeeping of one channel: sequence numbers, what is still unconfirmed,
what the broker acked and nacked.

In confirm mode (RabbitMQ extension ``confirm.select``) every publish on a channel gets the
next sequence number 1, 2, …; the broker settles them with ``basic.ack`` / ``basic.nack``
whose ``delivery_tag`` is that number, and ``multiple`` settles every publish up to and
including the tag (RabbitMQ docs "Consumer Acknowledgements and Publisher Confirms",
docs/confirms.md). RabbitMQ settles in order in practice, but the spec allows any order, so a
tag above the oldest unconfirmed one is settled in place; duplicates of a settled tag are
ignored.

Optionally (:meth:`ConfirmTracker.keep_messages`) it also keeps each unconfirmed publish's
message until the broker settles it, for a publisher that publishes them again on a new
connection after losing this one (the fate of an unconfirmed publish is unknown then; RabbitMQ
docs "Consumer Acknowledgements and Publisher Confirms": publishing again is at-least-once).

Not thread-safe: the channel calls :meth:`ConfirmTracker.settle` from its I/O thread under its
condition lock and reads the counts under the same lock; :meth:`ConfirmTracker.add` is called
by the one publishing thread of the channel (a ``deque`` append, safe beside ``settle``).
"""

from __future__ import annotations

from collections import deque

__all__ = ["ConfirmTracker"]


class ConfirmTracker:
    """The unconfirmed publishes of one confirm-mode channel and what was settled since the
    last :meth:`take`.

    Attributes:
        next_seq: int, the sequence number the next publish gets (1 first).
        acked: int, publishes acked since the last :meth:`take`.
        nacked: list[int], sequence numbers nacked since the last :meth:`take` (arrival order).
    """

    __slots__ = ("next_seq", "acked", "nacked", "_unconfirmed", "_early", "_kept")

    def __init__(self) -> None:
        self.next_seq = 1
        self.acked = 0
        self.nacked: list[int] = []
        # sent and not yet popped, ascending; a number also in _early was settled out of order
        self._unconfirmed: deque[int] = deque()
        self._early: set[int] = set()
        # with keep_messages: the message of each number in _unconfirmed, in the same order
        self._kept: deque | None = None

    def keep_messages(self) -> None:
        """From now on keep the message of every publish until it is settled (see
        :meth:`add` and :meth:`unconfirmed_messages`). Raises ``RuntimeError`` while
        publishes numbered without their messages are unconfirmed."""
        if self._kept is None:
            if self._unconfirmed:
                raise RuntimeError("keep_messages() with publishes already unconfirmed")
            self._kept = deque()

    def add(self, n: int = 1, messages=None) -> int:
        """Number ``n`` (int >= 1) new publishes; returns the first of their consecutive
        sequence numbers. They count as unconfirmed from now on. With :meth:`keep_messages`,
        ``messages`` is their messages (a sequence of ``n``, any objects), else ignored."""
        first = self.next_seq
        self.next_seq = first + n
        if self._kept is not None:
            # the messages first: settle() (I/O thread) pops both deques while the numbers are
            # there, so the messages never lag behind them
            self._kept.extend(messages)  # type: ignore[arg-type]
        if n == 1:
            self._unconfirmed.append(first)
        else:
            self._unconfirmed.extend(range(first, first + n))
        return first

    def settle(self, tag: int, multiple: bool, nack: bool) -> int:
        """Apply one ``basic.ack`` (``nack`` False) or ``basic.nack`` with ``delivery_tag``
        ``tag`` and its ``multiple`` bit; returns how many publishes it settled (0 for a
        duplicate or a tag never sent)."""
        dq = self._unconfirmed
        early = self._early
        kept = self._kept
        settled: list[int] | None = [] if nack else None
        n = 0
        if multiple:  # everything up to and including tag
            while dq and dq[0] <= tag:
                s = dq.popleft()
                if kept is not None:
                    kept.popleft()
                if s in early:
                    early.discard(s)
                else:
                    n += 1
                    if settled is not None:
                        settled.append(s)
        elif tag in early:
            pass  # duplicate confirm of an already settled publish
        elif dq and dq[0] == tag:
            dq.popleft()
            if kept is not None:
                kept.popleft()
            n = 1
            if settled is not None:
                settled.append(tag)
        elif dq and dq[0] < tag < self.next_seq:  # out of order: settle it in place
            early.add(tag)
            n = 1
            if settled is not None:
                settled.append(tag)
        # (a tag below the head was settled before: duplicate, ignored)
        while dq and dq[0] in early:
            early.discard(dq.popleft())
            if kept is not None:
                kept.popleft()
        if settled is not None:
            self.nacked.extend(settled)
        else:
            self.acked += n
        return n

    @property
    def in_flight(self) -> int:
        """Publishes numbered and not yet acked or nacked (int)."""
        return len(self._unconfirmed) - len(self._early)

    @property
    def oldest(self) -> int:
        """The lowest unsettled sequence number (``next_seq`` when none): every publish below
        it is settled."""
        dq = self._unconfirmed
        return dq[0] if dq else self.next_seq

    def unconfirmed(self) -> set[int]:
        """The unsettled sequence numbers (a new set)."""
        return set(self._unconfirmed) - self._early

    def unconfirmed_messages(self) -> list:
        """The kept messages (:meth:`keep_messages`) of the unsettled publishes, in publish
        order (a new list; empty when not keeping)."""
        if self._kept is None:
            return []
        early = self._early
        return [m for s, m in zip(self._unconfirmed, self._kept) if s not in early]

    def take(self) -> tuple[int, list[int]]:
        """``(acked, nacked)`` settled since the previous call (nacked ascending); resets
        both."""
        out = (self.acked, sorted(self.nacked))
        self.acked = 0
        self.nacked = []
        return out
