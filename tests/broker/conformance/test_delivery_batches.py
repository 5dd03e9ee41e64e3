"""Deliveries in bulk to one consumer (the embedded broker encodes them as one batch and keeps
unacked ones in tag-ordered lists): mixed bodies, properties and routing in one batch, and
out-of-order single acks followed by ack multiple, checked on both brokers."""

from __future__ import annotations

import pika

from conformance_helpers import Collector, broker_closes_channel, get_all


def test_mixed_messages_in_one_batch_keep_order_and_content(amqp, conn, ch):
    # bodies of 0 bytes, small and above frame-max (several body frames), changing properties
    # and routing keys, some with a (far) per-message expiry, all delivered in order as published
    x = amqp.exchange(ch, "topic")
    q = amqp.queue(ch)
    ch.queue_bind(q, x, "#")
    sent = []
    for i in range(60):
        body = [b"", b"b%d" % i, bytes([i]) * 300_000][i % 3] if i % 7 else b"s%d" % i
        props = pika.BasicProperties(content_type=("a/b" if i % 4 else None),
                                     headers=({"i": i} if i % 5 == 0 else None),
                                     expiration=("600000" if i % 6 == 0 else None))
        rk = f"rk.{i % 2}"
        ch.basic_publish(x, rk, body, props)
        sent.append((rk, body, props.content_type, props.headers))
    amqp.wait_counts(q, (60, 0))
    col = Collector(conn)
    ch.basic_consume(q, col)
    got = col.wait(60)
    assert [(m.method.routing_key, m.body, m.properties.content_type, m.properties.headers)
            for m in got] == sent
    assert [m.tag for m in got] == list(range(1, 61))
    assert not any(m.redelivered for m in got)
    ch.basic_ack(60, multiple=True)
    amqp.wait_counts(q, (0, 1))


def test_single_acks_out_of_order_then_ack_multiple(amqp, conn, ch):
    q = amqp.queue(ch)
    for i in range(20):
        ch.basic_publish("", q, b"m%d" % i)
    amqp.wait_counts(q, (20, 0))
    ch.basic_qos(prefetch_count=1000)
    col = Collector(conn)
    ch.basic_consume(q, col)
    assert len(col.wait(20)) == 20
    for tag in (5, 3, 10, 20):
        ch.basic_ack(tag)
    ch.basic_ack(8, multiple=True)           # acks 1, 2, 4, 6, 7, 8
    ch.basic_nack(12, requeue=True)          # back to the head, to this consumer
    (again,) = col.wait(21)[20:]
    assert again.body == b"m11" and again.redelivered and again.tag == 21
    ch.basic_ack(21)
    ch.close()                               # requeues 9, 11, 13..19
    amqp.wait_counts(q, (9, 0))
    left = get_all(amqp.channel(), q)
    assert [m.body for m in left] == [b"m8", b"m10"] + [b"m%d" % i for i in range(12, 19)]
    assert all(m.redelivered for m in left)


def test_ack_multiple_of_an_already_acked_tag_is_406(amqp, conn, ch):
    # RabbitMQ 3.10: the tag of an ack multiple must itself be outstanding
    q = amqp.queue(ch)
    for i in range(5):
        ch.basic_publish("", q, b"m%d" % i)
    amqp.wait_counts(q, (5, 0))
    col = Collector(conn)
    ch.basic_consume(q, col)
    col.wait(5)
    ch.basic_ack(3)
    ch.basic_ack(3, multiple=True)
    with broker_closes_channel(406):
        ch.queue_declare(q, passive=True)
    amqp.wait_counts(q, (4, 0))
