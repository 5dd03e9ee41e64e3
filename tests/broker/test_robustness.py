"""Bad input: garbage, protocol violations and fuzzed frames get the right connection.close or
a dropped socket, and every other connection keeps working. Heartbeats drop silent peers."""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import time

import pika
import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.broker import BrokerConfig
from spark_amqp.protocol import Decoder, MethodFrame, PROTOCOL_HEADER, encode_method, spec

from rawclient import RawClient


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as b:
        yield b


class _Reader:
    """A Decoder plus the method events it decoded but nobody read yet."""

    def __init__(self):
        self.decoder = Decoder()
        self.pending: list = []


_READERS: dict[int, _Reader] = {}


def _raw_open(port: int) -> socket.socket:
    """A raw socket through connection.open-ok (PLAIN guest/guest)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(PROTOCOL_HEADER)
    d = _Reader()
    _read_method(s, d)  # start
    s.sendall(encode_method(0, spec.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                                       response=b"\x00guest\x00guest", locale="en_US")))
    _read_method(s, d)  # tune
    s.sendall(encode_method(0, spec.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0)))
    s.sendall(encode_method(0, spec.Connection.Open(virtual_host="/")))
    assert isinstance(_read_method(s, d), spec.Connection.OpenOk)
    _READERS[id(s)] = d
    return s


def _read_method(s: socket.socket, d: _Reader, timeout: float = 5.0):
    s.settimeout(timeout)
    pending = d.pending
    while not pending:
        data = s.recv(65536)
        if not data:
            raise ConnectionError("closed")
        pending.extend(e for e in d.decoder.feed(data) if isinstance(e, MethodFrame))
    return pending.pop(0).method


def _close_code(s: socket.socket) -> int | None:
    """The reply code of the connection.close the broker sends, or None if it just drops us."""
    d = _READERS.pop(id(s))
    try:
        while True:
            m = _read_method(s, d)
            if isinstance(m, spec.Connection.Close):
                try:
                    s.sendall(encode_method(0, spec.Connection.CloseOk()))
                except OSError:  # the test may have shut down its write side
                    pass
                return m.reply_code
    except (ConnectionError, OSError, Exception):
        return None


def _healthy(url: str) -> None:
    c = pika.BlockingConnection(pika.URLParameters(url))
    ch = c.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", q, b"ok")
    assert ch.basic_get(q, auto_ack=True)[2] == b"ok"
    c.close()


@pytest.mark.parametrize("frame, code", [
    (b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x0a\x00", 501),        # bad frame-end
    (b"\x09\x00\x00\x00\x00\x00\x00\xce", 501),                         # unknown frame type
    (b"\x01\x00\x00\x00\x00\x00\x04\x00\x63\x00\x01\xce", 503),         # unknown class
    (b"\x03\x00\x01\x00\x00\x00\x01x\xce", 505),                        # body without header
    (b"\x02\x00\x01\x00\x00\x00\x0e" + b"\x00" * 14 + b"\xce", 505),    # header without publish
    (b"\x08\x00\x01\x00\x00\x00\x00\xce", 505),                         # heartbeat on channel 1
    (encode_method(5, spec.Basic.Qos(prefetch_count=1)), 504),          # channel not open
    (encode_method(0, spec.Basic.Qos(prefetch_count=1)), 504),          # channel 0
    (b"\x01\x00\x00\xff\xff\xff\xf0", 501),                              # frame over frame-max
])
def test_protocol_violation_gets_connection_close(broker, frame, code):
    s = _raw_open(broker.port)
    s.sendall(frame)
    assert _close_code(s) == code
    s.close()
    _healthy(broker.url)


def test_bad_field_value_gets_502(broker):
    s = _raw_open(broker.port)
    s.sendall(encode_method(1, spec.Channel.Open()))
    # queue.declare whose queue-name shortstr claims 200 bytes but the frame ends early
    payload = struct.pack(">HHH", 50, 10, 0) + b"\xc8abc"
    s.sendall(struct.pack(">BHI", 1, 1, len(payload)) + payload + b"\xce")
    assert _close_code(s) in (501, 502)
    s.close()
    _healthy(broker.url)


@pytest.mark.parametrize("header", [b"AMQP\x00\x00\x09\x00", b"AMQP\x00\x01\x00\x00",
                                    b"HTTP/1.1", b"GET / HTTP/1.1\r\n\r\n"])
def test_unsupported_protocol_header_answered_with_0091(broker, header):
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    s.sendall(header)
    got = b""
    while True:
        chunk = s.recv(100)
        if not chunk:
            break
        got += chunk
    assert got == b"AMQP\x00\x00\x09\x01"
    s.close()


def test_0_9_header_accepted_as_0_9_1(broker):
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    s.sendall(b"AMQP\x01\x01\x00\x09")
    d = _Reader()
    assert isinstance(_read_method(s, d), spec.Connection.Start)
    s.close()


def test_fuzzed_frames_never_break_other_connections(broker):
    rng = random.Random(1234)
    good = pika.BlockingConnection(pika.URLParameters(broker.url))
    gch = good.channel()
    q = gch.queue_declare("", exclusive=True).method.queue
    valid = [encode_method(1, spec.Channel.Open()),
             encode_method(1, spec.Queue.Declare(queue="fz", auto_delete=True)),
             encode_method(1, spec.Basic.Publish(routing_key="fz")),
             encode_method(1, spec.Basic.Ack(delivery_tag=3))]
    outcomes = {"closed": 0, "dropped": 0}
    for i in range(60):
        s = _raw_open(broker.port)
        data = bytearray(b"".join(rng.sample(valid, k=rng.randint(1, 4))))
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        s.sendall(bytes(data))
        s.sendall(b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x0a\x00")  # always end with a bad frame-end
        s.shutdown(socket.SHUT_WR)  # a frame announced longer than what we sent ends with EOF
        code = _close_code(s)
        outcomes["closed" if code else "dropped"] += 1
        if code is not None:
            assert 500 <= code < 600 or code in (402, 403, 406, 530, 540)
        s.close()
        gch.basic_publish("", q, b"%d" % i)
        assert gch.basic_get(q, auto_ack=True)[2] == b"%d" % i
    good.close()
    assert outcomes["closed"] > 0
    _healthy(broker.url)


def test_wrong_password_gets_403_with_capability(broker):
    params = pika.URLParameters(broker.url.replace("guest:guest", "guest:nope"))
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika.BlockingConnection(params)
    _healthy(broker.url)


def test_heartbeat_silent_peer_dropped():
    cfg = BrokerConfig(heartbeat=1)
    with EmbeddedBroker(config=cfg) as b:
        async def run():
            c = await RawClient.connect(b.port, heartbeat=1)
            t0 = time.monotonic()
            # read (heartbeats arrive from the broker) but never send anything
            try:
                while True:
                    data = await asyncio.wait_for(c.reader.read(100), 10)
                    if not data:
                        break
            except ConnectionError:
                pass
            return time.monotonic() - t0
        elapsed = asyncio.run(run())
        # two missed heartbeats of 1 s, checked every 0.5 s
        assert 1.9 <= elapsed <= 4.0, elapsed
        _healthy(b.url)


def test_heartbeats_keep_an_active_peer():
    cfg = BrokerConfig(heartbeat=1)
    with EmbeddedBroker(config=cfg) as b:
        c = pika.BlockingConnection(pika.URLParameters(b.url + "?heartbeat=1"))
        for _ in range(8):
            c.process_data_events(0.5)
        assert c.is_open
        c.channel().queue_declare("", exclusive=True)
        c.close()
