"""Trigger pacing (minMessagesPerTrigger / maxTriggerDelay, issue 29) without a broker or Spark:
the pacer, the options, and both readers' latestOffset against fakes."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows, \
    ReadMinRows

from spark_amqp.spark.option_values import OptionErrors, parse_duration
from spark_amqp.spark.source.queues.offsets import SourceOffset
from spark_amqp.spark.source.queues.options import parse_source_options
from spark_amqp.spark.source.pacing import TriggerPacer
from spark_amqp.spark.source.queues.micro_batch_stream import AmqpQueueMicroBatchStream
from spark_amqp.spark.source.streams.options import parse_stream_options
from spark_amqp.spark.source.streams.micro_batch_stream import AmqpStreamMicroBatchStream

from source_fakes import FakeBroker
from test_streams_unit import FakeProbe


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_pacer_minimum_full_delay_and_never_empty():
    c = Clock()
    p = TriggerPacer(10, 5.0, clock=c)
    assert not p.ready(3)                     # first call starts the delay (query start)
    c.t += 4.9
    assert not p.ready(9)
    assert p.ready(10) and p.reason == "minimum"
    p.planned()
    assert p.ready(2, full=True) and p.reason == "full"
    c.t += 5.0
    assert not p.ready(0)                     # the delay passed, but never an empty batch
    assert p.ready(1) and p.reason == "delay"
    p.planned()
    assert not p.ready(1)
    assert p.ready(4, min_rows=4)             # Spark's ReadMinRows overrides the option


@pytest.mark.parametrize("raw, seconds", [("15m", 900.0), ("30s", 30.0), ("500ms", 0.5),
                                          ("250", 0.25), ("1h", 3600.0), ("2 min", 120.0),
                                          ("1D", 86400.0)])
def test_duration_syntax_is_sparks(raw, seconds):
    assert parse_duration({"d": raw}, "d", OptionErrors(ValueError, "x")) == pytest.approx(seconds)


@pytest.mark.parametrize("raw", ["", "0s", "-1s", "1.5s", "10 parsecs", "s", "fast"])
def test_bad_durations_name_the_option_and_the_units(raw):
    with pytest.raises(ValueError, match=r"option 'maxTriggerDelay'.*us \| ms \| s \| m"):
        parse_source_options({"queue": "q", "minmessagespertrigger": "5",
                              "maxtriggerdelay": raw})


@pytest.mark.parametrize("parse, base", [(parse_source_options, {"queue": "q"}),
                                         (parse_stream_options, {"stream": "s"})])
def test_pacing_options_both_modes(parse, base):
    o = parse({**base, "minMessagesPerTrigger": "100", "maxTriggerDelay": "30s"})
    assert o.min_messages_per_trigger == 100 and o.max_trigger_delay == 30.0
    o = parse({**base, "minmessagespertrigger": "100"})
    assert o.max_trigger_delay == 900.0       # Kafka's default: 15m
    assert parse(base).min_messages_per_trigger is None
    with pytest.raises(ValueError, match="'minMessagesPerTrigger'.*an integer >= 1"):
        parse({**base, "minmessagespertrigger": "0"})
    with pytest.raises(ValueError, match="'maxTriggerDelay'.*only applies with "
                                         "'minMessagesPerTrigger'"):
        parse({**base, "maxtriggerdelay": "10s"})
    with pytest.raises(ValueError, match=r"'minMessagesPerTrigger'.*\(50\) is above "
                                         r"'maxMessagesPerTrigger' \(10\)"):
        parse({**base, "minmessagespertrigger": "50", "maxmessagespertrigger": "10"})


def test_queue_mode_minimum_fits_the_prefetch_windows():
    # default prefetch (20000 per queue) grows to hold the minimum
    assert parse_source_options({"queues": "a,b", "minmessagespertrigger": "100000"}
                                ).prefetch == 50000
    assert parse_source_options({"queue": "a", "maxmessagespertrigger": "100",
                                 "minmessagespertrigger": "50"}).prefetch == 1000
    with pytest.raises(ValueError, match="'minMessagesPerTrigger'.*\\(500\\) is more than the "
                                         "prefetch windows.*100 per queue x 2 queue"):
        parse_source_options({"queues": "a,b", "prefetch": "100",
                              "minmessagespertrigger": "500"})
    assert parse_source_options({"queue": "a", "prefetch": "0",
                                 "minmessagespertrigger": "500"}).prefetch == 0


def _queue_reader(broker, clock, **opts):
    o = parse_source_options({"queues": ",".join(broker.ready), **opts})
    r = AmqpQueueMicroBatchStream(o, consumer_factory=broker.factory, clock=clock)
    return r


def _rows(off):
    return sum(SourceOffset.from_dict(off).as_map().values())


def test_queue_reader_waits_for_the_minimum_then_the_delay():
    broker, c = FakeBroker(["a", "b"]), Clock()
    r = _queue_reader(broker, c, minMessagesPerTrigger="10", maxTriggerDelay="5s")
    s = r.initialOffset()
    limit = r.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxBytes)    # the cap stays Spark's limit; the pacer is ours
    for i in range(6):
        broker.publish("a", b"a")
    broker.publish("b", b"b")
    assert r.latestOffset(s, limit) == s      # 7 < 10: no batch
    for i in range(3):
        broker.publish("b", b"b")
    e1 = r.latestOffset(s, limit)
    assert _rows(e1) == 10                    # the minimum: a batch, all 10
    broker.publish("a", b"a")
    c.t += 4.0
    assert r.latestOffset(e1, limit) == e1    # 1 row, 4 s after the last batch: waits
    assert len(broker.acked["a"]) == 6        # ...but batch 1 was acked all the same
    c.t += 1.0
    e2 = r.latestOffset(e1, limit)
    assert _rows(e2) == 11                    # the delay passed: the one row goes
    c.t += 100.0
    assert r.latestOffset(e2, limit) == e2    # nothing buffered: never an empty batch


def test_queue_reader_full_batch_goes_below_the_minimum():
    broker, c = FakeBroker(["a"]), Clock()
    # the row cap reached: a full batch is as big as a batch can be
    r = _queue_reader(broker, c, minMessagesPerTrigger="10", maxMessagesPerTrigger="10",
                      prefetch="0")
    for i in range(25):
        broker.publish("a", b"a")
    s = r.initialOffset()
    e = r.latestOffset(s, ReadMaxRows(10))
    assert _rows(e) == 10
    # the prefetch window full (nothing more can arrive before an ack): goes at once
    broker2, c2 = FakeBroker(["a"]), Clock()
    for i in range(25):
        broker2.publish("a", b"a")
    r2 = _queue_reader(broker2, c2, minMessagesPerTrigger="5", prefetch="5")
    s2 = r2.initialOffset()
    assert _rows(r2.latestOffset(s2, ReadAllAvailable())) == 5


def test_queue_reader_available_now_never_waits_for_the_minimum():
    broker, c = FakeBroker(["a"]), Clock()
    for i in range(3):
        broker.publish("a", b"a")
    r = _queue_reader(broker, c, minMessagesPerTrigger="1000", availableNowIdleTimeout="0.2")
    r.prepareForTriggerAvailableNow()
    s = r.initialOffset()
    e = r.latestOffset(s, r.getDefaultReadLimit())
    assert _rows(e) == 3
    assert r.latestOffset(e, r.getDefaultReadLimit()) == e


def test_queue_reader_honours_read_min_rows_from_spark():
    broker, c = FakeBroker(["a"]), Clock()
    r = AmqpQueueMicroBatchStream(parse_source_options({"queue": "a"}), consumer_factory=broker.factory,
                              clock=c)
    for i in range(3):
        broker.publish("a", b"a")
    s = r.initialOffset()
    assert r.latestOffset(s, ReadMinRows(5)) == s
    broker.publish("a", b"a")
    broker.publish("a", b"a")
    assert _rows(r.latestOffset(s, ReadMinRows(5))) == 5


def _stream_reader(probe, clock, **opts):
    o = parse_stream_options({"stream": "a,b", "startingoffsets": "earliest", **opts})
    r = AmqpStreamMicroBatchStream(o, probe_factory=lambda _: probe)
    r.offsets.pacer._clock = clock
    return r


def test_stream_reader_waits_for_the_minimum_then_the_delay():
    probe, c = FakeProbe({"a": 4, "b": 3}), Clock()
    r = _stream_reader(probe, c, minMessagesPerTrigger="10", maxTriggerDelay="5s")
    s = r.initialOffset()
    limit = r.getDefaultReadLimit()
    assert r.latestOffset(s, limit) == s      # 7 offsets ahead < 10
    probe.tail_of["b"] = 6
    r.offsets._next_probe = 0
    e1 = r.latestOffset(s, limit)
    assert e1 == {"streams": {"a": 4, "b": 6}}
    probe.tail_of["a"] = 5
    r.offsets._next_probe = 0
    c.t += 4.0
    assert r.latestOffset(e1, limit) == e1
    c.t += 1.0
    assert r.latestOffset(e1, limit) == {"streams": {"a": 5, "b": 6}}


def test_stream_reader_cap_and_available_now():
    probe, c = FakeProbe({"a": 40, "b": 0}), Clock()
    r = _stream_reader(probe, c, minMessagesPerTrigger="10", maxMessagesPerTrigger="10")
    s = r.initialOffset()
    assert r.latestOffset(s, ReadMaxRows(10)) == {"streams": {"a": 10, "b": 0}}
    probe2, c2 = FakeProbe({"a": 3, "b": 0}), Clock()
    r2 = _stream_reader(probe2, c2, minMessagesPerTrigger="1000")
    r2.prepareForTriggerAvailableNow()
    s2 = r2.initialOffset()
    e2 = r2.latestOffset(s2, r2.getDefaultReadLimit())
    assert e2 == {"streams": {"a": 3, "b": 0}}
    assert r2.latestOffset(e2, r2.getDefaultReadLimit()) == e2
