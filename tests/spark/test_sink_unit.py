"""Unit tests of the amqp sink without Spark jobs or a broker: options, schema plan, Arrow →
messages conversion, and the task publisher against a fake confirm-mode channel."""

from __future__ import annotations

import datetime as dt
import pickle

import pyarrow as pa
import pytest
from pyspark.sql.types import (BinaryType, IntegerType, LongType, MapType, ShortType, StringType,
                               StructField, StructType, TimestampType, DoubleType)

from spark_amqp.protocol import BasicProperties
from spark_amqp.spark.sink import publish as sink_publish
from spark_amqp.spark.schema import source_schema
from spark_amqp.spark.sink.writer import AmqpCommitMessage, AmqpStreamWriter, AmqpWriter
from spark_amqp.spark.sink.convert import (SinkDataError, SinkSchemaError, batch_to_messages,
                                           plan_columns)
from spark_amqp.spark.sink.options import SinkOptionError, parse_sink_options
from spark_amqp.spark.sink.publish import AmqpSinkError, TaskPublisher

URI = "amqp://guest:guest@127.0.0.1:5672/%2F"


# -- options ----------------------------------------------------------------------------------
def test_defaults():
    o = parse_sink_options({"uri": URI})
    assert (o.exchange, o.routing_key, o.mandatory, o.on_return, o.delivery_mode) == \
        (None, None, False, "fail", None)
    assert (o.max_in_flight, o.confirm_timeout, o.message_id) == (10000, 60.0, "auto")
    assert parse_sink_options({}).uri == "amqp://guest:guest@127.0.0.1:5672/%2F"


def test_all_options_parse():
    o = parse_sink_options({
        "uri": "amqps://u:p@h:5671/v", "exchange": "ex", "routingkey": "rk", "mandatory": "TRUE",
        "onreturn": "Ignore", "deliverymode": "transient", "maxinflight": "5",
        "confirmtimeoutms": "1500", "declareexchange": "true", "exchangetype": "topic",
        "exchangedurable": "false", "messageid": "deterministic", "cacertfile": "/ca.pem",
        "verify": "verify_none", "servernameindication": "h", "heartbeat": "10",
        "connectiontimeout": "2.5", "checkpointlocation": "/tmp/x", "path": "ignored",
        "queue": "only-for-the-source",
    })
    assert (o.exchange, o.routing_key, o.mandatory, o.on_return) == ("ex", "rk", True, "ignore")
    assert (o.delivery_mode, o.max_in_flight, o.confirm_timeout) == (1, 5, 1.5)
    assert (o.declare_exchange, o.exchange_type, o.exchange_durable, o.message_id) == \
        (True, "topic", False, "deterministic")
    assert o.connect_args() == {"cacertfile": "/ca.pem", "verify": "verify_none",
                                "server_name_indication": "h", "heartbeat": 10,
                                "connection_timeout": 2.5}
    pickle.loads(pickle.dumps(o))
    from spark_amqp.client import parse_uri

    parse_uri(o.uri).replace(**o.connect_args())  # the client accepts every connect argument


@pytest.mark.parametrize("opts, needle", [
    ({"routing_key": "x"}, "unknown option(s) for the amqp sink: routing_key"),
    ({"uri": "http://x"}, "uri must start with amqp:// or amqps://"),
    ({"onreturn": "drop"}, "onReturn='drop' is not allowed; allowed: fail | ignore"),
    ({"mandatory": "maybe"}, "mandatory='maybe' is not a boolean; allowed: true | false"),
    ({"deliverymode": "3"}, "deliveryMode='3' is not allowed; allowed: 1 | transient | 2"),
    ({"maxinflight": "0"}, "maxInFlight='0' is not an integer in >= 1"),
    ({"confirmtimeoutms": "soon"}, "confirmTimeoutMs='soon' is not an integer"),
    ({"messageid": "uuid"}, "messageId='uuid' is not allowed; allowed: auto | column | "
                            "deterministic | none"),
    ({"declareexchange": "true"}, "declareExchange=true needs a non-empty exchange option"),
    ({"exchange": "e", "exchangetype": "topic"}, "exchangeType only applies with declareExchange"),
    ({"exchange": "e", "declareexchange": "true", "exchangetype": "nope"},
     "exchangeType='nope' is not allowed; allowed: direct | fanout | topic | headers"),
    ({"cacertfile": "/ca.pem"}, "need an amqps:// uri"),
    ({"uri": "amqps://h", "verify": "maybe"}, "verify='maybe' is not allowed"),
    ({"heartbeat": "-1"}, "heartbeat='-1' is not an integer in 0..65535"),
    ({"connectiontimeout": "0"}, "connectionTimeout='0' is not allowed"),
    ({"exchange": "x" * 256}, "option exchange is 256 UTF-8 bytes"),
])
def test_invalid_options_name_option_and_allowed_values(opts, needle):
    with pytest.raises(SinkOptionError) as ei:
        parse_sink_options({"uri": URI, **opts})
    assert needle in str(ei.value)


