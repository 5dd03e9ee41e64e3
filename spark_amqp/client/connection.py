"""The blocking AMQP 0-9-1 client connection: socket, I/O thread, heartbeats, back-pressure.

The negotiation is :func:`.handshake.negotiate` (run in the connecting thread). Then one
background I/O thread per connection moves bytes: it reads the socket (64 KiB per ``recv``),
feeds the sans-IO state machine (:class:`~spark_amqp.protocol.connection.AMQPConnection`) and
dispatches every event to its channel: synchronous replies wake the caller waiting on that
channel, deliveries are appended to the channel's buffer (or given to a consumer callback),
publisher confirms and returns update the channel's confirm state. Its policies are separate
methods: heartbeats (:meth:`Connection._heartbeat_tick`, timed by the state machine's
heartbeat deadline) and the read limit (:meth:`Connection.set_read_limit`). Callers' threads
write frames themselves under one write lock (``sendall``), so publishing never hands off to
another thread.

Protocol sources: AMQP 0-9-1 spec §2.2.4 (connection negotiation), §4.2.7 (heartbeats),
§4.2.3 (frames); RabbitMQ docs "Connections" / "Detecting Dead TCP Connections with
Heartbeats" (negotiation and 2-missed-heartbeat rule), "Authentication Failure Notifications"
(``authentication_failure_close`` capability), "Connection Blocked Notifications".
"""

from __future__ import annotations

import dataclasses
import logging
import random
import ssl
import threading
import time
from typing import Any, Callable

from ..protocol import ContentMessage, MethodFrame, spec
from ..protocol.connection import AMQPConnection, Role, close_method_for, error_from_close
from ..protocol.errors import AMQPError, error_for_code
from ..protocol.raw_deliveries import RawDeliveries
from .channel import Channel
from .errors import (ConnectionClosed, ConnectionLost, ProtocolMismatch, close_text,
                     connection_level, copy_error)
from .failover import Backoff, BrokerUnreachable, Failure, FailoverWindow, classify
from .handshake import CLIENT_CAPABILITIES, negotiate
from .transport import TCPTransport, TLSTransport, Transport, open_socket
from .uri import ConnectionParameters, format_address, parse_uri

__all__ = ["Connection", "connect", "AllAddressesFailed", "CLIENT_CAPABILITIES"]

log = logging.getLogger("spark_amqp.client")

_monotonic = time.monotonic
#: seconds between rounds over the addresses (``failover_timeout`` > 0), doubling ...
FIRST_FAILOVER_BACKOFF = 0.5
#: ... up to this (the failure model's table: docs/architecture.md)
MAX_FAILOVER_BACKOFF = 5.0
_Close = spec.Connection.Close
_CloseOk = spec.Connection.CloseOk
_Blocked = spec.Connection.Blocked
_Unblocked = spec.Connection.Unblocked


