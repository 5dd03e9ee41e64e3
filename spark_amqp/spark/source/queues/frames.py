"""Message frames shipped inside the source's partitions: sliced on the driver, decoded on the
executors.

The driver's channels run in raw mode (``spark_amqp.protocol.raw_deliveries``): deliveries
arrive as runs of undecoded basic.deliver frames. A partition carries the frames of its
messages exactly as the broker sent them, concatenated (:class:`FramesPart`), so planning a
batch on the driver copies bytes and makes no per-message Python object, and pickling a
partition is one ``bytes`` object. The occasional delivery the client decoded (a message split
across socket reads, an unusual frame layout) is encoded back into the same frames
(:func:`delivery_frames`). The executor decodes the frames column-wise
(``deliver_columns``, compiled when built) into :class:`..arrow.PackedColumns`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from spark_amqp.protocol.frames import encode_message
from spark_amqp.protocol.raw_deliveries import RawDeliveries, deliver_columns_fast
from spark_amqp.protocol.spec import Basic

from ..arrow import PackedColumns, pack_columns
from ...errors import UndecodableMessages

__all__ = ["FramesPart", "frames_part", "frames_chunks", "delivery_frames", "unpack",
           "UndecodableMessages"]


@dataclass
class FramesPart:
    """Messages ``start .. start + n - 1`` of ``queue``: ``frames`` holds their basic.deliver
    method, content header and body frames in offset order (AMQP 0-9-1 §4.2.3 framing)."""

    queue: str
    start: int
    n: int
    frames: bytes


def delivery_frames(d: Any) -> bytes:
    """The basic.deliver frames of a decoded delivery (``spark_amqp.client.Delivery`` or any
    object with ``delivery_tag``, ``redelivered``, ``exchange``, ``routing_key``,
    ``properties`` (a ``BasicProperties`` or None) and ``body``; ``consumer_tag`` optional).
    Raises ``AMQPSyntaxError`` for values AMQP cannot carry."""
    body = d.body if isinstance(d.body, bytes) else bytes(d.body)
    method = Basic.Deliver(getattr(d, "consumer_tag", "") or "", d.delivery_tag,
                           bool(d.redelivered), d.exchange or "", d.routing_key or "")
    return encode_message(1, method, d.properties, body, frame_max=0)


def frames_part(queue: str, start: int, pieces: Sequence[tuple[Any, int, int]]) -> FramesPart:
    """Build the part for offsets ``start ..`` from ``QueueBuffer.slice`` pieces
    (``(run, lo, hi)`` or ``(delivery, 0, 1)``)."""
    chunks = []
    n = 0
    for it, lo, hi in pieces:
        if it.__class__ is RawDeliveries:
            chunks.append(it.frames(lo, hi))
        else:
            chunks.append(delivery_frames(it))
        n += hi - lo
    return FramesPart(queue, start, n, chunks[0] if len(chunks) == 1 else b"".join(chunks))


def frames_chunks(pieces: Sequence[tuple[Any, int, int]]) -> list:
    """The frames of ``QueueBuffer.slice`` pieces as bytes-like chunks without copying a
    run's data (``memoryview`` slices of it; a decoded delivery is encoded back): what the
    partition server sends (:mod:`.partition_server`). Concatenated they equal
    ``frames_part(...).frames``."""
    out: list = []
    for it, lo, hi in pieces:
        if it.__class__ is RawDeliveries:
            a = it.ends[lo - 1] if lo else 0
            b = it.ends[hi - 1] if hi else 0
            out.append(memoryview(it.data)[a:b])
        else:
            out.append(delivery_frames(it))
    return out


def unpack(part: FramesPart, include_headers: bool) -> PackedColumns:
    """Executor side: decode the part's frames into columns (see module doc). When the
    frames are malformed (e.g. a bad property table) or do not hold exactly ``part.n`` deliveries: :class:`UndecodableMessages` naming the
    queue, the offsets and the decoder's error."""
    try:
        bodies, red, exchanges, keys, props = deliver_columns_fast(part.frames, part.n, True)
    except Exception as e:
        raise UndecodableMessages(f"messages {part.start}..{part.start + part.n - 1} of queue "
                      f"{part.queue!r} could not be decoded: {e}") from e
    return pack_columns(part.queue, part.start, bodies, red, exchanges, keys, props,
                        include_headers)
