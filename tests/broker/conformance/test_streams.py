"""Stream queues (x-queue-type=stream) over AMQP 0-9-1, as RabbitMQ 3.10.8 serves them.

Every test runs against the embedded broker and RabbitMQ (issue 12). Codes and texts were
observed on RabbitMQ 3.10.8 with pika (facts: /work/shared/reference/rabbitmq-streams-over-0-9-1.md):
declare refusals are channel 406s; no_ack, basic.get, queue.purge, nack/reject and global QoS
are connection 540s; an ``x-stream-offset`` string without leading digits, a boolean or an
array crashes RabbitMQ's parser (connection 541 INTERNAL_ERROR; the embedded broker answers
the same code with a text naming the argument). RabbitMQ samples passive-declare counts every
few seconds, and its offsets may have gaps (a segment starts with a tracking chunk), so tests
compare offsets as increasing sequences where segments roll.
"""

from __future__ import annotations

import datetime as dt
import time

import pika
import pytest

from conformance_helpers import (DEADLINE, QUIET, Collector, broker_closes_channel,
                                 broker_closes_connection)

STREAM = {"x-queue-type": "stream"}


def _stream(amqp, ch, **args) -> str:
    return amqp.queue(ch, "stream", durable=True, arguments={**STREAM, **args})


def _publish(ch, q: str, n: int, start: int = 0, size: int = 0, exchange: str = "") -> None:
    """Publish ``n`` messages with confirms (pika waits for each ack: one chunk each)."""
    for i in range(start, start + n):
        body = (b"m%d" % i).ljust(size, b".")
        ch.basic_publish(exchange, q if exchange == "" else "", body)


def _setup(amqp, n: int = 10, **args):
    ch = amqp.channel()
    ch.confirm_delivery()
    q = _stream(amqp, ch, **args)
    _publish(ch, q, n)
    return ch, q


def _consume(amqp, q: str, offset=None, prefetch: int = 100, conn=None):
    c = conn or amqp.connect()
    ch = c.channel()
    ch.basic_qos(prefetch_count=prefetch)
    col = Collector(c)
    args = {} if offset is None else {"x-stream-offset": offset}
    tag = ch.basic_consume(q, col, arguments=args)
    return c, ch, col, tag


def _offsets(msgs) -> list[int]:
    """The x-stream-offset headers of a Collector's messages (or of a list of messages)."""
    if isinstance(msgs, Collector):
        msgs = msgs.messages
    return [m.headers["x-stream-offset"] for m in msgs]


# ---------------------------------------------------------------------------------- declare

def test_declare_needs_durable_non_exclusive_non_auto_delete(amqp, conn):
    for prop, kwargs in (("non-durable", {"durable": False}),
                         ("exclusive-owner", {"durable": True, "exclusive": True}),
                         ("auto-delete", {"durable": True, "auto_delete": True})):
        with broker_closes_channel(406) as ei:
            amqp.queue(conn.channel(), "stream", arguments=STREAM, **kwargs)
        assert f"invalid property '{prop}'" in ei.value.reply_text


def test_declare_ok_reports_zero_and_accepts_stream_arguments(amqp, ch):
    q = amqp.unique("stream")
    amqp.track_queue(q)
    args = {**STREAM, "x-max-length-bytes": 10_000_000, "x-max-age": "7D",
            "x-stream-max-segment-size-bytes": 3_000_000_000, "x-initial-cluster-size": 1,
            "x-queue-leader-locator": "balanced", "x-custom": "ignored"}
    ok = ch.queue_declare(q, durable=True, arguments=args).method
    assert (ok.queue, ok.message_count, ok.consumer_count) == (q, 0, 0)
    # an identical redeclare is fine, a different x-max-age is not
    ch.queue_declare(q, durable=True, arguments=args)
    with broker_closes_channel(406) as ei:
        ch.queue_declare(q, durable=True, arguments={**args, "x-max-age": "1h"})
    assert "inequivalent arg 'x-max-age'" in ei.value.reply_text


def test_max_age_units(amqp, ch):
    for age in ("1Y", "1M", "7D", "1h", "30m", "10s"):
        _stream(amqp, ch, **{"x-max-age": age})