# -- schema plan --------------------------------------------------------------------------------
def _schema(*fields):
    return StructType([StructField(n, t) for n, t in fields])


def test_plan_accepts_the_source_schema_unchanged():
    plan = plan_columns(source_schema(), parse_sink_options({}))
    assert plan.columns[0] == "body" and "queue" not in plan.columns
    assert "headers" in plan.columns and "timestamp" in plan.columns


def test_plan_string_body_and_int_types():
    plan = plan_columns(_schema(("body", StringType()), ("priority", ShortType()),
                                ("delivery_mode", LongType()), ("timestamp", LongType())),
                        parse_sink_options({}))
    assert plan.body_is_string


@pytest.mark.parametrize("fields, needle", [
    ((("value", BinaryType()),), "needs a `body` column"),
    ((("body", IntegerType()),), "column `body` has type int; the amqp sink accepts binary or string"),
    ((("body", BinaryType()), ("priority", StringType())), "column `priority` has type string"),
    ((("body", BinaryType()), ("headers", MapType(StringType(), IntegerType()))),
     "column `headers` has type map<string,int>"),
    ((("body", BinaryType()), ("timestamp", DoubleType())), "column `timestamp` has type double"),
    ((("body", BinaryType()), ("routingKey", StringType())),
     "does not know column(s) `routingKey` string"),
])
def test_plan_rejects_bad_columns_naming_them(fields, needle):
    with pytest.raises(SinkSchemaError) as ei:
        plan_columns(_schema(*fields), parse_sink_options({}))
    assert needle in str(ei.value)


def test_plan_message_id_modes():
    with_id = _schema(("body", BinaryType()), ("message_id", StringType()))
    without = _schema(("body", BinaryType()))
    with pytest.raises(SinkSchemaError, match="messageId=column needs a `message_id`"):
        plan_columns(without, parse_sink_options({"messageid": "column"}))
    for mode in ("deterministic", "none"):
        with pytest.raises(SinkSchemaError, match=f"messageId={mode} conflicts"):
            plan_columns(with_id, parse_sink_options({"messageid": mode}))
    plan_columns(with_id, parse_sink_options({"messageid": "column"}))


def test_writers_validate_in_constructor_and_pickle():
    schema = _schema(("body", BinaryType()))
    with pytest.raises(ValueError, match="overwrite"):
        AmqpWriter({"uri": URI}, schema, True)
    with pytest.raises(SinkOptionError):
        AmqpStreamWriter({"uri": URI, "bogus": "1"}, schema, False)
    with pytest.raises(SinkSchemaError):
        AmqpStreamWriter({"uri": URI}, _schema(("x", BinaryType())), False)
    w = pickle.loads(pickle.dumps(AmqpWriter({"uri": URI}, schema, False)))
    assert w.plan.columns == ("body",)
    assert pickle.loads(pickle.dumps(AmqpStreamWriter({"uri": URI}, schema, True))).overwrite


# -- Arrow batch → messages ---------------------------------------------------------------------
def _props(p):
    """BasicProperties of a converted message (decoding the fast path's pre-encoded bytes)."""
    from spark_amqp.protocol.properties import decode_properties

    raw = p.encode()
    decoded = decode_properties(raw, 0, len(raw))
    if isinstance(p, BasicProperties):
        assert decoded == p
    return decoded


def _plan(schema_fields, **opts):
    return plan_columns(_schema(*schema_fields), parse_sink_options(opts))


