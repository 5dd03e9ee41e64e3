"""A subscription to a stream: chunks handed whole to the application, credit given back as it
takes them.

Flow control is the protocol's credit (PROTOCOL.adoc "Credit"; RabbitMQ's
``rabbit_stream_reader``): one credit lets the broker send one chunk. The subscription starts
with ``credit`` chunks; each chunk the application takes (:meth:`Consumer.next_chunk`) is given
back, in batches of half the initial credit, so at most ``credit`` chunks wait in memory
whatever the application's pace. The I/O thread only parses each chunk's header and checks its
CRC-32: the messages stay in the received bytes until :meth:`~.Chunk.messages` splits them
(compiled) in the application's thread.

A subscription from an offset inside a chunk receives the whole chunk (RabbitMQ sends chunks);
:meth:`Consumer.messages` leaves out the records below the offset asked for, and
:meth:`Consumer.next_chunk` says where that is (:attr:`Consumer.start_offset`).
"""

from __future__ import annotations

import datetime as dt
import queue
from typing import Any, Callable, Iterator

from ...protocol.stream import commands as C
from ...protocol.stream.chunk import Chunk
from ...protocol.stream.constants import ChunkType, OffsetType
from ..errors import ConnectionClosed

__all__ = ["Consumer", "offset_spec"]

_EMPTY = queue.Empty


def offset_spec(offset: Any) -> C.OffsetSpec:
    """An :class:`~spark_amqp.protocol.stream.commands.OffsetSpec` from what users write:
    ``"first"``, ``"last"``, ``"next"``, an ``int`` offset (>= 0), a ``datetime`` (a
    timestamp: the first chunk written at or after it; naive datetimes are UTC), or an
    ``OffsetSpec``. Raises ``ValueError`` naming what it got."""
    if isinstance(offset, C.OffsetSpec):
        return offset
    if isinstance(offset, str):
        spec = {"first": C.OffsetSpec.first, "last": C.OffsetSpec.last,
                "next": C.OffsetSpec.next}.get(offset.lower())
        if spec is None:
            raise ValueError(f"offset {offset!r}: use 'first', 'last', 'next', an offset "
                             "(int >= 0) or a datetime")
        return spec()
    if isinstance(offset, bool):
        raise ValueError(f"offset {offset!r} is not an offset")
    if isinstance(offset, int):
        if not 0 <= offset <= 0xFFFFFFFFFFFFFFFF:
            raise ValueError(f"offset {offset} is not a stream offset (0 .. 2**64-1)")
        return C.OffsetSpec.offset(offset)
    if isinstance(offset, dt.datetime):
        if offset.tzinfo is None:
            offset = offset.replace(tzinfo=dt.timezone.utc)
        return C.OffsetSpec.timestamp(int(offset.timestamp() * 1000))
    raise ValueError(f"offset {offset!r}: use 'first', 'last', 'next', an offset (int >= 0) "
                     "or a datetime")


