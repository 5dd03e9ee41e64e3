"""What a mode's micro-batch stream needs of its driver side: the :class:`OffsetReader`
protocol.

Laid out as Spark's Kafka source: the micro-batch stream (Kafka's ``KafkaMicroBatchStream``;
here :class:`.queues.micro_batch_stream.AmqpQueueMicroBatchStream` and
:class:`.streams.micro_batch_stream.AmqpStreamMicroBatchStream`) is the thin adapter Spark
calls, and its offset reader (Kafka's ``KafkaOffsetReader``) is the driver's part that talks to
the broker: the queue mode's :class:`.queues.offset_reader.QueueOffsetReader` (the driver's
consumer session: drain, plan, take, ack, loss) and the stream mode's
:class:`.streams.offset_reader.StreamOffsetReader` (the tail probe and the start/end specs).
Offsets are JSON-able dicts (sorted keys when Spark compares them as strings). No I/O here.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .read_limits import Limits

__all__ = ["OffsetReader"]


@runtime_checkable
class OffsetReader(Protocol):
    """A mode's driver side (see the module doc). Nothing connects before the first call that
    needs the broker; every method runs in Spark's long-lived source runner on the driver."""

    def initial_offset(self) -> dict:
        """Where a new query starts (``initialOffset``)."""

    def next_end(self, start: dict | None, limits: Limits) -> dict:
        """The end of the next batch after ``start`` under ``limits`` (``latestOffset``);
        ``start`` itself (or the last end returned, on PySpark 4.0/4.1 where ``start`` is
        None) when there is nothing new."""

    def latest_available(self) -> dict | None:
        """The newest offset the broker holds, for the query progress
        (``reportLatestOffset``); None when unknown."""

    def prepare_available_now(self) -> None:
        """Snapshot what ``Trigger.AvailableNow`` reads up to."""

    def commit(self, end: dict) -> None:
        """Spark committed the batch ending at ``end``."""

    def close(self, fast: bool = False) -> None:
        """Release the broker connections (``fast``: Spark is ending the process)."""
