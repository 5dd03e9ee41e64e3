"""``AmqpDataSource``: the ``amqp`` Python data source (``spark.readStream.format("amqp")``).

Register it with ``spark_amqp.register(spark)`` or ``spark.dataSource.register(AmqpDataSource)``.

* Reading queues: :class:`spark_amqp.spark.source.queues.micro_batch_stream.AmqpQueueMicroBatchStream`
  (streaming only; see its module for the ack/offset semantics and
  :mod:`spark_amqp.spark.source.queues.options` for the options).
* Reading stream queues (option ``stream``/``superStream``):
  :mod:`spark_amqp.spark.source.streams.micro_batch_stream` and
  :mod:`spark_amqp.spark.source.streams.batch_reader`
  (streaming and batch; options in :mod:`spark_amqp.spark.source.streams.options`).
* Writing: ``writer``/``streamWriter`` return the sink's classes from
  :mod:`spark_amqp.spark.sink.writer` (imported lazily).

No method here does broker I/O: Spark builds and pickles this object and the readers in several
processes (lessons §1.3), and invalid options must fail at ``load()``/``start()``, which run
``schema()`` and ``streamReader()`` respectively.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql.datasource import DataSource

from . import schema as _schema
from .errors import leading_errors

__all__ = ["AmqpDataSource"]


# not "streamReader": PySpark's streaming source runner (python_streaming_source_runner.py,
# 4.2-4.3) calls ``reader.stop()`` in a ``finally`` whose ``reader`` is unbound when
# ``streamReader`` raised, so the error it reports is that UnboundLocalError, with ours only in
# the full traceback's "During handling" part: hiding the traceback would hide our message
@leading_errors("schema", "reader", "writer", "streamWriter")
class AmqpDataSource(DataSource):
    """AMQP 0-9-1 (RabbitMQ) data source named ``amqp``.

    Source schema: :data:`spark_amqp.spark.schema.SOURCE_SCHEMA_DDL`; a user schema may select
    some of its columns (:func:`spark_amqp.spark.schema.check_user_schema`). Options: see
    :mod:`spark_amqp.spark.source.options` (source, both modes) and
    :mod:`spark_amqp.spark.sink.writer` (sink).
    """

    @classmethod
    def name(cls) -> str:
        return "amqp"

    def schema(self):
        """The source schema (a ``StructType``).

        Spark calls this at ``readStream...load()`` only (not for writes, checked on PySpark
        4.3), so the source options are validated here and a bad or unknown option fails
        ``load()`` with a ``ValueError`` naming it. With a user ``.schema(...)`` Spark skips this
        method; ``streamReader`` then checks the schema (a selection of the source's columns)
        and the options when the query starts.
        """
        from .source.options import parse_options

        parse_options(dict(self.options))
        return _schema.source_schema()

    def streamReader(self, schema):
        """Validate options and schema and return the stream reader (no I/O).

        Raises ``ValueError`` for an invalid/unknown option or a user schema that is not a
        selection of the source's columns (see :func:`spark_amqp.spark.schema.check_user_schema`;
        the reader then yields only the selected columns).
        """
        from .source.options import StreamOptions, parse_options

        columns = _schema.check_user_schema(schema)
        options = replace(parse_options(dict(self.options)), columns=columns)
        if isinstance(options, StreamOptions):
            from .source.streams.micro_batch_stream import AmqpStreamMicroBatchStream

            return AmqpStreamMicroBatchStream(options)
        from .source.queues.micro_batch_stream import AmqpQueueMicroBatchStream

        return AmqpQueueMicroBatchStream(options)

    def reader(self, schema):
        """Batch reader: stream mode only (:class:`.source.streams.batch_reader.AmqpStreamBatchReader`).

        Raises ``ValueError`` for the queue mode: a classic or quorum queue is not a
        replayable table (reading it consumes it)."""
        from .source.options import is_stream_mode, parse_stream_options

        columns = _schema.check_user_schema(schema)
        if not is_stream_mode(self.options):
            raise ValueError(
                "Batch reads (spark.read) of the amqp source need a stream queue: a classic or "
                "quorum queue ('queue'/'queues') cannot be re-read, reading it would consume "
                "it. Use spark.readStream.format('amqp') with trigger(availableNow=True) to "
                "drain a queue once, or declare a stream (x-queue-type=stream) and read it "
                "with option 'stream' (startingOffsets/endingOffsets).")
        from .source.streams.batch_reader import AmqpStreamBatchReader

        return AmqpStreamBatchReader(replace(parse_stream_options(dict(self.options)),
                                             columns=columns))

    def writer(self, schema, overwrite: bool):
        """Batch writer: ``spark_amqp.spark.sink.writer.AmqpWriter(options, schema, overwrite)``."""
        from .sink.writer import AmqpWriter

        return AmqpWriter(self.options, schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        """Streaming writer: ``spark_amqp.spark.sink.writer.AmqpStreamWriter(options, schema,
        overwrite)``."""
        from .sink.writer import AmqpStreamWriter

        return AmqpStreamWriter(self.options, schema, overwrite)
