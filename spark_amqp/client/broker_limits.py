"""What a broker accepts, learnt from its ``connection.start`` server-properties.

:func:`max_message_size` gives the largest message body the broker takes (RabbitMQ's
``max_message_size``), for the source's default ``maxMessageBytes`` and the sink's message
cap. AMQP 0-9-1 has no field for it, so:

1. the embedded broker (spark-amqp) advertises its configured value as the server-property
   ``max_message_size`` (an extension; RabbitMQ sends no such key);
2. RabbitMQ 3.x (``product`` "RabbitMQ", ``version`` "3.…"): 128 MiB, its default;
3. anything else, RabbitMQ 4.x included: 16 MiB, the 4.x default (rabbitmq-server
   deps/rabbit/Makefile ``{max_message_size, 16777216}`` at v4.3.0; release-notes/4.0.1.md).
   A RabbitMQ whose operator raised ``max_message_size`` cannot tell us: set
   ``maxMessageBytes`` then (docs/broker/rabbitmq-versions.md).
"""

from __future__ import annotations

from typing import Any

__all__ = ["max_message_size", "RABBITMQ_3_MAX_MESSAGE_SIZE", "RABBITMQ_4_MAX_MESSAGE_SIZE"]

#: RabbitMQ 3.x's default max_message_size (128 MiB)
RABBITMQ_3_MAX_MESSAGE_SIZE = 128 * 1024 * 1024
#: RabbitMQ 4.x's default max_message_size (16 MiB)
RABBITMQ_4_MAX_MESSAGE_SIZE = 16 * 1024 * 1024


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v or "")


def max_message_size(server_properties: dict | None) -> tuple[int, str]:
    """``(bytes, where from)``: the broker's message size limit and how it was learnt
    ("advertised by the broker", "RabbitMQ 3.x default", "RabbitMQ 4.x default")."""
    props = server_properties or {}
    v = props.get("max_message_size")
    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
        return v, "advertised by the broker"
    if _text(props.get("product")) == "RabbitMQ" and _text(props.get("version")).startswith("3."):
        return RABBITMQ_3_MAX_MESSAGE_SIZE, "RabbitMQ 3.x default"
    return RABBITMQ_4_MAX_MESSAGE_SIZE, "RabbitMQ 4.x default"
