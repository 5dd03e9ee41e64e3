"""A tiny scripted AMQP server and a freezable TCP proxy for client tests.

:class:`FakeServer` listens on an ephemeral port, accepts one connection and runs a script
function with a :class:`ServerSide` helper (server-role state machine from
``spark_amqp.protocol.connection``), e.g. to complete the handshake and then go silent so the
client's dead-peer detection must fire.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections import deque

from spark_amqp.protocol import MethodFrame, spec
from spark_amqp.protocol.connection import AMQPConnection, Role


class ServerSide:
    """The accepted socket plus a server-role state machine."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.sm = AMQPConnection(Role.SERVER)
        self.events: deque = deque()
        self.start_ok = None
        self.received: list = []

    def recv_event(self, timeout: float = 5.0):
        self.sock.settimeout(timeout)
        while not self.events:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("client closed")
            self.events.extend(self.sm.receive_data(data))
        ev = self.events.popleft()
        self.received.append(ev)
        return ev

    def recv_method(self, timeout: float = 5.0):
        while True:
            ev = self.recv_event(timeout)
            if isinstance(ev, MethodFrame) or hasattr(ev, "method"):
                return ev.channel, ev.method

    def send(self, channel: int, method) -> None:
        self.sock.sendall(self.sm.send_method(channel, method))

    def answer_close(self, timeout: float = 5.0) -> None:
        """Read until the client's connection.close (answer close-ok) or EOF/timeout."""
        try:
            while True:
                ev = self.recv_event(timeout)
                m = getattr(ev, "method", None)
                if isinstance(m, spec.Connection.Close):
                    self.send(0, spec.Connection.CloseOk())
                    return
        except (OSError, EOFError, Exception):
            return

    def handshake(self, heartbeat: int = 0, mechanisms: bytes = b"PLAIN AMQPLAIN",
                  frame_max: int = 131072, channel_max: int = 2047) -> None:
        self.recv_event()  # protocol header
        self.send(0, spec.Connection.Start(0, 9, {"product": "fake"}, mechanisms, b"en_US"))
        _, self.start_ok = self.recv_method()
        self.send(0, spec.Connection.Tune(channel_max, frame_max, heartbeat))
        _, self.tune_ok = self.recv_method()
        _, self.open = self.recv_method()
        self.send(0, spec.Connection.OpenOk(""))


class FakeServer:
    """``with FakeServer(script) as srv: connect(srv.url)`` — runs ``script(ServerSide)`` for
    the first accepted connection in a thread; ``srv.error`` keeps an exception it raised."""

    def __init__(self, script, tls_context: ssl.SSLContext | None = None):
        self.script = script
        self.tls_context = tls_context
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.error: BaseException | None = None
        self.side: ServerSide | None = None
        self.done = threading.Event()
        self.release = threading.Event()  # set at exit: scripts waiting on it return
        self.thread = threading.Thread(target=self._run, daemon=True, name="fake-amqp-server")

    @property
    def url(self) -> str:
        scheme = "amqps" if self.tls_context else "amqp"
        return f"{scheme}://guest:guest@127.0.0.1:{self.port}/%2F"

    def _run(self) -> None:
        try:
            self.listener.settimeout(10)
            sock, _ = self.listener.accept()
            if self.tls_context is not None:
                sock = self.tls_context.wrap_socket(sock, server_side=True)
            self.side = ServerSide(sock)
            try:
                self.script(self.side)
                self.side.answer_close()
            finally:
                self.done.set()
                self.release.wait(10)
                sock.close()
        except BaseException as exc:  # reported to the test
            self.error = exc
        finally:
            self.done.set()

    def __enter__(self) -> "FakeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.thread.join(10)
        self.listener.close()
