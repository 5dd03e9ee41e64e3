"""Log lines that an attacker cannot multiply: one line per kind of event per interval.

A client that is refused (a connection over a limit, a malformed HTTP request) must leave a
trace in the log, but a flood of them must not fill the disk: 500 requests with a bad
``Authorization`` header once added 945 KB of tracebacks in 2.6 s (issue 41).
:class:`RateLimitedLog` writes the first event of a kind at once, counts the ones that follow
within ``interval`` seconds, and writes their number in one more line when the interval ends
(``... and 2953 more like it in the last 10 s``).
"""

from __future__ import annotations

import asyncio
import logging
import time

__all__ = ["RateLimitedLog"]

#: kinds remembered at most; older ones are forgotten (a flood of distinct keys cannot grow it)
_MAX_KEYS = 1000


class RateLimitedLog:
    """At most one line per ``key`` per ``interval`` seconds on ``logger``.

    Args:
        logger: where lines go.
        interval: seconds between two lines of the same key (default 10).
        loop: the event loop that writes the summary line of the events held back at the end
            of an interval; without one, that count goes into the next line of the key.

    ``log(level, key, msg, *args)`` formats as :meth:`logging.Logger.log`; ``key`` is any
    hashable naming the kind of event (e.g. ``("refused", "amqp")``). ``counts[key]`` is the
    number of events of each kind seen so far (written or not).
    """

    def __init__(self, logger: logging.Logger, interval: float = 10.0,
                 loop: asyncio.AbstractEventLoop | None = None):
        self.logger = logger
        self.interval = interval
        self.loop = loop
        self.counts: dict = {}
        self._window: dict = {}   # key -> [window start, events held back, level, last line]

    def log(self, level: int, key, msg: str, *args) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1
        now = time.monotonic()
        w = self._window.get(key)
        if w is not None and now - w[0] < self.interval:
            w[1] += 1
            w[3] = (msg, args)
            return
        if w is not None and w[1]:
            self._summary(key, w)
        if len(self._window) >= _MAX_KEYS:
            self._window.clear()
        self._window[key] = [now, 0, level, None]
        self.logger.log(level, msg, *args)
        if self.loop is not None:
            self.loop.call_later(self.interval, self._end_window, key, now)

    def warning(self, key, msg: str, *args) -> None:
        self.log(logging.WARNING, key, msg, *args)

    def _end_window(self, key, start: float) -> None:
        w = self._window.get(key)
        if w is None or w[0] != start:
            return
        if w[1]:
            self._summary(key, w)
        del self._window[key]

    def _summary(self, key, w: list) -> None:
        msg, args = w[3]
        self.logger.log(w[2], msg + " (and %d more like it in the last %.0f s)", *args, w[1], self.interval)
        w[1] = 0
