"""basic.consume / basic.cancel (rules 31, 32), server-sent cancel notifications (§3.8) and
x-single-active-consumer."""

from __future__ import annotations

import time

import pika

from conformance_helpers import Collector, broker_closes_channel, broker_closes_connection


def publish(ch, q, n, prefix="m"):
    for i in range(n):
        ch.basic_publish("", q, f"{prefix}{i}".encode())


def test_server_generated_consumer_tag(amqp, conn, ch):
    # Rule 31: an empty tag -> server-generated; RabbitMQ's start with 'amq.ctag-'.
    q = amqp.queue(ch)
    # pika generates its own tag when given none, so send an empty one through pika's
    # underlying channel (Channel.basic_consume always passes the tag it is given).
    tags = []
    ch._impl._rpc(pika.spec.Basic.Consume(queue=q, consumer_tag=""),
                  lambda frame: tags.append(frame.method.consumer_tag), [pika.spec.Basic.ConsumeOk])
    deadline = time.monotonic() + 5
    while not tags and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.02)
    assert tags and tags[0].startswith("amq.ctag-")
    assert amqp.counts(q) == (0, 1)


def test_explicit_consumer_tag_is_echoed(amqp, conn, ch):
    q = amqp.queue(ch)
    publish(ch, q, 1)
    col = Collector(conn)
    tag = ch.basic_consume(q, col, consumer_tag="my-tag")
    assert tag == "my-tag"
    assert col.wait(1)[0].method.consumer_tag == "my-tag"


def test_duplicate_consumer_tag_is_530(amqp, conn, ch):
    # Rule 31: a tag already in use on the channel -> 530 NOT_ALLOWED (connection error).
    # pika refuses duplicates client-side, so the second basic.consume is sent raw.
    q = amqp.queue(ch)
    ch.basic_consume(q, lambda *a: None, consumer_tag="dup")
    ch._impl._send_method(pika.spec.Basic.Consume(queue=q, consumer_tag="dup"))
    with broker_closes_connection(530):
        conn.process_data_events(time_limit=2)
        conn.process_data_events(time_limit=2)


def test_same_consumer_tag_on_two_channels_is_ok(amqp, conn, ch):
    # Consumer tags are scoped to the channel (§3.11).
    q = amqp.queue(ch)
    ch.basic_consume(q, lambda *a: None, consumer_tag="same")
    conn.channel().basic_consume(q, lambda *a: None, consumer_tag="same")
    assert amqp.counts(q) == (0, 2)


def test_exclusive_consume_when_queue_has_consumers_is_403(amqp, conn, ch):
    # Rule 31: exclusive while the queue already has consumers -> 403 ACCESS_REFUSED.
    q = amqp.queue(ch)
    ch.basic_consume(q, lambda *a: None)
    other = conn.channel()
    with broker_closes_channel(403):
        other.basic_consume(q, lambda *a: None, exclusive=True)


def test_consume_when_queue_has_exclusive_consumer_is_403(amqp, conn, ch):
    # RabbitMQ [ext]: consuming from a queue with an exclusive consumer -> 403.
    q = amqp.queue(ch)
    ch.basic_consume(q, lambda *a: None, exclusive=True)
    other = amqp.channel()
    with broker_closes_channel(403):
        other.basic_consume(q, lambda *a: None)


def test_exclusive_consumer_gets_everything(amqp, conn, ch):
    q = amqp.queue(ch)
    col = Collector(conn)
    ch.basic_consume(q, col, exclusive=True, auto_ack=True)
    publish(ch, q, 5)
    assert len(col.wait(5)) == 5


def test_cancel_stops_deliveries(amqp, conn, ch):
    # Rule 32: after cancel-ok, no more deliveries.
    q = amqp.queue(ch)
    col = Collector(conn)
    tag = ch.basic_consume(q, col, auto_ack=True)
    publish(ch, q, 2)
    assert len(col.wait(2)) == 2
    ch.basic_cancel(tag)
    publish(ch, q, 3, prefix="after")
    col.settle()
    assert len(col.messages) == 2
    amqp.wait_counts(q, (3, 0))


