"""Queue mode of the ``amqp`` source: Spark's callbacks (Kafka's ``KafkaMicroBatchStream``).

Where things run (lessons §1.3): one instance lives in Spark's long-lived Python source runner
on the driver and receives ``initialOffset``/``latestOffset``/``partitions``/``commit``/
``stop``; a second instance is pickled to the executors and only runs ``read``. So
``__init__`` does no I/O, and each callback hands over to the part that owns the work:

* offsets, acks and the driver's consumer: the offset reader
  (:class:`.offset_reader.QueueOffsetReader`: drain, plan, take, ack, loss), which connects
  lazily in the first ``latestOffset`` (or ``prepareForTriggerAvailableNow``); the read limits
  come from :mod:`..read_limits`;
* partitions: :class:`.partitions.QueuePartitioner` (slices of the frames the driver
  received, inline or served from the runner by the partition server, which it owns);
* ``read``: the partition reader (:func:`.partition_reader.read_partition`, executor side,
  no broker I/O);
* Spark's SIGTERM of the runner process: :func:`..runner_process.close_on_sigterm`.

Guarantee: at-least-once; a queue message is acked only after the micro-batch holding it is
committed. A crash between a batch's sink commit and the next ``latestOffset`` replays at most
that batch (as redeliveries).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterator

from pyspark.sql.datasource import DataSourceStreamReader

from ...errors import leading_errors
from ..compat import SupportsTriggerAvailableNow
from ..read_limits import default_read_limit, read_limits
from ..runner_process import close_on_sigterm
from .consumer import QueueConsumer
from .offset_reader import QueueOffsetReader
from .options import SourceOptions
from .partition_reader import QueueInputPartition, read_partition
from .partitions import QueuePartitioner

__all__ = ["AmqpQueueMicroBatchStream"]

log = logging.getLogger(__name__)


@leading_errors("initialOffset", "latestOffset", "reportLatestOffset", "getDefaultReadLimit",
                "prepareForTriggerAvailableNow", "partitions", "read", "commit")
class AmqpQueueMicroBatchStream(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("amqp").option("queue", ...)``: the queue mode's micro-batch
    stream (see the module doc; the stream mode's is
    :class:`..streams.micro_batch_stream.AmqpStreamMicroBatchStream`).

    ``options``: validated :class:`.options.SourceOptions`. ``consumer_factory``: builds the
    driver consumer (a :class:`.consumer.QueueConsumer`) from the options (default
    :class:`.consumer.DriverConsumer`); tests pass a fake. ``clock``/``sleep``: monotonic
    seconds and the wait for the driver's back-off, deadlines, waits, pacing and lag cache
    (tests pass fakes; an unpickled instance gets ``time.monotonic``/``time.sleep``).

    Readable state: :attr:`offsets` (the :class:`.offset_reader.QueueOffsetReader`),
    :attr:`partitioner`, and, as shortcuts, :attr:`supervisor` and :attr:`available_now`.
    """

    def __init__(self, options: SourceOptions,
                 consumer_factory: Callable[[SourceOptions], QueueConsumer] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.options = options
        self._consumer_factory = consumer_factory
        self._clock = clock
        self._sleep = sleep
        self._reset_runtime()

    def _reset_runtime(self) -> None:
        self.offsets = QueueOffsetReader(self.options, self._consumer_factory, self._clock,
                                         self._sleep)
        self.partitioner = QueuePartitioner(self.options)
        self._runner_hooked = False

    # Pickled to the executors: only the configuration travels, never sockets or buffers.
    def __getstate__(self) -> dict:
        return {"options": self.options, "_consumer_factory": self._consumer_factory}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._clock, self._sleep = time.monotonic, time.sleep
        self._reset_runtime()

    @property
    def supervisor(self):
        """The offset reader's :class:`.supervisor.ConnectionSupervisor`."""
        return self.offsets.supervisor

    @property
    def available_now(self):
        """Trigger.AvailableNow's :class:`.budget.AvailableNowBudget` (None otherwise)."""
        return self.offsets.available_now

    def failover_timeout(self) -> float:
        """The ``failoverTimeout`` option (seconds), or the queue mode's default."""
        return self.offsets.failover_timeout()

    def _in_runner(self) -> None:
        """The driver's callbacks run in Spark's source runner: close politely on its SIGTERM
        (installed once; nothing outside that process)."""
        if not self._runner_hooked:
            self._runner_hooked = True
            close_on_sigterm(lambda: self.stop(fast=True))

    # -- offsets -------------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """The zero offset of a new session (every queue at 0). No I/O."""
        return self.offsets.initial_offset()

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """Ack up to ``start``, then plan the next batch end (:meth:`.offset_reader.
        QueueOffsetReader.next_end`).

        ``start``: end of the previous batch (Spark 4.2+), None on the 4.0/4.1 signature.
        ``limit``: ``ReadMaxRows``/``ReadMaxBytes``/``ReadMinRows``/``ReadAllAvailable``
        (:func:`..read_limits.read_limits`; ``maxBytesPerTrigger`` applies with every limit).
        Returns ``start`` unchanged when nothing new is buffered (no empty batches).
        """
        self._in_runner()
        # committed (on 4.0/4.1 the previous end is: see QueueOffsetReader.previous_end): no
        # task needs those partitions again
        done = start if start is not None else self.offsets.previous_end()
        if done is not None:
            self.partitioner.release(done, self._session_id())
        o = self.options
        limits = read_limits(limit, start is not None, o.max_messages_per_trigger,
                             o.max_bytes_per_trigger)
        return self.offsets.next_end(start, limits)

    def reportLatestOffset(self) -> dict | None:
        """The newest offset the queues hold (received plus their depths, in this session's
        offset shape): Spark shows it as the source's ``latestOffset`` in the query progress,
        beside ``endOffset``; the difference is how many messages the query is behind
        (:func:`spark_amqp.spark.lag.offsets_behind_latest`). None when unknown."""
        return self.offsets.latest_available()

    def getDefaultReadLimit(self):
        """``ReadMaxRows(maxMessagesPerTrigger)`` when that option is set, else
        ``ReadMaxBytes(maxBytesPerTrigger)`` (PySpark 4.2+; a Python source gets one built-in
        limit, not a composite; ``maxBytesPerTrigger`` is applied in every case)."""
        return default_read_limit(self.options.max_messages_per_trigger,
                                  self.options.max_bytes_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        """Snapshot every queue's ready messages: this run reads up to them
        (:meth:`.offset_reader.QueueOffsetReader.prepare_available_now`)."""
        self._in_runner()
        self.offsets.prepare_available_now()

    def _session_id(self) -> str | None:
        s = self.offsets.session
        return s.id if s is not None else None

    # -- partitions and reading ----------------------------------------------------------------

    def partitions(self, start: dict, end: dict) -> list:
        """The deliveries planned in ``(start, end]`` as :class:`.partition_reader.
        QueueInputPartition`\\ s (:class:`.partitions.QueuePartitioner`); ``[]`` for a range of
        an earlier session (its messages are redelivered into later batches)."""
        return self.partitioner.partitions(self.offsets.session, start, end)

    def read(self, partition: QueueInputPartition) -> Iterator:
        """Executor side: the partition's rows as Arrow record batches
        (:func:`.partition_reader.read_partition`). No broker I/O."""
        return read_partition(self.options, partition)

    # -- acks and shutdown ---------------------------------------------------------------------

    def commit(self, end: dict) -> None:
        """Backstop: ack every delivery up to ``end`` (idempotent; usually already acked by the
        ``latestOffset`` that followed the batch) and release its served partitions. A lost
        connection only ends the session."""
        self.partitioner.release(end, self._session_id())
        self.offsets.commit(end)

    def stop(self, fast: bool = False) -> None:
        """Close the connection (unacked deliveries are requeued by the broker), then the
        partition server. ``fast``: Spark is ending the process (only ``connection.close``,
        and the server's thread is not waited for).

        With the ``checkpointLocation`` option (PySpark 4.0/4.1: no callback follows the last
        batch's commit log but this one, :mod:`..checkpoint`), first ack what the checkpoint's
        newest commit covers, so that an ``AvailableNow`` run leaves its messages acked."""
        if self.options.checkpoint_location is not None:
            self.offsets.ack_checkpointed(self.options.checkpoint_location)
        self.offsets.close(fast)
        # after the connection: Spark ends the runner moments after asking it to stop
        self.partitioner.close(fast)
        log.info("amqp source stopped: %s", {**self.offsets.stats, **self.partitioner.stats})
