"""The frame bytes a consumer's basic.deliver messages share, kept per consumer: the bytes
around the delivery tag (and, for a stream, the ``x-stream-offset`` value) depend only on the
exchange / routing key, the properties and the body size, so they are built once per run of
equal ones and reused (:mod:`.channel_delivery`; the compiled writers of
:mod:`spark_amqp.protocol.server_frames` append them). One type per delivery shape, chosen by
the consumer's queue: :class:`DeliverFrames` (classic and quorum queues: before the tag, after
the redelivered flag) and :class:`StreamDeliverFrames` (streams: the offset header's value goes
between ``mid`` and ``post``). Pure, no I/O.
"""

from __future__ import annotations

__all__ = ["DeliverFrames", "StreamDeliverFrames", "frames_for"]


class DeliverFrames:
    """A queue consumer's last basic.deliver parts: the message key they fit (``enc``: the
    exchange / routing key bytes, ``props``: the raw properties, ``blen``: the body size;
    ``enc`` None or ``blen`` -1: nothing cached) and the bytes before the delivery tag
    (``pre``) and after the redelivered flag (``post``)."""

    __slots__ = ("enc", "props", "blen", "pre", "post")

    def __init__(self) -> None:
        self.enc: bytes | None = None
        self.props: bytes | None = None
        self.blen = -1
        self.pre = b""
        self.post = b""


class StreamDeliverFrames:
    """A stream consumer's last basic.deliver parts: as :class:`DeliverFrames`, with the
    properties split around the ``x-stream-offset`` header's value (``mid`` before it,
    ``post`` after it; ``enc`` None: nothing cached)."""

    __slots__ = ("enc", "props", "blen", "pre", "mid", "post")

    def __init__(self) -> None:
        self.enc: bytes | None = None
        self.props: bytes | None = None
        self.blen = -1
        self.pre = b""
        self.mid = b""
        self.post = b""


def frames_for(queue) -> DeliverFrames | StreamDeliverFrames:
    """The delivery frames type of a consumer of ``queue`` (a stream's, or a queue's)."""
    return StreamDeliverFrames() if queue.stream else DeliverFrames()
