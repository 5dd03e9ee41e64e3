"""A publisher's steady rate: which messages are due when, and how long to sleep meanwhile.

Used by ``publish_messages(rate=...)`` (the main job's ``--live`` demo publishes the flights at
a rate while its query runs) and by ``python -m spark_amqp.bench.latency`` (its publisher).
Message *k* (0-based) of a run at ``rate`` msg/s is due ``k / rate`` seconds after the start;
a sender wakes at most every :data:`MIN_TICK` seconds and sends every message due by then in
one batch (one socket write), so a fast rate costs batches, not a busy loop.
"""

from __future__ import annotations

import time
from typing import Callable

__all__ = ["MIN_TICK", "due", "next_send_delay", "paced_sends"]

#: the shortest sleep between two sends (seconds): at 10,000 msg/s ~20 messages go per send
MIN_TICK = 0.002


def due(rate: float, elapsed: float, total: int | None = None) -> int:
    """Messages a steady sender at ``rate`` msg/s should have sent ``elapsed`` seconds after
    its start (the first one at 0 s), at most ``total`` (None: no cap)."""
    if elapsed < 0:
        return 0
    n = int(elapsed * rate) + 1
    return n if total is None else min(total, n)


def next_send_delay(rate: float, elapsed: float, sent: int, min_tick: float = MIN_TICK) -> float:
    """Seconds to sleep before the next send: until message ``sent`` (0-based) is due, but at
    least ``min_tick`` (messages due meanwhile go out together)."""
    return max(min_tick, sent / rate - elapsed)


def paced_sends(rate: float, total: int | None, send: Callable[[int], int | None],
                clock: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], None] = time.sleep) -> tuple[int, float]:
    """Call ``send(n)`` with the number of messages due (:func:`due`) until ``total`` are sent
    at ``rate`` msg/s (> 0; ValueError otherwise), sleeping between calls
    (:func:`next_send_delay`). ``send`` returns how many it sent (None: all ``n``); fewer than
    ``n`` means the messages ran out, which ends the run (so ``total`` may be None).
    Returns ``(sent, seconds from the first call to the end)``. ``clock``/``sleep``:
    injectable for tests."""
    if not rate > 0:
        raise ValueError(f"a publish rate must be > 0 msg/s, got {rate!r}")
    t0 = clock()
    sent = 0
    while True:
        n = due(rate, clock() - t0, total) - sent
        if n > 0:
            went = send(n)
            went = n if went is None else went
            sent += went
            if went < n:
                return sent, clock() - t0
        if total is not None and sent >= total:
            return sent, clock() - t0
        sleep(next_send_delay(rate, clock() - t0, sent))
