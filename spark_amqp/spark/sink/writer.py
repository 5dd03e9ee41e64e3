"""The ``amqp`` sink: ``df.write.format("amqp")`` and ``df.writeStream.format("amqp")``.

```python
(df.write.format("amqp")
   .option("uri", "amqp://guest:guest@localhost:5672/%2F")
   .option("exchange", "events")          # overrides an `exchange` column; default ""
   .option("routingKey", "flights.jfk")   # overrides a `routing_key` column
   .mode("append")                        # required (see "Save modes")
   .save())
```

Input columns: :mod:`spark_amqp.spark.sink.convert` (``body`` required; the source's column
names; unknown columns rejected). Options: :mod:`spark_amqp.spark.sink.options`. Both are
validated in the writer constructors, which Spark runs on the driver at ``save()`` /
``start()``, so mistakes fail before any task runs.

Where things run (lessons §1.3): ``AmqpDataSource.writer()`` / ``streamWriter()`` build the
writer on the driver; it is pickled to the executors, where :meth:`write` runs once per
partition (per micro-batch) with an iterator of ``pyarrow.RecordBatch``; each task opens its
own connection, publishes under publisher confirms with a bounded in-flight window and
returns only after every message is confirmed (:mod:`spark_amqp.spark.sink.publish`).
``commit`` / ``abort`` run on the driver in a *fresh* process on a freshly built writer: they
hold no channel and only aggregate the counts of the :class:`AmqpCommitMessage`\\s and log.

**Delivery guarantee: at-least-once**, like Spark's Kafka sink ("introduce a primary (unique)
key that can be used to perform de-duplication when reading"). A failed task or micro-batch is
retried and republishes its messages; those confirmed before the failure arrive twice. Every
message carries a deterministic ``message_id`` (unless ``messageId=none``/``column``):
``"{queryId}:{batchId}:{partitionId}:{row}"`` for streams, ``"{writeId}:{partitionId}:{row}"``
for a batch ``save()``, the same on a retry, so consumers can drop the duplicates.

**Over the stream protocol** (a ``rabbitmq-stream://`` uri with the option ``stream`` or
``superStream``): each task publishes with :class:`.stream_publish.StreamTaskPublisher`; with
``producerName`` the write is **exactly-once** (task ``p`` is producer ``<producerName>-<p>``,
publishing ids from a ``publishing_id`` column or ``batchId * 2**32 + row + 1`` with batch id
0 for a batch ``save()``; rows the stream already holds are skipped, repeats dropped by the
broker), without it at-least-once. The rule and its limits: :mod:`.stream_publish`,
docs/sink.md "Exactly-once writes into a stream".

Save modes: use ``.mode("append")``. Spark itself rejects the default ``errorifexists`` for
Python data sources (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``, seen with pyspark 4.3), and this
sink rejects ``overwrite`` (published messages cannot be replaced). Streaming output modes
``append``, ``update`` and ``complete`` are all accepted (``complete`` republishes the whole
result every micro-batch).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Iterator, List, Optional

from pyspark.sql.datasource import (DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)

from ..errors import leading_errors
from .convert import SinkDataError, SinkPlan, SinkSchemaError, batch_to_messages, plan_columns
from .options import SinkOptionError, SinkOptions, parse_sink_options
from .publish import AmqpSinkError, TaskPublisher

__all__ = ["AmqpWriter", "AmqpStreamWriter", "AmqpCommitMessage", "AmqpSinkError",
           "SinkOptionError", "SinkSchemaError", "SinkDataError"]

log = logging.getLogger(__name__)


@dataclass
class AmqpCommitMessage(WriterCommitMessage):
    """What one write task reports to the driver (pickled).

    Attributes: partition_id (int), rows (int, input rows), published (int), confirmed (int,
    acked by the broker), returned (int; non-zero only with ``onReturn=ignore``), body_bytes
    (int), seconds (float, connect → last confirm), skipped (int; stream protocol with
    ``producerName``: rows already in the stream, not sent again).
    """

    partition_id: int
    rows: int
    published: int
    confirmed: int
    returned: int
    body_bytes: int
    seconds: float
    skipped: int = 0


def _task_context():
    from pyspark import TaskContext

    return TaskContext.get()


def _converted(plan: SinkPlan, iterator, id_prefix: Optional[str], label: str, rows: list,
               ids_of=None):
    """``(first task row, ids, messages)`` for each non-empty Arrow batch of ``iterator``:
    the batch's messages (:func:`.convert.batch_to_messages`) and, with ``ids_of(batch, row)``,
    its publishing ids (else None). ``rows[0]`` counts the task's rows so far. A row that
    cannot be converted raises :class:`SinkDataError` naming the task and the batch's first
    row."""
    for batch in iterator:
        n = batch.num_rows
        if not n:
            continue
        row = rows[0]
        try:
            messages = batch_to_messages(plan, batch, id_prefix, row)
            ids = ids_of(batch, row) if ids_of is not None else None
        except SinkDataError as exc:
            raise SinkDataError(f"amqp sink {label}: {exc}; that batch starts at row {row} "
                                "of the task") from exc
        yield row, ids, messages
        del messages, ids  # before the next batch is converted: one batch's messages at a time
        rows[0] = row + n


def _write_partition(options: SinkOptions, plan: SinkPlan, iterator, id_prefix: Optional[str],
                     label: str, partition_id: int) -> AmqpCommitMessage:
    """Convert and publish one task's Arrow batches; return its commit message."""
    rows = [0]
    with TaskPublisher(options, label) as pub:
        for _, _, messages in _converted(plan, iterator, id_prefix, label, rows):
            pub.publish(messages)
            del messages
        stats = pub.finish()
    stats.rows = rows[0]
    return AmqpCommitMessage(partition_id, stats.rows, stats.published, stats.confirmed,
                             stats.returned, stats.body_bytes, stats.seconds)


