"""The sink over the stream protocol without Spark jobs: options and schema rules, the
publishing-id rule (hypothesis), the AMQP 1.0 conversion of rows (byte for byte RabbitMQ's),
and one task's publisher against each broker (RabbitMQ 3.10.8 on port 5552 and the embedded
broker with ``stream_port``): deduplication of a task written again, of a task retried after a
partial write, ``publishing_id`` columns, super streams routed as the 0-9-1 sink routes them.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import (DoubleType, LongType, MapType, StringType, StructField,
                               StructType)

from spark_amqp.protocol.amqp10.convert import from_amqp091_v43, from_amqp091_v310
from spark_amqp.protocol.properties import BasicProperties
from spark_amqp.spark.sink.convert import SinkDataError, SinkSchemaError, batch_to_messages, \
    plan_columns
from spark_amqp.spark.sink.options import SinkOptionError, parse_sink_options
from spark_amqp.spark.sink.stream_publish import (Amqp10Rows, conversion_version,
                                                  derived_publishing_id, derived_publishing_ids,
                                                  task_producer_name)
from spark_amqp.spark.sink.writer import _write_partition, _write_partition_stream
from stream_sink_helpers import body_of, read_stream, streams, urls  # noqa: F401

SURI = "rabbitmq-stream://guest:guest@127.0.0.1:5552/%2F"
BODY = StructType([StructField("body", StringType())])


# -- options and columns ----------------------------------------------------------------------
def test_stream_uri_selects_the_stream_protocol():
    o = parse_sink_options({"uri": SURI, "stream": "s", "producername": "p"})
    assert o.stream_protocol and (o.stream, o.producer_name) == ("s", "p")
    o = parse_sink_options({"uri": "rabbitmq-stream+tls://h", "superstream": "ss",
                            "cacertfile": "/ca.pem", "addresses": "a,b:7"})
    assert o.stream_protocol and o.super_stream == "ss"
    assert o.connect_args()["addresses"] == (("a", 5551), ("b", 7))
    # over 0-9-1, stream=NAME is the default exchange with routing key NAME
    o = parse_sink_options({"stream": "s"})
    assert not o.stream_protocol and (o.exchange, o.routing_key) == ("", "s")


@pytest.mark.parametrize("opts, words", [
    ({"producername": "p", "stream": "s"}, ["producerName", "rabbitmq-stream://"]),
    ({"uri": SURI}, ["stream=NAME"]),
    ({"uri": SURI, "stream": "s", "superstream": "t"}, ["stream", "superStream"]),
    ({"uri": SURI, "stream": "s", "exchange": "x"}, ["exchange", "stream protocol"]),
    ({"uri": SURI, "stream": "s", "mandatory": "true"}, ["mandatory"]),
    ({"uri": SURI, "stream": "s", "cacertfile": "/ca"}, ["cacertfile", "rabbitmq-stream+tls"]),
    ({"uri": SURI, "stream": "s", "producername": " "}, ["producerName"]),
    ({"uri": "rabbitmq-stream://h:99999", "stream": "s"}, ["uri"]),
    ({"stream": "s", "routingkey": "k"}, ["stream", "routingKey"]),
])
def test_bad_options_name_the_option(opts, words):
    with pytest.raises(SinkOptionError) as e:
        parse_sink_options(opts)
    for w in words:
        assert w in str(e.value)


def test_publishing_id_column_rules():
    named = parse_sink_options({"uri": SURI, "stream": "s", "producername": "p"})
    ok = StructType(BODY.fields + [StructField("publishing_id", LongType())])
    assert plan_columns(ok, named).publishing_id
    bad = StructType(BODY.fields + [StructField("publishing_id", DoubleType())])
    with pytest.raises(SinkSchemaError, match="`publishing_id` has type double"):
        plan_columns(bad, named)
    anonymous = parse_sink_options({"uri": SURI, "stream": "s"})
    with pytest.raises(SinkSchemaError, match="only used with the option producerName"):
        plan_columns(ok, anonymous)


# -- the publishing-id rule ---------------------------------------------------------------------
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2000)), min_size=1, max_size=20),
       st.integers(0, 2 ** 20), st.integers(0, 50))
def test_derived_ids_grow_per_producer_across_batches(batches, first_batch, partition):
    """The ids one producer (one partition) sends over a query's batches grow strictly, and a
    replayed batch gets the very same ids."""
    seen = []
    batch_id = first_batch
    name = task_producer_name("writer", partition)
    for gap, rows in batches:
        batch_id += gap + 1
        ids = []
        row = 0
        for part in (rows // 3, rows - rows // 3):    # two Arrow batches in the task
            ids += list(derived_publishing_ids(batch_id, row, part))
            row += part
        assert ids == [derived_publishing_id(batch_id, r) for r in range(rows)]
        again = list(derived_publishing_ids(batch_id, 0, rows))   # the batch replayed
        assert again == ids
        seen += ids
    assert all(a < b for a, b in zip(seen, seen[1:])), name
    assert all(i > 0 for i in seen)


def test_derived_id_limits():
    assert derived_publishing_id(0, 0) == 1
    assert derived_publishing_id(3, 9) == 3 * 2 ** 32 + 10
    with pytest.raises(ValueError, match="batch id"):
        derived_publishing_id(2 ** 32, 0)
    with pytest.raises(ValueError, match="rows per task"):
        derived_publishing_id(1, 2 ** 32 - 1)
    assert task_producer_name("w", 7) == "w-7"
    assert conversion_version((3, 10, 8)) == "3.10"
    assert conversion_version((3, 13, 0)) == conversion_version((4, 3, 5)) == "4.3"


# -- rows to AMQP 1.0 -----------------------------------------------------------------------------
@pytest.mark.parametrize("version, whole", [("3.10", from_amqp091_v310), ("4.3", from_amqp091_v43)])
@given(ids=st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=20),
       bodies=st.lists(st.binary(max_size=400), min_size=20, max_size=20))
def test_rows_convert_as_rabbitmq_does(version, whole, ids, bodies):
    """The spliced template path (deterministic message ids) and the cached path give the
    bytes of RabbitMQ's own conversion of the 0-9-1 message."""
    opts = parse_sink_options({"uri": SURI, "stream": "s"})
    schema = pa.schema([("body", pa.binary()), ("message_id", pa.string())])
    batch = pa.RecordBatch.from_pydict({"body": bodies[:len(ids)], "message_id": ids},
                                       schema=schema)
    plan = plan_columns(StructType([StructField("body", StringType()),
                                    StructField("message_id", StringType())]), opts)
    rows = batch_to_messages(plan, batch, "q:3:1", 0)
    rows += batch_to_messages(plan_columns(BODY, opts), batch.select(["body"]), "q:3:1",
                              len(ids))
    conv = Amqp10Rows(version)
    got = conv.convert(rows, "stream-a")
    want = [whole("", "stream-a", p.encode(), b) for b, _e, _k, p, _m in rows]
    assert got == want
    # properties beyond delivery mode and message id: the general path
    props = BasicProperties(content_type="text/plain", headers={"k": "v"}, priority=3,
                            delivery_mode=2, message_id="m")
    row = (b"body", "", "", props, False)
    assert conv.convert([row], "s") == [whole("", "s", props.encode(), b"body")]


