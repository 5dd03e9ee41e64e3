"""The client against the real RabbitMQ (skipped when unreachable; see tests/conftest.py).

Every test uses unique names and deletes what it declares. Broker behaviours asserted here
were observed on RabbitMQ 3.10.8 on this machine.
"""

from __future__ import annotations

import threading
import time

import pytest

from spark_amqp.client import (
    ChannelClosed, ConnectionClosed, Delivery, PublishNacked, ReturnedMessage, connect,
)
from spark_amqp.protocol import BasicProperties
from spark_amqp.protocol.errors import (
    AccessRefused, NotFound, PreconditionFailed, ResourceLocked,
)

pytestmark = pytest.mark.rabbitmq


@pytest.fixture
def conn(rabbitmq_url):
    c = connect(rabbitmq_url)
    yield c
    c.close()


@pytest.fixture
def queue(conn, unique):
    """A fresh non-exclusive queue (name), deleted afterwards."""
    name = unique("q")
    ch = conn.channel()
    ch.queue_declare(name)
    ch.close()
    yield name
    with connect(conn.params) as c2:
        c2.channel().queue_delete(name)


def _drain_n(ch, n, timeout=10.0, ack=False):
    """Drain until ``n`` deliveries (or timeout); ``ack``: multiple-ack each batch."""
    out: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        batch = ch.drain(timeout=0.5)
        if ack and batch:
            ch.basic_ack(batch[-1].delivery_tag, multiple=True)
        out += batch
    return out


def test_declare_passive_and_counts(conn, queue):
    ch = conn.channel()
    ok = ch.queue_declare(queue, passive=True)
    assert ok == (queue, 0, 0)
    gen = ch.queue_declare("", exclusive=True)
    assert gen.queue.startswith("amq.gen-")


def test_publish_confirm_consume_ack(conn, queue):
    ch = conn.channel()
    ch.confirm_select()
    props = BasicProperties(content_type="text/plain", delivery_mode=2, message_id="m",
                            headers={"k": "v", "n": 7}, timestamp=1700000000)
    seqs = [ch.basic_publish(b"body-%d" % i, routing_key=queue, properties=props) for i in range(200)]
    assert seqs == list(range(1, 201))
    res = ch.wait_for_confirms(timeout=10)
    assert res.acked == 200 and res.nacked == [] and res.returned == []
    assert ch.queue_declare(queue, passive=True).message_count == 200
    ch.basic_qos(50)
    tag = ch.basic_consume(queue)
    got = _drain_n(ch, 200, ack=True)
    assert [d.body for d in got] == [b"body-%d" % i for i in range(200)]
    d = got[0]
    assert d.consumer_tag == tag and d.routing_key == queue and d.exchange == ""
    assert d.channel_number == ch.channel_number and not d.redelivered and d.message_count is None
    assert d.properties.headers == {"k": "v", "n": 7} and d.properties.delivery_mode == 2
    assert d.properties.timestamp == 1700000000
    ch.basic_cancel(tag)
    assert ch.queue_declare(queue, passive=True) == (queue, 0, 0)


def test_prefetch_limits_buffer(conn, queue):
    ch = conn.channel()
    ch.confirm_select()
    ch.publish_batch([(b"x",)] * 20, routing_key=queue)
    ch.wait_for_confirms(timeout=10)
    ch.basic_qos(5)
    ch.basic_consume(queue)
    time.sleep(0.3)
    assert ch.pending_count() == 5
    first = ch.drain(max_count=2)
    assert len(first) == 2 and ch.pending_count() == 3
    ch.basic_ack(first[-1].delivery_tag, multiple=True)  # frees 2 slots
    assert len(_drain_n(ch, 5, timeout=3)) == 5


