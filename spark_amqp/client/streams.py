"""Stream queues over AMQP 0-9-1, client side: super-stream topology and a stream's bounds.

- :func:`declare_super_stream`: the topology RabbitMQ 3.11+ creates for a super stream
  (``rabbitmq-streams add_super_stream``; docs "Super Streams"): a durable direct exchange
  ``NAME`` with argument ``x-super-stream=true``, partition streams ``NAME-0 … NAME-(N-1)``,
  each bound with routing key ``"i"`` and binding argument ``x-stream-partition-order=i``.
  Over 0-9-1 a publisher picks the partition by routing key; :func:`partition_for` is the
  choice RabbitMQ's stream clients make (MurmurHash3 x86 32-bit of the routing key, seed
  104729, unsigned, modulo N; rabbitmq-stream-java-client ``HashRoutingStrategy``).
- :func:`stream_bounds`: a stream's first and last offset. AMQP 0-9-1 has no command for
  them, so they are learnt by reading: one consumer from ``first`` (the first delivery's
  ``x-stream-offset`` header) and one from ``last`` (the highest offset of the last chunk).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["declare_super_stream", "partition_names", "partition_for", "stream_bounds",
           "StreamBounds", "murmur3_32"]

_SEED = 104729


def partition_names(name: str, partitions: int) -> list[str]:
    """``["NAME-0", …, "NAME-(N-1)"]``."""
    return [f"{name}-{i}" for i in range(partitions)]


def declare_super_stream(channel, name: str, partitions: int, arguments: dict | None = None) -> list[str]:
    """Declare super stream ``name`` with ``partitions`` partitions on ``channel`` (a
    :class:`~spark_amqp.client.Channel`); idempotent. ``arguments`` are extra stream
    arguments for every partition (``x-max-age``, ``x-max-length-bytes``, ...). Returns the
    partition stream names. Raises ValueError for ``partitions < 1``; the broker's errors
    (e.g. PreconditionFailed 406 when a partition exists with other arguments) as raised by
    the channel."""
    if partitions < 1:
        raise ValueError(f"a super stream needs at least 1 partition, got {partitions}")
    channel.exchange_declare(name, "direct", durable=True, arguments={"x-super-stream": True})
    names = partition_names(name, partitions)
    for i, q in enumerate(names):
        channel.queue_declare(q, durable=True, arguments={**(arguments or {}), "x-queue-type": "stream"})
        channel.queue_bind(q, name, str(i), arguments={"x-stream-partition-order": i})
    return names


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of ``data`` (unsigned int), by the kept ``mmh3`` library."""
    import mmh3

    return mmh3.hash(data, seed, signed=False)


def partition_for(routing_key: str, partitions: int) -> int:
    """The partition (0-based) RabbitMQ's stream clients route ``routing_key`` to."""
    return murmur3_32(routing_key.encode("utf-8"), _SEED) % partitions


@dataclass(frozen=True)
class StreamBounds:
    """A stream's ``first`` and ``last`` offset (both None when empty) and the broker's
    ``message_count`` (RabbitMQ samples it every few seconds, so it may lag)."""

    stream: str
    first: int | None
    last: int | None
    message_count: int


def _read_offsets(conn, stream: str, spec, idle: float, until_idle: bool) -> list[int]:
    ch = conn.channel()
    try:
        ch.basic_qos(1000)
        ch.basic_consume(stream, arguments={"x-stream-offset": spec})
        out: list[int] = []
        stop = time.monotonic() + 10 * idle + 5   # a stream that keeps growing: stop anyway
        while True:
            batch = ch.drain(timeout=idle)
            if not batch or time.monotonic() > stop:
                return out
            out.extend((d.properties.headers or {}).get("x-stream-offset", -1) for d in batch)
            ch.basic_ack(batch[-1].delivery_tag, multiple=True)
            if not until_idle:
                return out
    finally:
        ch.close()


def stream_bounds(conn, stream: str, idle: float = 0.5) -> StreamBounds:
    """First and last offset of ``stream`` by reading (see the module docstring); ``conn`` is
    a :class:`~spark_amqp.client.Connection`. ``idle``: seconds without a delivery that mean
    "nothing more" (or "empty"). Raises NotFound (404) when the stream does not exist."""
    ch = conn.channel()
    try:
        count = ch.queue_declare(stream, passive=True).message_count
    finally:
        if ch.is_open:
            ch.close()
    first = _read_offsets(conn, stream, "first", idle, until_idle=False)
    last = _read_offsets(conn, stream, "last", idle, until_idle=True)
    return StreamBounds(stream, min(first) if first else None, max(last) if last else None, count)
