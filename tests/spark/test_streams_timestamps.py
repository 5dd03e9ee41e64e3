"""Timestamps per stream (issue 29): startingOffsetsByTimestamp (+ its strategy),
endingTimestamp / endingOffsetsByTimestamp; options without a broker, then on both brokers
with two streams each published in two chunks more than a second apart (RabbitMQ positions
by chunk, on whole seconds)."""

from __future__ import annotations

import time

import pytest

from source_helpers import delete, publish, wait_until
from stream_helpers import declare_stream
from spark_amqp.spark.source.streams.options import parse_stream_options
from spark_amqp.spark.source.streams.batch_reader import AmqpStreamBatchReader
from spark_amqp.spark.source.streams.micro_batch_stream import AmqpStreamMicroBatchStream


def test_timestamp_options_parse_and_errors():
    o = parse_stream_options({"stream": "a,b", "startingoffsetsbytimestamp": '{"a": 5, "b": 0}',
                              "startingoffsetsbytimestampstrategy": "LATEST"})
    assert o.starting_by_timestamp == {"a": 5, "b": 0}
    assert o.starting_timestamp_strategy == "latest"
    o = parse_stream_options({"stream": "a", "endingtimestamp": "7"})
    assert o.ending_timestamp_ms == 7
    o = parse_stream_options({"stream": "a", "endingoffsetsbytimestamp": '{"a": 9}'})
    assert o.ending_by_timestamp == {"a": 9}
    bad = [({"startingoffsetsbytimestamp": '{"a": 5}'}, "missing stream\\(s\\) b"),
           ({"startingoffsetsbytimestamp": '{"a": -1, "b": 0}'},
            "'startingOffsetsByTimestamp'.*ms since the epoch"),
           ({"startingoffsetsbytimestamp": '{"a": 1, "b": 1}', "startingtimestamp": "3"},
            "'startingTimestamp' and 'startingOffsetsByTimestamp'.*exclusive"),
           ({"startingoffsetsbytimestampstrategy": "error"}, "only applies with"),
           ({"startingtimestamp": "1", "startingoffsetsbytimestampstrategy": "earliest"},
            r"'startingOffsetsByTimestampStrategy'.*error \| latest"),
           ({"endingtimestamp": "1", "endingoffsets": "latest"}, "exclusive"),
           ({"endingoffsetsbytimestamp": "[]"}, "'endingOffsetsByTimestamp'.*a JSON object")]
    for extra, match in bad:
        with pytest.raises(ValueError, match=match):
            parse_stream_options({"stream": "a,b", **extra})
    with pytest.raises(ValueError, match="'endingTimestamp' of the amqp source is for batch"):
        AmqpStreamMicroBatchStream(parse_stream_options({"stream": "a", "endingtimestamp": "1"}))


class TimeProbe:
    """Chunks at offsets 0 (time 1000 ms) and 10 (time 5000 ms), tail 20, per stream."""

    bytes_received = 0

    def check_exists(self, s):
        pass

    def tails(self, streams, wait):
        return {s: 20 for s in streams}

    def firsts(self, streams, wait):
        return {s: 0 for s in streams}

    def at_timestamp(self, s, ms, wait):
        return 0 if ms <= 1000 else 10 if ms <= 5000 else None

    def close(self):
        pass


