"""Large messages through the amqp source with *default* options and the default driver
memory (issue 19): 1 GiB of 256 KiB messages and 200 messages of 8 MiB drain completely,
every message exactly once, the queue empty afterwards, no OutOfMemoryError. Each run prints
the source runner's peak RSS and the driver JVM's heap (see README "Large messages").

Own embedded broker (its memory alarm raised above the 1 GiB these tests hold), the shared
SparkSession (local[2], default spark.driver.memory), Trigger.AvailableNow into foreachBatch,
which collects only the 8-byte id at the head of every body. About 30-45 s each here.
"""

from __future__ import annotations

import time

import pytest

from spark_amqp.bench.memory import QueryMemory
from spark_amqp.client import connect

# a loaded 2-core machine (load average 15+) needs minutes for these; ~30-45 s when quiet
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1800)]

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def big_broker():
    from spark_amqp import EmbeddedBroker
    from spark_amqp.broker.config import BrokerConfig

    with EmbeddedBroker(config=BrokerConfig(memory_high_watermark=4 << 30)) as broker:
        yield broker


def _fill(url: str, queue: str, n: int, size: int) -> None:
    filler = b"." * (size - 8)
    with connect(url) as conn:
        ch = conn.channel()
        ch.queue_declare(queue, durable=True)
        ch.confirm_select()
        chunk = max(1, (64 * MiB) // size)
        for lo in range(0, n, chunk):
            ch.publish_batch([(b"%08d" % i + filler, "", queue, None)
                              for i in range(lo, min(n, lo + chunk))])
            assert ch.wait_for_confirms(timeout=300).nacked == []
        assert ch.queue_declare(queue, passive=True).message_count == n


def _drain_with_defaults(spark, url, queue, n, size, tmp_path, capsys):
    ids: list[bytes] = []
    sizes: set[int] = set()
    batches: list[int] = []  # rows per batch with rows

    def collect(df, batch_id):
        rows = df.selectExpr("substring(body, 1, 8) AS id", "length(body) AS n").collect()
        for r in rows:
            ids.append(bytes(r.id))
            sizes.add(r.n)
        if rows:
            batches.append(len(rows))

    df = spark.readStream.format("amqp").option("uri", url).option("queue", queue).load()
    t0 = time.monotonic()
    with QueryMemory(spark) as mem:
        q = (df.writeStream.foreachBatch(collect).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "cp")).start())
        assert q.awaitTermination(600), "the AvailableNow query did not finish"
    took = time.monotonic() - t0
    assert q.exception() is None, q.exception()
    assert len(ids) == n, f"{len(ids)} rows for {n} messages"
    assert sorted(ids) == [b"%08d" % i for i in range(n)], "a message is missing or repeated"
    assert sizes == {size}
    with connect(url) as conn:
        ok = conn.channel().queue_declare(queue, passive=True)
        assert (ok.message_count, ok.consumer_count) == (0, 0), "messages left in the queue"
    with capsys.disabled():
        print(f"\n{n} x {size // 1024} KiB: {took:.1f} s, {len(batches)} batches, "
              f"{n * size / MiB / took:.1f} MB/s; {mem.figures.text()}")
    # the driver holds a few batches and maxBufferedBytes (32 MiB), not the queue (issue 19:
    # <= 512 MiB); a lag poll on the consumers' connection once pulled in the whole queue
    # (1.1 GiB for this 1 GiB one). 0: no /proc here, not measured.
    assert mem.figures.runner_rss_peak <= 512 * MiB, mem.figures.text()
    return mem.figures, batches


def test_one_gib_of_256_kib_messages_with_defaults(spark, big_broker, unique, tmp_path, capsys):
    q = unique("large256k")
    n, size = 4000, 256 * 1024
    _fill(big_broker.url, q, n, size)
    try:
        figures, batches = _drain_with_defaults(spark, big_broker.url, q, n, size, tmp_path,
                                                capsys)
        # maxBytesPerTrigger (16 MiB) cut the batches: ~64 messages each, never more
        assert max(batches) == 16 * MiB // size
    finally:
        with connect(big_broker.url) as conn:
            conn.channel().queue_delete(q)


def test_200_messages_of_8_mib_with_defaults(spark, big_broker, unique, tmp_path, capsys):
    q = unique("large8m")
    n, size = 200, 8 * MiB
    _fill(big_broker.url, q, n, size)
    try:
        figures, batches = _drain_with_defaults(spark, big_broker.url, q, n, size, tmp_path,
                                                capsys)
        assert max(batches) == 2
    finally:
        with connect(big_broker.url) as conn:
            conn.channel().queue_delete(q)


def test_message_above_max_message_bytes_fails_clearly_nothing_acked(broker_url, unique):
    # no Spark needed: the driver's reader as Spark drives it (each latestOffset's start is the
    # previous end, i.e. that batch was committed). The body above maxMessageBytes fails the
    # query naming the queue, the size and the option; the broker keeps every message not
    # planned into a committed batch.
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from spark_amqp.spark.source.queues.options import parse_source_options
    from spark_amqp.spark.source.queues.errors import MessageTooLarge
    from spark_amqp.spark.source.queues.micro_batch_stream import AmqpQueueMicroBatchStream
    from spark_amqp.spark.source.queues.offsets import SourceOffset

    q = unique("toolarge")
    with connect(broker_url) as conn:
        ch = conn.channel()
        ch.queue_declare(q, durable=True)
        for body in (b"a" * 10, b"b" * 300_000, b"c" * 10):
            ch.basic_publish(body, "", q)
    r = AmqpQueueMicroBatchStream(parse_source_options(
        {"queue": q, "uri": broker_url, "maxMessageBytes": "200000"}))
    start = r.initialOffset()
    committed = 0
    try:
        with pytest.raises(MessageTooLarge) as err:
            deadline = time.monotonic() + 60  # (a reconnect backs off 0.5 s first)
            while time.monotonic() < deadline:
                committed = SourceOffset.from_dict(start).get(q)  # acked by this call
                start = r.latestOffset(start, ReadAllAvailable())
                time.sleep(0.02)
        assert f"queue {q!r} holds a message of 300000 bytes" in str(err.value)
        assert "maxMessageBytes (200000 bytes)" in str(err.value)
    finally:
        r.stop()
    try:
        with connect(broker_url) as conn:
            ch = conn.channel()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # the broker requeues after the close
                left = ch.queue_declare(q, passive=True).message_count
                if left >= 3 - committed:
                    break
                time.sleep(0.05)
            # acked: at most what was planned and committed (the failing call may have
            # acked its start first); the big message and the one after it are still there
            assert 3 - committed <= left <= 3 and left >= 2, (left, committed)
    finally:
        with connect(broker_url) as conn:
            conn.channel().queue_delete(q)
