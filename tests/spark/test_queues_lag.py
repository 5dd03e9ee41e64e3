"""Lag in the progress (issue 29): queue mode's reportLatestOffset (deliveries + queue depth,
cached) and :func:`spark_amqp.offsets_behind_latest` over real progress events of both modes,
on both brokers."""

from __future__ import annotations

import json

import pytest

from source_helpers import declare, delete, publish, wait_until
from stream_helpers import declare_stream
from spark_amqp import offsets_behind_latest
from spark_amqp.spark.source.queues import lag as lag_mod
from spark_amqp.spark.source.queues.options import parse_source_options
from spark_amqp.spark.source.queues.micro_batch_stream import AmqpQueueMicroBatchStream
from pyspark.sql.streaming.datasource import ReadMaxRows

from source_fakes import FakeBroker


def test_helper_on_progress_json_of_both_modes_and_others():
    progress = {"sources": [
        {"description": "amqp", "endOffset": {"queues": {"a": 10, "b": 4}, "session": "s"},
         "latestOffset": {"queues": {"a": 25, "b": 4}, "session": "s"}},
        {"description": "amqp", "endOffset": '{"streams": {"x": 100, "y": 7}}',
         "latestOffset": '{"streams": {"x": 130, "y": 9}}'},
        {"description": "amqp", "endOffset": {"queues": {"a": 1}, "session": "old"},
         "latestOffset": {"queues": {"a": 9}, "session": "new"}},
        {"description": "kafka", "endOffset": {"t": {"0": 5}}, "latestOffset": None},
    ]}
    a, b, c, d = offsets_behind_latest(json.dumps(progress))
    assert a == {"minOffsetsBehindLatest": 0, "maxOffsetsBehindLatest": 15,
                 "avgOffsetsBehindLatest": 7.5, "offsetsBehindLatest": {"a": 15, "b": 0}}
    assert b["offsetsBehindLatest"] == {"x": 30, "y": 2} and b["avgOffsetsBehindLatest"] == 16
    assert c is None and d is None
    assert offsets_behind_latest(progress)[0] == a
    with pytest.raises(TypeError):
        offsets_behind_latest(42)


def test_report_latest_offset_adds_the_depth_and_caches_it(monkeypatch):
    broker = FakeBroker(["a"])
    for i in range(30):
        broker.publish("a", b"x")
    r = AmqpQueueMicroBatchStream(parse_source_options({"queue": "a", "prefetch": "10"}),
                              consumer_factory=broker.factory)
    assert r.reportLatestOffset() is None              # not connected: nothing to say
    calls = []

    def depths(self=None):
        calls.append(1)
        return {"a": len(broker.ready["a"])}

    s = r.initialOffset()
    e = r.latestOffset(s, ReadMaxRows(5))
    broker.consumers[0].queue_depths = depths
    latest = r.reportLatestOffset()
    assert latest["queues"] == {"a": 30} and latest["session"] == e["session"]
    assert offsets_behind_latest({"sources": [{"endOffset": e, "latestOffset": latest}]}
                                 )[0]["maxOffsetsBehindLatest"] == 25
    for _ in range(100):                               # Spark's idle polling: cached
        r.reportLatestOffset()
    assert len(calls) == 1
    monkeypatch.setattr(lag_mod, "LAG_REFRESH", 0.0)
    r.reportLatestOffset()
    assert len(calls) == 2


def test_a_failed_depth_ask_is_not_repeated_before_the_refresh(monkeypatch):
    """The depths cannot be asked (their connection fails): None, and not asked again on
    every one of Spark's calls (a connect attempt each time would hold up the triggers)."""
    broker = FakeBroker(["a"])
    r = AmqpQueueMicroBatchStream(parse_source_options({"queue": "a", "prefetch": "10"}),
                              consumer_factory=broker.factory)
    r.latestOffset(r.initialOffset(), ReadMaxRows(5))
    calls = []

    def depths(self=None):
        calls.append(1)
        raise ConnectionRefusedError("depth connection refused")

    broker.consumers[0].queue_depths = depths
    for _ in range(50):
        assert r.reportLatestOffset() is None
    assert len(calls) == 1
    monkeypatch.setattr(lag_mod, "LAG_REFRESH", 0.0)
    assert r.reportLatestOffset() is None
    assert len(calls) == 2


def test_depths_are_asked_on_a_connection_of_their_own(broker_url, unique):
    """queue_depths does not use the consumers' connection: a synchronous call there reads
    past the read limit until its reply, behind every delivery already sent."""
    from spark_amqp.spark.source.queues.consumer import DriverConsumer

    name = unique("depthconn")
    declare(broker_url, name)
    c = DriverConsumer(parse_source_options({"uri": broker_url, "queue": name}))
    c.open()
    try:
        assert c.queue_depths() == {name: 0}
        assert c._depth_conn is not None and c._depth_conn is not c.conn
        assert (c._depth_conn.params.host, c._depth_conn.params.port) == \
            (c.conn.params.host, c.conn.params.port)
    finally:
        depth_conn = c._depth_conn
        c.close()
    assert not depth_conn.is_open


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["queue", "stream"])
def test_lag_from_real_progress_events(spark, broker_url, unique, tmp_path, mode):
    """A listener gets the progress events of a query capped at 10 rows a batch while 60
    messages arrive: the helper shows the lag, and it agrees with the events' offsets."""
    from pyspark.sql.streaming import StreamingQueryListener

    name = unique("lag")
    events = []

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            events.append(event.progress)

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    r = spark.readStream.format("amqp").option("uri", broker_url)
    if mode == "queue":
        declare(broker_url, name)
        r = r.option("queue", name)
    else:
        declare_stream(broker_url, name)
        r = r.option("stream", name)
    listener = Listener()
    spark.streams.addListener(listener)
    sq = (r.option("maxMessagesPerTrigger", 10).load().writeStream.format("noop")
          .trigger(processingTime="500 milliseconds")
          .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        wait_until(lambda: sq.status["message"] == "Waiting for data to arrive"
                   or (not sq.isActive and _failed(sq)), 180, what="the query to run")
        publish(broker_url, name, [b"m%d" % i for i in range(60)])   # during the query
        wait_until(lambda: sum(p.numInputRows for p in events if str(p.id) == str(sq.id)) >= 60
                   or (not sq.isActive and _failed(sq)), 180, what="60 rows")
    finally:
        sq.stop()
        spark.streams.removeListener(listener)
        delete(broker_url, name)
    mine = [p for p in events if str(p.id) == str(sq.id) and p.numInputRows > 0]
    lags = [offsets_behind_latest(p)[0] for p in mine]
    assert all(x is not None for x in lags), [p.json for p in mine]
    for p, lag in zip(mine, lags):   # the figures are latestOffset - endOffset, per queue
        src = p.sources[0]
        end, latest = (x if isinstance(x, dict) else json.loads(x)
                       for x in (src.endOffset, src.latestOffset))
        key = "queues" if mode == "queue" else "streams"
        assert lag["offsetsBehindLatest"] == {k: latest[key][k] - end[key].get(k, 0)
                                              for k in latest[key]}
    assert max(x["maxOffsetsBehindLatest"] for x in lags) >= 10   # behind while it caught up
    assert lags[-1]["maxOffsetsBehindLatest"] == 0                 # caught up: nothing newer


def _failed(sq):
    raise AssertionError(f"the streaming query stopped: {sq.exception()}")