def connect(uri: str | None = None, **overrides: Any) -> "Connection":
    """Open a connection from an AMQP URI (see :mod:`spark_amqp.client.uri`).

    ``overrides`` are :class:`ConnectionParameters` attributes that win over the URI, e.g.
    ``connect(url, heartbeat=5, connection_timeout=3.0)`` (seconds here; milliseconds in the
    URI). Returns an open :class:`Connection`; use it as a context manager to close it.

    Several addresses (``amqp://u:p@h1,h2:5673/%2F``, or the ``addresses=`` keyword): they are
    tried in a new random order per call (``shuffle_addresses=False``: in the order given), one
    after the other, and the first that completes the handshake is used (its ``host``/``port``
    are in ``conn.params``). A refused or timed-out connect, a lost socket or a
    ``connection.close`` other than a refused login moves on to the next address; a refused
    login (403 ACCESS_REFUSED) or vhost (530 NOT_ALLOWED) is raised at once (users and vhosts
    are cluster-wide, RabbitMQ docs "Clustering"). With ``failover_timeout`` > 0 seconds, rounds
    over all the addresses go on with back-off (0.5 s, doubling up to 5 s) until that much time
    has passed since the first attempt. This follows the RabbitMQ Java client's
    ``ConnectionFactory.newConnection(List<Address>)`` (shuffled addresses, first that works)
    and its automatic recovery's ``networkRecoveryInterval``.

    >>> with connect("amqp://guest:guest@127.0.0.1:5672/%2F") as conn:     # doctest: +SKIP
    ...     ch = conn.channel()
    ...     ch.queue_declare("q")
    ...     ch.confirm_select()
    ...     ch.basic_publish(b"hello", routing_key="q")
    ...     ch.wait_for_confirms()
    ...     ch.basic_qos(1000)
    ...     ch.basic_consume("q")
    ...     for d in ch.drain(timeout=1.0):
    ...         ch.basic_ack(d.delivery_tag)

    Raises:
        ValueError: a malformed URI or parameter (naming the bad address entry).
        AllAddressesFailed: (a ``ConnectionLost``) several addresses, or ``failover_timeout``
            > 0, and no address could be connected: the message lists every address with its
            last error; ``errors`` maps ``"host:port"`` to that exception.
        ConnectionLost: one address, no ``failover_timeout``: TCP connect/TLS/handshake
            failure or timeout (an ``OSError``); the error of that address, unchanged.
        ssl.SSLError: certificate verification failed (amqps).
        AccessRefused: wrong user name or password (403), or EXTERNAL refused; also when
            the broker closes the socket during authentication without connection.close
            (a probable bad login on brokers lacking ``authentication_failure_close``, but
            possibly a network/broker failure: the message says so).
        NotAllowed: the user may not access the vhost (530), or another connection.close
            from the broker during the handshake (typed by its reply code).
    """
    params = uri if isinstance(uri, ConnectionParameters) else parse_uri(uri)
    if overrides:
        params = params.replace(**overrides)
    addresses = params.address_list()
    if len(addresses) == 1 and not params.failover_timeout:
        host, port = addresses[0]
        if (host, port) != (params.host, params.port):
            params = dataclasses.replace(params, host=host, port=port)
        return Connection(params)
    window = FailoverWindow(float(params.failover_timeout), _monotonic)
    backoff = Backoff(FIRST_FAILOVER_BACKOFF, MAX_FAILOVER_BACKOFF, _monotonic)
    window.failed()  # the window runs from the first attempt
    errors: dict[str, BaseException] = {}
    while True:
        order = list(addresses)
        if params.shuffle_addresses:
            random.shuffle(order)
        for host, port in order:
            try:
                return Connection(dataclasses.replace(params, host=host, port=port))
            except Exception as exc:
                if classify(exc) is Failure.REFUSED:
                    raise  # the same on every node: trying the others only delays the answer
                errors[format_address(host, port)] = exc
                log.warning("cannot connect to %s (%s); trying the next address",
                            format_address(host, port), exc)
        if window.expired():
            raise AllAddressesFailed(params, errors)
        time.sleep(min(backoff.failed(), window.left()))


class AllAddressesFailed(BrokerUnreachable):
    """No broker address could be connected (:func:`connect` with several addresses or a
    ``failover_timeout``): the client's :class:`.failover.BrokerUnreachable`.

    Attributes:
        errors: ``{"host:port": exception}``, the last error of every address tried.
    """

    def __init__(self, params: ConnectionParameters | str, errors: dict | None = None):
        if isinstance(params, str):  # a copy (copy_error) or an unpickled one: the text
            super().__init__(params, errors)
            return
        errors = dict(errors or {})
        lines = "; ".join(f"{a}: {e}" for a, e in errors.items())
        within = (f" within failover_timeout {params.failover_timeout:g} s"
                  if params.failover_timeout else " (one round; failover_timeout 0)")
        super().__init__(
            f"could not connect to any of the {len(errors)} broker address(es) of "
            f"{params.redacted_uri(all_addresses=True)}{within}: {lines}. Check that the "
            "nodes run and the addresses are right", errors)


