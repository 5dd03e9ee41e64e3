"""spark_amqp.spark.source: the ``amqp`` source (``readStream``, ``read``) of queues and streams.
May import: the shared modules beside it (spark.schema, spark.connection_options,
spark.option_values), client, protocol.
Imported by: spark.datasource (lazily), spark.sink.options (option names), spark_amqp.bench.

Two modes, one folder each, laid out alike after Spark's Kafka source:

=====================  ==========================================  ==========================================
role (Kafka's)         queue mode (:mod:`.queues`)                 stream mode (:mod:`.streams`)
=====================  ==========================================  ==========================================
micro-batch stream     ``micro_batch_stream.AmqpQueueMicroBatchStream``  ``micro_batch_stream.AmqpStreamMicroBatchStream``
offset reader          ``offset_reader.QueueOffsetReader``          ``offset_reader.StreamOffsetReader``
  (its broker side)    ``consumer.QueueConsumer`` (Protocol)        ``probe.TailProbe`` (Protocol)
partitions             ``partitions.QueuePartitioner``              ``offsets.split_ranges``
partition reader       ``partition_reader.read_partition``          ``partition_reader.read_partition``
options                ``options.SourceOptions``                    ``options.StreamOptions``
batch read             (none: reading a queue consumes it)          ``batch_reader.AmqpStreamBatchReader``
=====================  ==========================================  ==========================================

Both offset readers implement :class:`.offset_reader.OffsetReader` and take an injected clock.
Shared by both, here: :mod:`.options` (which mode an options dict asks for), :mod:`.read_limits`
(Spark's read limits for one trigger), :mod:`.offset_reader` (the Protocol), :mod:`.pacing`
(``minMessagesPerTrigger`` and its options), :mod:`.arrow` (rows to Arrow record batches),
:mod:`.fair_split` (a limit split across queues or streams), :mod:`.compat` (PySpark 4.0/4.1
vs 4.2 names), :mod:`.timeouts` and :mod:`.runner_process` (Spark's source runner's SIGTERM).
"""
