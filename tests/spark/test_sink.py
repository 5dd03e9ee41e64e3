"""The amqp sink end to end: Spark → sink → broker → read back, on the embedded broker and
RabbitMQ (``broker_url``). Streaming restart/duplicate semantics, broker refusals, returns,
and driver-side validation at save()/start()."""

from __future__ import annotations

import datetime as dt
import json
import os
import time

import pytest
from chispa import assert_df_equality
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.types import (BinaryType, IntegerType, MapType, StringType, StructField,
                               StructType, TimestampType)

from spark_amqp.client import connect

pytestmark = pytest.mark.spark

UNICODE_KEY = "clé.ü.🐇"
ROUND_TRIP_SCHEMA = StructType([
    StructField("body", BinaryType()),
    StructField("exchange", StringType()),
    StructField("routing_key", StringType()),
    StructField("headers", MapType(StringType(), StringType())),
    StructField("delivery_mode", IntegerType()),
    StructField("priority", IntegerType()),
    StructField("timestamp", TimestampType()),
] + [StructField(c, StringType()) for c in (
    "content_type", "content_encoding", "correlation_id", "reply_to", "expiration",
    "message_id", "type", "user_id", "app_id")])


def read_all(url: str, queue: str, n: int, timeout: float = 60.0, settle: float = 0.5) -> list:
    """Consume at least ``n`` deliveries from ``queue`` (no-ack), then keep draining until
    nothing arrives for ``settle`` seconds (to catch duplicates); returns the ``Delivery``s."""
    out: list = []
    with connect(url) as conn:
        ch = conn.channel()
        ch.basic_qos(5000)
        ch.basic_consume(queue, no_ack=True)
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            out.extend(ch.drain(timeout=0.5))
        while time.monotonic() < deadline:
            more = ch.drain(timeout=settle)
            if not more:
                break
            out.extend(more)
    return out


@pytest.fixture
def bound_queue(broker_url, unique):
    """A direct exchange + a queue bound with ``UNICODE_KEY``; deleted afterwards."""
    ex, q = unique("sink-ex"), unique("sink-q")
    with connect(broker_url) as conn:
        ch = conn.channel()
        ch.exchange_declare(ex, "direct")
        ch.queue_declare(q, durable=True)
        ch.queue_bind(q, ex, UNICODE_KEY)
    yield broker_url, ex, q
    with connect(broker_url) as conn:
        ch = conn.channel()
        ch.queue_delete(q)
        ch.exchange_delete(ex)


def _row(i: int, ex: str):
    body = b"" if i == 0 else (bytes(range(256)) * 4096 if i == 1 else f"m{i}".encode())
    return (body, ex, UNICODE_KEY,
            {"k": f"v{i}", "ünï": "ß", "n": None} if i % 2 == 0 else None,
            None if i % 5 == 0 else (1 if i % 3 == 0 else 2),
            i % 10,
            dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i),
            "application/json", "utf-8", str(i), "reply.q", "600000", f"id-{i}", "t", "guest",
            "app")


def _delivery_row(d):
    p = d.properties
    return (d.body, d.exchange, d.routing_key, p.headers, p.delivery_mode, p.priority,
            None if p.timestamp is None else dt.datetime.fromtimestamp(p.timestamp, dt.timezone.utc),
            p.content_type, p.content_encoding, p.correlation_id, p.reply_to, p.expiration,
            p.message_id, p.type, p.user_id, p.app_id)


def test_round_trip_every_column_10k_rows(spark, bound_queue):
    url, ex, q = bound_queue
    n = 10_000
    rows = [_row(i, ex) for i in range(n)]
    df = spark.createDataFrame(rows, ROUND_TRIP_SCHEMA).repartition(3)
    df.write.format("amqp").option("uri", url).mode("append").save()

    got = read_all(url, q, n)
    assert len(got) == n, f"{len(got)} messages read back, expected {n} (exactly once here)"
    expected = [r[:4] + ((2 if r[4] is None else r[4]),) + r[5:] for r in rows]
    actual_df = spark.createDataFrame([_delivery_row(d) for d in got], ROUND_TRIP_SCHEMA)
    expected_df = spark.createDataFrame(expected, ROUND_TRIP_SCHEMA)
    key = F.col("correlation_id").cast("int")
    assert_df_equality(actual_df.orderBy(key), expected_df.orderBy(key), ignore_nullable=True)
    sizes = {d.properties.correlation_id: len(d.body) for d in got}
    assert sizes["0"] == 0 and sizes["1"] == 1 << 20


