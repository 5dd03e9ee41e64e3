"""Stream filtering (RabbitMQ 3.13+, issue 29): the embedded broker in its 4.3 mode skips the
chunks whose Bloom filter cannot match a consumer's ``x-stream-filter``; in its 3.10 mode,
as the local RabbitMQ 3.10.8 (tried with pika: the consumer arguments are ignored, any
``x-stream-filter-size-bytes`` is accepted), every chunk is delivered.

Semantics and sources: spark_amqp/broker/stream_filter.py (osiris ``osiris_bloom.erl``,
``rabbit_stream_queue.erl``, RabbitMQ docs "Stream Filtering").
"""

from __future__ import annotations

import pika
import pytest

from conformance_helpers import Amqp, Collector, broker_closes_channel

STREAM = {"x-queue-type": "stream"}
#: the filter value of message i (one message per chunk: pika waits for each confirm)
VALUES = ["red", "green", "blue", None]


@pytest.fixture(params=["3.10", "4.3", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def versioned(request, unique):
    """(version the broker behaves like, :class:`Amqp` helper, the embedded broker or None)."""
    if request.param == "rabbitmq":
        version, url, broker = "3.10", request.getfixturevalue("rabbitmq_url"), None
    else:
        fx = "embedded_broker_310" if request.param == "3.10" else "embedded_broker_43"
        broker = request.getfixturevalue(fx)
        version, url = request.param, broker.url
    helper = Amqp(url, unique)
    yield version, helper, broker
    helper.cleanup()


def _value(i: int) -> str | None:
    return VALUES[i % len(VALUES)]


def _fill(amqp: Amqp, n: int = 40, **args) -> tuple:
    ch = amqp.channel()
    ch.confirm_delivery()
    q = amqp.queue(ch, "filtered", durable=True, arguments={**STREAM, **args})
    for i in range(n):
        v = _value(i)
        ch.basic_publish("", q, b"m%d" % i,
                         pika.BasicProperties(headers={"x-stream-filter-value": v} if v else {}))
    return ch, q


def _read(ch, q: str, n: int, **args) -> list:
    ch.basic_qos(prefetch_count=1000)
    got = Collector(ch.connection)
    tag = ch.basic_consume(q, got, arguments={"x-stream-offset": "first", **args})
    got.wait(n)
    msgs = got.settle(0.5)   # and nothing more arrives
    ch.basic_cancel(tag)
    return sorted({m.headers["x-stream-offset"]: m for m in msgs}.items())


def _skipped(broker, q: str) -> dict:
    return broker.broker.vhosts["/"].queues[q].log.filter_stats


@pytest.mark.parametrize("arguments, wanted", [
    ({"x-stream-filter": "red"}, {"red"}),
    ({"x-stream-filter": ["red", "blue"]}, {"red", "blue"}),
    ({"x-stream-filter": "red", "x-stream-match-unfiltered": True}, {"red", None}),
])
def test_filtered_consumer_gets_the_matching_chunks_only_in_43_mode(versioned, arguments, wanted):
    version, amqp, broker = versioned
    ch, q = _fill(amqp)
    matching = [i for i in range(40) if _value(i) in wanted]
    if version == "3.10":   # RabbitMQ 3.10.8: the arguments are ignored, all 40 delivered
        got = _read(ch, q, 40, **arguments)
        assert [o for o, _ in got] == list(range(40))
        return
    got = _read(ch, q, len(matching), **arguments)
    offsets = [o for o, _ in got]
    # no false negatives: every message with a wanted value (one per chunk) is delivered
    assert set(matching) <= set(offsets)
    # the chunks that cannot match are never delivered (a Bloom false positive may let a
    # few through; with these four values in 128 bits there are none)
    assert offsets == matching
    for _, m in got:
        assert m.headers.get("x-stream-filter-value") in wanted
    stats = _skipped(broker, q)
    assert stats["chunks_skipped"] == 40 - len(matching)
    assert stats["chunks_read"] == len(matching)


def test_unfiltered_consumer_and_filter_on_a_stream_without_values(versioned):
    version, amqp, _ = versioned
    ch, q = _fill(amqp, 8)
    assert [o for o, _ in _read(ch, q, 8)] == list(range(8))   # no filter: everything
    ch2 = amqp.channel()
    ch2.confirm_delivery()
    plain = amqp.queue(ch2, "plain", durable=True, arguments=STREAM)
    for i in range(5):
        ch2.basic_publish("", plain, b"p%d" % i)
    # chunks without any filter value have the empty filter: a filtered consumer skips them
    # unless it asks for the unfiltered ones too
    none = _read(ch2, plain, 0, **{"x-stream-filter": "red"})
    assert len(none) == (5 if version == "3.10" else 0)
    every = _read(ch2, plain, 5, **{"x-stream-filter": "red", "x-stream-match-unfiltered": True})
    assert [o for o, _ in every] == list(range(5))


def test_filter_size_argument(versioned):
    version, amqp, _ = versioned
    ch = amqp.channel()
    amqp.queue(ch, "size", durable=True, arguments={**STREAM, "x-stream-filter-size-bytes": 255})
    if version == "3.10":   # RabbitMQ 3.10.8 accepts any value (it has no filters)
        amqp.queue(ch, "size", durable=True, arguments={**STREAM, "x-stream-filter-size-bytes": 300})
        return
    for bad in (15, 256, "32"):
        ch = amqp.channel()
        with broker_closes_channel(406) as e:
            amqp.queue(ch, "size", durable=True, arguments={**STREAM, "x-stream-filter-size-bytes": bad})
        assert "Invalid value for  x-stream-filter-size-bytes" in str(e.value)
