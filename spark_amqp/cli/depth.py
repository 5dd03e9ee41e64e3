"""``spark-amqp depth``: how many messages a queue holds, without touching them.

One passive ``queue.declare`` per queue (AMQP 0-9-1 §queue.declare, ``passive``: "the server
... MUST return a declare-ok with the current message count and consumer count"). The count
is the queue's *ready* messages: those delivered to a consumer and not yet acknowledged are
not in it (RabbitMQ's ``messages_ready``; the management UI's "Ready" column). Nothing is
delivered, so no message is marked ``redelivered``; a missing queue is a 404 error naming it.
"""

from __future__ import annotations

import json

import click

from .common import broker_errors, uri_option


def queue_depths(uri: str, queues: list[str]) -> list[dict]:
    """``[{"queue", "messages", "consumers"}, ...]`` for ``queues``, in order.

    ``messages``: ready messages (int), ``consumers``: consumers (int), from a passive
    ``queue.declare`` on a fresh channel per queue. Raises the typed broker error
    (``NotFound``, 404) for a missing queue, ``OSError`` when the broker is unreachable.
    """
    from ..client import connect

    out = []
    with connect(uri) as conn:
        for queue in queues:
            ch = conn.channel()
            ok = ch.queue_declare(queue, passive=True)
            out.append({"queue": queue, "messages": ok.message_count,
                        "consumers": ok.consumer_count})
            ch.close()
    return out


@click.command()
@click.argument("queues", metavar="QUEUE...", nargs=-1, required=True)
@uri_option
@click.option("--format", "fmt", type=click.Choice(["text", "count", "json"]), default="text",
              show_default=True,
              help="text: 'QUEUE: N messages ready, C consumers'; count: the bare number; "
                   "json: one object per queue.")
def depth(queues, uri, fmt):
    """Print how many messages each QUEUE holds (passive queue.declare; touches no message).

    The count is of *ready* messages: messages delivered to a consumer and not yet
    acknowledged are not counted (RabbitMQ's messages_ready). Exit status 1 with a 404 error
    for a missing queue.

    \b
    Examples:
      spark-amqp depth flight-delays
      spark-amqp depth flight-delays flight-delay-alerts --format json
    """
    with broker_errors(uri):
        rows = queue_depths(uri, list(queues))
    for row in rows:
        if fmt == "count":
            click.echo(row["messages"])
        elif fmt == "json":
            click.echo(json.dumps(row))
        else:
            n, c = row["messages"], row["consumers"]
            click.echo(f"{row['queue']}: {n:,} message{'' if n == 1 else 's'} ready, "
                       f"{c:,} consumer{'' if c == 1 else 's'}")
