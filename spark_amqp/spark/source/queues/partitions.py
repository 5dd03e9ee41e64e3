"""The queue mode's input partitions of a planned batch, and the life of the server that holds
big batches' frames (:mod:`.partition_server`). No broker I/O.

``partitions(start, end)`` slices the deliveries planned in ``(start, end]``, as received by
the driver's raw-mode channels, into :class:`.partition_reader.QueueInputPartition`s of at
most ``maxMessagesPerPartition`` messages and ``maxBytesPerPartition`` bytes (at least one
message each). The first ``maxInlineBytesPerTrigger`` bytes of a batch travel inside the
partitions; the rest stay in the source runner, served to the executors over a socket until
the batch is committed (a partition then carries a :class:`.partition_server.FramesRef`), so a
big batch does not bloat Spark's tasks. A range planned by an earlier session (restart replay or
reconnect) yields no partitions: its deliveries were never acked, so the broker redelivers them
(redelivered=true) into later batches.
"""

from __future__ import annotations

import logging
from typing import Any

from .buffer import Session
from .frames import frames_chunks, frames_part
from .offsets import SourceOffset
from .partition_reader import QueueInputPartition
from .partition_server import PartitionServer
from .planner import with_framing

__all__ = ["QueuePartitioner"]

log = logging.getLogger(__name__)


class QueuePartitioner:
    """Cuts planned batches into partitions and owns the partition server (started at first
    use, released per committed batch, closed with the query). ``options``: the source's
    :class:`.options.SourceOptions`.

    Readable: :attr:`server` (None until a batch needed it), :attr:`stats`
    (``replayed_ranges``: batches of an earlier session that yielded nothing; ``served``).
    """

    def __init__(self, options):
        self.options = options
        self.server: PartitionServer | None = None
        self._server_failed = False  # could not bind: every partition goes inline
        self.stats = {"replayed_ranges": 0}

    def partitions(self, session: Session | None, start: dict, end: dict) -> list:
        """The :class:`.partition_reader.QueueInputPartition`\\ s of the deliveries ``session``
        planned in ``(start, end]`` (offset dicts); ``[]`` (logged) for a range of an earlier
        session. Raises the buffers' bookkeeping error (``LookupError``) for a range that is
        not buffered."""
        s_off = SourceOffset.from_dict(start)
        e_off = SourceOffset.from_dict(end)
        if session is None or e_off.session != session.id:
            if s_off != e_off:
                self.stats["replayed_ranges"] += 1
                log.warning("amqp source: batch range %s -> %s was planned by an earlier session "
                            "(restart or reconnect); its messages are redelivered by the broker "
                            "into later batches", s_off.to_json(), e_off.to_json())
            return []
        parts: list[QueueInputPartition] = []
        step = self.options.max_messages_per_partition
        max_bytes = with_framing(self.options.max_bytes_per_partition)
        inline_room = self.options.max_inline_bytes_per_trigger
        for q, e in e_off.queues:
            buf = session.buffers.get(q)
            if buf is None:
                continue
            b = s_off.get(q, 0) if s_off.session == session.id else 0
            if b < e and (b < buf.acked or e > buf.received):
                buf.slice(b, e)  # raises the bookkeeping error (LookupError)
            lo = b
            while lo < e:
                hi = buf.end_within(lo, max_bytes, min(lo + step, e))
                if hi <= lo:  # not buffered: slice() raises the bookkeeping error
                    hi = min(lo + step, e)
                pieces = buf.slice(lo, hi)
                nbytes = buf.bytes_between(lo, hi)
                server = None if nbytes <= inline_room else self._partition_server()
                if server is None:
                    inline_room -= nbytes
                    data: Any = frames_part(q, lo, pieces)
                else:
                    data = server.hold(session.id, q, lo, hi - lo, frames_chunks(pieces))
                parts.append(QueueInputPartition(session.id, data))
                lo = hi
        return parts

    def _partition_server(self) -> PartitionServer | None:
        """The runner's partition server, started at first use; None (logged once, partitions
        then go inline) when it cannot bind."""
        if self.server is None and not self._server_failed:
            try:
                self.server = PartitionServer()
            except OSError as e:
                self._server_failed = True
                log.warning("amqp source: cannot serve partitions from the driver (%s); big "
                            "batches travel inside Spark's tasks", e)
            else:
                log.info("amqp source: serving partitions at %s:%d", self.server.host,
                         self.server.port)
        return self.server

    def release(self, committed: dict, current_session: str | None) -> None:
        """Forget the served partitions the committed offset ``committed`` covers (see
        :meth:`.partition_server.PartitionServer.release`)."""
        if self.server is not None:
            off = SourceOffset.from_dict(committed)
            self.server.release(off.session, off.as_map(), current_session)

    def close(self, fast: bool = False) -> None:
        """Stop the partition server (``fast``: without waiting for its thread)."""
        server, self.server = self.server, None
        if server is not None:
            self.stats["served"] = server.stats["served"]
            server.close(wait=not fast)
