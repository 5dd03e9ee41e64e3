"""The data directory's filesystem fails while the broker runs (ext4 shut down: every write
gets EIO, as on an ext4 that hit an error and went read-only). Publishes after that are
nacked, none is confirmed; after the filesystem is mounted again every confirmed message is
there. Root + loop devices only (skipped otherwise); ~3 s."""

from __future__ import annotations

import pika
import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.broker import BrokerConfig

pytestmark = pytest.mark.faults


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
def test_filesystem_failing_under_the_broker_nacks_and_loses_nothing_confirmed(ext4_fs, queue_type):
    fs = ext4_fs("16m")
    cfg = BrokerConfig()
    cfg.disk_free_limit = 0
    confirmed, nacked = [], []
    with EmbeddedBroker(data_dir=fs.path, config=cfg) as b:
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = c.channel()
        ch.queue_declare("fq", durable=True, arguments={"x-queue-type": queue_type})
        ch.confirm_delivery()
        for i in range(200):
            if i == 100:
                fs.fail()
            try:
                ch.basic_publish("", "fq", b"%05d" % i, pika.BasicProperties(delivery_mode=2))
            except pika.exceptions.NackError:
                nacked.append(i)
            else:
                confirmed.append(i)
        c.close()
        assert b.broker.store.commit_failures > 0
    assert confirmed == list(range(100)) and nacked == list(range(100, 200))
    fs.remount()
    with EmbeddedBroker(data_dir=fs.path, config=cfg) as b:
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = c.channel()
        got = []
        while (r := ch.basic_get("fq", auto_ack=True))[0] is not None:
            got.append(int(r[2]))
        c.close()
    assert got == confirmed
