"""The ``amqp`` sink's task publisher under a broker that blocks publishing (disk or memory
alarm): it waits at most ``blockedTimeoutMs``, then fails the task with the broker's reason;
when the alarm clears in time the task completes. Against the embedded broker, the alarm
raised by faking the free disk space / lowering the memory watermark (no root, ~3 s)."""

from __future__ import annotations

import threading
import time

import pika
import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.broker.config import BrokerConfig
from spark_amqp.protocol import BasicProperties
from spark_amqp.spark.sink.options import parse_sink_options
from spark_amqp.spark.sink.publish import AmqpSinkError, TaskPublisher

pytestmark = pytest.mark.faults

PERSISTENT = BasicProperties(delivery_mode=2)


def _msgs(n: int, queue: str):
    return [(b"m%05d" % i, "", queue, PERSISTENT, False) for i in range(n)]


@pytest.fixture
def alarm_broker(tmp_path):
    """A durable embedded broker whose free disk space the test controls."""
    free = {"bytes": 10 << 30}
    cfg = BrokerConfig()
    cfg.disk_free_limit = 100 << 20
    with EmbeddedBroker(data_dir=tmp_path, config=cfg) as b:
        b.broker.disk_free = lambda: free["bytes"]
        b.broker.DISK_CHECK_INTERVAL = 0.05
        b._loop.call_soon_threadsafe(b.broker._check_disk)
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        c.channel().queue_declare("sinkq", durable=True)
        c.close()
        yield b, free


def _count(url: str, queue: str) -> int:
    c = pika.BlockingConnection(pika.URLParameters(url))
    try:
        return c.channel().queue_declare(queue, durable=True, passive=True).method.message_count
    finally:
        c.close()


def test_blocked_longer_than_timeout_fails_the_task_naming_the_reason(alarm_broker):
    b, free = alarm_broker
    free["bytes"] = 1 << 20  # below the 100 MB limit: disk alarm
    deadline = time.monotonic() + 10
    while not b.broker.alarms and time.monotonic() < deadline:
        time.sleep(0.01)
    opts = parse_sink_options({"uri": b.url, "blockedtimeoutms": "500", "confirmtimeoutms": "60000"})
    t0 = time.monotonic()
    with pytest.raises(AmqpSinkError, match=r"partition 3: the broker blocked publishing "
                                            r"\(connection.blocked: low on disk\) for longer "
                                            r"than blockedTimeoutMs=500") as ei:
        with TaskPublisher(opts, "partition 3") as pub:
            # RabbitMQ and this broker block a connection once it has published: the first
            # read is still handled, what follows stays unread
            pub.publish(_msgs(200, "sinkq"))
            time.sleep(0.2)
            pub.publish(_msgs(200, "sinkq"))
            pub.finish()
    took = time.monotonic() - t0
    assert took < 10, f"the task hung for {took:.1f}s instead of failing after blockedTimeoutMs"
    assert "Spark retries it" in str(ei.value)
    assert pub.stats.confirmed < pub.stats.published  # nothing unconfirmed reported as written
    free["bytes"] = 10 << 30
    # the retried task (a new publisher) succeeds once the alarm is gone
    deadline = time.monotonic() + 10
    while b.broker.alarms and time.monotonic() < deadline:
        time.sleep(0.01)
    with TaskPublisher(opts, "partition 3, attempt 2") as pub:
        pub.publish(_msgs(200, "sinkq"))
        assert pub.finish().confirmed == 200
    assert 200 <= _count(b.url, "sinkq") <= 600


def test_block_that_clears_in_time_only_delays_the_task(alarm_broker):
    b, free = alarm_broker
    opts = parse_sink_options({"uri": b.url, "blockedtimeoutms": "20000"})
    with TaskPublisher(opts, "partition 0") as pub:
        pub.publish(_msgs(10, "sinkq"))
        pub.finish()
        free["bytes"] = 1 << 20
        deadline = time.monotonic() + 10
        while not b.broker.alarms and time.monotonic() < deadline:
            time.sleep(0.01)
        threading.Timer(1.0, lambda: free.__setitem__("bytes", 10 << 30)).start()
        t0 = time.monotonic()
        pub.publish(_msgs(50, "sinkq"))
        stats = pub.finish()
        assert stats.confirmed == 50 and time.monotonic() - t0 >= 0.5  # confirmed since the last finish()
    assert _count(b.url, "sinkq") == 60


def test_memory_alarm_reason_reaches_the_sink(tmp_path):
    cfg = BrokerConfig()
    cfg.memory_high_watermark = 50_000
    with EmbeddedBroker(config=cfg) as b:
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        c.channel().queue_declare("memq", durable=True)
        c.close()
        opts = parse_sink_options({"uri": b.url, "blockedtimeoutms": "500"})
        with pytest.raises(AmqpSinkError, match=r"connection.blocked: low on memory"):
            with TaskPublisher(opts, "p") as pub:
                pub.publish([(b"x" * 1000, "", "memq", None, False)] * 200)
                time.sleep(0.2)
                pub.publish([(b"x" * 1000, "", "memq", None, False)] * 200)
                pub.finish()


def test_cli_publish_progress_shows_blocked_reason(alarm_broker, capsys):
    from spark_amqp.tools.flights import OutgoingMessage
    from spark_amqp.tools.publishing import publish_messages
    from spark_amqp.client import connect

    b, free = alarm_broker
    free["bytes"] = 1 << 20
    deadline = time.monotonic() + 10
    while not b.broker.alarms and time.monotonic() < deadline:
        time.sleep(0.01)
    threading.Timer(1.5, lambda: free.__setitem__("bytes", 10 << 30)).start()
    msgs = (OutgoingMessage(body=b"m%d" % i, routing_key="sinkq") for i in range(300))
    with connect(b.url) as conn:
        stats = publish_messages(conn.channel(), msgs, "", total=300, batch_size=50,
                                 confirm_window=100, persistent=True)
    assert stats.confirmed == 300
    assert "blocked: low on disk" in capsys.readouterr().err
