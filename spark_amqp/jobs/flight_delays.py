"""Flight delays per origin airport and carrier, per hour of event time, from an AMQP queue.

The main job of spark-amqp. It reads the flights published by ``jobs/publish_flights.py``
(or ``spark-amqp publish --flights``) from a queue with ``spark.readStream.format("amqp")``,
parses each body with an explicit schema (``from_json``) and computes, per ``origin``,
``carrier`` and 1-hour event-time window of ``sched_dep`` (scheduled departure, UTC):

- ``flights``: number of flights; ``cancelled``: flights with no ``dep_time``;
- ``mean_dep_delay`` and ``p90_dep_delay`` (``percentile_approx(dep_delay, 0.9)``) in
  minutes over the flights that departed.

Every micro-batch (``foreachBatch``) writes its closed windows to parquet under
``OUTPUT/windows/batch_id=<n>/`` (overwritten if Spark replays the batch, so the output is
idempotent) and publishes one JSON alert per window whose mean delay exceeds ``--threshold``
minutes to the ``alerts`` topic exchange with routing key ``delay.<origin>.<carrier>``, with
the ``amqp`` sink (message id ``delay-<origin>-<carrier>-<yyyyMMddTHHmm>``, so the
duplicates of a replayed batch can be dropped). Per-batch progress (input rows, rows/s, watermark) is logged from a
``StreamingQueryListener``.

Event time, the watermark and complete results
----------------------------------------------
The aggregation runs in **append** mode with ``withWatermark("sched_dep", --watermark)``:
a window is emitted exactly once, when the watermark (max event time seen - delay) passes
its end, with its final counts. That is what makes the parquet output and the alerts right
(no alert for a half-filled window, no retraction needed). Flights arrive in event-time order
within the queue, so a small delay suffices; later flights are dropped as late data.

On an unbounded stream the last windows close when newer flights arrive. The flights data
set is bounded: after the last flight, ``flights.end-of-stream`` (an end-of-stream marker
with an event time one day after the last flight) moves the watermark past every window, and
Spark's no-data micro-batch (``spark.sql.streaming.noDataMicroBatches.enabled``, default true,
also run under ``Trigger.AvailableNow``) emits them. The marker is kept in the aggregation
input on purpose - filtering it out before the aggregate would let Spark push the filter below
the watermark operator, so the watermark would never see it - and dropped from the output (its
group has no origin). Without a marker (e.g. a live feed) the last ``--watermark`` of windows
stays open, as in any append-mode streaming aggregation.

(Update mode would show the last windows without a marker, but emits every window many times
with partial values: fine for dashboards, wrong for alerts. Complete mode rewrites all ~100k
windows every batch.)

Run it
------
``python -m spark_amqp.jobs.flight_delays --demo`` from any folder (in a checkout also
``python jobs/flight_delays.py --demo``, what ``make demo`` runs): starts the embedded broker,
declares the topology, publishes the flights, runs the job with ``Trigger.AvailableNow`` until
every message is consumed, prints a summary and exits 0 if messages published = consumed =
flights in the windows. ``--uri amqp://...`` uses any RabbitMQ instead; ``--limit N`` sends
fewer flights. Without ``--demo`` it only runs the job against an existing queue (e.g. with
``spark-submit --properties-file conf/spark-defaults.conf jobs/flight_delays.py --uri ...``),
until the queue is drained (``--trigger available-now``, default) or forever
(``--trigger continuous``: a processing-time trigger of ``--interval`` seconds). In every
mode the alerts exchange and the ``--alerts-queue`` bound to it with ``delay.#`` are declared
first (never purged outside ``--demo``), so the alerts wait in that queue instead of being
dropped by an exchange with nothing bound; ``--alerts-queue ''`` declares no queue.

Stream mode (``--stream``)
--------------------------
The flights come from super stream ``--super-stream`` (partitions ``NAME-0 … NAME-2``, RabbitMQ
stream queues) instead of a queue, read by the source in stream mode (``superStream``,
``startingOffsets=earliest``: the executors read offset ranges; a restart resumes from the
checkpoint and replays the same rows). With ``--demo`` the super stream is (re)created with
``--partitions`` partitions and the flights are written to it by the ``amqp`` sink
(``superStream``: each flight goes to the partition RabbitMQ's stream clients pick for its
routing key ``flights.<origin>.<carrier>``, so one origin/carrier's flights stay in order in
one partition). The aggregates are the same as in the queue mode.

The watermark is global (the maximum event time over all partitions), and
``maxMessagesPerTrigger`` is split evenly over the partitions, so with a cap one partition can
run ahead in event time of another whose flights then arrive behind the watermark and are
dropped as late. So ``--stream`` reads up to the partitions' tails in each micro-batch by
default (``--max-per-trigger 0``); with a cap, raise ``--watermark`` accordingly.

Wherever it runs, the job applies its Spark SQL settings (:data:`JOB_SQL_CONF`: 2 shuffle
partitions, UTC, ...) unless the Spark conf already sets them; CHANGELOG.md's "The main job's
speed" gives the evidence for each (docs/performance.md has the current figures).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

#: The package's default configuration files (``spark-amqp conf`` writes copies to edit).
CONF_DIR = Path(__file__).resolve().parent.parent / "conf"  # = spark_amqp.cli.conf.default_conf_dir()

log = logging.getLogger("flight_delays")

DEFAULT_QUEUE = "flight-delays"
DEFAULT_SUPER_STREAM = "flight-delays-stream"
DEFAULT_PARTITIONS = 3
#: --max-per-trigger default of the queue mode (the stream mode's is 0 = no cap)
DEFAULT_MAX_PER_TRIGGER = 50_000
DEFAULT_ALERTS_QUEUE = "flight-delay-alerts"
#: --live defaults: the publisher's msg/s, the trigger interval (s), and the stream mode's
#: watermark. A trigger probes the partitions' tails one after the other, so one partition's
#: batch can end later in the publishing than another's (by the probes' time, up to ~0.1 s);
#: at 2,000 msg/s (~2 days of flights per second of publishing) 10 ms are ~30 minutes of
#: event time, and the next batch's flights of the partition behind would fall behind a
#: 30-minute watermark and be dropped as late. 12 hours covers ~0.2 s at 2,000 msg/s and stays
#: below the end-of-stream marker's day minus the last 1-hour window.
LIVE_RATE = 2000.0
LIVE_INTERVAL = 0.5
LIVE_STREAM_WATERMARK = "12 hours"
FLIGHTS_EXCHANGE = "flights"
ALERTS_EXCHANGE = "alerts"

#: The JSON of one flight message (see spark_amqp.cli.flights); ``event`` is set only on the
#: end-of-stream marker. Explicit, so malformed fields become null instead of changing types.
FLIGHT_SCHEMA_DDL = (
    "year INT, month INT, day INT, dep_time INT, sched_dep_time INT, dep_delay DOUBLE, "
    "arr_time INT, sched_arr_time INT, arr_delay DOUBLE, carrier STRING, flight INT, "
    "tailnum STRING, origin STRING, dest STRING, air_time DOUBLE, distance DOUBLE, hour INT, "
    "minute INT, time_hour STRING, sched_dep TIMESTAMP, event STRING")

#: The source's columns the query reads, as a user schema: the source then builds and sends
#: Spark only ``body`` instead of its 20 columns (CHANGELOG.md, "The main job's speed").
SOURCE_SCHEMA = "body binary"

#: Columns of the result (parquet and the summary), in order.
RESULT_COLUMNS = ("origin", "carrier", "window_start", "window_end", "flights", "cancelled",
                  "mean_dep_delay", "p90_dep_delay")


# ---------------------------------------------------------------------------------------------
# Spark session
# ---------------------------------------------------------------------------------------------

def read_spark_defaults(path: Path) -> dict[str, str]:
    """Parse a ``spark-defaults.conf`` (``key whitespace value`` lines, ``#`` comments)."""
    conf: dict[str, str] = {}
    if not path.is_file():
        return conf
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        conf[key.strip()] = value.strip()
    return conf


#: The job's Spark SQL settings. :func:`build_spark` applies them to the session (``python``
#: and ``spark-submit`` alike, with or without ``--properties-file``) unless the Spark conf
#: already sets the key (``--conf``, a properties file, ``SparkSession.builder.config``): the
#: user's value wins. A restarted query keeps the shuffle partitions and the state store of its
#: checkpoint (Spark records them in the offset log). Evidence for each value: CHANGELOG.md's
#: "Speed of the main job" (``python -m spark_amqp.bench.job``).
JOB_SQL_CONF: dict[str, str] = {
    # alert bodies format window_start/window_end with a literal 'Z' (date_format uses the
    # session time zone)
    "spark.sql.session.timeZone": "UTC",
    # run_job sums numInputRows over query.recentProgress: keep every batch of a run
    "spark.sql.streaming.numRecentProgressUpdates": "1000",
    # one state store (and one parquet file) per shuffle partition, every batch: the state
    # stores' commit + update time over the 336,776 flights was 2.4 s with 4, 1.4 s with 2
    # (Spark's default, 200, is far slower still); 2 keeps both cores of local[2] busy
    "spark.sql.shuffle.partitions": "2",
}

def apply_job_conf(spark, conf: dict[str, str] | None = None) -> dict[str, str]:
    """Set ``conf`` (default :data:`JOB_SQL_CONF`) on ``spark`` (``spark.conf.set``), except
    the keys that the SparkContext's conf already holds (set by the user at submit or build
    time). Returns the settings applied."""
    conf = JOB_SQL_CONF if conf is None else conf
    given = spark.sparkContext.getConf()
    applied = {k: v for k, v in conf.items() if not given.contains(k)}
    for key, value in applied.items():
        spark.conf.set(key, value)
    return applied


def build_spark(app_name: str = "flight-delays", master: str | None = None):
    """Get or create the SparkSession with the ``amqp`` data source registered and the job's
    settings (:func:`apply_job_conf`).

    Under ``spark-submit`` (a JVM gateway already exists) the submit-time configuration is
    used as is. Under plain ``python``, the package's ``conf/spark-defaults.conf`` is applied
    and its ``conf/log4j2.properties`` keeps Spark's logs to warnings (:data:`CONF_DIR`).
    Either way :data:`JOB_SQL_CONF` then fills in the keys that configuration left unset.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_amqp

    builder = SparkSession.builder.appName(app_name)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # plain python, not spark-submit
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        conf = read_spark_defaults(CONF_DIR / "spark-defaults.conf")
        log4j = f"-Dlog4j.configurationFile=file:{CONF_DIR / 'log4j2.properties'}"
        conf["spark.driver.extraJavaOptions"] = log4j
        conf["spark.executor.extraJavaOptions"] = log4j
        for key, value in conf.items():
            builder = builder.config(key, value)
        if master:
            builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    apply_job_conf(spark)
    spark_amqp.register(spark)
    return spark


# ---------------------------------------------------------------------------------------------
# The query
# ---------------------------------------------------------------------------------------------

def window_aggregates(messages, watermark: str = "30 minutes"):
    """Streaming (or batch) DataFrame of per origin/carrier/hour aggregates from ``messages``.

    ``messages``: rows of the ``amqp`` source (a ``body`` binary column of flight JSON).
    Returns the columns of :data:`RESULT_COLUMNS` (the marker's group has ``origin`` null;
    :func:`result_rows` drops it).
    """
    from pyspark.sql import functions as F

    flights = (messages
               .select(F.from_json(F.col("body").cast("string"), FLIGHT_SCHEMA_DDL,
                                   {"mode": "PERMISSIVE"}).alias("f"))
               .select("f.*")
               .where(F.col("sched_dep").isNotNull())
               .withWatermark("sched_dep", watermark))
    return (flights
            .groupBy("origin", "carrier", F.window("sched_dep", "1 hour"))
            .agg(F.count(F.lit(1)).alias("flights"),
                 F.count(F.when(F.col("dep_time").isNull(), 1)).alias("cancelled"),
                 F.avg("dep_delay").alias("mean_dep_delay"),
                 F.percentile_approx("dep_delay", 0.9).cast("double").alias("p90_dep_delay"))
            .select("origin", "carrier", F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "flights", "cancelled",
                    "mean_dep_delay", "p90_dep_delay"))


def result_rows(df):
    """Drop the end-of-stream marker's group (no origin) from an aggregate DataFrame."""
    from pyspark.sql import functions as F

    return df.where(F.col("origin").isNotNull() & F.col("carrier").isNotNull())


def alert_messages(windows, threshold: float):
    """Rows for the ``amqp`` sink: one JSON alert per window with mean delay > ``threshold``.

    Columns ``routing_key`` (``delay.<origin>.<carrier>``), ``body`` (JSON string),
    ``content_type``, ``type`` (``delay-alert``) and ``message_id``
    (``delay-<origin>-<carrier>-<window start>``): one id per window, so a consumer can drop
    the duplicates a replayed micro-batch publishes (the sink is at-least-once).
    """
    from pyspark.sql import functions as F

    return (windows.where(F.col("mean_dep_delay") > F.lit(threshold))
            .select(F.concat(F.lit("delay."), "origin", F.lit("."), "carrier").alias("routing_key"),
                    F.to_json(F.struct(
                        "origin", "carrier",
                        F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
                        F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
                        "flights", "cancelled",
                        F.round("mean_dep_delay", 1).alias("mean_dep_delay"),
                        "p90_dep_delay", F.lit(threshold).alias("threshold"))).alias("body"),
                    F.lit("application/json").alias("content_type"),
                    F.lit("delay-alert").alias("type"),
                    F.concat_ws("-", F.lit("delay"), "origin", "carrier",
                                F.date_format("window_start", "yyyyMMdd'T'HHmm")).alias("message_id")))


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


def run_job(spark, uri: str, queue: str = DEFAULT_QUEUE, output: str = "out/flight_delays",
            checkpoint: str | None = None, threshold: float = 60.0,
            alerts_exchange: str = ALERTS_EXCHANGE, watermark: str = "30 minutes",
            trigger: str = "available-now", interval: float = 5.0,
            max_per_trigger: int | None = DEFAULT_MAX_PER_TRIGGER, idle_timeout: float = 5.0,
            stop_after_flights: int | None = None,
            super_stream: str | None = None, stop_when=None, on_started=None) -> JobResult:
    """Run the streaming query (see the module docstring) and return a :class:`JobResult`.

    ``trigger``: ``available-now`` (process what the queue holds, then stop) or ``continuous``
    (a processing-time trigger every ``interval`` seconds, until interrupted, or until the
    windows hold ``stop_after_flights`` flights). ``max_per_trigger`` caps rows per
    micro-batch (the source's ``maxMessagesPerTrigger``). ``checkpoint`` defaults to
    ``OUTPUT/_checkpoint``. ``super_stream``: read that super stream in stream mode
    (``startingOffsets=earliest``) instead of ``queue``. ``continuous`` also stops when
    ``stop_when()`` (checked every second) returns True. ``on_started(query)`` is called
    once the query has started (the ``--live`` demo starts its publisher there). Raises
    ``pyspark.errors.StreamingQueryException`` if the query fails.
    """
    output = str(Path(output).resolve())
    checkpoint = checkpoint or str(Path(output) / "_checkpoint")
    result = JobResult(output=output)

    reader = spark.readStream.format("amqp").schema(SOURCE_SCHEMA).option("uri", uri)
    if super_stream is not None:
        reader = reader.option("superStream", super_stream).option("startingOffsets", "earliest")
    else:
        reader = (reader.option("queue", queue)
                  .option("availableNowIdleTimeout", str(idle_timeout)))
    if max_per_trigger:
        reader = reader.option("maxMessagesPerTrigger", str(max_per_trigger))
    windows = window_aggregates(reader.load(), watermark)

    write_batch = batch_writer(output, uri, threshold, alerts_exchange, result)

    listener = _progress_listener()
    spark.streams.addListener(listener)
    writer = (windows.writeStream.queryName("flight_delays").outputMode("append")
              .foreachBatch(write_batch).option("checkpointLocation", checkpoint))
    if trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{interval} seconds")
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
                        and _flights_written(spark, output) >= stop_after_flights):
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


