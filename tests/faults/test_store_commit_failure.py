"""A failed store commit is never confirmed (issue #17), tested by injecting the failure.

The sqlite connection of the store is wrapped so that COMMIT raises the error sqlite gives on
a full disk; no mount or root needed (fast, runs everywhere).
"""

from __future__ import annotations

import sqlite3
import threading
import time

import pika
import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.broker.store import SqliteStore
from faults_helpers import wait_for

pytestmark = pytest.mark.faults


class FailingDB:
    """Delegates to a sqlite3 connection; COMMIT raises while ``failing`` is set."""

    def __init__(self, db):
        self.db = db
        self.failing = threading.Event()
        self.commits_refused = 0

    def execute(self, sql, *args):
        if sql == "COMMIT" and self.failing.is_set():
            self.commits_refused += 1
            raise sqlite3.OperationalError("database or disk is full")
        return self.db.execute(sql, *args)

    def executemany(self, sql, rows):
        return self.db.executemany(sql, rows)

    def close(self):
        self.db.close()




class _Msg:
    exchange, routing_key, props_raw, redelivered, delivery_count = "", "q", b"\x00\x00", False, 0

    def __init__(self, body):
        self.body = body
        self.store_id = None


class _Q:
    def __init__(self, name):
        self.name, self.auto_delete, self.arguments = name, False, {}


def test_store_reports_failed_commit_and_retries_metadata(tmp_path):
    results = []
    store = SqliteStore(str(tmp_path), on_commit=lambda a, b, e: results.append((a, b, e)),
                        retry_interval=0.05)
    fdb = store.db = FailingDB(store.db)
    fdb.failing.set()
    store.save_queue("/", _Q("q"))
    t1 = store.add_message("/", "q", _Msg(b"lost"))
    store.flush()
    wait_for(lambda: results, what="the failed commit's report")
    first, last, err = results[0]
    assert first <= t1 <= last and isinstance(err, sqlite3.OperationalError)
    assert store.durable_ticket < t1, "a failed commit must not advance durable_ticket"
    assert store.commit_failures >= 1 and store.last_error is err
    # the queue declaration is retried on its own, every retry_interval
    wait_for(lambda: fdb.commits_refused >= 3, what="retries of the carried-over declaration")
    fdb.failing.clear()
    wait_for(lambda: store.last_error is None, what="a successful retry")
    t2 = store.add_message("/", "q", _Msg(b"kept"))
    store.flush()
    wait_for(lambda: len(results) >= 2, what="the second commit's report")
    assert results[-1][1] >= t2 and results[-1][2] is None
    data = store.load()
    assert [q["name"] for q in data["queues"]] == ["q"]
    assert [bytes(m[6]) for m in data["messages"]] == [b"kept"]  # the nacked one is not written
    store.close()


def test_store_without_callback_never_advances_on_failure(tmp_path):
    store = SqliteStore(str(tmp_path))
    fdb = store.db = FailingDB(store.db)
    fdb.failing.set()
    t = store.add_message("/", "q", _Msg(b"x"))
    store.flush()
    wait_for(lambda: fdb.commits_refused >= 1, what="the refused commit")
    time.sleep(0.05)
    assert store.durable_ticket < t
    fdb.failing.clear()
    t = store.add_message("/", "q", _Msg(b"y"))
    store.flush()
    wait_for(lambda: store.durable_ticket >= t, what="durable_ticket after a good commit")
    store.close()


@pytest.fixture
def failing_broker(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path) as b:
        fdb = b.broker.store.db = FailingDB(b.broker.store.db)
        yield b, fdb


def test_failed_commit_nacks_publishes_then_acks_again(failing_broker, tmp_path):
    b, fdb = failing_broker
    c = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = c.channel()
    ch.queue_declare("dq", durable=True)
    ch.confirm_delivery()
    ch.basic_publish("", "dq", b"ok-before", pika.BasicProperties(delivery_mode=2))
    fdb.failing.set()
    for i in range(3):
        with pytest.raises(pika.exceptions.NackError):
            ch.basic_publish("", "dq", b"nacked-%d" % i, pika.BasicProperties(delivery_mode=2))
    # a transient message is not stored: its confirm does not depend on the disk
    ch.basic_publish("", "dq", b"transient")
    fdb.failing.clear()
    ch.basic_publish("", "dq", b"ok-after", pika.BasicProperties(delivery_mode=2))
    c.close()
    b.stop()
    with EmbeddedBroker(data_dir=tmp_path) as b2:
        c = pika.BlockingConnection(pika.URLParameters(b2.url))
        ch = c.channel()
        bodies = []
        while (r := ch.basic_get("dq", auto_ack=True))[0] is not None:
            bodies.append(r[2])
        c.close()
    assert bodies == [b"ok-before", b"ok-after"]


def test_failed_commit_fails_tx_commit(failing_broker):
    b, fdb = failing_broker
    c = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = c.channel()
    ch.queue_declare("tq", durable=True)
    ch.tx_select()
    ch.basic_publish("", "tq", b"in-tx", pika.BasicProperties(delivery_mode=2))
    fdb.failing.set()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
        ch.tx_commit()
    assert ei.value.reply_code == 506 and "tx.commit failed" in ei.value.reply_text
    fdb.failing.clear()
    ch = c.channel()
    ch.tx_select()
    ch.basic_publish("", "tq", b"in-tx-2", pika.BasicProperties(delivery_mode=2))
    ch.tx_commit()
    c.close()
