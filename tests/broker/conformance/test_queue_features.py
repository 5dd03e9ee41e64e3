"""RabbitMQ queue arguments (extensions, not in the AMQP spec; behaviour as observed on
RabbitMQ 3.10.8): x-message-ttl / per-message expiration, x-expires, dead-lettering with the
x-death header, x-max-length / x-max-length-bytes with x-overflow, x-max-priority, quorum
queues with x-delivery-limit."""

from __future__ import annotations

import time

import pika
import pika.exceptions
import pytest

from conformance_helpers import Collector, broker_closes_channel, broker_closes_connection, get, get_all


def publish(ch, q, n, prefix="m", properties=None, exchange=""):
    for i in range(n):
        ch.basic_publish(exchange, q, f"{prefix}{i}".encode(), properties)


def dead_letter_setup(amqp, ch, **queue_args):
    """A source queue dead-lettering through a fresh fanout DLX into a capture queue."""
    dlx = amqp.exchange(ch, "fanout", prefix="dlx")
    dlq = amqp.queue(ch, prefix="dlq")
    ch.queue_bind(dlq, dlx)
    src = amqp.queue(ch, prefix="src", arguments={"x-dead-letter-exchange": dlx, **queue_args})
    return src, dlx, dlq


def wait_get(amqp, ch, q, n=1):
    """Poll basic.get until ``n`` messages were fetched (auto-ack)."""
    out = []
    amqp.wait_for(lambda: (out.extend(get_all(ch, q)) or len(out) >= n),
                  what=f"{n} message(s) in {q}")
    return out


def assert_x_death(msg, reason, queue, exchange, routing_keys, count=1):
    deaths = msg.headers["x-death"]
    assert isinstance(deaths, list) and len(deaths) >= 1
    d = deaths[0]
    assert d["reason"] == reason
    assert d["queue"] == queue
    assert d["exchange"] == exchange
    assert list(d["routing-keys"]) == routing_keys
    assert d["count"] == count
    assert "time" in d
    assert msg.headers["x-first-death-reason"] == reason
    assert msg.headers["x-first-death-queue"] == queue
    assert msg.headers["x-first-death-exchange"] == exchange


# --- TTL -------------------------------------------------------------------------------------

def test_queue_message_ttl_expires(amqp, ch):
    q = amqp.queue(ch, arguments={"x-message-ttl": 100})
    publish(ch, q, 3)
    amqp.wait_counts(q, (0, 0))


def test_queue_message_ttl_keeps_fresh_messages(amqp, ch):
    q = amqp.queue(ch, arguments={"x-message-ttl": 60_000})
    publish(ch, q, 2)
    assert [m.body for m in get_all(ch, q)] == [b"m0", b"m1"]


def test_message_ttl_zero_expires_unless_deliverable(amqp, conn, ch):
    # x-message-ttl=0: expire at once unless it can be delivered immediately to a consumer.
    q = amqp.queue(ch, arguments={"x-message-ttl": 0})
    publish(ch, q, 1, prefix="dropped")
    amqp.wait_counts(q, (0, 0))
    col = Collector(conn)
    ch.basic_consume(q, col, auto_ack=True)
    publish(ch, q, 1, prefix="delivered")
    assert col.wait(1) and col.bodies == [b"delivered0"]


def test_per_message_expiration(amqp, ch):
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"short", pika.BasicProperties(expiration="100"))
    ch.basic_publish("", q, b"long", pika.BasicProperties(expiration="60000"))
    ch.basic_publish("", q, b"none")
    # RabbitMQ expires per-message TTLs when they reach the head; "short" is at the head.
    amqp.wait_counts(q, (2, 0))
    assert [m.body for m in get_all(ch, q)] == [b"long", b"none"]


def test_per_message_expiration_lower_than_queue_ttl_wins(amqp, ch):
    q = amqp.queue(ch, arguments={"x-message-ttl": 60_000})
    ch.basic_publish("", q, b"short", pika.BasicProperties(expiration="50"))
    amqp.wait_counts(q, (0, 0))


