"""Sans-IO AMQP 0-9-1: the codec (bytes ⇄ frames ⇄ messages) and connection state machines.

No sockets here: bytes in, events out; objects in, bytes out. Layers above (the embedded
broker and the client transport) own the I/O.
"""

from .errors import *  # noqa: F401,F403
from .frames import (  # noqa: F401
    FRAME_END, FRAME_MIN_SIZE, PROTOCOL_HEADER, ContentMessage, Decoder, Heartbeat,
    MethodFrame, ProtocolHeader, encode_heartbeat, encode_message, encode_method,
    parse_protocol_header,
)
from .properties import BasicProperties  # noqa: F401
from .raw_deliveries import RawDeliveries  # noqa: F401
from . import spec  # noqa: F401
from .values import Typed, decode_table, encode_table  # noqa: F401
