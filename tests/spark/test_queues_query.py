"""The amqp streaming source end to end, against the embedded broker and RabbitMQ
(`broker_url`), with the shared SparkSession. Semantics from issue 4, one test each."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pika
import pytest
from chispa import assert_df_equality

from faults_proxy import FaultProxy
from source_helpers import (consumer_count, declare, delete, kill_group,
                            message_count, publish, start_runner, wait_until)
from spark_amqp.spark.source.compat import ReadLimit

#: PySpark 4.2+: admission control for Python sources; 4.0/4.1 run Trigger.AvailableNow as one
#: batch (Spark falls back to single-batch execution for a source without it)
ADMISSION_CONTROL = ReadLimit is not None

pytestmark = pytest.mark.spark

#: Deadline (s) for the first batch of a query (or its failure): a cold machine needs ~30 s for
#: a first Spark batch; a fast run returns as soon as the condition holds.
FIRST_BATCH = 180


@pytest.fixture
def queue(broker_url, unique):
    names = []

    def make(prefix="src", durable=True, arguments=None):
        q = unique(prefix)
        declare(broker_url, q, durable=durable, arguments=arguments)
        names.append(q)
        return q

    yield make
    delete(broker_url, *names)


def _stopped(sq) -> bool:
    """For a wait's predicate: False while ``sq`` runs; a query that already stopped fails the
    wait at once with its error (e.g. a Python worker that did not start), not at the deadline."""
    if not sq.isActive:
        raise AssertionError(f"the streaming query stopped: {sq.exception()}")
    return False


def _stream(spark, url, queues, **opts):
    r = spark.readStream.format("amqp").option("uri", url).option("queues", ",".join(queues))
    for k, v in opts.items():
        r = r.option(k, str(v))
    return r.load()


def _run_available_now(spark, df, tmp_path, name):
    q = (df.writeStream.format("memory").queryName(name).trigger(availableNow=True)
         .option("checkpointLocation", str(tmp_path / name)).start())
    assert q.awaitTermination(120), "AvailableNow query did not finish"
    assert q.exception() is None
    return spark.table(name)


def test_reads_messages_and_properties(spark, broker_url, queue, tmp_path):
    q = queue()
    props = lambda i: pika.BasicProperties(  # noqa: E731
        content_type="text/plain", message_id=f"m{i}", delivery_mode=2, priority=i % 3,
        correlation_id="c", timestamp=1700000000 + i, headers={"i": i, "n": {"a": [1]}},
        app_id="tests", type="t")
    publish(broker_url, q, [b"body-%d" % i for i in range(20)], props)
    # checkpointLocation on the reader too: PySpark 4.0/4.1 ack the run's last batch at stop
    df = _stream(spark, broker_url, [q], checkpointLocation=tmp_path / "props_q")
    out = _run_available_now(spark, df, tmp_path, "props_q")
    cols = ["body", "queue", "exchange", "routing_key", "redelivered", "offset", "content_type",
            "message_id", "delivery_mode", "priority", "correlation_id", "app_id", "type"]
    expected = spark.createDataFrame(
        [(b"body-%d" % i, q, "", q, False, i, "text/plain", f"m{i}", 2, i % 3, "c", "tests", "t")
         for i in range(20)], out.select(*cols).schema)
    assert_df_equality(out.select(*cols), expected, ignore_row_order=True,
                       ignore_nullable=True)
    r = out.where("offset = 3").first()
    assert r.headers == {"i": "3", "n": '{"a":[1]}'}
    assert r.timestamp.timestamp() == 1700000003 and r.delivery_count is None
    assert message_count(broker_url, q) == 0


def test_multiple_queues_and_include_headers_false(spark, broker_url, queue, tmp_path):
    a, b = queue("a"), queue("b")
    hp = pika.BasicProperties(headers={"h": "v"})
    publish(broker_url, a, [b"a%d" % i for i in range(30)], hp)
    publish(broker_url, b, [b"b%d" % i for i in range(5)], hp)
    df = _stream(spark, broker_url, [a, b], includeHeaders="false", maxMessagesPerTrigger=10,
                 checkpointLocation=tmp_path / "multi_q")
    out = _run_available_now(spark, df, tmp_path, "multi_q")
    got = {(r.queue, bytes(r.body)) for r in out.collect()}
    if not ADMISSION_CONTROL:  # 4.0/4.1: AvailableNow is one batch (docs/getting-started.md)
        assert len(got) == 10 and message_count(broker_url, a) + message_count(broker_url, b) == 25
        return
    assert got == {(a, b"a%d" % i) for i in range(30)} | {(b, b"b%d" % i) for i in range(5)}
    assert out.where("headers is not null").count() == 0
    assert message_count(broker_url, a) == 0 and message_count(broker_url, b) == 0


def test_ack_only_after_batch_is_in_commit_log(spark, broker_url, queue, tmp_path):
    """Batch 1 runs and is committed, batch 2 is never planned (long trigger): its messages
    are still unacked, so stopping the query requeues them all (redelivered). Batch 1 holds
    what had arrived at its trigger (usually all ten; on a loaded machine possibly fewer):
    the rest were delivered but never planned, and are requeued the same way."""
    q = queue()
    publish(broker_url, q, [b"x%d" % i for i in range(10)])
    sq = (_stream(spark, broker_url, [q]).writeStream.format("memory").queryName("ack_q")
          .trigger(processingTime="1 hour").option("checkpointLocation", str(tmp_path / "c"))
          .start())
    try:
        wait_until(lambda: spark.table("ack_q").count() > 0 or _stopped(sq), FIRST_BATCH,
                   what="batch 1")
        rows = spark.table("ack_q").count()
        wait_until(lambda: sq.lastProgress and sq.lastProgress["numInputRows"] == rows, 30,
                   what="batch 1 progress")
        assert 1 <= rows <= 10
        assert message_count(broker_url, q) == 0          # delivered, held by the source
    finally:
        sq.stop()
    # commit log has batch 0, but no later latestOffset acked it: all requeued on stop()
    wait_until(lambda: message_count(broker_url, q) == 10, 20, what="requeue after stop")
    assert consumer_count(broker_url, q) == 0             # stop() cancelled/closed cleanly
    assert (tmp_path / "c" / "commits" / "0").exists()


def test_offsets_canonical_and_no_empty_batches_when_idle(spark, broker_url, queue, tmp_path):
    """Once all five messages are in committed batches, idle triggers plan nothing: no new
    offset log entries. The first batch may hold only part of them (on a loaded machine the
    second queue's deliveries can arrive after the first trigger's short wait), so the test
    waits for the batch whose end holds all five rather than assuming it is batch 0."""
    q1, q2 = queue("z"), queue("a")
    publish(broker_url, q1, [b"1"] * 3)
    publish(broker_url, q2, [b"2"] * 2)
    ck = tmp_path / "ck"

    def logged(kind):
        return sorted((int(p.name) for p in (ck / kind).iterdir()
                       if not p.name.startswith(".") and p.name.isdigit()),
                      ) if (ck / kind).exists() else []

    def last_offset():
        ids = logged("offsets")
        return json.loads((ck / "offsets" / str(ids[-1])).read_text().splitlines()[-1]) \
            if ids else None

    def all_committed():
        off, commits = last_offset(), logged("commits")
        return (off is not None and off["queues"] == {q1: 3, q2: 2}
                and commits and commits[-1] == logged("offsets")[-1])

    sq = (_stream(spark, broker_url, [q1, q2]).writeStream.format("noop")
          .trigger(processingTime="200 milliseconds").option("checkpointLocation", str(ck))
          .start())
    try:
        wait_until(lambda: all_committed() or _stopped(sq), FIRST_BATCH,
                   what="a committed batch ending at all five messages")
        assert all_committed(), sq.exception()
        batches = logged("offsets")
        time.sleep(2.0)                                   # ~10 idle triggers
        assert logged("offsets") == batches               # no empty batches
        # the idle triggers acked the last batch (latestOffset(start) acks before returning)
        wait_until(lambda: message_count(broker_url, q1) == 0
                   and message_count(broker_url, q2) == 0, 30, what="acks of the last batch")
    finally:
        sq.stop()
    assert message_count(broker_url, q1) == 0 and message_count(broker_url, q2) == 0
    for i in logged("offsets"):
        line = (ck / "offsets" / str(i)).read_text().splitlines()[-1]
        assert line == json.dumps(json.loads(line))       # what Spark stored, untouched
        off = json.loads(line)
        assert list(off) == ["queues", "session"] and list(off["queues"]) == sorted([q1, q2])
    assert last_offset()["queues"] == {q1: 3, q2: 2}


def test_restart_replays_as_redeliveries(spark, broker_url, queue, tmp_path):
    """Batch 0 fails after it was planned (offset log, no commit log): the restarted query gets
    an empty partition list for that range and reads the messages again as redeliveries."""
    q = queue()
    publish(broker_url, q, [b"r%d" % i for i in range(8)])
    ck = str(tmp_path / "ck")

    def boom(df, batch_id):
        raise RuntimeError("sink failure")

    sq = (_stream(spark, broker_url, [q]).writeStream.foreachBatch(boom)
          .option("checkpointLocation", ck).start())
    with pytest.raises(Exception):
        sq.awaitTermination(FIRST_BATCH)
    assert (Path(ck) / "offsets" / "0").exists() and not (Path(ck) / "commits" / "0").exists()
    wait_until(lambda: message_count(broker_url, q) == 8, 20, what="requeue")
    got = []

    def collect(df, batch_id):
        got.append((batch_id, [(bytes(r.body), r.redelivered) for r in df.collect()]))

    sq = (_stream(spark, broker_url, [q], checkpointLocation=ck).writeStream
          .foreachBatch(collect).trigger(availableNow=True).option("checkpointLocation", ck)
          .start())
    assert sq.awaitTermination(120)
    assert got[0] == (0, [])                              # the replayed range: empty
    if not ADMISSION_CONTROL:
        # 4.0/4.1: AvailableNow falls back to one batch, here the replayed one; the next run
        # reads the messages (Spark: "may not guarantee processing new data if there is an
        # uncommitted batch")
        assert len(got) == 1
        sq = (_stream(spark, broker_url, [q], checkpointLocation=ck).writeStream
              .foreachBatch(collect).trigger(availableNow=True).option("checkpointLocation", ck)
              .start())
        assert sq.awaitTermination(120)
    rows = [r for _, rs in got[1:] for r in rs]
    assert sorted(rows) == sorted((b"r%d" % i, True) for i in range(8))
    assert message_count(broker_url, q) == 0


def test_connection_loss_keeps_query_running_nothing_lost(spark, broker_url, queue, tmp_path):
    q = queue()
    proxy = FaultProxy(broker_url)
    try:
        sq = (_stream(spark, proxy.url, [q], maxMessagesPerTrigger=50).writeStream
              .format("memory").queryName("loss_q").trigger(processingTime="200 milliseconds")
              .option("checkpointLocation", str(tmp_path / "c")).start())
        publish(broker_url, q, [b"a%03d" % i for i in range(100)])
        wait_until(lambda: spark.table("loss_q").count() >= 50 or _stopped(sq), FIRST_BATCH,
                   what="first batches")
        proxy.cut()                                       # broker sees the connection drop
        publish(broker_url, q, [b"b%03d" % i for i in range(100)])
        wait_until(lambda: proxy.accepted >= 2, 60, what="reconnect")
        want = {b"a%03d" % i for i in range(100)} | {b"b%03d" % i for i in range(100)}
        wait_until(lambda: ({bytes(r.body) for r in spark.table("loss_q").collect()} >= want
                            or _stopped(sq)), 90, what="all messages after reconnect")
        assert sq.isActive and sq.exception() is None
        wait_until(lambda: message_count(broker_url, q) == 0, 30, what="queue drained")
        sq.stop()
    finally:
        proxy.close()


def test_available_now_reads_snapshot_then_stops(spark, broker_url, queue, tmp_path):
    q = queue()
    publish(broker_url, q, [b"s%d" % i for i in range(40)])
    got = []

    def collect(df, batch_id):
        rows = [bytes(r.body) for r in df.collect()]
        got.extend(rows)
        if batch_id == 0:                                 # arrives after the snapshot
            publish(broker_url, q, [b"late%d" % i for i in range(5)])

    sq = (_stream(spark, broker_url, [q], maxMessagesPerTrigger=15,
                  checkpointLocation=tmp_path / "c").writeStream
          .foreachBatch(collect).trigger(availableNow=True)
          .option("checkpointLocation", str(tmp_path / "c")).start())
    assert sq.awaitTermination(120)
    if not ADMISSION_CONTROL:  # 4.0/4.1: AvailableNow is one batch (docs/getting-started.md)
        assert sorted(got) == sorted(b"s%d" % i for i in range(15))
        wait_until(lambda: message_count(broker_url, q) == 30, 20, what="rest left")
        return
    assert sorted(got) == sorted(b"s%d" % i for i in range(40))
    wait_until(lambda: message_count(broker_url, q) == 5, 20, what="late messages left")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0]


def test_bad_options_fail_at_load_naming_the_option(spark, broker_url):
    """The project's message is the first line of what PySpark raises (not the last of a
    1.5 KB traceback: spark/errors.py lead_with_message), with a "did you mean"."""
    with pytest.raises(Exception, match="prefetch") as info:
        spark.readStream.format("amqp").option("queue", "q").option("prefetch", "lots").load()
    assert "Invalid value 'lots' for option 'prefetch'" in _first_line(info.value), str(info.value)
    with pytest.raises(Exception, match="Unknown option.*'qeue'"):
        spark.readStream.format("amqp").option("qeue", "q").load()
    with pytest.raises(Exception) as info:
        (spark.readStream.format("amqp").option("uri", broker_url).option("queue", "q")
         .option("maxMessagesPerTriger", "100").load())
    first = _first_line(info.value)
    assert first.startswith("[PYTHON_DATA_SOURCE_ERROR]"), first
    assert "Unknown option(s) 'maxmessagespertriger' for the amqp source (did you mean " \
        "'maxMessagesPerTrigger'?)" in first, str(info.value)
    with pytest.raises(Exception, match="needs option 'queue'") as info:
        spark.readStream.format("amqp").load()
    assert "needs option 'queue'" in _first_line(info.value)


def test_missing_queue_fails_the_query_clearly(spark, broker_url, unique, tmp_path):
    q = unique("missing")
    df = _stream(spark, broker_url, [q])
    sq = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "c")).start()
    with pytest.raises(Exception, match="does not exist.*declare=true") as info:
        sq.awaitTermination(FIRST_BATCH)
    first = _first_line(info.value)
    assert f"QueueMissing: Queue '{q}' does not exist" in first and "declare=true" in first, \
        str(info.value)[:3000]


def test_user_schema_selects_columns(spark, broker_url, queue, tmp_path):
    """A user schema is a column selection: only those columns, in its order, with its
    nullability; the messages are consumed as without it."""
    q = queue()
    publish(broker_url, q, [b"sel-%d" % i for i in range(30)],
            pika.BasicProperties(message_id="m", headers={"h": 1}))
    df = (spark.readStream.format("amqp").schema("routing_key string, body binary NOT NULL")
          .option("uri", broker_url).option("queue", q)
          .option("checkpointLocation", str(tmp_path / "selected_q")).load())
    out = _run_available_now(spark, df, tmp_path, "selected_q")
    assert out.columns == ["routing_key", "body"]
    assert [(f.name, f.nullable) for f in out.schema.fields] == [("routing_key", True),
                                                                 ("body", False)]
    expected = spark.createDataFrame([(q, b"sel-%d" % i) for i in range(30)], out.schema)
    assert_df_equality(out, expected, ignore_row_order=True)
    assert message_count(broker_url, q) == 0


@pytest.mark.parametrize("ddl, match", [
    ("value string", "`value` is not a column of the source"),
    ("body string", "`body` is string, the source's `body` is binary"),
    ("body binary, message_id string NOT NULL", "`message_id` is NOT NULL"),
])
def test_bad_user_schema_fails_the_query_naming_the_column(spark, broker_url, tmp_path, ddl,
                                                           match):
    df = (spark.readStream.format("amqp").schema(ddl).option("uri", broker_url)
          .option("queue", "q").load())
    sq = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "c")).start()
    with pytest.raises(Exception, match=match):
        sq.awaitTermination(FIRST_BATCH)


@pytest.mark.slow   # a separate Spark in a subprocess: ~40-65 s per broker on this machine
def test_idle_query_acks_last_batch_within_one_trigger(broker_url, queue, tmp_path):
    """Subprocess query: one batch, then idle; SIGKILL after one more trigger: the batch was
    acked by the idle trigger's latestOffset, so nothing comes back to the queue."""
    q = queue()
    publish(broker_url, q, [b"k%d" % i for i in range(25)])
    markers = tmp_path / "m"
    p = start_runner(broker_url, q, str(tmp_path / "ck"), str(tmp_path / "out"), str(markers),
                     "1 second", log_path=tmp_path / "runner.log", idle_markers=True)

    def ids(prefix):
        return [int(m.name.split("-", 1)[1]) for m in markers.glob(f"{prefix}-*")]

    try:
        wait_until(lambda: (markers / "batch-0").exists() or p.poll() is not None, 300,
                   what="batch 0 in the subprocess")
        assert p.poll() is None, (tmp_path / "runner.log").read_text()[-3000:]
        # one more trigger, without data, after the last batch with rows: its latestOffset
        # acked that batch (a condition, not a sleep of "one trigger interval")
        wait_until(lambda: p.poll() is not None or max(ids("idle"), default=-1) > max(ids("batch")),
                   60, what="an idle trigger after the last batch")
        assert p.poll() is None, (tmp_path / "runner.log").read_text()[-3000:]
    finally:
        kill_group(p)
    # the broker saw the connection go (its unacked messages, if any, requeued with it)
    wait_until(lambda: consumer_count(broker_url, q) == 0, 30, what="the killed consumer gone")
    assert message_count(broker_url, q) == 0
    assert consumer_count(broker_url, q) == 0