class Connection:
    """An open AMQP connection (create with :func:`connect`).

    Attributes (after the handshake):
        params: the :class:`ConnectionParameters` used.
        server_properties: dict from ``connection.start`` (product, version, capabilities).
        frame_max, channel_max, heartbeat: negotiated values (bytes, count, seconds; 0 = off).
        blocked: ``True`` while RabbitMQ has blocked publishing (``connection.blocked``,
            e.g. a memory or disk alarm); ``blocked_reason`` gives its text.
        on_blocked: optional ``callable(reason: str)``; on_unblocked: ``callable()``; both run
            in the I/O thread and must not call synchronous methods.

    Thread safety: methods may be called from any thread; each channel should be used by one
    thread at a time (AMQP channels are sequential), but its deliveries may be acked from the
    thread that drained them while another channel publishes.
    """

    def __init__(self, params: ConnectionParameters):
        self.params = params
        self.server_properties: dict = {}
        self.frame_max = params.frame_max
        self.channel_max = params.channel_max
        self.heartbeat = 0
        self.blocked = False
        self.blocked_reason = ""
        self.on_blocked: Callable[[str], Any] | None = None
        self.on_unblocked: Callable[[], Any] | None = None
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()  # channel table, close state
        self._channels: dict[int, Channel] = {}
        self._error: BaseException | None = None  # why the connection is closed
        self._closing = False
        self._close_ok = threading.Event()  # set by close-ok, or when the I/O thread ends
        self._close_done = threading.Event()  # the first close() has finished
        self._bytes_in = 0  # bytes read from the broker (close() watches it for progress)
        self._io_thread: threading.Thread | None = None
        self._io_ident: int | None = None
        self._last_send = _monotonic()
        self._transport: Transport | None = None
        # the sans-IO state machine: negotiation, frame legality, decoding. Guarded by
        # _sm_lock; lock order is _write_lock -> _sm_lock (the I/O thread takes only _sm_lock
        # around receive_data). Hot-path frames (publish, ack) bypass it: they change no state.
        self._sm = AMQPConnection(Role.CLIENT, max_body_size=params.max_body_size)
        self._sm_lock = threading.Lock()
        self._wake: list[Channel] = []
        # back-pressure (set_read_limit): stop reading the socket while too many delivery bytes
        # are held; _rpc_waiting > 0 (a caller waits for a synchronous reply) always reads
        self._read_limit: int | None = None
        self._read_extra: Callable[[], int] | None = None
        self._read_wake = threading.Event()
        self._rpc_waiting = 0
        #: True while the I/O thread has stopped reading (see :meth:`set_read_limit`)
        self.read_paused = False
        #: how many times reading was paused (statistics)
        self.read_pauses = 0
        self._open()

    # ------------------------------------------------------------------ handshake

    def _open(self) -> None:
        p = self.params
        timeout = p.connection_timeout
        where = p.redacted_uri()
        try:
            sock = open_socket(p.host, p.port, timeout)
        except OSError as exc:
            raise ConnectionLost(f"cannot connect to {where}: {exc}; check that the broker runs "
                                 "and the host/port are right") from exc
        try:
            if p.tls:
                tr = TLSTransport(sock, p.make_ssl_context(), p.sni_hostname, self._write_lock)
                tr.handshake()
            else:
                tr = TCPTransport(sock)
            self._transport = tr
            self._handshake(where)
        except BaseException as exc:
            sock.close()
            if isinstance(exc, (AMQPError, ConnectionLost, ProtocolMismatch, ssl.SSLError)):
                raise
            if isinstance(exc, TimeoutError):
                raise ConnectionLost(f"handshake with {where} timed out after {timeout} s "
                                     "(connection_timeout)") from exc
            if isinstance(exc, OSError):
                raise ConnectionLost(f"connection to {where} failed during the handshake: {exc}") from exc
            raise
        tr.set_timeout(None)
        self._io_thread = threading.Thread(target=self._io_loop, daemon=True,
                                           name=f"spark-amqp-io {p.host}:{p.port}")
        self._io_thread.start()

    def _handshake(self, where: str) -> None:
        """Connection negotiation (:func:`.handshake.negotiate`, spec §2.2.4) in the
        connecting thread, before the I/O thread starts; keeps the negotiated values."""
        n = negotiate(self._transport, self._sm, self.params, where,  # type: ignore[arg-type]
                      self._send_raw)
        self.server_properties = n.server_properties
        self.channel_max = n.channel_max
        self.frame_max = n.frame_max
        self.heartbeat = n.heartbeat
        if n.events:  # frames pipelined after open-ok (none expected)
            self._dispatch(n.events)

    def _send_raw(self, data: bytes) -> None:
        with self._write_lock:
            self._transport.send(data)  # type: ignore[union-attr]
            self._last_send = _monotonic()

    # ------------------------------------------------------------------ writing

    def _send_method(self, channel: int, method, handshake: bool = False,
                     lock_timeout: float = -1) -> None:
        """Validate ``method`` with the state machine and write it (state-changing and
        synchronous methods). Raises the connection's error, or the state machine's typed
        error (e.g. CommandInvalid 503) when this side may not send it now; ``TimeoutError``
        when the write lock is not free within ``lock_timeout`` seconds (-1: wait)."""
        if self._error is not None and not handshake:
            self._raise_error()
        refused: AMQPError | None = None
        if not self._write_lock.acquire(timeout=lock_timeout):
            raise TimeoutError(f"another thread has been writing for {lock_timeout} s "
                               "(the broker may be blocking publishers)")
        try:
            with self._sm_lock:
                try:
                    data = self._sm.send_method(channel, method)
                except AMQPError as exc:
                    refused = exc
            if refused is None:
                try:
                    self._transport.send(data)  # type: ignore[union-attr]
                except OSError as exc:
                    if handshake:
                        raise
                    self._lost(ConnectionLost(f"writing to {self.params.redacted_uri()} failed: {exc}"))
                    self._raise_error()
                self._last_send = _monotonic()
                return
        finally:
            self._write_lock.release()
        # the state machine refused: the broker's connection.close may have been received
        # but not yet dispatched; prefer its error when it comes (outside the write lock: the
        # I/O thread needs it to answer close-ok)
        if not handshake and not self._sm.is_open:
            self._close_ok.wait(2.0)
            if self._error is not None:
                self._raise_error()
        raise refused

    def _send(self, data) -> None:
        """Write bytes (whole frames) under the write lock; raises the connection's error."""
        if self._error is not None:
            self._raise_error()
        with self._write_lock:
            try:
                self._transport.send(data)  # type: ignore[union-attr]
            except OSError as exc:
                self._lost(ConnectionLost(f"writing to {self.params.redacted_uri()} failed: {exc}"))
                self._raise_error()
            self._last_send = _monotonic()

    def _raise_error(self):
        err = self._error
        raise copy_error(err) from err  # type: ignore[arg-type]

    # ------------------------------------------------------------------ I/O thread

    def _io_loop(self) -> None:
        """The I/O thread: :meth:`_read_loop` until the connection ends; what ended it becomes
        the connection's error (a protocol violation by the broker is reported to it first)."""
        self._io_ident = threading.get_ident()
        try:
            self._read_loop()
        except AMQPError as exc:
            # a protocol violation by the server (decoder) or a broker-side connection.close
            # (all state-machine/decoder errors are connection-level): report it to the broker
            # with connection.close (spec §4.2.6 / §2.3.6), do not wait for close-ok
            if not self._closing and self._error is None:
                before = getattr(exc, "events", None)  # events decoded before the violation
                if before:
                    self._dispatch(before)
                try:
                    self._send_method(0, close_method_for(exc, connection=True))
                except (OSError, AMQPError):
                    pass
                cause = exc
                exc = connection_level(error_for_code(
                    exc.reply_code, "this client detected a protocol violation by the broker and "
                    f"closed the connection: {exc.reply_text}", exc.class_id, exc.method_id))
                exc.__cause__ = cause  # callers may look for e.g. BodyTooLarge
            self._lost(exc)
        except OSError as exc:
            if self._closing and self._close_ok.is_set():
                return
            if not isinstance(exc, ConnectionLost):
                exc = ConnectionLost(f"reading from {self.params.redacted_uri()} failed: {exc}")
            self._lost(exc)
        except BaseException as exc:  # pragma: no cover - a bug: do not hang callers
            log.exception("spark-amqp I/O thread crashed")
            self._lost(ConnectionLost(f"I/O thread crashed: {exc!r}"))
        finally:
            self._close_ok.set()

    def _read_loop(self) -> None:
        """Move bytes: wait for input (no longer than the heartbeat timer allows), read it,
        decode it through the state machine, dispatch the events; stop reading while over the
        read limit. Returns when the connection is finished (close-ok, the broker's
        connection.close, EOF while closing); raises ConnectionLost (EOF, dead peer),
        OSError or the state machine's AMQPError otherwise."""
        tr = self._transport
        assert tr is not None
        recv = tr.recv
        wait = tr.wait_readable
        receive = self._sm.receive_data
        sm_lock = self._sm_lock
        dispatch = self._dispatch
        hb = self.heartbeat
        tick_at = 0.0  # the state machine's heartbeat deadline as of the last tick
        while True:
            if hb:
                # deadlines only move later (every read or write pushes them), so until the
                # one of the last tick nothing is due: no tick per read
                now = _monotonic()
                if now >= tick_at:
                    left = self._heartbeat_tick()
                    tick_at = now + (0.05 if left is None else left)
                if not wait(max(tick_at - now, 0.0)):
                    # declared dead only after a wait that found nothing to read, so a slow
                    # consumer callback (run in this thread) cannot cause a false alarm
                    self._check_peer_alive()
                    continue
            if self._read_limit is not None and self._over_read_limit():
                self._pause_reading()
                continue
            data = recv()
            if not data:
                if not tr.eof:
                    continue  # TLS: a partial record, nothing to decode yet
                if self._closing:
                    return
                raise ConnectionLost(f"{self.params.redacted_uri()} closed the TCP connection "
                                     "without connection.close")
            self._bytes_in += len(data)
            now = _monotonic()
            with sm_lock:
                events = receive(data, now)
            if events and dispatch(events):
                return  # connection.close-ok / close handled

    # ------------------------------------------------------------------ heartbeats

    def _heartbeat_tick(self) -> float | None:
        """I/O thread, heartbeats negotiated (AMQP 0-9-1 §4.2.7): tell the state machine when
        this side last wrote (callers' threads write publishes and acks without it, noting
        only ``_last_send``), write a heartbeat frame when its
        :meth:`~spark_amqp.protocol.connection.AMQPConnection.heartbeat_action` asks for one
        (nothing sent for half the interval), and return how long to wait before the next
        tick: its :meth:`~spark_amqp.protocol.connection.AMQPConnection.heartbeat_deadline`
        (seconds); 0.05 when a heartbeat was due but another thread holds the write lock (it
        is writing anyway, and may be stuck while RabbitMQ blocks publishers: keep reading);
        ``None`` when writing the heartbeat failed (the read side reports the broken socket).
        """
        sm = self._sm
        # a float store without _sm_lock: racing a send_method it can only make the next
        # heartbeat early, never late (_last_send is written after every write)
        sm.note_sent(self._last_send)
        now = _monotonic()
        if sm.heartbeat_action(now) == "send":
            wlock = self._write_lock
            if not wlock.acquire(False):
                return 0.05
            try:
                self._transport.send(sm.send_heartbeat(now))  # type: ignore[union-attr]
                self._last_send = now
            except OSError:
                return None
            finally:
                wlock.release()
        left = sm.heartbeat_deadline(now)
        return self.heartbeat / 2.0 if left is None else left  # None: closed meanwhile

    def _check_peer_alive(self) -> None:
        """I/O thread, after a wait that found nothing to read: raise ConnectionLost when the
        state machine counts the broker dead (nothing received for two heartbeat intervals;
        RabbitMQ docs "Detecting Dead TCP Connections with Heartbeats")."""
        sm = self._sm
        now = _monotonic()
        if sm.heartbeat_action(now) == "dead":
            silent = now - sm.last_received
            raise ConnectionLost(
                f"no data from {self.params.redacted_uri()} for {silent:.1f} s "
                f"(heartbeat {self.heartbeat} s, 2 intervals missed): the broker or the "
                "network is dead")

    # ------------------------------------------------------------------ back-pressure

    def set_read_limit(self, max_bytes: int | None,
                       extra: Callable[[], int] | None = None) -> None:
        """Bound the delivery bytes held in memory by not reading the socket (TCP
        back-pressure: the broker's writes then block; RabbitMQ has no byte-based prefetch,
        docs/consumer-prefetch.md).

        The I/O thread stops reading before its next ``recv`` while the bytes of deliveries
        buffered in this connection's channels and not yet drained (raw runs: their frames;
        decoded deliveries: their bodies) plus ``extra()`` (bytes the application still holds,
        e.g. drained but not yet processed; called from the I/O thread, must be cheap and not
        block) reach ``max_bytes`` (int > 0; ``None`` removes the limit). It reads again as
        soon as the sum is below the limit; it looks again when :meth:`resume_reading` is
        called and at least every 0.5 s. While paused it keeps sending heartbeats (AMQP 0-9-1
        §4.2.7) and does not count the pause as silence of the broker. Reading never pauses
        while a caller waits for the reply of a synchronous method (the reply may be behind
        the deliveries), nor while the connection is closing. Only complete messages count:
        a message larger than ``max_bytes`` is still received whole.

        Raises ``ValueError`` for ``max_bytes`` <= 0.
        """
        if max_bytes is not None and max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0 or None, got {max_bytes!r}")
        self._read_extra = extra
        self._read_limit = max_bytes
        self._read_wake.set()

    def resume_reading(self) -> None:
        """Tell the I/O thread to look at the read limit again now (call after freeing bytes
        counted by ``extra``). Cheap; any thread."""
        self._read_wake.set()

    def buffered_bytes(self) -> int:
        """Bytes of deliveries buffered in the channels and not yet drained (see
        :meth:`set_read_limit`)."""
        return sum(ch._bytes_in - ch._bytes_out for ch in list(self._channels.values()))

    def _over_read_limit(self) -> bool:
        limit = self._read_limit
        if limit is None or self._rpc_waiting or self._closing or self._error is not None:
            return False
        held = self.buffered_bytes()
        if held < limit and self._read_extra is not None:
            try:
                held += int(self._read_extra())
            except Exception:  # noqa: BLE001 - a broken callback must not stop the reader
                log.exception("read-limit callback raised; reading on")
                return False
        return held >= limit

    def _pause_reading(self) -> None:
        """I/O thread: wait (sending heartbeats) until under the read limit again. The
        broker's input that waits in the socket meanwhile is not its silence: the state
        machine counts it as heard from until reading resumes."""
        self.read_paused = True
        self.read_pauses += 1
        wake = self._read_wake
        sm = self._sm
        try:
            while True:
                wake.clear()
                if not self._over_read_limit():
                    return
                wait = 0.5
                if self.heartbeat:
                    sm.note_received(_monotonic())
                    left = self._heartbeat_tick()
                    if left is None:
                        return  # writing failed: reported by the read side
                    wait = min(wait, left)
                wake.wait(wait)
        finally:
            self.read_paused = False
            sm.note_received(_monotonic())  # bytes waiting in the socket are not silence

    def _dispatch(self, events: list) -> bool:
        """Route decoded events; returns True when the connection is finished."""
        channels = self._channels
        for ev in events:
            t = type(ev)
            if t is ContentMessage:
                ch = channels.get(ev.channel)
                if ch is not None:
                    ch._on_content(ev)
            elif t is RawDeliveries:
                ch = channels.get(ev.channel)
                if ch is not None:
                    ch._on_raw(ev)
            elif t is MethodFrame:
                n = ev.channel
                if n:
                    ch = channels.get(n)
                    if ch is not None:
                        ch._on_method(ev.method)
                    else:
                        log.debug("dropping %r for unknown channel %d", ev.method, n)
                elif self._on_connection_method(ev.method):
                    return True
            # Heartbeat: nothing to do, any bytes reset the dead-peer timer
        if self._wake:
            wake, self._wake = self._wake, []
            for ch in wake:
                ch._notify()
        return False

    def _on_connection_method(self, m) -> bool:
        t = type(m)
        if t is _Close:
            try:
                self._send_method(0, _CloseOk())
            except (OSError, AMQPError, ConnectionClosed):
                pass  # ConnectionClosed: close() already gave up and is draining the socket
            err = error_from_close(m)
            err.reply_text = close_text(m, self.params.redacted_uri())
            self._lost(err)
            return True
        if t is _CloseOk:
            self._close_ok.set()
            return True
        if t is _Blocked:
            self.blocked = True
            self.blocked_reason = m.reason
            cb = self.on_blocked
            if cb is not None:
                _safe_call(cb, m.reason)
            return False
        if t is _Unblocked:
            self.blocked = False
            self.blocked_reason = ""
            cb = self.on_unblocked
            if cb is not None:
                _safe_call(cb)
            return False
        if t is spec.Connection.UpdateSecretOk:
            return False
        log.warning("ignoring unexpected %s on channel 0", m.NAME)
        return False

    def _lost(self, err: BaseException, shutdown: bool = True) -> None:
        """Mark the connection dead with ``err``, wake every waiter and, when this call is the
        first to end the connection and ``shutdown`` is true, shut the socket down (SHUT_RDWR:
        the reader sees EOF). Later calls leave the socket alone: close() tears it down itself
        without provoking an RST (see :meth:`close`)."""
        with self._lock:
            first = self._error is None
            if first:
                self._error = err
            channels = list(self._channels.values())
            self._channels.clear()
        self._read_wake.set()
        tr = self._transport
        if tr is not None and first and shutdown:
            tr.shutdown()
        for ch in channels:
            ch._on_connection_closed(self._error)
        self._close_ok.set()

    # ------------------------------------------------------------------ channels

    def _set_raw_deliveries(self, channel_number: int, enabled: bool) -> None:
        """Mark a channel's basic.deliver messages to come out as raw runs (or not)."""
        with self._sm_lock:
            raw = self._sm.decoder.raw_channels
            if enabled:
                raw.add(channel_number)
            else:
                raw.discard(channel_number)

    def channel(self, channel_number: int | None = None) -> Channel:
        """Open a new channel (``channel.open``) and return it.

        ``channel_number``: a specific free number (1..channel_max), else the lowest free one
        (numbers of channels still waiting for their ``close-ok`` are skipped).
        Raises ``ValueError`` when no number is free or the requested one is taken/out of
        range, the broker's typed error when it refuses (e.g. NotAllowed 530 above its
        channel_max), ConnectionLost / ConnectionClosed / the broker's connection error when
        the connection is closed.
        """
        if self._error is not None:
            self._raise_error()
        with self._lock:
            sm = self._sm
            if channel_number is None:
                # skip numbers still closing in the state machine (close-ok not yet received)
                channel_number = 1
                while channel_number in self._channels or sm.channel_info(channel_number) is not None:
                    channel_number += 1
                if channel_number > self.channel_max:
                    raise ValueError(f"all {self.channel_max} channels (channel_max) are open; "
                                     "close some or reuse them")
            elif (channel_number in self._channels or sm.channel_info(channel_number) is not None
                  or not (0 < channel_number <= self.channel_max)):
                raise ValueError(f"channel number {channel_number} is in use or outside "
                                 f"1..{self.channel_max}")
            ch = Channel(self, channel_number)
            self._channels[channel_number] = ch
        try:
            ch._open()
        except BaseException:
            with self._lock:
                if self._channels.get(channel_number) is ch:
                    del self._channels[channel_number]
            raise
        return ch

    def _forget_channel(self, ch: Channel) -> None:
        with self._lock:
            if self._channels.get(ch.channel_number) is ch:
                del self._channels[ch.channel_number]

    # ------------------------------------------------------------------ closing

    @property
    def is_open(self) -> bool:
        """True until the connection is closed (by either side) or lost."""
        return self._error is None

    @property
    def error(self) -> BaseException | None:
        """Why the connection is closed (typed AMQPError, ConnectionLost, ConnectionClosed)."""
        return self._error

    def abort(self, reason: str) -> None:
        """End the connection at once, without the close handshake: the socket is shut down
        (a writer blocked in ``sendall`` and the reader wake up) and every waiting or later
        call raises :class:`ConnectionLost` with ``reason``. For watchdogs that give up on a
        broker, e.g. one that keeps publishers blocked (``connection.blocked``); bytes not yet
        read by the broker are lost, so only use it when unconfirmed publishes will be retried.
        Call :meth:`close` afterwards to release the socket. Safe from any thread, including
        the I/O thread (on_blocked callbacks); a no-op on a connection already ended."""
        self._lost(ConnectionLost(reason))

    def set_max_body_size(self, max_body_size: int) -> None:
        """Accept message bodies up to ``max_body_size`` bytes from now on (a larger one ends
        the connection with ``BodyTooLarge``); e.g. the broker's limit from
        :func:`spark_amqp.client.broker_limits.max_message_size` of ``server_properties``."""
        if not int(max_body_size) > 0:
            raise ValueError(f"max_body_size must be > 0 bytes, got {max_body_size}")
        self._sm.set_max_body_size(int(max_body_size))

    def close(self, reply_code: int = 200, reply_text: str = "Normal shutdown",
              timeout: float = 5.0, max_wait: float | None = 300.0) -> None:
        """Close cleanly: send ``connection.close``, wait for ``close-ok`` while the broker is
        evidently alive, then release the socket without provoking an RST. Idempotent; never
        raises for a connection that is already closed or lost (a concurrent second call waits
        for the first one). Unacked deliveries are requeued by the broker (spec §basic.ack).

        AMQP 0-9-1 §2.2.4 / §4.2.2 (connection.close / close-ok): the broker answers close-ok
        only after it has handled every frame sent before connection.close, and RabbitMQ may
        need far longer than a few seconds to work through a backlog of publishes still in the
        socket buffers. Giving up early and closing a socket with unread input makes the kernel
        send an RST, and RabbitMQ then drops every byte it had not read yet (publishes sent
        without confirms are lost). So:

        * ``timeout`` (seconds) is the *no-progress* timeout: the wait ends when, for
          ``timeout`` s, nothing arrived from the broker and (Linux, ``SIOCOUTQ``) the broker
          took none of the bytes still queued in this side's send buffer. With heartbeats
          negotiated, the silence allowed is ``max(timeout, heartbeat)``: a live broker
          sends a heartbeat about every half interval when it has nothing else to send
          (RabbitMQ docs "Detecting Dead TCP Connections with Heartbeats"), so a whole
          silent interval means two were missed.
          ``timeout`` also bounds the wait for another thread that is writing (holds the
          write lock, e.g. stuck while RabbitMQ blocks publishers).
        * ``max_wait`` (seconds, default 300; ``None``: no cap) bounds the whole wait for
          close-ok even while the broker keeps showing signs of life.
        * Then the socket is half-closed (``shutdown(SHUT_WR)``: FIN after every queued byte),
          input is read and dropped until the broker's EOF for at most ``min(timeout, 1)`` s
          more (none after close-ok), and only then closed; the I/O thread is joined.

        So against a dead or silent peer close() returns after about the silence allowance
        plus up to 1 s, and never later than about ``max_wait`` + 2 s.

        Raises ``RuntimeError`` when called from the I/O thread (a consumer callback or
        on_blocked/on_unblocked), which must keep reading for the handshake to finish.
        """
        if self._io_ident == threading.get_ident():
            raise RuntimeError("Connection.close() called from the I/O thread (a consumer "
                               "callback); close from another thread")
        with self._lock:
            first = self._error is None and not self._closing
            if first:
                self._closing = True
        self._read_wake.set()
        if first:
            try:
                self._close_handshake(reply_code, reply_text, timeout, max_wait)
            finally:
                self._close_done.set()
            return
        if self._closing:
            # a close() ran or runs in another thread: let it finish its teardown
            self._close_done.wait(max_wait)
        # already closed, or lost (the socket was shut down then): release what is left
        tr = self._transport
        t = self._io_thread
        if t is not None and t.is_alive():
            if tr is not None:
                tr.shutdown()
            t.join(max(timeout, 0.1))
        if tr is not None:
            tr.close()

    def _close_handshake(self, reply_code: int, reply_text: str, timeout: float,
                         max_wait: float | None) -> None:
        """close(): send connection.close, wait for close-ok or for the broker to look dead,
        then tear the socket down (half-close, drain, close). Never raises."""
        tr = self._transport
        assert tr is not None
        watch = _CloseWatch(self, timeout, max_wait)
        try:
            sent = self._send_close(_Close(reply_code, reply_text, 0, 0), timeout, watch)
        except AMQPError:
            # the state machine refused: the broker's connection.close came first; let the
            # I/O thread answer it and record the broker's error (it sets _close_ok)
            self._close_ok.wait(2.0)
            sent = False
        except OSError:
            sent = False  # the connection broke meanwhile: the I/O thread reports it
        if sent:
            while not self._close_ok.wait(watch.slice()):
                if not watch.alive():
                    log.warning(
                        "no connection.close-ok from %s after %.1f s (nothing from the broker "
                        "for %.1f s); closing the socket anyway (FIN, not RST)",
                        self.params.redacted_uri(), watch.elapsed(), watch.silent())
                    break
        answered = self._close_ok.is_set()  # close-ok, or the I/O thread ended (EOF, error)
        self._lost(ConnectionClosed(f"connection to {self.params.redacted_uri()} was closed "
                                    "by this client; open a new one"), shutdown=False)
        # half-close: FIN follows every queued byte, so the broker reads all of them; a writer
        # blocked in sendall wakes with EPIPE
        tr.shutdown_write()
        drain = 0.0 if answered else min(max(timeout, 0.0), 1.0)
        t = self._io_thread
        if t is not None and t.is_alive():
            # the I/O thread keeps reading (and dropping) input until the broker's EOF
            t.join(drain)
            if t.is_alive():
                tr.shutdown()  # give up: wake it (its recv returns EOF)
                t.join(max(timeout, 1.0))
            drain = 0.0
        if t is None or not t.is_alive():
            # read what is still queued (e.g. a heartbeat after close-ok) so close() sends FIN
            tr.discard_input(drain)
        tr.close()

    def _send_close(self, method, timeout: float, watch: "_CloseWatch") -> bool:
        """Write connection.close for close(). Waits at most ``timeout`` s for the write lock
        (another thread writing) and, with the lock, for room in the send buffer while the
        broker keeps reading (``watch``), so a peer that stopped reading cannot make close()
        hang in ``sendall``. Returns False when it gave up (nothing was written)."""
        if self._error is not None:
            return False
        if not self._write_lock.acquire(timeout=max(timeout, 0.0)):
            log.warning("close(): another thread has been writing to %s for %s s; closing "
                        "without connection.close", self.params.redacted_uri(), timeout)
            return False
        try:
            with self._sm_lock:
                data = self._sm.send_method(0, method)  # AMQPError: the broker closed first
            tr = self._transport
            while not tr.wait_writable(watch.slice()):  # type: ignore[union-attr]
                if not watch.alive() or self._close_ok.is_set():
                    log.warning("close(): %s has not read from the socket for %.1f s; closing "
                                "without connection.close", self.params.redacted_uri(),
                                watch.silent())
                    return False
            tr.send(data)  # type: ignore[union-attr]
            self._last_send = _monotonic()
            return True
        finally:
            self._write_lock.release()

    def update_secret(self, new_secret: str | bytes, reason: str = "") -> None:
        """RabbitMQ extension ``connection.update-secret`` (e.g. a refreshed OAuth token).
        Sent without waiting for ``update-secret-ok``."""
        if isinstance(new_secret, str):
            new_secret = new_secret.encode()
        self._send_method(0, spec.Connection.UpdateSecret(new_secret, reason))

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "open" if self.is_open else f"closed ({self._error})"
        return f"<Connection {self.params.redacted_uri()} {state}>"


