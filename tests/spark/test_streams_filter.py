"""Stream filtering in the amqp source and sink (issue 29 item 4): option ``streamFilter`` /
``streamMatchUnfiltered`` and the sink column ``stream_filter_value``.

The same reads on both brokers give the same rows: the embedded broker (4.3 mode) skips the
chunks whose Bloom filter cannot match (counted in its stream log's ``filter_stats``), the
local RabbitMQ 3.10.8 sends everything, and the source filters every row exactly. The range
reads are tested without Spark (``read_range``, fast); the streaming query, with a publisher
writing during it, and the batch read through Spark."""

from __future__ import annotations

import threading

import pika
import pytest

from source_helpers import delete, pika_conn, wait_until
from stream_helpers import declare_stream
from spark_amqp.spark.source.streams.consumer import read_range
from spark_amqp.spark.source.streams.options import parse_stream_options

#: message i's filter value: ten values, and every 7th message without one
VALUES = [f"v{i}" for i in range(10)]


def value_of(i: int) -> str | None:
    return None if i % 7 == 6 else VALUES[i % 10]


def publish_filtered(url: str, stream: str, start: int, n: int) -> None:
    """Messages ``start .. start+n-1`` (body ``m<i>``) with their filter values, confirmed one
    by one (pika waits for each confirm: one chunk per message)."""
    with pika_conn(url) as c:
        ch = c.channel()
        ch.confirm_delivery()
        for i in range(start, start + n):
            v = value_of(i)
            ch.basic_publish("", stream, b"m%d" % i,
                             pika.BasicProperties(headers={"x-stream-filter-value": v} if v else {}))


def expected(n: int, wanted: set, unfiltered: bool) -> list:
    return [(i, b"m%d" % i) for i in range(n)
            if (value_of(i) in wanted) or (unfiltered and value_of(i) is None)]


@pytest.fixture
def stream(broker_url, unique):
    names = []

    def make(prefix="flt"):
        s = unique(prefix)
        declare_stream(broker_url, s)
        names.append(s)
        return s

    yield make
    delete(broker_url, *names)


def _log_stats(request, broker_url, stream_name):
    """The embedded broker's filter counters of ``stream_name`` (None on RabbitMQ)."""
    if "127.0.0.1:5672" in broker_url:
        return None
    b = request.getfixturevalue("embedded_broker")
    return b.broker.vhosts["/"].queues[stream_name].log.filter_stats


def _rows(opts: dict, stream: str, start: int, end: int) -> list:
    options = parse_stream_options({"stream": stream, **opts})
    out = []
    for batch in read_range(options, stream, start, end):
        d = batch.to_pydict()
        out.extend(zip(d["offset"], (bytes(b) for b in d["body"])))
    return out


@pytest.mark.parametrize("flt, unfiltered", [("v3", False), ('["v3", "v8"]', False),
                                              ("v3", True)])
def test_range_reads_return_the_same_rows_on_both_brokers(request, broker_url, stream, flt,
                                                          unfiltered):
    s = stream()
    publish_filtered(broker_url, s, 0, 200)
    opts = {"uri": broker_url, "streamFilter": flt}
    if unfiltered:
        opts["streamMatchUnfiltered"] = "true"
    wanted = {"v3", "v8"} if flt.startswith("[") else {"v3"}
    want = expected(200, wanted, unfiltered)
    assert _rows(opts, s, 0, 200) == want
    stats = _log_stats(request, broker_url, s)
    if stats is not None:   # the embedded broker skipped the chunks that cannot match
        per_value = 200 / 10
        # the wanted chunks, the peeked last value's (v9), the unfiltered ones if asked
        most = len(want) + per_value + 2
        assert stats["chunks_read"] <= most and stats["chunks_skipped"] >= 200 - most
    # three ranges: ends inside the stream and at its end, the ranges' rows join up
    assert _rows(opts, s, 0, 57) + _rows(opts, s, 57, 120) + _rows(opts, s, 120, 200) == want


def test_range_ending_on_a_chunk_that_does_not_match(broker_url, stream):
    """The last offset of the range is in a chunk the filter skips: the read still ends (the
    peek adds that chunk's value to the broker-side filter) with the right rows."""
    s = stream()
    publish_filtered(broker_url, s, 0, 30)
    assert value_of(28) == "v8"
    got = _rows({"uri": broker_url, "streamFilter": "v1", "readTimeout": "20"}, s, 0, 29)
    assert got == expected(29, {"v1"}, False)


def test_unfiltered_read_is_unchanged(broker_url, stream):
    s = stream()
    publish_filtered(broker_url, s, 0, 40)
    assert _rows({"uri": broker_url}, s, 0, 40) == [(i, b"m%d" % i) for i in range(40)]


