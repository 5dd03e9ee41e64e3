"""Unit tests of the amqp source's pure parts: options, offsets, buffers, planning, acks, Arrow.

The reader runs against tests/spark/fakes.py (no broker, no SparkSession).
"""

from __future__ import annotations

import datetime as dt
import json
import pickle
import time
from decimal import Decimal

import pytest
from hypothesis import given, strategies as st

from spark_amqp.protocol import BasicProperties
from spark_amqp.spark import schema as S
from spark_amqp.spark.source.arrow import pack_deliveries, render_header_value, to_record_batches
from spark_amqp.spark.source.queues.options import parse_source_options
from spark_amqp.spark.source.queues.micro_batch_stream import AmqpQueueMicroBatchStream
from spark_amqp.spark.source.queues.partition_reader import QueueInputPartition
from spark_amqp.spark.source.fair_split import fair_split
from spark_amqp.spark.source.queues.buffer import QueueBuffer
from spark_amqp.spark.source.queues.offsets import SourceOffset
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from source_fakes import FakeBroker, FakeClock, FakeDelivery


# ------------------------------------------------------------------------------ schema

def test_arrow_schema_is_exactly_what_spark_checks():
    from pyspark.sql.pandas.types import to_arrow_schema

    assert to_arrow_schema(S.source_schema(), timezone="UTC").equals(S.arrow_schema())
    assert S.source_schema().fieldNames() == list(S.COLUMNS)


def _ddl(text):
    """A StructType from ``name type [not null], ...`` over the source's types (no JVM)."""
    from pyspark.sql.types import StringType, StructField, StructType

    from pyspark.sql.types import LongType

    types = {f.dataType.simpleString(): f.dataType for f in S.source_schema().fields}
    types["long"] = LongType()
    fields = []
    for part in text.replace("`", "").split(", "):
        name, typ, *rest = part.split()
        fields.append(StructField(name, types.get(typ, StringType()), nullable=not rest))
    return StructType(fields)


def test_user_schema_selects_columns_or_fails_naming_the_column():
    ddl = _ddl
    assert S.check_user_schema(None) is None
    assert S.check_user_schema(S.source_schema()) is None   # no user schema: every column
    assert S.check_user_schema(ddl("body binary")) == (("body", True),)
    picked = ddl("offset long not null, body binary, headers map<string,string>")
    assert S.check_user_schema(picked) == (("offset", False), ("body", True), ("headers", True))
    # the whole schema in DDL: every column, but all nullable (what Spark then expects)
    assert S.check_user_schema(ddl(S.SOURCE_SCHEMA_DDL)) == tuple((c, True) for c in S.COLUMNS)
    for bad, match in (("value string", "`value` is not a column of the source"),
                       ("body string", "`body` is string, the source's `body` is binary"),
                       ("body binary, body binary", "`body` is given twice"),
                       ("timestamp timestamp not null", "`timestamp` is NOT NULL")):
        with pytest.raises(ValueError, match=match):
            S.check_user_schema(ddl(bad))


def test_selected_arrow_schema_is_exactly_what_spark_checks():
    from pyspark.sql.pandas.types import to_arrow_schema

    for text in ("body binary", "routing_key string, body binary not null",
                 "timestamp timestamp, headers map<string,string>, offset long, priority int",
                 S.SOURCE_SCHEMA_DDL):
        user = _ddl(text)
        cols = S.check_user_schema(user)
        assert to_arrow_schema(user, timezone="UTC").equals(S.arrow_schema(cols)), text


# ------------------------------------------------------------------------------ options

def test_options_defaults_and_prefetch_derivation():
    o = parse_source_options({"queue": "a"})
    assert o.queues == ("a",) and o.uri.startswith("amqp://") and o.prefetch == 20000
    assert o.include_headers and not o.declare and o.max_messages_per_trigger is None
    o = parse_source_options({"queues": "a, b", "maxmessagespertrigger": "100000"})
    assert o.queues == ("a", "b") and o.per_queue_trigger_share == 50000
    assert o.prefetch == 65535 and o.consumers_per_queue == 1     # share 50k fits one consumer
    assert o.prefetch_per_consumer == 65535
    o = parse_source_options({"queues": "a", "maxmessagespertrigger": "20000"})
    assert o.prefetch == 40000 and o.consumers_per_queue == 1     # 2 x share fits one consumer
    o = parse_source_options({"queues": "a", "maxmessagespertrigger": "100"})
    assert o.prefetch == 1000
    o = parse_source_options({"queues": "a", "maxmessagespertrigger": "100000"})
    assert o.prefetch == 200000 and o.consumers_per_queue == 4    # share above one consumer's max
    assert o.prefetch_per_consumer == 50000
    assert parse_source_options({"queue": "a", "prefetch": "0"}).consumers_per_queue == 1
    # a prefetch below the trigger share only caps the batch (no stall on PySpark 4.2+)
    o = parse_source_options({"queue": "a", "maxmessagespertrigger": "1000", "prefetch": "10"})
    assert o.prefetch == 10 and o.per_queue_trigger_share == 1000
    o = parse_source_options({"queue": "q", "queuearguments": '{"x-queue-type": "quorum"}',
                              "declare": "TRUE", "uri": "amqps://h/%2F", "verify": "verify_none",
                              "heartbeat": "10"})
    assert o.queue_arguments == {"x-queue-type": "quorum"} and o.declare
    assert o.client_kwargs() == {"verify": "verify_none", "heartbeat": 10}


@pytest.mark.parametrize("opts, match", [
    ({}, "needs option 'queue'"),
    ({"queue": "a", "queues": "b"}, "exclusive"),
    ({"queues": "a,,b"}, "option 'queues'"),
    ({"queues": "a,a"}, "listed twice"),
    ({"queue": "a", "bogus": "1"}, "Unknown option.*'bogus'"),
    ({"queue": "a", "uri": "http://x"}, "option uri"),
    ({"queue": "a", "prefetch": "-1"}, "option 'prefetch'"),
    ({"queue": "a", "maxmessagespertrigger": "0"}, "option 'maxMessagesPerTrigger'"),
    ({"queue": "a", "maxmessagesperpartition": "x"}, "option 'maxMessagesPerPartition'"),
    ({"queue": "a", "includeheaders": "yes"}, "option 'includeHeaders'.*true or false"),
    ({"queue": "a", "queuearguments": "[1]"}, "option 'queueArguments'"),
    ({"queue": "a", "queuearguments": "{bad"}, "option 'queueArguments'"),
    ({"queue": "a", "uri": "amqps://h/", "verify": "maybe"}, "option verify='maybe'"),
    # TLS options on a plain amqp:// uri would be silently unused
    ({"queue": "a", "cacertfile": "/ca.pem"}, "cacertfile need an amqps:// uri"),
    ({"queue": "a", "heartbeat": "70000"}, "option heartbeat='70000'.*0..65535"),
    ({"queue": "a", "connectiontimeout": "0"}, "option connectionTimeout"),
])
def test_bad_options_name_the_option(opts, match):
    with pytest.raises(ValueError, match=match):
        parse_source_options(opts)


