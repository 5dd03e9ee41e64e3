"""Offsets of the ``amqp`` source: ``{"queues": {queue: n, ...}, "session": "<uuid>"}``.

``n`` counts the deliveries of that queue planned so far in one reader *session* (one driver
connection; a reconnect or a restart starts a new session at 0). Spark stores offsets as JSON and
compares them as strings (``PythonStreamingSourceOffset``; lessons §1.4), so :meth:`to_dict`
always yields the same key order: top-level keys sorted, queues sorted by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

__all__ = ["SourceOffset"]


@dataclass(frozen=True)
class SourceOffset:
    """An immutable source offset. ``queues`` maps queue name -> count planned (>= 0)."""

    session: str
    queues: tuple[tuple[str, int], ...]

    @classmethod
    def zero(cls, session: str, queues) -> "SourceOffset":
        """The offset before any message of ``session`` (every queue at 0)."""
        return cls(session, tuple((q, 0) for q in sorted(queues)))

    @classmethod
    def make(cls, session: str, queues: Mapping[str, int]) -> "SourceOffset":
        """Build from a mapping, canonicalising the queue order."""
        return cls(session, tuple(sorted((str(q), int(n)) for q, n in queues.items())))

    @classmethod
    def from_dict(cls, d) -> "SourceOffset":
        """Parse what Spark hands back (a dict, or a JSON string).

        Raises ``ValueError`` for an offset this source did not write (e.g. a checkpoint of
        another source): the message says to use a new checkpoint location.
        """
        if isinstance(d, str):
            d = json.loads(d)
        try:
            session = d["session"]
            queues = d["queues"]
            if not isinstance(session, str) or not isinstance(queues, dict):
                raise TypeError
            return cls.make(session, queues)
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"Offset {d!r} was not written by the amqp source (expected "
                '{"queues": {queue: n}, "session": id}); use a new checkpointLocation') from None

    def to_dict(self) -> dict:
        """The canonical dict (``json.dumps`` of it is stable: sorted keys, sorted queues)."""
        return {"queues": {q: n for q, n in self.queues}, "session": self.session}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def get(self, queue: str, default: int = 0) -> int:
        """Count planned for ``queue`` (``default`` if the queue is not in this offset)."""
        for q, n in self.queues:
            if q == queue:
                return n
        return default

    def as_map(self) -> dict[str, int]:
        return dict(self.queues)