def _flights_written(spark, output: str) -> int:
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


# ---------------------------------------------------------------------------------------------
# Demo: broker + topology + publisher + job + summary
# ---------------------------------------------------------------------------------------------

def declare_topology(uri: str, queue: str, alerts_queue: str, purge: bool,
                     flights_exchange: str = FLIGHTS_EXCHANGE,
                     alerts_exchange: str = ALERTS_EXCHANGE) -> None:
    """Declare the flights and alerts topic exchanges and the two queues bound to them.

    ``flights.#`` → ``queue``; ``delay.#`` → ``alerts_queue``. With ``purge`` the queues are
    emptied first (a demo run starts from scratch).
    """
    from spark_amqp.client import connect

    with connect(uri) as conn:
        ch = conn.channel()
        ch.exchange_declare(flights_exchange, exchange_type="topic", durable=True)
        ch.exchange_declare(alerts_exchange, exchange_type="topic", durable=True)
        for q, ex, key in ((queue, flights_exchange, "flights.#"),
                           (alerts_queue, alerts_exchange, "delay.#")):
            ch.queue_declare(q, durable=True)
            ch.queue_bind(q, ex, routing_key=key)
            if purge:
                ch.queue_purge(q)


def declare_alerts(uri: str, alerts_queue: str, alerts_exchange: str = ALERTS_EXCHANGE,
                   purge: bool = False) -> None:
    """Declare the alerts topic exchange and, unless ``alerts_queue`` is ``""``, that durable
    queue bound to it with ``delay.#`` (emptied only with ``purge``). Idempotent; run by every
    mode, so the job's alerts are never published to an exchange with nothing bound (RabbitMQ
    drops such messages: "Publishers", unroutable messages)."""
    from spark_amqp.client import connect

    with connect(uri) as conn:
        ch = conn.channel()
        ch.exchange_declare(alerts_exchange, exchange_type="topic", durable=True)
        if alerts_queue:
            ch.queue_declare(alerts_queue, durable=True)
            ch.queue_bind(alerts_queue, alerts_exchange, routing_key="delay.#")
            if purge:
                ch.queue_purge(alerts_queue)


