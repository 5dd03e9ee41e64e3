"""The job's command line (click, like ``spark-amqp``): ``python -m spark_amqp.jobs.flight_delays``.

:data:`command` is the click command; :func:`parse_args` turns a command line into the options
(an object with one attribute per option, the defaults that depend on other options filled in)
or exits as click does (status 2 and the usage on stderr for a bad option, 0 after
``--help``); :func:`main` runs the demo or the job with them.
"""

from __future__ import annotations

import logging
import os
import sys
from types import SimpleNamespace

import click

from ...cli.common import check_uri
from ...client.uri import DEFAULT_URI
from . import session, topology  # main() looks session.build_spark up when called (tests replace it)
from .data import (ALERTS_EXCHANGE, DEFAULT_ALERTS_QUEUE, DEFAULT_MAX_PER_TRIGGER,
                   DEFAULT_PARTITIONS, DEFAULT_QUEUE, DEFAULT_SUPER_STREAM, FLIGHTS_EXCHANGE,
                   LIVE_INTERVAL, LIVE_RATE, LIVE_STREAM_WATERMARK)
from .demo import demo
from .job import job_options, run_job, write_json_result

log = logging.getLogger("flight_delays")

PROG = "python -m spark_amqp.jobs.flight_delays"


def _amqp_uri(ctx, param, value: str | None) -> str | None:
    """Click callback of ``--uri``: a parsable AMQP URI (each entry of a host list checked);
    unset stays None (the embedded broker with ``--demo``)."""
    return value if value is None else check_uri(ctx, param, value)


@click.command(name=PROG, context_settings={"help_option_names": ["-h", "--help"]},
               help="Per origin/carrier/hour flight delays from an AMQP queue with Spark "
                    "(see the docstring of spark_amqp.jobs.delays).")
@click.option("--demo", is_flag=True,
              help="start the embedded broker (unless --uri), publish the flights, run the job "
                   "until drained, print a summary")
@click.option("--uri", default=None, callback=_amqp_uri,
              help="AMQP URI of the broker (default: embedded broker with --demo, else "
                   f"$SPARK_AMQP_URI or {DEFAULT_URI}); the nodes of a RabbitMQ cluster as a "
                   "host list: amqp://u:p@h1:5672,h2:5672,h3:5672/%2F")
@click.option("--queue", default=DEFAULT_QUEUE, show_default=True, help="queue of flight messages")
@click.option("--stream", is_flag=True,
              help="read the flights from super stream --super-stream in stream mode instead of "
                   "--queue (with --demo: created with --partitions partitions and filled by "
                   "the amqp sink)")
@click.option("--super-stream", default=DEFAULT_SUPER_STREAM, show_default=True,
              help="--stream: the super stream of flight messages")
@click.option("--partitions", type=click.IntRange(min=1), default=DEFAULT_PARTITIONS,
              show_default=True, help="--stream --demo: partitions of the super stream")
@click.option("--exchange", default=FLIGHTS_EXCHANGE, show_default=True,
              help="--demo: topic exchange the flights are published to")
@click.option("--alerts-exchange", default=ALERTS_EXCHANGE, show_default=True,
              help="topic exchange for the delay alerts")
@click.option("--alerts-queue", default=DEFAULT_ALERTS_QUEUE, show_default=True,
              help="queue declared and bound to the alerts exchange with delay.# ('' = none)")
@click.option("--limit", type=int, default=None,
              help="--demo: publish only the first N flights in event-time order")
@click.option("--output", default=None,
              help="output directory (parquet under OUTPUT/windows, checkpoint under "
                   "OUTPUT/_checkpoint) [--demo: a temporary directory; else out/flight_delays]")
@click.option("--checkpoint", default=None, help="checkpoint location [OUTPUT/_checkpoint]")
@click.option("--threshold", type=float, default=60.0, show_default=True,
              help="alert when a window's mean departure delay exceeds this many minutes")
@click.option("--watermark", default=None,
              help="watermark delay on sched_dep [30 minutes; --live --stream: "
                   f"{LIVE_STREAM_WATERMARK}]")
@click.option("--trigger", type=click.Choice(["available-now", "continuous"]),
              default="available-now", show_default=True,
              help="available-now: drain the queue then stop; continuous: run until Ctrl-C")
