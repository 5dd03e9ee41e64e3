"""The streaming query: the ``amqp`` source → :mod:`.transforms` → ``foreachBatch`` (parquet
and alerts through the ``amqp`` sink), with its options (:class:`JobOptions`) and what it did
(:class:`JobResult`)."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from .data import ALERTS_EXCHANGE, DEFAULT_MAX_PER_TRIGGER, DEFAULT_QUEUE, RESULT_COLUMNS, SOURCE_SCHEMA
from .transforms import alert_messages, result_rows, window_aggregates

log = logging.getLogger("flight_delays")


@dataclass
class JobResult:
    """What :func:`run_job` did: rows consumed (sum of ``numInputRows`` over all batches),
    batches, alerts published, result windows written, wall seconds, output directory."""

    consumed: int = 0
    batches: int = 0
    alerts: int = 0
    windows: int = 0
    seconds: float = 0.0
    output: str = ""
    progress: list = field(default_factory=list)
    #: ``--live`` demo: what :func:`live_figures` says about the publisher and the query
    live: dict = field(default_factory=dict)


def _progress_listener():
    """A StreamingQueryListener that logs input rows, rows/s and the watermark per batch.

    Its ``terminated`` event is set once Spark's listener bus has delivered the query's
    termination: remove the listener only after that, or the bus may call into a Python
    process that is gone (a py4j "Connection reset" error at exit).
    """
    import threading

    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressLogger(StreamingQueryListener):
        terminated = threading.Event()

        def onQueryStarted(self, event):
            log.info("query started (id %s)", event.id)

        def onQueryProgress(self, event):
            p = event.progress
            if p.numInputRows == 0 and not log.isEnabledFor(logging.DEBUG):
                return
            wm = (p.eventTime or {}).get("watermark", "-")
            log.info("batch %d: %s rows in, %s rows/s in, %s rows/s processed, %.1f s, "
                     "watermark %s", p.batchId, f"{p.numInputRows:,}",
                     f"{p.inputRowsPerSecond:,.0f}", f"{p.processedRowsPerSecond:,.0f}",
                     p.batchDuration / 1000.0, wm)

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            log.info("query terminated%s", f": {event.exception}" if event.exception else "")
            self.terminated.set()

    return ProgressLogger()


def batch_writer(output: str, uri: str, threshold: float = 60.0,
                 alerts_exchange: str = ALERTS_EXCHANGE, result: JobResult | None = None):
    """The job's ``foreachBatch`` function ``(batch_df, batch_id) -> None``.

    ``batch_df``: one micro-batch of :func:`window_aggregates` (the windows it closed). Writes
    :func:`result_rows` to parquet under ``OUTPUT/windows/batch_id=<n>/`` (overwritten on a
    replay) and publishes :func:`alert_messages` to ``alerts_exchange`` on ``uri`` with the
    ``amqp`` sink. Adds the windows and alerts to ``result`` (a :class:`JobResult`) if given.
    Shared by :func:`run_job` and ``spark_amqp.bench.job``.
    """
    result = result if result is not None else JobResult(output=output)

    def write_batch(batch_df, batch_id: int) -> None:
        # The batch's windows are computed once (the stateful job, which reads the batch's
        # messages) and persisted; the counts, the parquet write and the alerts read that
        # cache. (Writing the parquet first and reading it back for the counts and alerts
        # took 1.1 s more over the 336,776 flights: CHANGELOG.md, "The main job's speed".)
        from pyspark.sql import functions as F

        windows = result_rows(batch_df).persist()
        try:
            counts = windows.agg(
                F.count(F.lit(1)),
                F.count(F.when(F.col("mean_dep_delay") > F.lit(threshold), 1))).first()
            n, n_alerts = int(counts[0]), int(counts[1])
            windows.write.mode("overwrite").parquet(f"{output}/windows/batch_id={batch_id}")
            if n_alerts:
                (alert_messages(windows, threshold).write.format("amqp").option("uri", uri)
                 .option("exchange", alerts_exchange).option("declareExchange", "true")
                 .option("exchangeType", "topic").mode("append").save())
        finally:
            windows.unpersist()
        if not n:
            return
        result.alerts += n_alerts
        result.windows += n
        log.info("batch %d: %s windows closed -> parquet, %s alerts -> exchange %r",
                 batch_id, f"{n:,}", f"{n_alerts:,}", alerts_exchange)

    return write_batch


@dataclass(frozen=True)
class JobOptions:
    """What :func:`run_job` reads and writes, and how it triggers (the command's options).

    ``queue``: the queue of flight messages, or ``super_stream``: read that super stream in
    stream mode (``startingOffsets=earliest``) instead. ``output``: the results folder
    (parquet under ``OUTPUT/windows``); ``checkpoint`` defaults to ``OUTPUT/_checkpoint``.
    ``threshold``: minutes of mean departure delay above which a window is an alert,
    published to ``alerts_exchange``. ``watermark``: the delay on ``sched_dep`` (a Spark
    interval string). ``trigger``: ``available-now`` (process what the queue holds, then
    stop) or ``continuous`` (a processing-time trigger every ``interval`` seconds, until
    interrupted, or until the windows hold ``stop_after_flights`` flights).
    ``max_per_trigger`` caps rows per micro-batch (the source's ``maxMessagesPerTrigger``;
    0 or None: no cap). ``idle_timeout``: the queue mode's ``availableNowIdleTimeout``
    (seconds)."""

    queue: str = DEFAULT_QUEUE
    output: str = "out/flight_delays"
    checkpoint: str | None = None
    threshold: float = 60.0
    alerts_exchange: str = ALERTS_EXCHANGE
    watermark: str = "30 minutes"
    trigger: str = "available-now"
    interval: float = 5.0
    max_per_trigger: int | None = DEFAULT_MAX_PER_TRIGGER
    idle_timeout: float = 5.0
    stop_after_flights: int | None = None
    super_stream: str | None = None


def job_options(args, **changes) -> JobOptions:
    """The :class:`JobOptions` of a parsed command line (``args``: an object with attributes
    named as its fields; those it lacks keep their defaults), with ``changes`` over them."""
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(JobOptions)
             if hasattr(args, f.name)}
    return JobOptions(**{**given, **changes})


def run_job(spark, uri: str, options: JobOptions | None = None, *, stop_when=None,
            on_started=None, **changes) -> JobResult:
    """Run the streaming query (see :mod:`spark_amqp.jobs.delays`) on ``uri`` and return a
    :class:`JobResult`.

    ``options``: a :class:`JobOptions` (default: its defaults), with ``changes`` (keyword
    options named as its fields, e.g. ``output=..., trigger="continuous"``) applied over it;
    an unknown name raises ``TypeError``. ``continuous`` also stops when ``stop_when()``
    (checked every second) returns True. ``on_started(query)`` is called once the query has
    started (the ``--live`` demo starts its publisher there). Raises
    ``pyspark.errors.StreamingQueryException`` if the query fails.
    """
    o = dataclasses.replace(options or JobOptions(), **changes)
    output, checkpoint, queue, super_stream = o.output, o.checkpoint, o.queue, o.super_stream
    threshold, alerts_exchange, trigger = o.threshold, o.alerts_exchange, o.trigger
    max_per_trigger, stop_after_flights = o.max_per_trigger, o.stop_after_flights
    output = str(Path(output).resolve())
    checkpoint = checkpoint or str(Path(output) / "_checkpoint")
    result = JobResult(output=output)

    reader = spark.readStream.format("amqp").schema(SOURCE_SCHEMA).option("uri", uri)
    if super_stream is not None:
        reader = reader.option("superStream", super_stream).option("startingOffsets", "earliest")
    else:
        reader = (reader.option("queue", queue)
                  .option("availableNowIdleTimeout", str(o.idle_timeout)))
    if max_per_trigger:
        reader = reader.option("maxMessagesPerTrigger", str(max_per_trigger))
    windows = window_aggregates(reader.load(), o.watermark)

    write_batch = batch_writer(output, uri, threshold, alerts_exchange, result)

    listener = _progress_listener()
    spark.streams.addListener(listener)
    writer = (windows.writeStream.queryName("flight_delays").outputMode("append")
              .foreachBatch(write_batch).option("checkpointLocation", checkpoint))
    if trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{o.interval} seconds")
    started = time.monotonic()
    query = writer.start()
    try:
        if on_started is not None:
            on_started(query)
        if trigger == "available-now":
            query.awaitTermination()
        else:
            stop = _stop_on_signals()
            while query.isActive and not stop.is_set():
                query.awaitTermination(1.0)
                if (stop_after_flights is not None
                        and flights_written(spark, output) >= stop_after_flights):
                    break
                if stop_when is not None and stop_when():
                    break
            if stop.is_set():
                log.info("interrupted: stopping the query after the running micro-batch "
                         "(messages not yet acknowledged go back to the queue)")
            # let the running batch finish, if it can: the last windows were seen in the
            # parquet output while that batch still publishes their alerts
            deadline = time.monotonic() + 120
            while (query.isActive and query.status.get("isTriggerActive")
                   and time.monotonic() < deadline):
                time.sleep(0.02)
    finally:
        if query.isActive:
            query.stop()
        listener.terminated.wait(30)
        spark.streams.removeListener(listener)
    result.seconds = time.monotonic() - started
    seen = {}
    for p in query.recentProgress:
        seen[p.batchId] = p.numInputRows
    result.consumed = sum(seen.values())
    result.batches = len(seen)
    result.progress = [query.recentProgress[i].json for i in range(len(query.recentProgress))]
    if query.exception() is not None:
        raise query.exception()
    return result


def _stop_on_signals():
    """A ``threading.Event`` set by SIGINT/SIGTERM (instead of a KeyboardInterrupt that could
    land inside a py4j call), so the query is stopped cleanly between calls."""
    import signal
    import threading

    stop = threading.Event()

    def handler(signum, frame):
        if stop.is_set():  # a second Ctrl-C: give up
            raise KeyboardInterrupt
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return stop


def flights_written(spark, output: str) -> int:
    """Flights in the result windows written so far under ``output`` (0 before the first
    batch's parquet is committed)."""
    from pyspark.errors import AnalysisException

    path = Path(output) / "windows"
    if not path.is_dir():
        return 0
    try:
        return int(spark.read.parquet(str(path)).groupBy().sum("flights").first()[0] or 0)
    except AnalysisException:  # no parquet file committed yet (the first batch's write)
        return 0


def read_results(spark, output: str):
    """The job's result windows (all batches) as a DataFrame with :data:`RESULT_COLUMNS`."""
    return spark.read.parquet(str(Path(output) / "windows")).select(*RESULT_COLUMNS)


def write_json_result(path: str | None, result: JobResult) -> None:
    """Write ``result`` as JSON to ``path`` (if given): the progress list replaced by
    ``batch_seconds``, each micro-batch's ``triggerExecution`` in seconds."""
    if path:
        d = dict(result.__dict__)
        d["batch_seconds"] = [json.loads(p)["durationMs"].get("triggerExecution", 0) / 1e3
                              for p in d.pop("progress")]
        Path(path).write_text(json.dumps(d))


def unread_offsets(result: "JobResult") -> int:
    """Stream mode: offsets between the query's last end offsets and the partitions' tails it
    last saw (``latestOffset``, the source's ``reportLatestOffset``), summed; 0 when the query
    read everything there was. From the last progress event of ``result``."""
    for raw in reversed(result.progress):
        src = (json.loads(raw).get("sources") or [{}])[0]
        end, latest = src.get("endOffset"), src.get("latestOffset")
        if end and latest:
            end = json.loads(end) if isinstance(end, str) else end
            latest = json.loads(latest) if isinstance(latest, str) else latest
            ends = end.get("streams", {})
            return sum(max(0, t - ends.get(s, 0)) for s, t in latest.get("streams", {}).items())
    return 0
