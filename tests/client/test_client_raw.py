"""Raw-mode channels of the client (``Channel.set_raw_deliveries``) and
``basic_consume(no_wait=True)``, against the embedded broker and the real RabbitMQ
(``any_broker_url``: skip-safe when either is unavailable)."""

from __future__ import annotations

import time

import pytest

from spark_amqp.client import Delivery, connect
from spark_amqp.protocol import BasicProperties, RawDeliveries

FRAME_MAX = 4096  # bodies above 4088 bytes take several body frames


def _props(i: int) -> BasicProperties | None:
    k = i % 5
    if k == 0:
        return None
    if k == 1:
        return BasicProperties(content_type="text/plain", delivery_mode=2)
    if k == 2:
        return BasicProperties(headers={"i": i, "s": "ü", "nested": {"l": [1, "x"]}},
                               message_id=f"m-{i}", priority=i % 10)
    if k == 3:
        return BasicProperties(correlation_id="c" * 40, reply_to="r", expiration="600000",
                               timestamp=1_700_000_000 + i, type="t", app_id="a")
    return BasicProperties()


def _body(i: int) -> bytes:
    if i % 17 == 0:
        return b""
    if i % 13 == 0:
        return bytes([i % 256]) * (FRAME_MAX * 2 + 123)  # three body frames
    if i % 7 == 0:
        return b"%d:" % i + b"y" * (FRAME_MAX - 8)  # just over one frame
    return b"body-%d" % i


def _messages(n: int):
    return [(_body(i), _props(i)) for i in range(n)]


def _publish(conn, queue: str, msgs) -> None:
    ch = conn.channel()
    ch.confirm_select()
    ch.publish_batch([(b, "", queue, p) for b, p in msgs])
    assert ch.wait_for_confirms(timeout=30).acked == len(msgs)
    ch.close()


def _flatten(items):
    """(consumer_tag, tag, redelivered, exchange, routing_key, properties, body) per message,
    and the number of runs among the items."""
    out, runs = [], 0
    for it in items:
        if isinstance(it, RawDeliveries):
            runs += 1
            msgs = it.decode()
            assert len(msgs) == it.count
            tags = [m.method.delivery_tag for m in msgs]
            assert tags == list(range(it.first_tag, it.last_tag + 1))
            for m in msgs:
                d = m.method
                out.append((d.consumer_tag, d.delivery_tag, d.redelivered, d.exchange,
                            d.routing_key, m.properties, m.body))
        else:
            assert isinstance(it, Delivery), it
            out.append((it.consumer_tag, it.delivery_tag, it.redelivered, it.exchange,
                        it.routing_key, it.properties, it.body))
    return out, runs


def _drain_all(ch, n: int, timeout: float = 30.0):
    items, count = [], 0
    deadline = time.monotonic() + timeout
    while count < n and time.monotonic() < deadline:
        got = ch.drain(timeout=0.5)
        items += got
        count += sum(it.count if isinstance(it, RawDeliveries) else 1 for it in got)
    return items, count


def _last_tag(item) -> int:
    return item.last_tag if isinstance(item, RawDeliveries) else item.delivery_tag


@pytest.fixture
def queue(any_broker_url, unique):
    """A fresh durable-less queue on the broker, deleted afterwards."""
    name = unique("raw")
    with connect(any_broker_url) as conn:
        conn.channel().queue_declare(name)
    yield any_broker_url, name
    with connect(any_broker_url) as conn:
        conn.channel().queue_delete(name)


def _ready(url: str, queue: str) -> int:
    with connect(url) as conn:
        return conn.channel().queue_declare(queue, passive=True).message_count


def test_raw_consume_matches_published_then_redelivered_and_acked(queue):
    url, q = queue
    n = 240
    msgs = _messages(n)
    with connect(url, frame_max=FRAME_MAX) as conn:
        assert conn.frame_max == FRAME_MAX
        _publish(conn, q, msgs)
        expected = [("raw-1", i + 1, False, "", q, p if p is not None else BasicProperties(), b)
                    for i, (b, p) in enumerate(msgs)]

        ch = conn.channel()
        ch.set_raw_deliveries()
        assert ch.basic_consume(q, consumer_tag="raw-1") == "raw-1"
        items, count = _drain_all(ch, n)
        got, runs = _flatten(items)
        assert count == n and got == expected
        assert runs >= 1, "no RawDeliveries run at all: raw mode did not engage"
        assert any(isinstance(it, RawDeliveries) and it.count > 1 for it in items)
        # messages of several body frames are cut into runs too
        assert any(len(m.body) > FRAME_MAX - 8 for it in items
                   if isinstance(it, RawDeliveries) for m in it.decode())
        assert ch.drain() == []
        # not acked: closing the channel requeues everything
        ch.close()

        ch2 = conn.channel()
        ch2.set_raw_deliveries()
        ch2.basic_consume(q, consumer_tag="raw-2")
        items, count = _drain_all(ch2, n)
        got, _ = _flatten(items)
        assert count == n
        assert [g[1] for g in got] == list(range(1, n + 1))
        assert all(g[2] is True for g in got), "requeued messages must come back redelivered"
        assert [(g[5], g[6]) for g in got] == [(e[5], e[6]) for e in expected]
        ch2.basic_ack(_last_tag(items[-1]), multiple=True)
        ch2.close()  # close-ok comes after the broker processed the ack
    assert _ready(url, q) == 0