def test_resolution_per_stream_strategy_and_ending():
    def start(**o):
        r = AmqpStreamMicroBatchStream(parse_stream_options({"stream": "a,b", **o}),
                                   probe_factory=lambda _: TimeProbe())
        return r.initialOffset()["streams"]

    assert start(startingoffsetsbytimestamp='{"a": 3000, "b": 0}') == {"a": 10, "b": 0}
    with pytest.raises(ValueError, match="Stream 'a' has no chunk at or after 9000 ms "
                                         ".*startingOffsetsByTimestampStrategy=latest"):
        start(startingoffsetsbytimestamp='{"a": 9000, "b": 0}')
    assert start(startingoffsetsbytimestamp='{"a": 9000, "b": 0}',
                 startingoffsetsbytimestampstrategy="latest") == {"a": 20, "b": 0}
    assert start(startingtimestamp="9000") == {"a": 20, "b": 20}     # as before: the tail
    with pytest.raises(ValueError, match="option 'startingTimestamp'"):
        start(startingtimestamp="9000", startingoffsetsbytimestampstrategy="error")

    def ranges(**o):
        r = AmqpStreamBatchReader(parse_stream_options({"stream": "a,b", **o}),
                                  probe_factory=lambda _: TimeProbe())
        return sorted((p.stream, p.start, p.end) for p in r.partitions())

    assert ranges(endingtimestamp="3000") == [("a", 0, 10), ("b", 0, 10)]
    assert ranges(endingoffsetsbytimestamp='{"a": 3000, "b": 9000}') == [("a", 0, 10),
                                                                          ("b", 0, 20)]


@pytest.fixture
def two_chunked_streams(broker_url, unique):
    """Streams a, b: "early" messages, then > 1 s, the middle time, > 1 s, "late" ones."""
    a, b = unique("tsa"), unique("tsb")
    for s in (a, b):
        declare_stream(broker_url, s)
    try:
        for s in (a, b):
            publish(broker_url, s, [b"%s-early%d" % (s.encode(), i) for i in range(10)])
        t_mid = time.time() + 1.2
        wait_until(lambda: time.time() > t_mid + 1.2, 10, interval=0.05, what="later time")
        for s in (a, b):
            publish(broker_url, s, [b"%s-late%d" % (s.encode(), i) for i in range(5)])
        yield a, b, int(t_mid * 1000)
    finally:
        delete(broker_url, a, b)


def _bodies(df):
    return sorted(bytes(r.body).decode() for r in df.select("body").collect())


@pytest.mark.spark
def test_by_timestamp_start_end_and_strategy_on_the_broker(spark, broker_url,
                                                           two_chunked_streams, tmp_path):
    a, b, ms = two_chunked_streams
    late = lambda s: [f"{s}-late{i}" for i in range(5)]     # noqa: E731
    early = lambda s: [f"{s}-early{i}" for i in range(10)]  # noqa: E731

    def batch(**o):
        r = spark.read.format("amqp").option("uri", broker_url).option("stream", f"{a},{b}")
        for k, v in o.items():
            r = r.option(k, v)
        return _bodies(r.load())

    # per stream: a from the middle time, b from the beginning
    assert batch(startingOffsetsByTimestamp=f'{{"{a}": {ms}, "{b}": 0}}') == \
        sorted(late(a) + early(b) + late(b))
    # ending before the chunk at or after the time (exclusive), for all or per stream
    assert batch(endingTimestamp=str(ms)) == sorted(early(a) + early(b))
    assert batch(endingOffsetsByTimestamp=f'{{"{a}": {ms}, "{b}": {ms + 3_600_000}}}') == \
        sorted(early(a) + early(b) + late(b))
    future = int(time.time() * 1000) + 3_600_000
    with pytest.raises(Exception, match=f"Stream '{a}' has no chunk at or after"):
        batch(startingOffsetsByTimestamp=f'{{"{a}": {future}, "{b}": 0}}')
    assert batch(startingOffsetsByTimestamp=f'{{"{a}": {future}, "{b}": {ms}}}',
                 startingOffsetsByTimestampStrategy="latest") == sorted(late(b))
    # a streaming query starts the same way (Trigger.AvailableNow)
    df = (spark.readStream.format("amqp").option("uri", broker_url)
          .option("stream", f"{a},{b}")
          .option("startingOffsetsByTimestamp", f'{{"{a}": {ms}, "{b}": 0}}').load())
    q = (df.writeStream.format("memory").queryName("ts_by_stream").trigger(availableNow=True)
         .option("checkpointLocation", str(tmp_path / "ck")).start())
    assert q.awaitTermination(240) and q.exception() is None
    assert _bodies(spark.table("ts_by_stream")) == sorted(late(a) + early(b) + late(b))