@pytest.mark.parametrize("opts, match", [
    ({"streamFilter": ""}, "streamFilter"),
    ({"streamFilter": "a,,b"}, "streamFilter"),
    ({"streamFilter": "a,a"}, "streamFilter"),
    ({"streamFilter": "[1, 2]"}, "streamFilter"),
    ({"streamFilter": "[]"}, "streamFilter"),
    ({"streamFilter": "a", "streamMatchUnfiltered": "maybe"}, "streamMatchUnfiltered"),
    ({"streamMatchUnfiltered": "true"}, "streamMatchUnfiltered"),
])
def test_bad_filter_options_name_the_option(opts, match):
    with pytest.raises(ValueError, match=match):
        parse_stream_options({"stream": "s", **opts})


def test_filter_option_values():
    o = parse_stream_options({"stream": "s", "streamfilter": " emea, apac "})
    assert o.stream_filter == ("emea", "apac") and o.stream_match_unfiltered is False
    o = parse_stream_options({"stream": "s", "streamfilter": '["a,b", "c"]',
                              "streammatchunfiltered": "TRUE"})
    assert o.stream_filter == ("a,b", "c") and o.stream_match_unfiltered is True


# ------------------------------------------------------------------------------ with Spark

@pytest.mark.spark
def test_streaming_query_with_a_publisher_writing_during_it(spark, request, broker_url, stream,
                                                            tmp_path):
    s = stream()
    publish_filtered(broker_url, s, 0, 100)
    df = (spark.readStream.format("amqp").option("uri", broker_url).option("stream", s)
          .option("startingOffsets", "earliest").option("streamFilter", "v2,v5")
          .option("streamMatchUnfiltered", "true").option("maxMessagesPerTrigger", "60").load())
    q = (df.selectExpr("offset", "body").writeStream.format("memory").queryName("flt_live")
         .option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="300 milliseconds").start())
    try:
        writer = threading.Thread(target=publish_filtered, args=(broker_url, s, 100, 200))
        wait_until(lambda: q.lastProgress is not None or not q.isActive, 180, what="batch 0")
        writer.start()   # writes while the query runs
        writer.join(120)
        want = expected(300, {"v2", "v5"}, True)
        wait_until(lambda: spark.table("flt_live").count() >= len(want) or not q.isActive, 180,
                   what=f"{len(want)} rows")
        assert q.exception() is None
        got = sorted((r.offset, bytes(r.body)) for r in spark.table("flt_live").collect())
        assert got == want
    finally:
        q.stop()
    stats = _log_stats(request, broker_url, s)
    if stats is not None:
        assert stats["chunks_skipped"] > 100


@pytest.mark.spark
def test_batch_read_and_sink_column(spark, broker_url, stream):
    """The sink's ``stream_filter_value`` column sets each message's header; a batch read
    with ``streamFilter`` returns exactly the rows with those values."""
    s = stream()
    rows = [(f"b{i}", value_of(i)) for i in range(60)]
    (spark.createDataFrame(rows, "body string, stream_filter_value string").write.format("amqp")
     .mode("append").option("uri", broker_url).option("routingKey", s).save())
    out = (spark.read.format("amqp").option("uri", broker_url).option("stream", s)
           .option("streamFilter", "v4").load())
    # the sink's tasks publish side by side: offsets are in no particular row order
    got = sorted((bytes(r.body).decode(), r.headers["x-stream-filter-value"])
                 for r in out.collect())
    assert got == sorted((f"b{i}", "v4") for i in range(60) if value_of(i) == "v4")


def test_sink_column_sets_the_header():
    import pyarrow as pa

    from spark_amqp.spark.sink.convert import SinkPlan, batch_to_messages

    batch = pa.RecordBatch.from_pydict({
        "body": pa.array([b"a", b"b", b"c"]),
        "headers": pa.array([[("k", "1")], None, [("x-stream-filter-value", "old")]],
                            pa.map_(pa.string(), pa.string())),
        "stream_filter_value": pa.array(["emea", None, "apac"])})
    plan = SinkPlan(columns=("body", "headers", "stream_filter_value"), body_is_string=False,
                    exchange=None, routing_key="q", delivery_mode=None, mandatory=False,
                    message_id="none", partition_key=False)
    heads = [m[3].headers for m in batch_to_messages(plan, batch, None, 0)]
    assert heads == [{"k": "1", "x-stream-filter-value": "emea"}, None,
                     {"x-stream-filter-value": "apac"}]


def test_filter_option_in_queue_mode_points_at_the_stream_mode():
    from spark_amqp.spark.source.queues.options import parse_source_options

    with pytest.raises(ValueError, match="streamFilter is an option of the stream mode"):
        parse_source_options({"queue": "q", "streamfilter": "a"})
