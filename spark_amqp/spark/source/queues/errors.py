"""The errors a queue-mode query fails with, and how the driver classifies what its consumer
raises: a connection error (the session is lost, reconnect) or a body above
``maxMessageBytes`` (fail the query). No I/O; the protocol's errors are imported lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import QueueConsumer

__all__ = ["BrokerUnreachable", "MessageTooLarge", "body_too_large", "is_connection_error",
           "message_too_large"]


class BrokerUnreachable(ConnectionError):
    """No broker address could be reached for ``failoverTimeout`` seconds after the source
    lost its connection: the query fails with this error, whose message lists every address
    and its last error. Nothing was acked after the loss: the unacked deliveries are back in
    their queues, and a restarted query reads them (as redeliveries) from its checkpoint."""


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


def is_connection_error(e: BaseException) -> bool:
    """True for what a lost or refused connection raises (``OSError``, which includes the
    client's ``ConnectionLost``; an ``AMQPError`` of a channel or connection the broker
    closed; ``EOFError``): the session is lost, the reader reconnects."""
    from spark_amqp.protocol.errors import AMQPError

    return isinstance(e, (OSError, AMQPError, EOFError))


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