def test_ack_in_steps_by_run_last_tag(queue):
    url, q = queue
    n = 150
    with connect(url) as conn:
        _publish(conn, q, [(b"m%d" % i, None) for i in range(n)])
        ch = conn.channel()
        ch.set_raw_deliveries()
        ch.basic_consume(q, consumer_tag="steps")
        items, count = _drain_all(ch, n)
        assert count == n
        # ack all but the last item, one item at a time (multiple=True by the item's last tag)
        for it in items[:-1]:
            ch.basic_ack(_last_tag(it), multiple=True)
        last = items[-1]
        ch.close()  # the last item's messages are requeued
        left = last.count if isinstance(last, RawDeliveries) else 1
    assert _ready(url, q) == left
    with connect(url) as conn:
        ch = conn.channel()
        ch.set_raw_deliveries()
        ch.basic_consume(q, consumer_tag="rest")
        items, count = _drain_all(ch, left)
        got, _ = _flatten(items)
        assert [g[6] for g in got] == [b"m%d" % i for i in range(n - left, n)]
        ch.basic_ack(0, multiple=True)
        ch.close()
    assert _ready(url, q) == 0


def test_no_wait_consume_delivers(queue):
    url, q = queue
    n = 60
    with connect(url, frame_max=FRAME_MAX) as conn:
        msgs = _messages(n)
        _publish(conn, q, msgs)
        ch = conn.channel()
        ch.set_raw_deliveries()
        with pytest.raises(ValueError, match="consumer_tag"):
            ch.basic_consume(q, no_wait=True)
        assert ch.basic_consume(q, consumer_tag="nw", no_wait=True) == "nw"
        items, count = _drain_all(ch, n)
        got, _ = _flatten(items)
        assert count == n
        assert [g[0] for g in got] == ["nw"] * n
        assert [g[6] for g in got] == [b for b, _ in msgs]
        ch.basic_ack(_last_tag(items[-1]), multiple=True)
        # the channel still works after the no-wait consume (no consume-ok left over)
        assert ch.queue_declare(q, passive=True).consumer_count == 1
        ch.close()
    assert _ready(url, q) == 0


def test_no_wait_consume_on_missing_queue_fails_later(any_broker_url, unique):
    from spark_amqp.protocol.errors import NotFound

    with connect(any_broker_url) as conn:
        ch = conn.channel()
        ch.set_raw_deliveries()
        ch.basic_consume(unique("missing"), consumer_tag="x", no_wait=True)  # returns at once
        with pytest.raises(NotFound):
            ch.queue_declare("", exclusive=True)
        assert conn.is_open


def test_reused_channel_number_is_not_raw(queue):
    url, q = queue
    with connect(url) as conn:
        _publish(conn, q, [(b"r%d" % i, None) for i in range(80)])
        ch = conn.channel()
        number = ch.channel_number
        ch.set_raw_deliveries()
        ch.close()
        again = conn.channel(number)
        assert again.channel_number == number
        again.basic_consume(q, consumer_tag="plain")
        items, count = _drain_all(again, 80)
        assert count == 80 and all(type(it) is Delivery for it in items)
        assert [d.body for d in items] == [b"r%d" % i for i in range(80)]
        again.basic_ack(items[-1].delivery_tag, multiple=True)
        again.close()
    assert _ready(url, q) == 0


def test_raw_mode_can_be_turned_off(queue):
    url, q = queue
    with connect(url) as conn:
        _publish(conn, q, [(b"o%d" % i, None) for i in range(50)])
        ch = conn.channel()
        ch.set_raw_deliveries()
        ch.set_raw_deliveries(False)
        ch.basic_consume(q, consumer_tag="off")
        items, count = _drain_all(ch, 50)
        assert count == 50 and all(type(it) is Delivery for it in items)
        ch.basic_ack(0, multiple=True)
        ch.close()


@pytest.mark.parametrize("no_wait", [False, True])
def test_raw_channel_callback_consumer_gets_decoded_deliveries(queue, no_wait):
    url, q = queue
    n = 120
    msgs = _messages(n)
    with connect(url, frame_max=FRAME_MAX) as conn:
        _publish(conn, q, msgs)
        ch = conn.channel()
        ch.set_raw_deliveries()
        got: list = []
        ch.basic_consume(q, consumer_tag="cb", callback=got.append, no_wait=no_wait)
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(got) == n
        assert all(type(d) is Delivery for d in got)
        assert [d.delivery_tag for d in got] == list(range(1, n + 1))
        assert [(d.body, d.properties) for d in got] == [
            (b, p if p is not None else BasicProperties()) for b, p in msgs]
        assert all(d.consumer_tag == "cb" and d.channel_number == ch.channel_number
                   for d in got)
        assert ch.drain() == []
        ch.basic_ack(n, multiple=True)
        ch.close()
    assert _ready(url, q) == 0


def test_raw_channel_with_a_callback_and_a_buffered_consumer(queue, unique):
    """With any callback consumer on the channel, runs are decoded: the buffered consumer's
    messages come out of drain as Delivery objects."""
    url, q = queue
    q2 = unique("raw2")
    with connect(url) as conn:
        try:
            conn.channel().queue_declare(q2)
            _publish(conn, q, [(b"a%d" % i, None) for i in range(40)])
            _publish(conn, q2, [(b"b%d" % i, None) for i in range(40)])
            ch = conn.channel()
            ch.set_raw_deliveries()
            got: list = []
            ch.basic_consume(q, consumer_tag="with-cb", callback=got.append)
            ch.basic_consume(q2, consumer_tag="buffered")
            items, count = _drain_all(ch, 40)
            deadline = time.monotonic() + 30
            while len(got) < 40 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert count == 40 and all(type(it) is Delivery for it in items)
            assert [d.body for d in items] == [b"b%d" % i for i in range(40)]
            assert [d.body for d in got] == [b"a%d" % i for i in range(40)]
            assert sorted(d.delivery_tag for d in items + got) == list(range(1, 81))
            ch.basic_ack(0, multiple=True)
            ch.close()
        finally:
            conn.channel().queue_delete(q2)