def test_options_override_columns_and_default_message_ids(spark, broker_url, unique):
    q = unique("sink-default-ex")
    with connect(broker_url) as conn:
        conn.channel().queue_declare(q, durable=True)
    try:
        df = spark.createDataFrame(
            [("a", "no-such-exchange", "ignored"), ("b", None, None)],
            "body string, exchange string, routing_key string").coalesce(1)
        (df.write.format("amqp").option("uri", broker_url).option("exchange", "")
         .option("routingKey", q).option("deliveryMode", "transient").mode("append").save())
        got = sorted(read_all(broker_url, q, 2), key=lambda d: d.body)
        assert [d.body for d in got] == [b"a", b"b"]
        assert {d.properties.delivery_mode for d in got} == {1}
        ids = [d.properties.message_id.split(":") for d in got]
        assert ids[0][0] == ids[1][0] and [i[1:] for i in ids] == [["0", "0"], ["0", "1"]]
    finally:
        with connect(broker_url) as conn:
            conn.channel().queue_delete(q)


def test_missing_exchange_fails_the_save_with_404(spark, broker_url, unique):
    df = spark.createDataFrame([("x",)] * 50, "body string").repartition(2)
    t0 = time.monotonic()
    with pytest.raises(PySparkException) as ei:
        (df.write.format("amqp").option("uri", broker_url).option("exchange", unique("missing"))
         .option("confirmTimeoutMs", "120000").mode("append").save())
    msg = str(ei.value)
    assert "404" in msg and "NOT_FOUND" in msg and "no exchange" in msg, msg[-2000:]
    assert "amqp sink partition" in msg
    # well under confirmTimeoutMs (120 s): the 404 is reported, not waited out (the margin
    # covers a first Python worker start-up on a loaded machine)
    assert time.monotonic() - t0 < 60, "the failure must be reported, not waited out"


def test_missing_exchange_fails_the_streaming_query_with_404(spark, broker_url, unique, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(100)))
    df = spark.readStream.schema("id long").json(str(src)).select(
        F.col("id").cast("string").alias("body"))
    t0 = time.monotonic()
    q = (df.writeStream.format("amqp").option("uri", broker_url)
         .option("exchange", unique("missing")).option("checkpointLocation", str(tmp_path / "c"))
         .option("confirmTimeoutMs", "120000").trigger(availableNow=True).start())
    with pytest.raises(Exception) as ei:
        q.awaitTermination(100)
    msg = str(ei.value)
    assert "404" in msg and "no exchange" in msg and "micro-batch 0" in msg, msg[-2000:]
    assert time.monotonic() - t0 < 60, "the failure must be reported, not waited out"


def test_mandatory_unroutable_fails_or_is_ignored(spark, broker_url, unique):
    ex = unique("sink-noroute")
    df = spark.createDataFrame([("x",), ("y",)], "body string").coalesce(1)
    w = (df.write.format("amqp").option("uri", broker_url).option("exchange", ex)
         .option("declareExchange", "true").option("exchangeType", "topic")
         .option("exchangeDurable", "false").option("routingKey", "nowhere")
         .option("mandatory", "true").mode("append"))
    try:
        with pytest.raises(PySparkException) as ei:
            w.save()
        assert "2 of 2 message(s) were returned" in str(ei.value)
        assert "312 NO_ROUTE" in str(ei.value)
        w.option("onReturn", "ignore").save()  # counted and logged, not failed
        with connect(broker_url) as conn:  # declareExchange made it (passive declare succeeds)
            conn.channel().exchange_declare(ex, "topic", passive=True)
    finally:
        with connect(broker_url) as conn:
            conn.channel().exchange_delete(ex)


