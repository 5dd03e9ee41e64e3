"""The blocking AMQP 0-9-1 client (one I/O thread per connection): connections, channels.
Imports only spark_amqp.protocol, spark_amqp._version and the standard library.
Imported by spark_amqp.spark, .cli, .bench and jobs/; never by protocol or broker."""

from .channel import Channel
from .connection import CLIENT_CAPABILITIES, AllAddressesFailed, Connection, connect
from .errors import (
    ChannelClosed, ClientError, ConfirmTimeout, ConnectionClosed, ConnectionLost,
    ProtocolMismatch, PublishNacked,
)
from .failover import BrokerUnreachable, Failure, classify
from .messages import ConfirmResult, DeclareOk, Delivery, ReturnedMessage
from .uri import ConnectionParameters, parse_addresses, parse_uri

__all__ = [
    "connect", "AllAddressesFailed", "parse_addresses", "Connection", "Channel", "Delivery", "ReturnedMessage", "ConfirmResult",
    "DeclareOk", "ConnectionParameters", "parse_uri", "ClientError", "ConnectionLost",
    "ConnectionClosed", "ChannelClosed", "PublishNacked", "ConfirmTimeout", "ProtocolMismatch",
    "CLIENT_CAPABILITIES", "BrokerUnreachable", "Failure", "classify",
]