def test_cancel_unknown_tag_is_ok(amqp, ch):
    # Rule 32: RabbitMQ [ext] answers cancel-ok for an unknown consumer tag.
    ch._impl._send_method(pika.spec.Basic.Cancel(consumer_tag="never-existed"))
    q = amqp.queue(ch)  # a synchronous round trip: the channel is still open
    assert ch.is_open and amqp.counts(q) == (0, 0)


def test_cancel_with_unacked_keeps_them_unacked(amqp, conn, ch):
    # Cancelling a consumer does not requeue its unacked messages; they remain ackable.
    q = amqp.queue(ch)
    publish(ch, q, 2)
    col = Collector(conn)
    tag = ch.basic_consume(q, col)
    assert len(col.wait(2)) == 2
    ch.basic_cancel(tag)
    assert amqp.counts(q) == (0, 0)
    ch.basic_ack(col.messages[1].tag, multiple=True)
    ch.close()
    amqp.wait_counts(q, (0, 0))


def test_cancel_notification_when_queue_deleted(amqp, conn, ch):
    # §3.8 (RabbitMQ consumer_cancel_notify): deleting a queue sends basic.cancel to its
    # consumers; pika reports it through add_on_cancel_callback.
    q = amqp.queue(ch)
    cancelled = []
    ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    tag = ch.basic_consume(q, lambda *a: None)
    amqp.channel().queue_delete(q)
    deadline = time.monotonic() + 5
    while not cancelled and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.02)
    assert cancelled == [tag]
    assert ch.is_open  # the channel stays usable
    ch.queue_declare("", exclusive=True)


def test_consumers_round_robin(amqp, conn, ch):
    q = amqp.queue(ch)
    a, b = Collector(conn), Collector(conn)
    ch.basic_consume(q, a, auto_ack=True)
    ch.basic_consume(q, b, auto_ack=True)
    publish(ch, q, 10)
    deadline = time.monotonic() + 5
    while len(a.messages) + len(b.messages) < 10 and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.02)
    assert len(a.messages) + len(b.messages) == 10
    assert a.messages and b.messages  # both consumers got a share
    assert sorted(a.bodies + b.bodies) == sorted(f"m{i}".encode() for i in range(10))


# --- single active consumer ----------------------------------------------------------------------

def test_single_active_consumer(amqp, conn, ch):
    # RabbitMQ x-single-active-consumer: only the first registered consumer receives; when it
    # is cancelled the next one takes over.
    q = amqp.queue(ch, arguments={"x-single-active-consumer": True})
    a, b = Collector(conn), Collector(conn)
    ta = ch.basic_consume(q, a, auto_ack=True)
    other = conn.channel()
    other.basic_consume(q, b, auto_ack=True)
    publish(ch, q, 6)
    a.wait(6)
    b.settle()
    assert (len(a.messages), len(b.messages)) == (6, 0)
    ch.basic_cancel(ta)
    publish(ch, q, 3, prefix="n")
    assert b.wait(3) and b.bodies == [b"n0", b"n1", b"n2"]
    assert len(a.messages) == 6


def test_single_active_consumer_counts_all_consumers(amqp, conn, ch):
    # declare-ok consumer_count counts every registered consumer, active or waiting.
    q = amqp.queue(ch, arguments={"x-single-active-consumer": True})
    ch.basic_consume(q, lambda *a: None)
    ch.basic_consume(q, lambda *a: None)
    assert amqp.counts(q) == (0, 2)


def test_single_active_consumer_failover_redelivers_unacked(amqp, conn, ch):
    # When the active consumer's channel closes, its unacked messages are requeued and the
    # next consumer becomes active and receives them, in order, redelivered.
    q = amqp.queue(ch, arguments={"x-single-active-consumer": True})
    publish(ch, q, 3)
    first = conn.channel()
    a = Collector(conn)
    first.basic_consume(q, a)
    assert len(a.wait(3)) == 3
    second = conn.channel()
    b = Collector(conn)
    second.basic_consume(q, b)
    b.settle()
    assert b.messages == []
    first.close()
    msgs = b.wait(3)
    assert [(m.body, m.redelivered) for m in msgs] == [(b"m0", True), (b"m1", True), (b"m2", True)]
    amqp.wait_counts(q, (0, 1))
