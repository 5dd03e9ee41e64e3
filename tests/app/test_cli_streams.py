"""``spark-amqp streams``: super-stream topology and stream offsets, against both brokers."""

from __future__ import annotations

import json

import pika
import pytest

from spark_amqp.client.streams import murmur3_32, partition_for


def test_add_super_stream_topology_and_info(run, broker_url, unique, cleanup):
    name = unique("super")
    cleanup["exchanges"].append(name)
    cleanup["queues"].extend(f"{name}-{i}" for i in range(3))
    r = run("streams", "add-super-stream", name, "--partitions", 3, "--max-age", "7D", "--uri", broker_url)
    assert r.exit_code == 0, r.output
    assert f"{name}-2" in r.stdout
    # idempotent
    assert run("streams", "add-super-stream", name, "--partitions", 3, "--max-age", "7D",
               "--uri", broker_url).exit_code == 0
    c = pika.BlockingConnection(pika.URLParameters(broker_url))
    ch = c.channel()
    ch.exchange_declare(name, "direct", durable=True, passive=True)
    for i in range(3):   # streams with the given arguments (a different x-max-age is inequivalent)
        ch.queue_declare(f"{name}-{i}", durable=True, arguments={"x-queue-type": "stream", "x-max-age": "7D"})
    ch.confirm_delivery()
    # routing key "i" reaches partition i only (mandatory: unroutable would be returned)
    for i in range(3):
        for k in range(i + 1):
            ch.basic_publish(name, str(i), b"p%d-%d" % (i, k), mandatory=True)
    c.close()
    r = run("streams", "info", name, "--json", "--idle", 0.3, "--uri", broker_url)
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["stream"], x["first"], x["last"]) for x in rows] == [
        (f"{name}-0", 0, 0), (f"{name}-1", 0, 1), (f"{name}-2", 0, 2)]


def test_info_of_one_stream_and_of_an_empty_one(run, broker_url, unique, cleanup):
    q, empty = unique("s"), unique("empty")
    cleanup["queues"] += [q, empty]
    c = pika.BlockingConnection(pika.URLParameters(broker_url))
    ch = c.channel()
    for n in (q, empty):
        ch.queue_declare(n, durable=True, arguments={"x-queue-type": "stream"})
    ch.confirm_delivery()
    for i in range(5):
        ch.basic_publish("", q, b"m%d" % i)
    c.close()
    r = run("streams", "info", q, "--idle", 0.3, "--uri", broker_url)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == f"{q}: first offset 0, last offset 4"
    r = run("streams", "info", empty, "--idle", 0.3, "--uri", broker_url)
    assert r.stdout.strip() == f"{empty}: empty"
    r = run("streams", "info", unique("missing"), "--idle", 0.3, "--uri", broker_url)
    assert r.exit_code == 1 and "no stream" in r.output


def test_partition_for_is_murmur3_seed_104729():
    # MurmurHash3 x86_32 reference vectors (Appleby's SMHasher; mmh3.hash("foo") = -156908512)
    assert murmur3_32(b"foo") == 4138058784
    assert murmur3_32(b"hello") == 613153351
    assert murmur3_32(b"", 1) == 0x514E28B7
    assert partition_for("foo", 3) == murmur3_32(b"foo", 104729) % 3
    assert {partition_for(f"key{i}", 4) for i in range(100)} == {0, 1, 2, 3}
