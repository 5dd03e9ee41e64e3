"""Exchange subscription of the queue mode (issue 29): options, the driver consumer's declare
and bindings on both brokers (no Spark), and a query stopped and restarted from its checkpoint
that loses nothing published in between (Spark)."""

from __future__ import annotations

import time

import pika
import pytest

from source_helpers import delete, pika_conn, wait_until
from spark_amqp.spark.source.queues.consumer import DriverConsumer
from spark_amqp.spark.source.queues.options import parse_source_options


def _delete_exchange(url, name):
    try:
        with pika_conn(url) as c:
            c.channel().exchange_delete(name)
    except Exception:  # noqa: BLE001 - cleanup
        pass


def _publish_to(url, exchange, items):
    """``items``: (routing key, body, headers or None); confirmed, mandatory off."""
    with pika_conn(url) as c:
        ch = c.channel()
        ch.confirm_delivery()
        for key, body, headers in items:
            ch.basic_publish(exchange, key, body, pika.BasicProperties(headers=headers))


def test_subscription_options_defaults_and_errors():
    o = parse_source_options({"queue": "sub", "exchange": "orders"})
    assert (o.exchange, o.exchange_declare, o.binding_keys, o.binding_arguments) == \
        ("orders", False, ("",), {})
    assert o.declare and o.durable and o.queue_arguments == {"x-queue-type": "quorum"}
    o = parse_source_options({"queue": "sub", "exchange": "x", "exchangedeclare": "true",
                              "exchangetype": "HEADERS", "exchangedurable": "false",
                              "bindingkeys": "a.*, b.#", "queuearguments":
                              '{"x-queue-type": "classic", "x-max-length": 10}',
                              "bindingarguments": '{"x-match": "any", "k": "v"}'})
    assert (o.exchange_type, o.exchange_durable, o.binding_keys) == ("headers", False,
                                                                     ("a.*", "b.#"))
    assert o.queue_arguments == {"x-queue-type": "classic", "x-max-length": 10}
    assert o.binding_arguments == {"x-match": "any", "k": "v"}
    assert parse_source_options({"queue": "q"}).exchange is None
    bad = [({"bindingkeys": "a"}, "bindingKeys of the amqp source only apply with option "
                                  "'exchange'"),
           ({"exchange": "x", "queues": "a,b"}, "needs exactly one subscription queue"),
           ({"exchange": "x", "declare": "false"}, "cannot be combined with declare=false"),
           ({"exchange": "x", "exchangetype": "topic"}, "exchangeType of the amqp source only "
                                                        "apply with exchangeDeclare=true"),
           ({"exchange": "x", "exchangedeclare": "true", "exchangetype": "fan"},
            r"'exchangeType'.*direct \| fanout \| topic \| headers"),
           ({"exchange": "x", "bindingkeys": "a,,b"}, "'bindingKeys'.*non-empty binding key"),
           ({"exchange": "x", "bindingarguments": "[1]"}, "'bindingArguments'.*a JSON object"),
           ({"exchange": "x", "bindingarguments": '{"x-match": "some"}'},
            r"'bindingArguments'.*all \| any"),
           ({"exchange": " "}, "'exchange'.*non-empty exchange name")]
    for extra, match in bad:
        opts = {"queue": "q", **extra}
        if "queues" in extra:
            opts.pop("queue")
        with pytest.raises(ValueError, match=match):
            parse_source_options(opts)


@pytest.fixture
def names(broker_url, unique):
    made = {"q": [], "x": []}

    def make(kind):
        n = unique("sub" + kind)
        made[kind].append(n)
        return n

    yield make
    delete(broker_url, *made["q"])
    for x in made["x"]:
        _delete_exchange(broker_url, x)


def _drain_count(consumer, queue, n, timeout=30.0):
    """Messages drained from the consumer's raw-mode channel (runs of ``count`` deliveries)
    until ``n`` arrived or ``timeout``; then 1 s more to see that nothing else comes."""
    got = 0
    deadline = time.monotonic() + timeout
    while got < n and time.monotonic() < deadline:
        got += sum(d.count for d in consumer.drain(queue, 0.2))
    settle = time.monotonic() + 1.0
    while time.monotonic() < settle:
        got += sum(d.count for d in consumer.drain(queue, 0.2))
    return got