# -- one task against each broker -------------------------------------------------------------------
def _batch(bodies, ids=None):
    d = {"body": bodies}
    if ids is not None:
        d["publishing_id"] = ids
    return pa.RecordBatch.from_pydict(d)


def _write(urls, stream, batches, name="writer", batch_id=0, pid=0, **extra):
    opts = {"uri": urls[0], "stream": stream, **extra}
    if name:
        opts["producername"] = name
    o = parse_sink_options(opts)
    fields = [StructField("body", StringType())]
    if "publishing_id" in batches[0].schema.names:
        fields.append(StructField("publishing_id", LongType()))
    plan = plan_columns(StructType(fields), o)
    return _write_partition_stream(o, plan, iter(batches), f"w:{pid}", "test task", pid, batch_id)


def test_a_task_written_again_adds_nothing(urls, streams):
    s = streams()
    bodies = [f"row-{i}" for i in range(3000)]
    first = _write(urls, s, [_batch(bodies[:1000]), _batch(bodies[1000:])])
    assert (first.published, first.skipped, first.confirmed) == (3000, 0, 3000)
    again = _write(urls, s, [_batch(bodies[:1000]), _batch(bodies[1000:])])
    assert (again.published, again.skipped) == (0, 3000)
    # a retry after an attempt that wrote a prefix: only the rest goes out
    s2 = streams()
    _write(urls, s2, [_batch(bodies[:1234])])
    retry = _write(urls, s2, [_batch(bodies[:1000]), _batch(bodies[1000:])])
    assert (retry.published, retry.skipped) == (3000 - 1234, 1234)
    for name in (s, s2):
        got = read_stream(streams.client, name, want=3000)
        assert [body_of(m).decode() for _o, m in got] == bodies
    # the next batch of the same producer is new data
    nxt = _write(urls, s, [_batch(["next"])], batch_id=1)
    assert nxt.published == 1
    assert streams.client.query_publisher_sequence("writer-0", s) == 2 ** 32 + 1


