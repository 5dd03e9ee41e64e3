"""Submitted with ``spark-submit --master spark://...`` by ``test_cluster.py``: the sink and the
source in both modes, with the executors in the workers' JVMs and the driver in this one.

``cluster_scenarios.py CONFIG.json RESULT.json``; CONFIG is ``{"brokers": [{"name", "uri",
"management"}], "out": folder, "n": messages}`` (``management``: the embedded broker's
management API URL, or null). For each broker, with fresh queue names:

1. sink: ``n`` rows in 4 partitions (so both executors publish) written to a classic queue,
   each with ``message_id`` ``m-<i>``;
2. queue mode: a ``Trigger.AvailableNow`` query over that queue, ``maxMessagesPerTrigger`` n/3,
   into a ``foreachBatch`` that writes each batch to ``out/<broker>/queue/batch_id=<k>`` and
   records, while the batch is still running (before its commit), the broker's count of
   unacknowledged messages (management API; the embedded broker's figures are live);
3. stream mode: the same ``n`` rows written to a stream queue, read by a streaming query
   (``startingOffsets`` earliest, n/3 per trigger, ``minPartitions`` 2: both executors read
   ranges) into the parquet file sink, and a batch read of offsets [10, n - 10).

RESULT gets, per broker: the queue depth after the sink, per-batch rows and unacked counts,
the ready/consumer counts after the query, the output folders, the batch read's count and
offsets. ``test_cluster.py`` checks them and the parquet files. The queues are deleted.
"""

from __future__ import annotations

import base64
import json
import sys
import urllib.parse
import urllib.request
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import spark_amqp
from spark_amqp.client import connect

# spark-submit runs this file without tests/ on sys.path: the names' helper is there
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from session_guard import unique_name  # noqa: E402


def unacked(management: str | None, queue: str) -> int | None:
    if not management:
        return None
    url = f"{management.rstrip('/')}/api/queues/%2F/{urllib.parse.quote(queue, safe='')}"
    req = urllib.request.Request(url, headers={
        "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
    with urllib.request.urlopen(req, timeout=10) as r:
        return int(json.loads(r.read())["messages_unacknowledged"])


def depth(uri: str, queue: str) -> tuple[int, int]:
    with connect(uri) as conn:
        ok = conn.channel().queue_declare(queue, passive=True)
        return ok.message_count, ok.consumer_count


def rows_df(spark, n: int):
    return (spark.range(n, numPartitions=4)
            .select(F.to_json(F.struct(F.col("id"))).alias("body"),
                    F.concat(F.lit("m-"), F.col("id").cast("string")).alias("message_id")))


def write(df, uri: str, queue: str) -> None:
    (df.write.format("amqp").option("uri", uri).option("exchange", "")
     .option("routingKey", queue).option("mandatory", "true").mode("append").save())


def queue_mode(spark, b: dict, n: int, out: str) -> dict:
    uri, queue = b["uri"], unique_name("cluster-q")
    res: dict = {"queue": queue, "batches": []}
    with connect(uri) as conn:
        conn.channel().queue_declare(queue, durable=True)
    try:
        write(rows_df(spark, n), uri, queue)
        res["depth_after_sink"] = depth(uri, queue)[0]
        path = f"{out}/{b['name']}/queue"

        def each_batch(df, batch_id: int) -> None:
            df = df.select("body", "message_id", "redelivered").cache()
            rows = df.count()
            # the batch is running and not yet committed: its messages must still be unacked
            res["batches"].append({"id": batch_id, "rows": rows,
                                   "unacked": unacked(b.get("management"), queue)})
            df.write.mode("overwrite").parquet(f"{path}/batch_id={batch_id}")
            df.unpersist()

        q = (spark.readStream.format("amqp").option("uri", uri).option("queue", queue)
             .option("maxMessagesPerTrigger", str(n // 3 + 1)).load()
             .writeStream.foreachBatch(each_batch)
             .option("checkpointLocation", f"{out}/{b['name']}/queue-checkpoint")
             .trigger(availableNow=True).start())
        q.awaitTermination(600)
        res["after"] = depth(uri, queue)
        res["unacked_after"] = unacked(b.get("management"), queue)
        res["path"] = path
    finally:
        with connect(uri) as conn:
            conn.channel().queue_delete(queue)
    return res


def stream_mode(spark, b: dict, n: int, out: str) -> dict:
    uri, stream = b["uri"], unique_name("cluster-s")
    res: dict = {"stream": stream}
    with connect(uri) as conn:
        conn.channel().queue_declare(stream, durable=True, arguments={"x-queue-type": "stream"})
    try:
        write(rows_df(spark, n), uri, stream)
        path = f"{out}/{b['name']}/stream"
        q = (spark.readStream.format("amqp").option("uri", uri).option("stream", stream)
             .option("startingOffsets", "earliest").option("minPartitions", "2")
             .option("maxMessagesPerTrigger", str(n // 3 + 1)).load()
             .select("body", "message_id", "offset")
             .writeStream.format("parquet").option("path", path)
             .option("checkpointLocation", f"{out}/{b['name']}/stream-checkpoint")
             .trigger(availableNow=True).start())
        q.awaitTermination(600)
        res["path"] = path
        res["batches"] = [p["numInputRows"] for p in
                          (json.loads(x.json) for x in q.recentProgress)]
        batch = (spark.read.format("amqp").option("uri", uri).option("stream", stream)
                 .option("startingOffsets", json.dumps({stream: 10}))
                 .option("endingOffsets", json.dumps({stream: n - 10}))
                 .option("minPartitions", "2").load())
        res["batch_partitions"] = batch.rdd.getNumPartitions()
        offs = [r.offset for r in batch.select("offset").collect()]
        res["batch_offsets"] = [min(offs), max(offs), len(offs), len(set(offs))] if offs else []
    finally:
        with connect(uri) as conn:
            conn.channel().queue_delete(stream)
    return res


def main(config_path: str, result_path: str) -> None:
    cfg = json.loads(open(config_path).read())
    spark = SparkSession.builder.appName("spark-amqp cluster scenarios").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark_amqp.register(spark)
    result: dict = {"master": spark.sparkContext.master}
    for b in cfg["brokers"]:
        result[b["name"]] = {"queue": queue_mode(spark, b, cfg["n"], cfg["out"]),
                             "stream": stream_mode(spark, b, cfg["n"], cfg["out"])}
    # block managers = the driver's + one per executor (each in a worker's JVM)
    result["executors"] = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    open(result_path, "w").write(json.dumps(result))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