def routable(ch, q) -> bool:
    """Whether the default exchange still routes to ``q`` (a mandatory publish on a confirm
    channel), a probe that, unlike a passive queue.declare or basic.get, does not count as a
    use of the queue and so does not renew its x-expires lease."""
    try:
        ch.basic_publish("", q, b"probe", mandatory=True)
        return True
    except pika.exceptions.UnroutableError:
        return False


def test_queue_expires_unused_queue(amqp, ch):
    # x-expires: an unused queue (no consumers, no basic.get, no redeclare) is deleted.
    # (A passive declare renews the lease on RabbitMQ, so existence is probed by publishing.)
    q = amqp.queue(ch, arguments={"x-expires": 200})
    probe = amqp.channel()
    probe.confirm_delivery()
    assert routable(probe, q)
    amqp.wait_for(lambda: not routable(probe, q), interval=0.05, what="x-expires deletion")
    assert amqp.counts(q) is None


def test_queue_expires_not_while_consumed(amqp, conn, ch):
    q = amqp.queue(ch, arguments={"x-expires": 100})
    tag = ch.basic_consume(q, lambda *a: None)
    time.sleep(0.3)  # a queue with a consumer is in use: it must outlive its x-expires
    assert amqp.counts(q) == (0, 1)
    ch.basic_cancel(tag)
    probe = amqp.channel()
    probe.confirm_delivery()
    amqp.wait_for(lambda: not routable(probe, q), interval=0.05, what="x-expires after cancel")


# --- dead-lettering ----------------------------------------------------------------------------

def test_dead_letter_rejected(amqp, ch):
    src, dlx, dlq = dead_letter_setup(amqp, ch)
    ch.basic_publish("", src, b"bad", pika.BasicProperties(headers={"orig": "h"}))
    m = get(ch, src)
    ch.basic_reject(m.tag, requeue=False)
    (dead,) = wait_get(amqp, ch, dlq)
    assert dead.body == b"bad" and dead.headers["orig"] == "h"
    assert_x_death(dead, "rejected", src, "", [src])
    assert dead.method.exchange == dlx and dead.method.routing_key == src


def test_dead_letter_nacked(amqp, ch):
    src, dlx, dlq = dead_letter_setup(amqp, ch)
    publish(ch, src, 2)
    get(ch, src)
    m2 = get(ch, src)
    ch.basic_nack(m2.tag, multiple=True, requeue=False)
    dead = wait_get(amqp, ch, dlq, 2)
    assert [d.body for d in dead] == [b"m0", b"m1"]
    for d in dead:
        assert_x_death(d, "rejected", src, "", [src])


def test_dead_letter_expired(amqp, ch):
    x = amqp.exchange(ch, "direct")
    dlx = amqp.exchange(ch, "fanout", prefix="dlx")
    dlq = amqp.queue(ch, prefix="dlq")
    ch.queue_bind(dlq, dlx)
    src = amqp.queue(ch, prefix="src", arguments={"x-dead-letter-exchange": dlx,
                                                  "x-message-ttl": 50})
    ch.queue_bind(src, x, "rk")
    ch.basic_publish(x, "rk", b"old", pika.BasicProperties(expiration="30"))
    (dead,) = wait_get(amqp, ch, dlq)
    assert_x_death(dead, "expired", src, x, ["rk"])
    # RabbitMQ: the per-message expiration is removed from the dead-lettered copy and
    # recorded in x-death as original-expiration.
    assert dead.properties.expiration is None
    assert dead.headers["x-death"][0].get("original-expiration") == "30"


def test_dead_letter_maxlen(amqp, ch):
    src, dlx, dlq = dead_letter_setup(amqp, ch, **{"x-max-length": 1})
    publish(ch, src, 3)
    dead = wait_get(amqp, ch, dlq, 2)
    assert [d.body for d in dead] == [b"m0", b"m1"]
    for d in dead:
        assert_x_death(d, "maxlen", src, "", [src])
    assert [m.body for m in get_all(ch, src)] == [b"m2"]