# ------------------------------------------------------------------------------ offsets

def test_offsets_are_canonical():
    a = SourceOffset.make("s", {"zeta": 2, "alpha": 1})
    b = SourceOffset.from_dict(json.dumps({"session": "s", "queues": {"alpha": 1, "zeta": 2}}))
    assert a == b
    assert json.dumps(a.to_dict()) == '{"queues": {"alpha": 1, "zeta": 2}, "session": "s"}'
    assert a.get("zeta") == 2 and a.get("nope") == 0
    with pytest.raises(ValueError, match="not written by the amqp source"):
        SourceOffset.from_dict({"0": 5})


@given(st.dictionaries(st.text(min_size=1, max_size=5), st.integers(0, 10**9), min_size=1))
def test_offset_json_round_trip(queues):
    off = SourceOffset.make("sess", queues)
    assert SourceOffset.from_dict(json.loads(json.dumps(off.to_dict()))) == off
    assert json.dumps(SourceOffset.make("sess", dict(reversed(list(queues.items())))).to_dict()) \
        == json.dumps(off.to_dict())


# ------------------------------------------------------------------------------ buffer / split

def test_queue_buffer_plan_slice_ack():
    b = QueueBuffer("q")
    b.add([FakeDelivery(b"%d" % i, i + 1) for i in range(10)])
    assert b.plan(4) == 4 and b.unplanned == 6
    assert [d.body for d, lo, hi in b.slice(1, 4)] == [b"1", b"2", b"3"]
    assert b.ack_upto(3) == 3 and b.ack_upto(3) is None     # idempotent
    assert b.ack_upto(9) == 4                                  # clamped to planned
    with pytest.raises(LookupError):
        b.slice(0, 4)
    assert b.drop_unplanned() == 6 and b.received == 4


@given(st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 1000)),
       st.one_of(st.none(), st.integers(0, 3000)))
def test_fair_split_properties(avail, limit):
    out = fair_split(avail, limit)
    assert set(out) == set(avail)
    assert all(0 <= out[q] <= avail[q] for q in avail)
    if limit is None:
        assert out == avail
    else:
        assert sum(out.values()) == min(limit, sum(avail.values()))
        # fairness: a queue below its fair share only if it has nothing more
        fair = limit // max(1, len(avail))
        assert all(out[q] >= min(avail[q], fair) for q in avail)
        # water-filling: a queue short of what it has got at least everyone else's share - 1
        assert all(out[q] >= out[p] - 1 for q in avail if out[q] < avail[q] for p in avail)


@given(st.dictionaries(st.text(min_size=1, max_size=3), st.integers(-3, 40), max_size=5),
       st.integers(-2, 120), st.data())
def test_fair_split_with_caps_water_fills(avail, limit, data):
    caps = {q: data.draw(st.integers(0, 40)) for q in avail}
    out = fair_split(avail, limit, caps)
    room = {q: max(0, min(a, caps[q])) for q, a in avail.items()}
    assert all(0 <= out[q] <= room[q] for q in avail)
    assert sum(out.values()) == min(max(limit, 0), sum(room.values()))
    assert all(out[q] >= out[p] - 1 for q in avail if out[q] < room[q] for p in avail)


def test_fair_split_shares_what_a_small_queue_cannot_use_equally():
    # 5 rows, "00" can give 1: the other two get 2 each (was 3/1: the odd row went to the
    # queue that sorts first twice)
    assert fair_split({"0": 3, "1": 2, "00": 1}, 5) == {"0": 2, "1": 2, "00": 1}
    assert fair_split({"a": 10, "b": 10, "c": 10}, 10) == {"a": 4, "b": 3, "c": 3}


# ------------------------------------------------------------------------------ arrow

def _props(**kw):
    return BasicProperties(**kw)


def test_pack_and_record_batches_exact_schema_and_values():
    ds = [
        FakeDelivery(b"one", 1, "ex", "rk.1", False, _props(
            content_type="application/json", delivery_mode=2, priority=3, message_id="m1",
            timestamp=1700000000, headers={"k": "v", "n": 5, "nested": {"a": [1, "x"]},
                                           "flag": True, "dec": Decimal("1.50"),
                                           "raw": b"\xff\x00", "void": None,
                                           "x-delivery-count": 2})),
        FakeDelivery(bytearray(b"two"), 2, "ex", "rk.2", True, _props()),
    ]
    packed = pack_deliveries("orders", 40, ds, include_headers=True)
    part = pickle.loads(pickle.dumps(QueueInputPartition("sess", packed)))
    [batch] = list(to_record_batches(part.data))
    assert batch.schema.equals(S.arrow_schema())
    rows = batch.to_pylist()
    assert [r["body"] for r in rows] == [b"one", b"two"]
    assert [r["offset"] for r in rows] == [40, 41] and rows[0]["queue"] == "orders"
    assert rows[0]["exchange"] == "ex" and [r["routing_key"] for r in rows] == ["rk.1", "rk.2"]
    assert [r["redelivered"] for r in rows] == [False, True]
    assert rows[0]["timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc)
    assert rows[1]["timestamp"] is None and rows[1]["headers"] is None
    h = dict(rows[0]["headers"])
    assert h["k"] == "v" and h["n"] == "5" and h["flag"] == "true" and h["dec"] == "1.50"
    assert json.loads(h["nested"]) == {"a": [1, "x"]} and h["void"] is None
    assert h["raw"] == "/wA="                           # not UTF-8 -> base64
    assert rows[0]["delivery_count"] == 2 and rows[1]["delivery_count"] is None
    assert rows[0]["delivery_mode"] == 2 and rows[0]["priority"] == 3
    assert rows[0]["content_type"] == "application/json" and rows[0]["message_id"] == "m1"

    no_headers = pack_deliveries("orders", 0, ds, include_headers=False)
    [b2] = list(to_record_batches(no_headers))
    assert b2.column("headers").null_count == 2
    assert b2.column("delivery_count").to_pylist() == [2, None]

    # a user schema's selection: only those columns, in its order, with its nullability
    cols = (("message_id", True), ("body", False), ("offset", True))
    [b3] = list(to_record_batches(packed, columns=cols))
    assert b3.schema.equals(S.arrow_schema(cols)) and b3.schema.names == ["message_id", "body",
                                                                          "offset"]
    assert b3.to_pylist() == [{"message_id": "m1", "body": b"one", "offset": 40},
                              {"message_id": None, "body": b"two", "offset": 41}]


def test_constant_columns_and_slicing():
    ds = [FakeDelivery(b"x" * 10, i + 1, "", "q", False, _props(app_id="a")) for i in range(50)]
    packed = pack_deliveries("q", 0, ds, include_headers=True)
    batches = list(to_record_batches(packed, max_rows=16))
    assert [b.num_rows for b in batches] == [16, 16, 16, 2]
    assert all(b.schema.equals(S.arrow_schema()) for b in batches)
    assert batches[0].column("app_id").to_pylist()[0] == "a"
    assert batches[3].column("offset").to_pylist() == [48, 49]


def test_render_header_value():
    assert render_header_value(dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)) == \
        "2020-01-01T00:00:00+00:00"
    assert render_header_value([1, {"b": b"x"}]) == '[1,{"b":"x"}]'
    assert render_header_value(1.5) == "1.5"


