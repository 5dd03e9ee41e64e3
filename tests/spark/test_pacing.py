"""Trigger pacing end to end (issue 29): minMessagesPerTrigger + maxTriggerDelay in queue mode
and stream mode, on both brokers (`broker_url`), a publisher writing in small bursts while
the query runs."""

from __future__ import annotations

import threading
import time

import pytest

from source_helpers import consumer_count, declare, delete, publish, wait_until
from stream_helpers import declare_stream

pytestmark = pytest.mark.spark

FIRST_BATCH = 180
MIN, DELAY, TOTAL, BURST = 40, 3.0, 100, 5


def _run_paced(spark, df, tmp_path, ready, send):
    """Run ``df`` with a 0-second processing trigger into foreachBatch; once ``ready(query)``
    holds, ``send(bodies)`` publishes TOTAL messages in bursts of BURST every 0.1 s. Returns
    ``[(batch rows, monotonic time)]`` and the bodies read."""
    batches, bodies = [], []

    def collect(bdf, batch_id):
        rows = [bytes(r.body) for r in bdf.select("body").collect()]
        if rows:
            batches.append((len(rows), time.monotonic()))
            bodies.extend(rows)

    sq = (df.writeStream.foreachBatch(collect).trigger(processingTime="0 seconds")
          .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        wait_until(lambda: ready(sq) or (not sq.isActive and _fail(sq)), FIRST_BATCH,
                   what="the source to connect")

        def publisher():
            for i in range(0, TOTAL, BURST):
                send([b"m%03d" % j for j in range(i, i + BURST)])
                time.sleep(0.1)

        t = threading.Thread(target=publisher)
        t.start()
        t.join(120)
        sent = time.monotonic()
        wait_until(lambda: len(bodies) >= TOTAL or (not sq.isActive and _fail(sq)),
                   FIRST_BATCH, what=f"{TOTAL} rows, got {len(bodies)} in {batches}")
    finally:
        sq.stop()
    assert sorted(bodies) == [b"m%03d" % j for j in range(TOTAL)]
    return batches, sent


def _fail(sq):
    raise AssertionError(f"the streaming query stopped: {sq.exception()}")


def _check_paced(batches, sent):
    # every batch but the last has the minimum; the publisher alone (5 rows per 0.1 s,
    # a trigger every few ms) would have made many small batches without it
    assert len(batches) >= 2, batches   # the query ran while the publisher wrote
    assert all(n >= MIN for n, _ in batches[:-1]), batches
    assert len(batches) <= TOTAL // MIN + 1, batches
    if batches[-1][0] < MIN:   # the remainder went when maxTriggerDelay passed
        prev = batches[-2][1] if len(batches) > 1 else None
        if prev is not None:
            assert batches[-1][1] - prev >= DELAY - 0.5, batches


def test_queue_mode_min_messages_per_trigger_and_delay(spark, broker_url, unique, tmp_path):
    q = unique("pace")
    declare(broker_url, q)
    try:
        df = (spark.readStream.format("amqp").option("uri", broker_url).option("queue", q)
              .option("minMessagesPerTrigger", MIN).option("maxTriggerDelay", f"{int(DELAY)}s")
              .load())
        batches, sent = _run_paced(spark, df, tmp_path,
                                   lambda sq: consumer_count(broker_url, q) > 0,
                                   lambda bodies: publish(broker_url, q, bodies))
        _check_paced(batches, sent)
    finally:
        delete(broker_url, q)


def test_stream_mode_min_messages_per_trigger_and_delay(spark, broker_url, unique, tmp_path):
    s = unique("pacest")
    declare_stream(broker_url, s)
    try:
        publish(broker_url, s, [b"old"])          # startingOffsets=latest starts after it
        df = (spark.readStream.format("amqp").option("uri", broker_url).option("stream", s)
              .option("minMessagesPerTrigger", MIN).option("maxTriggerDelay", f"{int(DELAY)}s")
              .load())

        def ready(sq):   # a trigger ran (so the start, latest, is resolved) and found nothing
            return sq.status["message"] == "Waiting for data to arrive"

        batches, sent = _run_paced(spark, df, tmp_path, ready,
                                   lambda bodies: publish(broker_url, s, bodies))
        _check_paced(batches, sent)
    finally:
        delete(broker_url, s)