def test_without_producer_name_a_second_write_duplicates(urls, streams):
    s = streams()
    for _ in range(2):
        m = _write(urls, s, [_batch(["a", "b"])], name=None)
        assert m.published == m.confirmed == 2
    assert [body_of(m) for _o, m in read_stream(streams.client, s, want=4)] == [b"a", b"b"] * 2


def test_publishing_id_column(urls, streams):
    s = streams()
    m = _write(urls, s, [_batch(["a", "b", "c"], [10, 11, 20])])
    assert m.published == 3
    m = _write(urls, s, [_batch(["b", "c", "d"], [11, 20, 25])])
    assert (m.published, m.skipped) == (1, 2)
    assert [body_of(x) for _o, x in read_stream(streams.client, s, want=4)] == \
        [b"a", b"b", b"c", b"d"]
    with pytest.raises(SinkDataError, match="row 2 of the task has publishing id 5, not above"):
        _write(urls, streams(), [_batch(["a", "b", "c"], [4, 6, 5])])
    with pytest.raises(SinkDataError, match="row 1 .* null"):
        _write(urls, streams(), [_batch(["a", "b"], [1, None])])


def test_stream_protocol_writes_what_the_091_sink_writes(urls, streams):
    """Rows written over 0-9-1 (option stream) and over the stream protocol are stored as the
    same AMQP 1.0 bytes."""
    s = streams()
    schema = pa.schema([("body", pa.string()), ("headers", pa.map_(pa.string(), pa.string())),
                        ("content_type", pa.string()), ("priority", pa.int64())])
    batch = pa.RecordBatch.from_pydict({"body": ["a", "b" * 300], "headers": [[("k", "v")], None],
                                        "content_type": ["text/plain", None],
                                        "priority": [1, None]}, schema=schema)
    fields = StructType([StructField("body", StringType()),
                         StructField("headers", MapType(StringType(), StringType())),
                         StructField("content_type", StringType()),
                         StructField("priority", LongType())])
    for uri, write in ((urls[1], _write_partition), (urls[0], _write_partition_stream)):
        o = parse_sink_options({"uri": uri, "stream": s})
        args = (o, plan_columns(fields, o), iter([batch]), "w:0", "t", 0)
        write(*args, *((0,) if write is _write_partition_stream else ()))
    got = [m for _o, m in read_stream(streams.client, s, want=4)]
    assert len(got) == 4 and got[:2] == got[2:]


def test_super_stream_routes_as_the_091_sink(urls, streams):
    from spark_amqp.spark.sink.super_stream import partition_index

    name = streams(partitions=3)
    keys = [f"key-{i}" for i in range(60)]
    schema = StructType([StructField("body", StringType()),
                         StructField("partitionKey", StringType())])
    batch = pa.RecordBatch.from_pydict({"body": keys, "partitionKey": keys})
    for uri, write in ((urls[1], _write_partition), (urls[0], _write_partition_stream)):
        opts = {"uri": uri, "superstream": name}
        if write is _write_partition_stream:
            opts["producername"] = "ss"
        o = parse_sink_options(opts)
        args = (o, plan_columns(schema, o), iter([batch]), "w:0", "t", 0)
        write(*args, *((0,) if write is _write_partition_stream else ()))
    per_partition = {}
    for i in range(3):
        want = 2 * sum(1 for k in keys if partition_index(k, 3) == i)
        bodies = [body_of(m).decode()
                  for _o, m in read_stream(streams.client, f"{name}-{i}", want=want)]
        assert len(bodies) == want
        half = len(bodies) // 2
        assert bodies[:half] == bodies[half:]      # same rows, same order, both protocols
        per_partition[i] = bodies[:half]
    assert sorted(sum(per_partition.values(), [])) == sorted(keys)
    assert all(per_partition.values())
    # the second write of the deduplicating producer adds nothing
    o = parse_sink_options({"uri": urls[0], "superstream": name, "producername": "ss"})
    m = _write_partition_stream(o, plan_columns(schema, o), iter([batch]), "w:0", "t", 0, 0)
    assert (m.published, m.skipped) == (0, 60)
