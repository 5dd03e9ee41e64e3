"""The disk alarm (``disk_free_limit``, RabbitMQ's disk alarms): below the limit, publishing
connections get connection.blocked "low on disk" and are not read; above it again,
connection.unblocked. The first test fakes the free space (fast, no root); the second one
fills a real 3 MB tmpfs (root only) and checks that the alarm stops publishers before the
disk is full, so nothing is nacked or lost."""

from __future__ import annotations

import logging
import threading
import time

import pika
import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.broker.config import BrokerConfig, ConfigError, load_config

from faults_helpers import resize_fs

pytestmark = pytest.mark.faults


def _wait(cond, timeout=20.0, what="condition", pump=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if pump is not None:
            pump()
        else:
            time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _on_loop(b: EmbeddedBroker, fn) -> None:
    b._loop.call_soon_threadsafe(fn)


def test_disk_free_limit_config(tmp_path):
    f = tmp_path / "b.toml"
    f.write_text('[broker]\ndisk_free_limit = "2GiB"\n')
    assert load_config(f).disk_free_limit_bytes() == 2 << 30
    f.write_text('[broker]\ndisk_free_limit.absolute = "50MB"\n')
    assert load_config(f).disk_free_limit_bytes() == 50_000_000
    f.write_text('[broker]\ndisk_free_limit.relative = 0.5\n')
    cfg = load_config(f)
    assert cfg.disk_free_limit_relative == 0.5 and cfg.disk_free_limit_bytes() > 0
    assert BrokerConfig().disk_free_limit_bytes() == 50_000_000  # RabbitMQ's default
    f.write_text('[broker]\ndisk_free_limit = "plenty"\n')
    with pytest.raises(ConfigError, match="disk_free_limit must be a byte count"):
        load_config(f)


def test_disk_alarm_blocks_and_unblocks_publishers(tmp_path, caplog):
    free = {"bytes": 10 << 30}
    cfg = BrokerConfig()
    cfg.disk_free_limit = 100 << 20
    with EmbeddedBroker(data_dir=tmp_path, config=cfg) as b:
        broker = b.broker
        broker.disk_free = lambda: free["bytes"]
        broker.DISK_CHECK_INTERVAL = 0.05
        _on_loop(b, broker._check_disk)
        events: list = []
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        c.add_on_connection_blocked_callback(lambda _c, m: events.append(("blocked", m.method.reason)))
        c.add_on_connection_unblocked_callback(lambda _c, m: events.append(("unblocked",)))
        ch = c.channel()
        ch.queue_declare("aq", durable=True)
        ch.basic_publish("", "aq", b"before", pika.BasicProperties(delivery_mode=2))
        with caplog.at_level(logging.WARNING, logger="spark_amqp.broker"):
            free["bytes"] = 10 << 20
            _wait(lambda: events, what="connection.blocked", pump=lambda: c.process_data_events(0.05))
            assert events == [("blocked", "low on disk")]
            assert broker.alarms == {"disk": "low on disk"}
            # not read while blocked: the publish stays in the socket
            ch.basic_publish("", "aq", b"while-blocked", pika.BasicProperties(delivery_mode=2))
            c.process_data_events(0.3)
            c2 = pika.BlockingConnection(pika.URLParameters(b.url))
            assert c2.channel().queue_declare("aq", durable=True, passive=True).method.message_count == 1
            free["bytes"] = 200 << 20
            _wait(lambda: len(events) == 2, what="connection.unblocked",
                  pump=lambda: c.process_data_events(0.05))
            assert events[1] == ("unblocked",) and broker.alarms == {}
            _wait(lambda: c2.channel().queue_declare("aq", durable=True, passive=True).method.message_count == 2,
                  what="the blocked publish to arrive")
        logs = caplog.text
        assert "disk alarm:" in logs and "below disk_free_limit" in logs and "disk alarm cleared" in logs
        c2.close()
        c.close()


def test_disk_alarm_without_limit_is_off(tmp_path):
    cfg = BrokerConfig()
    cfg.disk_free_limit = 0
    with EmbeddedBroker(data_dir=tmp_path, config=cfg) as b:
        b.broker.disk_free = lambda: 0
        done = threading.Event()
        _on_loop(b, lambda: (b.broker._check_disk(), done.set()))
        done.wait(10)
        assert b.broker.alarms == {}


def test_disk_alarm_on_a_small_disk_stops_publishers_before_it_is_full(small_fs, caplog):
    """3 MB tmpfs, disk_free_limit 2 MB: publishing stops with "low on disk" long before the
    disk is full; every publish is acked (none nacked) and survives a restart."""
    data = small_fs("3m")
    cfg = BrokerConfig()
    cfg.disk_free_limit = 2_000_000
    with EmbeddedBroker(data_dir=data, config=cfg) as b:
        b.broker.DISK_CHECK_INTERVAL = 0.05
        c = pika.BlockingConnection(pika.URLParameters(b.url + "?blocked_connection_timeout=2"))
        ch = c.channel()
        ch.queue_declare("sq", durable=True)
        ch.confirm_delivery()
        confirmed, nacked = [], 0
        with pytest.raises((pika.exceptions.ConnectionBlockedTimeout, pika.exceptions.AMQPConnectionError)):
            for i in range(3000):
                try:
                    ch.basic_publish("", "sq", b"%06d" % i + b"x" * 1000, pika.BasicProperties(delivery_mode=2))
                except pika.exceptions.NackError:
                    nacked += 1
                else:
                    confirmed.append(i)
        # pika gave up after 2 s of connection.blocked (its blocked_connection_timeout)
        assert b.broker.alarms == {"disk": "low on disk"}
        assert nacked == 0 and confirmed and b.broker.store.commit_failures == 0
        assert b.broker.disk_free_bytes >= 1_000_000, "the alarm came too late: the disk nearly filled"
        resize_fs(data, "64m")  # space freed: the alarm clears by itself
        _wait(lambda: b.broker.alarms == {}, what="the disk alarm to clear")
    with EmbeddedBroker(data_dir=data, config=cfg) as b:
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        n = c.channel().queue_declare("sq", durable=True, passive=True).method.message_count
        c.close()
    assert n >= len(confirmed)
