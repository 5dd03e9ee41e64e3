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

The modules
-----------
The job is this package; ``python -m spark_amqp.jobs.flight_delays`` (and the checkout's
``jobs/flight_delays.py``, the file ``spark-submit`` runs) is its entry point.

- :mod:`.data`: names, defaults and schemas (the flight JSON, the source's columns, the result);
- :mod:`.session`: the SparkSession (the package's ``conf/``, the job's SQL settings);
- :mod:`.transforms`: the query's DataFrame functions (windows, result rows, alert messages);
- :mod:`.job`: :func:`~.job.run_job` (the streaming query, its ``foreachBatch`` sink,
  progress) with its options (:class:`~.job.JobOptions`) and result (:class:`~.job.JobResult`);
- :mod:`.topology`: the exchanges, queues and super stream the job reads and writes;
- :mod:`.demo`: ``--demo`` (broker, topology, publisher, job, summary);
- :mod:`.live`: ``--demo --live`` (a publisher at a rate while the query runs);
- :mod:`.command`: the command line (click).
"""
