"""The driver's consumer of the queue mode: one connection, one channel per queue, manual acks
(broker I/O).

Used only by the queue mode's reader (:class:`.reader.AmqpQueueStreamReader`) in Spark's
long-lived source runner process on the driver (never in ``__init__``, never on executors).
Per queue: a channel, ``basic.qos(prefetch, global=False)`` (per consumer, RabbitMQ
docs/consumer-prefetch.md), then ``basic.consume(no_ack=False)`` without a callback so the
client buffers deliveries in the channel, in raw mode (runs of undecoded frames,
``spark_amqp.protocol.raw_deliveries``: the driver never decodes a message, the executors do);
the reader drains them. Because prefetch-count is a short (AMQP 0-9-1 §1.8.3.1), a window
above 65535 is realised by several consumers on the same channel (their deliveries still share
the channel's tag sequence, so a ``multiple=True`` ack stays exact).

The reader uses the consumer only through :class:`QueueConsumer` (a ``typing.Protocol``):
:class:`DriverConsumer` implements it, and so does the unit tests' fake consumer.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Protocol, runtime_checkable

from ..options import SourceOptions
from ..timeouts import RPC_TIMEOUT

__all__ = ["QueueConsumer", "DriverConsumer", "QueueMissing", "QueueUnavailable",
           "ConsumerCancelled"]

log = logging.getLogger(__name__)


@runtime_checkable
class QueueConsumer(Protocol):
    """What the queue-mode reader needs of its driver consumer (one connection consuming
    ``options.queues``, a channel per queue; see the module doc). Methods that talk to the
    broker raise what the client raises: what the client's classification
    (:func:`spark_amqp.client.failover.classify`) takes as a lost connection or a node that
    cannot serve now ends the reader's session, it reconnects; what is refused for good fails
    the query."""

    #: queue -> ready messages in the declare-ok answered before consuming (set by ``open``;
    #: Trigger.AvailableNow's snapshot)
    initial_counts: dict[str, int]

    @property
    def is_open(self) -> bool:
        """The connection is open."""

    @property
    def error(self) -> BaseException | None:
        """Why the connection ended, or None."""

    def open(self) -> None:
        """Connect, check (or declare) the queues and start consuming. Raises
        :class:`QueueMissing` for a queue that does not exist."""

    def drain(self, queue: str, timeout: float = 0.0) -> list:
        """Deliveries of ``queue`` received since the last drain (runs of raw frames or
        single deliveries, in delivery-tag order); waits up to ``timeout`` seconds for the
        first one when none is there."""

    def ack(self, queue: str, delivery_tag: int) -> None:
        """``basic.ack(delivery_tag, multiple=True)`` on the queue's channel."""

    def set_read_limit(self, max_bytes: int, extra: Callable[[], int]) -> None:
        """Stop reading the socket while the buffered deliveries plus ``extra()`` bytes reach
        ``max_bytes`` (``maxBufferedBytes``: TCP back-pressure)."""

    def resume_reading(self) -> None:
        """Bytes were planned: look at the read limit again."""

    def queue_depths(self) -> dict[str, int]:
        """Ready messages per queue now (a round trip per queue)."""

    def queue_of_channel(self, channel: int) -> str | None:
        """The queue consumed on channel number ``channel``, or None."""

    def close(self) -> None:
        """Cancel the consumers and close politely. Never raises."""

    def abort(self) -> None:
        """Close the connection at once. Never raises."""


class QueueMissing(RuntimeError):
    """A source queue does not exist (passive queue.declare answered 404 NOT_FOUND)."""


class QueueUnavailable(ConnectionError):
    """A source queue exists but its node is down: RabbitMQ answers a declare of a classic
    queue whose home node is stopped with 404 NOT_FOUND "home node ... is down or
    inaccessible" (rabbit_amqqueue:not_found_or_absent_dirty / rabbit_misc:absent; the
    client's classification takes it as a node that cannot serve now). An OSError, so the
    reader retries it (within ``failoverTimeout``) instead of failing the query for a missing
    queue."""


class ConsumerCancelled(ConnectionError):
    """The broker cancelled a consumer (``basic.cancel`` from the server, RabbitMQ
    docs/consumer-cancel.md). An OSError so the reader handles it like a connection loss."""