# ------------------------------------------------------------------------------ reader

def _reader(broker, clock=time.monotonic, **opts):
    options = parse_source_options({"queues": ",".join(broker.ready), **opts})
    return AmqpQueueMicroBatchStream(options, consumer_factory=broker.factory, clock=clock)


def _rows(reader, start, end):
    out = []
    for p in reader.partitions(start, end):
        p = pickle.loads(pickle.dumps(p))   # as Spark ships it
        for b in reader.read(p):
            out += b.to_pylist()
    return out


def test_reader_init_does_no_io_and_pickles_small():
    broker = FakeBroker(["a"])
    r = _reader(broker)
    assert broker.consumers == []
    r.initialOffset()
    assert broker.consumers == []
    r2 = pickle.loads(pickle.dumps(r))
    assert r2.options == r.options and r2.supervisor.consumer is None


def test_ack_only_after_the_next_latest_offset_and_commit_backstop():
    broker = FakeBroker(["a", "b"])
    for i in range(5):
        broker.publish("a", b"a%d" % i)
        broker.publish("b", b"b%d" % i)
    r = _reader(broker)
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    assert end != start and SourceOffset.from_dict(end).as_map() == {"a": 5, "b": 5}
    rows = _rows(r, start, end)
    assert sorted(x["body"] for x in rows) == sorted([b"a%d" % i for i in range(5)] +
                                                      [b"b%d" % i for i in range(5)])
    assert broker.acked == {"a": [], "b": []}           # batch 1 planned, not yet acked
    # idle trigger: acks batch 1 and returns start unchanged (same JSON string)
    again = r.latestOffset(end, ReadAllAvailable())
    assert json.dumps(again) == json.dumps(end)
    assert len(broker.acked["a"]) == 5 and len(broker.acked["b"]) == 5
    c = broker.consumers[0]
    assert c.acks == [("a", 5), ("b", 5)]
    r.commit(end)                                        # idempotent backstop: no second ack
    assert c.acks == [("a", 5), ("b", 5)]
    r.stop()
    assert c.closed_politely


def test_commit_acks_when_latest_offset_was_not_called():
    broker = FakeBroker(["a"])
    for i in range(3):
        broker.publish("a", b"%d" % i)
    r = _reader(broker)
    s = r.initialOffset()
    e = r.latestOffset(s, ReadAllAvailable())
    r.commit(e)
    assert broker.acked["a"] == [b"0", b"1", b"2"]


def test_read_max_rows_split_fairly_and_partition_split():
    broker = FakeBroker(["a", "b"])
    for i in range(100):
        broker.publish("a", b"a")
    for i in range(10):
        broker.publish("b", b"b")
    r = _reader(broker, maxMessagesPerTrigger="60", maxMessagesPerPartition="20", prefetch="200")
    assert r.getDefaultReadLimit() == ReadMaxRows(60)
    s = r.initialOffset()
    e = r.latestOffset(s, ReadMaxRows(60))
    assert SourceOffset.from_dict(e).as_map() == {"a": 50, "b": 10}
    parts = r.partitions(s, e)
    assert sorted((p.data.queue, p.data.start, p.data.n) for p in parts) == [
        ("a", 0, 20), ("a", 20, 20), ("a", 40, 10), ("b", 0, 10)]
    e2 = r.latestOffset(e, ReadMaxRows(60))
    assert SourceOffset.from_dict(e2).as_map() == {"a": 100, "b": 10}
    assert [x["offset"] for x in _rows(r, e, e2)] == list(range(50, 100))
    assert r.latestOffset(e2, ReadAllAvailable()) == e2
    assert len(broker.acked["a"]) == 100


def test_restart_replay_range_of_earlier_session_is_empty_then_redelivered():
    broker = FakeBroker(["a"])
    for i in range(4):
        broker.publish("a", b"%d" % i)
    r1 = _reader(broker)
    s = r1.initialOffset()
    e = r1.latestOffset(s, ReadAllAvailable())
    broker.consumers[0].kill()                 # driver crash: batch planned, never acked
    r2 = _reader(broker)                       # restart from the checkpoint (offset log has e)
    assert r2.partitions(s, e) == []           # replaying the old session's range: nothing
    e2 = r2.latestOffset(e, ReadAllAvailable())
    assert SourceOffset.from_dict(e2).session != SourceOffset.from_dict(e).session
    rows = _rows(r2, e, e2)
    assert [x["body"] for x in rows] == [b"0", b"1", b"2", b"3"]
    assert all(x["redelivered"] for x in rows) and [x["offset"] for x in rows] == [0, 1, 2, 3]
    r2.latestOffset(e2, ReadAllAvailable())
    assert broker.acked["a"] == [b"0", b"1", b"2", b"3"]


