"""A streaming query from the amqp source in stream mode in its own process (SIGKILL tests).

usage: stream_query_runner.py URL STREAM CHECKPOINT OUTPUT_DIR MARKER_DIR TRIGGER [OPTION=VALUE...]
TRIGGER: ``availableNow`` or a processing-time interval like ``1 second``. Writes parquet to
OUTPUT_DIR; touches MARKER_DIR/started once the query runs and, after each completed batch with
rows, MARKER_DIR/batch-<id>.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main() -> None:
    url, stream, checkpoint, output, markers, trigger, *extra = sys.argv[1:]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_amqp
    from source_query_runner import RUNNER_JVM_OPTIONS

    spark = (SparkSession.builder.master("local[2]").appName("amqp-stream-source-runner")
             .config("spark.driver.extraJavaOptions", RUNNER_JVM_OPTIONS)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_amqp.register(spark)
    reader = spark.readStream.format("amqp").option("uri", url).option("stream", stream)
    for kv in extra:
        k, v = kv.split("=", 1)
        reader = reader.option(k, v)
    df = reader.load().selectExpr("cast(body as string) as id", "redelivered", "offset")
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
            time.sleep(0.1)
        err = q.exception()
        # Spark gives a Python worker 15 s to connect back (hard-coded in 4.3); a machine
        # overloaded by other jobs misses that: restart from the checkpoint (what a crash
        # restart does anyway), anything else fails the run
        if err is not None and "failed to connect back" in str(err) and attempt < 4:
            print(f"restarting the query after: {str(err)[:200]}", flush=True)
            continue
        q.awaitTermination()
        break
    (md / "done").write_text("ok")
    spark.stop()


if __name__ == "__main__":
    main()