def test_reject_and_nack(conn, queue):
    ch = conn.channel()
    ch.confirm_select()
    ch.publish_batch([(b"a",), (b"b",), (b"c",)], routing_key=queue)
    ch.wait_for_confirms(timeout=10)
    ch.basic_qos(10)
    ch.basic_consume(queue)
    a, b, c = _drain_n(ch, 3)
    ch.basic_reject(a.delivery_tag, requeue=False)   # dropped
    ch.basic_nack(c.delivery_tag, multiple=True, requeue=True)  # b and c back
    again = _drain_n(ch, 2)
    assert sorted(d.body for d in again) == [b"b", b"c"] and all(d.redelivered for d in again)
    ch.basic_reject(again[0].delivery_tag, requeue=True)
    third = _drain_n(ch, 1)
    assert third[0].redelivered
    ch.basic_ack(0, multiple=True)  # tag 0 + multiple: everything outstanding
    ch.close()
    assert conn.channel().queue_declare(queue, passive=True).message_count == 0


def test_mandatory_unroutable_returned_before_ack(conn, unique):
    ch = conn.channel()
    ch.confirm_select()
    seen = []
    ch.on_return = lambda r: seen.append((r, ch.in_flight))
    ch.basic_publish(b"lost", routing_key=unique("nobody"), mandatory=True,
                     properties=BasicProperties(message_id="r1"))
    res = ch.wait_for_confirms(timeout=10)
    assert res.acked == 1 and res.nacked == []  # RabbitMQ acks an unroutable message
    [r] = res.returned
    assert isinstance(r, ReturnedMessage)
    assert (r.reply_code, r.reply_text, r.body) == (312, "NO_ROUTE", b"lost")
    assert r.properties.message_id == "r1"
    # basic.return arrived while the publish was still unconfirmed (RabbitMQ confirms docs)
    assert seen and seen[0][1] == 1
    # not mandatory: silently dropped, still acked
    ch.basic_publish(b"dropped", routing_key=unique("nobody"))
    assert ch.wait_for_confirms(timeout=10) == (1, [], [])


def test_returns_without_confirm_mode(conn, unique):
    ch = conn.channel()
    ch.basic_publish(b"a", routing_key=unique("nobody"), mandatory=True)
    ch.queue_declare("", exclusive=True)  # a round trip: the return arrived before its reply
    [r] = ch.take_returned()
    assert r.reply_code == 312 and r.body == b"a"
    assert ch.take_returned() == []
    got = []
    ch.on_return = got.append
    ch.basic_publish(b"b", routing_key=unique("nobody"), mandatory=True)
    ch.queue_declare("", exclusive=True)
    assert [x.body for x in got] == [b"b"] and ch.take_returned() == []


def test_ack_unknown_delivery_tag_is_406(conn, queue):
    ch = conn.channel()
    ch.basic_ack(12345)
    with pytest.raises(PreconditionFailed) as ei:
        ch.queue_declare(queue, passive=True)
    err = ei.value
    assert err.reply_code == 406 and "unknown delivery tag 12345" in err.reply_text
    assert err.channel_level and not ch.is_open
    with pytest.raises(PreconditionFailed):  # later calls raise it again
        ch.basic_publish(b"x", routing_key=queue)
    with pytest.raises(PreconditionFailed):
        ch.drain()
    assert conn.is_open
    assert conn.channel().queue_declare(queue, passive=True).queue == queue


def test_missing_queue_is_404(conn, unique):
    ch = conn.channel()
    name = unique("missing")
    with pytest.raises(NotFound) as ei:
        ch.queue_declare(name, passive=True)
    assert ei.value.reply_code == 404 and name in ei.value.reply_text
    assert (ei.value.class_id, ei.value.method_id) == (50, 10)
    ch2 = conn.channel()
    with pytest.raises(NotFound):
        ch2.basic_consume(name)
    ch3 = conn.channel()
    with pytest.raises(NotFound):
        ch3.basic_get(name)


def test_publish_to_missing_exchange_raises_from_wait(conn, unique):
    ch = conn.channel()
    ch.confirm_select()
    ch.basic_publish(b"x", exchange=unique("noex"), routing_key="k")
    with pytest.raises(NotFound, match="no exchange"):
        ch.wait_for_confirms(timeout=10)


