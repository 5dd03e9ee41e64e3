"""Super streams: which partition a routing key goes to, as RabbitMQ's stream clients pick it.

A super stream ``NAME`` (RabbitMQ 3.11+) is a direct exchange ``NAME`` with partition streams
``NAME-0 … NAME-(N-1)`` (reference rabbitmq-streams-over-0-9-1.md, "Super streams"). Over AMQP
0-9-1 the publisher picks the partition itself; to put a key where RabbitMQ's stream clients
put it, use their hash routing: MurmurHash3 x86 32-bit of the key's UTF-8 bytes with seed
104729, taken as an unsigned remainder modulo the partition count, over the partitions in order
(rabbitmq-stream-java-client ``HashUtils.java``, ``HashRoutingStrategy.java``:
``Integer.remainderUnsigned(hash, partitions.size())``). The hash is the kept ``mmh3`` library.
"""

from __future__ import annotations

__all__ = ["SEED", "key_hash", "partition_index", "partition_name"]

#: the seed of RabbitMQ's stream clients' hash routing (HashUtils.MURMUR3)
SEED = 104729


def key_hash(key: str | bytes) -> int:
    """MurmurHash3 x86 32-bit of ``key`` (str: its UTF-8 bytes), seed :data:`SEED`, as an
    unsigned int (0 .. 2**32 - 1)."""
    from ...client.streams import murmur3_32

    if isinstance(key, str):
        key = key.encode("utf-8")
    return murmur3_32(key, SEED)


def partition_index(key: str | bytes, partitions: int) -> int:
    """The partition (0 .. partitions - 1) of ``key``; ``partitions`` >= 1 (ValueError)."""
    if partitions < 1:
        raise ValueError(f"a super stream has at least one partition, got {partitions}")
    return key_hash(key) % partitions


def partition_name(super_stream: str, key: str | bytes, partitions: int) -> str:
    """The partition stream ``NAME-i`` of ``key`` in super stream ``super_stream``."""
    return f"{super_stream}-{partition_index(key, partitions)}"
