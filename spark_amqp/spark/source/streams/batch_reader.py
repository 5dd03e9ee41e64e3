"""Batch reads of stream queues (``spark.read.format("amqp").option("stream", ...)``): the
offsets between two specs, resolved on the broker by the driver and read by the executors
(Kafka's ``KafkaBatch``). Same partitions and partition reader as the micro-batch stream
(:mod:`.micro_batch_stream`)."""

from __future__ import annotations

import logging
from typing import Iterator

from pyspark.sql.datasource import DataSourceReader

from ...errors import leading_errors
from .offset_reader import StreamOffsetReader
from .offsets import split_ranges
from .options import EARLIEST, LATEST, StreamOptions
from .partition_reader import StreamRangePartition, read_partition

__all__ = ["AmqpStreamBatchReader"]

log = logging.getLogger(__name__)


@leading_errors("partitions", "read")
class AmqpStreamBatchReader(DataSourceReader):
    """``spark.read.format("amqp").option("stream", ...)``: the offsets between
    ``startingOffsets`` (default earliest; ``latest`` refused) or ``startingTimestamp`` and
    ``endingOffsets`` (default latest; ``earliest`` refused), read by the executors.
    ``probe_factory``: as for :class:`.offset_reader.StreamOffsetReader` (tests)."""

    def __init__(self, options: StreamOptions, probe_factory=None):
        for key, spec, bad, word in (("startingOffsets", options.starting, LATEST, "latest"),
                                     ("endingOffsets", options.ending, EARLIEST, "earliest")):
            if spec == word or (isinstance(spec, dict) and bad in spec.values()):
                raise ValueError(
                    f"Option '{key}' of a batch read of the amqp source cannot be {word!r} "
                    f"(or {bad} in JSON), as in Spark's Kafka source: a batch read goes from "
                    "earlier offsets to later ones; use startingOffsets=earliest/JSON and "
                    "endingOffsets=latest/JSON.")
        self.options = options
        self._probe_factory = probe_factory

    def __getstate__(self) -> dict:
        return {"options": self.options, "_probe_factory": self._probe_factory}

    def partitions(self) -> list:
        """Resolve the range on the broker (driver) and split it."""
        offsets = StreamOffsetReader(self.options, self._probe_factory)
        try:
            start = offsets.resolve(self.options.starting, "earliest", "start")
            end = offsets.resolve(self.options.ending, "latest", "end")
            if isinstance(self.options.ending, dict):  # never past the tail: a reader of
                for s in end:                          # [a, b) needs an offset >= b - 1
                    end[s] = min(end[s], offsets.tail(s, True) or 0)
        finally:
            offsets.close()
        end = {s: max(e, start[s]) for s, e in end.items()}
        o = self.options
        ranges = split_ranges(start, end, o.max_messages_per_partition, o.min_partitions)
        log.info("amqp stream batch read: %s -> %s in %d partitions", start, end, len(ranges))
        return [StreamRangePartition(r.stream, r.start, r.end) for r in ranges]

    def read(self, partition: StreamRangePartition) -> Iterator:
        return read_partition(self.options, partition)