_INVALID_ARGS = [
    ({"x-max-age": "1x"}, "invalid arg 'x-max-age'"),
    ({"x-max-age": "0s"}, "invalid_max_age"),
    ({"x-max-age": 10}, "unacceptable_type"),
    ({"x-max-length-bytes": -1}, "{value_negative,-1}"),
    ({"x-max-length-bytes": "10"}, "expected integer, got longstr"),
    ({"x-stream-max-segment-size-bytes": 3_000_000_001}, "Exceeded max value for x-stream-max-segment-size-bytes"),
    ({"x-stream-max-segment-size-bytes": -1}, "{value_negative,-1}"),
    ({"x-initial-cluster-size": 0}, "{value_zero,0}"),
    ({"x-queue-leader-locator": "foo"}, "invalid_queue_locator_arg"),
    ({"x-max-length": 10}, "invalid arg 'x-max-length'"),
    ({"x-message-ttl": 10}, "of queue type rabbit_stream_queue"),
    ({"x-overflow": "reject-publish"}, "of queue type rabbit_stream_queue"),
    ({"x-dead-letter-exchange": "dlx"}, "of queue type rabbit_stream_queue"),
    ({"x-expires": 1000}, "of queue type rabbit_stream_queue"),
    ({"x-max-priority": 3}, "of queue type rabbit_stream_queue"),
    ({"x-single-active-consumer": True}, "of queue type rabbit_stream_queue"),
    ({"x-delivery-limit": 3}, "of queue type rabbit_stream_queue"),
    ({"x-max-age": "1Q"}, "invalid_max_age"),
]


def test_invalid_declare_arguments_406(amqp, conn):
    """Each case on a new channel of one connection (a channel error leaves the connection)."""
    for args, text in _INVALID_ARGS:
        ch = conn.channel()
        with broker_closes_channel(406) as ei:
            _stream(amqp, ch, **args)
        assert text in ei.value.reply_text, args


def test_max_age_without_digits_is_541_and_other_connections_go_on(amqp):
    ch, q = _setup(amqp, 3)
    bad = amqp.connect().channel()
    with broker_closes_connection(541):
        _stream(amqp, bad, **{"x-max-age": "-1s"})
    # the stream and the first connection are unaffected
    c, _, col, _ = _consume(amqp, q, "first")
    assert _offsets(col.wait(3)) == [0, 1, 2]
    assert ch.is_open


def test_redeclare_as_classic_is_inequivalent(amqp, ch):
    q = _stream(amqp, ch)
    with broker_closes_channel(406) as ei:
        ch.queue_declare(q, durable=True)
    assert "inequivalent arg 'x-queue-type'" in ei.value.reply_text


# ---------------------------------------------------------------------------------- offsets

def test_offsets_from_zero_header_and_properties_kept(amqp):
    ch, q = _setup(amqp, 0)
    props = pika.BasicProperties(content_type="text/plain", headers={"h": 1}, delivery_mode=2, priority=3,
                                 correlation_id="c", reply_to="r", expiration="60000", message_id="id",
                                 timestamp=12345, type="t", user_id="guest", app_id="a")
    ch.basic_publish("", q, b"first", props)
    _publish(ch, q, 4, start=1)
    c, _, col, tag = _consume(amqp, q, "first")
    msgs = col.wait(5)
    assert [m.body for m in msgs] == [b"first", b"m1", b"m2", b"m3", b"m4"]
    assert _offsets(col) == [0, 1, 2, 3, 4]
    assert [m.tag for m in msgs] == [1, 2, 3, 4, 5]
    assert not any(m.redelivered for m in msgs)
    assert all(m.method.consumer_tag == tag and m.method.exchange == "" and m.method.routing_key == q for m in msgs)
    p = msgs[0].properties
    assert p.headers == {"h": 1, "x-stream-offset": 0}
    assert (p.content_type, p.delivery_mode, p.priority, p.correlation_id, p.reply_to, p.expiration,
            p.message_id, p.timestamp, p.type, p.user_id, p.app_id) == (
        "text/plain", 2, 3, "c", "r", "60000", "id", 12345, "t", "guest", "a")
    assert msgs[1].properties.headers == {"x-stream-offset": 1}


def test_stream_bound_to_an_exchange(amqp):
    ch = amqp.channel()
    ch.confirm_delivery()
    q = _stream(amqp, ch)
    x = amqp.exchange(ch, "fanout")
    ch.queue_bind(q, x)
    ch.basic_publish(x, "rk", b"via-x", mandatory=True)
    c, _, col, _ = _consume(amqp, q, "first")
    (m,) = col.wait(1)
    assert (m.body, m.method.exchange, m.method.routing_key, m.headers["x-stream-offset"]) == (b"via-x", x, "rk", 0)