def test_quorum_queue_delivery_count(spark, broker_url, unique, tmp_path):
    """x-delivery-count (quorum queues, RabbitMQ docs/quorum-queues) becomes delivery_count."""
    q = unique("quorum")
    try:
        declare(broker_url, q, durable=True, arguments={"x-queue-type": "quorum"})
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"broker does not support quorum queues: {e}")
    try:
        publish(broker_url, q, [b"p0", b"p1"], persistent=True)
        with pika.BlockingConnection(pika.URLParameters(broker_url)) as c:
            ch = c.channel()
            m, _, _ = ch.basic_get(q)
            # one failed delivery attempt: basic.reject counts in every version (RabbitMQ 4.3
            # does not count a requeueing basic.nack, docs/broker/rabbitmq-versions.md)
            ch.basic_reject(m.delivery_tag, requeue=True)
        rows = _run_available_now(spark, _stream(spark, broker_url, [q],
                                                 checkpointLocation=tmp_path / "quorum_q"),
                                  tmp_path, "quorum_q").collect()
        counts = {bytes(r.body): r.delivery_count for r in rows}
        redelivered = {bytes(r.body): r.redelivered for r in rows}
        # RabbitMQ 3.10 (checked here) omits the header on a first delivery; the embedded broker
        # sends x-delivery-count=0 (reported to the lead). Both mean "never redelivered".
        assert counts[b"p0"] == 1 and counts[b"p1"] in (None, 0)
        assert redelivered[b"p0"] is True and redelivered[b"p1"] is False
        assert message_count(broker_url, q) == 0
    finally:
        delete(broker_url, q)
