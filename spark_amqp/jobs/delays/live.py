"""``--demo --live``: the flights published at a rate while the query runs (a
processing-time trigger), and the figures that show the query ran on live data."""

from __future__ import annotations

import json
import logging
import time

from .data import DEFAULT_PARTITIONS, FLIGHTS_EXCHANGE
from .job import JobResult, flights_written, job_options, run_job, unread_offsets, write_json_result
from .summary import print_summary
from .topology import declare_alerts, declare_super_stream_fresh, declare_topology, queue_depth

log = logging.getLogger("flight_delays")


class LivePublisher:
    """The ``--live`` demo's publisher: a thread that publishes the flights of ``df`` (as
    :func:`spark_amqp.tools.flights.load_flights` returns them) and the end-of-stream marker at
    ``rate`` msg/s under publisher confirms (:func:`spark_amqp.tools.publishing.publish_messages`
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

        from spark_amqp.tools.flights import end_marker, flight_messages
        from spark_amqp.tools.publishing import publish_messages
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
    from spark_amqp.tools.flights import load_flights

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
        return flights_written(spark, output) >= flights

    result = run_job(spark, uri, job_options(args, output=output, checkpoint=None,
                                                trigger="continuous",
                                                super_stream=args.super_stream if args.stream
                                                else None),
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