def test_consumer_declares_binds_topic_keys_and_checks_a_missing_exchange(broker_url, names):
    q, x = names("q"), names("x")
    o = parse_source_options({"uri": broker_url, "queue": q, "exchange": x})
    with pytest.raises(ValueError, match=f"Exchange '{x}' \\(option 'exchange'\\) does not "
                                         "exist.*exchangeDeclare=true"):
        DriverConsumer(o).open()
    o = parse_source_options({"uri": broker_url, "queue": q, "exchange": x,
                              "exchangedeclare": "true", "bindingkeys": "eu.*,us.orders"})
    c = DriverConsumer(o)
    c.open()
    try:
        _publish_to(broker_url, x, [("eu.orders", b"1", None), ("us.orders", b"2", None),
                                    ("asia.orders", b"3", None), ("eu.pay", b"4", None)])
        assert _drain_count(c, q, 3) == 3   # asia.orders and eu.pay match no key
    finally:
        c.close()
    with pika_conn(broker_url) as conn:   # the queue outlives the consumer, quorum by default
        ch = conn.channel()
        ok = ch.queue_declare(q, passive=True)
        assert ok.method.message_count == 3   # requeued on close
        _publish_to(broker_url, x, [("eu.x", b"5", None)])
        assert ch.queue_declare(q, passive=True).method.message_count == 4
        with pytest.raises(pika.exceptions.ChannelClosedByBroker, match="PRECONDITION|406"):
            conn.channel().queue_declare(q, durable=True,
                                         arguments={"x-queue-type": "classic"})


def test_consumer_headers_exchange_binding_arguments(broker_url, names):
    q, x = names("q"), names("x")
    o = parse_source_options({"uri": broker_url, "queue": q, "exchange": x,
                              "exchangedeclare": "true", "exchangetype": "headers",
                              "queuearguments": '{"x-queue-type": "classic"}',
                              "bindingarguments": '{"x-match": "all", "format": "pdf", '
                                                  '"type": "report"}'})
    c = DriverConsumer(o)
    c.open()
    c.close()
    _publish_to(broker_url, x, [("", b"1", {"format": "pdf", "type": "report"}),
                                ("", b"2", {"format": "pdf"}),
                                ("", b"3", {"format": "pdf", "type": "report", "x": 1})])
    with pika_conn(broker_url) as conn:
        assert conn.channel().queue_declare(q, passive=True).method.message_count == 2


@pytest.mark.spark
def test_subscription_outlives_the_query_restart_loses_nothing(spark, broker_url, names,
                                                               tmp_path):
    """A topic subscription read by a query; the query stops, messages are published, the
    query restarts from its checkpoint: every matching message is read (at least once), none
    of the others."""
    q, x = names("q"), names("x")
    with pika_conn(broker_url) as conn:   # the publishers' exchange exists before the query
        conn.channel().exchange_declare(x, "topic", durable=True)
    got = []

    def collect(bdf, batch_id):
        got.extend(bytes(r.body) for r in bdf.select("body").collect())

    def run():
        df = (spark.readStream.format("amqp").option("uri", broker_url).option("queue", q)
              .option("exchange", x).option("bindingKeys", "orders.eu,orders.us").load())
        return (df.writeStream.foreachBatch(collect).trigger(processingTime="0 seconds")
                .option("checkpointLocation", str(tmp_path / "ck")).start())

    def send(tag, n):
        _publish_to(broker_url, x, [(f"orders.{'eu' if i % 2 else 'us'}", b"%s%02d" % (tag, i),
                                     None) for i in range(n)]
                    + [("orders.asia", b"no-" + tag, None)])

    def wait_rows(sq, n, what):
        wait_until(lambda: len(set(got)) >= n or (not sq.isActive and _failed(sq)), 180,
                   what=f"{what}: {n} distinct rows, got {len(set(got))}")

    sq = run()
    try:
        wait_until(lambda: _consumers(broker_url, q) > 0 or (not sq.isActive and _failed(sq)),
                   180, what="the subscription queue's consumer")
        send(b"a", 30)                                  # while the query runs
        wait_rows(sq, 30, "first run")
    finally:
        sq.stop()
    send(b"b", 20)                                      # while it is stopped: kept in the queue
    sq = run()
    try:
        wait_until(lambda: _consumers(broker_url, q) > 0 or (not sq.isActive and _failed(sq)),
                   180, what="the restarted consumer")
        send(b"c", 10)
        wait_rows(sq, 60, "after the restart")
    finally:
        sq.stop()
    want = {b"%s%02d" % (t, i) for t, n in ((b"a", 30), (b"b", 20), (b"c", 10))
            for i in range(n)}
    assert set(got) == want                             # 0 lost, no orders.asia message


def _consumers(url, q):
    try:
        with pika_conn(url) as c:
            return c.channel().queue_declare(q, passive=True).method.consumer_count
    except Exception:  # noqa: BLE001 - not declared yet
        return 0


def _failed(sq):
    raise AssertionError(f"the streaming query stopped: {sq.exception()}")
