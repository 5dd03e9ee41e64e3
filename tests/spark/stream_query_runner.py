"""A streaming query from the amqp source in stream mode in its own process (SIGKILL tests).

usage: stream_query_runner.py URL STREAM CHECKPOINT OUTPUT_DIR MARKER_DIR TRIGGER [OPTION=VALUE...]
TRIGGER: ``availableNow`` or a processing-time interval like ``1 second``. Writes parquet to
OUTPUT_DIR; touches MARKER_DIR/started once the query runs and, after each completed batch with
rows, MARKER_DIR/batch-<id>.
"""

from __future__ import annotations

import sys


def main() -> None:
    url, stream, checkpoint, output, markers, trigger, *extra = sys.argv[1:]
    from source_query_runner import run_to_parquet, runner_session

    spark = runner_session("amqp-stream-source-runner")
    reader = spark.readStream.format("amqp").option("uri", url).option("stream", stream)
    for kv in extra:
        k, v = kv.split("=", 1)
        reader = reader.option(k, v)
    df = reader.load().selectExpr("cast(body as string) as id", "redelivered", "offset")
    run_to_parquet(df, output, checkpoint, trigger, markers)
    spark.stop()


if __name__ == "__main__":
    main()