def test_wrong_password_is_403(rabbitmq_url):
    bad = rabbitmq_url.replace("guest:guest@", "guest:wrong-password@")
    with pytest.raises(AccessRefused) as ei:
        connect(bad)
    assert ei.value.reply_code == 403 and "ACCESS_REFUSED" in ei.value.reply_text


def test_exclusive_queue_locked_for_other_connection(conn, rabbitmq_url, unique):
    name = conn.channel().queue_declare(unique("excl"), exclusive=True).queue
    with connect(rabbitmq_url) as other:
        with pytest.raises(ResourceLocked) as ei:
            other.channel().queue_declare(name, passive=True)
        assert ei.value.reply_code == 405


def test_large_and_empty_bodies(rabbitmq_url, queue):
    big = bytes(range(256)) * 4096  # 1 MiB: split into body frames of frame_max - 8
    for frame_max in (131072, 4096):
        with connect(rabbitmq_url, frame_max=frame_max) as c:
            assert c.frame_max == frame_max
            ch = c.channel()
            ch.confirm_select()
            ch.basic_publish(big, routing_key=queue)
            ch.basic_publish(b"", routing_key=queue, properties=BasicProperties(type="empty"))
            ch.publish_batch([(big[:frame_max * 2 + 3],), (b"",)], routing_key=queue)
            ch.wait_for_confirms(timeout=30)
            d1 = ch.basic_get(queue, no_ack=True)
            assert d1.body == big and d1.message_count == 3
            d2 = ch.basic_get(queue, no_ack=True)
            assert d2.body == b"" and d2.properties.type == "empty"
            assert ch.basic_get(queue, no_ack=True).body == big[:frame_max * 2 + 3]
            assert ch.basic_get(queue, no_ack=True).body == b""
            assert ch.basic_get(queue) is None


def test_unicode_names_and_headers(conn, unique):
    ch = conn.channel()
    ex = unique("exchange-ü-日本")
    q = unique("queue-é-🚀")
    rk = "routing.ключ.✓"
    ch.exchange_declare(ex, "topic")
    ch.queue_declare(q)
    try:
        ch.queue_bind(q, ex, "routing.*.✓")
        ch.confirm_select()
        ch.basic_publish("текст".encode(), exchange=ex, routing_key=rk,
                         properties=BasicProperties(headers={"ключ": "значение", "emoji": "🚀"}))
        ch.wait_for_confirms(timeout=10)
        d = ch.basic_get(q, no_ack=True)
        assert d.body.decode() == "текст" and d.routing_key == rk and d.exchange == ex
        assert d.properties.headers == {"ключ": "значение", "emoji": "🚀"}
        ch.queue_unbind(q, ex, "routing.*.✓")
    finally:
        ch.queue_delete(q)
        ch.exchange_delete(ex)


def test_exchanges_bind_unbind_delete(conn, unique):
    ch = conn.channel()
    src, dst, q = unique("src"), unique("dst"), unique("q")
    ch.exchange_declare(src, "fanout")
    ch.exchange_declare(dst, "direct", durable=False, auto_delete=False)
    ch.exchange_declare(dst, "direct", passive=True)
    ch.queue_declare(q, exclusive=True)
    ch.exchange_bind(dst, src)
    ch.queue_bind(q, dst, "k")
    ch.confirm_select()
    ch.basic_publish(b"via-e2e", exchange=src, routing_key="k")
    ch.wait_for_confirms(timeout=10)
    assert ch.basic_get(q, no_ack=True).body == b"via-e2e"
    ch.exchange_unbind(dst, src)
    ch.basic_publish(b"not-routed", exchange=src, routing_key="k")
    ch.wait_for_confirms(timeout=10)
    assert ch.basic_get(q) is None
    with pytest.raises(PreconditionFailed):  # redeclare with another type
        ch.exchange_declare(dst, "fanout")
    ch = conn.channel()
    ch.exchange_delete(src)
    ch.exchange_delete(dst)
    with pytest.raises(NotFound):
        ch.exchange_declare(dst, passive=True)


