"""FIFO ordering, redelivery (reject/nack/recover, channel and connection close) and
acknowledgement rules (rules 28, 29, 35, 36, 37 of amqp-0-9-1-from-the-seeds.md §5)."""

from __future__ import annotations

import threading
import time

import pika
import pytest

from conformance_helpers import (Collector, broker_closes_channel, broker_closes_connection,
                                 connect, get, get_all, safe_close)


def publish(ch, q, n, prefix="m"):
    for i in range(n):
        ch.basic_publish("", q, f"{prefix}{i}".encode())


def names(msgs):
    return [m.body.decode() for m in msgs]


# --- ordering --------------------------------------------------------------------------------

def test_fifo_consume(amqp, conn, ch):
    q = amqp.queue(ch)
    publish(ch, q, 50)
    col = Collector(conn)
    ch.basic_consume(q, col, auto_ack=True)
    assert names(col.wait(50)) == [f"m{i}" for i in range(50)]
    assert not any(m.redelivered for m in col.messages)


def test_fifo_get(amqp, ch):
    q = amqp.queue(ch)
    publish(ch, q, 20)
    assert names(get_all(ch, q)) == [f"m{i}" for i in range(20)]


# --- redelivery ------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["reject", "nack", "nack-multiple"])
def test_requeue_goes_back_to_head_in_original_order(amqp, ch, how):
    # Rule 36: requeue=1 -> requeued with redelivered set. The spec's "MUST NOT go back to the
    # same client" is not honoured by RabbitMQ: the messages go back to their original position
    # (at the head, before m3/m4), in publish order, whatever order they were rejected in.
    q = amqp.queue(ch)
    publish(ch, q, 5)
    held = [get(ch, q) for _ in range(3)]
    if how == "reject":
        for m in reversed(held):
            ch.basic_reject(m.tag, requeue=True)
    elif how == "nack":
        for m in (held[1], held[2], held[0]):
            ch.basic_nack(m.tag, requeue=True)
    else:
        ch.basic_nack(held[-1].tag, multiple=True, requeue=True)
    again = get_all(ch, q)
    assert names(again) == ["m0", "m1", "m2", "m3", "m4"]
    assert [m.redelivered for m in again] == [True, True, True, False, False]


def test_requeue_to_consumer_sets_redelivered(amqp, conn, ch):
    q = amqp.queue(ch)
    publish(ch, q, 2)
    col = Collector(conn)
    ch.basic_consume(q, col)
    first = col.wait(2)[:2]
    assert [m.redelivered for m in first] == [False, False]
    ch.basic_nack(first[1].tag, multiple=True, requeue=True)
    msgs = col.wait(4)
    assert names(msgs[2:4]) == ["m0", "m1"] and all(m.redelivered for m in msgs[2:4])
    ch.basic_ack(msgs[3].tag, multiple=True)


def test_reject_without_requeue_discards(amqp, ch):
    q = amqp.queue(ch)
    publish(ch, q, 2)
    m = get(ch, q)
    ch.basic_reject(m.tag, requeue=False)
    m2 = get(ch, q)
    ch.basic_nack(m2.tag, requeue=False)
    assert get(ch, q) is None
    assert amqp.counts(q) == (0, 0)


def test_unacked_requeued_on_channel_close(amqp, conn, ch):
    # Rule 29: unacked messages of a closed channel are requeued with redelivered=true.
    q = amqp.queue(ch)
    publish(ch, q, 3)
    cch = conn.channel()
    col = Collector(conn)
    cch.basic_consume(q, col)
    assert len(col.wait(3)) == 3
    assert amqp.counts(q) == (0, 1)
    cch.basic_ack(col.messages[0].tag)
    cch.close()
    amqp.wait_counts(q, (2, 0))
    again = get_all(ch, q)
    assert names(again) == ["m1", "m2"] and all(m.redelivered for m in again)