def test_connection_loss_new_session_never_acks_old_tags():
    broker, clock = FakeBroker(["a"]), FakeClock()
    for i in range(3):
        broker.publish("a", b"%d" % i)
    r = _reader(broker, clock)
    s = r.initialOffset()
    e1 = r.latestOffset(s, ReadAllAvailable())
    assert len(_rows(r, s, e1)) == 3
    c1 = broker.consumers[0]
    c1.kill()                                  # lost after batch 1 ran, before its ack
    broker.publish("a", b"3")
    assert r.latestOffset(e1, ReadAllAvailable()) == e1   # loss detected, no data this trigger
    assert r.latestOffset(e1, ReadAllAvailable()) == e1   # still in the back-off (0.5 s)
    assert len(broker.consumers) == 1
    clock.advance(0.5)                         # the back-off has passed
    e2 = r.latestOffset(e1, ReadAllAvailable())
    assert len(broker.consumers) == 2 and c1.acks == []
    rows = _rows(r, e1, e2)
    assert [x["body"] for x in rows] == [b"0", b"1", b"2", b"3"]
    assert [x["redelivered"] for x in rows] == [True, True, True, False]
    assert r.partitions(s, e1) == []           # old session's range is gone
    r.latestOffset(e2, ReadAllAvailable())
    assert broker.acked["a"] == [b"0", b"1", b"2", b"3"]


def test_first_connection_error_propagates():
    broker = FakeBroker(["a"])
    broker.fail_open = ConnectionRefusedError("refused")
    r = _reader(broker)
    with pytest.raises(ConnectionRefusedError):
        r.latestOffset(r.initialOffset(), ReadAllAvailable())


def test_available_now_plans_only_the_snapshot():
    broker = FakeBroker(["a", "b"])
    for i in range(7):
        broker.publish("a", b"a")
    broker.publish("b", b"b")
    r = _reader(broker, maxMessagesPerTrigger="4", availableNowIdleTimeout="0.2")
    r.prepareForTriggerAvailableNow()
    for i in range(5):
        broker.publish("a", b"late")           # after the snapshot: not in this run
    s = r.initialOffset()
    ends = [s]
    while True:
        e = r.latestOffset(ends[-1], ReadMaxRows(4))
        if e == ends[-1]:
            break
        ends.append(e)
    assert SourceOffset.from_dict(ends[-1]).as_map() == {"a": 7, "b": 1}
    assert len(ends) == 3                      # 4 (a3+b1), then 4 (a4)
    assert len(broker.acked["a"]) == 7 and broker.acked["b"] == [b"b"]
    r.stop()
    assert [b for b, _, _ in broker.ready["a"]][-5:] == [b"late"] * 5


def test_tls_options_pass_to_the_client():
    o = parse_source_options({"queue": "q", "uri": "amqps://u:p@h:5671/v", "cacertfile": "/ca.pem",
                              "certfile": "/c.pem", "keyfile": "/k.pem", "verify": "verify_peer",
                              "servernameindication": "broker.example", "connectiontimeout": "2.5"})
    assert o.client_kwargs() == {"cacertfile": "/ca.pem", "certfile": "/c.pem",
                                 "keyfile": "/k.pem", "server_name_indication": "broker.example",
                                 "verify": "verify_peer", "connection_timeout": 2.5}


def _run_available_now(r, start, limit, max_triggers=30):
    """Spark's Trigger.AvailableNow loop: it ends at the first trigger that plans nothing
    (latestOffset returns ``start``). Returns the bodies read."""
    got, e = [], start
    for _ in range(max_triggers):
        nxt = r.latestOffset(e, limit)
        if nxt == e:
            break
        got += [x["body"] for x in _rows(r, e, nxt)]
        e = nxt
    return got


def _available_now_after_batch_0(idle_timeout: str):
    """Six messages in queue "a" and a Trigger.AvailableNow reader (3 per trigger) that has
    planned and read batch 0. Returns (broker, reader, end of batch 0, bodies read)."""
    broker = FakeBroker(["a"])
    for i in range(6):
        broker.publish("a", b"%d" % i)
    r = _reader(broker, maxMessagesPerTrigger="3", availableNowIdleTimeout=idle_timeout)
    r.prepareForTriggerAvailableNow()
    s = r.initialOffset()
    e1 = r.latestOffset(s, ReadMaxRows(3))
    return broker, r, e1, [x["body"] for x in _rows(r, s, e1)]


def test_available_now_connection_loss_still_reads_the_snapshot():
    """A loss before batch 1 was acked: the run waits out the reconnect backoff inside
    latestOffset (Spark would end the run at a trigger without a batch) and reads it all."""
    broker, r, e1, got = _available_now_after_batch_0("2")
    broker.consumers[0].kill()                 # lost before batch 1 was acked
    got += _run_available_now(r, e1, ReadMaxRows(3))
    assert sorted(set(got)) == [b"%d" % i for i in range(6)]
    assert sorted(broker.acked["a"]) == [b"%d" % i for i in range(6)]
    assert len(broker.consumers) == 2


def test_available_now_gives_up_reconnecting_after_the_idle_timeout():
    """When the broker stays away, the AvailableNow run ends after availableNowIdleTimeout
    (with at least one more attempt), leaving the rest for the next run; nothing unplanned
    is acked."""
    import time

    broker, r, e1, _ = _available_now_after_batch_0("0.3")
    broker.consumers[0].kill()
    broker.fail_open = ConnectionRefusedError("broker down")
    t0 = time.monotonic()
    assert r.latestOffset(e1, ReadMaxRows(3)) == e1   # no batch: Spark ends the run
    assert 0.25 <= time.monotonic() - t0 <= 3.0
    assert r.available_now.done
    assert broker.acked["a"] == []                    # batch 1's ack never reached the broker
    assert sorted(b for b, _, _ in broker.ready["a"]) == [b"%d" % i for i in range(6)]


def test_available_now_failed_ack_keeps_the_range_in_the_snapshot():
    """The buffer counts a range as acked only after basic.ack was sent: when the ack fails,
    the requeued range is added back to the AvailableNow targets, so the redeliveries do not
    use up the part of the snapshot that was never read (review finding)."""
    broker, r, e1, got = _available_now_after_batch_0("2")
    broker.consumers[0].fail_next_ack = True     # the ack of batch 1 (next trigger) fails
    got += _run_available_now(r, e1, ReadMaxRows(3))
    assert set(got) == {b"%d" % i for i in range(6)}, got