def test_dead_letter_routing_key(amqp, ch):
    dlq = amqp.queue(ch, prefix="dlq")
    dlrk = amqp.unique("dlrk")
    ch.queue_bind(dlq, "amq.direct", dlrk)
    src = amqp.queue(ch, prefix="src", arguments={"x-dead-letter-exchange": "amq.direct",
                                                  "x-dead-letter-routing-key": dlrk})
    ch.basic_publish("", src, b"x")
    m = get(ch, src)
    ch.basic_reject(m.tag, requeue=False)
    (dead,) = wait_get(amqp, ch, dlq)
    assert dead.method.exchange == "amq.direct" and dead.method.routing_key == dlrk
    # x-death routing-keys keeps the original key, not the dead-letter one.
    assert_x_death(dead, "rejected", src, "", [src])


def test_dead_letter_default_exchange_to_queue(amqp, ch):
    dlq = amqp.queue(ch, prefix="dlq")
    src = amqp.queue(ch, prefix="src", arguments={"x-dead-letter-exchange": "",
                                                  "x-dead-letter-routing-key": dlq})
    ch.basic_publish("", src, b"x")
    ch.basic_reject(get(ch, src).tag, requeue=False)
    (dead,) = wait_get(amqp, ch, dlq)
    assert_x_death(dead, "rejected", src, "", [src])


def test_dead_letter_count_increments_on_second_death(amqp, ch):
    # The x-death entry for the same (queue, reason) is updated in place: count 1 -> 2.
    src = amqp.queue(ch, prefix="src")
    ch.queue_declare(src, passive=True)
    ch.queue_delete(src)
    dlq = amqp.queue(ch, prefix="dlq", arguments={"x-dead-letter-exchange": "",
                                                  "x-dead-letter-routing-key": src})
    ch.queue_declare(src, arguments={"x-dead-letter-exchange": "",
                                     "x-dead-letter-routing-key": dlq})
    ch.basic_publish("", src, b"x")
    ch.basic_reject(get(ch, src).tag, requeue=False)          # src -> dlq
    (m,) = wait_get_noack(amqp, ch, dlq)
    ch.basic_reject(m.tag, requeue=False)                     # dlq -> src
    amqp.wait_for(lambda: amqp.counts(src) == (1, 0), what="back in src")
    ch.basic_reject(get(ch, src).tag, requeue=False)          # src -> dlq again
    (m,) = wait_get_noack(amqp, ch, dlq)
    deaths = {(d["queue"], d["reason"]): d["count"] for d in m.headers["x-death"]}
    assert deaths == {(src, "rejected"): 2, (dlq, "rejected"): 1}
    assert m.headers["x-death"][0]["queue"] == src  # most recent death first
    assert m.headers["x-first-death-queue"] == src
    ch.basic_ack(m.tag)


def wait_get_noack(amqp, ch, q):
    out = []
    amqp.wait_for(lambda: (m := get(ch, q)) is not None and out.append(m) is None,
                  what=f"a message in {q}")
    return out


# --- max-length --------------------------------------------------------------------------------

def test_max_length_drop_head(amqp, ch):
    q = amqp.queue(ch, arguments={"x-max-length": 2})  # x-overflow defaults to drop-head
    publish(ch, q, 5)
    amqp.wait_counts(q, (2, 0))
    assert [m.body for m in get_all(ch, q)] == [b"m3", b"m4"]


def test_max_length_reject_publish_nacks_under_confirms(amqp, conn, ch):
    q = amqp.queue(ch, arguments={"x-max-length": 2, "x-overflow": "reject-publish"})
    ch.confirm_delivery()
    ch.basic_publish("", q, b"m0")
    ch.basic_publish("", q, b"m1")
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish("", q, b"m2")
    assert ch.is_open
    assert [m.body for m in get_all(ch, q)] == [b"m0", b"m1"]


