"""The same client scenarios against the embedded broker and the real RabbitMQ
(``any_broker_url``: skip-safe when either is unavailable)."""

from __future__ import annotations

import time

import pytest

from spark_amqp.client import connect
from spark_amqp.protocol import BasicProperties
from spark_amqp.protocol.errors import NotFound, PreconditionFailed


def _drain_n(ch, n, timeout=10.0):
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        batch = ch.drain(timeout=0.5)
        if batch:
            ch.basic_ack(batch[-1].delivery_tag, multiple=True)
        out += batch
    return out


def test_round_trip_with_confirms(any_broker_url, unique):
    with connect(any_broker_url) as conn:
        ch = conn.channel()
        q = ch.queue_declare(unique("rt"), exclusive=True).queue
        ch.confirm_select()
        ch.max_in_flight = 100
        props = BasicProperties(content_type="application/json", delivery_mode=2,
                                headers={"i": 1, "s": "ü"})
        seqs = ch.publish_batch([(b'{"n": %d}' % i, "", q, props, False) for i in range(1000)])
        assert seqs == list(range(1, 1001))
        assert ch.wait_for_confirms(timeout=20).acked == 1000
        ch.basic_qos(100)
        ch.basic_consume(q)
        got = _drain_n(ch, 1000)
        assert [d.body for d in got] == [b'{"n": %d}' % i for i in range(1000)]
        assert got[0].properties.headers == {"i": 1, "s": "ü"}


def test_returns_and_errors(any_broker_url, unique):
    with connect(any_broker_url) as conn:
        ch = conn.channel()
        ch.confirm_select()
        ch.basic_publish(b"r", routing_key=unique("nobody"), mandatory=True)
        res = ch.wait_for_confirms(timeout=10)
        assert res.acked == 1 and [r.reply_code for r in res.returned] == [312]
        with pytest.raises(NotFound):
            ch.queue_declare(unique("missing"), passive=True)
        ch2 = conn.channel()
        ch2.basic_ack(777)
        with pytest.raises(PreconditionFailed):
            ch2.queue_declare("", exclusive=True)
        assert conn.is_open


def test_get_reject_large_body(any_broker_url, unique):
    big = b"z" * (1 << 20)
    with connect(any_broker_url) as conn:
        ch = conn.channel()
        q = ch.queue_declare(unique("g"), exclusive=True).queue
        ch.confirm_select()
        ch.publish_batch([(big,), (b"",), (b"small",)], routing_key=q)
        ch.wait_for_confirms(timeout=20)
        d = ch.basic_get(q)
        assert d.body == big and d.message_count == 2
        ch.basic_reject(d.delivery_tag, requeue=False)
        assert ch.basic_get(q, no_ack=True).body == b""
        d = ch.basic_get(q)
        ch.basic_nack(d.delivery_tag, requeue=True)
        d2 = ch.basic_get(q, no_ack=True)
        assert d2.body == b"small" and d2.redelivered
        assert ch.basic_get(q) is None