def test_no_start_signature_reconnect_does_not_report_a_new_offset():
    """PySpark 4.0/4.1 calls latestOffset() without start: after a loss (in backoff, or
    reconnected with nothing new) it returns the last offset it gave, not the new session's
    zero offset (which Spark would take for a new, empty batch)."""
    broker, clock = FakeBroker(["a"]), FakeClock()
    broker.publish("a", b"0")
    r = _reader(broker, clock)
    r.initialOffset()
    e1 = r.latestOffset()
    r.commit(e1)
    broker.consumers[0].kill()
    assert r.latestOffset() == e1                # loss detected, in backoff
    clock.advance(0.5)
    assert r.latestOffset() == e1                # reconnected, nothing new


def test_no_start_signature_acks_the_previous_end_before_planning():
    """PySpark 4.0/4.1 (latestOffset() without start): the end returned before is committed
    when Spark asks for the next one (commit log N precedes batch N+1's latestOffset), so it
    is acked then, as 4.2+ acks ``start``; a prefetch window of one batch does not stall."""
    broker, clock = FakeBroker(["a"]), FakeClock()
    for i in range(4):
        broker.publish("a", b"%d" % i)
    r = _reader(broker, clock, prefetch="2")
    r.initialOffset()
    e1 = r.latestOffset()
    assert broker.acked["a"] == [] and SourceOffset.from_dict(e1).get("a") == 2
    e2 = r.latestOffset()                        # no commit(e1) call: acked here
    assert broker.acked["a"] == [b"0", b"1"] and SourceOffset.from_dict(e2).get("a") == 4