# ---------------------------------------------------------------------------- helpers

class _CloseWatch:
    """How long close() keeps waiting for close-ok: while the broker shows signs of life.

    Progress is any byte read from the broker (data, heartbeats) or, on Linux, a drop of
    this side's unacknowledged send queue (``SIOCOUTQ``: the broker is still reading the
    backlog, even when it has nothing to send). The broker counts as gone after ``timeout``
    s without progress — with heartbeats, after ``max(timeout, heartbeat)`` s: a live peer
    sends one every half interval — or when ``max_wait`` s have passed in all."""

    __slots__ = ("conn", "tr", "start", "last", "limit", "cap", "bytes_in", "outq")

    def __init__(self, conn: "Connection", timeout: float, max_wait: float | None):
        self.conn = conn
        self.tr = conn._transport
        self.start = self.last = _monotonic()
        hb = conn.heartbeat
        self.limit = max(timeout, float(hb)) if hb else max(timeout, 0.0)
        self.cap = None if max_wait is None else self.start + max(max_wait, 0.0)
        self.bytes_in = conn._bytes_in
        self.outq = self.tr.unsent_bytes()

    def alive(self) -> bool:
        now = _monotonic()
        b = self.conn._bytes_in
        o = self.tr.unsent_bytes()
        if b != self.bytes_in or (o is not None and self.outq is not None and o < self.outq):
            self.last = now
        self.bytes_in, self.outq = b, o
        if self.cap is not None and now >= self.cap:
            return False
        return now - self.last < self.limit

    def slice(self) -> float:
        """Seconds to wait before checking again (short enough to notice progress)."""
        left = self.last + self.limit - _monotonic()
        if self.cap is not None:
            left = min(left, self.cap - _monotonic())
        return min(max(left, 0.0), 0.1)

    def elapsed(self) -> float:
        return _monotonic() - self.start

    def silent(self) -> float:
        return _monotonic() - self.last


def _safe_call(cb, *args) -> None:
    try:
        cb(*args)
    except Exception:  # a user callback must not kill the I/O thread
        log.exception("spark-amqp callback %r raised", cb)