def test_convert_every_column():
    ts = dt.datetime(2024, 5, 6, 7, 8, 9, 999999, tzinfo=dt.timezone.utc)
    fields = [("body", BinaryType()), ("exchange", StringType()), ("routing_key", StringType()),
              ("headers", MapType(StringType(), StringType())), ("delivery_mode", IntegerType()),
              ("priority", IntegerType()), ("timestamp", TimestampType())] + \
             [(c, StringType()) for c in ("content_type", "content_encoding", "correlation_id",
                                          "reply_to", "expiration", "message_id", "type",
                                          "user_id", "app_id")]
    plan = _plan(fields)
    batch = pa.RecordBatch.from_pydict({
        "body": pa.array([b"a", b""], pa.binary()),
        "exchange": ["ex", None], "routing_key": ["clé.ü", None],
        "headers": pa.array([[("k", "v"), ("n", None)], None],
                            pa.map_(pa.string(), pa.string())),
        "delivery_mode": pa.array([1, None], pa.int32()),
        "priority": pa.array([9, None], pa.int32()),
        "timestamp": pa.array([ts, None], pa.timestamp("us", tz="UTC")),
        **{c: [c + "-v", None] for c in ("content_type", "content_encoding", "correlation_id",
                                         "reply_to", "expiration", "message_id", "type",
                                         "user_id", "app_id")},
    })
    (b0, e0, k0, p0, m0), (b1, e1, k1, p1, m1) = batch_to_messages(plan, batch, "q:7:3", 100)
    assert (b0, e0, k0, m0) == (b"a", "ex", "clé.ü", False)
    assert p0 == BasicProperties(
        content_type="content_type-v", content_encoding="content_encoding-v",
        headers={"k": "v", "n": None}, delivery_mode=1, priority=9,
        correlation_id="correlation_id-v", reply_to="reply_to-v", expiration="expiration-v",
        message_id="message_id-v", timestamp=int(ts.timestamp()), type="type-v",
        user_id="user_id-v", app_id="app_id-v")
    # nulls: defaults, absent properties, deterministic id where the column is null (auto)
    assert (b1, e1, k1) == (b"", "", "")
    assert p1 == BasicProperties(delivery_mode=2, message_id="q:7:3:101")
    p0.encode(), p1.encode()


def test_convert_options_override_columns_and_string_body():
    plan = _plan([("body", StringType()), ("exchange", StringType()),
                  ("routing_key", StringType()), ("delivery_mode", IntegerType())],
                 exchange="E", routingkey="R", deliverymode="1", mandatory="true",
                 messageid="deterministic")
    batch = pa.RecordBatch.from_pydict({"body": ["héllo", ""], "exchange": ["x", "y"],
                                        "routing_key": ["a", "b"],
                                        "delivery_mode": pa.array([2, 2], pa.int32())})
    msgs = batch_to_messages(plan, batch, "w:0", 0)
    assert [m[:3] for m in msgs] == [("héllo".encode(), "E", "R"), (b"", "E", "R")]
    assert all(m[4] is True for m in msgs)
    assert [_props(m[3]).delivery_mode for m in msgs] == [1, 1]
    assert [_props(m[3]).message_id for m in msgs] == ["w:0:0", "w:0:1"]


def test_convert_message_id_none_and_column():
    b = pa.RecordBatch.from_pydict({"body": pa.array([b"x"], pa.binary())})
    assert _props(batch_to_messages(_plan([("body", BinaryType())], messageid="none"), b, None,
                                    0)[0][3]) == BasicProperties(delivery_mode=2)
    b2 = pa.RecordBatch.from_pydict({"body": pa.array([b"x", b"y"], pa.binary()),
                                     "message_id": ["m", None]})
    plan = _plan([("body", BinaryType()), ("message_id", StringType())], messageid="column")
    assert [_props(m[3]).message_id for m in batch_to_messages(plan, b2, None, 0)] == ["m", None]
    b3 = pa.RecordBatch.from_pydict({"body": pa.array([b"x", b"y"], pa.binary()),
                                     "message_id": ["m", "ü"]})
    assert [_props(m[3]) for m in batch_to_messages(plan, b3, None, 0)] == [
        BasicProperties(delivery_mode=2, message_id="m"),
        BasicProperties(delivery_mode=2, message_id="ü")]
    auto = _plan([("body", BinaryType()), ("message_id", StringType())])
    assert [_props(m[3]).message_id for m in batch_to_messages(auto, b2, "p", 5)] == ["m", "p:6"]


