"""The stream protocol's numbers: command keys, response codes, offset types, chunk and entry
types, defaults.

Source: RabbitMQ's ``deps/rabbitmq_stream_common/include/rabbit_stream.hrl`` (v3.10.8 and
v4.3.5; the later adds keys 26-31 and codes 20-21) and ``deps/rabbitmq_stream/docs/PROTOCOL.adoc``;
the chunk numbers from osiris's ``src/osiris_log.erl`` header comment and ``osiris.hrl``; the
sub-batch compression codes from the RabbitMQ stream Java client (``Compression``), the
reference implementation.
"""

from __future__ import annotations

import enum

__all__ = [
    "Key", "Code", "OffsetType", "ChunkType", "Compression", "RESPONSE_FLAG", "VERSION_1",
    "VERSION_2", "DEFAULT_FRAME_MAX", "DEFAULT_HEARTBEAT", "DEFAULT_INITIAL_FRAME_MAX",
    "DEFAULT_PORT", "DEFAULT_TLS_PORT", "CHUNK_MAGIC_VERSION", "CHUNK_HEADER_SIZE",
    "MAX_REFERENCE_LENGTH", "KEYS_SINCE",
]


class Key(enum.IntEnum):
    """Command keys (uint16 on the wire; a response sets the top bit, :data:`RESPONSE_FLAG`)."""

    DECLARE_PUBLISHER = 1
    PUBLISH = 2
    PUBLISH_CONFIRM = 3
    PUBLISH_ERROR = 4
    QUERY_PUBLISHER_SEQUENCE = 5
    DELETE_PUBLISHER = 6
    SUBSCRIBE = 7
    DELIVER = 8
    CREDIT = 9
    STORE_OFFSET = 10
    QUERY_OFFSET = 11
    UNSUBSCRIBE = 12
    CREATE_STREAM = 13
    DELETE_STREAM = 14
    METADATA = 15
    METADATA_UPDATE = 16
    PEER_PROPERTIES = 17
    SASL_HANDSHAKE = 18
    SASL_AUTHENTICATE = 19
    TUNE = 20
    OPEN = 21
    CLOSE = 22
    HEARTBEAT = 23
    ROUTE = 24
    PARTITIONS = 25
    CONSUMER_UPDATE = 26
    EXCHANGE_COMMAND_VERSIONS = 27
    STREAM_STATS = 28
    CREATE_SUPER_STREAM = 29
    DELETE_SUPER_STREAM = 30
    RESOLVE_OFFSET_SPEC = 31


#: the RabbitMQ version that first speaks each key added after 3.10 (release notes; the
#: keys 1-25 are all in 3.10.x). A client asks only a broker of that version or later.
KEYS_SINCE = {
    Key.CONSUMER_UPDATE: (3, 11), Key.EXCHANGE_COMMAND_VERSIONS: (3, 11),
    Key.STREAM_STATS: (3, 11), Key.CREATE_SUPER_STREAM: (3, 13),
    Key.DELETE_SUPER_STREAM: (3, 13), Key.RESOLVE_OFFSET_SPEC: (4, 3),
}


class Code(enum.IntEnum):
    """Response codes (uint16), PROTOCOL.adoc "Response Codes" and rabbit_stream.hrl."""

    OK = 0x01
    STREAM_DOES_NOT_EXIST = 0x02
    SUBSCRIPTION_ID_ALREADY_EXISTS = 0x03
    SUBSCRIPTION_ID_DOES_NOT_EXIST = 0x04
    STREAM_ALREADY_EXISTS = 0x05
    STREAM_NOT_AVAILABLE = 0x06
    SASL_MECHANISM_NOT_SUPPORTED = 0x07
    AUTHENTICATION_FAILURE = 0x08
    SASL_ERROR = 0x09
    SASL_CHALLENGE = 0x0A
    SASL_AUTHENTICATION_FAILURE_LOOPBACK = 0x0B
    VIRTUAL_HOST_ACCESS_FAILURE = 0x0C
    UNKNOWN_FRAME = 0x0D
    FRAME_TOO_LARGE = 0x0E
    INTERNAL_ERROR = 0x0F
    ACCESS_REFUSED = 0x10
    PRECONDITION_FAILED = 0x11
    PUBLISHER_DOES_NOT_EXIST = 0x12
    NO_OFFSET = 0x13
    SASL_CANNOT_CHANGE_MECHANISM = 0x14
    SASL_CANNOT_CHANGE_USERNAME = 0x15


class OffsetType(enum.IntEnum):
    """Offset specification types of ``subscribe`` / ``consumer_update`` /
    ``resolve_offset_spec`` (uint16); ``OFFSET`` is followed by a uint64, ``TIMESTAMP`` by an
    int64 (milliseconds since the epoch, Erlang system time)."""

    NONE = 0
    FIRST = 1
    LAST = 2
    NEXT = 3
    OFFSET = 4
    TIMESTAMP = 5


class ChunkType(enum.IntEnum):
    """osiris chunk types (``CHNK_USER``, ``CHNK_TRK_DELTA``, ``CHNK_TRK_SNAPSHOT``)."""

    USER = 0
    TRACKING_DELTA = 1
    TRACKING_SNAPSHOT = 2


class Compression(enum.IntEnum):
    """The 3-bit compression type of a sub-batch entry (the Java client's ``Compression``
    codes; the broker stores sub-batches as they come and never decompresses them)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


RESPONSE_FLAG = 0x8000
VERSION_1 = 1
VERSION_2 = 2
#: rabbit_stream.hrl ``DEFAULT_FRAME_MAX`` (1 MiB) and ``DEFAULT_HEARTBEAT`` (60 s)
DEFAULT_FRAME_MAX = 1048576
DEFAULT_HEARTBEAT = 60
#: 4.x: the frame size ceiling before ``open`` succeeds (``stream.initial_frame_max``)
DEFAULT_INITIAL_FRAME_MAX = 8192
DEFAULT_PORT = 5552
DEFAULT_TLS_PORT = 5551
#: osiris ``?MAGIC`` (5) and ``?VERSION`` (0; osiris.hrl v1.0-v1.10, although the header
#: comment of osiris_log.erl says 1) in one byte, and the chunk header's size
CHUNK_MAGIC_VERSION = 0x50
CHUNK_HEADER_SIZE = 48
#: publisher and consumer (offset tracking) references: at most 256 bytes (PROTOCOL.adoc)
MAX_REFERENCE_LENGTH = 256
