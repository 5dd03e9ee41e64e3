"""Stream mode of the ``amqp`` source: Spark's callbacks (Kafka's ``KafkaMicroBatchStream``).

For RabbitMQ stream queues (``x-queue-type=stream``; option ``stream`` or ``superStream``,
:mod:`.options`). Unlike the queue mode (:mod:`..queues.micro_batch_stream`), no message passes
through the driver and nothing depends on acks:

* the driver (Spark's long-lived source runner) learns each stream's tail and plans batches
  ``{"streams": {stream: next offset}}``: the offset reader
  (:class:`.offset_reader.StreamOffsetReader`: the probe, one chunk per probe, not the data;
  ``maxMessagesPerTrigger`` split fairly, Trigger.AvailableNow's snapshot, pacing, the probe's
  failover); the read limits come from :mod:`..read_limits`;
* ``partitions(start, end)`` cuts the ranges into :class:`.partition_reader.
  StreamRangePartition`\\ s (``maxMessagesPerPartition``, ``minPartitions``; :mod:`.offsets`);
* ``read`` runs on the executors: each partition connects and consumes its own range (the
  partition reader, :mod:`.partition_reader` over :func:`.consumer.read_range`).

Guarantee: replaying a batch reads the same rows (an offset range of an append-only log), so
with a checkpoint and an idempotent sink (the file sink, or ``foreachBatch`` keyed by batch id)
the output is exactly-once; retention that removes needed offsets is data loss
(``failOnDataLoss``). Batch reads (``spark.read``) use :class:`.batch_reader.AmqpStreamBatchReader`.

Where things run (lessons §1.3): ``__init__`` does no I/O; the probe connection is opened
lazily on the driver and never pickled.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterator

from pyspark.sql.datasource import DataSourceStreamReader

from ...errors import leading_errors
from ..compat import SupportsTriggerAvailableNow
from ..read_limits import default_read_limit, read_limits
from .offset_reader import StreamOffsetReader
from .offsets import StreamOffset, split_ranges
from .options import StreamOptions
from .partition_reader import StreamRangePartition, read_partition

__all__ = ["AmqpStreamMicroBatchStream"]

log = logging.getLogger(__name__)


@leading_errors("initialOffset", "latestOffset", "reportLatestOffset", "getDefaultReadLimit",
                "prepareForTriggerAvailableNow", "partitions", "read", "commit")
class AmqpStreamMicroBatchStream(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("amqp").option("stream", ...)``: the stream mode's micro-batch
    stream (see the module doc; the queue mode's is
    :class:`..queues.micro_batch_stream.AmqpQueueMicroBatchStream`).

    ``options``: validated :class:`.options.StreamOptions` (``endingOffsets`` is refused: batch
    only). ``probe_factory``: builds the driver's probe from the options (tests pass a fake
    :class:`.probe.TailProbe`). ``clock``: monotonic seconds for the probe's pacing and
    failover window (tests pass a fake one; an unpickled instance gets ``time.monotonic``).

    Readable state: :attr:`offsets` (the :class:`.offset_reader.StreamOffsetReader`).
    """

    def __init__(self, options: StreamOptions, probe_factory=None,
                 clock: Callable[[], float] = time.monotonic):
        ending = [k for k, v in (("endingOffsets", options.ending),
                                 ("endingTimestamp", options.ending_timestamp_ms),
                                 ("endingOffsetsByTimestamp", options.ending_by_timestamp))
                  if v is not None]
        if ending:
            raise ValueError(f"Option '{ending[0]}' of the amqp source is for batch reads "
                             "(spark.read) only; a streaming query runs until it is stopped "
                             "(use trigger(availableNow=True) to read what is there and stop).")
        self.options = options
        self._probe_factory = probe_factory
        self._clock = clock
        self._reset()

    def _reset(self) -> None:
        self.offsets = StreamOffsetReader(self.options, self._probe_factory, self._clock)

    def __getstate__(self) -> dict:
        return {"options": self.options, "_probe_factory": self._probe_factory}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._clock = time.monotonic
        self._reset()

    def failover_timeout(self) -> float:
        """The ``failoverTimeout`` option (seconds), or the probe's default."""
        return self.offsets.failover_timeout()

    # -- offsets -------------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """Where a new query starts: ``startingOffsets`` (default ``latest``) or
        ``startingTimestamp`` resolved on the broker."""
        return self.offsets.initial_offset()

    def getDefaultReadLimit(self):
        """``ReadMaxRows(maxMessagesPerTrigger)`` when that option is set, else
        ``ReadAllAvailable()``."""
        return default_read_limit(self.options.max_messages_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        """Snapshot every stream's tail: this run plans nothing beyond it."""
        self.offsets.prepare_available_now()

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """The end of the next batch: each stream's tail (capped by the limit and by
        Trigger.AvailableNow's snapshot), or ``start`` when there is nothing new
        (:meth:`.offset_reader.StreamOffsetReader.next_end`)."""
        limits = read_limits(limit, start is not None, self.options.max_messages_per_trigger)
        return self.offsets.next_end(start, limits)

    def reportLatestOffset(self):
        """The tails last seen on the broker (Spark shows them as ``latestOffset`` in the
        query progress, next to the batch's end: the difference is the lag)."""
        return self.offsets.latest_available()

    # -- partitions and reading ----------------------------------------------------------------

    def partitions(self, start: dict, end: dict) -> list:
        """``[start, end)`` per stream, split by ``maxMessagesPerPartition`` and
        ``minPartitions``. A replayed batch (after a restart) gets the same partitions."""
        s = StreamOffset.from_dict(start).as_map()
        e = StreamOffset.from_dict(end).as_map()
        o = self.options
        ranges = split_ranges(s, e, o.max_messages_per_partition, o.min_partitions)
        return [StreamRangePartition(r.stream, r.start, r.end) for r in ranges]

    def read(self, partition: StreamRangePartition) -> Iterator:
        """Executor side: consume the partition's range (:mod:`.partition_reader`)."""
        return read_partition(self.options, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: a stream keeps no consumer position (the checkpoint does)."""
        self.offsets.commit(end)

    def stop(self) -> None:
        probe = self.offsets.current_probe
        bytes_in = probe.bytes_received if probe is not None else 0
        self.offsets.close()
        log.info("amqp stream source stopped: %s, driver received %d bytes",
                 self.offsets.stats, bytes_in)