class Consumer:
    """A subscription (create with :meth:`~.client.StreamClient.consumer`).

    Attributes:
        stream (str), subscription_id (int, per connection), name (str or None: the
        reference its offsets are stored under), offset_spec (where it started),
        start_offset (int or None: the offset asked for, for an ``OffsetSpec.offset``),
        offset (int or None: the offset after the last record taken; None before any chunk),
        credit (int: the initial credit, chunks), chunks_received (int), node (the
        :class:`~.node.NodeConnection` it reads from), active (bool: False while a single
        active consumer waits its turn).

    Thread safety: one thread takes chunks; ``close`` may be called from any thread.
    """

    def __init__(self, node, stream: str, subscription_id: int, spec: C.OffsetSpec, credit: int,
                 name: str | None, properties: dict,
                 on_update: Callable[[bool], Any] | None = None):
        self.node = node
        self.stream = stream
        self.subscription_id = subscription_id
        self.offset_spec = spec
        self.start_offset = spec.value if spec.type == OffsetType.OFFSET else None
        self.offset: int | None = None
        self.credit = credit
        self.name = name
        self.properties = dict(properties)
        self.chunks_received = 0
        self.active = "single-active-consumer" not in self.properties
        self._on_update = on_update
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._refill = max(1, credit // 2)
        self._taken = 0
        self._error: BaseException | None = None
        self._closed = False

    # ------------------------------------------------------------------ I/O thread side

    def _on_chunk(self, chunk: Chunk) -> None:
        self.chunks_received += 1
        self._queue.put(chunk)

    def _on_error(self, err: BaseException) -> None:
        if self._error is None:
            self._error = err
        self._queue.put(None)  # wakes a waiting next_chunk

    def _consumer_update(self, active: bool):
        """Single active consumer (3.11+): the broker made this consumer active or not;
        the answer says where to start (the offset after the last record taken, else the
        original offset specification)."""
        self.active = active
        if self._on_update is not None:
            try:
                self._on_update(active)
            except Exception:  # pragma: no cover
                pass
        if self.offset is not None:
            return C.OffsetSpec.offset(self.offset)
        return self.offset_spec

    # ------------------------------------------------------------------ application side

    def next_chunk(self, timeout: float | None = None) -> Chunk | None:
        """The next chunk (a :class:`~spark_amqp.protocol.stream.chunk.Chunk`), waiting up to
        ``timeout`` seconds (None: until one comes); None on timeout. Gives its credit back.
        Raises the subscription's error (``ConnectionLost``, the broker's typed error, e.g.
        ``StreamNotAvailable`` when the stream's leader moved or it was deleted;
        ``ConnectionClosed`` after :meth:`close`) once the chunks received before it are
        taken."""
        while True:
            try:
                chunk = self._queue.get(timeout=timeout) if timeout != 0 else \
                    self._queue.get_nowait()
            except _EMPTY:
                return None
            if chunk is None:
                self._raise()
            self._taken += 1
            if self._taken >= self._refill:
                n, self._taken = self._taken, 0
                if self._error is None and not self._closed:
                    self.node.send_command(C.Credit(self.subscription_id, n))
            if chunk.chunk_type != ChunkType.USER:
                continue  # tracking chunks (chunk_selector=all): no messages
            self.offset = chunk.chunk_id + chunk.num_records
            return chunk

    def _raise(self):
        self._queue.put(None)  # the next call raises too
        err = self._error or ConnectionClosed(f"consumer of {self.stream!r} closed")
        if isinstance(err, ConnectionClosed):
            raise ConnectionClosed(str(err))
        raise err

    def chunks(self, timeout: float | None = None) -> Iterator[Chunk]:
        """Chunks until one does not come within ``timeout`` seconds (None: forever)."""
        while True:
            ch = self.next_chunk(timeout)
            if ch is None:
                return
            yield ch

    def messages(self, timeout: float | None = None) -> Iterator[tuple]:
        """``(offset, message bytes)`` pairs until no chunk comes within ``timeout`` seconds,
        the records below :attr:`start_offset` left out. (The messages are AMQP 1.0 encoded
        as the stream stores them.)"""
        for ch in self.chunks(timeout):
            lo = self.start_offset if self.start_offset is not None and \
                self.start_offset > ch.chunk_id else ch.chunk_id
            yield from zip(range(lo, ch.chunk_id + ch.num_records), ch.messages(lo))

    def store_offset(self, offset: int) -> None:
        """Store ``offset`` (the last one processed, by convention) for this consumer's
        ``name`` on the stream (``store_offset``: no reply; read it back with
        :meth:`~.client.StreamClient.query_offset`). Raises ValueError without a name."""
        if not self.name:
            raise ValueError("store_offset needs the consumer's name (consumer(..., name=...))")
        self.node.send_command(C.StoreOffset(self.name, self.stream, int(offset)))

    def close(self) -> None:
        """Unsubscribe (when the connection is still open) and stop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        node = self.node
        try:
            if node.is_open and self._error is None:
                node.request(C.Unsubscribe(0, self.subscription_id))
        except Exception:  # noqa: BLE001 - closing: the connection may be gone
            pass
        finally:
            node.consumers.pop(self.subscription_id, None)
            if self._error is None:
                self._error = ConnectionClosed(f"consumer of {self.stream!r} closed")
            self._queue.put(None)

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<Consumer {self.stream!r} sub={self.subscription_id} offset={self.offset} "
                f"on {self.node.where}>")