def test_fast_path_bytes_equal_basic_properties_encoding():
    from spark_amqp.protocol.properties import EncodedProperties

    plan = _plan([("body", BinaryType())], deliverymode="1")
    b = pa.RecordBatch.from_pydict({"body": pa.array([b"x"] * 3, pa.binary())})
    msgs = batch_to_messages(plan, b, "q" * 200, 98)
    assert all(isinstance(m[3], EncodedProperties) for m in msgs)
    assert [m[3].encode() for m in msgs] == [
        BasicProperties(delivery_mode=1, message_id=f"{'q' * 200}:{i}").encode()
        for i in (98, 99, 100)]
    with pytest.raises(SinkDataError, match="column `message_id` is 256 UTF-8 bytes at row 0"):
        batch_to_messages(plan, b, "q" * 254, 0)


def test_convert_integer_timestamp_and_empty_batch():
    plan = _plan([("body", BinaryType()), ("timestamp", LongType())])
    b = pa.RecordBatch.from_pydict({"body": pa.array([b"x"], pa.binary()),
                                    "timestamp": pa.array([1700000000], pa.int64())})
    assert _props(batch_to_messages(plan, b, None, 0)[0][3]).timestamp == 1700000000
    assert batch_to_messages(plan, b.slice(0, 0), None, 0) == []


@pytest.mark.parametrize("col, arr, needle", [
    ("body", pa.array([b"x", None], pa.binary()), "column `body` is null at row 1"),
    ("priority", pa.array([1, 300], pa.int32()), "column `priority` has value 300 at row 1"),
    ("delivery_mode", pa.array([0], pa.int32()), "column `delivery_mode` has value 0 at row 0"),
    ("content_type", pa.array(["x" * 256]), "column `content_type` is 256 UTF-8 bytes at row 0"),
    ("routing_key", pa.array(["k", "é" * 200]), "column `routing_key` is 400 UTF-8 bytes at row 1"),
    ("timestamp", pa.array([-5], pa.int64()), "column `timestamp` is before 1970 at row 0"),
])
def test_convert_bad_values_name_column_and_row(col, arr, needle):
    types = {"body": BinaryType(), "priority": IntegerType(), "delivery_mode": IntegerType(),
             "content_type": StringType(), "routing_key": StringType(), "timestamp": LongType()}
    fields = [("body", BinaryType())] + ([(col, types[col])] if col != "body" else [])
    data = {"body": pa.array([b"x"] * len(arr), pa.binary())}
    data[col] = arr
    with pytest.raises(SinkDataError) as ei:
        batch_to_messages(_plan(fields), pa.RecordBatch.from_pydict(data), None, 0)
    assert needle in str(ei.value)


# -- task publisher against a fake channel -----------------------------------------------------
class _Result:
    def __init__(self, acked, nacked=(), returned=()):
        self.acked, self.nacked, self.returned = acked, list(nacked), list(returned)


class FakeChannel:
    def __init__(self, fail_publish=None, wait=None):
        self.batches, self.calls, self.fail_publish, self.wait = [], [], fail_publish, wait
        self.max_in_flight = None
        self.window_timeout = None
        self.error = None
        self.in_flight = 0
        self.never_confirm = False

    def exchange_declare(self, *a, **kw):
        self.calls.append(("exchange_declare", a, kw))

    def confirm_select(self):
        self.calls.append(("confirm_select",))

    def publish_batch(self, msgs):
        if self.fail_publish:
            raise self.fail_publish
        if self.max_in_flight is not None and self.in_flight + len(msgs) > self.max_in_flight:
            # the client's window (Channel.max_in_flight, window_timeout) when nothing confirms
            from spark_amqp.client.errors import ConfirmTimeout

            raise ConfirmTimeout(self.in_flight, self.window_timeout)
        self.batches.append(list(msgs))
        if self.never_confirm:
            self.in_flight += len(msgs)

    def wait_for_confirms(self, timeout=None):
        if isinstance(self.wait, BaseException):
            raise self.wait
        n = sum(map(len, self.batches))
        return self.wait(n) if self.wait else _Result(n)

    # the channel keeps unconfirmed messages for the sink's republish (none kept here); the
    # sink finds the part of a failed chunk never numbered by next_publish_seq
    next_publish_seq = 1

    def keep_unconfirmed(self):
        pass

    def unconfirmed_messages(self):
        return []


class FakeConn:
    server_properties: dict = {}   # what RabbitMQ 4.x tells of its limits: nothing (16 MiB)

    def __init__(self, ch):
        self.ch, self.closed = ch, False

    def channel(self):
        return self.ch

    def close(self):
        self.closed = True