def test_unacked_requeued_on_connection_close(amqp, ch):
    q = amqp.queue(ch)
    publish(ch, q, 3)
    other = amqp.connect()
    och = other.channel()
    held = [get(och, q) for _ in range(2)]
    assert amqp.counts(q) == (1, 0)
    assert held[0].body == b"m0"
    other.close()
    amqp.wait_counts(q, (3, 0))
    again = get_all(ch, q)
    assert names(again) == ["m0", "m1", "m2"]
    assert [m.redelivered for m in again] == [True, True, False]


def test_basic_recover_requeue_redelivers_unacked(amqp, ch):
    # Rule 37: recover redelivers every unacked message of the channel with redelivered set.
    q = amqp.queue(ch)
    publish(ch, q, 3)
    held = [get(ch, q) for _ in range(2)]
    ch.basic_ack(held[0].tag)
    ch.basic_recover(requeue=True)
    again = get_all(ch, q)
    assert names(again) == ["m1", "m2"]
    assert [m.redelivered for m in again] == [True, False]


def test_basic_recover_requeue_false_is_540(amqp, conn, ch):
    # Rule 37: requeue=0 means redeliver to the original recipient; RabbitMQ does not implement
    # it: connection.close 540 NOT_IMPLEMENTED "requeue=false".
    with broker_closes_connection(540):
        ch.basic_recover(requeue=False)


def test_consumer_recover_redelivers_to_consumer(amqp, conn, ch):
    q = amqp.queue(ch)
    publish(ch, q, 2)
    col = Collector(conn)
    ch.basic_consume(q, col)
    assert len(col.wait(2)) == 2
    ch.basic_recover(requeue=True)
    msgs = col.wait(4)
    assert names(msgs) == ["m0", "m1", "m0", "m1"]
    assert [m.redelivered for m in msgs] == [False, False, True, True]


# --- acks ------------------------------------------------------------------------------------

def test_delivery_tags_start_at_1_per_channel_and_increase(amqp, conn, ch):
    # Rule 28: tags are channel-scoped, never 0, increasing across deliver and get-ok; RabbitMQ
    # starts at 1.
    q = amqp.queue(ch)
    publish(ch, q, 4)
    other = conn.channel()
    assert get(ch, q).tag == 1
    assert get(other, q).tag == 1
    col = Collector(conn)
    ch.basic_consume(q, col)
    assert [m.tag for m in col.wait(2)] == [2, 3]


def test_ack_multiple(amqp, ch):
    q = amqp.queue(ch)
    publish(ch, q, 5)
    held = [get(ch, q) for _ in range(5)]
    ch.basic_ack(held[2].tag, multiple=True)  # acks m0..m2
    ch.close()
    amqp.wait_counts(q, (2, 0))
    c2 = amqp.channel()
    assert names(get_all(c2, q)) == ["m3", "m4"]


def test_ack_multiple_zero_acks_all(amqp, ch):
    # Rule 35: multiple=1 with tag 0 acknowledges all outstanding messages.
    q = amqp.queue(ch)
    publish(ch, q, 3)
    for _ in range(3):
        get(ch, q)
    ch.basic_ack(0, multiple=True)
    ch.close()
    amqp.wait_counts(q, (0, 0))


def test_ack_unknown_tag_is_406(amqp, ch):
    # Rule 35: a tag never delivered -> 406 PRECONDITION_FAILED "unknown delivery tag" (channel).
    q = amqp.queue(ch)
    ch.basic_ack(99)
    with broker_closes_channel(406):
        ch.queue_declare(q, passive=True)


def test_double_ack_is_406(amqp, ch):
    q = amqp.queue(ch)
    publish(ch, q, 1)
    m = get(ch, q)
    ch.basic_ack(m.tag)
    ch.basic_ack(m.tag)
    with broker_closes_channel(406):
        ch.queue_declare(q, passive=True)


