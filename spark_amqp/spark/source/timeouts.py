"""Timeouts of the source's broker calls, shared by both modes (the queue mode's driver
consumer :mod:`.queues.consumer`, the stream mode's probe :mod:`.streams.probe`)."""

from __future__ import annotations

__all__ = ["RPC_TIMEOUT"]

#: seconds a synchronous method (queue.declare, basic.qos, basic.consume, ...) may wait for its
#: reply before the connection is dropped (``ConnectionLost``) and the reader reconnects with
#: backoff. Heartbeats only detect a dead peer; a live broker that never answers (or answers
#: only after requeueing a crashed consumer's deliveries) would otherwise stall the query.
RPC_TIMEOUT = 60.0