@pytest.fixture
def fake(monkeypatch):
    import spark_amqp.client as client

    holder = {}

    def connect(uri, **kw):
        holder["kw"] = kw
        holder["conn"] = FakeConn(holder["ch"])
        return holder["conn"]

    monkeypatch.setattr(client, "connect", connect, raising=False)
    return holder


def _msgs(n, size=10):
    return [(b"x" * size, "", "q", None, False) for _ in range(n)]


def test_publisher_chunks_window_and_confirms(fake):
    fake["ch"] = FakeChannel()
    opts = parse_sink_options({"maxinflight": "300", "exchange": "e", "declareexchange": "true"})
    with TaskPublisher(opts, "t") as pub:
        pub.publish(_msgs(1000))
        pub.publish(_msgs(0))
        stats = pub.finish()
    ch = fake["ch"]
    assert ch.calls[0][0] == "exchange_declare"
    assert ch.calls[1] == ("confirm_select",)
    assert [len(b) for b in ch.batches] == [300, 300, 300, 100]
    assert (stats.published, stats.confirmed, stats.body_bytes) == (1000, 1000, 10000)
    assert fake["conn"].closed


def test_publisher_chunks_by_bytes_big_body_alone(fake):
    fake["ch"] = FakeChannel()
    with TaskPublisher(parse_sink_options({}), "t") as pub:
        pub.publish(_msgs(2, size=10) + _msgs(1, size=2 << 20) + _msgs(2, size=10))
        pub.finish()
    assert [len(b) for b in fake["ch"].batches] == [3, 2]  # chunk closes once 1 MB is exceeded


def test_publisher_window_full_times_out(fake):
    fake["ch"] = FakeChannel()
    fake["ch"].never_confirm = True
    opts = parse_sink_options({"maxinflight": "10", "confirmtimeoutms": "50"})
    with pytest.raises(AmqpSinkError, match=r"10 of 10 publish\(es\) stayed unconfirmed for "
                                            r"confirmTimeoutMs=50 with the maxInFlight=10"):
        with TaskPublisher(opts, "t") as pub:
            pub.publish(_msgs(10))
            pub.publish(_msgs(1))


def test_publisher_empty_task_never_connects(fake):
    with TaskPublisher(parse_sink_options({}), "t") as pub:
        assert pub.finish().published == 0
    assert "conn" not in fake


def test_publisher_nack_fails_saying_how_many(fake):
    from spark_amqp.client.errors import PublishNacked

    fake["ch"] = FakeChannel(wait=PublishNacked(_Result(8, nacked=[3, 4])))
    with pytest.raises(AmqpSinkError, match=r"nacked 2 of 10 publish\(es\)"):
        with TaskPublisher(parse_sink_options({}), "partition 0") as pub:
            pub.publish(_msgs(10))
            pub.finish()


def test_publisher_timeout_fails_saying_how_many(fake):
    from spark_amqp.client.errors import ConfirmTimeout

    fake["ch"] = FakeChannel(wait=ConfirmTimeout(4, 0.5))
    with pytest.raises(AmqpSinkError, match=r"4 of 10 publish\(es\) still unconfirmed after "
                                            r"confirmTimeoutMs=500"):
        with TaskPublisher(parse_sink_options({"confirmtimeoutms": "500"}), "p") as pub:
            pub.publish(_msgs(10))
            pub.finish()


def test_publisher_returns_fail_or_are_counted(fake):
    from spark_amqp.client.messages import ReturnedMessage

    ret = [ReturnedMessage(312, "NO_ROUTE", "", "nowhere", None, b"x")] * 3
    fake["ch"] = FakeChannel(wait=lambda n: _Result(n, returned=ret))
    with pytest.raises(AmqpSinkError, match=r"3 of 5 message\(s\) were returned .*312 NO_ROUTE"):
        with TaskPublisher(parse_sink_options({"mandatory": "true"}), "p") as pub:
            pub.publish(_msgs(5))
            pub.finish()
    fake["ch"] = FakeChannel(wait=lambda n: _Result(n, returned=ret))
    with TaskPublisher(parse_sink_options({"mandatory": "true", "onreturn": "ignore"}), "p") as pub:
        pub.publish(_msgs(5))
        assert pub.finish().returned == 3


