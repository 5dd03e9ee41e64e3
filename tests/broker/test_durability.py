"""Durability: a clean restart keeps durable things; kill -9 right after a publisher confirm
never loses a confirmed persistent message."""

from __future__ import annotations

import pika
import pytest

from spark_amqp import EmbeddedBroker


def _conn(url):
    return pika.BlockingConnection(pika.URLParameters(url))


def test_restart_keeps_durable_things(tmp_path):
    # 3.10 mode: a transient non-exclusive queue (tq) is what a restart drops; RabbitMQ 4.3
    # refuses to declare one (tests/broker/test_rabbitmq_versions.py)
    with EmbeddedBroker(data_dir=tmp_path, rabbitmq_version="3.10") as b:
        c = _conn(b.url)
        ch = c.channel()
        ch.exchange_declare("dx", "topic", durable=True)
        ch.exchange_declare("tx", "fanout", durable=False)
        ch.exchange_declare("dx2", "fanout", durable=True, arguments={"alternate-exchange": "dx"})
        ch.exchange_bind("dx", "dx2", "")
        ch.queue_declare("dq", durable=True, arguments={"x-max-priority": 5})
        ch.queue_declare("tq", durable=False)
        ch.queue_bind("dq", "dx", "a.#")
        ch.confirm_delivery()
        for i in range(10):
            ch.basic_publish("dx", "a.b", b"p%d" % i, pika.BasicProperties(delivery_mode=2, priority=i % 3))
        ch.basic_publish("dx", "a.b", b"transient")
        ch.basic_publish("", "tq", b"t", pika.BasicProperties(delivery_mode=2))
        # one message delivered and acked before the restart is gone afterwards
        m, _, body = ch.basic_get("dq")
        ch.basic_ack(m.delivery_tag)
        acked = body
        c.close()
    with EmbeddedBroker(data_dir=tmp_path, rabbitmq_version="3.10") as b:
        c = _conn(b.url)
        ch = c.channel()
        ok = ch.queue_declare("dq", durable=True, passive=True).method
        assert ok.message_count == 9
        ch.exchange_declare("dx", "topic", durable=True, passive=True)
        ch.exchange_declare("dx2", "fanout", durable=True, passive=True)
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
            ch.queue_declare("tq", passive=True)
        assert ei.value.reply_code == 404
        ch = c.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker):
            ch.exchange_declare("tx", passive=True)
        ch = c.channel()
        bodies = []
        while True:
            m, props, body = ch.basic_get("dq", auto_ack=True)
            if m is None:
                break
            bodies.append(body)
            assert props.delivery_mode == 2
        assert b"transient" not in bodies and acked not in bodies
        # priorities still apply after recovery: higher priority first
        assert sorted(bodies) == sorted(b"p%d" % i for i in range(10) if b"p%d" % i != acked)
        # bindings survived: e2e binding dx2 -> dx and dx -> dq
        ch.basic_publish("dx2", "whatever", b"via-e2e-binding-missing-key")
        ch.basic_publish("dx", "a.z", b"via-binding", pika.BasicProperties(delivery_mode=2))
        ch.queue_declare("dq", durable=True, passive=True)
        got = [ch.basic_get("dq", auto_ack=True)[2] for _ in range(1)]
        assert got == [b"via-binding"]
        c.close()


def test_kill9_after_confirm_loses_nothing(tmp_path, broker_process):
    b = broker_process(data_dir=str(tmp_path))
    c = _conn(b.url)
    ch = c.channel()
    ch.queue_declare("kq", durable=True)
    ch.queue_declare("kq2", durable=True)
    ch.exchange_declare("kx", "fanout", durable=True)
    ch.queue_bind("kq", "kx")
    ch.queue_bind("kq2", "kx")
    ch.confirm_delivery()
    n = 2000
    confirmed = []
    # pika's BlockingChannel in confirm mode waits for each ack: every message returned is confirmed
    for i in range(n):
        body = b"m%05d" % i
        ch.basic_publish("kx" if i % 2 else "", "" if i % 2 else "kq", body,
                         pika.BasicProperties(delivery_mode=2))
        confirmed.append(body)
    # consume and ack some: acked ones must not come back
    acked = []
    for _ in range(100):
        m, _, body = ch.basic_get("kq2")
        ch.basic_ack(m.delivery_tag)
        acked.append(body)
    ch.queue_declare("kq2", durable=True, passive=True)  # a round trip after the acks
    b.kill()  # SIGKILL right after the last confirm / ack round trip
    b2 = broker_process(data_dir=str(tmp_path))
    c2 = _conn(b2.url)
    ch2 = c2.channel()
    kq = []
    while (r := ch2.basic_get("kq", auto_ack=True))[0] is not None:
        kq.append(r[2])
    kq2 = []
    while (r := ch2.basic_get("kq2", auto_ack=True))[0] is not None:
        kq2.append(r[2])
    assert kq == confirmed  # every message, in order
    expected_kq2 = [x for i, x in enumerate(confirmed) if i % 2]
    # acks are not fsynced before the next reply (nor in RabbitMQ): an acked message may come
    # back after kill -9 (at-least-once), a confirmed unacked one must
    assert set(expected_kq2) - set(acked) <= set(kq2) <= set(expected_kq2)
    c2.close()


def test_kill9_with_pipelined_confirms(tmp_path, broker_process):
    """The project's client publishes in a pipeline; every acked sequence number survives."""
    from spark_amqp.client import connect
    from spark_amqp.protocol import BasicProperties

    b = broker_process(data_dir=str(tmp_path))
    with connect(b.url) as conn:
        ch = conn.channel()
        ch.queue_declare("pq", durable=True)
        ch.confirm_select()
        props = BasicProperties(delivery_mode=2)
        n = 20000
        ch.publish_batch([(b"x%06d" % i, "", "pq", props, False) for i in range(n)])
        res = ch.wait_for_confirms(timeout=60)
        assert not res.nacked
        b.kill()
    b2 = broker_process(data_dir=str(tmp_path))
    c2 = _conn(b2.url)
    ok = c2.channel().queue_declare("pq", durable=True, passive=True).method
    assert ok.message_count == n
    c2.close()


def test_clean_sigterm_flushes_and_logs(tmp_path, broker_process):
    b = broker_process(data_dir=str(tmp_path))
    c = _conn(b.url)
    ch = c.channel()
    ch.queue_declare("sq", durable=True)
    for i in range(50):
        ch.basic_publish("", "sq", b"x", pika.BasicProperties(delivery_mode=2))
    ch.queue_declare("sq", durable=True, passive=True)
    rc, log = b.terminate()
    assert rc == 0, log
    assert "shutting down" in log and "stopped" in log
    assert "accepting AMQP connection" in log
    b2 = broker_process(data_dir=str(tmp_path))
    c2 = _conn(b2.url)
    assert c2.channel().queue_declare("sq", durable=True, passive=True).method.message_count == 50
    c2.close()
