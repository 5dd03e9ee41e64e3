"""Queue mode of the ``amqp`` source: driver-side consumption, acks tied to Spark's commit log.

Where things run (lessons §1.3): one reader instance lives in Spark's long-lived Python source
runner on the driver and receives ``initialOffset``/``latestOffset``/``partitions``/``commit``/
``stop``; a second instance is pickled to the executors and only runs ``read``. So:

* ``__init__`` does no I/O; the driver connects lazily in ``latestOffset`` (or
  ``prepareForTriggerAvailableNow``).
* The driver consumes: one connection, one channel per queue, per-consumer ``basic.qos``,
  ``basic.consume`` with manual acks (:mod:`.consumer`); deliveries are buffered per queue
  (:mod:`.buffer`) with a per-queue offset counting from 0 in each *session* (connection).
* ``latestOffset(start, limit)`` first acks every delivery up to ``start`` (the batch ending at
  ``start`` is in the commit log: the synchronous engine writes commit log N before asking for
  batch N+1), then cuts a new end from the buffers honouring ``ReadMaxRows`` (split fairly across
  queues) or ``ReadAllAvailable``, and always ``maxBytesPerTrigger`` (or a smaller
  ``ReadMaxBytes``; never below one message per queue), and returns ``start`` unchanged when
  there is nothing new.
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

from ..arrow import to_record_batches
from ..compat import ReadMaxBytes, ReadMaxRows, ReadMinRows, SupportsTriggerAvailableNow
from ..options import SourceOptions
from ..fair_split import fair_split
from .buffer import Session
from .frames import FramesPart, frames_chunks, frames_part, unpack
from .partition_server import FramesRef, PartitionServer, fetch
from .offsets import SourceOffset
from ..pacing import TriggerPacer


__all__ = ["AmqpQueueStreamReader", "QueueInputPartition", "MessageTooLarge", "BrokerUnreachable",
           "DEFAULT_FAILOVER_TIMEOUT"]

log = logging.getLogger(__name__)

_MAX_BACKOFF = 30.0
_FIRST_BACKOFF = 0.5
#: seconds of failed reconnects after a loss before the query fails (option failoverTimeout)
DEFAULT_FAILOVER_TIMEOUT = 300.0
#: the longest back-off when the connection has several addresses: another node is likely up
_MAX_FAILOVER_BACKOFF = 5.0
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


def _with_framing(max_bytes: int) -> int:
    """A byte limit plus the allowance for framing: the buffers count messages' frames (body
    + ~60-100 B of method/header frames + 8 B per body frame), the options mean bodies; 1/1024
    of the limit covers the framing of messages from ~100 KiB up, so e.g. two 8 MiB bodies fit
    a 16 MiB batch. (Small messages' framing is not covered: their batches hold a little less
    than the limit in bodies.)"""
    return max_bytes + max_bytes // 1024


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


class BrokerUnreachable(ConnectionError):
    """No broker address could be reached for ``failoverTimeout`` seconds after the source
    lost its connection: the query fails with this error, whose message lists every address
    and its last error. Nothing was acked after the loss: the unacked deliveries are back in
    their queues, and a restarted query reads them (as redeliveries) from its checkpoint."""


class MessageTooLarge(ValueError):
    """A queue holds a message whose body is above ``maxMessageBytes``: the query fails
    (retrying would take the same message again). Nothing was acked: the client closed the
    connection before the body arrived and the broker requeued every unacked delivery."""


def _body_too_large(e: BaseException | None):
    """The ``BodyTooLarge`` decoder error behind ``e`` (its cause chain), or None."""
    from spark_amqp.protocol.errors import BodyTooLarge

    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, BodyTooLarge):
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


def _is_connection_error(e: BaseException) -> bool:
    from spark_amqp.protocol.errors import AMQPError

    return isinstance(e, (OSError, AMQPError, EOFError))


class AmqpQueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("amqp").option("queue", ...)``: the queue mode's stream
    reader (see the module doc for the semantics; the stream mode's is
    :class:`..streams.reader.AmqpStreamOffsetReader`).

    ``options``: validated :class:`SourceOptions`. ``consumer_factory``: builds the driver
    consumer from the options (default :class:`.consumer.DriverConsumer`); tests pass a
    fake. Neither connects here.
    """

    def __init__(self, options: SourceOptions,
                 consumer_factory: Callable[[SourceOptions], Any] | None = None):
        self.options = options
        self._consumer_factory = consumer_factory
        self._reset_runtime()

    def _reset_runtime(self) -> None:
        self._consumer: Any = None
        self._session: Session | None = None
        self._ever_connected = False
        self._next_attempt = 0.0
        self._backoff = _FIRST_BACKOFF
        self._failing_since: float | None = None  # when the current outage began
        self._targets: dict[str, int] | None = None  # AvailableNow: still to plan, per queue
        self._byte_capped = False  # the last _wanted was cut by the byte limit
        self._last_end: dict | None = None  # last offset latestOffset returned
        self._reconnect_deadline: float | None = None  # AvailableNow: reconnect attempts end
        self._stats = {"sessions": 0, "planned": 0, "acked": 0, "replayed_ranges": 0}
        self._server: PartitionServer | None = None  # serves big batches' partitions
        self._server_failed = False  # could not bind: every partition goes inline
        #: reportLatestOffset's cache: (monotonic time, session id, {queue: received + depth})
        self._depths: tuple[float, str, dict[str, int]] | None = None
        o = self.options
        self._pacer = (TriggerPacer(o.min_messages_per_trigger, o.max_trigger_delay)
                       if getattr(o, "min_messages_per_trigger", None) else None)

    # Pickled to the executors: only the configuration travels, never sockets or buffers.
    def __getstate__(self) -> dict:
        return {"options": self.options, "_consumer_factory": self._consumer_factory}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._reset_runtime()

    # -- session / connection ----------------------------------------------------------------

    def _current_session(self) -> Session:
        if self._session is None:
            self._session = Session(self.options.queues)
        return self._session

    def _make_consumer(self):
        if self._consumer_factory is not None:
            return self._consumer_factory(self.options)
        from .consumer import DriverConsumer

        return DriverConsumer(self.options)

    def _ensure_connected(self) -> bool:
        """Open the consumer if needed. True when connected.

        The first connection's errors propagate (a wrong URI, password or queue fails the query
        at its first trigger). After a loss, reconnects back off exponentially (0.5 s .. 30 s;
        .. 5 s with several broker addresses) and each one tries every address (the client's
        :func:`~spark_amqp.client.connect`, shuffled unless ``shuffleAddresses=false``), and
        failures are logged, not raised, so the query keeps running; except a missing queue
        with ``failOnDataLoss=true``, and :class:`BrokerUnreachable` once reconnects have
        failed for ``failoverTimeout`` seconds (default :data:`DEFAULT_FAILOVER_TIMEOUT`).
        """
        if self._consumer is not None and self._consumer.is_open:
            return True
        if self._consumer is not None:  # the connection died under us
            why = getattr(self._consumer, "error", None)
            if why is not None:
                self._fail_if_too_large(why, self._consumer)
            self._lose_session(why or "connection closed")
        now = time.monotonic()
        if self._ever_connected and now < self._next_attempt:
            return False
        from .consumer import QueueMissing

        consumer = self._make_consumer()
        try:
            consumer.open()
        except QueueMissing:
            if not self._ever_connected or self.options.fail_on_data_loss:
                raise
            log.warning("amqp source: a queue is missing; retrying in %.1fs "
                        "(failOnDataLoss=false)", self._backoff)
            self._schedule_retry(now)
            return False
        except Exception as e:
            from spark_amqp.protocol.errors import AccessRefused

            self._fail_if_too_large(e, consumer)
            if not self._ever_connected or isinstance(e, AccessRefused) \
                    or not _is_connection_error(e):
                raise
            self._raise_if_out_of_time(e, now)
            log.warning("amqp source: reconnect failed (%s); retrying in %.1fs", e, self._backoff)
            self._schedule_retry(now)
            return False
        if self._ever_connected or (self._session is not None and self._session_has_data()):
            self._session = Session(self.options.queues)  # new tags -> new session
        self._current_session()
        self._consumer = consumer
        set_limit = getattr(consumer, "set_read_limit", None)
        if set_limit is not None:  # back-pressure: maxBufferedBytes (fakes may lack it)
            set_limit(self.options.max_buffered_bytes, self._unplanned_bytes)
        if not self._ever_connected:
            self._install_sigterm_close()
        self._ever_connected = True
        self._backoff = _FIRST_BACKOFF
        self._failing_since = None
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

    def _fail_if_too_large(self, e: BaseException, consumer: Any) -> None:
        """Raise :class:`MessageTooLarge` (naming the queue, the size and ``maxMessageBytes``)
        when ``e`` comes from a message body above the limit; else return. The connection is
        already closed by the client, so the broker requeues the message (and every other
        unacked delivery): nothing is lost or acked."""
        big = _body_too_large(e)
        if big is None:
            return
        queue = next((q for q, ch in getattr(consumer, "channels", {}).items()
                      if getattr(ch, "channel_number", None) == big.channel), None)
        where = f"queue {queue!r}" if queue else f"a queue of {', '.join(self.options.queues)}"
        if self._consumer is consumer and consumer is not None:
            self._lose_session(e)
        raise MessageTooLarge(
            f"{where} holds a message of {big.body_size} bytes, above maxMessageBytes "
            f"({big.limit} bytes). Raise the option maxMessageBytes (with spark.driver.memory "
            "and spark.executor.memory to match: the message goes through alone in its own "
            "batch), or move the message out of the queue. Nothing was acked: the broker "
            "requeued it with the other unacked deliveries.") from e

    def _schedule_retry(self, now: float) -> None:
        self._next_attempt = now + self._backoff
        self._backoff = min(self._backoff * 2, self._max_backoff())

    def _max_backoff(self) -> float:
        """30 s with one broker address; 5 s with several (another node is likely up)."""
        conn = self.options.connection
        several = len(conn.get("addresses") or ()) > 1 or "," in self.options.uri.split("/")[2].rpartition("@")[2]
        return _MAX_FAILOVER_BACKOFF if several else _MAX_BACKOFF

    def failover_timeout(self) -> float:
        """The ``failoverTimeout`` option (seconds), or :data:`DEFAULT_FAILOVER_TIMEOUT`."""
        t = self.options.connection.get("failover_timeout")
        return DEFAULT_FAILOVER_TIMEOUT if t is None else float(t)

    def _raise_if_out_of_time(self, e: BaseException, now: float) -> None:
        """Raise :class:`BrokerUnreachable` (from ``e``, the last reconnect's error, which lists
        every address) when reconnects have failed for ``failoverTimeout`` seconds."""
        if self._failing_since is None:
            self._failing_since = now
        bound = self.failover_timeout()
        if now - self._failing_since >= bound:
            from spark_amqp.client.uri import redact_uri

            raise BrokerUnreachable(
                f"amqp source: no broker address could be reached for "
                f"{now - self._failing_since:.1f} s (failoverTimeout {bound:g} s) after the "
                f"connection was lost: {redact_uri(str(e))}. Nothing was acked since: restart "
                "the query when the broker is back, it resumes from its checkpoint (the "
                "unacked messages are redelivered); or raise failoverTimeout.") from e

    def _lose_session(self, why: Any) -> None:
        """Forget the connection and every buffered delivery of this session. Unacked
        deliveries (planned or not) are requeued by the broker when the channel closes (AMQP
        0-9-1 §1.8.3.13 / RabbitMQ docs/confirms.md), so they come back as redeliveries; their
        old delivery tags are never acked (they would be 406 PRECONDITION_FAILED on a new
        channel)."""
        log.warning("amqp source: session %s lost (%s); reconnecting, unacked messages will be "
                    "redelivered", self._session.id if self._session else None, why)
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.abort()
        if self._targets is not None and self._session is not None:
            # Trigger.AvailableNow: planned-but-unacked deliveries go back to the queue and
            # are part of what this run must still read.
            for q, b in self._session.buffers.items():
                self._targets[q] = self._targets.get(q, 0) + (b.planned - b.acked)
        self._session = Session(self.options.queues)
        now = time.monotonic()
        if self._failing_since is None and self._max_backoff() == _MAX_FAILOVER_BACKOFF:
            # the first loss with several addresses: another node is likely up, reconnect now
            self._failing_since = now
            self._next_attempt = now
            return
        if self._failing_since is None:
            self._failing_since = now
        self._next_attempt = now + self._backoff
        self._backoff = min(self._backoff * 2, self._max_backoff())

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
        s, c = self._session, self._consumer
        if s is None or c is None or not c.is_open:
            return None
        now = time.monotonic()
        cached = self._depths
        if cached is None or cached[1] != s.id or now - cached[0] >= LAG_REFRESH:
            depths_of = getattr(c, "queue_depths", None)
            if depths_of is None:
                return None
            try:
                depths = depths_of()
            except Exception as e:  # noqa: BLE001 - the trigger's own calls handle losses
                log.debug("amqp source: queue depths unavailable (%s)", e)
                return None
            cached = self._depths = (now, s.id, {q: b.received + depths.get(q, 0)
                                                 for q, b in s.buffers.items()})
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
        self._targets = dict(self._consumer.initial_counts)
        log.info("amqp source: Trigger.AvailableNow targets %s", self._targets)

    def _ack_upto(self, off: SourceOffset) -> None:
        s = self._session
        if s is None or off.session != s.id or self._consumer is None:
            return  # an old session's tags are dead: never ack them
        for q, n in off.queues:
            buf = s.buffers.get(q)
            if buf is None:
                continue
            tag = buf.ack_tag(n)
            if tag is not None:
                # ack first: if it fails the range still counts as unacked (the broker
                # requeues it; _lose_session gives it back to Trigger.AvailableNow's targets)
                self._consumer.ack(q, tag)
                before = buf.acked
                buf.ack_upto(n)
                self._stats["acked"] += buf.acked - before

    def _drain(self, timeout: float = 0.0) -> int:
        got = 0
        for q, buf in self._session.buffers.items():
            ds = self._consumer.drain(q, timeout if got == 0 else 0.0)
            if ds:
                before = buf.received
                buf.add(ds)
                got += buf.received - before
        return got

    def _wanted(self, max_rows: int | None, max_bytes: int | None) -> dict[str, int]:
        """Messages to plan per queue: the row limit split fairly (:func:`fair_split`),
        then the byte limit split fairly over the bytes of those messages, rounded down to
        whole messages but never below one message for a queue that has any (a message
        larger than the limit goes alone). Sets ``_byte_capped`` when the byte limit cut
        something (the batch is full)."""
        s = self._session
        avail = {q: b.unplanned for q, b in s.buffers.items()}
        want = fair_split(avail, max_rows, self._targets)
        self._byte_capped = False
        if max_bytes is None:
            return want
        bufs = s.buffers
        weights = {q: bufs[q].bytes_between(bufs[q].planned, bufs[q].planned + n)
                   for q, n in want.items() if n}
        budget = _with_framing(max_bytes)
        if sum(weights.values()) <= budget:
            return want
        shares = fair_split(weights, budget)
        for q in weights:
            b = bufs[q]
            n = b.end_within(b.planned, shares[q], b.planned + want[q]) - b.planned
            if n < want[q]:
                self._byte_capped = True
            want[q] = n
        return want

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """Ack up to ``start``, then plan the next batch end (see module doc).

        ``start``: end of the previous batch (Spark 4.2+), None on the 4.0/4.1 signature.
        ``limit``: ``ReadMaxRows``/``ReadMaxBytes``/``ReadAllAvailable`` (others are treated
        as all available). ``maxBytesPerTrigger`` applies with every limit (the smaller of it
        and a ``ReadMaxBytes`` wins); with ``ReadMaxRows`` the batch ends at whichever of the
        two limits it reaches first.
        Returns ``start`` unchanged when nothing new is buffered (no empty batches).
        """
        start_off = SourceOffset.from_dict(start) if start is not None else None
        if start_off is not None:
            self._release(start_off)  # committed: no task needs those partitions again
        max_rows = None
        min_rows = None  # a ReadMinRows from Spark (else the pacer's own minimum)
        max_bytes = self.options.max_bytes_per_trigger  # always: it bounds driver memory
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            max_rows = int(limit.max_rows)
        elif ReadMaxBytes is not None and isinstance(limit, ReadMaxBytes):
            max_bytes = min(max_bytes, int(limit.max_bytes))
        elif ReadMinRows is not None and isinstance(limit, ReadMinRows):
            min_rows = int(limit.min_rows)
            max_rows = self.options.max_messages_per_trigger
        elif limit is None and start is None:
            max_rows = self.options.max_messages_per_trigger  # 4.0/4.1: self-enforced cap
        retried = False
        while True:
            if self._targets is not None and not any(self._targets.values()):
                # AvailableNow: everything snapshotted is planned; ack the last batch, finish.
                if start_off is not None:
                    self._ack_safely(start_off)
                return self._unchanged(start)
            fresh = self._consumer is None
            if not self._ensure_connected():
                if self._await_reconnect():
                    continue
                return self._unchanged(start)
            try:
                if start_off is not None:
                    self._ack_upto(start_off)
                # Right after connecting nothing has arrived yet: wait briefly for the first
                # deliveries so the first trigger is not always empty.
                self._drain(_FIRST_DRAIN_WAIT if fresh else 0.0)
                want = self._wanted(max_rows, max_bytes)
                if self._targets is not None:
                    want = self._wait_available_now(want, max_rows, max_bytes)
                elif not self._paced_ready(want, max_rows, min_rows):
                    return self._unchanged(start)
            except Exception as e:
                self._fail_if_too_large(e, self._consumer)
                if not _is_connection_error(e):
                    raise
                self._lose_session(e)
                if self._targets is not None:
                    continue  # AvailableNow: reconnect now (see _await_reconnect)
                if not retried and self._next_attempt <= time.monotonic():
                    retried = True  # several addresses: fail over within this trigger
                    continue
                return self._unchanged(start)
            break
        total = sum(want.values())
        if total == 0:
            return self._unchanged(start)
        for q, n in want.items():
            if n:
                self._session.buffers[q].plan(n)
                if self._targets is not None:
                    self._targets[q] = max(0, self._targets.get(q, 0) - n)
        self._stats["planned"] += total
        if self._pacer is not None:
            self._pacer.planned()
        resume = getattr(self._consumer, "resume_reading", None)
        if resume is not None:  # planned bytes no longer count against maxBufferedBytes
            resume()
        self._reconnect_deadline = None  # progress: a later loss gets its own reconnect time
        self._last_end = self._session.planned_offset().to_dict()
        return self._last_end

    def _paced_ready(self, want: dict[str, int], max_rows: int | None,
                     min_rows: int | None) -> bool:
        """Pacing (``minMessagesPerTrigger``/``maxTriggerDelay`` or a ``ReadMinRows`` from
        Spark, :mod:`..pacing`): may the batch ``want`` be planned now? Always True without a
        minimum. The batch counts as full (it goes) when a cap cut it (``_byte_capped``, the
        row cap), when the driver holds ``maxBufferedBytes`` (the socket is not read), or when
        every queue's prefetch window is full (nothing more can arrive before an ack)."""
        pacer = self._pacer
        if pacer is None and min_rows is None:
            return True
        if pacer is None:
            pacer = self._pacer = TriggerPacer(min_rows, self.options.max_trigger_delay)
        o = self.options
        bufs = self._session.buffers
        available = sum(b.unplanned for b in bufs.values())
        window = o.consumers_per_queue * o.prefetch_per_consumer  # 0 = unlimited
        full = (self._byte_capped
                or (max_rows is not None and sum(want.values()) >= max_rows)
                or self._unplanned_bytes() >= o.max_buffered_bytes
                or bool(window) and all(b.received - b.acked >= window for b in bufs.values()))
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
        if self._targets is None or not any(self._targets.values()):
            return False
        now = time.monotonic()
        if self._reconnect_deadline is None:
            self._reconnect_deadline = now + self.options.available_now_idle_timeout
        elif now >= self._reconnect_deadline:
            log.warning("amqp source: Trigger.AvailableNow: could not reconnect within %.1fs; "
                        "finishing; %s snapshotted messages stay in the queues for the next run",
                        self.options.available_now_idle_timeout, self._targets)
            self._targets = {q: 0 for q in self._targets}
            self._reconnect_deadline = None
            return False
        wait = max(0.0, self._next_attempt - now)
        time.sleep(min(wait, max(0.0, self._reconnect_deadline - now)) if wait else 0.0)
        if time.monotonic() < self._next_attempt:   # the deadline came first: one last try
            self._next_attempt = 0.0
        return True

    def _wait_available_now(self, want: dict[str, int], max_rows: int | None,
                            max_bytes: int | None) -> dict[str, int]:
        """Trigger.AvailableNow: wait (bounded) until the batch can be full - the per-queue
        targets or the row limit - so the run is not cut short by deliveries still in flight;
        but once some deliveries are buffered, wait at most ``_AVAILABLE_NOW_FILL_WAIT`` seconds
        for the rest, then plan what is buffered (see that constant)."""
        idle_deadline = time.monotonic() + self.options.available_now_idle_timeout
        fill_deadline = time.monotonic() + _AVAILABLE_NOW_FILL_WAIT
        o = self.options
        window = o.consumers_per_queue * o.prefetch_per_consumer  # 0 = unlimited
        bufs = self._session.buffers
        while True:
            if self._byte_capped:
                return want  # maxBytesPerTrigger reached: the batch is full
            goal = fair_split({q: t for q, t in self._targets.items()}, max_rows)
            # a queue whose prefetch window is full gets nothing more until this batch is
            # acked (a prefetch below the trigger share): its part of the batch is complete
            if all(want.get(q, 0) >= g or (window and bufs[q].received - bufs[q].acked >= window)
                   for q, g in goal.items()):
                return want
            if any(want.values()) and time.monotonic() >= fill_deadline:
                return want  # plan what is here; the rest streams in during the batch
            # poll: a drain that waits returns at the first socket read (RabbitMQ sends a few
            # deliveries per read), waking this thread thousands of times a second for nothing
            time.sleep(_AVAILABLE_NOW_POLL)
            if self._drain():
                idle_deadline = time.monotonic() + self.options.available_now_idle_timeout
                want = self._wanted(max_rows, max_bytes)
            elif time.monotonic() >= idle_deadline:
                if not any(want.values()):
                    log.warning("amqp source: Trigger.AvailableNow: %s snapshotted messages did "
                                "not arrive within %.1fs; finishing", self._targets,
                                self.options.available_now_idle_timeout)
                    self._targets = {q: 0 for q in self._targets}
                return want

    def _ack_safely(self, off: SourceOffset) -> None:
        try:
            self._ack_upto(off)
        except Exception as e:
            if not _is_connection_error(e):
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
        max_bytes = _with_framing(self.options.max_bytes_per_partition)
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
        if self._consumer is None:
            return
        self._ack_safely(off)

    def stop(self, fast: bool = False) -> None:
        """Cancel the consumers and close the connection. Deliveries not yet acked (the last
        batch if it has no following trigger, and anything buffered) are requeued by the
        broker. ``fast``: only ``connection.close`` (which cancels the consumers and closes
        the channels on the broker, AMQP 0-9-1 §1.4.2.5), used when Spark is ending the
        process; the partition server's thread is then not waited for)."""
        consumer, self._consumer = self._consumer, None
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
