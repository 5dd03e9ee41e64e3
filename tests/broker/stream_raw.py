"""A blocking stream-protocol client at the frame level (the codec's client-role state machine
over a socket), for broker tests that need exact response codes and byte-level control, and
the brokers those tests compare: RabbitMQ 3.10.8 (port 5552) and the embedded broker."""

from __future__ import annotations

import socket
import ssl
import time
from urllib.parse import urlparse

import pytest

from spark_amqp.protocol import stream as S
from session_guard import unique_name

RABBITMQ_STREAM_PORT = 5552


class RawStream:
    """``RawStream(port)``; :meth:`handshake`, then :meth:`rpc` (send a request, return its
    response), :meth:`send` (one-way), :meth:`events` (what arrived within a time)."""

    def __init__(self, port: int, host: str = "127.0.0.1", ssl_context: ssl.SSLContext | None = None,
                 timeout: float = 10.0):
        sock = socket.create_connection((host, port), timeout=timeout)
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.sm = S.StreamConnection(S.CLIENT)
        self.pending: list = []
        self.closed = False

    def handshake(self, user: str = "guest", password: str = "guest", vhost: str = "/",
                  mechanism: str = "PLAIN", data: bytes | None = None):
        """Peer properties, SASL, tune, open; returns the open response (or the failing one)."""
        self.rpc(S.PeerProperties(0, {"product": "spark-amqp tests"}))
        self.rpc(S.SaslHandshake(0))
        auth = self.rpc(S.SaslAuthenticate(0, mechanism, data if data is not None else
                                           b"\x00" + user.encode() + b"\x00" + password.encode()))
        if auth.code != S.Code.OK:
            return auth
        tune = self.wait_for(S.Tune)
        self.send(S.TuneResponse(tune.frame_max, tune.heartbeat))
        return self.rpc(S.Open(0, vhost))

    def send(self, cmd) -> None:
        self.sock.sendall(self.sm.send(cmd))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read(self, timeout: float) -> bool:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 20)
        except (socket.timeout, TimeoutError):
            return True
        except OSError:
            data = b""
        if not data:
            self.closed = True
            return False
        self.pending += self.sm.receive_data(data)
        return True

    def rpc(self, cmd, timeout: float = 10.0):
        self.send(cmd)
        corr = cmd.correlation_id
        return self.wait_for(lambda e: getattr(e, "correlation_id", None) == corr and e is not cmd, timeout)

    def wait_for(self, what, timeout: float = 10.0):
        """The first event matching ``what`` (a class or a predicate); raises on timeout/close."""
        test = (lambda e: isinstance(e, what)) if isinstance(what, type) else what
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.pending):
                if test(e):
                    return self.pending.pop(i)
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                raise AssertionError(f"nothing matching {what} (closed={self.closed}, got {self.pending})")
            self._read(min(left, 0.5))

    def events(self, seconds: float) -> list:
        """Everything that arrives within ``seconds`` (and what was pending)."""
        deadline = time.monotonic() + seconds
        while not self.closed and time.monotonic() < deadline:
            self._read(max(0.01, deadline - time.monotonic()))
        out, self.pending = self.pending, []
        return out

    def wait_closed(self, timeout: float = 10.0) -> bool:
        """True once the broker closed the socket (events before it stay in ``pending``)."""
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            try:
                self._read(0.2)
            except S.StreamError:
                pass
        return self.closed

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "RawStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def amqp10_data(body: bytes) -> bytes:
    """An AMQP 1.0 message of one data section."""
    from spark_amqp.protocol.amqp10 import Message, encode_message
    return encode_message(Message(body))


@pytest.fixture(params=["rabbitmq", "embedded"])
def stream_broker(request):
    """``(stream port, AMQP URL)`` of each broker: RabbitMQ 3.10.8 and the embedded broker
    in its 3.10 mode."""
    if request.param == "rabbitmq":
        url = request.getfixturevalue("rabbitmq_url")
        try:
            socket.create_connection(("127.0.0.1", RABBITMQ_STREAM_PORT), timeout=2).close()
        except OSError:
            pytest.skip("RabbitMQ's stream port 5552 is not reachable: rabbitmq-plugins enable rabbitmq_stream")
        return RABBITMQ_STREAM_PORT, url
    b = request.getfixturevalue("embedded_stream_broker")
    return b.stream_port, b.url


@pytest.fixture
def streams(stream_broker):
    """A factory of unique stream names, created over the stream protocol and deleted after."""
    port, _ = stream_broker
    made: list[str] = []
    c = RawStream(port)
    c.handshake()

    def make(create: bool = True, arguments: dict | None = None) -> str:
        """A new stream's name; ``arguments``: the protocol's (``{"max-age": "1h"}``)."""
        name = unique_name("h38b")
        if create:
            assert c.rpc(S.CreateStream(0, name, dict(arguments or {}))).code == S.Code.OK
        made.append(name)
        return name

    yield make
    try:
        c2 = RawStream(port)
        c2.handshake()
        for name in made:
            c2.rpc(S.DeleteStream(0, name))
        c2.close()
    finally:
        c.close()


def port_of(url: str) -> int:
    return urlparse(url).port or 5672