def declare_super_stream_fresh(uri: str, name: str, partitions: int = DEFAULT_PARTITIONS) -> list[str]:
    """Delete super stream ``name`` (its exchange and every partition stream ``NAME-i`` that
    exists, so the source finds no stale partition) and declare it anew with ``partitions``
    partitions (:func:`spark_amqp.client.streams.declare_super_stream`, the topology of
    ``rabbitmq-streams add_super_stream``). Returns the partition names. A ``--demo`` starts
    from scratch: a stream cannot be purged. Raises the broker's errors (e.g. 406 when the
    broker has no stream queues)."""
    from spark_amqp.client import connect
    from spark_amqp.client.streams import declare_super_stream
    from spark_amqp.protocol.errors import NotFound

    with connect(uri) as conn:
        i = 0
        while True:
            ch = conn.channel()  # a 404 closes the channel: one per passive declare
            try:
                ch.queue_declare(f"{name}-{i}", passive=True)
            except NotFound:
                break
            ch.queue_delete(f"{name}-{i}")
            ch.close()
            i += 1
        ch = conn.channel()
        ch.exchange_delete(name)
        return declare_super_stream(ch, name, partitions)


def publish_flights_to_super_stream(spark, uri: str, name: str, limit: int | None = None,
                                    end_of_stream: bool = True) -> tuple[int, int]:
    """Write the flights (the first ``limit`` in event-time order) and the end-of-stream
    marker to super stream ``name`` with the ``amqp`` sink (option ``superStream``: each
    message goes to the partition RabbitMQ's stream clients pick for its routing key
    ``flights.<origin>.<carrier>``). The same bodies and properties as
    ``spark-amqp publish --flights`` (:mod:`spark_amqp.cli.flights`). One write task, so the
    flights reach each partition in event-time order. Returns ``(messages, flights)``; raises
    the sink's errors (e.g. ``AmqpSinkError``) if not every message was confirmed."""
    from spark_amqp.cli.flights import end_marker, flight_messages, load_flights

    df = load_flights(limit)
    messages = list(flight_messages(df))
    if end_of_stream:
        messages.append(end_marker(df))
    rows = [(m.body, m.routing_key, m.message_id, m.timestamp, m.type, "application/json")
            for m in messages]
    sdf = spark.createDataFrame(rows, "body binary, routing_key string, message_id string, "
                                      "timestamp bigint, type string, content_type string")
    (sdf.coalesce(1).write.format("amqp").option("uri", uri).option("superStream", name)
     .mode("append").save())
    return len(rows), len(df)


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


