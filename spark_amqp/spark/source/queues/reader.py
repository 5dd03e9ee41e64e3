"""Queue mode of the ``amqp`` source: driver-side consumption, acks tied to Spark's commit log.

Where things run (lessons §1.3): one reader instance lives in Spark's long-lived Python source
runner on the driver and receives ``initialOffset``/``latestOffset``/``partitions``/``commit``/
``stop``; a second instance is pickled to the executors and only runs ``read``. So:

* ``__init__`` does no I/O; the driver connects lazily in ``latestOffset`` (or
  ``prepareForTriggerAvailableNow``), through the connection supervisor (:mod:`.supervisor`:
  back-off, ``failoverTimeout``).
* The driver consumes: one connection, one channel per queue, per-consumer ``basic.qos``,
  ``basic.consume`` with manual acks (:mod:`.consumer`); deliveries are buffered per queue
  (:mod:`.buffer`) with a per-queue offset counting from 0 in each *session* (connection).
* ``latestOffset(start, limit)`` first acks every delivery up to ``start`` (the batch ending at
  ``start`` is in the commit log: the synchronous engine writes commit log N before asking for
  batch N+1), then cuts a new end from the buffers honouring ``ReadMaxRows`` (split fairly across
  queues) or ``ReadAllAvailable``, and always ``maxBytesPerTrigger`` (or a smaller
  ``ReadMaxBytes``; never below one message per queue), and returns ``start`` unchanged when
  there is nothing new. The cut is computed by :mod:`.planner` (pure), under
  Trigger.AvailableNow within the snapshot's :mod:`.budget`.
* Driver memory is bounded: the client stops reading the socket while more than
  ``maxBufferedBytes`` of deliveries are received but not planned (``Connection.set_read_limit``,
  TCP back-pressure; heartbeats go on), and a batch holds at most ``maxBytesPerTrigger``.
  ``commit(end)`` acks up to ``end`` again as an idempotent backstop.
* ``partitions(start, end)`` slices the messages' frames, undecoded as received by the
  driver's raw-mode channels (:mod:`.frames`), into picklable
  :class:`QueueInputPartition`s (at most ``maxMessagesPerPartition`` and
  ``maxBytesPerPartition``, but at least one message, each). The first
  ``maxInlineBytesPerTrigger`` (512 KiB) of a batch travel inside the partitions; the rest stay in the
  runner, which serves them to the executors over a socket until the batch is committed
  (:mod:`.partition_server`; a partition then carries a :class:`.partition_server.FramesRef`), so a
  big batch does not bloat Spark's tasks. A range planned by an earlier session
  (restart replay or reconnect) yields no partitions: its deliveries were never acked, so the
  broker redelivers them (redelivered=true) into later batches.
* ``read`` fetches the frames when the partition holds a reference, decodes them column-wise
  and converts (:mod:`.frames`, :mod:`..arrow`), yielding Arrow batches with the exact
  schema.

Guarantee: at-least-once. A crash between a batch's sink commit and the next ``latestOffset``
replays at most that batch (as redeliveries).
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from spark_amqp.client.failover import BrokerUnreachable, retryable

from ..arrow import to_record_batches
from ..compat import ReadMaxBytes, ReadMaxRows, SupportsTriggerAvailableNow
from ..options import SourceOptions
from ..pacing import TriggerPacer
from .budget import AvailableNowBudget
from .buffer import Session
from .consumer import QueueConsumer
from .errors import MessageTooLarge, body_too_large, message_too_large
from .frames import FramesPart, frames_chunks, frames_part, unpack
from .offsets import SourceOffset
from .partition_server import FramesRef, PartitionServer, fetch
from .planner import (BatchPlan, Limits, available_now_full, cannot_grow, plan_batch,
                      read_limits, with_framing)
from .supervisor import DEFAULT_FAILOVER_TIMEOUT, ConnectionSupervisor

__all__ = ["AmqpQueueStreamReader", "QueueInputPartition", "MessageTooLarge", "BrokerUnreachable",
           "DEFAULT_FAILOVER_TIMEOUT"]

log = logging.getLogger(__name__)

#: the module Spark runs as the long-lived source runner process (``python -m``)
_RUNNER_MODULE = "python_streaming_source_runner"
_FIRST_DRAIN_WAIT = 0.5  # seconds to wait for the first delivery after (re)connecting
#: Trigger.AvailableNow: once some deliveries are buffered, ``latestOffset`` waits at most this
#: many seconds for the batch to fill up to its limit, then plans what it has. Waiting for a
#: full batch serialised receiving and Spark's batch (nothing to overlap with), and held a
#: whole batch unacked, which slows RabbitMQ down: on RabbitMQ 3.10 here one consumer received
#: ~23-29k msgs/s with 65k-200k deliveries unacked vs ~36-43k/s acking every 10-30k. With
#: 0.5 s, ``bench.source --messages 200000`` on RabbitMQ went from 14.0k/13.8k to 19.5k/22.9k
#: rows/s (interleaved runs, loaded machine; on a quiet machine at 500k: 27.6k -> 28.5k);
#: 0.2 s made too many small batches (per-batch overhead), 1.0 s was about the same as 0.5 s.
#: With a full batch buffered it returns at once (the embedded broker usually fills it).
#: This wait is what Spark reports as ``latestOffset`` time on RabbitMQ (issue 31: 7.7 s of
#: 15 batches, 2026-11-26). Counting the 0.5 s from the previous plan instead of from the call
#: cut that to 5.3 s but made 27 batches and the same rows/s (33,452 vs 33,497, same hold of
#: the benchmark lock): receiving, slowed by Spark's share of the 2 cores, is the limit.
_AVAILABLE_NOW_FILL_WAIT = 0.5
#: seconds between looks at the buffers while ``latestOffset`` waits for a batch to fill
_AVAILABLE_NOW_POLL = 0.02
#: seconds ``reportLatestOffset`` keeps the queues' depths before asking the broker again:
#: Spark asks after every trigger, about every 10 ms while a query is idle, and a passive
#: queue.declare is a round trip per queue (measured: see docs/reading-patterns.md "Lag")
LAG_REFRESH = 1.0

@dataclass
class QueueInputPartition(InputPartition):
    """One task's worth of messages of one queue: offsets ``data.start .. data.start+data.n-1``
    of ``session``. ``data`` carries the messages' frames (:class:`.frames.FramesPart`:
    pickling it ships them) or where to fetch them from the driver's source runner
    (:class:`.partition_server.FramesRef`)."""

    session: str
    data: FramesPart | FramesRef

    def __post_init__(self) -> None:  # InputPartition.__init__(value) is bypassed by dataclass
        self.value = None


class AmqpQueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("amqp").option("queue", ...)``: the queue mode's stream
    reader (see the module doc for the semantics; the stream mode's is
    :class:`..streams.reader.AmqpStreamOffsetReader`). The Spark-facing adapter: planning is
    :mod:`.planner`, the connection :mod:`.supervisor`, Trigger.AvailableNow's budget
    :mod:`.budget`.

    ``options``: validated :class:`SourceOptions`. ``consumer_factory``: builds the driver
    consumer (a :class:`.consumer.QueueConsumer`) from the options (default
    :class:`.consumer.DriverConsumer`); tests pass a fake. ``clock``: monotonic seconds for
    the driver's back-off, deadlines, waits, pacing and lag cache (tests pass a fake one; an
    unpickled reader gets ``time.monotonic``). Nothing connects here.

    Readable state: :attr:`supervisor` (the :class:`.supervisor.ConnectionSupervisor`: the
    consumer and the reconnect timing) and :attr:`available_now` (the
    :class:`.budget.AvailableNowBudget`, None unless Trigger.AvailableNow).
    """

    def __init__(self, options: SourceOptions,
                 consumer_factory: Callable[[SourceOptions], QueueConsumer] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.options = options
        self._consumer_factory = consumer_factory
        self._clock = clock
        self._reset_runtime()

    def _reset_runtime(self) -> None:
        #: the consumer, back-off and failoverTimeout (:mod:`.supervisor`)
        self.supervisor = ConnectionSupervisor(self._make_consumer, self.options, self._clock)
        #: Trigger.AvailableNow: messages still to plan per queue (None on other triggers)
        self.available_now: AvailableNowBudget | None = None
        self._session: Session | None = None
        self._last_end: dict | None = None  # last offset latestOffset returned
        self._stats = {"sessions": 0, "planned": 0, "acked": 0, "replayed_ranges": 0}
        self._server: PartitionServer | None = None  # serves big batches' partitions
        self._server_failed = False  # could not bind: every partition goes inline
        #: reportLatestOffset's cache: (clock time, session id, {queue: received + depth})
        self._depths: tuple[float, str, dict[str, int] | None] | None = None
        o = self.options
        self._pacer = (TriggerPacer(o.min_messages_per_trigger, o.max_trigger_delay, self._clock)
                       if o.min_messages_per_trigger else None)

    # Pickled to the executors: only the configuration travels, never sockets or buffers.
    def __getstate__(self) -> dict:
        return {"options": self.options, "_consumer_factory": self._consumer_factory}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._clock = time.monotonic
        self._reset_runtime()

    # -- session / connection ----------------------------------------------------------------

    def _current_session(self) -> Session:
        if self._session is None:
            self._session = Session(self.options.queues)
        return self._session

    def _make_consumer(self) -> QueueConsumer:
        if self._consumer_factory is not None:
            return self._consumer_factory(self.options)
        from .consumer import DriverConsumer

        return DriverConsumer(self.options)

    def _ensure_connected(self) -> bool:
        """Open the consumer if needed. True when connected. The rules (first connection's
        errors propagate, back-off, ``failoverTimeout``): :mod:`.supervisor`. A new
        connection after a loss, or after a session that received deliveries, starts a new
        session (new delivery tags)."""
        sup = self.supervisor
        if sup.is_open:
            return True
        if sup.consumer is not None:  # the connection died under us
            why = sup.consumer.error
            if why is not None:
                self._fail_if_too_large(why)
            self._lose_session(why or "connection closed")
        first = not sup.ever_connected
        consumer = sup.connect()
        if consumer is None:
            return False
        if not first or (self._session is not None and self._session_has_data()):
            self._session = Session(self.options.queues)  # new tags -> new session
        self._current_session()
        # back-pressure: maxBufferedBytes
        consumer.set_read_limit(self.options.max_buffered_bytes, self._unplanned_bytes)
        if first:
            self._install_sigterm_close()
        self._stats["sessions"] += 1
        log.info("amqp source: session %s consuming %s", self._session.id,
                 ", ".join(self.options.queues))
        return True

    def _install_sigterm_close(self) -> None:
        """Close the connection politely when Spark ends the source runner process.

        Spark's ``PythonStreamingSourceRunner.stop()`` (4.3, checked with javap) stops the
        runner's Python worker right after closing its socket, so the runner's
        ``finally: reader.stop()`` rarely gets to finish and the broker sees a dropped socket
        (the embedded broker logged "closed the socket without connection.close" on every
        query stop). The worker is ended with SIGTERM (``Process.destroy``), sometimes twice;
        this handler ignores further SIGTERMs, runs ``stop(fast=True)`` (connection.close:
        the broker cancels the consumers and requeues unacked deliveries), then exits. With it
        the embedded broker saw a clean close on 5 of 5 query stops. Only installed in the
        main thread of Spark's runner process, never in tests or on executors.
        """
        import signal
        import threading

        main = sys.modules.get("__main__")
        if threading.current_thread() is not threading.main_thread() or not getattr(
                getattr(main, "__spec__", None), "name", "").endswith(_RUNNER_MODULE):
            return
        try:
            previous = signal.getsignal(signal.SIGTERM)
        except (ValueError, OSError):
            return

        def on_sigterm(signum, frame):
            # Spark may send SIGTERM twice; a second one must not interrupt the close.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                self.stop(fast=True)
            finally:
                if callable(previous):
                    previous(signum, frame)
                raise SystemExit(128 + signum)

        try:
            signal.signal(signal.SIGTERM, on_sigterm)
        except (ValueError, OSError):
            pass

    def _unplanned_bytes(self) -> int:
        """Bytes drained into this session's buffers and not yet planned (called by the
        client's I/O thread for its read limit: reads plain ints only)."""
        s = self._session
        if s is None:
            return 0
        return sum(b.unplanned_bytes for b in list(s.buffers.values()))

    def _session_has_data(self) -> bool:
        return any(b.received for b in self._session.buffers.values())

    def _fail_if_too_large(self, e: BaseException) -> None:
        """Raise :class:`MessageTooLarge` (naming the queue, the size and ``maxMessageBytes``)
        when ``e`` comes from a message body above the limit, after ending the session; else
        return. The connection is already closed by the client, so the broker requeues the
        message (and every other unacked delivery): nothing is lost or acked."""
        big = body_too_large(e)
        if big is None:
            return
        consumer = self.supervisor.consumer
        error = message_too_large(big, consumer, self.options.queues)
        if consumer is not None:
            self._lose_session(e)
        raise error from e

    def failover_timeout(self) -> float:
        """The ``failoverTimeout`` option (seconds), or :data:`DEFAULT_FAILOVER_TIMEOUT`."""
        return self.supervisor.failover_timeout()

    def _lose_session(self, why: Any) -> None:
        """Forget the connection and every buffered delivery of this session. Unacked
        deliveries (planned or not) are requeued by the broker when the channel closes (AMQP
        0-9-1 §1.8.3.13 / RabbitMQ docs/confirms.md), so they come back as redeliveries; their
        old delivery tags are never acked (they would be 406 PRECONDITION_FAILED on a new
        channel)."""
        log.warning("amqp source: session %s lost (%s); reconnecting, unacked messages will be "
                    "redelivered", self._session.id if self._session else None, why)
        budget = self.available_now
        if budget is not None and self._session is not None:
            # Trigger.AvailableNow: planned-but-unacked deliveries go back to the queue and
            # are part of what this run must still read.
            for q, b in self._session.buffers.items():
                budget.give_back(q, b.planned - b.acked)
        self._session = Session(self.options.queues)
        self.supervisor.lost()

    # -- offsets -----------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """The zero offset of a new session (every queue at 0). No I/O."""
        return self._current_session().zero_offset().to_dict()

    def reportLatestOffset(self) -> dict | None:
        """The newest offset the queues hold: per queue, the deliveries received so far in
        this session plus the queue's depth (its ready messages, passive ``queue.declare``),
        in this session's offset shape. Spark shows it as the source's ``latestOffset`` in the
        query progress, beside ``endOffset``: the difference is how many messages the query
        is behind (:func:`spark_amqp.spark.lag.offsets_behind_latest`). The depths are asked
        at most every ``LAG_REFRESH`` seconds (Spark calls this after every trigger). None
        before the first connection or when the broker cannot be asked (never raises: the
        progress is not worth failing the query)."""
        s, c = self._session, self.supervisor.consumer
        if s is None or c is None or not c.is_open:
            return None
        now = self._clock()
        cached = self._depths
        if cached is None or cached[1] != s.id or now - cached[0] >= LAG_REFRESH:
            try:
                depths = c.queue_depths()
            except Exception as e:  # noqa: BLE001 - the trigger's own calls handle losses
                log.debug("amqp source: queue depths unavailable (%s)", e)
                self._depths = (now, s.id, None)  # asked again after LAG_REFRESH, not sooner
                return None
            cached = self._depths = (now, s.id, {q: b.received + depths.get(q, 0)
                                                 for q, b in s.buffers.items()})
        if cached[2] is None:
            return None
        latest = {q: max(n, s.buffers[q].received) for q, n in cached[2].items()}
        return SourceOffset.make(s.id, latest).to_dict()

    def getDefaultReadLimit(self):
        """``ReadMaxRows(maxMessagesPerTrigger)`` when that option is set, else
        ``ReadMaxBytes(maxBytesPerTrigger)`` (PySpark 4.2+; a Python source gets one built-in
        limit, not a composite). ``maxBytesPerTrigger`` is applied in every case by
        :meth:`latestOffset` (it bounds the driver's memory), whichever limit Spark passes."""
        if self.options.max_messages_per_trigger is not None:
            return ReadMaxRows(self.options.max_messages_per_trigger)
        return ReadMaxBytes(self.options.max_bytes_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        """Snapshot the ready-message count of every queue (declare-ok message-count taken
        before consuming, AMQP 0-9-1 §1.7.2.2); this run never plans more than that many
        messages per queue, and ends when they are planned (or when none arrive for
        ``availableNowIdleTimeout`` seconds, e.g. another consumer took them). After a
        connection loss ``latestOffset`` waits for the reconnect (Spark ends the run at the
        first trigger without a batch), for at most ``availableNowIdleTimeout`` seconds."""
        self._ensure_connected()
        self.available_now = AvailableNowBudget(self.supervisor.consumer.initial_counts)
        log.info("amqp source: Trigger.AvailableNow targets %s", self.available_now.remaining)

    def _ack_upto(self, off: SourceOffset) -> None:
        s = self._session
        if s is None or off.session != s.id or self.supervisor.consumer is None:
            return  # an old session's tags are dead: never ack them
        for q, n in off.queues:
            buf = s.buffers.get(q)
            if buf is None:
                continue
            tag = buf.ack_tag(n)
            if tag is not None:
                # ack first: if it fails the range still counts as unacked (the broker
                # requeues it; _lose_session gives it back to Trigger.AvailableNow's budget)
                self.supervisor.consumer.ack(q, tag)
                before = buf.acked
                buf.ack_upto(n)
                self._stats["acked"] += buf.acked - before

    def _drain(self, timeout: float = 0.0) -> int:
        got = 0
        for q, buf in self._session.buffers.items():
            ds = self.supervisor.consumer.drain(q, timeout if got == 0 else 0.0)
            if ds:
                before = buf.received
                buf.add(ds)
                got += buf.received - before
        return got

    def _plan(self, limits: Limits) -> BatchPlan:
        """What the buffers give the next batch under ``limits`` and the AvailableNow budget
        (:func:`.planner.plan_batch`)."""
        budget = self.available_now
        return plan_batch(self._session.buffers, limits.max_rows, limits.max_bytes,
                          budget.remaining if budget is not None else None)

    def _window(self) -> int:
        """Unacked deliveries a queue's consumers may hold (its prefetch window; 0 = no
        limit)."""
        o = self.options
        return o.consumers_per_queue * o.prefetch_per_consumer

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """Ack up to ``start``, then plan the next batch end (see module doc).

        ``start``: end of the previous batch (Spark 4.2+), None on the 4.0/4.1 signature.
        ``limit``: ``ReadMaxRows``/``ReadMaxBytes``/``ReadAllAvailable`` (others are treated
        as all available). ``maxBytesPerTrigger`` applies with every limit (the smaller of it
        and a ``ReadMaxBytes`` wins); with ``ReadMaxRows`` the batch ends at whichever of the
        two limits it reaches first (:func:`.planner.read_limits`).
        Returns ``start`` unchanged when nothing new is buffered (no empty batches).
        """
        start_off = SourceOffset.from_dict(start) if start is not None else None
        if start_off is not None:
            self._release(start_off)  # committed: no task needs those partitions again
        o = self.options
        limits = read_limits(limit, start is not None, o.max_messages_per_trigger,
                             o.max_bytes_per_trigger)
        plan = self._next_plan(start_off, limits)
        if plan is None or plan.total == 0:
            return self._unchanged(start)
        return self._take(plan)

    def _next_plan(self, start_off: SourceOffset | None, limits: Limits) -> BatchPlan | None:
        """Connect if needed, ack up to ``start_off``, drain and plan; None when this trigger
        plans nothing (AvailableNow done, disconnected, or pacing waits). A connection error
        ends the session: Trigger.AvailableNow then reconnects within the trigger
        (:meth:`_await_reconnect`); a streaming trigger retries once when the back-off allows
        it (several addresses: fail over within this trigger)."""
        retried = False
        while True:
            budget = self.available_now
            if budget is not None and budget.done:
                # AvailableNow: everything snapshotted is planned; ack the last batch, finish.
                if start_off is not None:
                    self._ack_safely(start_off)
                return None
            fresh = self.supervisor.consumer is None
            if not self._ensure_connected():
                if self._await_reconnect():
                    continue
                return None
            try:
                if start_off is not None:
                    self._ack_upto(start_off)
                # Right after connecting nothing has arrived yet: wait briefly for the first
                # deliveries so the first trigger is not always empty.
                self._drain(_FIRST_DRAIN_WAIT if fresh else 0.0)
                plan = self._plan(limits)
                if self.available_now is not None:
                    return self._wait_available_now(plan, limits)
                return plan if self._paced_ready(plan, limits) else None
            except Exception as e:
                self._fail_if_too_large(e)
                if not retryable(e):
                    raise
                self._lose_session(e)
                if self.available_now is not None:
                    continue  # AvailableNow: reconnect now (see _await_reconnect)
                if not retried and self.supervisor.retry_due():
                    retried = True  # several addresses: fail over within this trigger
                    continue
                return None

    def _take(self, plan: BatchPlan) -> dict:
        """Plan ``plan`` in the buffers (and the AvailableNow budget); the new end offset."""
        budget = self.available_now
        for q, n in plan.want.items():
            if n:
                self._session.buffers[q].plan(n)
                if budget is not None:
                    budget.planned(q, n)
        self._stats["planned"] += plan.total
        if self._pacer is not None:
            self._pacer.planned()
        # planned bytes no longer count against maxBufferedBytes
        self.supervisor.consumer.resume_reading()
        self.supervisor.progressed()  # a later loss gets its own reconnect time
        self._last_end = self._session.planned_offset().to_dict()
        return self._last_end

    def _paced_ready(self, plan: BatchPlan, limits: Limits) -> bool:
        """Pacing (``minMessagesPerTrigger``/``maxTriggerDelay`` or a ``ReadMinRows`` from
        Spark, :mod:`..pacing`): may ``plan`` be planned now? Always True without a minimum.
        The batch counts as full (it goes) when it cannot grow (:func:`.planner.cannot_grow`)."""
        pacer, min_rows = self._pacer, limits.min_rows
        if pacer is None and min_rows is None:
            return True
        if pacer is None:
            pacer = self._pacer = TriggerPacer(min_rows, self.options.max_trigger_delay,
                                               self._clock)
        bufs = self._session.buffers
        available = sum(b.unplanned for b in bufs.values())
        full = cannot_grow(plan, limits.max_rows, bufs, self._unplanned_bytes(),
                           self.options.max_buffered_bytes, self._window())
        if not pacer.ready(available, full, min_rows):
            return False
        if pacer.reason != "minimum":
            log.debug("amqp source: batch of %d messages planned below the minimum (%s)",
                      available, pacer.reason)
        return True

    def _unchanged(self, start: dict | None) -> dict:
        """"Nothing new": ``start`` itself, or on the 4.0/4.1 signature (no ``start``) the
        last offset returned (a reconnect must not look like a new end to Spark)."""
        if start is not None:
            return start
        if self._last_end is None:
            self._last_end = self._current_session().planned_offset().to_dict()
        return self._last_end

    def _await_reconnect(self) -> bool:
        """Trigger.AvailableNow after a connection loss: Spark ends the run at the first
        trigger that plans nothing, so wait here for the backoff to expire (True: try to
        connect again). After ``availableNowIdleTimeout`` seconds of failed attempts (at least
        one more attempt is made) give up: the remaining snapshot is left for the next run
        (False, logged). Streaming triggers never wait (False)."""
        budget = self.available_now
        if budget is None or budget.done:
            return False
        if self.supervisor.wait_for_retry(self.options.available_now_idle_timeout):
            return True
        log.warning("amqp source: Trigger.AvailableNow: could not reconnect within %.1fs; "
                    "finishing; %s snapshotted messages stay in the queues for the next run",
                    self.options.available_now_idle_timeout, budget.remaining)
        budget.give_up()
        return False

    def _wait_available_now(self, plan: BatchPlan, limits: Limits) -> BatchPlan:
        """Trigger.AvailableNow: wait (bounded) until the batch can be full - the per-queue
        budget or the row limit (:func:`.planner.available_now_full`) - so the run is not cut
        short by deliveries still in flight; but once some deliveries are buffered, wait at
        most ``_AVAILABLE_NOW_FILL_WAIT`` seconds for the rest, then plan what is buffered (see
        that constant)."""
        clock, idle = self._clock, self.options.available_now_idle_timeout
        idle_deadline = clock() + idle
        fill_deadline = clock() + _AVAILABLE_NOW_FILL_WAIT
        window = self._window()
        bufs = self._session.buffers
        budget = self.available_now
        while True:
            if available_now_full(plan, budget.goal(limits.max_rows), bufs, window):
                return plan
            if plan.total and clock() >= fill_deadline:
                return plan  # plan what is here; the rest streams in during the batch
            # poll: a drain that waits returns at the first socket read (RabbitMQ sends a few
            # deliveries per read), waking this thread thousands of times a second for nothing
            time.sleep(_AVAILABLE_NOW_POLL)
            if self._drain():
                idle_deadline = clock() + idle
                plan = self._plan(limits)
            elif clock() >= idle_deadline:
                if not plan.total:
                    log.warning("amqp source: Trigger.AvailableNow: %s snapshotted messages did "
                                "not arrive within %.1fs; finishing", budget.remaining, idle)
                    budget.give_up()
                return plan

    def _ack_safely(self, off: SourceOffset) -> None:
        try:
            self._ack_upto(off)
        except Exception as e:
            if not retryable(e):
                raise
            self._lose_session(e)

    # -- planning ----------------------------------------------------------------------------

    def partitions(self, start: dict, end: dict) -> list:
        """Slice the deliveries planned in ``(start, end]`` into :class:`QueueInputPartition`s.

        A range of an earlier session yields ``[]`` (logged): those deliveries were never acked
        and the broker redelivers them. A queue's range with more than
        ``maxMessagesPerPartition`` messages or ``maxBytesPerPartition`` bytes is split into
        several partitions (each at least one message).
        """
        s_off = SourceOffset.from_dict(start)
        e_off = SourceOffset.from_dict(end)
        s = self._session
        if s is None or e_off.session != s.id:
            if s_off != e_off:
                self._stats["replayed_ranges"] += 1
                log.warning("amqp source: batch range %s -> %s was planned by an earlier session "
                            "(restart or reconnect); its messages are redelivered by the broker "
                            "into later batches", s_off.to_json(), e_off.to_json())
            return []
        parts: list[QueueInputPartition] = []
        step = self.options.max_messages_per_partition
        max_bytes = with_framing(self.options.max_bytes_per_partition)
        inline_room = self.options.max_inline_bytes_per_trigger
        for q, e in e_off.queues:
            buf = s.buffers.get(q)
            if buf is None:
                continue
            b = s_off.get(q, 0) if s_off.session == s.id else 0
            if b < e and (b < buf.acked or e > buf.received):
                buf.slice(b, e)  # raises the bookkeeping error (LookupError)
            lo = b
            while lo < e:
                hi = buf.end_within(lo, max_bytes, min(lo + step, e))
                if hi <= lo:  # not buffered: slice() raises the bookkeeping error
                    hi = min(lo + step, e)
                pieces = buf.slice(lo, hi)
                nbytes = buf.bytes_between(lo, hi)
                server = None if nbytes <= inline_room else self._partition_server()
                if server is None:
                    inline_room -= nbytes
                    data: Any = frames_part(q, lo, pieces)
                else:
                    data = server.hold(s.id, q, lo, hi - lo, frames_chunks(pieces))
                parts.append(QueueInputPartition(s.id, data))
                lo = hi
        return parts

    def _partition_server(self) -> PartitionServer | None:
        """The runner's partition server, started at first use; None (logged once, partitions
        then go inline) when it cannot bind."""
        if self._server is None and not self._server_failed:
            try:
                self._server = PartitionServer()
            except OSError as e:
                self._server_failed = True
                log.warning("amqp source: cannot serve partitions from the driver (%s); big "
                            "batches travel inside Spark's tasks", e)
            else:
                log.info("amqp source: serving partitions at %s:%d", self._server.host,
                         self._server.port)
        return self._server

    def _release(self, committed: SourceOffset) -> None:
        """Forget the served partitions a committed offset covers (see
        :meth:`.partition_server.PartitionServer.release`)."""
        if self._server is not None:
            self._server.release(committed.session, committed.as_map(),
                                 self._session.id if self._session else None)

    def read(self, partition: QueueInputPartition) -> Iterator:
        """Executor side: yield the partition's rows as Arrow record batches. No broker I/O;
        a partition holding a :class:`.partition_server.FramesRef` is first fetched from the
        driver's source runner (``PartitionFetchError`` when that fails: the batch fails,
        nothing in it is acked)."""
        part = partition.data
        if part is None:
            return iter(())
        if isinstance(part, FramesRef):
            part = FramesPart(part.queue, part.start, part.n, fetch(part))
        return to_record_batches(unpack(part, self.options.include_headers),
                                 columns=self.options.columns)

    # -- acks and shutdown -------------------------------------------------------------------

    def commit(self, end: dict) -> None:
        """Backstop: ack every delivery up to ``end`` (idempotent; usually already acked by the
        ``latestOffset`` that followed the batch). Connection errors only end the session."""
        off = SourceOffset.from_dict(end)
        self._release(off)
        if self.supervisor.consumer is None:
            return
        self._ack_safely(off)

    def stop(self, fast: bool = False) -> None:
        """Cancel the consumers and close the connection. Deliveries not yet acked (the last
        batch if it has no following trigger, and anything buffered) are requeued by the
        broker. ``fast``: only ``connection.close`` (which cancels the consumers and closes
        the channels on the broker, AMQP 0-9-1 §1.4.2.5), used when Spark is ending the
        process; the partition server's thread is then not waited for)."""
        consumer = self.supervisor.detach()
        if consumer is not None:
            if fast:
                consumer.abort()
            else:
                consumer.close()
        # after the connection: Spark ends the runner moments after asking it to stop
        server, self._server = self._server, None
        if server is not None:
            self._stats["served"] = server.stats["served"]
            server.close(wait=not fast)
        log.info("amqp source stopped: %s", self._stats)