class DriverConsumer:
    """Consume ``options.queues`` on one connection (see module doc); a
    :class:`QueueConsumer`.

    Methods raise ``spark_amqp.client.ConnectionLost`` (socket loss / heartbeat timeout) or a
    ``spark_amqp.protocol.errors.AMQPError`` subclass (broker closed the channel/connection);
    the reader classifies them (:func:`spark_amqp.client.failover.classify`).
    """

    def __init__(self, options: SourceOptions):
        self.options = options
        self.conn: Any = None
        self.channels: dict[str, Any] = {}
        self.consumer_tags: dict[str, list[str]] = {}
        #: queue -> message-count of the declare-ok answered before consuming (ready messages)
        self.initial_counts: dict[str, int] = {}
        #: the connection and channel of :meth:`queue_depths` (opened at its first call)
        self._depth_conn: Any = None
        self._depth_channel: Any = None

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Connect, check or declare every queue, set QoS and start consuming.

        Raises :class:`QueueMissing` when a queue does not exist and ``declare`` is false.
        """
        o = self.options
        kw = {} if o.max_message_bytes is None else {"max_body_size": o.max_message_bytes}
        self.conn = self._connect(**kw)
        if o.max_message_bytes is None:
            # maxMessageBytes unset: the broker's own limit (what it can have accepted)
            from spark_amqp.client.broker_limits import max_message_size

            self.conn.set_max_body_size(max_message_size(self.conn.server_properties)[0])
        try:
            self._open_channels()
        except BaseException:
            self.abort()
            raise

    def _open_channels(self) -> None:
        """Per queue: channel, declare (or check), raw mode, qos, one consumer waiting for its
        consume-ok (so a missing permission or an exclusive consumer fails here); then the
        queues' further consumers with no-wait (§1.8.3.3): their consume-oks would queue behind
        the first consumers' deliveries (up to the prefetch window, a second or more),
        holding up the query's first batch."""
        from spark_amqp.protocol.errors import NotFound

        o = self.options
        for q in o.queues:
            ch = self.conn.channel()
            try:
                if o.declare:
                    ok = ch.queue_declare(q, durable=o.durable,
                                          arguments=dict(o.queue_arguments) or None)
                else:
                    ok = ch.queue_declare(q, passive=True)
                self.initial_counts[q] = int(ok.message_count)
            except NotFound as e:
                if "down or inaccessible" in (e.reply_text or ""):
                    raise QueueUnavailable(
                        f"queue {q!r} is unavailable on {self._where()}: {e.reply_text} (a "
                        "classic queue lives on one node; use a quorum queue or a stream to "
                        "read through another node)") from e
                raise QueueMissing(
                    f"Queue {q!r} does not exist on {self._where()} (404 NOT_FOUND: "
                    f"{e.reply_text}). Create it, or set option declare=true (with "
                    "queueArguments/durable) to let the source declare it.") from e
            if o.exchange is not None:
                self._subscribe(ch, q)
            ch.set_raw_deliveries()  # deliveries stay frames until the executors
            ch.basic_qos(o.prefetch_per_consumer)
            self.channels[q] = ch
            self.consumer_tags[q] = [ch.basic_consume(q, no_ack=False)]
        for q in o.queues:
            ch = self.channels[q]
            for i in range(1, o.consumers_per_queue):
                tag = f"{self.consumer_tags[q][0]}.{i}"
                self.consumer_tags[q].append(ch.basic_consume(q, no_ack=False,
                                                              consumer_tag=tag, no_wait=True))

    def _subscribe(self, ch: Any, queue: str) -> None:
        """Exchange subscription (options ``exchange``...): declare the exchange
        (``exchangeDeclare=true``) or check it exists (passive), then ``queue.bind`` the queue
        once per binding key with ``bindingArguments``. Both are idempotent (AMQP 0-9-1
        §1.6.2.1, §1.7.2.3), so every (re)connect does them again: a binding someone removed
        comes back. Raises ``ValueError`` naming the option when the exchange is missing
        (404)."""
        from spark_amqp.protocol.errors import NotFound

        o = self.options
        try:
            if o.exchange_declare:
                ch.exchange_declare(o.exchange, o.exchange_type, durable=o.exchange_durable)
            else:
                ch.exchange_declare(o.exchange, passive=True)
        except NotFound as e:
            raise ValueError(
                f"Exchange {o.exchange!r} (option 'exchange') does not exist on {self._where()} "
                f"(404 NOT_FOUND: {e.reply_text}). Create it, or set option "
                "exchangeDeclare=true (with exchangeType, exchangeDurable) to let the source "
                "declare it.") from e
        for key in o.binding_keys:
            ch.queue_bind(queue, o.exchange, key, arguments=dict(o.binding_arguments) or None)

    def _where(self) -> str:
        """``host:port`` of the node this consumer is connected to (one of the addresses)."""
        from spark_amqp.client.uri import format_address

        p = self.conn.params
        return format_address(p.host, p.port)

    @property
    def is_open(self) -> bool:
        return self.conn is not None and bool(getattr(self.conn, "is_open", False))

    @property
    def error(self) -> BaseException | None:
        """Why the connection ended (the client's error), or None."""
        return getattr(self.conn, "error", None) if self.conn is not None else None

    def close(self) -> None:
        """Cancel the consumers, close the channels and the connection; unacked deliveries are
        requeued by the broker (AMQP 0-9-1 §1.8.3.3, basic.cancel; channel.close). Never raises."""
        for q, ch in list(self.channels.items()):
            try:
                for tag in self.consumer_tags.get(q, ()):
                    ch.basic_cancel(tag)
                ch.close()
            except Exception as e:  # noqa: BLE001 - best effort on shutdown
                log.debug("closing channel of %s: %s", q, e)
        self.abort()

    def abort(self) -> None:
        """Close the connection at once (``connection.close``, which on the broker cancels the
        consumers, closes the channels and requeues unacked deliveries; a dead connection is
        just dropped), skipping the per-channel handshakes. Never raises."""
        conn, self.conn = self.conn, None
        depth_conn, self._depth_conn = self._depth_conn, None
        self.channels = {}
        self._depth_channel = None
        self.consumer_tags = {}
        for c in (conn, depth_conn):
            if c is not None:
                self._close_quietly(c)

    # -- per-trigger calls -------------------------------------------------------------------

    def drain(self, queue: str, timeout: float = 0.0) -> list:
        """Deliveries of ``queue`` received since the last drain (waits up to ``timeout`` s
        for the first one when none is buffered)."""
        ch = self.channels[queue]
        ds = ch.drain(None, timeout)
        if getattr(ch, "cancelled_consumers", None):
            # basic.cancel from the broker (RabbitMQ consumer-cancel notification, e.g. the queue
            # was deleted): treat like a lost channel; the reconnect re-checks the queue.
            raise ConsumerCancelled(
                f"the broker cancelled the consumer of queue {queue!r} "
                f"(tags {sorted(ch.cancelled_consumers)}); the queue may have been deleted")
        return ds

    def set_read_limit(self, max_bytes: int, extra) -> None:
        """Back-pressure: the connection stops reading while the deliveries it buffers plus
        ``extra()`` (the reader's unplanned bytes) reach ``max_bytes``
        (``spark_amqp.client.Connection.set_read_limit``)."""
        self.conn.set_read_limit(max_bytes, extra)

    def resume_reading(self) -> None:
        """Bytes were planned: let the connection look at its read limit again."""
        conn = self.conn
        if conn is not None:
            conn.resume_reading()

    def ack(self, queue: str, delivery_tag: int) -> None:
        """``basic.ack(delivery_tag, multiple=True)`` on the queue's channel."""
        self.channels[queue].basic_ack(delivery_tag, multiple=True)

    def queue_of_channel(self, channel: int) -> str | None:
        """The queue consumed on channel number ``channel`` (e.g. the one a too-large body
        came on), or None."""
        return next((q for q, ch in self.channels.items()
                     if getattr(ch, "channel_number", None) == channel), None)

    def queue_depths(self) -> dict[str, int]:
        """Ready messages per queue (passive ``queue.declare``'s message-count, AMQP 0-9-1
        §1.7.2.2: messages not yet delivered to a consumer; RabbitMQ does not count unacked
        ones) on a channel of a second connection kept open for it (:meth:`_depth_connection`):
        one round trip per queue (the lag that ``reportLatestOffset`` shows). Raises what the
        client raises; a 404 closes the channel (the next call opens another)."""
        ch = self._depth_channel
        if ch is None or not getattr(ch, "is_open", True):
            ch = self._depth_channel = self._depth_connection().channel()
        try:
            return {q: int(ch.queue_declare(q, passive=True).message_count)
                    for q in self.options.queues}
        except BaseException:
            self._depth_channel = None
            raise

    def _depth_connection(self) -> Any:
        """A connection of its own for :meth:`queue_depths`, opened at first use (same URI,
        addresses and TLS as the consumers'). Not the consumers' connection: a synchronous
        call there reads the socket without the read limit until its reply arrives
        (``Connection.set_read_limit``), and the broker sends the reply after every delivery
        it has already queued for the consumers, up to their prefetch windows; a lag poll
        every second would then pull in whole queues of large messages (the source runner
        held ~1.1 GiB for a 1 GiB queue of 256 KiB messages). To the node the consumers are
        connected to. Raises what ``connect`` raises."""
        c = self._depth_conn
        if c is None or not getattr(c, "is_open", False):
            if c is not None:
                self._close_quietly(c)
            # the consumers' node: it answered last, and a dead address of the list would
            # hold up the trigger that asks for up to connectionTimeout
            p = self.conn.params
            c = self._depth_conn = self._connect(addresses=((p.host, p.port),))
            self._depth_channel = None
        return c

    def _connect(self, **extra: Any) -> Any:
        """``connect`` with the options' URI and connection options, ``extra`` on top. One
        round over the addresses per attempt: the reader backs off between attempts and
        applies failoverTimeout itself (it must not block a trigger that long)."""
        from spark_amqp.client import connect

        kwargs = {**self.options.client_kwargs(), "failover_timeout": 0, **extra}
        return connect(self.options.uri, rpc_timeout=RPC_TIMEOUT, **kwargs)

    @staticmethod
    def _close_quietly(conn: Any) -> None:
        try:
            conn.close()
        except Exception as e:  # noqa: BLE001
            log.debug("closing connection: %s", e)

    def message_counts(self) -> dict[str, int]:
        """Ready messages per queue (passive queue.declare message-count, §1.7.2.2): the
        snapshot for Trigger.AvailableNow. Unacked deliveries are not counted by RabbitMQ."""
        ch = self.conn.channel()
        try:
            return {q: ch.queue_declare(q, passive=True).message_count for q in self.options.queues}
        finally:
            try:
                ch.close()
            except Exception:  # noqa: BLE001
                pass
