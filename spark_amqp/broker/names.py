"""Server-generated names, as RabbitMQ makes them: ``amq.gen-`` queues, ``amq.ctag-`` consumer
tags, ``amq.rabbitmq.reply-to.`` direct reply-to queues (rabbitmq.com/docs/queues "Server-named
queues", /docs/direct-reply-to)."""

from __future__ import annotations

import base64
import os

__all__ = ["new_name", "REPLY_TO"]

#: the pseudo-queue a client consumes from (and names in reply_to) for direct reply-to
REPLY_TO = "amq.rabbitmq.reply-to"


def new_name(prefix: str) -> str:
    """A server-generated name like RabbitMQ's: ``amq.gen-`` / ``amq.ctag-`` + 22 url-safe chars."""
    return prefix + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