@pytest.mark.parametrize("build, opts, needle", [
    (lambda s: s.createDataFrame([(1,)], "body int"), {},
     "column `body` has type int; the amqp sink accepts binary or string"),
    (lambda s: s.createDataFrame([("x", "k")], "body string, routingKey string"), {},
     "does not know column(s) `routingKey` string"),
    (lambda s: s.createDataFrame([("x",)], "body string"), {"onReturn": "drop"},
     "onReturn='drop' is not allowed; allowed: fail | ignore"),
    (lambda s: s.createDataFrame([("x",)], "body string"), {"routing_key": "k"},
     "unknown option(s) for the amqp sink: routing_key"),
])
def test_invalid_input_fails_at_save_naming_it(spark, build, opts, needle):
    w = build(spark).write.format("amqp").option("uri", "amqp://guest:guest@127.0.0.1:1/%2F")
    for k, v in opts.items():
        w = w.option(k, v)
    with pytest.raises(Exception) as ei:
        w.mode("append").save()
    assert needle in str(ei.value)
    with pytest.raises(Exception, match="mode\\('overwrite'\\)"):
        build(spark).write.format("amqp").mode("overwrite").save()


def test_invalid_option_fails_the_stream_at_start(spark, tmp_path):
    """Spark builds the stream writer when the query thread plans its first batch, so the
    error surfaces from start() or from awaitTermination() right after, before any publish."""
    df = spark.readStream.format("rate").load().select(F.col("value").cast("string").alias("body"))
    q = None
    with pytest.raises(Exception) as ei:
        q = (df.writeStream.format("amqp").option("maxInFlight", "lots")
             .option("checkpointLocation", str(tmp_path / "ck")).start())
        q.awaitTermination(180)      # returns at the error; a timeout would read "did not raise"
    if q is not None:
        q.stop()
    assert "maxInFlight='lots' is not an integer" in str(ei.value)


def test_streaming_restart_duplicates_only_from_the_retried_batch(spark, broker_url, unique,
                                                                  tmp_path):
    """Three input files → three micro-batches. The first run fails in the middle of batch 1
    (a bad priority value after some rows were published); the restart from the checkpoint
    replays batch 1 with the same message ids, then runs batch 2."""
    q = unique("sink-stream")
    src, ck = tmp_path / "in", tmp_path / "ck"
    src.mkdir()
    per_file = 300
    for f in range(3):
        with open(src / f"part-{f}.json", "w") as fh:
            for i in range(f * per_file, (f + 1) * per_file):
                fh.write(json.dumps({"id": i}) + "\n")
        # the file source orders files by modification time: make file f batch f
        os.utime(src / f"part-{f}.json", (1_700_000_000 + f, 1_700_000_000 + f))
    with connect(broker_url) as conn:
        conn.channel().queue_declare(q, durable=True)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        def stream(fail_at):
            df = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(src))
                  .select(F.col("id").cast("string").alias("body"),
                          F.when(F.col("id") == fail_at, F.lit(300)).cast("int").alias("priority")))
            return (df.writeStream.format("amqp").option("uri", broker_url)
                    .option("routingKey", q).option("checkpointLocation", str(ck))
                    .trigger(availableNow=True).start())

        first = stream(fail_at=per_file + 220)  # batch 1: rows 300..599 fail at 520
        with pytest.raises(Exception, match="column `priority` has value 300"):
            first.awaitTermination(180)
        query_id = first.id
        second = stream(fail_at=-1)
        assert second.awaitTermination(180), "the restarted AvailableNow query did not finish"
        assert second.exception() is None and second.id == query_id
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")

    got = read_all(broker_url, q, 3 * per_file + 1)
    with connect(broker_url) as conn:
        conn.channel().queue_delete(q)
    bodies = [int(d.body) for d in got]
    assert set(bodies) == set(range(3 * per_file)), "every row arrives"
    by_id: dict = {}
    for d in got:
        by_id.setdefault(d.properties.message_id, []).append(int(d.body))
    dups = {mid: b for mid, b in by_id.items() if len(b) > 1}
    assert dups, "the failed batch published some rows before failing"
    assert len(got) == 3 * per_file + len(dups)
    for mid, b in dups.items():
        qid, batch, part, row = mid.split(":")
        assert (qid, batch) == (str(query_id), "1"), f"duplicate outside the retried batch: {mid}"
        assert len(b) == 2 and b[0] == b[1], "a duplicate id always carries the same row"
    for mid, (b, *_) in by_id.items():
        qid, batch, part, row = mid.split(":")
        assert int(batch) == b // per_file and int(row) == b % per_file


