"""The sink's superStream option (issue 13): each row goes to the partition stream that
RabbitMQ's stream clients pick for its routing key; the source reads the super stream back."""

from __future__ import annotations

import pytest

from source_helpers import delete
from stream_helpers import declare_stream, pika_read

pytestmark = pytest.mark.spark


def test_options():
    from spark_amqp.spark.sink.options import SinkOptionError, parse_sink_options

    assert parse_sink_options({"superstream": " inv "}).super_stream == "inv"
    with pytest.raises(SinkOptionError, match="remove the option exchange"):
        parse_sink_options({"superstream": "inv", "exchange": "x"})
    with pytest.raises(SinkOptionError, match="superStream"):
        parse_sink_options({"superstream": " "})


def test_super_stream_write_routes_by_hash_and_reads_back(spark, broker_url, unique, tmp_path):
    from spark_amqp.spark.sink.super_stream import partition_index

    name = unique("super")
    parts = [f"{name}-{i}" for i in range(3)]
    for p in parts:
        declare_stream(broker_url, p)
    try:
        keys = [f"customer-{i % 17}" for i in range(120)]
        df = spark.createDataFrame([(f"b{i}".encode(), k) for i, k in enumerate(keys)],
                                   "body binary, routing_key string")
        (df.write.format("amqp").mode("append").option("uri", broker_url)
         .option("superStream", name).save())
        got = {}
        for i, p in enumerate(parts):
            n = sum(1 for k in keys if partition_index(k, 3) == i)
            rows = pika_read(broker_url, p, 0, n) if n else []
            got.update({b.decode(): (i, m) for _, b, m in rows})
        assert len(got) == 120
        for j, k in enumerate(keys):
            assert got[f"b{j}"][0] == partition_index(k, 3), k
        # the source reads the super stream back, all partitions
        out = (spark.read.format("amqp").option("uri", broker_url).option("superStream", name)
               .load().selectExpr("cast(body as string) b", "queue").collect())
        assert sorted(r.b for r in out) == sorted(f"b{j}" for j in range(120))
        assert {r.queue for r in out} <= set(parts)
    finally:
        delete(broker_url, *parts)


# MurmurHash3 x86 32-bit, seed 104729, of the keys' UTF-8 bytes (mmh3 and the independent
# reference implementation in test_stream_source_unit agree): the partition is hash % 3
KNOWN_HASHES = {"customer-1": 536801432, "customer-3": 1315620829, "customer-4": 3344134437,
                "customer-5": 3330449743, "order-42": 556465915, "hello": 1321743225,
                "": 3329588566}


def test_partition_key_column_is_checked_at_plan_time():
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from spark_amqp.spark.sink.convert import SinkSchemaError, plan_columns
    from spark_amqp.spark.sink.options import parse_sink_options

    def schema(t):
        return StructType([StructField("body", StringType()), StructField("partitionKey", t)])

    plan = plan_columns(schema(StringType()), parse_sink_options({"superstream": "inv"}))
    assert plan.partition_key
    with pytest.raises(SinkSchemaError, match="only used with the option superStream"):
        plan_columns(schema(StringType()), parse_sink_options({}))
    with pytest.raises(SinkSchemaError, match="`partitionKey` has type int"):
        plan_columns(schema(IntegerType()), parse_sink_options({"superstream": "inv"}))


def test_partition_key_replaces_the_routing_key_for_the_hash():
    import pyarrow as pa
    from pyspark.sql.types import StringType, StructField, StructType

    from spark_amqp.spark.sink.convert import batch_to_messages, plan_columns
    from spark_amqp.spark.sink.options import parse_sink_options

    schema = StructType([StructField(c, StringType())
                         for c in ("body", "routing_key", "partitionKey")])
    plan = plan_columns(schema, parse_sink_options({"superstream": "inv"}))
    batch = pa.RecordBatch.from_pydict({"body": ["a", "b", "c"], "routing_key": ["r1", None, "r3"],
                                        "partitionKey": ["k1", None, None]})
    keys = [m[2] for m in batch_to_messages(plan, batch, None, 0)]
    assert keys == ["k1", "", "r3"]       # null partitionKey: the routing key ("" if null)


def test_partition_key_column_routes_by_known_hashes(spark, broker_url, unique):
    """Rows go to partition hash(partitionKey) % 3 with the hashes above; a null partitionKey
    falls back to the routing key ("hello": partition 0); the routing key of the other rows
    ("order-42": partition 1) does not matter."""
    name = unique("superpk")
    parts = [f"{name}-{i}" for i in range(3)]
    for p in parts:
        declare_stream(broker_url, p)
    try:
        rows = [("b0", "order-42", "customer-1"), ("b1", "order-42", "customer-3"),
                ("b2", "order-42", "customer-4"), ("b3", "order-42", "customer-5"),
                ("b4", "order-42", ""), ("b5", "hello", None), ("b6", "order-42", "customer-1")]
        want = {b: KNOWN_HASHES[pk if pk is not None else rk] % 3 for b, rk, pk in rows}
        assert want == {"b0": 2, "b1": 1, "b2": 0, "b3": 1, "b4": 1, "b5": 0, "b6": 2}
        df = spark.createDataFrame(rows, "body string, routing_key string, partitionKey string")
        (df.write.format("amqp").mode("append").option("uri", broker_url)
         .option("superStream", name).save())
        got = {}
        for i, p in enumerate(parts):
            n = sum(1 for v in want.values() if v == i)
            got.update({b.decode(): i for _, b, _ in pika_read(broker_url, p, 0, n)})
        assert got == want
    finally:
        delete(broker_url, *parts)
