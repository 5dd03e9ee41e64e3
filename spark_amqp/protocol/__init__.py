"""Sans-IO AMQP 0-9-1: the codec (bytes ⇄ frames ⇄ messages, the one framing path) and the connection state machines.
May import: the standard library and its own optional compiled twins (``_*.pyx``, :mod:`.compiled`) only (no sockets, no other spark_amqp package).
Imported by: spark_amqp.broker, spark_amqp.client, spark_amqp.spark, spark_amqp.management, the CLI, jobs and benchmarks.
"""

from .errors import *  # noqa: F401,F403
from .frames import (  # noqa: F401
    FRAME_END, FRAME_MIN_SIZE, PROTOCOL_HEADER, ContentMessage, Decoder, Heartbeat,
    MethodFrame, OversizedContent, ProtocolHeader, encode_heartbeat, encode_message,
    encode_method, parse_protocol_header,
)
from .properties import BasicProperties  # noqa: F401
from .raw_deliveries import RawDeliveries  # noqa: F401
from .raw_publish import RawPublish  # noqa: F401
from . import spec  # noqa: F401
from .values import Typed, decode_table, encode_table  # noqa: F401
