"""A streaming query that copies a stream into another stream over the stream protocol with a
deduplicating producer, in its own process (SIGKILL tests of the sink, test_sink_stream_protocol).

usage: sink_stream_query_runner.py AMQP_URL SOURCE_STREAM STREAM_URL TARGET_STREAM CHECKPOINT
                                   MARKER_DIR TRIGGER PRODUCER_NAME [OPTION=VALUE...]
Reads SOURCE_STREAM with the amqp source in stream mode (over AMQP 0-9-1, OPTION=VALUE are its
options) and writes each row's body into TARGET_STREAM through the amqp sink with a
``rabbitmq-stream://`` uri and ``producerName``. TRIGGER: ``availableNow`` or a processing-time
interval. Touches MARKER_DIR/started once the query runs, MARKER_DIR/batch-<id> after each
completed batch with rows, MARKER_DIR/done at the end.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def main() -> None:
    url, source, stream_url, target, checkpoint, markers, trigger, name, *extra = sys.argv[1:]
    from source_query_runner import runner_session

    spark = runner_session("amqp-stream-sink-runner")
    reader = spark.readStream.format("amqp").option("uri", url).option("stream", source)
    for kv in extra:
        k, v = kv.split("=", 1)
        reader = reader.option(k, v)
    df = reader.load().select("body")
    md = Path(markers)
    md.mkdir(parents=True, exist_ok=True)
    w = (df.writeStream.format("amqp").option("uri", stream_url).option("stream", target)
         .option("producerName", name).option("checkpointLocation", checkpoint))
    w = w.trigger(availableNow=True) if trigger == "availableNow" else w.trigger(
        processingTime=trigger)
    q = w.start()
    (md / "started").touch()
    seen = set()
    while q.isActive:
        for p in q.recentProgress:
            if p["numInputRows"] > 0 and p["batchId"] not in seen:
                seen.add(p["batchId"])
                (md / f"batch-{p['batchId']}").write_text(str(p["numInputRows"]))
        time.sleep(0.1)
    q.awaitTermination()
    (md / "done").write_text("ok")
    spark.stop()


if __name__ == "__main__":
    main()