def queue_depth(uri: str, queue: str) -> int:
    """Messages ready in ``queue`` (passive ``queue.declare``'s message-count)."""
    from spark_amqp.client import connect

    with connect(uri) as conn:
        return conn.channel().queue_declare(queue, passive=True).message_count


def print_summary(spark, result: JobResult, published: int, flights: int, alerts_depth: int,
                  left_in_queue: int, threshold: float, alerts_exchange: str = ALERTS_EXCHANGE,
                  alerts_queue: str = DEFAULT_ALERTS_QUEUE, out=sys.stdout,
                  left_label: str = "messages left in the queue", output_note: str = "") -> bool:
    """Print totals, the worst windows and the consistency checks; True if all checks hold.
    ``output_note`` follows the results folder (e.g. that a temporary one is removed at exit)."""
    from pyspark.sql import functions as F

    res = read_results(spark, result.output)
    tot = res.agg(F.count(F.lit(1)).alias("windows"), F.sum("flights").alias("flights"),
                  F.sum("cancelled").alias("cancelled"),
                  (F.sum(F.col("mean_dep_delay") * (F.col("flights") - F.col("cancelled")))
                   / F.sum(F.col("flights") - F.col("cancelled"))).alias("mean")).first()
    in_windows = int(tot["flights"] or 0)
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p()
    p("=" * 78)
    p(f"flight delays: {in_windows:,} flights in {tot['windows']:,} windows "
      f"(origin x carrier x hour), {int(tot['cancelled'] or 0):,} cancelled, "
      f"mean departure delay {tot['mean'] or 0:.1f} min")
    p(f"job: {result.batches} micro-batches, {result.consumed:,} messages in "
      f"{result.seconds:.1f} s ({result.consumed / max(result.seconds, 1e-9):,.0f} msg/s); "
      f"results in {result.output}/windows{output_note}")
    p(f"alerts (mean delay > {threshold:g} min): {result.alerts:,} published to exchange "
      f"'{alerts_exchange}', {alerts_depth:,} waiting in queue '{alerts_queue}'")
    p()
    p("worst windows (at least 5 flights):")
    worst = (res.where(F.col("flights") >= 5).orderBy(F.desc("mean_dep_delay")).limit(10)
             .toPandas())
    if len(worst):
        worst["window_start"] = worst["window_start"].dt.strftime("%Y-%m-%d %H:%M")
        worst = worst.drop(columns=["window_end"]).rename(
            columns={"window_start": "hour (UTC)", "mean_dep_delay": "mean delay",
                     "p90_dep_delay": "p90 delay"})
        p(worst.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    p()
    checks = [
        (f"messages published = consumed: {published:,} = {result.consumed:,}",
         published == result.consumed),
        (f"flights published = flights in the windows: {flights:,} = {in_windows:,}",
         flights == in_windows),
        (f"{left_label}: {left_in_queue:,}", left_in_queue == 0),
    ]
    for text, ok in checks:
        p(f"  [{'ok' if ok else 'FAIL'}] {text}")
    p("=" * 78)
    return all(ok for _, ok in checks)


class LivePublisher:
    """The ``--live`` demo's publisher: a thread that publishes the flights of ``df`` (as
    :func:`spark_amqp.cli.flights.load_flights` returns them) and the end-of-stream marker at
    ``rate`` msg/s under publisher confirms (:func:`spark_amqp.cli.publishing.publish_messages`
    with ``rate``), while the query runs. To ``exchange`` (the queue mode's topic exchange,
    routing keys ``flights.<origin>.<carrier>``) or, with ``super_stream``, to that super
    stream's exchange with the binding key of the partition RabbitMQ's stream clients pick for
    the flight's routing key (:func:`spark_amqp.client.streams.partition_for`, as the sink's
    ``superStream`` option does). ``start()`` starts it; then ``started_at``/``ended_at``
    (wall-clock seconds), ``stats`` (``PublishStats``) or ``error`` (the exception) tell what
    it did."""

    def __init__(self, uri: str, df, rate: float, exchange: str = FLIGHTS_EXCHANGE,
                 super_stream: str | None = None, partitions: int = DEFAULT_PARTITIONS):
        import threading

        self.uri, self.df, self.rate = uri, df, rate
        self.exchange, self.super_stream, self.partitions = exchange, super_stream, partitions
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.stats = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="flights-live-publisher",
                                        daemon=True)

    def start(self, query=None) -> None:
        """Start the thread (:func:`run_job`'s ``on_started`` hook). With ``query`` (a
        ``StreamingQuery``), it publishes once the query's first trigger has run (status
        "Waiting for data to arrive": the source is connected), so that the publishing and the
        micro-batches overlap however long Spark takes to start the query."""
        self._query = query
        self._thread.start()

    def _wait_for_query(self, timeout: float = 300.0) -> None:
        q = getattr(self, "_query", None)
        deadline = time.monotonic() + timeout
        while q is not None and time.monotonic() < deadline:
            if not q.isActive or q.status.get("message") == "Waiting for data to arrive":
                return
            time.sleep(0.05)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        import dataclasses
        import itertools

        from spark_amqp.cli.flights import end_marker, flight_messages
        from spark_amqp.cli.publishing import publish_messages
        from spark_amqp.client import connect
        from spark_amqp.client.streams import partition_for

        try:
            messages = itertools.chain(flight_messages(self.df), [end_marker(self.df)])
            exchange = self.exchange
            if self.super_stream is not None:
                exchange = self.super_stream
                messages = (dataclasses.replace(
                    m, routing_key=str(partition_for(m.routing_key, self.partitions)))
                    for m in messages)
            with connect(self.uri) as conn:
                ch = conn.channel()
                self._wait_for_query()
                self.started_at = time.time()
                log.info("live: publishing %s flights + end-of-stream marker at %s msg/s while "
                         "the query runs", f"{len(self.df):,}", f"{self.rate:,.0f}")
                self.stats = publish_messages(ch, messages, exchange, total=len(self.df) + 1,
                                              progress=False, rate=self.rate)
            log.info("live: published %s messages in %.1f s (%s msg/s)",
                     f"{self.stats.confirmed:,}", self.stats.seconds, f"{self.stats.rate:,.0f}")
        except BaseException as e:  # noqa: BLE001 - the demo reports it and fails
            log.error("live: the publisher failed: %r", e)
            self.error = e
        finally:
            self.ended_at = time.time()


