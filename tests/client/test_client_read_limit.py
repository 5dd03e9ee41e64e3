"""Back-pressure of the client (``Connection.set_read_limit``): the I/O thread stops reading the
socket while too many delivery bytes are held, keeps the connection alive with heartbeats,
still answers synchronous methods, and reads again once bytes are freed. Against the embedded
broker and RabbitMQ (``any_broker_url``: skip-safe when either is unavailable). ~6 s each."""

from __future__ import annotations

import time

import pytest

from spark_amqp.client import Delivery, connect
from spark_amqp.protocol import RawDeliveries

BODY = 64 * 1024
N = 48  # 3 MiB in the queue
LIMIT = 256 * 1024


def _wait(cond, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def _count(items) -> int:
    return sum(it.count if isinstance(it, RawDeliveries) else 1 for it in items)


def _bodies(items) -> list[bytes]:
    out = []
    for it in items:
        if isinstance(it, RawDeliveries):
            out += [m.body for m in it.decode()]
        else:
            assert isinstance(it, Delivery)
            out.append(it.body)
    return out


@pytest.fixture
def full_queue(any_broker_url, unique):
    name = unique("rl")
    with connect(any_broker_url) as conn:
        ch = conn.channel()
        ch.queue_declare(name)
        ch.confirm_select()
        ch.publish_batch([(bytes([i]) * BODY, "", name, None) for i in range(N)])
        assert ch.wait_for_confirms(timeout=30).acked == N
    yield any_broker_url, name
    with connect(any_broker_url) as conn:
        conn.channel().queue_delete(name)


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "decoded"])
def test_reading_pauses_at_the_limit_and_resumes_when_drained(full_queue, raw):
    url, q = full_queue
    # heartbeat 1 s: the pause below lasts several intervals; the connection must survive it
    with connect(url, heartbeat=1) as conn:
        conn.set_read_limit(LIMIT)
        ch = conn.channel()
        if raw:
            ch.set_raw_deliveries()
        ch.basic_consume(q, no_ack=False)  # prefetch unlimited: only the limit holds it back
        assert _wait(lambda: conn.read_paused), "reading never paused"
        held = conn.buffered_bytes()
        # (reading went on while basic.consume waited for its consume-ok: no bound yet)
        assert held >= LIMIT
        time.sleep(3.0)  # > 2 heartbeat intervals with reading paused
        assert conn.is_open and conn.read_paused
        assert conn.buffered_bytes() == held, "bytes arrived while reading was paused"
        items = ch.drain()
        assert _count(items) >= 1
        # drained: the reader reads on and stops again at the limit
        assert _wait(lambda: conn.read_pauses >= 2 and conn.read_paused)
        # the check runs before each read: one read (64 KiB) completing a message can overshoot
        assert LIMIT <= conn.buffered_bytes() <= LIMIT + 2 * BODY + 65536
        # a synchronous method is answered although deliveries are queued before its reply
        # (reading resumes while it waits)
        ok = conn.channel().queue_declare(q, passive=True)
        assert ok.message_count >= 0
        deadline = time.monotonic() + 60
        while _count(items) < N and time.monotonic() < deadline:
            items += ch.drain(timeout=0.5)
        assert _count(items) == N
        assert _bodies(items) == [bytes([i]) * BODY for i in range(N)]
        last = items[-1]
        ch.basic_ack(last.last_tag if isinstance(last, RawDeliveries) else last.delivery_tag,
                     multiple=True)
    with connect(url) as conn:
        assert conn.channel().queue_declare(q, passive=True).message_count == 0


def test_extra_bytes_count_and_resume_reading_wakes_the_reader(full_queue):
    url, q = full_queue
    held_by_app = [10 * LIMIT]
    with connect(url) as conn:
        conn.set_read_limit(LIMIT, extra=lambda: held_by_app[0])
        ch = conn.channel()
        ch.set_raw_deliveries()
        # no-wait: no consume-ok to wait for, so reading stays paused from the start
        ch.basic_consume(q, no_ack=True, consumer_tag="rl", no_wait=True)
        assert _wait(lambda: conn.read_paused)
        assert ch.drain(timeout=0.3) == [], "read although the application holds the limit"
        held_by_app[0] = 0
        conn.resume_reading()
        got = 0
        deadline = time.monotonic() + 60
        while got < N and time.monotonic() < deadline:
            got += _count(ch.drain(timeout=0.5))
        assert got == N
        conn.set_read_limit(None)
        assert not conn.read_paused or _wait(lambda: not conn.read_paused)


def test_set_read_limit_rejects_non_positive(any_broker_url):
    with connect(any_broker_url) as conn:
        with pytest.raises(ValueError, match="max_bytes"):
            conn.set_read_limit(0)
