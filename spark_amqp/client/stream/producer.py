"""A publisher on a stream: batched publishes, publisher confirms, deduplication.

A producer is a ``declare_publisher`` on a connection to the stream's leader. Each message gets
a publishing id (uint64); the broker confirms ids (``publish_confirm``) once the stream stored
them, or reports them (``publish_error``) with a code. With a ``name`` (the publisher
reference), the broker keeps the highest id it stored for that name and drops a message whose
id is not above it, confirming it all the same: deduplication (RabbitMQ docs "Streams",
"Deduplication"; the Java client's ``ProducerBuilder.name``). A new producer with the same
name starts after ``query_publisher_sequence`` (:attr:`Producer.next_publishing_id`), or
takes ids from the application (``send(..., publishing_id=...)``, e.g. derived from the
source offsets: what makes a replayed write exactly-once).

Publishing is pipelined: :meth:`Producer.send` queues a message and writes a publish frame
(the compiled encoder) per ``batch_size`` messages or on :meth:`Producer.flush`; at most
``max_unconfirmed`` messages wait for their confirm (``send`` blocks beyond that: RabbitMQ
itself stops reading a connection with too many unconfirmed messages);
:meth:`Producer.wait_for_confirms` waits for all.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from ...protocol.stream import commands as C
from ..errors import ConfirmTimeout, ConnectionClosed

__all__ = ["Producer", "PublishResult"]

_FRAME_OVERHEAD = 13  # size, key, version, publisher id, count
_ENTRY_OVERHEAD = 12  # publishing id, entry size


@dataclass
class PublishResult:
    """What :meth:`Producer.wait_for_confirms` saw: ``confirmed`` (int: distinct publishing
    ids confirmed since the producer opened; an id sent again before its confirm came is
    counted once, and the broker stores it at most once), ``errors`` (``{publishing_id: code}``: messages the broker
    did not store, e.g. 0x11 PRECONDITION_FAILED, 0x12 PUBLISHER_DOES_NOT_EXIST)."""

    confirmed: int
    errors: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors


class Producer:
    """A publisher (create with :meth:`~.client.StreamClient.producer`).

    Attributes:
        stream (str), publisher_id (int, per connection), name (str or None: the publisher
        reference for deduplication), next_publishing_id (int: the id :meth:`send` gives the
        next message without an explicit one), batch_size (messages per frame),
        max_unconfirmed (int), node (the :class:`~.node.NodeConnection` to the leader).

    Thread safety: one thread at a time publishes; confirms arrive on the I/O thread.
    """

    def __init__(self, node, stream: str, publisher_id: int, name: str | None,
                 next_publishing_id: int, batch_size: int = 500, max_unconfirmed: int = 20000):
        if batch_size < 1 or max_unconfirmed < 1:
            raise ValueError("batch_size and max_unconfirmed must be >= 1")
        self.node = node
        self.stream = stream
        self.publisher_id = publisher_id
        self.name = name
        self.next_publishing_id = next_publishing_id
        self.batch_size = batch_size
        self.max_unconfirmed = max_unconfirmed
        self._budget = max(4096, node.frame_max or 1 << 20) - _FRAME_OVERHEAD
        self._batch: list = []
        self._batch_ids: list | None = None  # explicit ids of the batch (None: consecutive)
        self._batch_first = next_publishing_id
        self._batch_bytes = 0
        self._outstanding: set = set()
        self._confirmed = 0
        self._errors: dict = {}
        self._cond = threading.Condition()
        self._error: BaseException | None = None
        self._closed = False
        self._encode = C.encode_publish
        self._encode_ids = C.encode_publish_ids

    # ------------------------------------------------------------------ I/O thread side

    def _on_confirm(self, ids) -> None:
        with self._cond:
            out = self._outstanding
            before = len(out)
            out.difference_update(ids)
            self._confirmed += before - len(out)
            self._cond.notify_all()

    def _on_error(self, errors: list) -> None:
        with self._cond:
            for pid, code in errors:
                if pid in self._outstanding:
                    self._outstanding.discard(pid)
                    self._errors[pid] = code
            self._cond.notify_all()

    def _on_fail(self, err: BaseException) -> None:
        with self._cond:
            if self._error is None:
                self._error = err
            self._cond.notify_all()

    # ------------------------------------------------------------------ publishing

    def _check(self) -> None:
        if self._error is not None:
            err = self._error
            if isinstance(err, ConnectionClosed):
                raise ConnectionClosed(str(err))
            raise err

    def send(self, message: bytes, publishing_id: int | None = None) -> int:
        """Queue ``message`` (bytes: an AMQP 1.0 encoded message, as streams store them) with
        ``publishing_id`` (None: :attr:`next_publishing_id`, then incremented); it is written
        with the next full batch or :meth:`flush`. Returns its publishing id. Blocks while
        ``max_unconfirmed`` messages wait for confirms. Raises the producer's error
        (``ConnectionLost``, ``StreamNotAvailable``...), ``TypeError`` for a non-bytes message,
        ``ValueError`` for a message that cannot fit a frame (``frame_max``)."""
        if self._error is not None:
            self._check()
        if type(message) is not bytes:
            if not isinstance(message, (bytes, bytearray, memoryview)):
                raise TypeError(f"a message must be bytes, got {type(message).__name__}")
            message = bytes(message)
        size = len(message) + _ENTRY_OVERHEAD
        if size > self._budget:
            raise ValueError(f"a message of {len(message):,} bytes does not fit a frame of "
                             f"frame_max {self.node.frame_max:,} bytes")
        if self._batch_bytes + size > self._budget:
            self.flush()
        if publishing_id is None:
            pid = self.next_publishing_id
            self.next_publishing_id = pid + 1
        else:
            pid = int(publishing_id)
            if not 0 <= pid <= 0xFFFFFFFFFFFFFFFF:
                raise ValueError(f"publishing id {pid} is not a uint64")
            if pid >= self.next_publishing_id:
                self.next_publishing_id = pid + 1
        batch = self._batch
        if not batch:
            self._batch_first = pid
        elif self._batch_ids is not None:
            self._batch_ids.append(pid)
        elif pid != self._batch_first + len(batch):  # no longer consecutive: list the ids
            self._batch_ids = list(range(self._batch_first, self._batch_first + len(batch)))
            self._batch_ids.append(pid)
        self._batch.append(message)
        self._batch_bytes += size
        if len(self._batch) >= self.batch_size:
            self.flush()
        return pid

    def send_batch(self, messages: list, publishing_ids: list | None = None) -> int:
        """Queue every message of ``messages`` (with ``publishing_ids``, one each, or the next
        consecutive ids) and write them in frames of ``batch_size``; returns the last
        publishing id. Same errors as :meth:`send`."""
        if publishing_ids is not None and len(publishing_ids) != len(messages):
            raise ValueError(f"{len(publishing_ids)} publishing id(s) for {len(messages)} "
                             "message(s)")
        if publishing_ids is not None:
            last = self.next_publishing_id - 1
            for m, pid in zip(messages, publishing_ids):
                last = self.send(m, pid)
            return last
        # consecutive ids: whole frames at once when they fit (the common, fast case)
        self.flush()
        k = self.batch_size
        i, n = 0, len(messages)
        while i < n:
            part = messages[i:i + k]
            if self._error is not None:
                self._check()
            if sum(map(len, part)) + _ENTRY_OVERHEAD * len(part) > self._budget or \
                    any(type(m) is not bytes for m in part):
                for m in part:
                    self.send(m)
                self.flush()
            else:
                first = self.next_publishing_id
                self.next_publishing_id = first + len(part)
                self._write(self._encode(self.publisher_id, first, part),
                            range(first, first + len(part)), len(part))
            i += k
        return self.next_publishing_id - 1

    def flush(self) -> None:
        """Write the queued messages (one publish frame)."""
        batch = self._batch
        if not batch:
            return
        ids = self._batch_ids
        n = len(batch)
        if ids is None:
            first = self._batch_first
            frame = self._encode(self.publisher_id, first, batch)
            new = range(first, first + n)
        else:
            frame = self._encode_ids(self.publisher_id, ids, batch)
            new = ids
        self._batch = []
        self._batch_ids = None
        self._batch_bytes = 0
        self._write(frame, new, n)

    def _write(self, frame: bytes, new, n: int) -> None:
        """Wait for room in the unconfirmed window, count ``new`` ids outstanding, write."""
        with self._cond:
            while len(self._outstanding) + n > self.max_unconfirmed and self._outstanding \
                    and self._error is None:
                self._cond.wait(1.0)
            self._check()
            self._outstanding.update(new)
        self.node.send_frame(frame)

    def wait_for_confirms(self, timeout: float | None = None) -> PublishResult:
        """Flush, then wait until every message sent is confirmed or refused, for at most
        ``timeout`` seconds (None: as long as it takes). Returns a :class:`PublishResult`
        (errors: the refused ids with their codes, cleared by this call). Raises
        ``ConfirmTimeout`` (``outstanding`` = how many are still unconfirmed) or the
        producer's error (``ConnectionLost``, ``StreamNotAvailable``: the messages without a
        confirm may or may not be stored; with a ``name``, sending them again with the same
        publishing ids stores each once)."""
        self.flush()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._outstanding:
                self._check()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise ConfirmTimeout(len(self._outstanding), timeout)  # type: ignore[arg-type]
                self._cond.wait(left if left is not None else 1.0)
            errors, self._errors = self._errors, {}
            return PublishResult(self._confirmed, errors)

    @property
    def unconfirmed(self) -> int:
        """Messages written and not yet confirmed or refused (the batch not counted)."""
        return len(self._outstanding)

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush, wait up to ``timeout`` seconds for the confirms, delete the publisher.
        Idempotent; raises nothing (a confirm still missing is logged as lost in the
        result of :meth:`wait_for_confirms`, which the caller should call first)."""
        if self._closed:
            return
        self._closed = True
        node = self.node
        try:
            if self._error is None:
                try:
                    self.wait_for_confirms(timeout)
                except Exception:  # noqa: BLE001 - closing
                    pass
                if node.is_open:
                    node.request(C.DeletePublisher(0, self.publisher_id))
        except Exception:  # noqa: BLE001 - closing: the connection may be gone
            pass
        finally:
            node.producers.pop(self.publisher_id, None)
            if self._error is None:
                self._error = ConnectionClosed(f"producer of {self.stream!r} closed")

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<Producer {self.stream!r} id={self.publisher_id} name={self.name!r} "
                f"next={self.next_publishing_id} on {self.node.where}>")

