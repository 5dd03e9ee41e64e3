"""One write task's publisher: a connection, a confirm-mode channel, a bounded in-flight window.

Runs on an executor inside ``AmqpWriter.write`` / ``AmqpStreamWriter.write``. Semantics
(RabbitMQ docs "Consumer Acknowledgements and Publisher Confirms", docs/confirms.md):

- ``confirm.select`` first, so every publish of the task is confirmed or nacked by the broker;
- messages go out in chunks through ``Channel.publish_batch`` (one ``sendall`` per chunk),
  and at most ``maxInFlight`` publishes are unconfirmed at any time (the task waits for room,
  at most ``confirmTimeoutMs``);
- :meth:`TaskPublisher.finish` waits (``confirmTimeoutMs``) until every publish is confirmed;
  only then does the task report success. A nack, a confirm timeout, a ``basic.return``
  with ``onReturn=fail``, a channel/connection error or a lost connection raise
  :class:`AmqpSinkError` saying which and how many, so Spark fails and retries the task.
  Messages confirmed before the failure stay published: the sink is **at-least-once** (like
  Spark's Kafka sink), and a retried task republishes with the same deterministic
  ``message_id`` (see :mod:`spark_amqp.spark.sink.options`).
- When the connection is lost inside the task (a RabbitMQ node stopping: a reset or 320
  CONNECTION_FORCED, or a stalled node found by heartbeats), the task reconnects (``connect``
  tries every broker address, so another node of a cluster) and publishes again every message
  whose confirm had not arrived (at-least-once: the broker may have taken some of them; the
  deterministic ``message_id`` lets consumers drop duplicates), at most
  :data:`MAX_RECONNECTS` times per task; confirms and ``mandatory`` keep their meaning on the
  new channel (a return received on the lost channel before the loss is not reported).
- When the broker blocks the task's connection (``connection.blocked``: a memory or disk
  alarm, RabbitMQ docs "Blocked Connection Notifications") for longer than
  ``blockedTimeoutMs``, a watchdog aborts the connection and the task fails with an
  :class:`AmqpSinkError` naming the broker's reason; publishes not confirmed by then are
  redone by Spark's retry of the task.
- With ``mandatory`` an unroutable message is returned (312 NO_ROUTE) *before* its ack
  (RabbitMQ docs, confirms.md: "the basic.return is sent to the client before basic.ack"), so
  after the final wait all returns of the task are known.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from ...client.failover import retryable

__all__ = ["AmqpSinkError", "TaskPublisher", "TaskStats", "CHUNK_MESSAGES", "CHUNK_BYTES",
           "MAX_RECONNECTS"]

log = logging.getLogger(__name__)

#: connection losses a task rides out by reconnecting and republishing (then it fails)
MAX_RECONNECTS = 10
#: messages per ``publish_batch`` call (also capped by :data:`CHUNK_BYTES` and maxInFlight)
CHUNK_MESSAGES = 1000
#: body bytes per ``publish_batch`` call (a 1 MB body goes alone)
CHUNK_BYTES = 1 << 20


class AmqpSinkError(RuntimeError):
    """A write task of the ``amqp`` sink could not get every message confirmed.

    The message says what happened (broker error with reply code and text, nack, confirm
    timeout, returned messages, lost connection) and how many messages were published,
    confirmed and affected. Spark fails the task and retries it (at-least-once).
    """


@dataclass
class TaskStats:
    """Counters of one write task (returned to the driver inside the commit message).

    Attributes: rows (input rows), published (publishes sent), confirmed (acked by the
    broker), returned (``basic.return`` count; only non-zero with ``onReturn=ignore``),
    body_bytes (sum of body sizes), seconds (wall time from connect to last confirm).
    """

    rows: int = 0
    published: int = 0
    confirmed: int = 0
    returned: int = 0
    body_bytes: int = 0
    seconds: float = 0.0


class TaskPublisher:
    """Publishes one task's messages under confirms. Not thread-safe; one per task.

    Args:
        options: :class:`~spark_amqp.spark.sink.options.SinkOptions`.
        task: a short label for messages, e.g. ``"partition 3 of batch 7"``.

    Use :meth:`publish` for each converted Arrow batch, then :meth:`finish`, and always
    :meth:`close` (``with`` does it). The connection is opened on the first publish, so an
    empty partition never connects.
    """

    def __init__(self, options, task: str):
        self.options = options
        self.task = task
        self.stats = TaskStats()
        self._conn = None
        self._ch = None
        self._returned_first = None
        self._t0 = 0.0
        self._blocked_reason: str | None = None  # set while the broker blocks us
        self._blocked_gen = 0
        self._blocked_timer: threading.Timer | None = None
        self._blocked_error: AmqpSinkError | None = None
        self._partitions = 0  # superStream: partition count found at open()
        self._max_body = 0    # the message cap, bytes (set at open())
        self._max_body_from = ""
        # the messages of the last chunk that never got a sequence number on the channel
        # (its publish_batch failed before numbering them), for _reconnect
        self._unsent: list = []
        self.reconnects = 0  # connection losses ridden out
        self.republished = 0  # messages published again after them

    def __enter__(self) -> "TaskPublisher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- connection ---------------------------------------------------------------------
    def open(self) -> None:
        """Connect and put a channel in confirm mode now (:meth:`publish` does it on first
        use; an empty partition never calls either). Idempotent.

        Raises:
            AmqpSinkError: the connection, ``exchange.declare`` (``declareExchange``) or
                ``confirm.select`` failed (names the broker's reply or the socket error).
        """
        if self._ch is not None:
            return
        from ...client import connect

        o = self.options
        self._t0 = time.monotonic()
        try:
            self._conn = connect(o.uri, **o.connect_args())
            if o.max_message_bytes is not None:
                self._max_body, self._max_body_from = o.max_message_bytes, "option maxMessageBytes"
            else:
                from ...client.broker_limits import max_message_size

                self._max_body, self._max_body_from = max_message_size(self._conn.server_properties)
            self._conn.on_blocked = self._on_blocked
            self._conn.on_unblocked = self._on_unblocked
            ch = self._conn.channel()
            if o.declare_exchange:
                ch.exchange_declare(o.exchange, exchange_type=o.exchange_type,
                                    durable=o.exchange_durable)
            if o.super_stream is not None:
                self._partitions = self._count_partitions(o.super_stream)
            ch.confirm_select()
            # the maxInFlight window is the client's: publish_batch waits for room, at most
            # confirmTimeoutMs (then ConfirmTimeout), and wakes on the confirm that makes room
            ch.max_in_flight = o.max_in_flight
            ch.window_timeout = o.confirm_timeout
            # the channel keeps each message until it is confirmed, for _reconnect
            ch.keep_unconfirmed()
        except Exception as exc:  # noqa: BLE001 - re-raised with context
            raise self._error("could not open a confirm-mode channel", exc) from exc
        self._ch = ch

    def _count_partitions(self, name: str) -> int:
        """How many partition streams ``NAME-0, NAME-1, ...`` exist (passive declares until the
        first 404, each on its own channel since a 404 closes it). AmqpSinkError-worthy
        ``ValueError`` when ``NAME-0`` does not exist."""
        from ...protocol.errors import NotFound

        n = 0
        while True:
            ch = self._conn.channel()
            try:
                ch.queue_declare(f"{name}-{n}", passive=True)
            except NotFound:
                break
            ch.close()
            n += 1
        if n == 0:
            raise ValueError(f"super stream {name!r} has no partition stream {name}-0 (404); "
                             "create it (rabbitmq-streams add_super_stream) first")
        return n

    def close(self) -> None:
        """Close the connection (idempotent; errors while closing are logged, not raised).
        A connection the broker still blocks is aborted instead (no close handshake)."""
        conn, self._conn, self._ch = self._conn, None, None
        self._blocked_gen += 1
        if self._blocked_timer is not None:
            self._blocked_timer.cancel()
            self._blocked_timer = None
        if conn is not None:
            if self._blocked_reason is not None:
                # a blocked connection is not read by the broker: connection.close would wait
                # for close-ok in vain (RabbitMQ behaves the same); everything of this task is
                # settled or failed by now, so drop the connection instead
                conn.abort(f"closed by the amqp sink while blocked ({self._blocked_reason})")
            try:
                conn.close()
            except Exception as exc:  # noqa: BLE001 - closing after a failure may fail too
                log.debug("amqp sink %s: error while closing the connection: %s", self.task, exc)

    # -- connection.blocked watchdog ---------------------------------------------------------
    def _on_blocked(self, reason: str) -> None:
        """I/O thread: the broker blocked publishing; fail the task after blockedTimeoutMs."""
        self._blocked_reason = reason or "no reason given"
        self._blocked_gen += 1
        if self._blocked_timer is not None:
            self._blocked_timer.cancel()
        t = threading.Timer(self.options.blocked_timeout, self._blocked_expired, (self._blocked_gen,))
        t.daemon = True
        t.name = "amqp-sink-blocked-watchdog"
        self._blocked_timer = t
        t.start()
        log.warning("amqp sink %s: the broker blocked publishing (connection.blocked: %s); "
                    "waiting up to blockedTimeoutMs=%d", self.task, self._blocked_reason,
                    int(self.options.blocked_timeout * 1000))

    def _on_unblocked(self) -> None:
        self._blocked_gen += 1
        self._blocked_reason = None
        if self._blocked_timer is not None:
            self._blocked_timer.cancel()
            self._blocked_timer = None
        log.info("amqp sink %s: the broker unblocked publishing", self.task)

    def _blocked_expired(self, gen: int) -> None:
        conn = self._conn
        if gen != self._blocked_gen or conn is None:
            return
        ms = int(self.options.blocked_timeout * 1000)
        self._blocked_error = AmqpSinkError(
            f"amqp sink {self.task}: the broker blocked publishing (connection.blocked: "
            f"{self._blocked_reason}) for longer than blockedTimeoutMs={ms}; "
            f"{self.stats.published} message(s) published in this task, not all of them "
            "confirmed; the task fails so that Spark retries it (free memory / disk space on "
            "the broker, let consumers drain its queues, or raise blockedTimeoutMs)")
        conn.abort(f"blocked by the broker ({self._blocked_reason}) for longer than "
                   f"blockedTimeoutMs={ms}")

    def _blocked_note(self) -> str:
        r = self._blocked_reason
        return f" (the broker is blocking publishing: connection.blocked: {r})" if r else ""

    # -- publishing -----------------------------------------------------------------------
    def publish(self, messages: list) -> None:
        """Publish ``messages`` (``publish_batch`` tuples) in chunks; may block on the window.

        Before each chunk, waits (up to ``confirmTimeoutMs``) until the chunk fits in the
        ``maxInFlight`` window of unconfirmed publishes.

        Raises:
            AmqpSinkError: the broker closed the channel/connection (e.g. 404 no exchange),
                the connection was lost, or the window stayed full for ``confirmTimeoutMs``.
        """
        if not messages:
            return
        if self._ch is None:
            self.open()
        if self.options.super_stream is not None:
            from .super_stream import partition_name

            name, n = self.options.super_stream, self._partitions
            messages = [(b, "", partition_name(name, k or "", n), p, m)
                        for b, _e, k, p, m in messages]
        st = self.stats
        limit = min(CHUNK_MESSAGES, self.options.max_in_flight)
        i, n = 0, len(messages)
        while i < n:
            j, size = i, 0
            cap = self._max_body
            while j < n and j - i < limit and (size < CHUNK_BYTES or j == i):
                ln = len(messages[j][0])
                if ln > cap:
                    # before the broker reads it and closes the channel (406 PRECONDITION_FAILED)
                    if j > i:
                        break   # publish the rows before it first
                    raise AmqpSinkError(
                        f"amqp sink {self.task}: row {st.published} of this task has a body of "
                        f"{ln} bytes, above the broker's message size limit of {cap} bytes "
                        f"({self._max_body_from}); {st.published} message(s) published in this "
                        "task before it. Make the body smaller, raise the broker's "
                        "max_message_size and set the sink option maxMessageBytes to it "
                        "(RabbitMQ 4.x defaults to 16 MiB: docs/broker/rabbitmq-versions.md)")
                size += ln
                j += 1
            chunk = messages[i:j] if (i or j < n) else messages
            try:
                self._send_chunk(chunk)
            except AmqpSinkError:
                raise
            except Exception as exc:  # noqa: BLE001 - re-raised with context
                if self._blocked_error is not None:
                    raise self._blocked_error from exc
                # the chunk goes again: its unconfirmed part (kept by the channel) and the part
                # it never numbered (e.g. the window wait found the connection gone)
                if not self._reconnect(exc, self._unsent):
                    raise self._error("publishing failed", exc) from exc
            st.published += j - i
            st.body_bytes += size
            i = j

    def _send_chunk(self, chunk: list) -> None:
        """Publish ``chunk`` on the current channel, which keeps each message until it is
        confirmed (``keep_unconfirmed``); when ``publish_batch`` fails, the messages it did
        not number are left in ``_unsent`` (both for :meth:`_reconnect`). The channel's
        ``publish_batch``
        waits until the chunk fits in the ``maxInFlight`` window (the client's
        ``max_in_flight``), at most ``confirmTimeoutMs`` (the client's ``window_timeout``):
        a broker that stops confirming (e.g. a memory alarm blocking publishers, RabbitMQ docs
        "Memory and Disk Alarms") fails the task instead of hanging it.

        Raises:
            AmqpSinkError: the window stayed full for ``confirmTimeoutMs``.
            the channel's error: it closed, or the connection was lost (ConnectionLost).
        """
        from ...client.errors import ConfirmTimeout

        ch = self._ch
        self._unsent = []
        base = ch.next_publish_seq
        try:
            ch.publish_batch(chunk)
        except ConfirmTimeout as exc:
            raise self._window_full(exc.outstanding) from exc
        except BaseException:
            self._unsent = chunk[ch.next_publish_seq - base:]
            raise

    def _reconnect(self, exc: BaseException, unsent=()) -> bool:
        """After a lost connection: reconnect (another broker address) and publish again every
        message the lost channel kept unconfirmed (``unconfirmed_messages``), then ``unsent``
        (messages it never numbered). False when ``exc`` is refused for good (the client's
        classification, :func:`spark_amqp.client.failover.classify`: a reconnect would get
        the same answer), after :data:`MAX_RECONNECTS`, or when the reconnect fails."""
        if (not retryable(exc) or self.reconnects >= MAX_RECONNECTS or self._ch is None
                or self._blocked_error is not None):  # the watchdog ended the connection
            return False
        old_ch, old_conn = self._ch, self._conn
        again = old_ch.unconfirmed_messages()
        again.extend(unsent)
        self._unsent = []
        try:
            old_conn.abort("connection lost; reconnecting")
        except Exception:  # noqa: BLE001 - it is gone already
            pass
        self._ch = self._conn = None
        self.reconnects += 1
        log.warning("amqp sink %s: connection lost (%s); reconnecting through the next broker "
                    "address and publishing %d unconfirmed message(s) again", self.task, exc,
                    len(again))
        t0 = self._t0
        try:
            self.open()
        except AmqpSinkError:
            return False
        self._t0 = t0
        step = min(CHUNK_MESSAGES, self.options.max_in_flight)
        for k in range(0, len(again), step):
            part = again[k:k + step]
            try:
                self._send_chunk(part)
            except Exception as exc2:  # noqa: BLE001 - lost again: the rest goes with it
                return self._reconnect(exc2, self._unsent + again[k + step:])
        self.republished += len(again)
        return True

    def _window_full(self, in_flight: int) -> AmqpSinkError:
        """The error of a ``maxInFlight`` window that stayed full (``in_flight`` publishes
        unconfirmed) for ``confirmTimeoutMs``."""
        return AmqpSinkError(
            f"amqp sink {self.task}: {in_flight} of {self.stats.published} publish(es) "
            f"stayed unconfirmed for confirmTimeoutMs="
            f"{int(self.options.confirm_timeout * 1000)} with the maxInFlight="
            f"{self.options.max_in_flight} window full{self._blocked_note()}; the broker may be "
            "blocked (memory/disk alarm) or overloaded; the task fails so that Spark retries it")

    def finish(self) -> TaskStats:
        """Wait until every publish is confirmed; return the task's :class:`TaskStats`.

        Raises:
            AmqpSinkError: nacks, a confirm timeout, returns with ``onReturn=fail``, a broker
                error or a lost connection; the message says which and how many.
        """
        if self._ch is None:
            return self.stats
        from ...client.errors import ConfirmTimeout, PublishNacked

        try:
            while True:
                try:
                    result = self._ch.wait_for_confirms(timeout=self.options.confirm_timeout)
                    break
                except (PublishNacked, ConfirmTimeout):
                    raise
                except Exception as exc:  # noqa: BLE001 - a lost connection: republish
                    if self._blocked_error is not None or not self._reconnect(exc):
                        raise
        except PublishNacked as exc:
            r = exc.result
            self.stats.confirmed = getattr(r, "acked", 0)
            raise AmqpSinkError(
                f"amqp sink {self.task}: the broker nacked {len(r.nacked)} of "
                f"{self.stats.published} publish(es) (it did not take responsibility for them: "
                "check queue length limits / x-overflow=reject-publish and the broker log); "
                "the task fails so that Spark retries it") from exc
        except ConfirmTimeout as exc:
            raise AmqpSinkError(
                f"amqp sink {self.task}: {exc.outstanding} of {self.stats.published} publish(es) "
                f"still unconfirmed after confirmTimeoutMs={int(self.options.confirm_timeout * 1000)}"
                f"{self._blocked_note()}; the broker may be blocked (memory/disk alarm) or overloaded; the task fails "
                "so that Spark retries it (raise confirmTimeoutMs if the broker is just slow)"
            ) from exc
        except Exception as exc:  # noqa: BLE001 - broker errors, lost connection
            if self._blocked_error is not None:
                raise self._blocked_error from exc
            raise self._error("waiting for publisher confirms failed", exc) from exc
        # after a reconnect the current channel confirmed only what was published on it; the
        # rest was confirmed on the lost one (or republished): every message is confirmed
        self.stats.confirmed = result.acked if not self.reconnects else self.stats.published
        returned = list(result.returned)
        self.stats.returned = len(returned)
        self.stats.seconds = time.monotonic() - self._t0
        if returned and self.options.on_return == "fail":
            first = returned[0]
            raise AmqpSinkError(
                f"amqp sink {self.task}: {len(returned)} of {self.stats.published} message(s) "
                f"were returned by the broker as unroutable ({first.reply_code} "
                f"{first.reply_text}; first: exchange={first.exchange!r}, "
                f"routing_key={first.routing_key!r}) with mandatory=true and onReturn=fail; "
                "bind a queue for these routing keys, or set onReturn=ignore")
        if returned:
            log.warning("amqp sink %s: %d message(s) returned as unroutable and ignored "
                        "(onReturn=ignore)", self.task, len(returned))
        return self.stats

    def _error(self, what: str, exc: BaseException) -> AmqpSinkError:
        code = getattr(exc, "reply_code", None)
        if code:
            text = str(getattr(exc, "reply_text", "") or exc)
            name = getattr(exc, "name", "")
            cause = f"the broker answered {code} " + (text if text.startswith(name) else
                                                      f"{name} - {text}")
        elif isinstance(exc, OSError):
            cause = f"the connection was lost or could not be opened ({type(exc).__name__}: {exc})"
        else:
            cause = f"{type(exc).__name__}: {exc}"
        return AmqpSinkError(
            f"amqp sink {self.task}: {what}: {cause}; {self.stats.published} message(s) published "
            "in this task before that, not all of them confirmed; the task fails so that Spark "
            "retries it "
            "(messages already confirmed stay published: at-least-once)")
