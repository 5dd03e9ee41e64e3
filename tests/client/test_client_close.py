"""Connection.close(): the close handshake waits for close-ok while the broker is evidently
alive, and the socket is never torn down with unread data (which makes the kernel send an RST
and the broker drop what it had not read yet). AMQP 0-9-1 §2.2.4 / §4.2.2 (close handshake),
the close-ok rule "safe to release resources and close the socket"."""

from __future__ import annotations

import threading
import time

import pytest
from client_fakes import FakeServer

from spark_amqp.client import ConnectionClosed, connect
from spark_amqp.protocol import BasicProperties, spec


def _open_channel(side):
    ch, m = side.recv_method()
    assert isinstance(m, spec.Channel.Open)
    side.send(ch, spec.Channel.OpenOk(b""))
    return ch


def _read_rest(side, result):
    """Server side: read every frame up to the client's connection.close (counting the
    publishes), then what follows: b"" is the client's FIN, an OSError (ECONNRESET) an RST."""
    publishes = 0
    while True:
        ev = side.recv_event(timeout=10)
        m = getattr(ev, "method", None)
        if isinstance(m, spec.Basic.Publish):
            publishes += 1
        elif isinstance(m, spec.Connection.Close):
            break
    result["publishes"] = publishes
    result["leftover"] = list(side.events)


def _after_close(side, result):
    side.sock.settimeout(10)
    try:
        result["after"] = side.sock.recv(65536)
    except OSError as exc:
        result["after"] = exc


def test_close_waits_for_a_late_close_ok_while_the_broker_sends_heartbeats():
    """The broker answers close-ok only after 7 s (> the 5 s timeout), reading nothing
    meanwhile but sending heartbeats (RabbitMQ working through a publish backlog). close()
    must wait for it; the server must get every byte sent before close and then a clean FIN
    (the old close() gave up at 5 s and the heartbeats then hit a closed socket: RST, and the
    server lost its unread input)."""
    n = 500
    result = {}

    def script(side):
        side.handshake(heartbeat=1)
        _open_channel(side)
        t_end = time.monotonic() + 7
        while time.monotonic() < t_end:
            try:
                side.sock.sendall(side.sm.send_heartbeat())
            except OSError as exc:  # the client reset the connection
                result["reset"] = exc
                return
            time.sleep(0.3)
        _read_rest(side, result)
        side.send(0, spec.Connection.CloseOk())
        _after_close(side, result)

    with FakeServer(script) as srv:
        conn = connect(srv.url, heartbeat=1)
        ch = conn.channel()
        for i in range(n):
            ch.basic_publish(b"%05d" % i + b"x" * 45, routing_key="q")
        t0 = time.monotonic()
        conn.close()  # timeout=5.0
        elapsed = time.monotonic() - t0
        assert srv.done.wait(10)
    assert "reset" not in result, f"close() reset the connection after {elapsed:.1f} s"
    assert srv.error is None
    assert 6.0 <= elapsed <= 9.5, elapsed
    assert result["publishes"] == n
    assert result["after"] == b"", result["after"]  # FIN, not ECONNRESET
    assert not conn.is_open
    with pytest.raises(ConnectionClosed):
        conn.channel()
    conn.close()  # idempotent


def test_close_gives_up_after_timeout_on_a_silent_broker_with_a_fin():
    """No heartbeats negotiated, the broker neither reads nor answers: close() returns after
    about ``timeout`` (+ at most 1 s waiting for the broker's EOF) and the socket is closed
    with FIN: when the server reads again it gets connection.close, then EOF."""
    gate = threading.Event()
    result = {}

    def script(side):
        side.handshake(heartbeat=0)
        gate.wait(15)
        _read_rest(side, result)
        _after_close(side, result)

    with FakeServer(script) as srv:
        conn = connect(srv.url, heartbeat=0)
        t0 = time.monotonic()
        conn.close(timeout=1.0)
        elapsed = time.monotonic() - t0
        gate.set()
        assert srv.done.wait(10)
    assert srv.error is None
    assert 0.9 <= elapsed <= 2.8, elapsed
    assert result["after"] == b"", result["after"]
    assert not conn.is_open