def test_ack_on_other_channel_is_406(amqp, conn, ch):
    # Rule 28: tags are channel-scoped; acking on another channel -> 406 (unknown tag).
    q = amqp.queue(ch)
    publish(ch, q, 2)
    other = conn.channel()
    get(other, q)               # tag 1 on `other`
    m = get(ch, q)              # tag 1 on `ch`
    ch.basic_ack(m.tag)
    third = conn.channel()
    third.basic_ack(1)
    with broker_closes_channel(406):
        third.queue_declare(q, passive=True)
    assert ch.is_open and other.is_open


def test_ack_after_auto_ack_get_is_406(amqp, ch):
    q = amqp.queue(ch)
    publish(ch, q, 1)
    m = get(ch, q, auto_ack=True)
    ch.basic_ack(m.tag)
    with broker_closes_channel(406):
        ch.queue_declare(q, passive=True)


@pytest.mark.parametrize("how", ["reject", "nack"])
def test_reject_nack_unknown_tag_is_406(amqp, ch, how):
    q = amqp.queue(ch)
    if how == "reject":
        ch.basic_reject(7, requeue=True)
    else:
        ch.basic_nack(7, requeue=True)
    with broker_closes_channel(406):
        ch.queue_declare(q, passive=True)


def test_auto_ack_consumer_needs_no_ack(amqp, conn, ch):
    q = amqp.queue(ch)
    publish(ch, q, 3)
    col = Collector(conn)
    ch.basic_consume(q, col, auto_ack=True)
    assert len(col.wait(3)) == 3
    ch.close()
    amqp.wait_counts(q, (0, 0))


def test_persistent_message_properties_survive_requeue(amqp, ch):
    q = amqp.queue(ch, durable=True)
    ch.basic_publish("", q, b"p", pika.BasicProperties(delivery_mode=2, headers={"k": "v"}))
    m = get(ch, q)
    ch.basic_reject(m.tag, requeue=True)
    again = get(ch, q, auto_ack=True)
    assert again.properties.delivery_mode == 2 and again.headers == {"k": "v"}


def test_volume_in_order_with_prefetch_and_multiple_acks(amqp, conn, ch):
    # 2,000 messages through one consumer with prefetch 100 and an ack-multiple every 50:
    # nothing lost, nothing duplicated, publish order kept, queue empty at the end.
    q = amqp.queue(ch)
    n = 2000
    for i in range(n):
        ch.basic_publish("", q, i.to_bytes(4, "big"))
    amqp.wait_counts(q, (n, 0))
    ch.basic_qos(prefetch_count=100)
    got = []

    def on_message(_c, method, _p, body):
        got.append(int.from_bytes(body, "big"))
        if len(got) % 50 == 0:
            _c.basic_ack(method.delivery_tag, multiple=True)

    ch.basic_consume(q, on_message)
    deadline = time.monotonic() + 20
    while len(got) < n and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    assert got == list(range(n))
    amqp.wait_counts(q, (0, 1))


def test_requeued_message_goes_to_another_consumer(amqp, conn, ch):
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"x")
    held = get(ch, q)
    other_conn = amqp.connect()
    col = Collector(other_conn)
    other_conn.channel().basic_consume(q, col)
    ch.basic_reject(held.tag, requeue=True)
    (m,) = col.wait(1)
    assert m.body == b"x" and m.redelivered and m.tag == 1


def test_round_robin_between_consumers(amqp, conn, ch):
    # RabbitMQ dispatches to a queue's ready consumers in strict round-robin.
    q = amqp.queue(ch)
    a, b = Collector(conn), Collector(conn)
    ch.basic_consume(q, a, auto_ack=True)
    ch.basic_consume(q, b, auto_ack=True)
    publish(ch, q, 10)
    deadline = time.monotonic() + 5
    while len(a.messages) + len(b.messages) < 10 and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.02)
    assert names(a.messages) == [f"m{i}" for i in range(0, 10, 2)]
    assert names(b.messages) == [f"m{i}" for i in range(1, 10, 2)]


def test_ack_after_queue_deleted_is_accepted(amqp, conn, ch):
    # The delivery tag stays valid on the channel after its queue is deleted.
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"x")
    m = get(ch, q)
    conn.channel().queue_delete(q)
    ch.basic_ack(m.tag)
    ch.queue_declare("", exclusive=True)  # round trip: channel still open
    assert ch.is_open