def test_max_length_reject_publish_without_confirms_drops_silently(amqp, ch):
    q = amqp.queue(ch, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    publish(ch, q, 3)
    amqp.wait_counts(q, (1, 0))
    assert [m.body for m in get_all(ch, q)] == [b"m0"]


def test_max_length_reject_publish_is_not_dead_lettered(amqp, ch):
    # reject-publish (unlike reject-publish-dlx) does not dead-letter the refused message.
    src, dlx, dlq = dead_letter_setup(amqp, ch, **{"x-max-length": 1,
                                                   "x-overflow": "reject-publish"})
    publish(ch, src, 2)
    amqp.wait_counts(src, (1, 0))
    time.sleep(0.1)
    assert amqp.counts(dlq) == (0, 0)


def test_max_length_bytes_drop_head(amqp, ch):
    # x-max-length-bytes counts body bytes only.
    q = amqp.queue(ch, arguments={"x-max-length-bytes": 10})
    for b in (b"aaaaa", b"bbbbb", b"ccccc"):
        ch.basic_publish("", q, b, pika.BasicProperties(headers={"padding": "x" * 50}))
    amqp.wait_counts(q, (2, 0))
    assert [m.body for m in get_all(ch, q)] == [b"bbbbb", b"ccccc"]


def test_max_length_counts_only_ready_messages(amqp, ch):
    q = amqp.queue(ch, arguments={"x-max-length": 1})
    publish(ch, q, 1)
    held = get(ch, q)  # unacked: not counted against the limit
    ch.basic_publish("", q, b"next")
    amqp.wait_counts(q, (1, 0))
    ch.basic_ack(held.tag)
    assert [m.body for m in get_all(ch, q)] == [b"next"]


# --- priorities --------------------------------------------------------------------------------

def test_max_priority_ordering(amqp, ch):
    q = amqp.queue(ch, arguments={"x-max-priority": 5})
    for body, prio in ((b"p1", 1), (b"none", None), (b"p5a", 5), (b"p3", 3), (b"p5b", 5),
                       (b"p9", 9), (b"p0", 0)):
        ch.basic_publish("", q, body, pika.BasicProperties(priority=prio))
    amqp.wait_counts(q, (7, 0))
    # Higher priority first; priorities above x-max-priority count as the max (p9 == 5);
    # no priority == 0; FIFO among equals.
    assert [m.body for m in get_all(ch, q)] == [b"p5a", b"p5b", b"p9", b"p3", b"p1",
                                                 b"none", b"p0"]


def test_priority_ignored_without_max_priority(amqp, ch):
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"low", pika.BasicProperties(priority=1))
    ch.basic_publish("", q, b"high", pika.BasicProperties(priority=9))
    assert [m.body for m in get_all(ch, q)] == [b"low", b"high"]


def test_priority_requeue_keeps_priority_order(amqp, ch):
    q = amqp.queue(ch, arguments={"x-max-priority": 3})
    ch.basic_publish("", q, b"lo", pika.BasicProperties(priority=1))
    ch.basic_publish("", q, b"hi", pika.BasicProperties(priority=3))
    amqp.wait_counts(q, (2, 0))
    hi = get(ch, q)
    assert hi.body == b"hi"
    ch.basic_reject(hi.tag, requeue=True)
    assert [m.body for m in get_all(ch, q)] == [b"hi", b"lo"]


# --- quorum queues -----------------------------------------------------------------------------

def test_quorum_queue_basic(amqp, ch):
    q = amqp.queue(ch, prefix="qq", durable=True, arguments={"x-queue-type": "quorum"})
    publish(ch, q, 3)
    amqp.wait_counts(q, (3, 0))
    msgs = get_all(ch, q)
    assert [m.body for m in msgs] == [b"m0", b"m1", b"m2"]


