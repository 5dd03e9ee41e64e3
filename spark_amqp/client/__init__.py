"""Blocking AMQP 0-9-1 client (thread-based) on top of :mod:`spark_amqp.protocol`.

>>> from spark_amqp.client import connect
>>> with connect("amqp://guest:guest@127.0.0.1:5672/%2F") as conn:     # doctest: +SKIP
...     ch = conn.channel()
...     ch.queue_declare("q")
...     ch.confirm_select()
...     ch.basic_publish(b"hello", routing_key="q")
...     ch.wait_for_confirms()
...     ch.basic_qos(1000)
...     ch.basic_consume("q")
...     for d in ch.drain(timeout=1.0):
...         ch.basic_ack(d.delivery_tag)

See :mod:`spark_amqp.client.connection` for the threading model, :mod:`spark_amqp.client.uri`
for URIs, :class:`~spark_amqp.client.channel.Channel` for the methods.
"""

from .channel import Channel
from .connection import CLIENT_CAPABILITIES, Connection, connect
from .errors import (
    ChannelClosed, ClientError, ConfirmTimeout, ConnectionClosed, ConnectionLost,
    ProtocolMismatch, PublishNacked,
)
from .messages import ConfirmResult, DeclareOk, Delivery, ReturnedMessage
from .uri import ConnectionParameters, parse_uri

__all__ = [
    "connect", "Connection", "Channel", "Delivery", "ReturnedMessage", "ConfirmResult",
    "DeclareOk", "ConnectionParameters", "parse_uri", "ClientError", "ConnectionLost",
    "ConnectionClosed", "ChannelClosed", "PublishNacked", "ConfirmTimeout", "ProtocolMismatch",
    "CLIENT_CAPABILITIES",
]