def test_transactions_publish_into_a_stream(amqp):
    ch = amqp.channel()
    q = _stream(amqp, ch)
    ch.tx_select()
    ch.basic_publish("", q, b"a")
    ch.basic_publish("", q, b"b")
    ch.tx_commit()
    ch.basic_publish("", q, b"rolled-back")
    ch.tx_rollback()
    c, _, col, _ = _consume(amqp, q, "first")
    assert [m.body for m in col.wait(2)] == [b"a", b"b"]
    assert col.settle() and len(col.messages) == 2


def _past(seconds: float) -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=seconds)


_READ_EXISTING = [
    ("first", list(range(10))),
    ("last", [9]),                       # one chunk per confirmed publish: the last message
    (3, list(range(3, 10))),
    (-5, list(range(10))),               # below the start: from the first retained message
    (0, list(range(10))),
    ("1h", list(range(10))),
    ("7D", list(range(10))),
    ("timestamp-past", list(range(10))),
]


def test_offset_specs_read_existing(amqp):
    """Each spec on its own consumer (all on one connection), over the same 10 messages."""
    _, q = _setup(amqp, 10)
    conn = amqp.connect()
    cols = []
    for spec, expected in _READ_EXISTING:
        arg = _past(3600) if spec == "timestamp-past" else spec
        cols.append((spec, expected, _consume(amqp, q, arg, conn=conn)[2]))
    cols[0][2].wait(10)
    cols[0][2].settle()
    for spec, expected, col in cols:
        assert _offsets(col) == expected, spec
        assert [m.body for m in col.messages] == [b"m%d" % i for i in expected], spec


def test_offset_specs_waiting_for_new_messages(amqp):
    """next (also the default), the end, a future timestamp, beyond the end: only new messages."""
    ch, q = _setup(amqp, 10)
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
    conn = amqp.connect()
    specs = [None, "next", 10, future, 12, 100]
    cols = [_consume(amqp, q, spec, conn=conn)[2] for spec in specs]
    assert cols[0].settle() == []
    assert all(col.messages == [] for col in cols)
    _publish(ch, q, 3, start=10)
    cols[0].wait(3)
    cols[0].settle()
    got = [_offsets(col) for col in cols]
    assert got == [[10, 11, 12]] * 4 + [[12], []]


def test_offset_last_delivers_the_whole_last_chunk(amqp):
    """Messages published without waiting may share a chunk: "last" starts at its start."""
    ch = amqp.channel()
    q = _stream(amqp, ch)
    for i in range(50):
        ch.basic_publish("", q, b"m%d" % i)
    ch.confirm_delivery()           # a round trip: everything before it is stored
    ch.basic_publish("", q, b"m50")
    c, _, col, _ = _consume(amqp, q, "last")
    got = _offsets(col.wait(1))
    assert got and got[-1] == 50 and got == list(range(got[0], 51))


def test_interval_spec_after_the_log_waits(amqp):
    _, q = _setup(amqp, 3)
    deadline = time.monotonic() + DEADLINE
    while True:  # "1s" means: chunks written in the last second; wait until ours are older
        c, ch, col, _ = _consume(amqp, q, "1s")
        if not col.settle():
            break
        assert time.monotonic() < deadline, "messages stayed younger than 1 s"
        c.close()


def test_bad_interval_string_406(amqp):
    _, q = _setup(amqp, 1)
    conn = amqp.connect()
    for spec in ("0s", "5", "1x"):
        with broker_closes_channel(406) as ei:
            _consume(amqp, q, spec, conn=conn)
        assert "invalid_stream_offset_arg" in ei.value.reply_text


@pytest.mark.parametrize("spec", ["yesterday", "-1h", True, ["a"]])
def test_unparsable_offset_spec_541_others_unaffected(amqp, spec):
    ch, q = _setup(amqp, 2)
    with broker_closes_connection(541):
        _consume(amqp, q, spec)
    _publish(ch, q, 1, start=2)          # the publisher's connection goes on
    c, _, col, _ = _consume(amqp, q, "first")
    assert _offsets(col.wait(3)) == [0, 1, 2]


# ---------------------------------------------------------------------------------- consuming

def test_consume_needs_consumer_prefetch(amqp):
    _, q = _setup(amqp, 1)
    ch = amqp.channel()
    with broker_closes_channel(406) as ei:
        ch.basic_consume(q, lambda *a: None)
    assert "consumer prefetch count is not set for" in ei.value.reply_text
    ch = amqp.channel()
    ch.basic_qos(prefetch_count=5, global_qos=True)   # a global prefetch does not count
    with broker_closes_channel(406):
        ch.basic_consume(q, lambda *a: None)