def test_close_on_a_silent_broker_with_heartbeats_waits_one_interval():
    """With heartbeat=1 the broker counts as alive until a whole interval passes without a
    byte (it would have sent two heartbeats), even with a shorter ``timeout``; then close()
    returns quickly."""
    gate = threading.Event()

    def script(side):
        side.handshake(heartbeat=1)
        gate.wait(15)

    with FakeServer(script) as srv:
        conn = connect(srv.url, heartbeat=1)
        t0 = time.monotonic()
        conn.close(timeout=0.3)
        elapsed = time.monotonic() - t0
        gate.set()
    assert 0.9 <= elapsed <= 3.0, elapsed
    assert not conn.is_open


def test_close_returns_when_the_broker_never_reads_and_the_send_buffer_is_full():
    """The broker stops reading and this client's own send buffer fills up (no other writer
    thread): connection.close cannot be written; close() must not block in sendall but give
    up after ``timeout`` without progress."""
    gate = threading.Event()

    def script(side):
        side.handshake()
        _open_channel(side)
        gate.wait(15)

    with FakeServer(script) as srv:
        conn = connect(srv.url)
        ch = conn.channel()
        tr = conn._transport
        for _ in range(200_000):
            if not tr.wait_writable(0.2):
                break
            ch.basic_publish(b"x" * 1024, routing_key="q")
        else:
            pytest.fail("the send buffer never filled up")
        t0 = time.monotonic()
        conn.close(timeout=0.5)
        elapsed = time.monotonic() - t0
        gate.set()
    assert elapsed <= 3.0, elapsed
    assert not conn.is_open
    with pytest.raises(ConnectionClosed):
        ch.basic_publish(b"x")


def test_close_max_wait_caps_a_broker_that_stays_alive_without_answering():
    """A broker that keeps sending heartbeats but never answers close-ok: ``max_wait`` ends
    the wait even though the broker is evidently alive."""
    gate = threading.Event()

    def script(side):
        side.handshake(heartbeat=0)
        while not gate.wait(0.1):
            side.sock.sendall(side.sm.send_heartbeat())

    with FakeServer(script) as srv:
        conn = connect(srv.url, heartbeat=0)
        t0 = time.monotonic()
        conn.close(timeout=0.5, max_wait=1.5)
        elapsed = time.monotonic() - t0
        gate.set()
    assert 1.4 <= elapsed <= 3.5, elapsed
    assert not conn.is_open


def test_concurrent_close_calls_wait_for_the_first():
    result = {}

    def script(side):
        side.handshake(heartbeat=0)
        for _ in range(10):  # close-ok after ~1 s, bytes flowing meanwhile
            side.sock.sendall(side.sm.send_heartbeat())
            time.sleep(0.1)
        _read_rest(side, result)
        side.send(0, spec.Connection.CloseOk())
        _after_close(side, result)

    with FakeServer(script) as srv:
        conn = connect(srv.url, heartbeat=0)
        first = threading.Thread(target=conn.close, kwargs={"timeout": 0.5})
        first.start()
        time.sleep(0.2)
        t0 = time.monotonic()
        conn.close(timeout=0.5)  # must not tear the socket down under the first call
        second = time.monotonic() - t0
        first.join(5)
        assert srv.done.wait(10)
    assert srv.error is None
    assert 0.5 <= second <= 3.0, second
    assert result["after"] == b"", result["after"]


@pytest.mark.rabbitmq
def test_publish_without_confirms_then_close_loses_nothing(rabbitmq_url, unique):
    """100,000 small persistent messages to a durable queue without confirms, then close():
    a new connection must count every one of them (RabbitMQ keeps reading the backlog after
    connection.close; closing early with an RST made it drop the unread tail)."""
    n = 100_000
    q = unique("close-backlog")
    with connect(rabbitmq_url) as admin:
        admin.channel().queue_declare(q, durable=True)
    try:
        conn = connect(rabbitmq_url)
        ch = conn.channel()
        props = BasicProperties(delivery_mode=2)
        body = b"m" * 40
        batch = [(body, "", q, props)] * 1000
        for _ in range(n // 1000):
            ch.publish_batch(batch)
        conn.close()
        assert not conn.is_open
        with connect(rabbitmq_url) as check:
            cch = check.channel()
            deadline = time.monotonic() + 10
            count = cch.queue_declare(q, passive=True).message_count
            while count != n and time.monotonic() < deadline:
                time.sleep(0.2)
                count = cch.queue_declare(q, passive=True).message_count
            assert count == n
    finally:
        with connect(rabbitmq_url) as admin:
            admin.channel().queue_delete(q)
