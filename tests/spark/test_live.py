"""The amqp source on live data (issue 26): a publisher writes DURING the query.

Both modes (queue mode: option ``queue``; stream mode: option ``stream``) on both brokers:
one query each while a publisher thread writes at ~50 msg/s, then ~1,000 msg/s, then as fast
as the broker confirms (up to 200,000 messages); every phase lasts until rows of that phase
have reached the sink in two batches (at most a deadline: then the test fails), i.e. batches
keep coming at every rate. When the publisher stops the query catches up, and the sink holds every message exactly
once (stream mode: each offset once, in order) or at least once with none lost (queue mode).
Then a super stream: the amqp sink (``superStream``) writes into it from one streaming query
while a stream-mode query reads it (``superStream``): every row written is read exactly once,
from the partition its routing key hashes to.

The sink is a ``foreachBatch`` that collects the rows into this process (as a user's
``foreachBatch`` would) with the time each batch arrived. Before this issue the stream mode
found no tail while anything was being written (the driver's probe chased it): 0 batches in
40 s at 50 msg/s on both brokers.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from source_helpers import PhasedPublisher, declare, delete, wait_until
from stream_helpers import declare_stream, pika_read_all

pytestmark = pytest.mark.spark

#: (phase, messages/s[, at most this many]): None = as fast as the broker confirms (the
#: in-process embedded broker took ~75,000 msg/s here: the cap bounds the test's volume)
PHASES = [("slow", 50), ("mid", 1000), ("max", None, 200_000)]
#: seconds for the query to catch up once the publisher stopped (a cold, loaded machine)
CATCH_UP = 240


class BatchLog:
    """A ``foreachBatch`` function that collects ``columns`` (SQL expressions) of every
    batch into :attr:`rows` and, per batch, (batch id, arrival time, rows per phase) into
    :attr:`batches`; the phase of a row is its body up to ':' (see PhasedPublisher)."""

    def __init__(self, *columns: str):
        self.columns = columns
        self.rows: list = []
        self.batches: list = []
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = df.selectExpr(*self.columns).collect()
        per_phase = Counter(r[0].split(":", 1)[0] for r in rows)
        with self.lock:
            self.rows.extend(rows)
            self.batches.append((batch_id, time.monotonic(), per_phase))

    def batches_with(self, phase: str) -> int:
        with self.lock:
            return sum(1 for _, _, c in self.batches if c.get(phase))

    def count(self) -> int:
        with self.lock:
            return len(self.rows)

    def distinct(self) -> int:
        with self.lock:
            return len({r[0] for r in self.rows})


def _check_running(q):
    if not q.isActive:
        raise AssertionError(f"the streaming query stopped: {q.exception()}")


def _phase_report(pub: PhasedPublisher, log: BatchLog) -> str:
    out = []
    for name, *_ in PHASES:
        if name not in pub.span:
            continue
        t0, t1 = pub.span[name]
        n = sum(1 for p in pub.phase_of if p == name)
        during = [c.get(name, 0) for _, t, c in log.batches if t0 <= t <= t1]
        out.append(f"{name}: {n} msgs in {t1 - t0:.1f}s ({n / max(t1 - t0, 1e-9):.0f}/s), "
                   f"{sum(1 for x in during if x)} batches with its rows while it ran")
    return "; ".join(out)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", ["queue", "stream"])
def test_live_publisher_three_rates(spark, broker_url, unique, tmp_path, mode):
    name = unique(f"live-{mode}")
    if mode == "stream":
        declare_stream(broker_url, name)
    else:
        declare(broker_url, name)
    reader = spark.readStream.format("amqp").option("uri", broker_url).option(mode, name)
    if mode == "stream":
        reader = reader.option("startingOffsets", "earliest")
        log = BatchLog("cast(body as string)", "offset")
    else:
        log = BatchLog("cast(body as string)")
    q = (reader.load().writeStream.foreachBatch(log).trigger(processingTime="0 seconds")
         .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        pub = PhasedPublisher(broker_url, name, PHASES,
                              lambda phase: log.batches_with(phase) >= 2).start()
        while pub.thread.is_alive():
            _check_running(q)
            pub.thread.join(0.5)
        pub.join()
        wait_until(lambda: _check_running(q) or log.distinct() >= pub.sent, CATCH_UP,
                   interval=0.5, what=f"the query to catch up with {pub.sent} messages "
                                      f"(has {log.distinct()})")
        if mode == "queue":   # the last batch is acked when the next one is planned
            time.sleep(0.5)
    finally:
        q.stop()
        delete(broker_url, name)
    report = _phase_report(pub, log)
    print(f"\n[live {mode} {broker_url.split('@')[-1]}] {report}; {len(log.batches)} batches, "
          f"{log.count()} rows")
    assert not pub.failures, f"{pub.failures}: {report}"
    want = {f"{pub.phase_of[i]}:{i}" for i in range(pub.sent)}
    bodies = [r[0] for r in log.rows]
    assert set(bodies) == want                                      # none lost (both modes)
    if mode == "stream":                                            # exactly once, in order
        assert len(bodies) == pub.sent
        assert [r[1] for r in log.rows] == list(range(pub.sent))
        assert [int(b.split(":")[1]) for b in bodies] == list(range(pub.sent))


@pytest.mark.timeout(900)
def test_super_stream_written_by_the_sink_while_read(spark, broker_url, unique, tmp_path):
    from spark_amqp.spark.sink.super_stream import partition_index

    name = unique("live-super")
    parts = [f"{name}-{i}" for i in range(3)]
    for p in parts:
        declare_stream(broker_url, p)
    log = BatchLog("cast(body as string)", "queue", "offset")
    writer = reader = None
    try:
        rows = (spark.readStream.format("rate").option("rowsPerSecond", 400).load()
                .selectExpr("concat('w:', cast(value as string)) as body",
                            "concat('k', cast(value % 11 as string)) as routing_key"))
        writer = (rows.writeStream.format("amqp").option("uri", broker_url)
                  .option("superStream", name).trigger(processingTime="0.5 seconds")
                  .option("checkpointLocation", str(tmp_path / "w")).start())
        reader = (spark.readStream.format("amqp").option("uri", broker_url)
                  .option("superStream", name).option("startingOffsets", "earliest").load()
                  .writeStream.foreachBatch(log).trigger(processingTime="0 seconds")
                  .option("checkpointLocation", str(tmp_path / "r")).start())
        t0 = time.monotonic()
        # the reader keeps getting batches while the writer writes
        wait_until(lambda: _check_running(writer) or _check_running(reader)
                   or (log.batches_with("w") >= 4 and time.monotonic() - t0 > 5), 240,
                   interval=0.5, what="4 reader batches with rows while the sink writes")
        writer.stop()
        written = {p: pika_read_all(broker_url, p) for p in parts}
        total = sum(len(v) for v in written.values())
        committed = sum(p["numInputRows"] for p in writer.recentProgress)
        wait_until(lambda: _check_running(reader) or log.count() >= total, CATCH_UP,
                   interval=0.5, what=f"the reader to catch up with {total} rows "
                                      f"(has {log.count()})")
        time.sleep(1.0)   # a duplicate would come in a later batch
    finally:
        for q in (writer, reader):
            if q is not None:
                q.stop()
        delete(broker_url, *parts)
    print(f"\n[live super stream {broker_url.split('@')[-1]}] {total} rows written "
          f"({committed} in committed sink batches), {len(log.batches)} reader batches")
    got = sorted((r[1], r[2], r[0]) for r in log.rows)
    want = sorted((p, off, b.decode()) for p, v in written.items() for off, b in v)
    assert got == want                                  # each row once, as stored
    values = [int(r[0].split(":")[1]) for r in log.rows]
    assert len(values) == len(set(values))
    assert set(range(committed)) <= set(values)         # every committed row of the sink
    for body, stream, _ in log.rows:      # the partition of the row's routing key
        key = f"k{int(body.split(':')[1]) % 11}"
        assert stream == f"{name}-{partition_index(key, 3)}", (body, key)
