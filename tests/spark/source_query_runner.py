"""A streaming query from the amqp source in its own process (for SIGKILL tests).

usage: source_query_runner.py [--idle-markers] URL QUEUE CHECKPOINT OUTPUT_DIR MARKER_DIR TRIGGER
                              [OPTION=VALUE...]
TRIGGER: ``availableNow`` or a processing-time interval like ``1 second``. Writes parquet to
OUTPUT_DIR; touches MARKER_DIR/started once the query runs and, after each completed batch with
rows, MARKER_DIR/batch-<id>. With
``--idle-markers``, every trigger without data is reported too (Spark's
``spark.sql.streaming.noDataProgressEventInterval`` set to 0) and touches MARKER_DIR/idle-<id>
(``<id>`` = the id the next batch will get): a test can wait for "an idle trigger ran after
batch N" (its latestOffset call happened) instead of sleeping a trigger interval.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

#: JVM options of a runner's Spark driver. A runner's JVM lives ~15 s before its SIGKILL and
#: spends it starting up: C1 only and the serial collector brought a stream runner's first
#: batch from 15.1 s to 13.3 s after launch (means of 8 and 6 runs, interleaved, 2-core machine,
#: load ~2; steady batches unchanged, ~0.5 s).
RUNNER_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def runner_session(app_name: str):
    """The runner's own SparkSession (local[2], RUNNER_JVM_OPTIONS, no UI, UTC, quiet logs)
    with the amqp data source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_amqp

    spark = (SparkSession.builder.master("local[2]").appName(app_name)
             .config("spark.driver.extraJavaOptions", RUNNER_JVM_OPTIONS)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_amqp.register(spark)
    return spark


def run_to_parquet(df, output: str, checkpoint: str, trigger: str, markers: str,
                   idle_markers: bool = False) -> None:
    """Stream ``df`` into parquet at ``output`` until the query ends; touches
    MARKER_DIR/started once it runs, batch-<id> after each batch with rows (idle-<id> after an
    empty one with ``idle_markers``), done at the end."""
    md = Path(markers)
    md.mkdir(parents=True, exist_ok=True)
    seen = set()
    for attempt in range(5):
        w = (df.writeStream.format("parquet").option("path", output)
             .option("checkpointLocation", checkpoint))
        w = w.trigger(availableNow=True) if trigger == "availableNow" else w.trigger(
            processingTime=trigger)
        q = w.start()
        (md / "started").touch()
        while q.isActive:
            for p in q.recentProgress:
                if p["numInputRows"] > 0 and p["batchId"] not in seen:
                    seen.add(p["batchId"])
                    (md / f"batch-{p['batchId']}").write_text(str(p["numInputRows"]))
                elif idle_markers and p["numInputRows"] == 0:
                    (md / f"idle-{p['batchId']}").touch()
            time.sleep(0.1)
        err = q.exception()
        # Spark gives a Python worker 15 s to connect back (hard-coded in 4.3); an overloaded
        # machine misses that: restart from the checkpoint (what a crash restart does anyway),
        # anything else fails the run
        if err is not None and "failed to connect back" in str(err) and attempt < 4:
            print(f"restarting the query after: {str(err)[:200]}", flush=True)
            continue
        q.awaitTermination()
        break
    (md / "done").write_text("ok")


def main() -> None:
    args = sys.argv[1:]
    idle_markers = "--idle-markers" in args
    args = [a for a in args if a != "--idle-markers"]
    url, queue, checkpoint, output, markers, trigger, *extra = args
    spark = runner_session("amqp-source-runner")
    if idle_markers:
        spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    # checkpointLocation on the reader too: PySpark 4.0/4.1 ack a run's last batch at stop
    reader = (spark.readStream.format("amqp").option("uri", url).option("queue", queue)
              .option("checkpointLocation", checkpoint))
    for kv in extra:
        k, v = kv.split("=", 1)
        reader = reader.option(k, v)
    df = reader.load().selectExpr("cast(body as string) as id", "redelivered", "offset")
    run_to_parquet(df, output, checkpoint, trigger, markers, idle_markers)
    spark.stop()


if __name__ == "__main__":
    main()