def test_sink_source_round_trip_and_stream_written_back_unchanged(spark, broker_url, unique,
                                                                  tmp_path):
    """DataFrame → sink → queue A → amqp source stream → sink (all source columns, unchanged)
    → queue B → amqp source → DataFrame equal to the original (chispa)."""
    qa, qb = unique("sink-rt-a"), unique("sink-rt-b")
    with connect(broker_url) as conn:
        ch = conn.channel()
        ch.queue_declare(qa, durable=True)
        ch.queue_declare(qb, durable=True)
    n = 2000
    rows = [(r[0], "", qa) + r[3:] for r in (_row(i, "") for i in range(n))]
    rows = [r[:4] + ((2 if r[4] is None else r[4]),) + r[5:] for r in rows]
    df = spark.createDataFrame(rows, ROUND_TRIP_SCHEMA).repartition(2)
    try:
        df.write.format("amqp").option("uri", broker_url).mode("append").save()

        def source(q):
            return (spark.readStream.format("amqp").option("uri", broker_url)
                    .option("queue", q).load())

        back = (source(qa).writeStream.format("amqp").option("uri", broker_url)
                .option("routingKey", qb).option("checkpointLocation", str(tmp_path / "w"))
                .trigger(availableNow=True).start())
        assert back.awaitTermination(120) and back.exception() is None
        mem = (source(qb).writeStream.format("memory").queryName("sink_rt_b")
               .option("checkpointLocation", str(tmp_path / "r")).trigger(availableNow=True)
               .start())
        assert mem.awaitTermination(120) and mem.exception() is None
        out = spark.table("sink_rt_b")
        assert out.count() == n
        cols = [f.name for f in ROUND_TRIP_SCHEMA.fields if f.name != "routing_key"]
        key = F.col("correlation_id").cast("int")
        actual = out.select(*cols).orderBy(key)
        expected = df.select(*cols).orderBy(key)
        assert_df_equality(actual, expected, ignore_nullable=True)
        assert {r.routing_key for r in out.select("routing_key").distinct().collect()} == {qb}
    finally:
        with connect(broker_url) as conn:
            ch = conn.channel()
            ch.queue_delete(qa)
            ch.queue_delete(qb)


def test_lost_connection_is_ridden_out_and_every_row_arrives(spark, broker_url, unique):
    """The TCP connection of the write tasks is cut while they publish (issue 27: a node going
    away): each task reconnects (here through the same address, which takes connections
    again) and publishes its unconfirmed messages again, so save() succeeds, neither hanging
    nor losing a row: every row is in the queue at least once."""
    import threading

    from faults_proxy import FaultProxy

    q = unique("sink-cut")
    with connect(broker_url) as conn:
        conn.channel().queue_declare(q, durable=True)
    proxy = FaultProxy(broker_url)

    def cut_when_publishing():
        # both tasks connected and past their handshakes: each has sent 1 MB of its ~35 MB of
        # publishes (a handshake is < 1 kB), so the cut comes mid-publish. A condition, not
        # "1 s after the connect", which a loaded machine's handshake may outlast.
        deadline = time.monotonic() + 120
        while (sum(n >= 1 << 20 for n in proxy.bytes_up) < 2
               and time.monotonic() < deadline):
            time.sleep(0.01)
        proxy.cut()

    cutter = threading.Thread(target=cut_when_publishing, daemon=True)
    cutter.start()
    n = 300_000
    df = spark.range(n, numPartitions=2).select(
        F.rpad(F.col("id").cast("string"), 200, "x").alias("body"))
    t0 = time.monotonic()
    try:
        (df.write.format("amqp").option("uri", proxy.url).option("routingKey", q)
         .option("heartbeat", "5").mode("append").save())
        assert time.monotonic() - t0 < 180, "a cut connection must not hang the save"
        cutter.join(5)
        assert proxy.accepted > 2, "the cut came after the save: nothing was tested"
        seen = set()
        with connect(broker_url) as conn:
            ch = conn.channel()
            ch.basic_qos(5000)
            ch.basic_consume(q, no_ack=True)
            while True:
                got = ch.drain(None, 2.0)
                if not got:
                    break
                seen.update(bytes(d.body) for d in got)
        assert len(seen) == n, f"{n - len(seen)} rows lost"
    finally:
        proxy.close()
        with connect(broker_url) as conn:
            conn.channel().queue_delete(q)