def live_figures(result: "JobResult", publisher: LivePublisher) -> dict:
    """What shows the query ran on live data: the publisher's rate asked and achieved,
    its seconds, and the micro-batches with rows whose trigger began while it was publishing
    (``batches_while_publishing``; the first one's start, seconds after the publisher's
    start: ``first_rows_after``). From ``result.progress`` (each progress event's
    ``timestamp``, the trigger's start)."""
    import datetime as dt

    with_rows = []
    for raw in result.progress:
        p = json.loads(raw)
        if p.get("numInputRows"):
            t = dt.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
            with_rows.append(t)
    start, end = publisher.started_at or 0.0, publisher.ended_at or 0.0
    during = [t for t in with_rows if t < end]
    stats = publisher.stats
    return {"rate": publisher.rate, "published_rate": stats.rate if stats else 0.0,
            "publish_seconds": end - start, "batches_with_rows": len(with_rows),
            "batches_while_publishing": len(during),
            "first_rows_after": (min(with_rows) - start) if with_rows else None}


def live_demo(args, uri: str, output: str, spark_future) -> tuple[int, object]:
    """``--demo --live``: the topology (queue mode) or a fresh super stream (``--stream``),
    then the query (a processing-time trigger of ``--interval`` seconds) and, once it has
    started, a :class:`LivePublisher` at ``--rate`` msg/s. The query stops when every flight
    is in the windows (the end-of-stream marker closes the last ones), when the publisher
    fails, or ``--live-timeout`` seconds after the publisher ends. Prints the summary with
    the same checks as the demo (published = consumed = aggregated, nothing left) and the
    live figures (:func:`live_figures`). Returns ``(exit status, spark)``."""
    from spark_amqp.cli.flights import load_flights

    if args.stream:
        declare_alerts(uri, args.alerts_queue, args.alerts_exchange, purge=True)
        parts = declare_super_stream_fresh(uri, args.super_stream, args.partitions)
        log.info("live: super stream %r (%s)", args.super_stream, ", ".join(parts))
    else:
        declare_topology(uri, args.queue, args.alerts_queue, purge=True,
                         flights_exchange=args.exchange, alerts_exchange=args.alerts_exchange)
    df = load_flights(args.limit)
    flights = len(df)
    publisher = LivePublisher(uri, df, args.rate, exchange=args.exchange,
                              super_stream=args.super_stream if args.stream else None,
                              partitions=args.partitions)
    spark = spark_future.result()

    def stop_when() -> bool:
        if publisher.error is not None:
            return True
        if publisher.ended_at is None:
            return False
        if time.time() - publisher.ended_at > args.live_timeout:
            log.error("live: the windows do not hold every flight %.0f s after the publisher "
                      "ended (--live-timeout): stopping", args.live_timeout)
            return True
        return _flights_written(spark, output) >= flights

    result = run_job(spark, uri, args.queue, output, None, args.threshold,
                     args.alerts_exchange, args.watermark, "continuous", args.interval,
                     args.max_per_trigger, args.idle_timeout,
                     super_stream=args.super_stream if args.stream else None,
                     stop_when=stop_when, on_started=publisher.start)
    publisher.join(60)
    if publisher.error is not None:
        raise publisher.error
    if publisher.stats is None:
        raise RuntimeError("live: the publisher did not finish")
    if publisher.stats.returned:
        log.error("%d messages were unroutable", publisher.stats.returned)
        return 1, spark
    result.live = live_figures(result, publisher)
    write_json_result(args.json_result, result)
    if args.stream:
        left, label = unread_offsets(result), "offsets left unread in the super stream"
    else:
        left, label = queue_depth(uri, args.queue), "messages left in the queue"
    ok = print_summary(spark, result, publisher.stats.routed, flights,
                       queue_depth(uri, args.alerts_queue), left, args.threshold,
                       args.alerts_exchange, args.alerts_queue, left_label=label)
    lv = result.live
    first = lv["first_rows_after"]
    print(f"live: published at {lv['published_rate']:,.0f} msg/s ({lv['rate']:,.0f} asked) "
          f"for {lv['publish_seconds']:.1f} s while the query ran: "
          f"{lv['batches_while_publishing']} of {lv['batches_with_rows']} micro-batches with "
          f"rows began meanwhile (the first {first if first is None else f'{first:.1f} s'} "
          "after the publisher's start)")
    return (0 if ok else 1), spark