def _publishing_ids(plan: SinkPlan, batch, batch_id: int, row: int):
    """The publishing ids of one Arrow batch whose first row is task row ``row``: the
    ``publishing_id`` column (a list of ints, None for nulls) or the derived rule
    (:func:`.stream_publish.derived_publishing_ids`)."""
    from .convert import PUBLISHING_ID
    from .stream_publish import derived_publishing_ids

    if plan.publishing_id:
        return batch.column(batch.schema.names.index(PUBLISHING_ID)).to_pylist()
    try:
        return derived_publishing_ids(batch_id, row, batch.num_rows)
    except ValueError as exc:
        raise SinkDataError(str(exc)) from None


def _write_partition_stream(options: SinkOptions, plan: SinkPlan, iterator,
                            id_prefix: Optional[str], label: str, partition_id: int,
                            batch_id: int) -> AmqpCommitMessage:
    """Publish one task's Arrow batches over the stream protocol
    (:mod:`.stream_publish`): with ``producerName``, deduplicated under publishing ids from
    the ``publishing_id`` column or derived from (``batch_id``, partition, row)."""
    from .stream_publish import StreamTaskPublisher, task_producer_name

    name = (task_producer_name(options.producer_name, partition_id)
            if options.producer_name else None)
    rows = [0]
    ids_of = (lambda batch, row: _publishing_ids(plan, batch, batch_id, row)) if name else None
    with StreamTaskPublisher(options, label, name) as pub:
        for row, ids, messages in _converted(plan, iterator, id_prefix, label, rows, ids_of):
            pub.publish(messages, ids, row)
            del messages
        stats = pub.finish()
    stats.rows = rows[0]
    if stats.skipped:
        log.info("amqp sink %s: %d row(s) were in the stream already (producer %s) and were "
                 "not sent again", label, stats.skipped, name)
    return AmqpCommitMessage(partition_id, stats.rows, stats.published, stats.confirmed,
                             stats.returned, stats.body_bytes, stats.seconds, stats.skipped)


