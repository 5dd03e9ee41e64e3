"""An AMQP channel of the blocking client: declarations, publishing with pipelined publisher
confirms, consuming into a buffer, acks, basic.get, qos, tx.

Threading: synchronous methods (``queue_declare`` …) send in the caller's thread and wait on
this channel's condition until the I/O thread stores the reply. Deliveries are appended to a
``deque`` by the I/O thread with no lock; a waiter is woken (once per received batch) only
when someone waits in :meth:`Channel.drain`. Publisher confirms are counted by one
:class:`~.confirms.ConfirmTracker` per channel (sequence numbers, unconfirmed publishes, acks
and nacks; ``multiple`` settles everything up to and including the tag, RabbitMQ docs
"Consumer Acknowledgements and Publisher Confirms").
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any, Callable, Iterable

from ..protocol import BasicProperties, encode_method, spec
from ..protocol.connection import error_from_close
from ..protocol.errors import AMQPError, error_for_code
from ..protocol.publish import PublishEncoder
from ..protocol.raw_deliveries import RawDeliveries
from .channel_host import ChannelHost
from .confirms import ConfirmTracker
from .errors import (ChannelClosed, ConfirmTimeout, ConnectionClosed, ConnectionLost,
                     PublishNacked, copy_error)
from .messages import ConfirmResult, DeclareOk, Delivery, ReturnedMessage

__all__ = ["Channel", "MAX_KEPT_RETURNS"]

#: Returned messages kept outside confirm mode without an ``on_return`` callback (older ones
#: are kept, later ones dropped) until :meth:`Channel.take_returned` collects them.
MAX_KEPT_RETURNS = 10000

log = logging.getLogger("spark_amqp.client")

_B = spec.Basic
_Deliver = _B.Deliver
_GetOk = _B.GetOk
_Return = _B.Return
_Ack = _B.Ack
_Nack = _B.Nack
_ChClose = spec.Channel.Close
_ChCloseOk = spec.Channel.CloseOk
_Flow = spec.Channel.Flow
_FlowOk = spec.Channel.FlowOk
_Cancel = _B.Cancel
_ConsumeOk = _B.ConsumeOk
_monotonic = time.monotonic
_tnew = tuple.__new__


class Channel:
    """One AMQP channel; create with :meth:`Connection.channel`.

    Attributes:
        connection: the owning connection, as a :class:`.channel_host.ChannelHost` (the
            :class:`~spark_amqp.client.connection.Connection` that made this channel).
        channel_number: int (1..channel_max).
        max_in_flight: int or None; in confirm mode ``basic_publish``/``publish_batch`` block
            while this many publishes are unconfirmed (None = unlimited).
        window_timeout: float seconds or None; how long a publish may block on a full
            ``max_in_flight`` window before raising :class:`ConfirmTimeout` (None = forever;
            e.g. RabbitMQ blocking publishers on a memory alarm stops the confirms).
        on_return: optional ``callable(ReturnedMessage)`` run in the I/O thread. In confirm
            mode returned messages are also collected for ``wait_for_confirms``; outside it
            they are collected (see :meth:`take_returned`) only when no callback is set.
        on_cancel: optional ``callable(consumer_tag)`` run in the I/O thread when the broker
            cancels a consumer (queue deleted, RabbitMQ "Consumer Cancel Notification").
        cancelled_consumers: set of consumer tags the broker cancelled.
        flow_active: False while the broker paused this channel with ``channel.flow``.
    """

    def __init__(self, connection: ChannelHost, channel_number: int):
        self.connection = connection
        self.channel_number = channel_number
        self.max_in_flight: int | None = None
        self.window_timeout: float | None = None
        self.on_return: Callable[[ReturnedMessage], Any] | None = None
        self.on_cancel: Callable[[str], Any] | None = None
        self.cancelled_consumers: set[str] = set()
        self.flow_active = True
        self._cancel_count = 0
        self._conn = connection
        self._cond = threading.Condition(threading.Lock())
        self._rpc_lock = threading.Lock()
        self._reply: Any = None
        self._expect: tuple = ()
        self._error: BaseException | None = None
        self._closing = False
        self._opened = False
        self._waiting = 0  # >0 while a caller waits on _cond (drain / confirms / window)
        self._rpc_open = False  # a synchronous call's reply has not arrived (_rpc_flag_lock)
        self._rpc_flag_lock = threading.Lock()
        # consumers
        self._buffer: deque[Delivery] = deque()
        # delivery bytes put into / taken out of _buffer (Connection.set_read_limit); each
        # counter written by one thread only: _bytes_in by the I/O thread, _bytes_out by drain
        self._bytes_in = 0
        self._bytes_out = 0
        self._callbacks: dict[str, Callable[[Delivery], Any]] = {}
        self._pending_callback: Callable[[Delivery], Any] | None = None
        # confirms
        self._confirming = False
        self._confirms = ConfirmTracker()  # read and settled under _cond
        self._keeping = False  # keep_unconfirmed(): the tracker keeps each publish's message
        self._returned: list[ReturnedMessage] = []
        # basic.publish frames (the method frame cached per exchange/routing key/mandatory)
        self._encode = PublishEncoder(channel_number, connection.frame_max).encode

    # ================================================================= I/O thread side

    def _on_content(self, ev) -> None:
        m = ev.method
        t = type(m)
        if t is _Deliver:
            if self._closing:
                return
            tag = m.consumer_tag
            d = _tnew(Delivery, (tag, m.delivery_tag, m.redelivered, m.exchange, m.routing_key,
                                 ev.properties, ev.body, None, self.channel_number))
            cb = self._callbacks.get(tag) if self._callbacks else None
            if cb is None:
                self._buffer.append(d)
                self._bytes_in += len(ev.body)
                if self._waiting:
                    self._schedule_wake()
            else:
                try:
                    cb(d)
                except Exception:
                    log.exception("consumer callback for %r on channel %d raised; delivery %d "
                                  "left unacked", tag, self.channel_number, m.delivery_tag)
        elif t is _Return:
            r = ReturnedMessage(m.reply_code, m.reply_text, m.exchange, m.routing_key,
                                ev.properties, ev.body, self.channel_number)
            cb = self.on_return
            # collected for wait_for_confirms / take_returned; bounded outside confirm mode
            # when nobody collects them (a callback, or nothing, consumes them there)
            if self._confirming or (cb is None and len(self._returned) < MAX_KEPT_RETURNS):
                self._returned.append(r)
            if cb is not None:
                try:
                    cb(r)
                except Exception:
                    log.exception("on_return callback raised")
        elif t is _GetOk:
            self._set_reply(Delivery("", m.delivery_tag, m.redelivered, m.exchange, m.routing_key,
                                     ev.properties, ev.body, m.message_count, self.channel_number))
        else:  # pragma: no cover - the decoder only yields content methods here
            log.warning("unexpected content method %s on channel %d", m.NAME, self.channel_number)

    def _on_raw(self, run) -> None:
        """A run of undecoded deliveries (:class:`~spark_amqp.protocol.RawDeliveries`, raw
        mode only): buffered whole; decoded one by one if a consumer callback is set."""
        if self._closing:
            return
        if self._callbacks:
            for ev in run.decode():
                self._on_content(ev)
            return
        self._buffer.append(run)
        self._bytes_in += len(run.data)
        if self._waiting:
            self._schedule_wake()

    def _on_method(self, m) -> None:
        t = type(m)
        if t is _Ack or t is _Nack:
            self._on_confirm(m.delivery_tag, m.multiple, t is _Nack)
        elif t is _ChClose:
            # the broker closed the channel (spec §channel.close): answer close-ok, keep error
            try:
                self._conn.send_method(self.channel_number, _ChCloseOk())
            except (OSError, AMQPError):
                pass
            err = error_from_close(m)
            self._conn.forget_channel(self)
            self._closed_with(err)
        elif t is _Cancel:  # consumer cancel notification (RabbitMQ extension), no reply
            tag = m.consumer_tag
            self._callbacks.pop(tag, None)
            self.cancelled_consumers.add(tag)
            self._cancel_count += 1
            if self.on_cancel is not None:
                try:
                    self.on_cancel(tag)
                except Exception:
                    log.exception("on_cancel callback raised")
            self._schedule_wake()
        elif t is _Flow:
            self.flow_active = m.active
            try:
                self._conn.send_method(self.channel_number, _FlowOk(m.active))
            except (OSError, AMQPError):
                pass
        elif t is _ChCloseOk and self._closing:
            self._conn.forget_channel(self)
            self._set_reply(m)
        else:
            if t is _ConsumeOk and self._pending_callback is not None:
                # register before the first basic.deliver is dispatched (same thread, in order)
                self._callbacks[m.consumer_tag] = self._pending_callback
                self._pending_callback = None
            self._set_reply(m)

    def _on_confirm(self, tag: int, multiple: bool, nack: bool) -> None:
        with self._cond:
            self._confirms.settle(tag, multiple, nack)
            if self._waiting:
                self._cond.notify_all()

    def _set_reply(self, reply) -> None:
        self._end_rpc_wait()
        with self._cond:
            self._reply = reply
            self._cond.notify_all()

    def _end_rpc_wait(self) -> None:
        """The reply of the synchronous call in progress has arrived, or the channel ended:
        the connection's read limit applies again from here (I/O thread), not only once the
        caller's thread wakes up. Until then the I/O thread read on, without bound, what the
        broker sent meanwhile (a whole queue of deliveries right after consume-ok on a busy
        machine). Idempotent; the caller's thread calls it too."""
        with self._rpc_flag_lock:
            if not self._rpc_open:
                return
            self._rpc_open = False
        self._conn.rpc_wait_ended()

    def _schedule_wake(self) -> None:
        self._conn.wake_after_read(self)

    def _notify(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _closed_with(self, err: BaseException) -> None:
        self._end_rpc_wait()
        with self._cond:
            if self._error is None:
                self._error = err
            self._cond.notify_all()

    def _on_connection_closed(self, err: BaseException) -> None:
        self._closed_with(err)

    # ================================================================= caller side

    def _raise(self):
        err = self._error
        raise copy_error(err) from err  # type: ignore[arg-type]

    def _rpc(self, method):
        """Send a synchronous method and wait for its reply (one of ``method.responses``).

        Raises the broker's typed error when it closes the channel/connection instead.
        """
        if self._conn.in_io_thread():
            raise RuntimeError(
                f"{method.NAME} is synchronous and was called from the I/O thread (a consumer "
                "callback or on_return/on_cancel); call it from another thread, or use the "
                "buffered consumer (no callback) with drain()")
        with self._rpc_lock:
            if self._error is not None:
                self._raise()
            with self._cond:
                self._reply = None
            try:
                self._conn.send_method(self.channel_number, method)
            except AMQPError:
                # refused by the state machine: the broker's channel.close may be received but
                # not yet dispatched (e.g. after an async basic.ack with a bad tag); raise the
                # broker's error when it arrives
                with self._cond:
                    self._cond.wait_for(lambda: self._error is not None, 2.0)
                if self._error is not None:
                    self._raise()
                raise
            responses = method.responses
            timeout = self._conn.params.rpc_timeout
            deadline = None if timeout is None else _monotonic() + timeout
            # the reply may be behind deliveries: reading never pauses meanwhile (set_read_limit);
            # counted before the flag is set, so that an end racing in between counts nothing
            self._conn.rpc_wait_started()
            with self._rpc_flag_lock:
                self._rpc_open = True
            try:
                with self._cond:
                    self._waiting += 1
                    try:
                        while self._reply is None and self._error is None:
                            if deadline is None:
                                self._cond.wait()
                                continue
                            left = deadline - _monotonic()
                            if left <= 0:
                                break
                            self._cond.wait(left)
                    finally:
                        self._waiting -= 1
                    reply = self._reply
                    self._reply = None
            finally:
                self._end_rpc_wait()
            if reply is None and self._error is None:
                # No answer in time: the channel's state is unknown (the reply may still
                # come), so the whole connection is dropped rather than reused.
                self._conn.fail(ConnectionLost(
                    f"no reply to {method.NAME} on channel {self.channel_number} within "
                    f"{timeout} s (rpc_timeout); the connection was dropped"))
            if reply is None:
                self._raise()
            if responses and type(reply) not in responses and not isinstance(reply, Delivery):
                raise error_for_code(
                    503, f"expected {'/'.join(r.NAME for r in responses)} in reply to "
                         f"{method.NAME} on channel {self.channel_number}, got {reply!r}")
            return reply

    def _open(self) -> None:
        self._rpc(spec.Channel.Open(""))
        self._opened = True

    @property
    def is_open(self) -> bool:
        """True until closed by this client, by the broker, or with the connection."""
        return self._error is None and not self._closing

    @property
    def error(self) -> BaseException | None:
        """Why the channel is closed (typed AMQPError, ChannelClosed, ConnectionLost…)."""
        return self._error

    def close(self, reply_code: int = 200, reply_text: str = "Normal shutdown") -> None:
        """``channel.close`` → wait for ``close-ok``. Idempotent; no error if the channel or
        connection is already closed. Unacked deliveries of this channel are requeued by the
        broker; buffered, undrained deliveries are discarded."""
        if self._error is not None or self._closing:
            return
        self._closing = True
        try:
            self._rpc(_ChClose(reply_code, reply_text, 0, 0))
        except (AMQPError, OSError, ConnectionClosed):
            pass
        finally:
            self._conn.forget_channel(self)
            self._closed_with(ChannelClosed(
                f"channel {self.channel_number} was closed by this client; open a new one "
                "with connection.channel()"))
            self._buffer.clear()

    def __enter__(self) -> "Channel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Channel {self.channel_number} {'open' if self.is_open else 'closed'}>"

    # ----------------------------------------------------------------- exchanges

    def exchange_declare(self, exchange: str, exchange_type: str = "direct", passive: bool = False,
                         durable: bool = False, auto_delete: bool = False, internal: bool = False,
                         arguments: dict | None = None) -> None:
        """``exchange.declare`` (spec §exchange.declare). ``passive`` only checks existence.

        Raises NotFound (404, passive and missing), PreconditionFailed (406, exists with other
        type/flags), AccessRefused (403, ``amq.`` prefix), CommandInvalid (503, unknown type on
        RabbitMQ < 3.13; a connection error) — the channel is closed after a 4xx.
        """
        self._rpc(spec.Exchange.Declare(0, exchange, exchange_type, passive, durable,
                                        auto_delete, internal, False, arguments))

    def exchange_delete(self, exchange: str, if_unused: bool = False) -> None:
        """``exchange.delete``; PreconditionFailed (406) if ``if_unused`` and it has bindings.
        RabbitMQ returns delete-ok for a missing exchange."""
        self._rpc(spec.Exchange.Delete(0, exchange, if_unused, False))

    def exchange_bind(self, destination: str, source: str, routing_key: str = "",
                      arguments: dict | None = None) -> None:
        """Exchange-to-exchange binding (RabbitMQ extension); NotFound (404) if either is missing."""
        self._rpc(spec.Exchange.Bind(0, destination, source, routing_key, False, arguments))

    def exchange_unbind(self, destination: str, source: str, routing_key: str = "",
                        arguments: dict | None = None) -> None:
        """Remove an exchange-to-exchange binding."""
        self._rpc(spec.Exchange.Unbind(0, destination, source, routing_key, False, arguments))

    # ----------------------------------------------------------------- queues

    def queue_declare(self, queue: str = "", passive: bool = False, durable: bool = False,
                      exclusive: bool = False, auto_delete: bool = False,
                      arguments: dict | None = None) -> DeclareOk:
        """``queue.declare``; returns :class:`DeclareOk` (queue, message_count, consumer_count).

        ``queue=""`` lets the broker name it (``amq.gen-…``). ``passive`` only checks.
        Raises NotFound (404, passive and missing), PreconditionFailed (406, different
        arguments/flags), ResourceLocked (405, exclusive to another connection).
        """
        ok = self._rpc(spec.Queue.Declare(0, queue, passive, durable, exclusive, auto_delete,
                                          False, arguments))
        return DeclareOk(ok.queue, ok.message_count, ok.consumer_count)

    def queue_bind(self, queue: str, exchange: str, routing_key: str = "",
                   arguments: dict | None = None) -> None:
        """``queue.bind``; NotFound (404) if the queue or exchange is missing."""
        self._rpc(spec.Queue.Bind(0, queue, exchange, routing_key, False, arguments))

    def queue_unbind(self, queue: str, exchange: str, routing_key: str = "",
                     arguments: dict | None = None) -> None:
        """``queue.unbind``."""
        self._rpc(spec.Queue.Unbind(0, queue, exchange, routing_key, arguments))

    def queue_purge(self, queue: str) -> int:
        """Remove all ready messages; returns how many were purged (int)."""
        return self._rpc(spec.Queue.Purge(0, queue, False)).message_count

    def queue_delete(self, queue: str, if_unused: bool = False, if_empty: bool = False) -> int:
        """Delete a queue; returns the number of messages it held (int). PreconditionFailed
        (406) when ``if_unused``/``if_empty`` do not hold. RabbitMQ answers delete-ok (0) for
        a missing queue."""
        return self._rpc(spec.Queue.Delete(0, queue, if_unused, if_empty, False)).message_count

    # ----------------------------------------------------------------- basic: qos, consume

    def basic_qos(self, prefetch_count: int = 0, prefetch_size: int = 0, global_: bool = False) -> None:
        """Prefetch limit (messages; 0 = unlimited). RabbitMQ: ``global_=False`` applies to
        each new consumer on the channel, ``True`` to the whole channel; ``prefetch_size``
        other than 0 is not implemented by RabbitMQ."""
        self._rpc(_B.Qos(prefetch_size, prefetch_count, global_))

    def basic_consume(self, queue: str, no_ack: bool = False, exclusive: bool = False,
                      consumer_tag: str = "", arguments: dict | None = None,
                      callback: Callable[[Delivery], Any] | None = None,
                      no_wait: bool = False) -> str:
        """Start a consumer; returns its consumer tag (server-generated ``amq.ctag-…`` when
        ``consumer_tag`` is empty).

        Without ``callback`` deliveries are buffered in this channel: take them with
        :meth:`drain`. With ``callback(Delivery)`` it runs in the I/O thread: it may call
        ``basic_ack``/``nack``/``reject`` but no synchronous method (RuntimeError); exceptions
        are logged; it must be quick — while it runs nothing is read or heartbeat-answered,
        and a callback longer than two heartbeat intervals gets the connection closed by the
        broker.
        Raises NotFound (404) for a missing queue, ResourceLocked (405)/AccessRefused (403)
        for an exclusive conflict.

        ``no_wait``: send basic.consume with its no-wait bit (AMQP 0-9-1 §1.8.3.3) and return at
        once, without waiting for consume-ok; ``consumer_tag`` is then required (ValueError).
        Errors come later as the channel's close (raised by the next call on the channel).
        Useful when earlier consumers' deliveries would queue ahead of the consume-ok.
        """
        if no_wait:
            if not consumer_tag:
                raise ValueError("basic_consume(no_wait=True) needs a consumer_tag: the broker "
                                 "sends no consume-ok to tell a generated one")
            if self._error is not None:
                self._raise()
            if callback is not None:
                self._callbacks[consumer_tag] = callback
            self._conn.send_frames(encode_method(self.channel_number, _B.Consume(
                0, queue, consumer_tag, False, no_ack, exclusive, True, arguments)))
            return consumer_tag
        self._pending_callback = callback
        try:
            ok = self._rpc(_B.Consume(0, queue, consumer_tag, False, no_ack, exclusive, False,
                                      arguments))
        finally:
            self._pending_callback = None
        return ok.consumer_tag

    def basic_cancel(self, consumer_tag: str) -> None:
        """Cancel a consumer (``basic.cancel`` → ``cancel-ok``). Deliveries already buffered
        stay buffered; unacked ones still need an ack/nack."""
        self._rpc(_Cancel(consumer_tag, False))
        self._callbacks.pop(consumer_tag, None)

    def set_raw_deliveries(self, enabled: bool = True) -> None:
        """Raw mode: buffered deliveries of this channel's consumers come out of :meth:`drain`
        as :class:`~spark_amqp.protocol.raw_deliveries.RawDeliveries` runs (undecoded frames,
        consecutive delivery tags) wherever the received bytes hold complete, well-formed
        basic.deliver messages, and as :class:`Delivery` otherwise (a message split across
        reads, an unusual frame). For consumers that store and forward messages without
        looking at them; see ``spark_amqp.protocol.raw_deliveries``. Set it before
        ``basic_consume``; consumers with a callback still get decoded deliveries."""
        self._conn.set_raw_deliveries(self.channel_number, enabled)

    def drain(self, max_count: int | None = None, timeout: float = 0.0) -> list[Delivery]:
        """Take up to ``max_count`` buffered deliveries (all when None), oldest first (in raw
        mode an item may be a whole :class:`RawDeliveries` run, counted as one).

        When none are buffered, waits up to ``timeout`` seconds (float; ``None`` = forever)
        for the first one, then returns what is buffered at that moment. Returns ``[]`` on
        timeout, or early when the broker cancelled a consumer of this channel meanwhile
        (see :attr:`cancelled_consumers`). Raises the channel's error (typed broker error, ChannelClosed,
        ConnectionLost) once it is closed — buffered deliveries of a closed channel can no
        longer be acked, the broker redelivers them.
        """
        buf = self._buffer
        if not buf and (timeout is None or timeout > 0) and self._error is None:
            deadline = None if timeout is None else _monotonic() + timeout
            cancels = self._cancel_count
            with self._cond:
                self._waiting += 1
                try:
                    while not buf and self._error is None and self._cancel_count == cancels:
                        if deadline is None:
                            self._cond.wait()
                        else:
                            left = deadline - _monotonic()
                            if left <= 0 or (not self._cond.wait(left) and not buf):
                                break
                finally:
                    self._waiting -= 1
        if self._error is not None:
            self._raise()
        n = len(buf)
        if max_count is not None and max_count < n:
            n = max_count
        pop = buf.popleft
        out = [pop() for _ in range(n)]
        if out:
            self._bytes_out += sum(len(x.data) if x.__class__ is RawDeliveries else len(x.body)
                                   for x in out)
            if self._conn.read_limited:
                self._conn.resume_reading()
        return out

    def pending_count(self) -> int:
        """Deliveries buffered and not yet drained (int)."""
        return len(self._buffer)

    def basic_get(self, queue: str, no_ack: bool = False) -> Delivery | None:
        """``basic.get``: one message (a :class:`Delivery` with ``message_count``) or None when
        the queue is empty. NotFound (404) for a missing queue."""
        reply = self._rpc(_B.Get(0, queue, no_ack))
        return reply if isinstance(reply, Delivery) else None

    # ----------------------------------------------------------------- acks

    def basic_ack(self, delivery_tag: int = 0, multiple: bool = False) -> None:
        """Acknowledge ``delivery_tag`` (all up to and including it when ``multiple``; tag 0
        with ``multiple`` = everything unacked). Asynchronous: an unknown tag makes the broker
        close the channel with PreconditionFailed (406), raised by the next call on it."""
        if self._error is not None:
            self._raise()
        self._conn.send_frames(encode_method(self.channel_number, _Ack(delivery_tag, multiple)))

    def basic_nack(self, delivery_tag: int = 0, multiple: bool = False, requeue: bool = True) -> None:
        """Negative acknowledgement (RabbitMQ extension): requeue or drop/dead-letter."""
        if self._error is not None:
            self._raise()
        self._conn.send_frames(encode_method(self.channel_number, _Nack(delivery_tag, multiple, requeue)))

    def basic_reject(self, delivery_tag: int, requeue: bool = True) -> None:
        """Reject one delivery: requeue or drop/dead-letter (spec §basic.reject)."""
        if self._error is not None:
            self._raise()
        self._conn.send_frames(encode_method(self.channel_number, _B.Reject(delivery_tag, requeue)))

    def basic_recover(self, requeue: bool = True) -> None:
        """Redeliver all unacked messages of this channel (``basic.recover``; RabbitMQ only
        supports ``requeue=True``)."""
        self._rpc(_B.Recover(requeue))

    # ----------------------------------------------------------------- publishing

    def confirm_select(self) -> None:
        """Enable publisher confirms (RabbitMQ extension ``confirm.select``). From now on
        every publish gets a sequence number 1, 2, …; see :meth:`wait_for_confirms`.
        PreconditionFailed (406) on a transactional channel."""
        if not self._confirming:
            self._rpc(spec.Confirm.Select(False))
            self._confirming = True

    @property
    def next_publish_seq(self) -> int:
        """The sequence number the next publish in confirm mode will get (int)."""
        return self._confirms.next_seq

    @property
    def oldest_unconfirmed(self) -> int:
        """The lowest sequence number not yet acked/nacked (``next_publish_seq`` when none):
        every publish below it is settled."""
        with self._cond:
            return self._confirms.oldest

    def unconfirmed(self) -> set:
        """The sequence numbers sent in confirm mode and not yet acked/nacked (a set; after a
        lost connection: the publishes whose fate is unknown, to publish again)."""
        with self._cond:
            return self._confirms.unconfirmed()

    def keep_unconfirmed(self) -> None:
        """From now on keep every publish's message until the broker acks or nacks it, for
        :meth:`unconfirmed_messages` (a publisher that publishes them again on a new
        connection after losing this one: at-least-once). Call after :meth:`confirm_select`,
        before publishing; ``RuntimeError`` otherwise."""
        if not self._confirming:
            raise RuntimeError("keep_unconfirmed() needs confirm mode: call confirm_select() first")
        with self._cond:
            self._confirms.keep_messages()
        self._keeping = True

    def unconfirmed_messages(self) -> list[tuple]:
        """With :meth:`keep_unconfirmed`: the messages sent in confirm mode and not yet acked
        or nacked, in publish order, each as a ``publish_batch`` item ``(body, exchange,
        routing_key, properties, mandatory)`` (a new list; ``[]`` when not keeping). After a
        lost connection: the publishes whose fate is unknown, to publish again."""
        with self._cond:
            return self._confirms.unconfirmed_messages()

    @property
    def in_flight(self) -> int:
        """Publishes sent in confirm mode and not yet acked/nacked (int)."""
        return self._confirms.in_flight

    def _wait_window(self, need: int) -> None:
        """Block while publishing ``need`` more would exceed ``max_in_flight``."""
        limit = self.max_in_flight
        if limit is None or not self._confirming:
            return
        need = min(need, limit)
        with self._cond:
            self._wait_in_flight_at_most(limit - need, self.window_timeout)
        if self._error is not None:
            self._raise()

    def _wait_in_flight_at_most(self, limit: int, timeout: float | None) -> None:
        """Wait until at most ``limit`` publishes are unconfirmed or the channel has an error;
        raises ConfirmTimeout after ``timeout`` seconds. The caller holds ``_cond``."""
        deadline = None if timeout is None else _monotonic() + timeout
        confirms = self._confirms
        self._waiting += 1
        try:
            while self._error is None and confirms.in_flight > limit:
                if deadline is None:
                    self._cond.wait()
                    continue
                left = deadline - _monotonic()
                if left <= 0:
                    raise ConfirmTimeout(confirms.in_flight, timeout)  # type: ignore[arg-type]
                self._cond.wait(left)
        finally:
            self._waiting -= 1

    def basic_publish(self, body: bytes, exchange: str = "", routing_key: str = "",
                      properties: BasicProperties | None = None, mandatory: bool = False) -> int | None:
        """Publish one message (``basic.publish`` + header + body frames in one write).

        Returns the publish sequence number in confirm mode, else None. In confirm mode blocks
        while :attr:`in_flight` >= :attr:`max_in_flight`. ``mandatory``: an unroutable message
        comes back as a :class:`ReturnedMessage` (312 NO_ROUTE). Bodies larger than
        frame_max - 8 are split into several body frames. Errors (missing exchange: NotFound
        404, closing the channel) arrive asynchronously and are raised by the next call.
        """
        if self._error is not None:
            self._raise()
        if isinstance(body, str):
            raise TypeError("basic_publish body must be bytes, not str: encode it first "
                            "(e.g. body.encode('utf-8'))")
        data = self._encode(body, exchange, routing_key, properties, mandatory)
        if self._confirming:
            if self.max_in_flight is not None:
                self._wait_window(1)
            if self._keeping:
                seq = self._confirms.add(1, ((body, exchange, routing_key, properties, mandatory),))
            else:
                seq = self._confirms.add(1)
            self._conn.send_frames(data)
            return seq
        self._conn.send_frames(data)
        return None

    def publish_batch(self, messages: Iterable[tuple], exchange: str = "",
                      routing_key: str = "") -> list[int] | None:
        """Publish many messages with one ``sendall`` per window: each item is
        ``(body, exchange, routing_key, properties, mandatory)``; trailing items may be
        omitted (``(body,)`` uses the ``exchange``/``routing_key`` arguments, no properties,
        not mandatory).

        Returns the list of sequence numbers in confirm mode (else None). With
        ``max_in_flight`` set, the batch is written in chunks that fit the window.
        """
        if self._error is not None:
            self._raise()
        encode = self._encode
        confirming = self._confirming
        limit = self.max_in_flight if confirming else None
        # with a window, write half-window chunks so one is in flight while the next is encoded
        chunk = max(1, limit // 2) if limit else 1 << 62
        seqs: list[int] | None = [] if confirming else None
        kept: list[tuple] | None = [] if confirming and self._keeping else None
        parts: list[bytes] = []
        size = 0
        for item in messages:
            n = len(item)
            ex = item[1] if n > 1 and item[1] is not None else exchange
            rk = item[2] if n > 2 and item[2] is not None else routing_key
            props = item[3] if n > 3 else None
            mandatory = item[4] if n > 4 else False
            data = encode(item[0], ex, rk, props, mandatory)
            parts.append(data)
            if kept is not None:
                kept.append((item[0], ex, rk, props, mandatory))
            size += len(data)
            if size >= 4 << 20 or len(parts) >= chunk:
                self._flush_batch(parts, seqs, kept)
                parts = []
                kept = None if kept is None else []
                size = 0
        if parts:
            self._flush_batch(parts, seqs, kept)
        return seqs

    def _flush_batch(self, parts: list[bytes], seqs: list[int] | None,
                     kept: list[tuple] | None = None) -> None:
        if seqs is not None:
            if self.max_in_flight is not None:
                self._wait_window(len(parts))
            first = self._confirms.add(len(parts), kept)
            seqs.extend(range(first, first + len(parts)))
        self._conn.send_frames(b"".join(parts))

    def wait_for_confirms(self, timeout: float | None = None) -> ConfirmResult:
        """Wait until every publish so far is acked or nacked by the broker.

        Returns a :class:`ConfirmResult` (acked count, nacked sequence numbers, returned
        messages) covering everything settled since the previous call, and resets it.
        Raises PublishNacked (carrying that result) if any publish was nacked,
        ConfirmTimeout after ``timeout`` seconds, the channel's error (e.g. NotFound 404 for a
        publish to a missing exchange) if the broker closed the channel, ConnectionLost.
        Calling it without ``confirm_select`` returns an empty result.
        """
        with self._cond:
            self._wait_in_flight_at_most(0, timeout)
            if self._error is not None:
                self._raise()
            acked, nacked = self._confirms.take()
            result = ConfirmResult(acked, nacked, self._returned)
            self._returned = []
        if result.nacked:
            raise PublishNacked(result)
        return result

    def take_returned(self) -> list[ReturnedMessage]:
        """Returned messages collected so far (and not yet reported by
        :meth:`wait_for_confirms`), oldest first; clears them. Outside confirm mode and
        without :attr:`on_return` at most :data:`MAX_KEPT_RETURNS` are kept."""
        with self._cond:
            out, self._returned = self._returned, []
        return out

    # ----------------------------------------------------------------- tx

    def tx_select(self) -> None:
        """Make the channel transactional (``tx.select``); publishes and acks take effect at
        :meth:`tx_commit`. PreconditionFailed (406) on a confirm-mode channel."""
        self._rpc(spec.Tx.Select())

    def tx_commit(self) -> None:
        """Commit the current transaction (``tx.commit``); PreconditionFailed (406) when the
        channel is not transactional."""
        self._rpc(spec.Tx.Commit())

    def tx_rollback(self) -> None:
        """Discard the current transaction's publishes and acks (``tx.rollback``)."""
        self._rpc(spec.Tx.Rollback())

    def flow(self, active: bool) -> bool:
        """Ask the broker to pause/resume deliveries (``channel.flow``). RabbitMQ answers
        ``active=False`` with 540 NOT_IMPLEMENTED (a connection error)."""
        return self._rpc(_Flow(active)).active
