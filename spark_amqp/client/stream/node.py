"""One stream-protocol connection to one broker node: socket, handshake, I/O thread, requests.

:class:`NodeConnection` opens the socket (TCP or TLS, :mod:`spark_amqp.client.transport`), runs
the handshake in the connecting thread (peer properties, SASL PLAIN/EXTERNAL, tune, open;
PROTOCOL.adoc "Authentication") through the sans-IO state machine
(:class:`~spark_amqp.protocol.stream.connection.StreamConnection`), then starts one I/O thread
that reads the socket, feeds the state machine and dispatches what comes out:

* responses wake the caller of :meth:`NodeConnection.request` waiting on that correlation id;
* chunks (delivers) go to their subscription (:meth:`~.consumer.Consumer._on_chunk`): whole
  chunks, their messages left in the received bytes until the application asks for them;
* publish confirms and errors go to their publisher (:meth:`~.producer.Producer._on_confirm`);
* ``metadata_update`` (a stream's leader moved or the stream was deleted) ends the producers
  and consumers of that stream with :class:`~spark_amqp.protocol.stream.errors.StreamNotAvailable`;
* ``close`` from the broker is answered, and ends the connection with the typed error of its
  code; heartbeats are sent when nothing was written for half the interval, and a broker
  silent for two intervals ends the connection with ``ConnectionLost``.

Callers' threads write frames themselves under one write lock (publishes bypass the state
machine: they change no state).
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from typing import Any, Callable

from ..._version import __version__
from ...protocol.stream import commands as C
from ...protocol.stream.chunk import Chunk
from ...protocol.stream.connection import CLIENT, State, StreamConnection
from ...protocol.stream.constants import Code, Key
from ...protocol.stream.errors import (AuthenticationFailure, SaslMechanismNotSupported,
                                       StreamError, error_for_code)
from ...protocol.peer import STREAM, closed_before_answer_hint, wrong_protocol_message
from ..errors import ConnectionClosed, ConnectionLost, ProtocolMismatch
from ..transport import TCPTransport, TLSTransport, Transport, open_socket
from ..uri import format_address
from .params import StreamParameters

__all__ = ["NodeConnection", "RECV_SIZE"]

log = logging.getLogger("spark_amqp.client.stream")
_monotonic = time.monotonic
#: bytes per recv(): chunks are often larger than 64 KiB
RECV_SIZE = 256 * 1024


class _Waiter:
    __slots__ = ("event", "response", "error")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.response: Any = None
        self.error: BaseException | None = None


class NodeConnection:
    """An open stream-protocol connection to ``host:port`` (the address dialled).

    Attributes (after the handshake): ``params``; ``host``, ``port`` (dialled);
    ``server_properties`` (dict: ``product``, ``version``, ``cluster_name``, ...);
    ``server_version`` (tuple of ints, e.g. ``(3, 10, 8)``); ``advertised`` (``(host, port)``
    the node advertises in ``open``, or the dialled address when it does not say);
    ``frame_max``, ``heartbeat`` (negotiated bytes / seconds, 0 = none).

    Raises from the constructor: ``ConnectionLost`` (socket, TLS or handshake failure or
    timeout), ``ssl.SSLError``, :class:`~spark_amqp.protocol.stream.errors.AuthenticationFailure`
    and the other typed errors of the handshake's response codes,
    :class:`~spark_amqp.client.errors.ProtocolMismatch` when the port speaks another protocol
    (HTTP, AMQP 0-9-1, TLS: :mod:`spark_amqp.protocol.peer`).
    """

    def __init__(self, params: StreamParameters, host: str, port: int):
        self.params = params
        self.host, self.port = host, int(port)
        self.where = f"{params.SCHEMES[1] if params.tls else params.SCHEMES[0]}://{format_address(host, port)}"
        self.server_properties: dict = {}
        self.server_version: tuple = ()
        self.advertised: tuple = (host, int(port))
        self.frame_max = params.frame_max
        self.heartbeat = 0
        self._sm = StreamConnection(CLIENT, frame_max=params.frame_max,
                                    heartbeat=params.heartbeat,
                                    max_receive_size=params.max_receive_size,
                                    verify_crc=params.verify_crc)
        self._sm_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._waiters: dict[int, _Waiter] = {}
        self._error: BaseException | None = None
        self._closing = False
        self._closed = threading.Event()
        self._last_send = _monotonic()
        self._transport: Transport | None = None
        self._io_thread: threading.Thread | None = None
        #: subscription id -> consumer; publisher id -> producer (set by the client)
        self.consumers: dict[int, Any] = {}
        self.producers: dict[int, Any] = {}
        #: called (from the I/O thread) with the stream name of a metadata_update
        self.on_metadata_update: Callable[[str, int], Any] | None = None
        self._open()

    # ------------------------------------------------------------------ handshake

    def _open(self) -> None:
        p = self.params
        try:
            sock = open_socket(self.host, self.port, p.connection_timeout)
        except OSError as exc:
            raise ConnectionLost(f"cannot connect to {self.where}: {exc}; check that the broker "
                                 "runs with the rabbitmq_stream plugin and the host/port are "
                                 "right") from exc
        try:
            if p.tls:
                sni = p.server_name_indication
                tr: Transport = TLSTransport(sock, p.make_ssl_context(),
                                             None if sni == "disable" else (sni or self.host),
                                             self._write_lock)
                tr.handshake()
            else:
                tr = TCPTransport(sock)
            self._transport = tr
            self._handshake()
        except BaseException as exc:
            sock.close()
            if isinstance(exc, (StreamError, ConnectionLost, ssl.SSLError)):
                raise
            if isinstance(exc, TimeoutError):
                raise ConnectionLost(f"handshake with {self.where} timed out after "
                                     f"{p.connection_timeout} s (connection_timeout)") from exc
            if isinstance(exc, OSError):
                raise ConnectionLost(f"connection to {self.where} failed during the "
                                     f"handshake: {exc}") from exc
            raise
        tr.set_timeout(None)
        self._io_thread = threading.Thread(target=self._io_loop, daemon=True,
                                           name=f"spark-amqp-stream-io {self.host}:{self.port}")
        self._io_thread.start()

    def _hs_send(self, cmd) -> None:
        self._transport.send(self._sm.send(cmd))  # type: ignore[union-attr]

    def _hs_recv(self, pending: list) -> Any:
        """The next command during the handshake (reading the socket in this thread)."""
        tr = self._transport
        while not pending:
            data = tr.recv()  # type: ignore[union-attr]
            if not data:
                if not tr.eof:  # type: ignore[union-attr]
                    continue
                hint = closed_before_answer_hint(self.port, STREAM) if self._hs_first else ""
                raise ConnectionLost(f"{self.where} closed the connection during the handshake "
                                     f"(state {self._sm.state.value}){hint}")
            if self._hs_first:
                # another protocol's first bytes (an HTTP status line from the management
                # port, AMQP 0-9-1's protocol header, a TLS alert) before they are decoded as
                # a frame: protocol/peer.py
                while len(data) < 8:
                    more = tr.recv()  # type: ignore[union-attr]
                    if more:
                        data += more
                    elif tr.eof:  # type: ignore[union-attr]
                        break
                self._hs_first = False
                text = wrong_protocol_message(data, self.where, STREAM)
                if text:
                    raise ProtocolMismatch(text)
            pending.extend(self._sm.receive_data(data))
        return pending.pop(0)

    def _expect(self, pending: list, cls: type):
        cmd = self._hs_recv(pending)
        if type(cmd) is C.Close:
            raise error_for_code(cmd.closing_code, f"{self.where} closed the connection during "
                                 f"the handshake: {cmd.reason}")
        if type(cmd) is not cls:
            raise ConnectionLost(f"{self.where} sent {type(cmd).__name__} during the handshake, "
                                 f"expected {cls.__name__}")
        return cmd

    def _handshake(self) -> None:
        p = self.params
        self._transport.set_timeout(p.connection_timeout)  # type: ignore[union-attr]
        pending: list = []
        self._hs_first = True
        props = {"product": "spark-amqp", "version": __version__, "platform": "Python",
                 "connection_name": f"spark-amqp stream {format_address(self.host, self.port)}"}
        props.update({str(k): str(v) for k, v in (p.client_properties or {}).items()})
        self._hs_send(C.PeerProperties(0, props))
        r = self._expect(pending, C.PeerPropertiesResponse)
        self.server_properties = dict(r.properties)
        self.server_version = _version_tuple(self.server_properties.get("version", ""))
        self._hs_send(C.SaslHandshake(0))
        r = self._expect(pending, C.SaslHandshakeResponse)
        offered = [m.upper() for m in r.mechanisms]
        mech = next((m for m in p.auth_mechanisms if m in offered), None)
        if mech is None:
            raise SaslMechanismNotSupported(
                f"{self.where} offers the SASL mechanisms {r.mechanisms}, none of "
                f"{list(p.auth_mechanisms)} asked for (auth_mechanism)")
        data = (b"\0" + p.username.encode() + b"\0" + p.password.encode()) if mech == "PLAIN" \
            else b""
        self._hs_send(C.SaslAuthenticate(0, mech, data))
        r = self._expect(pending, C.SaslAuthenticateResponse)
        if r.code != Code.OK:
            err = error_for_code(r.code)
            hint = ""
            if isinstance(err, AuthenticationFailure):
                hint = f": user {p.username!r} or its password is wrong"
            raise error_for_code(r.code, f"{self.where} refused the login ({err.name.lower()})"
                                 f"{hint}")
        t = self._expect(pending, C.Tune)
        fm, hb = self._sm.frame_max, self._sm.heartbeat
        self._hs_send(C.TuneResponse(fm, hb))
        self.frame_max, self.heartbeat = fm, hb
        self._hs_send(C.Open(0, p.vhost))
        r = self._expect(pending, C.OpenResponse)
        if r.code != Code.OK:
            raise error_for_code(r.code, f"{self.where} refused vhost {p.vhost!r}: it does "
                                 "not exist or the user may not use it")
        host = r.properties.get("advertised_host")
        port = r.properties.get("advertised_port")
        if host and port and str(port).isdigit():
            self.advertised = (host, int(port))
        if pending:
            self._dispatch(pending)
        del t

    # ------------------------------------------------------------------ requests

    def _check(self) -> None:
        if self._error is not None:
            err = self._error
            raise _copy(err) from err

    def send_command(self, cmd) -> None:
        """Write a one-way command (credit, store_offset, ...) through the state machine."""
        self._check()
        with self._write_lock:
            with self._sm_lock:
                data = self._sm.send(cmd)
            self._write(data)

    def send_frame(self, data: bytes) -> None:
        """Write a whole frame built elsewhere (a publish: it changes no state)."""
        if self._error is not None:
            self._check()
        with self._write_lock:
            self._write(data)

    def _write(self, data: bytes) -> None:
        try:
            self._transport.send(data)  # type: ignore[union-attr]
        except OSError as exc:
            self._lost(ConnectionLost(f"writing to {self.where} failed: {exc}"))
            self._check()
        self._last_send = _monotonic()

    def request(self, cmd, timeout: float | None = -1.0, ok: tuple = (Code.OK,)):
        """Send the request ``cmd`` and wait for its response (``timeout`` seconds; -1: the
        ``rpc_timeout``). Returns the response; raises its code's typed error unless the code
        is in ``ok`` (a MetadataResponse has no code). On a timeout the connection is
        dropped (its state is unknown) with ``ConnectionLost``."""
        self._check()
        w = _Waiter()
        with self._write_lock:
            with self._sm_lock:
                data = self._sm.send(cmd)
                self._waiters[cmd.correlation_id] = w
            self._write(data)
        if timeout is not None and timeout < 0:
            timeout = self.params.rpc_timeout
        if not w.event.wait(timeout):
            self._lost(ConnectionLost(f"{self.where} did not answer {type(cmd).__name__} within "
                                      f"{timeout} s (rpc_timeout): the connection is dropped"))
            self._check()
        if w.error is not None:
            raise w.error
        resp = w.response
        code = getattr(resp, "code", None)
        if code is not None and code not in ok:
            raise error_for_code(code, _describe(cmd, code))
        return resp

    # ------------------------------------------------------------------ I/O thread

    def _io_loop(self) -> None:
        try:
            self._read_loop()
        except StreamError as exc:
            before = getattr(exc, "events", None)
            if before:
                self._dispatch(before)
            if not self._closing:
                try:
                    with self._write_lock, self._sm_lock:
                        frame = self._sm.close_frame_for(exc)
                    if frame:
                        with self._write_lock:
                            self._transport.send(frame)  # type: ignore[union-attr]
                except (OSError, StreamError):
                    pass
            err = _copy(exc, f"{self.where} sent data this client cannot accept, so it closed "
                             f"the connection: {exc.text}")
            err.__cause__ = exc
            self._lost(err)
        except OSError as exc:
            if not isinstance(exc, ConnectionLost):
                exc = ConnectionLost(f"reading from {self.where} failed: {exc}")
            self._lost(exc)
        except BaseException as exc:  # pragma: no cover - a bug: do not hang callers
            log.exception("spark-amqp stream I/O thread crashed")
            self._lost(ConnectionLost(f"I/O thread crashed: {exc!r}"))
        finally:
            self._closed.set()

    def _read_loop(self) -> None:
        tr = self._transport
        assert tr is not None
        sm = self._sm
        sm_lock = self._sm_lock
        dispatch = self._dispatch
        recv = getattr(getattr(tr, "sock", None), "recv", None) if type(tr) is TCPTransport \
            else None
        hb = self.heartbeat
        while True:
            if hb:
                left = self._heartbeat_tick()
                if not tr.wait_readable(left):
                    if sm.heartbeat_action() == "dead":
                        raise ConnectionLost(f"no data from {self.where} for {2 * hb} s "
                                             f"(heartbeat {hb} s, 2 intervals missed): the "
                                             "broker or the network is dead")
                    continue
            data = recv(RECV_SIZE) if recv is not None else tr.recv()
            if not data:
                if not tr.eof:
                    continue
                if self._closing:
                    return
                raise ConnectionLost(f"{self.where} closed the TCP connection without a close "
                                     "command")
            with sm_lock:
                events = sm.receive_data(data)
            if events and dispatch(events):
                return

    def _heartbeat_tick(self) -> float:
        sm = self._sm
        sm.note_sent(self._last_send)  # it does not see publishes: our last write counts
        if sm.heartbeat_action() == "send" and self._write_lock.acquire(False):
            try:
                with self._sm_lock:
                    frame = sm.heartbeat_frame()
                self._transport.send(frame)  # type: ignore[union-attr]
                self._last_send = _monotonic()
            except (OSError, StreamError):
                pass
            finally:
                self._write_lock.release()
        deadline = sm.heartbeat_deadline()
        return 0.5 if deadline is None else max(0.05, deadline - _monotonic())

    def _dispatch(self, events: list) -> bool:
        """Hand each event on; True when the connection is finished."""
        consumers = self.consumers
        for ev in events:
            t = type(ev)
            if t is Chunk:
                c = consumers.get(ev.subscription_id)
                if c is not None:
                    c._on_chunk(ev)
            elif t is C.PublishConfirm:
                p = self.producers.get(ev.publisher_id)
                if p is not None:
                    p._on_confirm(ev.publishing_ids)
            elif t is C.PublishError:
                p = self.producers.get(ev.publisher_id)
                if p is not None:
                    p._on_error(ev.errors)
            elif t is C.Heartbeat:
                pass
            elif t is C.Close:
                self._answer_close(ev)
                return True
            elif t is C.CloseResponse:
                self._wake(ev)
                return True
            elif t is C.MetadataUpdate:
                self._on_metadata_update(ev.stream, ev.code)
            elif t is C.CreditResponse:
                c = consumers.get(ev.subscription_id)
                if c is not None:
                    c._on_error(error_for_code(ev.code, f"credit for subscription "
                                               f"{ev.subscription_id} refused"))
            elif t is C.ConsumerUpdate:
                self._on_consumer_update(ev)
            else:
                self._wake(ev)
        return False

    def _wake(self, resp) -> None:
        w = self._waiters.pop(getattr(resp, "correlation_id", -1), None)
        if w is not None:
            w.response = resp
            w.event.set()

    def _answer_close(self, ev) -> None:
        err = error_for_code(ev.closing_code, f"{self.where} closed the connection: {ev.reason}")
        try:
            with self._write_lock:
                with self._sm_lock:
                    data = self._sm.send(C.CloseResponse(ev.correlation_id, Code.OK))
                self._transport.send(data)  # type: ignore[union-attr]
        except (OSError, StreamError):
            pass
        self._lost(err if ev.closing_code != Code.OK else ConnectionClosed(
            f"{self.where} closed the connection ({ev.reason})"))

    def _on_metadata_update(self, stream: str, code: int) -> None:
        err = error_for_code(code, f"stream {stream!r} changed (its leader moved or it was "
                             "deleted): open a new producer/consumer")
        for p in list(self.producers.values()):
            if p.stream == stream:
                p._on_fail(err)
        for c in list(self.consumers.values()):
            if c.stream == stream:
                c._on_error(err)
        if self.on_metadata_update is not None:
            try:
                self.on_metadata_update(stream, code)
            except Exception:  # pragma: no cover
                log.exception("on_metadata_update callback failed")

    def _on_consumer_update(self, ev) -> None:
        c = self.consumers.get(ev.subscription_id)
        spec = c._consumer_update(ev.active) if c is not None else C.OffsetSpec.next()
        try:
            with self._write_lock:
                with self._sm_lock:
                    data = self._sm.send(C.ConsumerUpdateResponse(ev.correlation_id, Code.OK, spec))
                self._transport.send(data)  # type: ignore[union-attr]
        except (OSError, StreamError):
            pass

    def _lost(self, err: BaseException) -> None:
        if self._error is None:
            self._error = err
        for w in list(self._waiters.values()):
            w.error = err
            w.event.set()
        self._waiters.clear()
        for p in list(self.producers.values()):
            p._on_fail(err)
        for c in list(self.consumers.values()):
            c._on_error(err)
        tr = self._transport
        if tr is not None:
            tr.shutdown()

    # ------------------------------------------------------------------ state

    @property
    def is_open(self) -> bool:
        return self._error is None and not self._closing

    @property
    def error(self) -> BaseException | None:
        """Why the connection ended (None while open)."""
        return self._error

    def supports(self, key: int) -> bool:
        """Whether the node's RabbitMQ version speaks command ``key``
        (:data:`~spark_amqp.protocol.stream.constants.KEYS_SINCE`)."""
        from ...protocol.stream.constants import KEYS_SINCE

        since = KEYS_SINCE.get(Key(key))
        return since is None or not self.server_version or self.server_version >= since

    def close(self, timeout: float = 5.0) -> None:
        """Send ``close`` and wait up to ``timeout`` seconds for its response; then close the
        socket. Idempotent; never raises."""
        if self._closing:
            return
        self._closing = True
        if self._error is None:
            try:
                w = _Waiter()
                with self._write_lock:
                    with self._sm_lock:
                        cmd = C.Close(0, Code.OK, "closed by the application")
                        data = self._sm.send(cmd)
                        self._waiters[cmd.correlation_id] = w
                    self._transport.send(data)  # type: ignore[union-attr]
                self._closed.wait(timeout)
            except (OSError, StreamError):
                pass
        if self._error is None:
            self._error = ConnectionClosed(f"the connection to {self.where} was closed by this "
                                           "client")
        tr = self._transport
        if tr is not None:
            tr.shutdown()
            if self._io_thread is not None and self._io_thread is not threading.current_thread():
                self._io_thread.join(timeout)
            tr.close()

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<NodeConnection {self.where} {state}>"


def _copy(err: BaseException, text: str | None = None) -> BaseException:
    """A fresh exception of ``err``'s type (its code kept), to raise again from a later call
    without growing the original's traceback; ``text`` replaces its message."""
    if isinstance(err, StreamError):
        new = type(err)(err.text if text is None else text)
        if new.code != err.code:
            new = StreamError(new.text, code=err.code)
        return new
    try:
        return type(err)(str(err) if text is None else text)
    except Exception:  # noqa: BLE001 - an exception class with another signature
        return err


def _version_tuple(text: str) -> tuple:
    out = []
    for part in text.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def _describe(cmd, code: int) -> str:
    """The text of the error for ``cmd`` answered with ``code``."""
    name = type(cmd).__name__
    stream = getattr(cmd, "stream", None) or getattr(cmd, "super_stream", None) or \
        getattr(cmd, "name", None)
    target = f" for stream {stream!r}" if isinstance(stream, str) else ""
    hints = {
        Code.STREAM_DOES_NOT_EXIST: "create it first (create_stream) or check its name and vhost",
        Code.STREAM_ALREADY_EXISTS: "a stream of that name exists (delete it, or pass "
                                    "exists_ok=True)",
        Code.ACCESS_REFUSED: "the user lacks the permission on it (rabbitmqctl set_permissions)",
        Code.PRECONDITION_FAILED: "check the arguments (e.g. max-age like '7D', sizes in bytes) "
                                  "and that a publisher name is not in use",
        Code.STREAM_NOT_AVAILABLE: "its leader is not available now: retry shortly",
        Code.NO_OFFSET: "no offset is stored for that reference",
    }
    hint = hints.get(code, "")
    return f"{name}{target} failed" + (f": {hint}" if hint else "")
