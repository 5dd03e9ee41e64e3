"""The sink's superStream option (issue 13): each row goes to the partition stream that
RabbitMQ's stream clients pick for its routing key; the source reads the super stream back."""

from __future__ import annotations

import pytest

from source_helpers import delete
from stream_helpers import declare_stream, pika_read

pytestmark = pytest.mark.spark


def test_options():
    from spark_amqp.spark.sink_options import SinkOptionError, parse_sink_options

    assert parse_sink_options({"superstream": " inv "}).super_stream == "inv"
    with pytest.raises(SinkOptionError, match="remove the option exchange"):
        parse_sink_options({"superstream": "inv", "exchange": "x"})
    with pytest.raises(SinkOptionError, match="superStream"):
        parse_sink_options({"superstream": " "})


def test_super_stream_write_routes_by_hash_and_reads_back(spark, broker_url, unique, tmp_path):
    from spark_amqp.spark.super_stream import partition_index

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