def test_purge_and_delete_counts(conn, unique):
    ch = conn.channel()
    q = unique("q")
    ch.queue_declare(q)
    ch.confirm_select()
    ch.publish_batch([(b"x",)] * 7, routing_key=q)
    ch.wait_for_confirms(timeout=10)
    assert ch.queue_purge(q) == 7
    ch.publish_batch([(b"x",)] * 3, routing_key=q)
    ch.wait_for_confirms(timeout=10)
    with pytest.raises(PreconditionFailed):
        ch.queue_delete(q, if_empty=True)
    ch = conn.channel()
    assert ch.queue_delete(q) == 3


def test_basic_get_empty_and_message_count(conn, queue):
    ch = conn.channel()
    assert ch.basic_get(queue) is None
    ch.confirm_select()
    ch.publish_batch([(b"1",), (b"2",)], routing_key=queue)
    ch.wait_for_confirms(timeout=10)
    d = ch.basic_get(queue)
    assert d.body == b"1" and d.message_count == 1 and d.consumer_tag == ""
    ch.basic_ack(d.delivery_tag)
    ch.basic_recover(requeue=True)


def test_callback_consumer_and_cancel(conn, queue):
    ch = conn.channel()
    got, threads = [], set()
    done = threading.Event()

    def on_message(d):
        got.append(d.body)
        threads.add(threading.current_thread().name)
        ch.basic_ack(d.delivery_tag)  # async methods are fine in the I/O thread
        if len(got) == 50:
            done.set()

    tag = ch.basic_consume(queue, callback=on_message)
    pub = conn.channel()
    pub.confirm_select()
    pub.publish_batch([(b"%d" % i,) for i in range(50)], routing_key=queue)
    pub.wait_for_confirms(timeout=10)
    assert done.wait(10)
    assert got == [b"%d" % i for i in range(50)]
    assert all(n.startswith("spark-amqp-io") for n in threads)
    ch.basic_cancel(tag)
    pub.basic_publish(b"after-cancel", routing_key=queue)
    pub.wait_for_confirms(timeout=10)
    time.sleep(0.2)
    assert len(got) == 50 and ch.pending_count() == 0


def test_sync_call_from_callback_is_refused(conn, queue):
    ch = conn.channel()
    errors, done = [], threading.Event()

    def on_message(d):
        try:
            ch.queue_declare(queue, passive=True)
        except RuntimeError as exc:
            errors.append(exc)
        done.set()

    ch.basic_consume(queue, no_ack=True, callback=on_message)
    conn.channel().basic_publish(b"x", routing_key=queue)
    assert done.wait(10)
    assert errors and "I/O thread" in str(errors[0])


def test_server_cancel_notification(conn, unique):
    ch = conn.channel()
    q = unique("q")
    ch.queue_declare(q)
    cancelled = []
    ch.on_cancel = cancelled.append
    tag = ch.basic_consume(q)
    conn.channel().queue_delete(q)
    deadline = time.monotonic() + 5
    while not cancelled and time.monotonic() < deadline:
        ch.drain(timeout=0.1)
    assert cancelled == [tag] and tag in ch.cancelled_consumers
    assert ch.is_open
    ch.basic_cancel(tag)  # RabbitMQ answers cancel-ok for a consumer it already cancelled


def test_callback_exception_does_not_kill_the_connection(conn, queue, caplog):
    ch = conn.channel()
    seen, done = [], threading.Event()

    def on_message(d):
        seen.append(d.body)
        if d.body == b"boom":
            raise ValueError("user bug")
        done.set()

    ch.basic_consume(queue, no_ack=True, callback=on_message)
    pub = conn.channel()
    pub.basic_publish(b"boom", routing_key=queue)
    pub.basic_publish(b"fine", routing_key=queue)
    assert done.wait(10)
    assert seen == [b"boom", b"fine"] and conn.is_open and ch.is_open
    assert any(r.exc_info and "user bug" in str(r.exc_info[1])
               for r in caplog.records if r.name == "spark_amqp.client")