def _batch_id(value) -> int:
    """The micro-batch id of a task's local property (``streaming.sql.batchId``); -1 when
    it is missing or not an integer."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def _summarize(messages: List[Optional[AmqpCommitMessage]]) -> dict:
    ok = [m for m in messages if isinstance(m, AmqpCommitMessage)]
    return {
        "tasks": len(messages), "failed_tasks": len(messages) - len(ok),
        "rows": sum(m.rows for m in ok), "published": sum(m.published for m in ok),
        "confirmed": sum(m.confirmed for m in ok), "returned": sum(m.returned for m in ok),
        "body_bytes": sum(m.body_bytes for m in ok),
        "skipped": sum(getattr(m, "skipped", 0) for m in ok),
    }


@leading_errors("write", "commit", "abort")
class AmqpWriter(DataSourceArrowWriter):
    """Batch writer (``df.write.format("amqp").save()``).

    Args:
        options: the data source's case-insensitive options (keys lower-cased).
        schema: the DataFrame's ``StructType``.
        overwrite: True for ``mode("overwrite")``, which is rejected.

    Raises (on the driver, at ``save()``):
        SinkOptionError: an unknown option or invalid value (names the option and the
            allowed values).
        SinkSchemaError: missing ``body``, a wrongly typed or unknown column (names it).
        ValueError: ``mode("overwrite")``.
    """

    def __init__(self, options, schema, overwrite: bool):
        if overwrite:
            raise ValueError("the amqp sink does not support mode('overwrite'): published "
                             "messages cannot be replaced; use mode('append')")
        self.options = parse_sink_options(options)
        self.plan = plan_columns(schema, self.options)
        # one id per save(): part of the deterministic message ids; a retried task of this
        # save() reuses it, because executors receive this pickled instance
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator["pyarrow.RecordBatch"]) -> AmqpCommitMessage:  # noqa: F821
        """Publish one partition under publisher confirms (executor). Raises AmqpSinkError /
        SinkDataError (the task fails and Spark retries it)."""
        ctx = _task_context()
        pid = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        prefix = None if self.plan.message_id in ("column", "none") else f"{self.write_id}:{pid}"
        label = f"partition {pid} (attempt {attempt}) of write {self.write_id}"
        if self.options.stream_protocol:
            # a batch write is batch 0 of its producer names: the same write run again (same
            # producerName, same partitions and rows) has the same ids and adds nothing
            return _write_partition_stream(self.options, self.plan, iterator, prefix, label,
                                           pid, 0)
        return _write_partition(self.options, self.plan, iterator, prefix, label, pid)

    def commit(self, messages: List[Optional[AmqpCommitMessage]]) -> None:
        """Driver: every task succeeded; log the totals (no broker I/O)."""
        log.info("amqp sink: write committed: %s", _summarize(messages))

    def abort(self, messages: List[Optional[AmqpCommitMessage]]) -> None:
        """Driver: a task failed for good. Messages of successful tasks stay published."""
        s = _summarize(messages)
        log.warning("amqp sink: write aborted after %d confirmed message(s) were published by "
                    "%d successful task(s) (at-least-once: they stay published): %s",
                    s["confirmed"], s["tasks"] - s["failed_tasks"], s)


@leading_errors("write", "commit", "abort")
class AmqpStreamWriter(DataSourceStreamArrowWriter):
    """Streaming writer (``df.writeStream.format("amqp").start()``), one call per micro-batch.

    Args and driver-side errors as :class:`AmqpWriter` (``overwrite``, i.e. complete output
    mode, is accepted). Message ids: ``"{queryId}:{batchId}:{partitionId}:{row}"`` from the
    task's local properties ``sql.streaming.queryId`` / ``streaming.sql.batchId``
    (``MicroBatchExecution``), so a batch replayed after a restart republishes the same ids.
    """

    def __init__(self, options, schema, overwrite: bool):
        self.options = parse_sink_options(options)
        self.plan = plan_columns(schema, self.options)
        self.overwrite = overwrite

    def write(self, iterator: Iterator["pyarrow.RecordBatch"]) -> AmqpCommitMessage:  # noqa: F821
        """Publish one partition of a micro-batch under confirms (executor)."""
        ctx = _task_context()
        pid = ctx.partitionId() if ctx is not None else 0
        query_id = (ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None) \
            or "unknown-query"
        batch_id = (ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None) \
            or "unknown-batch"
        prefix = None if self.plan.message_id in ("column", "none") \
            else f"{query_id}:{batch_id}:{pid}"
        label = f"partition {pid} of micro-batch {batch_id} of query {query_id}"
        if self.options.stream_protocol:
            bid = _batch_id(batch_id)
            if bid < 0 and self.options.producer_name and not self.plan.publishing_id:
                raise AmqpSinkError(
                    f"amqp sink {label}: the task has no micro-batch id "
                    "(local property streaming.sql.batchId), which the derived publishing ids "
                    "of producerName need; give a publishing_id column")
            return _write_partition_stream(self.options, self.plan, iterator, prefix, label,
                                           pid, bid)
        return _write_partition(self.options, self.plan, iterator, prefix, label, pid)

    def commit(self, messages: List[Optional[AmqpCommitMessage]], batchId: int) -> None:
        """Driver, fresh process: log the micro-batch totals (no broker I/O)."""
        log.info("amqp sink: micro-batch %s committed: %s", batchId, _summarize(messages))

    def abort(self, messages: List[Optional[AmqpCommitMessage]], batchId: int) -> None:
        """Driver: the micro-batch failed; confirmed messages stay published (at-least-once)."""
        log.warning("amqp sink: micro-batch %s aborted (confirmed messages stay published and "
                    "are republished when the batch is retried): %s", batchId,
                    _summarize(messages))
