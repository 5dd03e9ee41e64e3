"""``spark-amqp streams``: stream-queue tools that work over AMQP 0-9-1 (RabbitMQ or the
embedded broker).

- ``streams add-super-stream NAME --partitions N``: the super-stream topology RabbitMQ uses
  (see :func:`spark_amqp.client.streams.declare_super_stream`);
- ``streams info NAME``: first and last offset of a stream, learnt by reading (0-9-1 has no
  command for them); for a super stream (no stream NAME, but ``NAME-0``, ``NAME-1``, ...) one
  line per partition.
"""

from __future__ import annotations

import json

import click

from .common import broker_errors, redact, uri_option


@click.group()
def streams() -> None:
    """Stream queues (x-queue-type=stream): super streams and offsets."""


@streams.command("add-super-stream")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(min=1), required=True,
              help="Number of partition streams (NAME-0 … NAME-(N-1)).")
@click.option("--max-age", default=None, help="x-max-age of every partition, e.g. 7D or 12h.")
@click.option("--max-length-bytes", type=click.IntRange(min=0), default=None,
              help="x-max-length-bytes of every partition.")
@click.option("--max-segment-size-bytes", type=click.IntRange(min=1), default=None,
              help="x-stream-max-segment-size-bytes of every partition.")
@uri_option
def add_super_stream(name, partitions, max_age, max_length_bytes, max_segment_size_bytes, uri):
    """Declare super stream NAME: a durable direct exchange NAME (x-super-stream=true) and
    partition streams NAME-0 … NAME-(N-1) bound with routing keys "0" … "N-1".

    \b
    Example:
      spark-amqp streams add-super-stream orders --partitions 3 --max-age 7D
    """
    from ..client import connect
    from ..client.streams import declare_super_stream

    args = {}
    if max_age is not None:
        args["x-max-age"] = max_age
    if max_length_bytes is not None:
        args["x-max-length-bytes"] = max_length_bytes
    if max_segment_size_bytes is not None:
        args["x-stream-max-segment-size-bytes"] = max_segment_size_bytes
    with broker_errors(uri), connect(uri) as conn:
        names = declare_super_stream(conn.channel(), name, partitions, args)
    click.echo(f"super stream {name!r} at {redact(uri)}: exchange {name!r}, partitions {', '.join(names)}")


@streams.command("info")
@click.argument("name")
@click.option("--idle", type=click.FloatRange(min=0.05), default=0.5, show_default=True,
              help="Seconds without a delivery that mean the end was reached.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per stream.")
@uri_option
def info(name, idle, as_json, uri):
    """First and last offset of stream NAME (or of each partition of super stream NAME).

    \b
    Example:
      spark-amqp streams info orders
    """
    from ..client import connect
    from ..client.streams import stream_bounds
    from ..protocol.errors import NotFound

    with broker_errors(uri), connect(uri) as conn:
        try:
            rows = [stream_bounds(conn, name, idle)]
        except NotFound:
            rows = []
            i = 0
            while True:
                try:
                    rows.append(stream_bounds(conn, f"{name}-{i}", idle))
                except NotFound:
                    break
                i += 1
            if not rows:
                raise click.ClickException(f"no stream {name!r} (nor super-stream partition {name}-0) at {redact(uri)}")
    for r in rows:
        if as_json:
            click.echo(json.dumps({"stream": r.stream, "first": r.first, "last": r.last,
                                   "message_count": r.message_count}))
        elif r.first is None:
            click.echo(f"{r.stream}: empty")
        else:
            click.echo(f"{r.stream}: first offset {r.first}, last offset {r.last}")