def demo(args) -> int:
    """Broker (embedded unless ``--uri``) → topology → publish → job → summary. Exit status."""
    from spark_amqp.cli.publish import run_flights_publish
    from spark_amqp.client import connect

    broker = None
    spark = None
    uri = args.uri
    if uri is None:
        from spark_amqp import EmbeddedBroker

        broker = EmbeddedBroker(host="127.0.0.1", port=0)
        broker.start()
        uri = broker.url
        log.info("embedded broker listening at %s", uri)
    tmp = None
    output = args.output
    if output is None:
        tmp = tempfile.mkdtemp(prefix="flight-delays-")
        output = tmp
    else:
        shutil.rmtree(output, ignore_errors=True)  # a demo starts from scratch
    # Spark starts (JVM, SparkContext: several seconds) while the flights are published
    from concurrent.futures import ThreadPoolExecutor

    starter = ThreadPoolExecutor(1, thread_name_prefix="spark-start")
    spark_future = starter.submit(build_spark, master=args.master)
    starter.shutdown(wait=False)
    try:
        if args.live:
            status, spark = live_demo(args, uri, output, spark_future)
            return status
        if args.stream:
            declare_alerts(uri, args.alerts_queue, args.alerts_exchange, purge=True)
            parts = declare_super_stream_fresh(uri, args.super_stream, args.partitions)
            spark = spark_future.result()
            started = time.monotonic()
            published, flights = publish_flights_to_super_stream(spark, uri, args.super_stream,
                                                                 args.limit)
            took = time.monotonic() - started
            log.info("published %s flights + end-of-stream marker to super stream %r (%s) "
                     "with the amqp sink in %.1f s (%s msg/s)", f"{flights:,}",
                     args.super_stream, ", ".join(parts), took, f"{published / took:,.0f}")
        else:
            declare_topology(uri, args.queue, args.alerts_queue, purge=True,
                             flights_exchange=args.exchange, alerts_exchange=args.alerts_exchange)
            with connect(uri) as conn:
                stats, flights = run_flights_publish(conn.channel(), args.exchange, args.limit,
                                                     end_of_stream=True,
                                                     progress=not args.no_progress)
            log.info("published %s flights + end-of-stream marker in %.1f s (%s msg/s), "
                     "%d unroutable", f"{flights:,}", stats.seconds, f"{stats.rate:,.0f}",
                     stats.returned)
            if stats.returned:
                log.error("%d messages were unroutable", stats.returned)
                return 1
            published = stats.routed
            spark = spark_future.result()
        result = run_job(spark, uri, args.queue, output, None, args.threshold,
                         args.alerts_exchange, args.watermark, "available-now", args.interval,
                         args.max_per_trigger, args.idle_timeout,
                         super_stream=args.super_stream if args.stream else None)
        write_json_result(args.json_result, result)
        if args.stream:
            left, label = unread_offsets(result), "offsets left unread in the super stream"
        else:
            left, label = queue_depth(uri, args.queue), "messages left in the queue"
        ok = print_summary(spark, result, published, flights,
                           queue_depth(uri, args.alerts_queue), left,
                           args.threshold, args.alerts_exchange, args.alerts_queue,
                           left_label=label,
                           output_note=" (a temporary folder, removed at exit: --keep-output "
                                       "keeps it)" if tmp is not None and not args.keep_output else "")
        return 0 if ok else 1
    finally:
        if spark is None and spark_future.exception() is None:  # waits for the start-up
            spark = spark_future.result()
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()
        if tmp is not None and not args.keep_output:
            shutil.rmtree(tmp, ignore_errors=True)


