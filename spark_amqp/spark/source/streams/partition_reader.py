"""The stream mode's partition reader: what an executor does with a
:class:`StreamRangePartition` (Kafka's ``KafkaMicroBatchPartitionReader``): it connects and
consumes its own offset range (:func:`.consumer.read_range`, which fails over across a
cluster's nodes); no message passes through the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from pyspark.sql.datasource import InputPartition

from .options import StreamOptions

__all__ = ["StreamRangePartition", "read_partition"]


@dataclass
class StreamRangePartition(InputPartition):
    """Offsets ``[start, end)`` of ``stream``, read by the executor that gets it."""

    stream: str
    start: int
    end: int

    def __post_init__(self) -> None:  # InputPartition.__init__(value) is bypassed
        self.value = None


def read_partition(options: StreamOptions, partition: StreamRangePartition) -> Iterator:
    """The rows of one range partition as Arrow record batches (:func:`.consumer.read_range`).
    A partition that is not a range is read as empty: when ``partitions()`` returns none (a
    batch read of empty streams), PySpark still reads one ``InputPartition(None)``
    (pyspark/sql/worker/plan_data_source_read.py)."""
    from .consumer import read_range

    if getattr(partition, "stream", None) is None:
        return iter(())
    return read_range(options, partition.stream, partition.start, partition.end)