def test_publisher_broker_error_and_lost_connection(fake):
    from spark_amqp.client.errors import ConnectionLost
    from spark_amqp.protocol.errors import NotFound

    fake["ch"] = FakeChannel(fail_publish=NotFound("NOT_FOUND - no exchange 'x' in vhost '/'"))
    with pytest.raises(AmqpSinkError, match="publishing failed: the broker answered 404"):
        with TaskPublisher(parse_sink_options({}), "p") as pub:
            pub.publish(_msgs(5))
    fake["ch"] = FakeChannel(fail_publish=ConnectionLost("reset"))
    with pytest.raises(AmqpSinkError, match="the connection was lost"):
        with TaskPublisher(parse_sink_options({}), "p") as pub:
            pub.publish(_msgs(5))


def test_commit_message_pickles():
    m = AmqpCommitMessage(1, 2, 2, 2, 0, 10, 0.1)
    assert pickle.loads(pickle.dumps(m)) == m
    AmqpWriter({"uri": URI}, _schema(("body", BinaryType())), False).commit([m, None])
    AmqpStreamWriter({"uri": URI}, _schema(("body", BinaryType())), False).abort([m, None], 3)


def test_publish_module_has_no_client_import_at_load():
    assert "connect" not in vars(sink_publish)


def test_publisher_caps_bodies_at_the_brokers_limit(fake):
    # The sink's message cap (issue 30): the option maxMessageBytes, else the broker's limit
    # (client/broker_limits.py; 16 MiB, RabbitMQ 4.x's default, when the broker does not tell).
    # The rows before an oversized one are published; the task then fails naming size and limit.
    fake["ch"] = FakeChannel()
    with pytest.raises(AmqpSinkError) as ei:
        with TaskPublisher(parse_sink_options({"maxmessagebytes": "100"}), "p") as pub:
            pub.publish([(b"a" * 100, "", "q", None, False), (b"b" * 10, "", "q", None, False),
                         (b"c" * 101, "", "q", None, False), (b"d", "", "q", None, False)])
    assert [len(b) for b in fake["ch"].batches] == [2]
    assert ("row 2 of this task has a body of 101 bytes, above the broker's message size limit "
            "of 100 bytes (option maxMessageBytes)") in str(ei.value)
    fake["ch"] = FakeChannel()
    with pytest.raises(AmqpSinkError, match=r"16777217 bytes, above .* 16777216 bytes \(RabbitMQ 4.x default\)"):
        with TaskPublisher(parse_sink_options({}), "p") as pub:
            pub.publish([(b"x" * (16 * 1024 * 1024 + 1), "", "q", None, False)])
    assert fake["ch"].batches == []


def test_publisher_republishes_unconfirmed_messages_on_another_address(broker_url, unique):
    """Issue 27: the task's connection is cut in the middle of its writes (a node going
    away): the publisher reconnects through the next address and publishes again every
    message not confirmed; the task succeeds and every message is in the queue at least once."""
    from urllib.parse import urlparse

    from faults_proxy import FaultProxy   # tests/faults_proxy.py

    from spark_amqp.client import connect

    q = unique("sink-failover")
    with connect(broker_url) as conn:
        conn.channel().queue_declare(q, durable=True)
    n = 6000
    msgs = [(b"%08d" % i, "", q, None, False) for i in range(n)]
    try:
        with FaultProxy(broker_url) as proxy:
            u = urlparse(broker_url)
            opts = parse_sink_options({
                "uri": f"amqp://guest:guest@127.0.0.1:{proxy.port},127.0.0.1:{u.port}"
                       f"{u.path or '/%2F'}", "shuffleAddresses": "false"})
            with TaskPublisher(opts, "t") as pub:
                pub.publish(msgs[:1000])
                proxy.stall()           # no confirm comes back for the next ones ...
                pub.publish(msgs[1000:3000])
                proxy.cut()             # ... and the connection goes
                proxy.close()
                pub.publish(msgs[3000:])
                stats = pub.finish()
            assert pub.reconnects == 1 and proxy.accepted == 1
            # at least the stalled 2000; at most everything: the first 1000 may be unconfirmed
            # too, and chunks written into the reset socket before the loss is seen are
            # unconfirmed as well (the bound 4000 failed about one run in two under load)
            assert 2000 <= pub.republished <= n
        assert stats.published == n
        got = []
        with connect(broker_url) as conn:
            ch = conn.channel()
            while True:
                d = ch.basic_get(q, no_ack=True)
                if d is None:
                    break
                got.append(bytes(d.body))
        assert set(got) == {m[0] for m in msgs}
        assert len(got) - n <= pub.republished  # duplicates: at most what was published again
    finally:
        with connect(broker_url) as conn:
            conn.channel().queue_delete(q)
