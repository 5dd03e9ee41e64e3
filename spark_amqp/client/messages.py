"""Value objects handed to client users: deliveries, returned messages, confirm results,
queue.declare-ok.
"""

from __future__ import annotations

from operator import itemgetter as _itemgetter
from typing import NamedTuple

from ..protocol import BasicProperties

__all__ = ["Delivery", "ReturnedMessage", "ConfirmResult", "DeclareOk"]


class Delivery(tuple):
    """One message delivered by ``basic.deliver`` (a consumer) or ``basic.get-ok``.

    An immutable record (a tuple subclass, built in the I/O thread's hot path without a
    Python-level ``__init__``). Attributes:

        consumer_tag: str, the consumer's tag (``""`` for ``basic.get``).
        delivery_tag: int, channel-scoped tag to pass to ``basic_ack``/``nack``/``reject``
            on the *same channel* (``channel_number``); tags are meaningless on any other.
        redelivered: bool, the broker delivered it before (AMQP 0-9-1 §basic.deliver).
        exchange, routing_key: str, where it was originally published.
        properties: :class:`~spark_amqp.protocol.BasicProperties`.
        body: bytes.
        message_count: int, messages left in the queue (``basic.get-ok`` only, else ``None``).
        channel_number: int, the channel the delivery arrived on.
    """

    __slots__ = ()
    _fields = ("consumer_tag", "delivery_tag", "redelivered", "exchange", "routing_key",
               "properties", "body", "message_count", "channel_number")

    def __new__(cls, consumer_tag: str, delivery_tag: int, redelivered: bool, exchange: str,
                routing_key: str, properties: BasicProperties, body: bytes,
                message_count: int | None = None, channel_number: int = 0) -> "Delivery":
        return tuple.__new__(cls, (consumer_tag, delivery_tag, redelivered, exchange,
                                   routing_key, properties, body, message_count, channel_number))

    consumer_tag = property(_itemgetter(0), doc="str: the consumer tag ('' for basic.get)")
    delivery_tag = property(_itemgetter(1), doc="int: channel-scoped delivery tag")
    redelivered = property(_itemgetter(2), doc="bool: delivered before")
    exchange = property(_itemgetter(3), doc="str: exchange it was published to")
    routing_key = property(_itemgetter(4), doc="str: routing key it was published with")
    properties = property(_itemgetter(5), doc="BasicProperties")
    body = property(_itemgetter(6), doc="bytes: the body")
    message_count = property(_itemgetter(7), doc="int | None: remaining (basic.get-ok only)")
    channel_number = property(_itemgetter(8), doc="int: the channel it arrived on")

    def __getnewargs__(self):
        return tuple(self)

    def _asdict(self) -> dict:
        """The fields as a dict."""
        return dict(zip(self._fields, self))

    def __repr__(self) -> str:
        body = self.body[:32]
        return (f"Delivery(channel_number={self.channel_number}, delivery_tag={self.delivery_tag}, "
                f"consumer_tag={self.consumer_tag!r}, redelivered={self.redelivered}, "
                f"exchange={self.exchange!r}, routing_key={self.routing_key!r}, "
                f"body={body!r}{'...' if len(self.body) > 32 else ''} ({len(self.body)} bytes))")


class ReturnedMessage:
    """A message the broker returned (``basic.return``), e.g. a ``mandatory`` publish that no
    queue was bound for (312 NO_ROUTE).

    In confirm mode RabbitMQ sends the ``basic.return`` *before* the ``basic.ack`` of that
    publish (RabbitMQ docs "Publisher Confirms": an unroutable mandatory message is confirmed
    after the return), so by the time ``wait_for_confirms`` returns, every return of the
    confirmed publishes has been collected.

    Attributes: reply_code (int, e.g. 312), reply_text (str, e.g. ``"NO_ROUTE"``), exchange,
    routing_key (str), properties (BasicProperties), body (bytes), channel_number (int).
    """

    __slots__ = ("reply_code", "reply_text", "exchange", "routing_key", "properties", "body",
                 "channel_number")

    def __init__(self, reply_code: int, reply_text: str, exchange: str, routing_key: str,
                 properties: BasicProperties, body: bytes, channel_number: int = 0):
        self.reply_code = reply_code
        self.reply_text = reply_text
        self.exchange = exchange
        self.routing_key = routing_key
        self.properties = properties
        self.body = body
        self.channel_number = channel_number

    def __repr__(self) -> str:
        return (f"ReturnedMessage({self.reply_code} {self.reply_text!r}, exchange={self.exchange!r}, "
                f"routing_key={self.routing_key!r}, {len(self.body)} bytes)")


class ConfirmResult(NamedTuple):
    """What :meth:`Channel.wait_for_confirms` saw since the previous call.

    Attributes:
        acked: int, number of publishes the broker acked.
        nacked: list[int], publish sequence numbers the broker nacked (ascending).
        returned: list[ReturnedMessage], messages returned (mandatory + unroutable).
    """

    acked: int
    nacked: list
    returned: list


class DeclareOk(NamedTuple):
    """``queue.declare-ok``: queue (str, the server-generated name for ``queue=""``),
    message_count (int, ready messages), consumer_count (int)."""

    queue: str
    message_count: int
    consumer_count: int
