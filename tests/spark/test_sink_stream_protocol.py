"""Exactly-once writes into a stream (issue 39, item 2): the amqp sink with a
``rabbitmq-stream://`` uri and ``producerName``, in Spark jobs, on RabbitMQ 3.10.8 (port 5552)
and on the embedded broker (``stream_port``):

- the same batch write run twice: the stream grows once;
- a streaming copy of a stream while a publisher writes into its source: every row once;
- a streaming copy whose process is SIGKILLed mid-batch several times and restarted from its
  checkpoint (tests/spark/sink_stream_query_runner.py): every row in the target once
  (``lost=0 duplicates=0`` printed).

The target is read back with the project's stream client (stream_sink_helpers.read_stream).
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter

import pytest

from source_helpers import HERE, ROOT, PhasedPublisher, fast_publish, kill_group, wait_until
from stream_sink_helpers import body_of, read_stream, streams, urls  # noqa: F401

pytestmark = pytest.mark.spark


def _bodies(client, stream, want=None):
    return [body_of(m).decode() for _o, m in read_stream(client, stream, want=want)]


def _check_once(got: list, want: set, label: str) -> None:
    counts = Counter(got)
    dups = sum(c - 1 for c in counts.values())
    lost = len(want - set(counts))
    extra = len(set(counts) - want)
    print(f"\n[{label}] rows={len(got)} expected={len(want)} lost={lost} duplicates={dups}")
    assert (lost, dups, extra) == (0, 0, 0)


def test_batch_write_twice_the_stream_grows_once(spark, urls, streams):
    s = streams()
    df = spark.range(0, 6000, numPartitions=4).selectExpr("concat('row-', id) as body")
    for _ in range(2):
        (df.write.format("amqp").mode("append").option("uri", urls[0]).option("stream", s)
         .option("producerName", "batch-writer").save())
    got = _bodies(streams.client, s, want=6000)
    _check_once(got, {f"row-{i}" for i in range(6000)}, f"batch write twice {urls[0]}")
    # each partition's producer stored its last id: batch 0, row 1500 of 1500
    seqs = {streams.client.query_publisher_sequence(f"batch-writer-{p}", s) for p in range(4)}
    assert seqs == {1500}
    # a publishing_id column: a second write of overlapping ids adds only the new rows
    s2 = streams()
    ids = spark.range(0, 1000, numPartitions=2).selectExpr("concat('id-', id) as body",
                                                           "id + 1 as publishing_id")
    for part in (ids.where("publishing_id <= 700"), ids):
        (part.write.format("amqp").mode("append").option("uri", urls[0]).option("stream", s2)
         .option("producerName", "id-writer").save())
    _check_once(_bodies(streams.client, s2, want=1000), {f"id-{i}" for i in range(1000)},
                f"publishing_id column {urls[0]}")


def test_bad_options_fail_at_save(spark, urls):
    from spark_amqp.spark.errors import SinkOptionError  # noqa: F401

    df = spark.range(3).selectExpr("cast(id as string) body", "cast(id as double) publishing_id")
    with pytest.raises(Exception, match="producerName"):
        (df.select("body").write.format("amqp").mode("append").option("uri", urls[1])
         .option("stream", "x").option("producerName", "p").save())
    with pytest.raises(Exception, match="publishing_id` has type double"):
        (df.write.format("amqp").mode("append").option("uri", urls[0]).option("stream", "x")
         .option("producerName", "p").save())


@pytest.mark.timeout(600)
def test_streaming_copy_while_a_publisher_writes_its_source(spark, urls, streams, tmp_path):
    src, dst = streams(), streams()
    pre = 5000
    fast_publish(urls[1], src, [b"pre-%05d" % i for i in range(pre)])
    pub = PhasedPublisher(urls[1], src, [("live", 400, 6000)], lambda _: False, min_seconds=0,
                          max_seconds=[120], first=pre,
                          body=lambda _, i: b"live-%05d" % i).start()
    q = None
    try:
        q = (spark.readStream.format("amqp").option("uri", urls[1]).option("stream", src)
             .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "2000")
             .load().select("body")
             .writeStream.format("amqp").option("uri", urls[0]).option("stream", dst)
             .option("producerName", "copier")
             .option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="500 milliseconds").start())
        wait_until(lambda: pub.sent >= 2500 or not pub.thread.is_alive(), 120,
                   what="the live publisher to get going")
        pub.stop()
        assert not pub.failures and pub.error is None, (pub.failures, pub.error)
        total = pre + pub.sent
        def copied():
            assert q.exception() is None, q.exception()
            return len(read_stream(streams.client, dst)) >= total

        wait_until(copied, 300, interval=2.0, what=f"{total} rows in the target stream")
    finally:
        if q is not None:
            q.stop()
        if pub.thread.is_alive():
            pub.stopping.set()
            pub.thread.join(60)
    want = {f"pre-{i:05d}" for i in range(pre)} | {f"live-{i:05d}" for i in range(pre, total)}
    _check_once(_bodies(streams.client, dst, want=total), want,
                f"streaming copy, live publisher {urls[0]} ({pub.sent} published during it)")


def _start(args, log):
    import os

    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=str(ROOT) + os.pathsep + str(HERE) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, str(HERE / "sink_stream_query_runner.py"), *args],
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, env=env,
                            start_new_session=True, cwd=str(ROOT))


CRASHES = 3
PRE = 20_000


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_sigkill_mid_batch_then_restart_every_row_once(urls, streams, tmp_path):
    """The copy's process is SIGKILLed at random points after a batch completed (so mostly
    mid-batch: each batch writes while the next is planned) CRASHES times while a publisher
    writes into the source, then restarted from the checkpoint and run to the end
    (availableNow): the target holds every source row exactly once."""
    src, dst = streams(), streams()
    fast_publish(urls[1], src, [b"%06d" % i for i in range(PRE)])
    pub = PhasedPublisher(urls[1], src, [("live", 200)], lambda _: False, min_seconds=0,
                          max_seconds=[3600], first=PRE, body=lambda _, i: b"%06d" % i).start()
    ck, log = tmp_path / "ck", tmp_path / "runner.log"
    opts = ["startingOffsets=earliest", "maxMessagesPerTrigger=5000",
            "maxMessagesPerPartition=2500"]
    rnd = random.Random()
    mid = 0
    t0 = time.monotonic()
    try:
        for run in range(CRASHES):
            markers = tmp_path / f"m{run}"
            p = _start([urls[1], src, urls[0], dst, str(ck), str(markers), "0 seconds", "copy",
                        *opts], log)
            try:
                wait_until(lambda: p.poll() is not None or any(markers.glob("batch-*")), 420,
                           interval=0.3, what=f"a batch in run {run}")
                assert p.poll() is None, log.read_text()[-3000:]
                time.sleep(rnd.uniform(0.2, 2.0))
                mid += 1
            finally:
                kill_group(p)
        pub.stop()
        assert not pub.failures and pub.error is None, (pub.failures, pub.error)
        markers = tmp_path / "final"
        p = _start([urls[1], src, urls[0], dst, str(ck), str(markers), "availableNow", "copy",
                    *opts], log)
        try:
            assert p.wait(timeout=600) == 0, log.read_text()[-3000:]
        finally:
            kill_group(p)
        assert (markers / "done").exists()
    finally:
        if pub.thread.is_alive():
            pub.stopping.set()
            pub.thread.join(60)
    total = PRE + pub.sent
    got = _bodies(streams.client, dst, want=total)
    _check_once(got, {"%06d" % i for i in range(total)},
                f"sink SIGKILL test {urls[0]}: {CRASHES} kills after a batch, restarted from "
                f"the checkpoint, {pub.sent} published during the runs, "
                f"{time.monotonic() - t0:.0f}s")
