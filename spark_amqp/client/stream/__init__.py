"""The RabbitMQ stream-protocol client (port 5552): :func:`connect` gives a
:class:`StreamClient`, which creates and deletes streams, answers metadata, offsets, publisher
sequences and super-stream routes, and opens :class:`Producer` (to a stream's leader:
confirms, deduplication) and :class:`Consumer` (a replica: chunks with credit flow control).

Imports only spark_amqp.protocol (its stream codec), the 0-9-1 client's transport, URI and
failure-model modules, and the standard library. Sources: RabbitMQ's PROTOCOL.adoc and
``rabbit_stream_reader.erl``, the RabbitMQ stream Java client (the reference implementation);
see each module.
"""

from ...protocol.stream.chunk import Chunk
from ...protocol.stream.commands import OffsetSpec
from .client import StreamClient, StreamInfo, connect
from .consumer import Consumer, offset_spec
from .node import NodeConnection
from .params import DEFAULT_STREAM_URI, StreamParameters, parse_stream_uri
from .producer import Producer, PublishResult

__all__ = ["connect", "StreamClient", "StreamInfo", "Producer", "PublishResult", "Consumer",
           "Chunk", "OffsetSpec", "offset_spec", "StreamParameters", "parse_stream_uri",
           "NodeConnection", "DEFAULT_STREAM_URI"]