def write_json_result(path: str | None, result: JobResult) -> None:
    """Write ``result`` as JSON to ``path`` (if given): the progress list replaced by
    ``batch_seconds``, each micro-batch's ``triggerExecution`` in seconds."""
    if path:
        d = dict(result.__dict__)
        d["batch_seconds"] = [json.loads(p)["durationMs"].get("triggerExecution", 0) / 1e3
                              for p in d.pop("progress")]
        Path(path).write_text(json.dumps(d))


def _amqp_uri(text: str) -> str:
    """argparse type of ``--uri``: a parsable AMQP URI (each entry of a host list checked)."""
    from spark_amqp.client.uri import parse_uri, redact_uri

    try:
        parse_uri(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(redact_uri(str(exc))) from None
    return text


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m spark_amqp.jobs.flight_delays",
        description="Per origin/carrier/hour flight delays from an AMQP queue with Spark "
                    "(see the module docstring).")
    p.add_argument("--demo", action="store_true",
                   help="start the embedded broker (unless --uri), publish the flights, run the "
                        "job until drained, print a summary")
    p.add_argument("--uri", default=None, type=_amqp_uri,
                   help="AMQP URI of the broker (default: embedded broker with --demo, else "
                        "$SPARK_AMQP_URI or amqp://guest:guest@127.0.0.1:5672/%%2F); the "
                        "nodes of a RabbitMQ cluster as a host list: "
                        "amqp://u:p@h1:5672,h2:5672,h3:5672/%%2F")
    p.add_argument("--queue", default=DEFAULT_QUEUE, help="queue of flight messages [%(default)s]")
    p.add_argument("--stream", action="store_true",
                   help="read the flights from super stream --super-stream in stream mode "
                        "instead of --queue (with --demo: created with --partitions partitions "
                        "and filled by the amqp sink)")
    p.add_argument("--super-stream", default=DEFAULT_SUPER_STREAM,
                   help="--stream: the super stream of flight messages [%(default)s]")
    p.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS,
                   help="--stream --demo: partitions of the super stream [%(default)s]")
    p.add_argument("--exchange", default=FLIGHTS_EXCHANGE,
                   help="--demo: topic exchange the flights are published to [%(default)s]")
    p.add_argument("--alerts-exchange", default=ALERTS_EXCHANGE,
                   help="topic exchange for the delay alerts [%(default)s]")
    p.add_argument("--alerts-queue", default=DEFAULT_ALERTS_QUEUE,
                   help="queue declared and bound to the alerts exchange with delay.# "
                        "('' = none) [%(default)s]")
    p.add_argument("--limit", type=int, default=None,
                   help="--demo: publish only the first N flights in event-time order")
    p.add_argument("--output", default=None,
                   help="output directory (parquet under OUTPUT/windows, checkpoint under "
                        "OUTPUT/_checkpoint) [--demo: a temporary directory; else out/flight_delays]")
    p.add_argument("--checkpoint", default=None, help="checkpoint location [OUTPUT/_checkpoint]")
    p.add_argument("--threshold", type=float, default=60.0,
                   help="alert when a window's mean departure delay exceeds this many minutes "
                        "[%(default)s]")
    p.add_argument("--watermark", default=None,
                   help="watermark delay on sched_dep [30 minutes; --live --stream: "
                        f"{LIVE_STREAM_WATERMARK}]")
    p.add_argument("--trigger", choices=("available-now", "continuous"), default="available-now",
                   help="available-now: drain the queue then stop; continuous: run until Ctrl-C")
    p.add_argument("--interval", type=float, default=None,
                   help="seconds between micro-batches with --trigger continuous [5] and "
                        f"--live [{LIVE_INTERVAL:g}]")
    p.add_argument("--live", action="store_true",
                   help="--demo: publish the flights at --rate msg/s WHILE the query runs "
                        "(a processing-time trigger of --interval seconds), instead of before "
                        "it; the query stops once every flight is in the windows")
    p.add_argument("--rate", type=float, default=LIVE_RATE,
                   help="--live: messages per second the publisher sends [%(default)g]")
    p.add_argument("--live-timeout", type=float, default=300.0,
                   help="--live: seconds the query gets after the publisher ends to put every "
                        "flight in the windows [%(default)g]")
    p.add_argument("--max-per-trigger", type=int, default=None,
                   help=f"max messages per micro-batch (0 = no cap) [{DEFAULT_MAX_PER_TRIGGER:,}; "
                        "with --stream 0: a cap is split evenly over the partitions, which "
                        "can put one ahead of the watermark of the others]")
    p.add_argument("--idle-timeout", type=float, default=5.0,
                   help="available-now: seconds to wait for snapshotted messages [%(default)s]")
    p.add_argument("--master", default=None, help="Spark master (plain python only) "
                   "[from the package's conf/spark-defaults.conf: local[2]]")
    p.add_argument("--keep-output", action="store_true",
                   help="--demo: keep the temporary output directory")
    p.add_argument("--no-progress", action="store_true", help="no progress bar while publishing")
    p.add_argument("--json-result", default=None,
                   help="write the JobResult (consumed, batches, alerts, windows, ...) as JSON here")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = p.parse_args(argv)
    if args.partitions < 1:
        p.error(f"--partitions must be >= 1, got {args.partitions}")
    if args.live and not args.demo:
        p.error("--live runs the demo with a live publisher: add --demo")
    if not args.rate > 0:
        p.error(f"--rate must be > 0 msg/s, got {args.rate:g}")
    if args.interval is None:
        args.interval = LIVE_INTERVAL if args.live else 5.0
    if args.watermark is None:
        args.watermark = LIVE_STREAM_WATERMARK if args.live and args.stream else "30 minutes"
    if args.max_per_trigger is None:
        args.max_per_trigger = 0 if args.stream else DEFAULT_MAX_PER_TRIGGER
    elif args.stream and args.max_per_trigger:
        log.warning("--stream with --max-per-trigger %d: the cap is split evenly over the "
                    "partitions; a partition that runs ahead in event time moves the watermark "
                    "past the others' flights, which are then dropped as late (raise "
                    "--watermark, or use --max-per-trigger 0)", args.max_per_trigger)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if not args.verbose:  # the embedded broker logs every connection at INFO
        logging.getLogger("spark_amqp").setLevel(logging.WARNING)
    if args.demo:
        return demo(args)
    uri = args.uri or os.environ.get("SPARK_AMQP_URI", "amqp://guest:guest@127.0.0.1:5672/%2F")
    declare_alerts(uri, args.alerts_queue, args.alerts_exchange)
    spark = build_spark(master=args.master)
    result = run_job(spark, uri, args.queue, args.output or "out/flight_delays", args.checkpoint,
                     args.threshold, args.alerts_exchange, args.watermark, args.trigger,
                     args.interval, args.max_per_trigger, args.idle_timeout,
                     super_stream=args.super_stream if args.stream else None)
    log.info("done: %s messages in %d batches, %s windows, %s alerts, %.1f s",
             f"{result.consumed:,}", result.batches, f"{result.windows:,}",
             f"{result.alerts:,}", result.seconds)
    if args.alerts_queue:
        log.info("alerts: %s published to exchange %r; %s waiting in queue %r "
                 "(spark-amqp consume %s -n 10 --format json)", f"{result.alerts:,}",
                 args.alerts_exchange, f"{queue_depth(uri, args.alerts_queue):,}",
                 args.alerts_queue, args.alerts_queue)
    write_json_result(args.json_result, result)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
