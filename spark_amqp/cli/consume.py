"""``spark-amqp consume``: print or count the messages of a queue.

Consumes with manual acknowledgements (``basic.consume`` with ``no_ack=false``) and a
prefetch window. With ``--ack`` (default) each printed message is acknowledged, so it
leaves the queue; with ``--no-ack`` nothing is acknowledged and the broker requeues the
messages when the command closes its channel (AMQP 0-9-1 §3.1.4 / RabbitMQ "Consumer
Acknowledgements": unacknowledged deliveries are requeued on channel close). Requeued
messages come back with ``redelivered=true``. With ``--no-ack`` the broker stops delivering
once the prefetch window is full of unacknowledged messages, so one run sees at most the
window (``--count``, else ``--prefetch``); the command says so when it stops there. For a true
count use ``spark-amqp depth`` (:mod:`.depth`), for a peek ``spark-amqp peek`` (:mod:`.peek`).
"""

from __future__ import annotations

import json
import time

import click

from .common import broker_errors, redact, uri_option


def delivery_record(d) -> dict:
    """A JSON-friendly dict of a :class:`spark_amqp.client.Delivery` (body as UTF-8 text,
    undecodable bytes replaced; properties that are set)."""
    props = {}
    p = d.properties
    if p is not None:
        for name in ("content_type", "content_encoding", "headers", "delivery_mode", "priority",
                     "correlation_id", "reply_to", "expiration", "message_id", "timestamp",
                     "type", "user_id", "app_id"):
            v = getattr(p, name, None)
            if v is not None:
                props[name] = v
    return {"exchange": d.exchange, "routing_key": d.routing_key,
            "delivery_tag": d.delivery_tag, "redelivered": d.redelivered,
            "properties": props, "body": d.body.decode("utf-8", "replace")}


@click.command()
@click.argument("queue")
@uri_option
@click.option("-n", "--count", type=click.IntRange(min=1), default=None,
              help="Stop after N messages (default: until the queue is idle for --timeout).")
@click.option("--ack/--no-ack", default=True, show_default=True,
              help="Acknowledge (remove) the consumed messages, or leave them unacknowledged so "
                   "the broker requeues them on exit (they come back redelivered=true; at most "
                   "one prefetch window per run: see `spark-amqp peek`).")
@click.option("--timeout", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="Stop after this many seconds without a message.")
@click.option("--prefetch", type=click.IntRange(1, 65535), default=1000, show_default=True,
              help="basic.qos prefetch count (with --count: the smaller of the two; with --count "
                   "and --no-ack: --count, at most 65,535).")
@click.option("--format", "fmt", type=click.Choice(["body", "json", "count"]), default="body",
              show_default=True,
              help="body: one body per line; json: one JSON object per message with routing key "
                   "and properties; count: print only the number of messages this run consumed "
                   "(the queue's depth is `spark-amqp depth`).")
def consume(queue, uri, count, ack, timeout, prefetch, fmt):
    """Print (or count) the messages of QUEUE.

    \b
    Examples:
      spark-amqp consume flight-delay-alerts -n 10 --format json
      spark-amqp consume greetings --format count    # consume (remove) all, print how many
    """
    from ..client import connect

    seen = 0
    started = time.monotonic()
    window = min(prefetch, count) if count else prefetch
    if count and not ack:  # nothing is acked: the window must hold all N (basic.qos max 65,535)
        window = min(count, 65535)
    with broker_errors(uri), connect(uri) as conn:
        ch = conn.channel()
        ch.basic_qos(window)
        tag = ch.basic_consume(queue, no_ack=False)
        while count is None or seen < count:
            batch = ch.drain(max_count=None if count is None else count - seen, timeout=timeout)
            if not batch:
                break
            for d in batch:
                if fmt == "body":
                    click.echo(d.body.decode("utf-8", "replace"))
                elif fmt == "json":
                    click.echo(json.dumps(delivery_record(d), default=str))
            seen += len(batch)
            if ack:
                ch.basic_ack(batch[-1].delivery_tag, multiple=True)
        ch.basic_cancel(tag)
    if fmt == "count":
        click.echo(seen)
    click.echo(f"consumed {seen:,} message(s) from queue {queue!r} at {redact(uri)} in "
               f"{time.monotonic() - started:.1f} s ({'acknowledged' if ack else 'requeued'})",
               err=True)
    if not ack and seen >= window and (count is None or seen < count):
        click.echo(f"stopped at the prefetch window: with --no-ack the broker delivers at most "
                   f"{window:,} unacknowledged messages (--prefetch); the queue may hold more "
                   f"(`spark-amqp depth {queue}` counts them, `spark-amqp peek` shows the first "
                   f"ones)", err=True)