def test_ttl_expired_while_unacked_is_dropped_on_requeue(amqp, ch):
    # A requeued message keeps its original expiry: if the TTL passed while it was unacked it
    # expires instead of being redelivered (observed on RabbitMQ 3.10.8).
    q = amqp.queue(ch, arguments={"x-message-ttl": 150})
    ch.basic_publish("", q, b"x")
    m = get(ch, q)
    time.sleep(0.3)
    ch.basic_reject(m.tag, requeue=True)
    amqp.wait_counts(q, (0, 0))
    assert get(ch, q) is None


def test_fanout_copies_are_independent(amqp, ch):
    # Each queue holds its own copy: acking in one and requeueing in the other are independent.
    x = amqp.exchange(ch, "fanout")
    q1, q2 = amqp.queue(ch), amqp.queue(ch)
    ch.queue_bind(q1, x)
    ch.queue_bind(q2, x)
    ch.basic_publish(x, "", b"copy")
    m1, m2 = get(ch, q1), get(ch, q2)
    assert (m1.body, m2.body) == (b"copy", b"copy") and (m1.tag, m2.tag) == (1, 2)
    ch.basic_ack(m1.tag)
    ch.basic_reject(m2.tag, requeue=True)
    assert get(ch, q1) is None
    again = get(ch, q2, auto_ack=True)
    assert again.body == b"copy" and again.redelivered


def test_sixteen_consumers_on_one_queue(amqp, conn, ch):
    # Rule 31: the server SHOULD allow at least 16 consumers per queue.
    q = amqp.queue(ch)
    cols = [Collector(conn) for _ in range(16)]
    for c in cols:
        ch.basic_consume(q, c, auto_ack=True)
    assert amqp.counts(q) == (0, 16)
    publish(ch, q, 32)
    deadline = time.monotonic() + 5
    while sum(len(c.messages) for c in cols) < 32 and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.02)
    assert [len(c.messages) for c in cols] == [2] * 16


def test_concurrent_publishers_and_consumers_lose_and_duplicate_nothing(amqp, ch):
    # 4 publisher connections (threads, confirms) x 300 messages into one queue while 2
    # consumer connections ack in batches: every message arrives exactly once.
    q = amqp.queue(ch)
    n_pub, per_pub = 4, 300
    received: list[bytes] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    stop = threading.Event()

    def publisher(k):
        c = connect(amqp.url)
        try:
            pch = c.channel()
            pch.confirm_delivery()
            for i in range(per_pub):
                pch.basic_publish("", q, f"{k}:{i}".encode())
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            safe_close(c)

    def consumer():
        c = connect(amqp.url)
        try:
            cch = c.channel()
            cch.basic_qos(prefetch_count=50)
            pending = []

            def on_message(_c, method, _p, body):
                with lock:
                    received.append(body)
                pending.append(method.delivery_tag)
                if len(pending) >= 25:
                    _c.basic_ack(pending[-1], multiple=True)
                    pending.clear()

            cch.basic_consume(q, on_message)
            while not stop.is_set():
                c.process_data_events(time_limit=0.05)
                if pending:
                    cch.basic_ack(pending[-1], multiple=True)
                    pending.clear()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        finally:
            safe_close(c)

    consumers = [threading.Thread(target=consumer) for _ in range(2)]
    publishers = [threading.Thread(target=publisher, args=(k,)) for k in range(n_pub)]
    for t in consumers + publishers:
        t.start()
    for t in publishers:
        t.join(30)
    deadline = time.monotonic() + 20
    while len(received) < n_pub * per_pub and time.monotonic() < deadline and not errors:
        time.sleep(0.02)
    stop.set()
    for t in consumers:
        t.join(10)
    assert not errors, errors
    expected = sorted(f"{k}:{i}".encode() for k in range(n_pub) for i in range(per_pub))
    assert sorted(received) == expected
    amqp.wait_counts(q, (0, 0))
