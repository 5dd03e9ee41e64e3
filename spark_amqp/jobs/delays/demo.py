"""``--demo``: the broker (embedded unless ``--uri``), the topology, the flights published
(to the queue's exchange, or to a super stream by the ``amqp`` sink), the job until drained,
and a summary with its consistency checks."""

from __future__ import annotations

import logging
import shutil
import tempfile
import time

from .job import job_options, run_job, unread_offsets, write_json_result
from .live import live_demo
from .session import build_spark
from .summary import print_summary
from .topology import declare_alerts, declare_super_stream_fresh, declare_topology, queue_depth

log = logging.getLogger("flight_delays")


def publish_flights_to_super_stream(spark, uri: str, name: str, limit: int | None = None,
                                    end_of_stream: bool = True) -> tuple[int, int]:
    """Write the flights (the first ``limit`` in event-time order) and the end-of-stream
    marker to super stream ``name`` with the ``amqp`` sink (option ``superStream``: each
    message goes to the partition RabbitMQ's stream clients pick for its routing key
    ``flights.<origin>.<carrier>``). The same bodies and properties as
    ``spark-amqp publish --flights`` (:mod:`spark_amqp.tools.flights`). One write task, so the
    flights reach each partition in event-time order. Returns ``(messages, flights)``; raises
    the sink's errors (e.g. ``AmqpSinkError``) if not every message was confirmed."""
    from spark_amqp.tools.flights import end_marker, flight_messages, load_flights

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


def demo(args) -> int:
    """Broker (embedded unless ``--uri``) → topology → publish → job → summary. Exit status."""
    from spark_amqp.tools.publishing import run_flights_publish
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
        result = run_job(spark, uri, job_options(args, output=output, checkpoint=None,
                                                trigger="available-now",
                                                super_stream=args.super_stream if args.stream
                                                else None))
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
        if getattr(args, "delete_topology", False):
            from .topology import delete_job_topology

            delete_job_topology(uri, args)
        if broker is not None:
            broker.stop()
        if tmp is not None and not args.keep_output:
            shutil.rmtree(tmp, ignore_errors=True)
