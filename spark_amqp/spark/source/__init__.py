"""spark_amqp.spark.source: the ``amqp`` source (``readStream``, ``read``) of queues and streams.
May import: the shared modules beside it (spark.schema, spark.connection_options,
spark.option_values), client, protocol.
Imported by: spark.datasource (lazily), spark.sink.options (option names), spark_amqp.bench.

Two modes, one folder each:

* :mod:`.queues` - classic and quorum queues (options ``queue``/``queues``):
  :class:`.queues.reader.AmqpQueueStreamReader` (the driver consumes and acks after Spark's
  commit), its consumer, buffers, offsets, frames and partition server.
* :mod:`.streams` - RabbitMQ streams and super streams (options ``stream``/``superStream``):
  :class:`.streams.reader.AmqpStreamOffsetReader` and
  :class:`.streams.reader.AmqpStreamBatchReader` (the driver plans offset ranges, the
  executors read them), the probe, the executors' range reader, offsets and failover.

Shared by both, here: :mod:`.options` (queue mode's options) and :mod:`.stream_options`
(stream mode's), :mod:`.arrow` (rows to Arrow record batches), :mod:`.pacing`
(``minMessagesPerTrigger``), :mod:`.fair_split` (a limit split across queues or streams),
:mod:`.compat` (PySpark 4.0/4.1 vs 4.2 names) and :mod:`.timeouts`.
"""
