"""The queue mode's offset reader: the driver's consumer session, which owns drain, plan, take,
ack and loss (the :class:`..offset_reader.OffsetReader` of the queue mode; Kafka's
``KafkaOffsetReader`` is the driver's offset helper of its source).

The driver consumes (:mod:`.consumer`, through the connection supervisor :mod:`.supervisor`:
back-off, ``failoverTimeout``) and holds the deliveries per queue (:mod:`.buffer`) under
offsets that count deliveries from 0 in each *session* (connection):

* **drain**: take what the consumer received into the buffers; right after (re)connecting,
  wait briefly for the first deliveries so the first trigger is not always empty;
* **plan**: what the next batch gets per queue (:mod:`.planner`, pure) under the trigger's
  limits (:mod:`..read_limits`), Trigger.AvailableNow's budget (:mod:`.budget`, derived from
  the buffers) and pacing (:mod:`..pacing`);
* **take**: mark the plan in the buffers and return the new end offset; the planned bytes no
  longer count against ``maxBufferedBytes`` (the client stops reading the socket while more
  than that is received but not planned: TCP back-pressure);
* **ack**: ``next_end(start)`` first acks every delivery up to ``start`` (the batch ending at
  ``start`` is in the commit log: the synchronous engine writes commit log N before asking for
  batch N+1); ``commit(end)`` acks up to ``end`` again as an idempotent backstop. An old
  session's delivery tags are never acked (they would be 406 on a new channel);
* **loss**: a lost connection (the client's failure model,
  :func:`spark_amqp.client.failover.classify`) forgets the session: the broker requeues its
  unacked deliveries, which come back as redeliveries in a new session.

Trigger.AvailableNow: ``prepare_available_now`` snapshots the queues' ready messages; each
trigger waits (bounded) until a batch is full, and after a loss waits for the reconnect within
the trigger (Spark ends the run at the first trigger that plans nothing). Time comes from the
injected ``clock`` and ``sleep`` (tests pass fakes). Driver memory is bounded: a batch holds at
most ``maxBytesPerTrigger`` and the buffers at most ``maxBufferedBytes`` unplanned.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from spark_amqp.client.failover import retryable

from ..checkpoint import last_committed_offsets
from ..pacing import TriggerPacer
from ..read_limits import Limits
from .budget import AvailableNowBudget
from .buffer import Session
from .consumer import QueueConsumer
from .errors import body_too_large, message_too_large
from .lag import DepthCache
from .offsets import SourceOffset
from .planner import BatchPlan, available_now_full, cannot_grow, plan_batch
from .supervisor import ConnectionSupervisor

__all__ = ["QueueOffsetReader", "FIRST_DRAIN_WAIT", "AVAILABLE_NOW_FILL_WAIT",
           "AVAILABLE_NOW_POLL"]

log = logging.getLogger(__name__)

#: seconds to wait for the first delivery after (re)connecting
FIRST_DRAIN_WAIT = 0.5
#: Trigger.AvailableNow: once some deliveries are buffered, ``next_end`` waits at most this
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
AVAILABLE_NOW_FILL_WAIT = 0.5
#: seconds between looks at the buffers while ``next_end`` waits for a batch to fill
AVAILABLE_NOW_POLL = 0.02


class QueueOffsetReader:
    """The queue mode's driver session (see the module doc); an
    :class:`..offset_reader.OffsetReader`.

    ``options``: validated :class:`.options.SourceOptions`. ``consumer_factory``: builds the
    driver consumer (a :class:`.consumer.QueueConsumer`) from the options (default
    :class:`.consumer.DriverConsumer`); tests pass a fake. ``clock``/``sleep``: monotonic
    seconds and the wait, for the back-off, deadlines, AvailableNow's waits, pacing and the
    lag cache (tests pass fakes). ``on_connected``: called after every (re)connect (the
    micro-batch stream's hook). Nothing connects here.

    Readable state: :attr:`supervisor` (the :class:`.supervisor.ConnectionSupervisor`: the
    consumer and the reconnect timing), :attr:`session` (the current
    :class:`.buffer.Session`, None before the first use), :attr:`available_now` (the
    :class:`.budget.AvailableNowBudget`, None unless Trigger.AvailableNow), :attr:`pacer`
    and :attr:`stats`.
    """

    def __init__(self, options, consumer_factory: Callable[[Any], QueueConsumer] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.options = options
        self._consumer_factory = consumer_factory
        self._clock = clock
        self._sleep = sleep
        #: the consumer, back-off and failoverTimeout (:mod:`.supervisor`)
        self.supervisor = ConnectionSupervisor(self._make_consumer, options, clock, sleep)
        #: Trigger.AvailableNow: what the run may still plan (None on other triggers)
        self.available_now: AvailableNowBudget | None = None
        self.session: Session | None = None
        self.stats = {"sessions": 0, "planned": 0, "acked": 0}
        self._last_end: dict | None = None  # last offset next_end returned
        self._depths = DepthCache(clock=clock)
        o = options
        self.pacer = (TriggerPacer(o.min_messages_per_trigger, o.max_trigger_delay, clock)
                      if o.min_messages_per_trigger else None)

    # -- the session ---------------------------------------------------------------------------

    def _current_session(self) -> Session:
        if self.session is None:
            self.session = Session(self.options.queues)
        return self.session

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
        if not first or (self.session is not None and self._session_has_data()):
            self.session = Session(self.options.queues)  # new tags -> new session
        self._current_session()
        # back-pressure: maxBufferedBytes
        consumer.set_read_limit(self.options.max_buffered_bytes, self._unplanned_bytes)
        self.stats["sessions"] += 1
        log.info("amqp source: session %s consuming %s", self.session.id,
                 ", ".join(self.options.queues))
        return True

    def _unplanned_bytes(self) -> int:
        """Bytes drained into this session's buffers and not yet planned (called by the
        client's I/O thread for its read limit: reads plain ints only)."""
        s = self.session
        if s is None:
            return 0
        return sum(b.unplanned_bytes for b in list(s.buffers.values()))

    def _session_has_data(self) -> bool:
        return any(b.received for b in self.session.buffers.values())

    def _fail_if_too_large(self, e: BaseException) -> None:
        """Raise :class:`.errors.MessageTooLarge` (naming the queue, the size and
        ``maxMessageBytes``) when ``e`` comes from a message body above the limit, after ending
        the session; else return. The connection is already closed by the client, so the
        broker requeues the message (and every other unacked delivery): nothing is lost or
        acked."""
        big = body_too_large(e)
        if big is None:
            return
        consumer = self.supervisor.consumer
        error = message_too_large(big, consumer, self.options.queues)
        if consumer is not None:
            self._lose_session(e)
        raise error from e

    def failover_timeout(self) -> float:
        """The ``failoverTimeout`` option (seconds), or the queue mode's default."""
        return self.supervisor.failover_timeout()

    def _lose_session(self, why: Any) -> None:
        """**loss**: forget the connection and every buffered delivery of this session.
        Unacked deliveries (planned or not) are requeued by the broker when the channel closes
        (AMQP 0-9-1 §1.8.3.13 / RabbitMQ docs/confirms.md), so they come back as redeliveries;
        their old delivery tags are never acked (they would be 406 PRECONDITION_FAILED on a new
        channel). Trigger.AvailableNow's budget keeps only what the session acked."""
        log.warning("amqp source: session %s lost (%s); reconnecting, unacked messages will be "
                    "redelivered", self.session.id if self.session else None, why)
        if self.available_now is not None and self.session is not None:
            self.available_now.session_lost(self.session.buffers)
        self.session = Session(self.options.queues)
        self.supervisor.lost()

    # -- offsets -------------------------------------------------------------------------------

    def initial_offset(self) -> dict:
        """The zero offset of a new session (every queue at 0). No I/O."""
        return self._current_session().zero_offset().to_dict()

    def latest_available(self) -> dict | None:
        """The newest offset the queues hold: per queue, the deliveries received so far in this
        session plus the queue's depth (its ready messages, passive ``queue.declare``), in this
        session's offset shape; the depths are kept :data:`.lag.LAG_REFRESH` seconds. None
        before the first connection or when the broker cannot be asked (never raises)."""
        return self._depths.latest(self.session, self.supervisor.consumer)

    def prepare_available_now(self) -> None:
        """Snapshot the ready-message count of every queue (declare-ok message-count taken
        before consuming, AMQP 0-9-1 §1.7.2.2); this run never plans more than that many
        messages per queue, and ends when they are planned (or when none arrive for
        ``availableNowIdleTimeout`` seconds, e.g. another consumer took them)."""
        self._ensure_connected()
        self.available_now = AvailableNowBudget(self.supervisor.consumer.initial_counts)
        log.info("amqp source: Trigger.AvailableNow targets %s", self._remaining())

    def _remaining(self) -> dict[str, int] | None:
        """Trigger.AvailableNow's messages still to plan per queue (None on other triggers)."""
        budget = self.available_now
        if budget is None:
            return None
        return budget.remaining(self._current_session().buffers)

    def _available_now_done(self) -> bool:
        budget = self.available_now
        return budget is not None and budget.done(self._current_session().buffers)

    # -- ack -----------------------------------------------------------------------------------

    def _ack_upto(self, off: SourceOffset) -> None:
        s = self.session
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
                self.stats["acked"] += buf.acked - before

    def _ack_safely(self, off: SourceOffset) -> None:
        try:
            self._ack_upto(off)
        except Exception as e:
            if not retryable(e):
                raise
            self._lose_session(e)

    def commit(self, end: dict) -> None:
        """Backstop: ack every delivery up to ``end`` (idempotent; usually already acked by the
        ``next_end`` that followed the batch). A lost connection only ends the session."""
        if self.supervisor.consumer is None:
            return
        self._ack_safely(SourceOffset.from_dict(end))

    # -- drain and plan ------------------------------------------------------------------------

    def _drain(self, timeout: float = 0.0) -> int:
        """**drain**: the consumer's deliveries into the buffers (waits up to ``timeout`` s for
        the first one); returns how many arrived."""
        got = 0
        for q, buf in self.session.buffers.items():
            ds = self.supervisor.consumer.drain(q, timeout if got == 0 else 0.0)
            if ds:
                before = buf.received
                buf.add(ds)
                got += buf.received - before
        return got

    def _plan(self, limits: Limits) -> BatchPlan:
        """**plan**: what the buffers give the next batch under ``limits`` and the
        AvailableNow budget (:func:`.planner.plan_batch`)."""
        return plan_batch(self.session.buffers, limits.max_rows, limits.max_bytes,
                          self._remaining())

    def _window(self) -> int:
        """Unacked deliveries a queue's consumers may hold (its prefetch window; 0 = no
        limit)."""
        o = self.options
        return o.consumers_per_queue * o.prefetch_per_consumer

    def next_end(self, start: dict | None, limits: Limits) -> dict:
        """Ack up to ``start``, then plan the next batch end (see the module doc). Returns
        ``start`` unchanged when nothing new is buffered (no empty batches); on the PySpark
        4.0/4.1 signature (``start`` None) the last end returned."""
        if start is not None:
            start_off = SourceOffset.from_dict(start)
        else:  # PySpark 4.0/4.1: the last end returned is committed (see previous_end)
            prev = self.previous_end()
            start_off = SourceOffset.from_dict(prev) if prev is not None else None
        plan = self._next_plan(start_off, limits)
        if plan is None or plan.total == 0:
            return self._unchanged(start)
        return self._take(plan)

    def _next_plan(self, start_off: SourceOffset | None, limits: Limits) -> BatchPlan | None:
        """Connect if needed, ack up to ``start_off``, drain and plan; None when this trigger
        plans nothing (AvailableNow done, disconnected, or pacing waits). A lost connection
        ends the session: Trigger.AvailableNow then reconnects within the trigger
        (:meth:`_await_reconnect`); a streaming trigger retries once when the back-off allows
        it (several addresses: fail over within this trigger)."""
        retried = False
        while True:
            if self._available_now_done():
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
                self._drain(FIRST_DRAIN_WAIT if fresh else 0.0)
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

    def previous_end(self) -> dict | None:
        """The last end offset :meth:`next_end` returned (None before the first): on PySpark
        4.0/4.1, whose ``latestOffset()`` gets no ``start``, what 4.2+ passes as ``start``.
        Spark's synchronous ``MicroBatchExecution`` asks for batch N+1's end only after it
        wrote batch N's commit log (``runBatch`` ends with ``commitLog.add``; the next trigger
        then calls ``constructNextBatch``), and every end returned here that differs from the
        previous one became a batch; a failed batch ends the query, so no call follows it."""
        return self._last_end

    def ack_checkpointed(self, location: str) -> None:
        """Ack what the newest committed batch of the checkpoint at ``location`` covers
        (:func:`..checkpoint.last_committed_offsets`: the offsets of this session only; an
        unreadable checkpoint or a lost connection acks nothing: the broker requeues). Called
        by ``stop`` on PySpark 4.0/4.1 (see :mod:`..checkpoint` for why)."""
        s = self.session
        if s is None or self.supervisor.consumer is None:
            return
        try:
            offsets = last_committed_offsets(location)
        except OSError as e:
            log.warning("amqp source: could not read checkpoint %r (%s): the last batch is not "
                        "acked (it is redelivered to the next run)", location, e)
            return
        for d in offsets:
            if d.get("session") == s.id:
                self._ack_safely(SourceOffset.from_dict(d))

    def _take(self, plan: BatchPlan) -> dict:
        """**take**: mark ``plan`` in the buffers; the new end offset."""
        for q, n in plan.want.items():
            if n:
                self.session.buffers[q].plan(n)
        self.stats["planned"] += plan.total
        if self.pacer is not None:
            self.pacer.planned()
        # planned bytes no longer count against maxBufferedBytes
        self.supervisor.consumer.resume_reading()
        self.supervisor.progressed()  # a later loss gets its own reconnect time
        self._last_end = self.session.planned_offset().to_dict()
        return self._last_end

    def _paced_ready(self, plan: BatchPlan, limits: Limits) -> bool:
        """Pacing (``minMessagesPerTrigger``/``maxTriggerDelay`` or a ``ReadMinRows`` from
        Spark, :mod:`..pacing`): may ``plan`` be planned now? Always True without a minimum.
        The batch counts as full (it goes) when it cannot grow (:func:`.planner.cannot_grow`)."""
        pacer, min_rows = self.pacer, limits.min_rows
        if pacer is None and min_rows is None:
            return True
        if pacer is None:
            pacer = self.pacer = TriggerPacer(min_rows, self.options.max_trigger_delay,
                                              self._clock)
        bufs = self.session.buffers
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
        if budget is None or self._available_now_done():
            return False
        if self.supervisor.wait_for_retry(self.options.available_now_idle_timeout):
            return True
        log.warning("amqp source: Trigger.AvailableNow: could not reconnect within %.1fs; "
                    "finishing; %s snapshotted messages stay in the queues for the next run",
                    self.options.available_now_idle_timeout, self._remaining())
        budget.give_up()
        return False

    def _wait_available_now(self, plan: BatchPlan, limits: Limits) -> BatchPlan:
        """Trigger.AvailableNow: wait (bounded) until the batch can be full - the per-queue
        budget or the row limit (:func:`.planner.available_now_full`) - so the run is not cut
        short by deliveries still in flight; but once some deliveries are buffered, wait at
        most :data:`AVAILABLE_NOW_FILL_WAIT` seconds for the rest, then plan what is buffered
        (see that constant)."""
        clock, idle = self._clock, self.options.available_now_idle_timeout
        idle_deadline = clock() + idle
        fill_deadline = clock() + AVAILABLE_NOW_FILL_WAIT
        window = self._window()
        bufs = self.session.buffers
        budget = self.available_now
        while True:
            if available_now_full(plan, budget.goal(bufs, limits.max_rows), bufs, window):
                return plan
            if plan.total and clock() >= fill_deadline:
                return plan  # plan what is here; the rest streams in during the batch
            # poll: a drain that waits returns at the first socket read (RabbitMQ sends a few
            # deliveries per read), waking this thread thousands of times a second for nothing
            self._sleep(AVAILABLE_NOW_POLL)
            if self._drain():
                idle_deadline = clock() + idle
                plan = self._plan(limits)
            elif clock() >= idle_deadline:
                if not plan.total:
                    log.warning("amqp source: Trigger.AvailableNow: %s snapshotted messages did "
                                "not arrive within %.1fs; finishing", self._remaining(), idle)
                    budget.give_up()
                return plan

    # -- shutdown ------------------------------------------------------------------------------

    def close(self, fast: bool = False) -> None:
        """Cancel the consumers and close the connection. Deliveries not yet acked (the last
        batch if it has no following trigger, and anything buffered) are requeued by the
        broker. ``fast``: only ``connection.close`` (which cancels the consumers and closes
        the channels on the broker, AMQP 0-9-1 §1.4.2.5), used when Spark is ending the
        process."""
        consumer = self.supervisor.detach()
        if consumer is not None:
            if fast:
                consumer.abort()
            else:
                consumer.close()