def test_consume_with_global_qos_540(amqp):
    _, q = _setup(amqp, 1)
    ch = amqp.channel()
    ch.basic_qos(prefetch_count=5)
    ch.basic_qos(prefetch_count=5, global_qos=True)
    with broker_closes_connection(540) as ei:
        ch.basic_consume(q, lambda *a: None)
    assert "does not support global qos" in ei.value.reply_text


@pytest.mark.parametrize("what", ["no_ack", "get", "purge"])
def test_not_implemented_540(amqp, what):
    _, q = _setup(amqp, 1)
    ch = amqp.channel()
    ch.basic_qos(prefetch_count=5)
    with broker_closes_connection(540) as ei:
        if what == "no_ack":
            ch.basic_consume(q, lambda *a: None, auto_ack=True)
        elif what == "get":
            ch.basic_get(q)
        else:
            ch.queue_purge(q)
    text = {"no_ack": "automatic acknowledgement not supported by stream queues",
            "get": "basic.get not supported by stream queues",
            "purge": "queue.purge not supported by stream queues"}[what]
    assert text in ei.value.reply_text and f"queue '{q}'" in ei.value.reply_text


@pytest.mark.parametrize("how", ["nack", "reject"])
def test_nack_and_reject_540(amqp, how):
    _, q = _setup(amqp, 2)
    c, ch, col, _ = _consume(amqp, q, "first")
    m = col.wait(1)[0]
    with broker_closes_connection(540) as ei:
        if how == "nack":
            ch.basic_nack(m.tag, requeue=True)
        else:
            ch.basic_reject(m.tag, requeue=False)
        col.settle(1.0)
    assert "basic.nack and basic.reject not supported by stream queues" in ei.value.reply_text
    # nothing was removed
    c, _, col, _ = _consume(amqp, q, "first")
    assert _offsets(col.wait(2)) == [0, 1]


def test_prefetch_is_credit_acks_give_it_back(amqp):
    _, q = _setup(amqp, 10)
    c, ch, col, _ = _consume(amqp, q, "first", prefetch=3)
    col.wait(3)
    assert _offsets(col.settle()) == [0, 1, 2]
    ch.basic_ack(col.messages[1].tag, multiple=True)      # two credits back
    col.wait(5)
    assert _offsets(col.settle()) == [0, 1, 2, 3, 4]
    ch.basic_ack(0, multiple=True)
    col.wait(8)
    assert _offsets(col.settle()) == list(range(8))
    assert [m.tag for m in col.messages] == list(range(1, 9))
    assert not any(m.redelivered for m in col.messages)


def test_prefetch_one_gets_a_whole_chunk_then_nothing_until_acked(amqp):
    """RabbitMQ 3.10.8 delivers whole chunks while a consumer's credit is above 0
    (``rabbit_stream_queue:stream_entries/4``: the credit may go below 0): a prefetch of 1
    gets all of the last chunk, and nothing written after it until an ack gives credit back.
    (The source's tail probe relies on it to find a live stream's tail in bounded time.)"""
    ch = amqp.channel()
    q = _stream(amqp, ch)
    for i in range(50):                 # without waiting: they share chunks
        ch.basic_publish("", q, b"m%d" % i)
    ch.confirm_delivery()               # a round trip: everything before it is stored
    c, cch, col, _ = _consume(amqp, q, "last", prefetch=1)
    col.wait(1)
    got = _offsets(col.settle())
    assert got and got[-1] == 49 and got == list(range(got[0], 50))
    _publish(ch, q, 5, start=50)        # confirmed one by one: a chunk each
    assert _offsets(col.settle()) == got            # no credit: the live tail is not chased
    cch.basic_ack(0, multiple=True)     # len(got) credits back: credit 1 again, one chunk
    col.wait(len(got) + 1)
    assert _offsets(col.settle()) == got + [50]


def test_recover_with_unacked_stream_deliveries_541(amqp):
    """RabbitMQ 3.10.8 crashes on it (541); with nothing unacked basic.recover is fine."""
    _, q = _setup(amqp, 2)
    c, ch, col, _ = _consume(amqp, q, "first")
    col.wait(2)
    with broker_closes_connection(541):
        ch.basic_recover(requeue=True)
    c, ch, col, _ = _consume(amqp, q, "first")
    col.wait(2)
    ch.basic_ack(0, multiple=True)
    ch.basic_recover(requeue=True)
    assert _offsets(col.settle()) == [0, 1]


