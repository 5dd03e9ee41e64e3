"""Trigger pacing of the ``amqp`` source: ``minMessagesPerTrigger`` and ``maxTriggerDelay``.

Spark's Kafka source (spark-sql-kafka, ``KafkaMicroBatchStream.delayBatch``) skips a
micro-batch while fewer than ``minOffsetsPerTrigger`` records are available, until
``maxTriggerDelay`` has passed; PySpark 4.2+ names that limit ``ReadMinRows``
(``pyspark.sql.streaming.datasource``). A Python source hands Spark one read limit, not Kafka's
composite of a minimum and a maximum, so the source keeps its maximum as the default read limit
(``ReadMaxRows``/``ReadMaxBytes``) and enforces the minimum itself with a :class:`TriggerPacer`
(and honours a ``ReadMinRows`` that Spark passes, with the option's delay).

Both modes use it the same way: ``latestOffset`` counts the rows it could plan now and asks
:meth:`TriggerPacer.ready`; False means "return ``start`` unchanged" (no batch this trigger).
Under ``Trigger.AvailableNow`` the readers do not ask (a run must end, PySpark's
``ReadMinRows`` docstring: "the source may end up waiting forever"). No I/O.
"""

from __future__ import annotations

import time
from typing import Callable, Mapping

from ..option_values import OptionErrors
from ..options_table import Option

__all__ = ["TriggerPacer", "PACING_OPTIONS", "parse_pacing", "DEFAULT_MAX_TRIGGER_DELAY"]

#: Kafka source's maxTriggerDelay default (spark-sql-kafka: "15m"), in seconds
DEFAULT_MAX_TRIGGER_DELAY = 15 * 60.0

#: the pacing options, the same in both modes (:func:`parse_pacing`)
PACING_OPTIONS = (
    Option("minMessagesPerTrigger", "int", None,
           "no batch until this many messages are available (queue mode: buffered by the "
           "driver; stream mode: offsets between the last batch's end and the streams' "
           "tails), unless `maxTriggerDelay` has passed or the batch is full. An integer >= 1, "
           "at most `maxMessagesPerTrigger`; in queue mode also at most the prefetch windows "
           "of all queues (`prefetch` x queues; the default `prefetch` grows to hold it)",
           "unset (no pacing)", section="pacing", minimum=1),
    Option("maxTriggerDelay", "duration", DEFAULT_MAX_TRIGGER_DELAY,
           "only with `minMessagesPerTrigger`: the longest time between two batches when "
           "messages are there. Spark's duration syntax, as the Kafka source: an integer and a "
           "unit `us`, `ms`, `s`, `m`/`min`, `h`, `d` (`500ms`, `30s`, `15m`); a bare integer "
           "is milliseconds", "`15m` (Kafka's)", section="pacing"),
)


class TriggerPacer:
    """When a trigger may plan a batch under a minimum of rows and a maximum delay.

    ``min_rows``: rows a batch waits for (>= 1). ``max_delay``: seconds after the last batch
    (or after the first call, the query's start, which counts as a batch) when a batch goes
    with whatever is there (at least one row: never an empty batch). ``clock``: monotonic
    seconds (tests pass a fake).

    Differences from Kafka's ``delayBatch``, on purpose: Kafka's timer starts at 0 (its first
    trigger never waits) and restarts whenever the delay passes, with or without records (a
    record arriving just after that waits a whole delay again); here the delay counts from the
    last batch actually planned, so the first rows after a delay that passed idle go at once.
    """

    def __init__(self, min_rows: int, max_delay: float,
                 clock: Callable[[], float] = time.monotonic):
        self.min_rows = min_rows
        self.max_delay = max_delay
        self._clock = clock
        self._last_batch: float | None = None
        #: why the last ``ready`` said yes: "minimum", "full", "delay" (None before / on no)
        self.reason: str | None = None

    def ready(self, available: int, full: bool = False, min_rows: int | None = None) -> bool:
        """True when a batch of the ``available`` rows may be planned now.

        ``full``: the batch cannot grow any more before it is planned (a row or byte cap is
        reached, the prefetch windows or ``maxBufferedBytes`` are full): it goes, as a batch at
        the cap satisfies any minimum the caps allow. ``min_rows``: overrides the option (a
        ``ReadMinRows`` that Spark passed). Never True when ``available`` is 0.
        """
        now = self._clock()
        if self._last_batch is None:
            self._last_batch = now
        self.reason = None
        if available <= 0:
            return False
        if available >= (self.min_rows if min_rows is None else min_rows):
            self.reason = "minimum"
        elif full:
            self.reason = "full"
        elif now - self._last_batch >= self.max_delay:
            self.reason = "delay"
        else:
            return False
        return True

    def planned(self) -> None:
        """A batch was planned: the delay counts from now."""
        self._last_batch = self._clock()


def parse_pacing(o: Mapping[str, str], errors: OptionErrors,
                 max_trigger: int | None) -> tuple[int | None, float]:
    """``minMessagesPerTrigger`` and ``maxTriggerDelay`` (seconds) of either mode
    (:data:`PACING_OPTIONS`).

    ``o``: the lower-cased options; ``errors``: the mode's wording; ``max_trigger``: the parsed
    ``maxMessagesPerTrigger``. Raises ``ValueError`` naming the option for a non-integer or < 1
    minimum, a bad duration, a minimum above ``maxMessagesPerTrigger`` (no batch could reach
    it), or ``maxTriggerDelay`` without ``minMessagesPerTrigger`` (Kafka ignores it there; here
    it would be silently unused).
    """
    minimum, delay = PACING_OPTIONS
    min_trigger = minimum.parse(o, errors, minimum.default)
    max_delay = delay.parse(o, errors, delay.default)
    if min_trigger is None and "maxtriggerdelay" in o:
        raise ValueError(f"Option 'maxTriggerDelay' of {errors.subject} only applies with "
                         "'minMessagesPerTrigger' (the delay bounds the wait for that "
                         "minimum): set minMessagesPerTrigger too, or remove maxTriggerDelay.")
    if min_trigger is not None and max_trigger is not None and min_trigger > max_trigger:
        raise ValueError(f"Option 'minMessagesPerTrigger' of {errors.subject} ({min_trigger}) "
                         f"is above 'maxMessagesPerTrigger' ({max_trigger}): no batch could "
                         "reach the minimum. Allowed: 1 .. maxMessagesPerTrigger.")
    return min_trigger, max_delay
