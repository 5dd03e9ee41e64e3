"""Clients that misbehave on the AMQP port (issue 41), against both brokers where RabbitMQ
3.10.8 has the rule (observed on this machine, 2026-11-28):

- a handshake sent a byte at a time is dropped at ``handshake_timeout`` (10 s), as a silent
  one is (test_handshake_limits.py): the deadline runs from the accept, data does not move it;
- a frame header that announces 2 GiB is refused at once, without waiting for (or
  allocating) its payload: before tune-ok the socket is dropped, after it 501 FRAME_ERROR;
- thousands of channels: the 2048th is 530 NOT_ALLOWED (``channel_max`` 2047);
- ``consumer_max_per_channel`` (RabbitMQ 4.x; 3.10 has none, so embedded only): the consumer
  after the maximum is 530 NOT_ALLOWED "reached maximum (N) of consumers per channel".

Each passed on the code before issue 41 except the consumer maximum (no such setting); the
handshake one moved with it into the listener guard. ~12 s, most of it the one 10 s wait.
"""

from __future__ import annotations

import struct
import threading
import time

import pytest

from raw_amqp import RawPeer
from spark_amqp.broker.config import BrokerConfig
from spark_amqp.broker.embedded import EmbeddedBroker
from spark_amqp.protocol import PROTOCOL_HEADER, MethodFrame, encode_method, spec


def test_trickled_handshake_dropped_at_handshake_timeout(embedded_broker, rabbitmq_url):
    """Both brokers at once: the protocol header and then a start-ok, one byte every 0.6 s,
    are cut off ~10 s after the connect."""
    start_ok = encode_method(0, spec.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                                        response=b"\0guest\0guest", locale="en_US"))
    results: dict[str, float | None] = {}

    def run(name: str, url: str) -> None:
        peer = RawPeer(url)
        t0 = time.monotonic()
        results[name] = None
        try:
            for b in PROTOCOL_HEADER + start_ok:
                peer.send(bytes([b]))
                if peer.wait_eof(0.6):
                    break
        except OSError:
            pass
        if peer.eof or peer.wait_eof(10):
            results[name] = time.monotonic() - t0
        peer.close()

    threads = [threading.Thread(target=run, args=a) for a in (("embedded", embedded_broker.url),
                                                              ("rabbitmq", rabbitmq_url))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(40)
    for name in ("embedded", "rabbitmq"):
        took = results.get(name)
        assert took is not None and 8.0 <= took <= 15.0, f"{name}: dropped after {took} s, expected ~10 s"


def test_frame_header_announcing_2_gib_before_tune_drops_the_socket(peer):
    peer.send(PROTOCOL_HEADER)
    peer.expect(spec.Connection.Start)
    peer.send(struct.pack(">BHI", 1, 0, 0x7FFFFFFF) + b"\x00" * 64)
    ev = peer.next_event(6)
    assert ev is None or isinstance(ev.method, spec.Connection.Close), ev
    assert peer.wait_eof(8), "a 2 GiB frame before tune-ok must end the connection"


def test_frame_header_announcing_2_gib_is_501_at_once(peer):
    peer.open()
    t0 = time.monotonic()
    peer.send(struct.pack(">BHI", 1, 1, 0x7FFFFFFF) + b"\x00" * 64)
    close = peer.wait_connection_close(5)
    assert close is not None and close.reply_code == 501, close
    assert time.monotonic() - t0 < 5


def test_the_2048th_channel_is_530(peer):
    """2047 channel.open (RabbitMQ's channel_max) sent at once are all opened; one more is 530."""
    peer.open()
    peer.send(b"".join(encode_method(n, spec.Channel.Open()) for n in range(1, 2049)))
    opened = 0
    close = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ev = peer.next_event(10)
        if ev is None:
            break
        if isinstance(ev, MethodFrame) and isinstance(ev.method, spec.Channel.OpenOk):
            opened += 1
        elif isinstance(ev, MethodFrame) and isinstance(ev.method, spec.Connection.Close):
            close = ev.method
            peer.send_method(0, spec.Connection.CloseOk())
            break
    assert opened == 2047 and close is not None and close.reply_code == 530, (opened, close)


def test_consumer_max_per_channel_is_530():
    with EmbeddedBroker(config=BrokerConfig(consumer_max_per_channel=3)) as b:
        peer = RawPeer(b.url)
        try:
            peer.open()
            peer.open_channel(1)
            peer.send_method(1, spec.Queue.Declare(queue="", exclusive=True))
            q = peer.expect(spec.Queue.DeclareOk).method.queue
            for i in range(3):
                peer.send_method(1, spec.Basic.Consume(queue=q, consumer_tag=f"c{i}"))
                peer.expect(spec.Basic.ConsumeOk)
            peer.send_method(1, spec.Basic.Consume(queue=q, consumer_tag="c3"))
            close = peer.wait_connection_close(5)
            assert close is not None and close.reply_code == 530, close
            assert "reached maximum (3) of consumers per channel" in close.reply_text
        finally:
            peer.close()
    with EmbeddedBroker() as b:   # the default: no maximum (RabbitMQ's infinity)
        peer = RawPeer(b.url)
        try:
            peer.open()
            peer.open_channel(1)
            peer.send_method(1, spec.Queue.Declare(queue="", exclusive=True))
            q = peer.expect(spec.Queue.DeclareOk).method.queue
            peer.send(b"".join(encode_method(1, spec.Basic.Consume(queue=q, consumer_tag=f"c{i}"))
                               for i in range(500)))
            for _ in range(500):
                peer.expect(spec.Basic.ConsumeOk)
        finally:
            peer.close()


@pytest.fixture
def peer(broker_url):
    p = RawPeer(broker_url)
    yield p
    p.close()
