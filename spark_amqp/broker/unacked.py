"""A channel's outstanding deliveries (sent, not yet acked/nacked/rejected), in tag order.

Delivery tags only grow on a channel, so the outstanding ones are kept as three parallel
lists - tags, messages, owners (the :class:`~.queue.Consumer` of a basic.deliver, the
:class:`~.queue.Queue` of a basic.get-ok) - read from a ``head`` index on. Recording a
delivery appends to the lists: no tuple or dict entry per message, so deliveries neither
allocate garbage-collected containers (which would run the collector over every message
held) nor pay for hashing. ``basic.ack multiple=true`` takes a slice; a tag is found by
bisection. An entry settled out of order becomes a hole (message ``None``) until the head
passes it, or a compaction when holes outnumber live entries.

Settled entries are handed out as a batch ``(tags, messages, owners)`` of equal-length lists
in tag order (holes removed).
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import compress, repeat

__all__ = ["Unacked"]

_COMPACT_MIN = 4096   # entries: below this, holes and a consumed head are left in place


class Unacked:
    """Outstanding deliveries of one channel; ``len()`` = how many."""

    __slots__ = ("tags", "msgs", "owners", "head", "live", "holes")

    def __init__(self):
        self.tags: list[int] = []
        self.msgs: list = []
        self.owners: list = []
        self.head = 0      # entries before it are gone
        self.live = 0      # outstanding entries
        self.holes = 0     # settled entries at or after head

    def __len__(self) -> int:
        return self.live

    def __bool__(self) -> bool:
        return self.live > 0

    def __contains__(self, tag: int) -> bool:
        return self._index(tag) >= 0

    # ------------------------------------------------------------------ adding
    def add(self, tag: int, msg, owner) -> None:
        """Record one delivery; ``tag`` is above every tag recorded before."""
        self.tags.append(tag)
        self.msgs.append(msg)
        self.owners.append(owner)
        self.live += 1

    def add_run(self, tag: int, msgs: list, owner) -> None:
        """Record ``msgs`` delivered to ``owner`` with tags ``tag``, ``tag + 1``, ..."""
        n = len(msgs)
        self.tags.extend(range(tag, tag + n))
        self.msgs.extend(msgs)
        self.owners.extend(repeat(owner, n))
        self.live += n

    def restore(self, batches: list[tuple[list, list, list]]) -> None:
        """Put taken batches back (tx.rollback), keeping tag order."""
        rows = list(zip(*self._slice(self.head, len(self.tags))))
        for tags, msgs, owners in batches:
            rows.extend(zip(tags, msgs, owners))
        rows.sort(key=lambda r: r[0])
        self.tags = [r[0] for r in rows]
        self.msgs = [r[1] for r in rows]
        self.owners = [r[2] for r in rows]
        self.head = self.holes = 0
        self.live = len(rows)

    # ------------------------------------------------------------------ taking
    def _index(self, tag: int) -> int:
        tags = self.tags
        i = bisect_left(tags, tag, self.head)
        if i < len(tags) and tags[i] == tag and self.msgs[i] is not None:
            return i
        return -1

    def _slice(self, i: int, j: int) -> tuple[list, list, list]:
        """Live entries of positions [i, j) as a batch."""
        tags, msgs, owners = self.tags[i:j], self.msgs[i:j], self.owners[i:j]
        if self.holes:
            gone = msgs.count(None)
            if gone:
                self.holes -= gone
                keep = [m is not None for m in msgs]
                tags = list(compress(tags, keep))
                msgs = list(compress(msgs, keep))
                owners = list(compress(owners, keep))
        return tags, msgs, owners

    def owners_upto(self, tag: int, multiple: bool) -> set:
        """The distinct owners a nack/reject of ``tag`` (``multiple``: every tag up to it,
        tag 0 = all) would settle, without removing anything; empty when none."""
        if multiple and tag == 0:
            i = len(self.tags) - 1
        else:
            i = self._index(tag)
            if i < 0:
                return set()
            if not multiple:
                return {self.owners[i]}
        out = set(self.owners[self.head:i + 1])
        out.discard(None)
        return out

    def take_one(self, tag: int) -> tuple[list, list, list] | None:
        """Remove outstanding ``tag``: a one-entry batch, or None when it is not outstanding."""
        i = self._index(tag)
        if i < 0:
            return None
        msgs, owners = self.msgs, self.owners
        m, o = msgs[i], owners[i]
        msgs[i] = owners[i] = None
        self.live -= 1
        if i == self.head:
            h = i + 1
            n = len(msgs)
            while h < n and msgs[h] is None:
                h += 1
            self.holes -= h - i - 1
            self.head = h
        else:
            self.holes += 1
        self._trim()
        return [tag], [m], [o]

    def take_upto(self, tag: int) -> tuple[list, list, list] | None:
        """Remove every outstanding tag <= ``tag`` (ack multiple): a batch, or None when
        ``tag`` itself is not outstanding (RabbitMQ requires it)."""
        i = self._index(tag)
        if i < 0:
            return None
        batch = self._slice(self.head, i + 1)
        self.head = i + 1
        self.live -= len(batch[0])
        self._trim()
        return batch

    def take_all(self) -> tuple[list, list, list]:
        """Remove everything outstanding (tag 0 multiple, channel close, recover)."""
        batch = self._slice(self.head, len(self.tags))
        self.tags, self.msgs, self.owners = [], [], []
        self.head = self.live = self.holes = 0
        return batch

    def _trim(self) -> None:
        if not self.live:
            self.tags, self.msgs, self.owners = [], [], []
            self.head = self.holes = 0
            return
        head = self.head
        if self.holes > _COMPACT_MIN and self.holes > self.live:
            self.tags, self.msgs, self.owners = self._slice(head, len(self.tags))
            self.head = 0
        elif head > _COMPACT_MIN and head * 2 > len(self.tags):
            del self.tags[:head], self.msgs[:head], self.owners[:head]
            self.head = 0