def _checkpoint(root, batches, committed):
    """A checkpoint folder as Spark writes it: offsets/N for each (N, offset), commits/N for
    the committed ids."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for n, off in batches:
        (root / "offsets" / str(n)).write_text(
            'v1\n{"batchWatermarkMs":0}\n' + json.dumps(off) + "\n")
    for n in committed:
        (root / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
        (root / "commits" / f".{n}.crc").write_text("x")


def test_stop_acks_what_the_checkpoint_committed(tmp_path):
    """PySpark 4.0/4.1 AvailableNow: no callback follows the last batch's commit log but
    stop(); with ``checkpointLocation`` it acks what the newest commit covers, and nothing of
    an uncommitted batch (spark_amqp/spark/source/checkpoint.py)."""
    for committed, want in (([0], [b"0", b"1", b"2"]), ([], [])):
        broker, clock = FakeBroker(["a"]), FakeClock()
        for i in range(3):
            broker.publish("a", b"%d" % i)
        ck = tmp_path / f"ck{len(committed)}"
        r = _reader(broker, clock, checkpointLocation=str(ck))
        r.initialOffset()
        e1 = r.latestOffset()
        _checkpoint(ck, [(0, e1)], committed)
        r.stop()
        assert broker.acked["a"] == want


def test_checkpoint_reader_reads_the_newest_committed_batch(tmp_path):
    from spark_amqp.spark.source.checkpoint import last_committed_offsets, local_checkpoint_dir

    off = lambda n: {"queues": {"a": n}, "session": "s"}  # noqa: E731
    _checkpoint(tmp_path / "c", [(0, off(1)), (1, off(2)), (2, off(3))], [0, 1])
    assert last_committed_offsets(str(tmp_path / "c")) == [off(2)]
    assert last_committed_offsets("file://" + str(tmp_path / "c")) == [off(2)]
    assert last_committed_offsets(str(tmp_path / "none")) == []
    assert local_checkpoint_dir("s3a://bucket/ck") is None
    assert last_committed_offsets("s3a://bucket/ck") == []


def _snapshot_of_10_with_6_in_flight():
    """(broker, reader, the 6 late deliveries, initial offset): an AvailableNow snapshot of 10
    messages of which 4 are ready and 6 still "in flight"."""
    broker = FakeBroker(["a"])
    for i in range(10):
        broker.publish("a", b"%d" % i)
    r = _reader(broker, maxMessagesPerTrigger="10", availableNowIdleTimeout="30")
    r.prepareForTriggerAvailableNow()              # snapshot: 10 ready
    late = broker.ready["a"][4:]
    del broker.ready["a"][4:]
    return broker, r, late, r.initialOffset()


def test_available_now_plans_a_partial_batch_after_the_fill_wait():
    """Trigger.AvailableNow does not hold a half-filled batch until the idle timeout: after
    ``AVAILABLE_NOW_FILL_WAIT`` it plans what is buffered, and the rest follows in later batches."""
    import time

    from spark_amqp.spark.source.queues import offset_reader as src

    broker, r, late, s = _snapshot_of_10_with_6_in_flight()
    t0 = time.monotonic()
    e1 = r.latestOffset(s, ReadMaxRows(10))
    assert time.monotonic() - t0 < src.AVAILABLE_NOW_FILL_WAIT + 1.0
    assert SourceOffset.from_dict(e1).as_map() == {"a": 4}
    broker.ready["a"] += late
    e2 = r.latestOffset(e1, ReadMaxRows(10))
    assert SourceOffset.from_dict(e2).as_map() == {"a": 10}
    assert r.latestOffset(e2, ReadMaxRows(10)) == e2   # snapshot done
    assert len(broker.acked["a"]) == 10
    r.stop()


def test_available_now_window_smaller_than_the_batch_neither_waits_nor_stalls():
    """A prefetch below the trigger share: Trigger.AvailableNow plans the batch as soon as the
    window is full (no fill-wait), and acking it at the next latestOffset reopens the window, so
    the run reads every snapshotted message in window-sized batches."""
    import time

    broker = FakeBroker(["a"])
    for i in range(10):
        broker.publish("a", b"%d" % i)
    r = _reader(broker, maxMessagesPerTrigger="10", prefetch="4", availableNowIdleTimeout="30")
    r.prepareForTriggerAvailableNow()
    s = r.initialOffset()
    ends = []
    t0 = time.monotonic()
    while True:
        e = r.latestOffset(s, ReadMaxRows(10))
        if e == s:
            break
        ends.append(SourceOffset.from_dict(e).as_map()["a"])
        s = e
    assert time.monotonic() - t0 < 0.4            # never waited for a batch that cannot fill
    assert ends == [4, 8, 10]
    assert len(broker.acked["a"]) == 10
    r.stop()


def test_pack_mixed_absent_and_partial_properties():
    """Deliveries without properties, and property objects lacking some attribute, give nulls."""

    class Partial:                                     # e.g. a foreign properties object
        content_type = "text/plain"
        headers = {"x-delivery-count": 1}

    ds = [FakeDelivery(b"a", 1, "", "q", False, None),
          FakeDelivery(b"b", 2, "", "q", False, _props(priority=4)),
          FakeDelivery(b"c", 3, "", "q", False, Partial())]
    [batch] = list(to_record_batches(pack_deliveries("q", 0, ds, include_headers=True)))
    assert batch.column("priority").to_pylist() == [None, 4, None]
    assert batch.column("content_type").to_pylist() == [None, None, "text/plain"]
    assert batch.column("delivery_count").to_pylist() == [None, None, 1]
    [b2] = list(to_record_batches(pack_deliveries("q", 0, ds[2:], include_headers=False)))
    assert b2.column("content_type").to_pylist() == ["text/plain"]
    assert b2.column("priority").to_pylist() == [None] and b2.column("headers").null_count == 1


# ------------------------------------------------------------------------------ byte limits

def _items_from(spec_list):
    """spec_list: ("run", [body sizes]) or ("one", size) -> items with consecutive tags."""
    from source_rawfake import make_run

    items, tag = [], 1
    for kind, sizes in spec_list:
        if kind == "run":
            items.append(make_run([("c", tag + i, False, b"x" * n) for i, n in enumerate(sizes)]))
            tag += len(sizes)
        else:
            items.append(FakeDelivery(b"y" * sizes, tag))
            tag += 1
    return items


def _message_bytes(items):
    from spark_amqp.protocol import RawDeliveries
    from spark_amqp.spark.source.queues.buffer import item_bytes

    out = []
    for it in items:
        if isinstance(it, RawDeliveries):
            prev = 0
            for e in it.ends:
                out.append(e - prev)
                prev = e
        else:
            out.append(item_bytes(it))
    return out


@given(st.lists(st.one_of(
    st.tuples(st.just("run"), st.lists(st.integers(0, 3000), min_size=1, max_size=5)),
    st.tuples(st.just("one"), st.integers(0, 3000))), min_size=1, max_size=6),
    st.data())
def test_queue_buffer_byte_positions_and_end_within(spec_list, data):
    b = QueueBuffer("q")
    items = _items_from(spec_list)
    b.add(items)
    sizes = _message_bytes(items)
    n = len(sizes)
    assert b.received == n and b.received_bytes == sum(sizes)
    planned = data.draw(st.integers(0, n))
    b.plan(planned)
    assert b.unplanned_bytes == sum(sizes[planned:])
    acked = data.draw(st.integers(0, planned))
    b.ack_upto(acked)
    start = data.draw(st.integers(acked, n))
    limit = data.draw(st.one_of(st.none(), st.integers(start, n)))
    budget = data.draw(st.integers(0, 8000))
    for o in range(acked, n + 1):
        assert b.byte_pos(o) == sum(sizes[:o])
    top = n if limit is None else limit
    expect = start
    while expect < top and sum(sizes[start:expect + 1]) <= budget:
        expect += 1
    if top > start:
        expect = max(expect, start + 1)   # one message always fits
    assert b.end_within(start, budget, limit) == expect
    b.drop_unplanned()
    assert b.received_bytes == sum(sizes[:planned]) and b.unplanned_bytes == 0


def _byte_reader(broker, **opts):
    from source_fakes import FakeConsumer

    calls = []

    class C(FakeConsumer):
        def set_read_limit(self, max_bytes, extra):
            calls.append(("limit", max_bytes, extra))

        def resume_reading(self):
            calls.append(("resume",))

    def factory(options):
        c = C(broker, options)
        broker.consumers.append(c)
        return c

    options = parse_source_options({"queues": ",".join(broker.ready), **opts})
    return AmqpQueueMicroBatchStream(options, consumer_factory=factory), calls


def test_byte_limit_options_defaults_and_default_read_limit():
    from pyspark.sql.streaming.datasource import ReadMaxBytes

    o = parse_source_options({"queue": "q"})
    assert (o.max_bytes_per_trigger, o.max_bytes_per_partition, o.max_buffered_bytes) == (
        16 << 20, 4 << 20, 32 << 20)
    r = AmqpQueueMicroBatchStream(o)
    assert r.getDefaultReadLimit() == ReadMaxBytes(16 << 20)
    r2 = AmqpQueueMicroBatchStream(parse_source_options({"queue": "q", "maxMessagesPerTrigger": "10"}))
    assert r2.getDefaultReadLimit() == ReadMaxRows(10)
    for opt in ("maxBytesPerTrigger", "maxBytesPerPartition", "maxBufferedBytes"):
        with pytest.raises(ValueError, match=opt):
            parse_source_options({"queue": "q", opt: "0"})
        with pytest.raises(ValueError, match=opt):
            parse_source_options({"queue": "q", opt: "1MB"})


def test_max_bytes_per_trigger_cuts_batches_a_large_message_goes_alone():
    from pyspark.sql.streaming.datasource import ReadMaxBytes

    from spark_amqp.spark.source.queues.buffer import DECODED_OVERHEAD

    broker = FakeBroker(["a"])
    sizes = [100, 100, 100, 5000, 100, 100]
    for i, n in enumerate(sizes):
        broker.publish("a", bytes([65 + i]) * n)
    w = 100 + DECODED_OVERHEAD
    r, calls = _byte_reader(broker, maxBytesPerTrigger=str(2 * w + 10))
    s = r.initialOffset()
    ends, rows = [], []
    while True:
        e = r.latestOffset(s, r.getDefaultReadLimit())
        if e == s:
            break
        ends.append(SourceOffset.from_dict(e).get("a"))
        rows += _rows(r, s, e)
        s = e
    # 2 small ones, then the third alone (the big one does not fit with it), the big one alone
    assert ends == [2, 3, 4, 6]
    assert [x["body"] for x in rows] == [bytes([65 + i]) * n for i, n in enumerate(sizes)]
    assert len(broker.acked["a"]) == 6
    # a smaller ReadMaxBytes wins over the option; the read limit is wired to the consumer
    assert calls[0][0] == "limit" and calls[0][1] == 32 << 20
    assert ("resume",) in calls
    broker.publish("a", b"z" * 100)
    broker.publish("a", b"z" * 100)
    e = r.latestOffset(s, ReadMaxBytes(w))
    assert SourceOffset.from_dict(e).get("a") == 7


def test_byte_limit_split_across_queues_and_with_read_max_rows():
    from spark_amqp.spark.source.queues.buffer import DECODED_OVERHEAD

    broker = FakeBroker(["a", "b"])
    for i in range(50):
        broker.publish("a", b"a" * 1000)
        broker.publish("b", b"b" * 10)
    w_a, w_b = 1000 + DECODED_OVERHEAD, 10 + DECODED_OVERHEAD
    r, _ = _byte_reader(broker, maxBytesPerTrigger=str(10 * w_a), prefetch="100")
    s = r.initialOffset()
    e = SourceOffset.from_dict(r.latestOffset(s, r.getDefaultReadLimit())).as_map()
    # water-filling: b (light) takes all 50 of its messages, a the rest of the bytes
    assert e["b"] == 50
    assert e["a"] == (10 * w_a - 50 * w_b) // w_a
    # with ReadMaxRows, whichever limit is reached first ends the batch
    broker2 = FakeBroker(["a"])
    for i in range(50):
        broker2.publish("a", b"a" * 1000)
    r2, _ = _byte_reader(broker2, maxMessagesPerTrigger="20", maxBytesPerTrigger=str(5 * w_a))
    s2 = r2.initialOffset()
    assert SourceOffset.from_dict(r2.latestOffset(s2, ReadMaxRows(20))).get("a") == 5
    broker3 = FakeBroker(["a"])
    for i in range(50):
        broker3.publish("a", b"a" * 1000)
    r3, _ = _byte_reader(broker3, maxMessagesPerTrigger="3", maxBytesPerTrigger=str(5 * w_a))
    s3 = r3.initialOffset()
    assert SourceOffset.from_dict(r3.latestOffset(s3, ReadMaxRows(3))).get("a") == 3


def test_max_bytes_per_partition_splits_partitions():
    from spark_amqp.spark.source.queues.buffer import DECODED_OVERHEAD

    broker = FakeBroker(["a"])
    sizes = [1000] * 7 + [10000] + [1000] * 2
    for n in sizes:
        broker.publish("a", b"p" * n)
    w = 1000 + DECODED_OVERHEAD
    r, _ = _byte_reader(broker, maxBytesPerPartition=str(3 * w), maxMessagesPerPartition="2")
    s = r.initialOffset()
    e = r.latestOffset(s, ReadAllAvailable())
    parts = r.partitions(s, e)
    assert [(p.data.start, p.data.n) for p in parts] == [
        (0, 2), (2, 2), (4, 2), (6, 1), (7, 1), (8, 2)]
    assert [len(x["body"]) for x in _rows(r, s, e)] == sizes


def test_unplanned_bytes_feed_the_read_limit():
    broker = FakeBroker(["a", "b"])
    for i in range(4):
        broker.publish("a", b"x" * 1000)
        broker.publish("b", b"y" * 500)
    r, calls = _byte_reader(broker, maxMessagesPerTrigger="2")
    s = r.initialOffset()
    e = r.latestOffset(s, ReadMaxRows(2))
    extra = calls[0][2]
    # 8 drained, 2 planned (one per queue): the rest is unplanned
    from spark_amqp.spark.source.queues.buffer import DECODED_OVERHEAD
    assert extra() == 3 * (1000 + DECODED_OVERHEAD) + 3 * (500 + DECODED_OVERHEAD)
    r.latestOffset(e, ReadMaxRows(100))
    assert extra() == 0


def test_bodies_adding_up_to_the_byte_limit_fit_one_batch():
    # the framing allowance (1/1024 of the limit): two bodies of half the limit are one batch
    broker = FakeBroker(["a"])
    for i in range(4):
        broker.publish("a", bytes([i]) * (512 * 1024))
    r, _ = _byte_reader(broker, maxBytesPerTrigger=str(1 << 20),
                        maxBytesPerPartition=str(512 * 1024))
    s = r.initialOffset()
    e = r.latestOffset(s, r.getDefaultReadLimit())
    assert SourceOffset.from_dict(e).get("a") == 2
    assert [(p.data.start, p.data.n) for p in r.partitions(s, e)] == [(0, 1), (1, 1)]


# ------------------------------------------------------------------------------ served partitions

def test_big_batch_partitions_are_served_by_reference_until_commit():
    # beyond maxInlineBytesPerTrigger (512 KiB) a batch's partitions carry a reference, not the frames: the
    # runner serves them until the batch is committed; a retried task fetches them again
    from spark_amqp.spark.source.queues.partition_server import FramesRef, PartitionFetchError

    broker = FakeBroker(["a"])
    bodies = [bytes([i]) * (200 * 1024) for i in range(8)]   # 1.6 MB: above the inline 512 KiB
    for b in bodies:
        broker.publish("a", b)
    r = _reader(broker, maxBytesPerPartition=str(400 * 1024))
    s = r.initialOffset()
    e = r.latestOffset(s, ReadAllAvailable())
    parts = r.partitions(s, e)
    kinds = [type(p.data).__name__ for p in parts]
    assert kinds[0] == "FramesPart" and kinds[-1] == "FramesRef", kinds
    inline = sum(len(p.data.frames) for p in parts if not isinstance(p.data, FramesRef))
    assert inline <= r.options.max_inline_bytes_per_trigger == 512 * 1024
    shipped = [pickle.loads(pickle.dumps(p)) for p in parts]   # as Spark ships them
    assert all(len(pickle.dumps(p)) < 1000 for p in parts if isinstance(p.data, FramesRef))
    rows = [x for p in shipped for b in r.read(p) for x in b.to_pylist()]
    assert [x["body"] for x in rows] == bodies and [x["offset"] for x in rows] == list(range(8))
    again = [x for b in r.read(shipped[-1]) for x in b.to_pylist()]   # a retried task
    assert again and again == rows[-len(again):]
    assert broker.acked["a"] == []                             # nothing acked before the commit
    r.commit(e)                                                # the batch is committed
    assert r.partitioner.server.held == 0
    with pytest.raises(PartitionFetchError, match=r"queue 'a'.*not held.*nothing in it is acked"):
        list(r.read(shipped[-1]))
    r.stop()


def test_served_partition_fetch_failures_are_clear_errors():
    import dataclasses

    from spark_amqp.spark.source.queues.partition_server import FramesRef, PartitionFetchError

    broker = FakeBroker(["a"])
    for i in range(4):
        broker.publish("a", b"z" * (300 * 1024))
    r = _reader(broker)
    s = r.initialOffset()
    e = r.latestOffset(s, ReadAllAvailable())
    ref = [p for p in r.partitions(s, e) if isinstance(p.data, FramesRef)][0]
    forged = QueueInputPartition(ref.session, dataclasses.replace(ref.data, token=b"x" * 16))
    with pytest.raises(PartitionFetchError, match="bad token"):
        list(r.read(forged))
    r.stop()   # the runner is gone: connection refused, naming the queue and the address
    with pytest.raises(PartitionFetchError, match=r"messages 0\.\.3 of queue 'a' .* at .*:\d+"):
        list(r.read(ref))
    # nothing was acked: the messages stay in the queue
    assert broker.acked["a"] == []


@pytest.mark.parametrize("option,expected", [(None, 32 * 1024 * 1024), ("1000", 1000)])
def test_max_message_bytes_defaults_to_the_brokers_limit(unique, option, expected):
    # issue 30: without maxMessageBytes the source accepts what the broker accepts (here an
    # embedded broker configured with 32 MiB, which it advertises); the option overrides it.
    from spark_amqp import EmbeddedBroker
    from spark_amqp.broker.config import BrokerConfig
    from spark_amqp.spark.source.queues.consumer import DriverConsumer

    with EmbeddedBroker(config=BrokerConfig(max_message_size=32 * 1024 * 1024)) as b:
        q = unique("limit")
        opts = {"queue": q, "uri": b.url, "declare": "true"}
        if option is not None:
            opts["maxMessageBytes"] = option
        o = parse_source_options(opts)
        assert o.max_message_bytes == (None if option is None else 1000)
        c = DriverConsumer(o)
        c.open()
        try:
            assert c.conn._sm._decoder.max_body_size == expected
        finally:
            c.close()


def test_every_broker_down_longer_than_failover_timeout_fails_with_one_error():
    """Issue 27: after a loss, reconnects go on for failoverTimeout seconds; then the query
    fails with BrokerUnreachable carrying the last error (which lists every address); nothing
    of the lost session is acked, and a reader restarted from the checkpoint gets it back."""
    from spark_amqp.client.failover import BrokerUnreachable

    broker = FakeBroker(["a"])
    for i in range(3):
        broker.publish("a", b"%d" % i)
    opts = parse_source_options({"queue": "a", "failoverTimeout": "10",
                                 "uri": "amqp://g:g@h1:1,h2:2/%2F"})
    clock = FakeClock(1000.0)
    r = AmqpQueueMicroBatchStream(opts, consumer_factory=broker.factory, clock=clock)
    s = r.initialOffset()
    e1 = r.latestOffset(s, ReadAllAvailable())
    broker.consumers[0].kill()
    broker.fail_open = ConnectionRefusedError("h1:1: refused; h2:2: refused")
    assert r.latestOffset(e1, ReadAllAvailable()) == e1          # loss seen at t=1000
    for t in (1001.0, 1003.0, 1006.0):
        clock.t = t
        assert r.latestOffset(e1, ReadAllAvailable()) == e1      # retried, logged, not raised
    assert len(broker.consumers) == 5                            # the first, 4 attempts
    assert r.supervisor.backoff <= 5.0                           # several addresses: 5 s cap
    clock.t = 1010.5                                             # past the back-off (1010.0)
    with pytest.raises(BrokerUnreachable) as ei:
        r.latestOffset(e1, ReadAllAvailable())
    assert "failoverTimeout 10 s" in str(ei.value) and "h2:2: refused" in str(ei.value)
    assert broker.acked["a"] == [] and broker.consumers[0].acks == []
    broker.fail_open = None                                      # the cluster is back
    r2 = AmqpQueueMicroBatchStream(opts, consumer_factory=broker.factory)  # restarted query
    e2 = r2.latestOffset(e1, ReadAllAvailable())
    assert [x["body"] for x in _rows(r2, e1, e2)] == [b"0", b"1", b"2"]


def test_a_reconnect_that_works_resets_the_bound():
    broker = FakeBroker(["a"])
    opts = parse_source_options({"queue": "a", "failoverTimeout": "5"})
    clock = FakeClock(0.0)
    r = AmqpQueueMicroBatchStream(opts, consumer_factory=broker.factory, clock=clock)
    s = r.initialOffset()
    r.latestOffset(s, ReadAllAvailable())
    for t in (3.0, 6.0, 9.0, 12.0, 15.0):      # a loss every 3 s, each reconnect works
        broker.consumers[-1].kill()
        r.latestOffset(s, ReadAllAvailable())  # the loss
        assert r.supervisor.failing_since == t - 3.0
        clock.t = t                            # past the back-off
        assert r.latestOffset(s, ReadAllAvailable()) == s  # reconnected: no error
        assert r.supervisor.failing_since is None and broker.consumers[-1].is_open
    assert len(broker.consumers) == 6


def test_with_several_addresses_a_loss_reconnects_in_the_same_trigger():
    """Issue 27: the first loss with several broker addresses reconnects at once (another
    node is likely up) and the same latestOffset returns the redelivered batch; a second loss
    in a row backs off."""
    broker, clock = FakeBroker(["a"]), FakeClock()
    for i in range(3):
        broker.publish("a", b"%d" % i)
    r = AmqpQueueMicroBatchStream(parse_source_options({"queue": "a", "uri": "amqp://g:g@h1,h2/%2F"}),
                              consumer_factory=broker.factory, clock=clock)
    s = r.initialOffset()
    e1 = r.latestOffset(s, ReadAllAvailable())
    broker.consumers[0].kill()
    e2 = r.latestOffset(e1, ReadAllAvailable())        # loss seen and reconnected at once
    assert len(broker.consumers) == 2 and e2 != e1
    assert [x["body"] for x in _rows(r, e1, e2)] == [b"0", b"1", b"2"]
    broker.consumers[1].kill()
    broker.fail_open = ConnectionRefusedError("refused")
    assert r.latestOffset(e2, ReadAllAvailable()) == e2  # reconnect failed: back-off now
    assert r.supervisor.next_attempt > clock() and len(broker.consumers) == 3