@pytest.mark.parametrize("flags", [{"durable": False}, {"durable": True, "exclusive": True},
                                   {"durable": True, "auto_delete": True}],
                         ids=["non-durable", "exclusive", "auto-delete"])
def test_quorum_queue_invalid_properties_406(amqp, ch, flags):
    # RabbitMQ: quorum queues must be durable, non-exclusive, non-auto-delete -> 406
    # PRECONDITION_FAILED "invalid property 'non-durable' / 'exclusive-owner' / 'auto-delete'".
    name = amqp.track_queue(amqp.unique("qq"))
    with broker_closes_channel(406):
        ch.queue_declare(name, arguments={"x-queue-type": "quorum"}, **flags)


def test_quorum_queue_type_mismatch_is_406(amqp, ch):
    q = amqp.queue(ch, durable=True)
    with broker_closes_channel(406):
        ch.queue_declare(q, durable=True, arguments={"x-queue-type": "quorum"})


def test_quorum_delivery_count_and_limit(amqp, ch):
    # RabbitMQ 3.10.8 (observed): quorum queue deliveries carry an x-delivery-count header,
    # 0 on the first delivery and +1 per return (nack/reject requeue, channel close). With
    # x-delivery-limit=N a message is delivered N+1 times, then dead-lettered (or dropped)
    # with reason "delivery_limit".
    dlq = amqp.queue(ch, prefix="dlq")
    q = amqp.queue(ch, prefix="qq", durable=True, arguments={
        "x-queue-type": "quorum", "x-delivery-limit": 2,
        "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
    ch.basic_publish("", q, b"poison")
    seen = []
    for _ in range(3):
        (m,) = wait_get_noack(amqp, ch, q)
        seen.append((m.redelivered, m.headers.get("x-delivery-count")))
        ch.basic_nack(m.tag, requeue=True)
    assert seen == [(False, 0), (True, 1), (True, 2)]
    (dead,) = wait_get(amqp, ch, dlq)
    assert dead.body == b"poison"
    assert_x_death(dead, "delivery_limit", q, "", [q])
    assert get(ch, q) is None


def test_quorum_delivery_count_on_channel_close(amqp, ch):
    q = amqp.queue(ch, prefix="qq", durable=True, arguments={"x-queue-type": "quorum"})
    ch.basic_publish("", q, b"x")
    other = amqp.channel()
    (m,) = wait_get_noack(amqp, other, q)
    assert m.headers.get("x-delivery-count") == 0
    other.close()
    (m,) = wait_get_noack(amqp, ch, q)
    assert m.redelivered and m.headers.get("x-delivery-count") == 1


def test_per_message_expiration_only_at_head(amqp, ch):
    # RabbitMQ (documented caveat of per-message TTL): an expired message is only discarded
    # when it reaches the head of the queue; one behind a long-lived message keeps counting.
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"long", pika.BasicProperties(expiration="60000"))
    ch.basic_publish("", q, b"short", pika.BasicProperties(expiration="50"))
    time.sleep(0.3)
    assert amqp.counts(q) == (2, 0)
    assert get(ch, q, auto_ack=True).body == b"long"
    amqp.wait_counts(q, (0, 0))   # "short" is now at the head, long expired
    assert get(ch, q) is None


def test_dead_letter_cycle_of_expiry_is_dropped(amqp, ch):
    # RabbitMQ drops a message whose dead-lettering would loop back to a queue through only
    # automatic deaths (expired) - here a queue dead-lettering to itself: after its first
    # expiry it is gone for good (no endless expire/republish loop).
    q = amqp.unique("loop")
    amqp.queue(ch, name=q, arguments={"x-message-ttl": 50, "x-dead-letter-exchange": "",
                                      "x-dead-letter-routing-key": q})
    ch.basic_publish("", q, b"x")
    amqp.wait_counts(q, (0, 0))
    for _ in range(5):
        time.sleep(0.06)
        assert amqp.counts(q) == (0, 0)


def test_dead_letter_cycle_with_rejection_is_allowed(amqp, ch):
    # A cycle that involves a client rejection is not dropped: x-death count grows.
    q = amqp.unique("rejloop")
    amqp.queue(ch, name=q, arguments={"x-dead-letter-exchange": "",
                                      "x-dead-letter-routing-key": q})
    ch.basic_publish("", q, b"x")
    counts = []
    for _ in range(3):
        (m,) = wait_get_noack(amqp, ch, q)
        assert not m.redelivered  # a dead-lettered copy is a new message
        deaths = m.headers.get("x-death")
        counts.append(deaths[0]["count"] if deaths else 0)
        ch.basic_reject(m.tag, requeue=False)
    assert counts == [0, 1, 2]


def test_quorum_delivery_limit_without_dlx_drops(amqp, ch):
    q = amqp.queue(ch, prefix="qq", durable=True,
                   arguments={"x-queue-type": "quorum", "x-delivery-limit": 0})
    ch.basic_publish("", q, b"once")
    (m,) = wait_get_noack(amqp, ch, q)
    ch.basic_nack(m.tag, requeue=True)   # delivered 1 time > limit 0: dropped
    amqp.wait_counts(q, (0, 0))
    assert get(ch, q) is None


def test_missing_dead_letter_exchange_drops_silently(amqp, ch):
    q = amqp.queue(ch, arguments={"x-dead-letter-exchange": amqp.unique("missing")})
    ch.basic_publish("", q, b"x")
    ch.basic_reject(wait_get_noack(amqp, ch, q)[0].tag, requeue=False)
    amqp.wait_counts(q, (0, 0))
    assert ch.is_open


def test_max_length_zero_still_delivers_to_waiting_consumer(amqp, conn, ch):
    # x-max-length=0 with a ready consumer: the message goes straight to the consumer.
    q = amqp.queue(ch, arguments={"x-max-length": 0})
    col = Collector(conn)
    ch.basic_consume(q, col, auto_ack=True)
    ch.basic_publish("", q, b"direct")
    assert col.wait(1) and col.bodies == [b"direct"]


def test_quorum_requeue_goes_to_the_back(amqp, ch):
    # Unlike classic queues (requeued messages return to their original place at the head),
    # RabbitMQ 3.10 quorum queues append returned messages at the back, in the order they
    # were returned (observed: publish m0 m1 m2; get m0, m1; nack m1, then m0 -> m2, m1, m0).
    q = amqp.queue(ch, prefix="qq", durable=True, arguments={"x-queue-type": "quorum"})
    publish(ch, q, 3)
    amqp.wait_counts(q, (3, 0))
    m0, m1 = get(ch, q), get(ch, q)
    ch.basic_nack(m1.tag, requeue=True)
    ch.basic_nack(m0.tag, requeue=True)
    amqp.wait_counts(q, (3, 0))
    out = [(m.body, m.redelivered, m.headers.get("x-delivery-count")) for m in get_all(ch, q)]
    assert out == [(b"m2", False, 0), (b"m1", True, 1), (b"m0", True, 1)]


def test_quorum_consume_with_global_qos_is_540(amqp, ch):
    # RabbitMQ 3.10: quorum queues do not support per-channel (global) prefetch: consuming on a
    # channel with basic.qos(global=true) closes the connection with 540 NOT_IMPLEMENTED
    # "queue '...' in vhost '/' does not support global qos".
    q = amqp.queue(ch, prefix="qq", durable=True, arguments={"x-queue-type": "quorum"})
    ch.basic_qos(prefetch_count=5, global_qos=True)
    with broker_closes_connection(540):
        ch.basic_consume(q, lambda *a: None)


def test_quorum_max_priority_is_406(amqp, ch):
    # RabbitMQ 3.10: "invalid arg 'x-max-priority' for queue ... of queue type
    # rabbit_quorum_queue" (priorities are a classic-queue feature in 3.10).
    name = amqp.track_queue(amqp.unique("qq"))
    with broker_closes_channel(406):
        ch.queue_declare(name, durable=True,
                         arguments={"x-queue-type": "quorum", "x-max-priority": 5})


def test_quorum_reject_publish_soft_limit(amqp, ch):
    # RabbitMQ 3.10 quorum queues apply reject-publish once the limit has been *exceeded*:
    # with x-max-length=1 the 2nd publish is still accepted (2 messages), the 3rd and 4th are
    # nacked (observed: ack, ack, nack, nack; message_count 2). Classic queues nack the 2nd.
    q = amqp.queue(ch, prefix="qq", durable=True, arguments={
        "x-queue-type": "quorum", "x-max-length": 1, "x-overflow": "reject-publish"})
    ch.confirm_delivery()
    outcome = []
    for i in range(4):
        try:
            ch.basic_publish("", q, f"m{i}".encode())
            outcome.append("ack")
        except pika.exceptions.NackError:
            outcome.append("nack")
    assert outcome == ["ack", "ack", "nack", "nack"]
    amqp.wait_counts(q, (2, 0))


def test_priority_order_to_late_consumer(amqp, conn, ch):
    # Messages published before the consumer starts are delivered highest priority first.
    q = amqp.queue(ch, arguments={"x-max-priority": 10})
    for i, prio in enumerate([1, 7, 3, 10, 7]):
        ch.basic_publish("", q, f"p{prio}-{i}".encode(), pika.BasicProperties(priority=prio))
    amqp.wait_counts(q, (5, 0))
    col = Collector(conn)
    ch.basic_consume(q, col, auto_ack=True)
    assert col.wait(5) and col.bodies == [b"p10-3", b"p7-1", b"p7-4", b"p3-2", b"p1-0"]


def test_x_death_history_over_two_hops(amqp, ch):
    # expire in q1 -> dead-lettered to q2; rejected in q2 -> dead-lettered to q3. x-death lists
    # the most recent death first; x-first-death-* keep the first one.
    q3 = amqp.queue(ch, prefix="q3")
    q2 = amqp.queue(ch, prefix="q2", arguments={"x-dead-letter-exchange": "",
                                                "x-dead-letter-routing-key": q3})
    q1 = amqp.queue(ch, prefix="q1", arguments={"x-message-ttl": 50,
                                                "x-dead-letter-exchange": "",
                                                "x-dead-letter-routing-key": q2})
    ch.basic_publish("", q1, b"hop")
    (m,) = wait_get_noack(amqp, ch, q2)
    ch.basic_reject(m.tag, requeue=False)
    (dead,) = wait_get(amqp, ch, q3)
    deaths = [(d["queue"], d["reason"], d["count"], list(d["routing-keys"]))
              for d in dead.headers["x-death"]]
    assert deaths == [(q2, "rejected", 1, [q2]), (q1, "expired", 1, [q1])]
    assert (dead.headers["x-first-death-queue"], dead.headers["x-first-death-reason"]) == \
        (q1, "expired")


def test_quorum_delivery_count_header_on_consume(amqp, ch):
    # RabbitMQ 3.10.8 (observed with pika): a basic.deliver from a quorum queue has no
    # x-delivery-count header on its first delivery (basic.get-ok has it from 0); after a
    # return (nack requeue) the redelivery carries x-delivery-count=1.
    q = amqp.queue(ch, prefix="qq", durable=True, arguments={"x-queue-type": "quorum"})
    ch.basic_publish("", q, b"x")
    ch.basic_qos(prefetch_count=10)
    seen = []
    for method, props, body in ch.consume(q, inactivity_timeout=5):
        assert method is not None, "no delivery within 5 s"
        seen.append((method.redelivered, (props.headers or {}).get("x-delivery-count")))
        if len(seen) == 1:
            ch.basic_nack(method.delivery_tag, requeue=True)
        else:
            ch.basic_ack(method.delivery_tag)
            break
    ch.cancel()
    assert seen == [(False, None), (True, 1)]
