"""Message rates over RabbitMQ's default statistics interval (5 s).

RabbitMQ's management plugin samples its counters every ``collect_statistics_interval``
(5000 ms by default) and reports ``<counter>_details.rate`` as the change per second between
the last two samples (``rates_mode = basic``). :class:`Sampler` does the same on the broker's
event loop: every ``interval`` seconds it reads each queue's counters and depth (O(queues),
no per-message work) and keeps the previous sample to difference against.
"""

from __future__ import annotations

import time

from ..broker.stats import QUEUE_COUNTERS
from .views import MESSAGE_STAT_KEYS

__all__ = ["Sampler", "DEFAULT_INTERVAL"]

DEFAULT_INTERVAL = 5.0  # seconds; RabbitMQ's collect_statistics_interval default

_ATTR_TO_KEY = {a: k for k, a in MESSAGE_STAT_KEYS.items()}


def _queue_sample(q) -> dict[str, float]:
    s = {_ATTR_TO_KEY[a]: getattr(q, a) for a in QUEUE_COUNTERS}
    s["deliver_get"] = s["deliver"] + s["get"]
    ready = len(q.ready)
    s["messages_ready"] = ready
    s["messages_unacknowledged"] = q.unacked_count
    s["messages"] = ready + q.unacked_count
    return s


class Sampler:
    """Samples the broker's counters every ``interval`` seconds on its loop.

    ``queue_rates(q)`` / ``global_rates()`` return ``{name: msgs per second}`` (rounded to
    0.1 as RabbitMQ shows them) for the keys
    of message_stats and the queue depths (``messages``, ``messages_ready``,
    ``messages_unacknowledged``); all 0.0 before the second sample.
    """

    def __init__(self, broker, interval: float = DEFAULT_INTERVAL):
        self.broker = broker
        self.interval = interval
        self._prev: dict = {}      # queue -> (t, sample)
        self._rates: dict = {}     # queue -> {key: rate}
        self._gprev: tuple | None = None
        self._grates: dict[str, float] = {}
        self._timer = None

    def start(self) -> None:
        self.sample()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _queues(self):
        for v in self.broker.vhosts.values():
            yield from v.queues.values()

    def global_sample(self) -> dict[str, float]:
        """Broker-wide totals: queue counters (deleted queues included), received, confirmed,
        unroutable, and the depth of all queues."""
        st = self.broker.stats
        queues = list(self._queues())
        t = st.totals(queues)
        s = {_ATTR_TO_KEY[a]: n for a, n in t.items()}
        s["deliver_get"] = s["deliver"] + s["get"]
        s["received"] = st.received
        s["confirm"] = st.confirmed
        s["drop_unroutable"] = st.unroutable
        ready = sum(len(q.ready) for q in queues)
        unacked = sum(q.unacked_count for q in queues)
        s.update(messages=ready + unacked, messages_ready=ready, messages_unacknowledged=unacked)
        return s

    def sample(self) -> None:
        """Take one sample now and schedule the next (replacing a pending one)."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        now = time.monotonic()
        prev, rates, cur = self._prev, {}, {}
        for q in self._queues():
            s = _queue_sample(q)
            cur[q] = (now, s)
            p = prev.get(q)
            if p is not None and now > p[0]:
                dt = now - p[0]
                rates[q] = {k: round((v - p[1].get(k, 0)) / dt, 1) for k, v in s.items()}
        self._prev, self._rates = cur, rates
        g = self.global_sample()
        if self._gprev is not None and now > self._gprev[0]:
            dt = now - self._gprev[0]
            self._grates = {k: round((v - self._gprev[1].get(k, 0)) / dt, 1) for k, v in g.items()}
        self._gprev = (now, g)
        loop = self.broker.loop
        if not loop.is_closed():
            self._timer = loop.call_later(self.interval, self.sample)

    def queue_rates(self, q) -> dict[str, float]:
        return self._rates.get(q, {})

    def global_rates(self) -> dict[str, float]:
        return self._grates