def test_transactions(conn, queue):
    ch = conn.channel()
    ch.tx_select()
    ch.basic_publish(b"rolled-back", routing_key=queue)
    ch.tx_rollback()
    ch.basic_publish(b"committed", routing_key=queue)
    ch.tx_commit()
    d = ch.basic_get(queue)
    assert d.body == b"committed"
    ch.basic_ack(d.delivery_tag)
    ch.tx_commit()
    assert ch.basic_get(queue) is None
    with pytest.raises(PreconditionFailed):  # confirm mode on a transactional channel
        ch.confirm_select()


def test_max_in_flight_window(conn, queue):
    ch = conn.channel()
    ch.confirm_select()
    ch.max_in_flight = 8
    peak = 0
    for i in range(300):
        ch.basic_publish(b"w", routing_key=queue)
        peak = max(peak, ch.in_flight)
    seqs = ch.publish_batch([(b"b",)] * 500, routing_key=queue)
    assert seqs == list(range(301, 801))
    res = ch.wait_for_confirms(timeout=20)
    assert peak <= 8 and res.acked == 800 and ch.in_flight == 0
    assert conn.channel().queue_purge(queue) == 800


def test_broker_nack_raises_publish_nacked(conn, unique):
    ch = conn.channel()
    q = unique("full")
    ch.queue_declare(q, exclusive=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.confirm_select()
    ch.publish_batch([(b"1",), (b"2",), (b"3",)], routing_key=q)
    with pytest.raises(PublishNacked) as ei:
        ch.wait_for_confirms(timeout=10)
    assert ei.value.result.acked == 1 and ei.value.result.nacked == [2, 3]
    assert ch.wait_for_confirms(timeout=1) == (0, [], [])  # reset after reporting


def test_threads_publish_on_own_channels(conn, queue):
    n_threads, per = 4, 500
    errors = []

    def worker(i):
        try:
            ch = conn.channel()
            ch.confirm_select()
            ch.max_in_flight = 100
            for j in range(per):
                ch.basic_publish(b"%d:%d" % (i, j), routing_key=queue)
            ch.wait_for_confirms(timeout=30)
            ch.close()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    consumer = conn.channel()
    consumer.basic_consume(queue)  # no prefetch limit: acked at the end, from another thread
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    got = _drain_n(consumer, n_threads * per, timeout=30)
    for t in threads:
        t.join(30)
    assert not errors
    assert len(got) == n_threads * per
    assert {d.channel_number for d in got} == {consumer.channel_number}
    for i in range(n_threads):  # per-publisher order kept
        mine = [d.body for d in got if d.body.startswith(b"%d:" % i)]
        assert mine == [b"%d:%d" % (i, j) for j in range(per)]
    # ack from another thread than the one that drained
    t = threading.Thread(target=consumer.basic_ack, args=(got[-1].delivery_tag, True))
    t.start()
    t.join()
    consumer.close()
    assert conn.channel().queue_declare(queue, passive=True).message_count == 0


def test_clean_close_leaves_no_threads(rabbitmq_url, queue):
    before = {t for t in threading.enumerate() if t.name.startswith("spark-amqp-io")}
    for _ in range(3):
        with connect(rabbitmq_url) as c:
            with c.channel() as ch:
                ch.basic_consume(queue)
            assert not ch.is_open
            with pytest.raises(ChannelClosed):
                ch.basic_publish(b"x")
        assert not c.is_open
        c.close()  # idempotent
        with pytest.raises(ConnectionClosed):
            c.channel()
    time.sleep(0.1)
    after = {t for t in threading.enumerate() if t.name.startswith("spark-amqp-io")}
    assert after <= before


def test_channel_numbers_are_reused(conn):
    chans = [conn.channel() for _ in range(5)]
    assert [c.channel_number for c in chans] == [1, 2, 3, 4, 5]
    chans[1].close()
    assert conn.channel().channel_number == 2
    assert conn.channel(channel_number=42).channel_number == 42
    with pytest.raises(ValueError):
        conn.channel(channel_number=42)


def test_server_properties_and_negotiation(conn):
    assert conn.server_properties["product"] == "RabbitMQ"
    assert conn.server_properties["capabilities"]["publisher_confirms"] is True
    assert conn.heartbeat == 60 and conn.frame_max == 131072  # RabbitMQ's defaults
