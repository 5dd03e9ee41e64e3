"""Plumbing shared by the ``spark-amqp`` subcommands: the ``--uri`` option and error reporting.

Every subcommand that talks to a broker takes ``--uri`` (default: ``$SPARK_AMQP_URI``, else
RabbitMQ's default ``amqp://guest:guest@127.0.0.1:5672/%2F``; the URI format is RabbitMQ's,
https://www.rabbitmq.com/docs/uri-spec). Broker and network errors become a one-line
``Error: ...`` on stderr and exit status 1 instead of a traceback.
"""

from __future__ import annotations

import contextlib
import os

import click

from ..client.uri import DEFAULT_URI
from ..client.uri import redact_uri as redact


def check_uri(ctx, param, value: str) -> str:
    """Click callback: ``value`` must parse as an AMQP URI (with a host list, every entry is
    checked); else ``click.BadParameter`` naming the bad entry (password redacted)."""
    from ..client.uri import parse_uri

    try:
        parse_uri(value)
    except ValueError as exc:
        raise click.BadParameter(redact(str(exc))) from None
    return value


def uri_option(f):
    """Add ``--uri`` (envvar ``SPARK_AMQP_URI``) to a click command."""
    return click.option(
        "--uri", default=lambda: os.environ.get("SPARK_AMQP_URI", DEFAULT_URI),
        show_default="$SPARK_AMQP_URI or " + DEFAULT_URI, callback=check_uri,
        help="AMQP URI of the broker (amqp://user:pass@host:port/vhost; amqps:// for TLS). "
             "The nodes of a cluster: amqp://user:pass@h1:5672,h2:5672,h3:5672/vhost (tried "
             "in a random order, failing over to the next; ?failover_timeout=MS keeps "
             "trying).")(f)


@contextlib.contextmanager
def broker_errors(uri: str):
    """Turn AMQP and connection errors raised inside the block into ``click.ClickException``.

    ``AMQPError`` subclasses keep their reply code and text (e.g. ``NOT_FOUND (404): no queue
    'x' in vhost '/'``); ``OSError`` (refused connection, lost socket) says which broker
    could not be reached and what to do.
    """
    from ..client.errors import ClientError, ProtocolMismatch
    from ..protocol.errors import AMQPError

    try:
        yield
    except AMQPError as exc:
        raise click.ClickException(
            f"the broker at {redact(uri)} refused: {type(exc).__name__} "
            f"({exc.reply_code}): {exc.reply_text}") from exc
    except (OSError, TimeoutError, ProtocolMismatch) as exc:
        text = str(exc) or type(exc).__name__
        # no "is it running?" when the client found a server of another protocol there (the
        # text then names the protocol's usual port: protocol/peer.py)
        hint = ("" if isinstance(exc, ClientError) or "broker runs" in text
                or "usually on port" in text else
                " (is it running? pass --uri, or start one with `spark-amqp broker`)")
        raise click.ClickException(
            f"cannot talk to the broker at {redact(uri)}: {text}{hint}") from exc