@click.option("--interval", type=float, default=None,
              help="seconds between micro-batches with --trigger continuous [5] and "
                   f"--live [{LIVE_INTERVAL:g}]")
@click.option("--live", is_flag=True,
              help="--demo: publish the flights at --rate msg/s WHILE the query runs (a "
                   "processing-time trigger of --interval seconds), instead of before it; the "
                   "query stops once every flight is in the windows")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=LIVE_RATE,
              show_default=True, help="--live: messages per second the publisher sends")
@click.option("--live-timeout", type=float, default=300.0, show_default=True,
              help="--live: seconds the query gets after the publisher ends to put every "
                   "flight in the windows")
@click.option("--max-per-trigger", type=int, default=None,
              help=f"max messages per micro-batch (0 = no cap) [{DEFAULT_MAX_PER_TRIGGER:,}; "
                   "with --stream 0: a cap is split evenly over the partitions, which can put "
                   "one ahead of the watermark of the others]")
@click.option("--idle-timeout", type=float, default=5.0, show_default=True,
              help="available-now: seconds to wait for snapshotted messages")
@click.option("--master", default=None,
              help="Spark master (plain python only) [from the package's "
                   "conf/spark-defaults.conf: local[2]]")
@click.option("--keep-output", is_flag=True, help="--demo: keep the temporary output directory")
@click.option("--delete-topology", is_flag=True,
              help="at the end, delete the exchanges (--exchange, --alerts-exchange), the queues "
                   "(--queue, --alerts-queue: their messages and the alerts too) and with --stream "
                   "the super stream: a run against your RabbitMQ leaves nothing behind")
@click.option("--no-progress", is_flag=True, help="no progress bar while publishing")
@click.option("--json-result", default=None,
              help="write the JobResult (consumed, batches, alerts, windows, ...) as JSON here")
@click.option("-v", "--verbose", is_flag=True, help="debug logging")
@click.pass_context
def command(ctx, **options) -> SimpleNamespace:
    """The options, checked and completed (the defaults that depend on others)."""
    args = SimpleNamespace(**options)
    if args.live and not args.demo:
        raise click.UsageError("--live runs the demo with a live publisher: add --demo", ctx)
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


def parse_args(argv=None) -> SimpleNamespace:
    """The options of command line ``argv`` (default ``sys.argv[1:]``). Exits (``SystemExit``)
    as click's commands do: 2 with the usage on stderr for a bad option, 0 after ``--help``."""
    try:
        args = command.main(list(sys.argv[1:] if argv is None else argv), prog_name=PROG,
                            standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        raise SystemExit(exc.exit_code) from None
    if isinstance(args, int):  # --help: click returns its exit status (standalone_mode=False)
        raise SystemExit(args)
    return args


def main(argv=None) -> int:
    """Run the job (or ``--demo``) with command line ``argv``; returns the exit status."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if not args.verbose:  # the embedded broker logs every connection at INFO
        logging.getLogger("spark_amqp").setLevel(logging.WARNING)
    if args.demo:
        return demo(args)
    uri = args.uri or os.environ.get("SPARK_AMQP_URI", DEFAULT_URI)
    topology.declare_alerts(uri, args.alerts_queue, args.alerts_exchange)
    spark = session.build_spark(master=args.master)
    result = run_job(spark, uri, job_options(
        args, output=args.output or "out/flight_delays",
        super_stream=args.super_stream if args.stream else None))
    log.info("done: %s messages in %d batches, %s windows, %s alerts, %.1f s",
             f"{result.consumed:,}", result.batches, f"{result.windows:,}",
             f"{result.alerts:,}", result.seconds)
    if args.alerts_queue:
        log.info("alerts: %s published to exchange %r; %s waiting in queue %r "
                 "(spark-amqp consume %s -n 10 --format json)", f"{result.alerts:,}",
                 args.alerts_exchange, f"{topology.queue_depth(uri, args.alerts_queue):,}",
                 args.alerts_queue, args.alerts_queue)
    write_json_result(args.json_result, result)
    spark.stop()
    if args.delete_topology:
        topology.delete_job_topology(uri, args)
    return 0