def test_closed_or_cancelled_consumers_lose_nothing_and_requeue_nothing(amqp):
    ch, q = _setup(amqp, 6)
    shared = amqp.connect()
    c1, ch1, col1, tag1 = _consume(amqp, q, "first", prefetch=4, conn=shared)
    c2, ch2, col2, _ = _consume(amqp, q, "first", prefetch=100, conn=shared)
    col1.wait(4)
    col2.wait(6)
    ch1.basic_cancel(tag1)
    ch1.close()                                         # 4 unacked: not requeued to anyone
    assert _offsets(col2.settle()) == list(range(6))
    c3, _, col3, _ = _consume(amqp, q, 2)
    assert _offsets(col3.wait(4)) == [2, 3, 4, 5]
    assert len(col2.settle()) == 6


def test_many_readers_each_at_their_own_pace(amqp):
    ch, q = _setup(amqp, 0)
    _publish(ch, q, 30)
    slow_c, slow_ch, slow, _ = _consume(amqp, q, "first", prefetch=2)
    fast_c, _, fast, _ = _consume(amqp, q, 5, prefetch=1000)
    mid_c, _, mid, _ = _consume(amqp, q, "first", prefetch=1000)
    assert _offsets(fast.wait(25)) == list(range(5, 30))
    assert _offsets(mid.wait(30)) == list(range(30))
    assert _offsets(slow.settle()) == [0, 1]           # the slow one never acked
    _publish(ch, q, 2, start=30)                        # publishers are not slowed either
    assert _offsets(fast.wait(27))[-2:] == [30, 31]
    slow_ch.basic_ack(0, multiple=True)
    assert _offsets(slow.wait(4)) == [0, 1, 2, 3]


def test_counts_and_delete_ok(amqp):
    ch, q = _setup(amqp, 5)
    n, _ = amqp.counts(q)
    assert 0 <= n <= 5      # RabbitMQ samples the count every few seconds; ours is exact
    assert ch.queue_delete(q).method.message_count == 0   # RabbitMQ 3.10.8 says 0 for a stream
    assert amqp.counts(q) is None


def test_delete_if_empty_does_not_protect_a_stream(amqp):
    """RabbitMQ 3.10.8 deletes a non-empty stream despite if-empty (delete-ok 0). (Its if-unused
    looks at a consumer count sampled every few seconds, so it is not asserted here.)"""
    _, q = _setup(amqp, 3)
    assert amqp.channel().queue_delete(q, if_empty=True).method.message_count == 0
    assert amqp.counts(q) is None


# ---------------------------------------------------------------------------------- retention

def _read_all(amqp, q: str) -> list[int]:
    c, _, col, _ = _consume(amqp, q, "first", prefetch=1000)
    out = _offsets(col.settle(QUIET))
    c.close()
    return out


def test_retention_by_size_drops_whole_old_segments(amqp):
    ch, q = _setup(amqp, 0, **{"x-stream-max-segment-size-bytes": 2000, "x-max-length-bytes": 5000})
    _publish(ch, q, 200, size=100)
    got = amqp.wait_for(lambda: (o := _read_all(amqp, q)) and o[0] > 0 and o, what="retention by size")
    assert got == sorted(set(got)) and got[-1] >= 199      # increasing; RabbitMQ may leave gaps
    assert len(got) * 100 <= 5000 + 2000                 # at most the limit plus one segment


def test_retention_by_age(amqp):
    ch, q = _setup(amqp, 0, **{"x-stream-max-segment-size-bytes": 2000, "x-max-age": "1s"})
    _publish(ch, q, 20, size=100)
    time.sleep(1.2)  # the age limit needs the old segments to be older than 1 s
    _publish(ch, q, 20, start=20, size=100)              # new segments: retention runs
    got = amqp.wait_for(lambda: (o := _read_all(amqp, q)) and o[0] > 0 and o, what="retention by age")
    assert got == sorted(set(got)) and len(got) < 40 and len(got) >= 1


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
def test_stream_offset_on_a_queue_that_is_not_a_stream_is_406(amqp, queue_type):
    # RabbitMQ 3.10.8: "PRECONDITION_FAILED - invalid arg 'x-stream-offset' for queue 'Q' in
    # vhost '/' of queue type rabbit_classic_queue" (rabbit_quorum_queue for quorum queues).
    conn = amqp.connect()
    ch = conn.channel()
    q = amqp.queue(ch, durable=True, arguments={"x-queue-type": queue_type})
    ch.basic_qos(prefetch_count=10)
    with broker_closes_channel(406) as ei:
        ch.basic_consume(q, lambda *a: None, arguments={"x-stream-offset": "first"})
    assert f"invalid arg 'x-stream-offset' for queue '{q}'" in ei.value.reply_text
    assert f"of queue type rabbit_{queue_type}_queue" in ei.value.reply_text
