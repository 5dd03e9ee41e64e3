"""The queue mode's lag for the query progress: ``reportLatestOffset``'s cache of the queues'
depths. No I/O but the consumer's ``queue_depths``.

Spark asks for the latest offset after every trigger, about every 10 ms while a query is idle,
and a passive ``queue.declare`` is a round trip per queue (measured: docs/reading-patterns.md
"Lag"), so the depths are kept :data:`LAG_REFRESH` seconds; a failed ask is kept as unknown
for as long (the trigger's own calls handle a lost connection).
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from .buffer import Session
from .consumer import QueueConsumer
from .offsets import SourceOffset

__all__ = ["DepthCache", "LAG_REFRESH"]

log = logging.getLogger(__name__)

#: seconds the queues' depths are kept before the broker is asked again
LAG_REFRESH = 1.0


class DepthCache:
    """The newest offset the queues hold, per session, refreshed at most every ``refresh``
    seconds (None: :data:`LAG_REFRESH`) of ``clock`` (monotonic seconds; tests pass a fake
    one)."""

    def __init__(self, refresh: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.refresh = refresh
        self._clock = clock
        #: (clock time, session id, {queue: received + depth} or None when the ask failed)
        self._cached: tuple[float, str, dict[str, int] | None] | None = None

    def latest(self, session: Session | None, consumer: QueueConsumer | None) -> dict | None:
        """Per queue, the deliveries ``session`` received plus the queue's depth (its ready
        messages), as that session's offset (a dict); None without an open consumer or when
        the broker cannot be asked (never raises: the progress is not worth failing the
        query)."""
        if session is None or consumer is None or not consumer.is_open:
            return None
        now = self._clock()
        cached = self._cached
        refresh = LAG_REFRESH if self.refresh is None else self.refresh
        if cached is None or cached[1] != session.id or now - cached[0] >= refresh:
            try:
                depths = consumer.queue_depths()
            except Exception as e:  # noqa: BLE001 - the trigger's own calls handle losses
                log.debug("amqp source: queue depths unavailable (%s)", e)
                self._cached = (now, session.id, None)  # asked again after refresh, not sooner
                return None
            cached = self._cached = (now, session.id, {q: b.received + depths.get(q, 0)
                                                       for q, b in session.buffers.items()})
        if cached[2] is None:
            return None
        latest = {q: max(n, session.buffers[q].received) for q, n in cached[2].items()}
        return SourceOffset.make(session.id, latest).to_dict()
