"""The errors a queue-mode query fails with besides the client's (a body above
``maxMessageBytes``: fail the query). Whether an error ends the session (reconnect) or the
query is the client's one classification (:func:`spark_amqp.client.failover.classify`);
:class:`BrokerUnreachable` is the client's, named here too. No I/O."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import QueueConsumer

from spark_amqp.client.failover import BrokerUnreachable

__all__ = ["BrokerUnreachable", "MessageTooLarge", "body_too_large", "message_too_large"]


class MessageTooLarge(ValueError):
    """A queue holds a message whose body is above ``maxMessageBytes``: the query fails
    (retrying would take the same message again). Nothing was acked: the client closed the
    connection before the body arrived and the broker requeued every unacked delivery."""


def body_too_large(e: BaseException | None):
    """The ``spark_amqp.protocol.errors.BodyTooLarge`` decoder error behind ``e`` (``e``
    itself or its cause/context chain, at most 8 deep), or None."""
    from spark_amqp.protocol.errors import BodyTooLarge

    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, BodyTooLarge):
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


def message_too_large(big, consumer: "QueueConsumer | None",
                      queues: Sequence[str]) -> MessageTooLarge:
    """The :class:`MessageTooLarge` for ``big`` (a ``BodyTooLarge``), naming the queue whose
    channel received it (asked of ``consumer`` before it is closed), the size and the limit."""
    queue = consumer.queue_of_channel(big.channel) if consumer is not None else None
    where = f"queue {queue!r}" if queue else f"a queue of {', '.join(queues)}"
    return MessageTooLarge(
        f"{where} holds a message of {big.body_size} bytes, above maxMessageBytes "
        f"({big.limit} bytes). Raise the option maxMessageBytes (with spark.driver.memory "
        "and spark.executor.memory to match: the message goes through alone in its own "
        "batch), or move the message out of the queue. Nothing was acked: the broker "
        "requeued it with the other unacked deliveries.")
