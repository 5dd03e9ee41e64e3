"""Sans-IO RabbitMQ stream protocol (port 5552): the frame codec of every command RabbitMQ
3.10-4.3 speaks, in both roles; osiris chunks; the connection state machine.

May import: the standard library and its own optional compiled ``_speedups`` only.
Imported by: the stream-protocol client (spark_amqp.client.stream) and the embedded broker.
Sources: RabbitMQ's ``deps/rabbitmq_stream/docs/PROTOCOL.adoc`` and
``deps/rabbitmq_stream_common/src/rabbit_stream_core.erl`` (v3.10.8, v4.3.5), osiris's
``src/osiris_log.erl``; see each module.
"""

from .constants import *  # noqa: F401,F403
from .errors import *  # noqa: F401,F403
from .commands import *  # noqa: F401,F403
from .chunk import (Chunk, TrackingEntry, decompress, encode_chunk,  # noqa: F401
                    make_sub_batch, parse_chunk)
from .framing import FrameDecoder  # noqa: F401
from .connection import CLIENT, SERVER, State, StreamConnection  # noqa: F401
from . import speedups  # noqa: F401

speedups.install(speedups.SPEEDUPS)
