"""``flight_delays.py --delete-topology``: what the job declared (its exchanges, queues and
super stream) is deleted at the end, so a run against a RabbitMQ leaves nothing behind; on the
embedded broker and on RabbitMQ (no Spark: the topology calls the job makes)."""

from __future__ import annotations

import pytest

from spark_amqp.client import connect
from spark_amqp.jobs.delays.command import parse_args
from spark_amqp.jobs.delays.topology import (declare_alerts, declare_super_stream_fresh,
                                             declare_topology, delete_job_topology)
from spark_amqp.protocol.errors import NotFound


def _exists(uri: str, kind: str, name: str) -> bool:
    with connect(uri) as conn:
        ch = conn.channel()
        try:
            (ch.queue_declare if kind == "queue" else ch.exchange_declare)(name, passive=True)
        except NotFound:
            return False
        return True


def test_the_flag_is_parsed_and_documented():
    assert parse_args(["--delete-topology"]).delete_topology is True
    assert parse_args([]).delete_topology is False


def test_delete_topology_leaves_nothing(broker_url, unique):
    q, alerts, fx, ax = unique("flights"), unique("alerts"), unique("fx"), unique("ax")
    args = parse_args(["--queue", q, "--alerts-queue", alerts, "--exchange", fx,
                       "--alerts-exchange", ax, "--delete-topology"])
    try:
        declare_topology(broker_url, q, alerts, purge=True, flights_exchange=fx,
                         alerts_exchange=ax)
        assert all(_exists(broker_url, k, n) for k, n in (("queue", q), ("queue", alerts),
                                                          ("exchange", fx), ("exchange", ax)))
        assert delete_job_topology(broker_url, args) == [q, alerts, fx, ax]
        assert not any(_exists(broker_url, k, n) for k, n in (
            ("queue", q), ("queue", alerts), ("exchange", fx), ("exchange", ax)))
        assert delete_job_topology(broker_url, args) == []       # again: nothing left
    finally:
        with connect(broker_url) as conn:
            ch = conn.channel()
            for n in (q, alerts):
                ch.queue_delete(n)
            for n in (fx, ax):
                ch.exchange_delete(n)


def test_delete_topology_of_the_stream_mode(embedded_broker, unique):
    uri, name, ax, alerts = embedded_broker.url, unique("ss"), unique("ax"), unique("alerts")
    fx = unique("fx")   # the queue mode's flights exchange: not the stream mode's to delete
    args = parse_args(["--stream", "--super-stream", name, "--alerts-queue", alerts,
                       "--alerts-exchange", ax, "--exchange", fx, "--delete-topology"])
    with connect(uri) as conn:
        conn.channel().exchange_declare(fx, "topic", durable=True)
    declare_alerts(uri, alerts, ax)
    parts = declare_super_stream_fresh(uri, name, 3)
    deleted = delete_job_topology(uri, args)
    assert set(deleted) == {alerts, *parts, ax, name}
    assert not any(_exists(uri, "queue", p) for p in parts) and not _exists(uri, "exchange", name)
    assert _exists(uri, "exchange", fx)
