"""The state machine's reply codes against the real RabbitMQ: the same client bytes are sent to
RabbitMQ (raw socket, handshake driven by our client-role AMQPConnection) and fed to our
server-role AMQPConnection; both must reject them with the same reply code."""

from __future__ import annotations

import socket
from urllib.parse import urlparse

import pytest

from spark_amqp.protocol import (AMQPError, BasicProperties, Decoder, encode_message,
                                 encode_method, spec)
from spark_amqp.protocol.connection import (AMQPConnection, ConnectionState, Role,
                                            error_from_close)

pytestmark = pytest.mark.rabbitmq

OPEN1 = encode_method(1, spec.Channel.Open())
PUBLISH_METHOD_ONLY = encode_method(1, spec.Basic.Publish(0, "", "x"))
HEADER_ONLY = encode_message(1, spec.Basic.Publish(), None, b"")[
    len(encode_method(1, spec.Basic.Publish())):]

CASES = [
    # name, bytes after connection.open-ok, tune-ok channel_max, expected reply code
    ("method on an unopened channel", encode_method(1, spec.Queue.Declare(queue="x")), 0, 504),
    ("second channel.open", OPEN1 + OPEN1, 0, 504),
    ("basic.deliver from a client",
     OPEN1 + encode_message(1, spec.Basic.Deliver("c", 1), None, b"x"), 0, 503),
    ("channel.open-ok from a client", OPEN1 + encode_method(1, spec.Channel.OpenOk()), 0, 503),
    ("connection method on channel 1", OPEN1 + encode_method(1, spec.Connection.Blocked("x")),
     0, 503),
    ("connection.tune from a client after open", encode_method(0, spec.Connection.Tune()), 0, 504),
    ("channel.open on channel 0", encode_method(0, spec.Channel.Open()), 0, 504),
    ("unsolicited connection.close-ok", encode_method(0, spec.Connection.CloseOk()), 0, 504),
    ("unsolicited channel.close-ok", OPEN1 + encode_method(1, spec.Channel.CloseOk()), 0, 503),
    ("content header without a method", OPEN1 + HEADER_ONLY, 0, 505),
    ("method in the middle of content",
     OPEN1 + PUBLISH_METHOD_ONLY + encode_method(1, spec.Basic.Qos()), 0, 505),
    ("more channels than channel_max",
     OPEN1 + encode_method(2, spec.Channel.Open()) + encode_method(3, spec.Channel.Open()), 2, 530),
    ("heartbeat on channel 1", OPEN1 + b"\x08\x00\x01\x00\x00\x00\x00\xce", 0, 505),
]


class RawRabbit:
    """A socket to RabbitMQ with our client-role state machine doing the handshake."""

    def __init__(self, url: str, channel_max: int = 0):
        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port or 5672), timeout=5)
        self.c = AMQPConnection(Role.CLIENT)
        self.sock.sendall(self.c.initiate())
        start = self.next_method()
        assert start.NAME == "connection.start"
        self.send(0, spec.Connection.StartOk({"product": "spark-amqp tests"}, "PLAIN",
                                             f"\0{u.username}\0{u.password}".encode(), "en_US"))
        tune = self.next_method()
        self.send(0, spec.Connection.TuneOk(channel_max or tune.channel_max, tune.frame_max, 0))
        self.send(0, spec.Connection.Open("/"))
        assert self.next_method().NAME == "connection.open-ok"
        assert self.c.state is ConnectionState.OPEN

    def send(self, channel, method):
        self.sock.sendall(self.c.send_method(channel, method))

    def next_method(self):
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("RabbitMQ closed the socket")
            for ev in self.c.receive_data(data):
                if hasattr(ev, "method"):
                    return ev.method

    def reply_code_to(self, raw: bytes) -> int:
        """Send raw bytes (bypassing our checks); return the code of RabbitMQ's close."""
        self.sock.sendall(raw)
        dec = Decoder()  # our state machine was bypassed: read RabbitMQ's replies raw
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("RabbitMQ closed the socket without connection.close")
            for ev in dec.feed(data):
                m = getattr(ev, "method", None)
                if m is not None and m.NAME == "connection.close":
                    return m.reply_code

    def close(self):
        self.sock.close()


def server_side_code(raw: bytes, channel_max: int) -> int:
    """Feed the same client bytes to our server-role state machine; return its error code."""
    c, s = AMQPConnection(Role.CLIENT), AMQPConnection(Role.SERVER)
    s.receive_data(c.initiate())
    c.receive_data(s.send_method(0, spec.Connection.Start(0, 9, {}, b"PLAIN", b"en_US")))
    s.receive_data(c.send_method(0, spec.Connection.StartOk({}, "PLAIN", b"\0g\0g", "en_US")))
    c.receive_data(s.send_method(0, spec.Connection.Tune(2047, 131072, 0)))
    s.receive_data(c.send_method(0, spec.Connection.TuneOk(channel_max or 2047, 131072, 0)))
    s.receive_data(c.send_method(0, spec.Connection.Open("/")))
    s.send_method(0, spec.Connection.OpenOk())
    # the server answers channel.open as RabbitMQ does, between the client's frames
    with pytest.raises(AMQPError) as info:
        for frame in _frames(raw):
            for ev in s.receive_data(frame):
                if getattr(ev, "method", None) is not None and ev.method.NAME == "channel.open":
                    s.send_method(ev.channel, spec.Channel.OpenOk())
    return info.value.reply_code


def _frames(raw: bytes):
    pos = 0
    while pos < len(raw):
        size = int.from_bytes(raw[pos + 3:pos + 7], "big")
        yield raw[pos:pos + 8 + size]
        pos += 8 + size


@pytest.mark.parametrize("name,raw,channel_max,code", CASES, ids=[c[0] for c in CASES])
def test_same_reply_code_as_rabbitmq(rabbitmq_url, name, raw, channel_max, code):
    conn = RawRabbit(rabbitmq_url, channel_max)
    try:
        assert conn.reply_code_to(raw) == code
    finally:
        conn.close()
    assert server_side_code(raw, channel_max) == code


def test_client_role_full_session_against_rabbitmq(rabbitmq_url, unique):
    """Our client-role state machine through a whole session: declare, publish, get, close."""
    conn = RawRabbit(rabbitmq_url)
    q = unique("sm")
    try:
        conn.send(1, spec.Channel.Open())
        assert conn.next_method().NAME == "channel.open-ok"
        conn.send(1, spec.Queue.Declare(queue=q, exclusive=True))  # gone with the connection
        assert conn.next_method().queue == q
        props = BasicProperties(content_type="text/plain", headers={"n": 1})
        conn.sock.sendall(conn.c.send_message(1, spec.Basic.Publish(0, "", q), props,
                                              b"x" * 300_000))
        conn.send(1, spec.Basic.Get(0, q, True))
        got = None
        while got is None:
            for ev in conn.c.receive_data(conn.sock.recv(65536)):
                if getattr(ev, "body", None) is not None:
                    got = ev
        assert got.body == b"x" * 300_000 and got.properties.headers == {"n": 1}
        # a channel error from RabbitMQ: 404 on a passive declare of a missing queue
        conn.send(1, spec.Queue.Declare(queue=q + ".missing", passive=True))
        close = conn.next_method()
        err = error_from_close(close)
        assert err.reply_code == 404 and err.channel_level
        conn.send(1, spec.Channel.CloseOk())
        conn.send(0, spec.Connection.Close(200, "bye", 0, 0))
        assert conn.next_method().NAME == "connection.close-ok"
        assert conn.c.state is ConnectionState.CLOSED
    finally:
        conn.close()
