"""``spark-amqp peek``: show the first N messages of a queue and put them back.

AMQP 0-9-1 has no read that leaves a message untouched: a message is read by delivering it.
``peek`` therefore:

1. counts the ready messages (passive ``queue.declare``) and expects ``min(N, ready)``;
2. consumes with manual acknowledgement and a prefetch of exactly that many (``basic.qos``),
   so the broker hands over the first messages of the queue and no more;
3. cancels the consumer and returns every delivery with ``basic.nack(multiple=true,
   requeue=true)``.

What that does to the messages (RabbitMQ, "Consumer Acknowledgements and Publisher
Confirms", "Negative Acknowledgement and Requeuing"): they stay in the queue, and a classic
queue puts them back at their original position, in order; from then on they are delivered
with ``redelivered=true``. A quorum queue of RabbitMQ 3.x and 4.0-4.2 counts the peek as a
delivery attempt toward its delivery limit (``x-delivery-limit``; 20 by default from 4.0: a
message peeked at 20 times is then dead-lettered, or dropped without a dead-letter
exchange); RabbitMQ 4.3 does not count a requeueing nack, it only raises
``x-acquired-count`` (docs/broker/rabbitmq-versions.md). The output shows each message's
``redelivered`` flag as it was *before* this peek.
"""

from __future__ import annotations

import json
import time

import click

from .common import broker_errors, redact, uri_option
from .consume import delivery_record

#: The largest prefetch count (basic.qos prefetch-count is a short: 0..65535, 0 = unlimited).
MAX_PEEK = 65_535


def peek_messages(uri: str, queue: str, n: int, timeout: float = 5.0):
    """Deliver the first ``n`` ready messages of ``queue`` and requeue them all.

    Returns ``(deliveries, ready)``: the :class:`~spark_amqp.client.Delivery` list (at most
    ``n``, queue order) and the ready count before the peek. Stops early when no delivery
    arrives for ``timeout`` seconds (another consumer took the rest). ``n``: 1..65,535
    (``ValueError`` otherwise). Raises the typed broker error (``NotFound``, 404) for a
    missing queue.
    """
    from ..client import connect

    if not 1 <= n <= MAX_PEEK:
        raise ValueError(f"peek takes 1..{MAX_PEEK:,} messages, not {n}")
    with connect(uri) as conn:
        ch = conn.channel()
        ready = ch.queue_declare(queue, passive=True).message_count
        want = min(n, ready)
        seen: list = []
        if want:
            ch.basic_qos(want)
            tag = ch.basic_consume(queue, no_ack=False)
            while len(seen) < want:
                batch = ch.drain(max_count=want - len(seen), timeout=timeout)
                if not batch:
                    break
                seen.extend(batch)
            ch.basic_cancel(tag)
            ch.basic_nack(0, multiple=True, requeue=True)  # tag 0 + multiple: all unacked
            ch.close()
    return seen, ready


@click.command()
@click.argument("queue")
@uri_option
@click.option("-n", "--count", type=click.IntRange(1, MAX_PEEK), default=10, show_default=True,
              help="How many messages from the head of the queue (at most 65,535, the largest "
                   "prefetch window).")
@click.option("--format", "fmt", type=click.Choice(["body", "json"]), default="body",
              show_default=True,
              help="body: one body per line; json: one JSON object per message with routing key, "
                   "properties and the redelivered flag it had before the peek.")
@click.option("--timeout", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="Stop waiting after this many seconds without a delivery.")
def peek(queue, uri, count, fmt, timeout):
    """Show the first N messages of QUEUE and put them back (requeue).

    The messages stay in the queue; a classic queue keeps them in their place and order.
    AMQP has no read that leaves a message untouched, so from now on they are delivered
    with redelivered=true (and a quorum queue counts one more delivery attempt). To count
    messages without touching any, use `spark-amqp depth`.

    \b
    Examples:
      spark-amqp peek flight-delays -n 5
      spark-amqp peek flight-delay-alerts -n 3 --format json
    """
    started = time.monotonic()
    with broker_errors(uri):
        seen, ready = peek_messages(uri, queue, count, timeout)
    for d in seen:
        if fmt == "json":
            click.echo(json.dumps(delivery_record(d), default=str))
        else:
            click.echo(d.body.decode("utf-8", "replace"))
    n = len(seen)
    note = ("" if not n else
            "; they are back in the queue, and are now delivered with redelivered=true")
    click.echo(f"peeked {n:,} of {ready:,} ready message{'' if ready == 1 else 's'} in queue "
               f"{queue!r} at {redact(uri)} in {time.monotonic() - started:.1f} s{note}",
               err=True)
