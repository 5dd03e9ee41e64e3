"""The queue mode's partition reader: what an executor does with a
:class:`QueueInputPartition` (Kafka's ``KafkaMicroBatchPartitionReader``). No broker I/O: the
messages' frames travel inside the partition, or are fetched from the driver's source runner
(:mod:`.partition_server`), then decoded column-wise (:mod:`.frames`) into Arrow record batches
of the query's columns (:mod:`..arrow`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from pyspark.sql.datasource import InputPartition

from ..arrow import to_record_batches
from .frames import FramesPart, unpack
from .partition_server import FramesRef, fetch

__all__ = ["QueueInputPartition", "read_partition"]


@dataclass
class QueueInputPartition(InputPartition):
    """One task's worth of messages of one queue: offsets ``data.start .. data.start+data.n-1``
    of ``session``. ``data`` carries the messages' frames (:class:`.frames.FramesPart`:
    pickling it ships them) or where to fetch them from the driver's source runner
    (:class:`.partition_server.FramesRef`)."""

    session: str
    data: FramesPart | FramesRef

    def __post_init__(self) -> None:  # InputPartition.__init__(value) is bypassed by dataclass
        self.value = None


def read_partition(options, partition: QueueInputPartition) -> Iterator:
    """Executor side: the partition's rows as Arrow record batches with ``options.columns``
    (``options``: the source's :class:`.options.SourceOptions`). A partition holding a
    :class:`.partition_server.FramesRef` is first fetched from the driver's source runner
    (``PartitionFetchError`` when that fails: the batch fails, nothing in it is acked)."""
    part = partition.data
    if part is None:
        return iter(())
    if isinstance(part, FramesRef):
        part = FramesPart(part.queue, part.start, part.n, fetch(part))
    return to_record_batches(unpack(part, options.include_headers), columns=options.columns)
