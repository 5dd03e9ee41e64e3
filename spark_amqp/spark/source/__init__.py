"""spark_amqp.spark.source: the ``amqp`` source (``readStream``, ``read``) of queues and streams.
May import: the shared modules beside it (spark.schema, spark.connection_options,
spark.option_values), client, protocol.
Imported by: spark.datasource (lazily), spark.sink.options (option names), spark_amqp.bench.

Queue mode (files without a prefix): :mod:`.reader` (``AmqpStreamReader``; the driver consumes
and acks after Spark's commit), :mod:`.consumer` (the driver's consumer), :mod:`.buffer`
(deliveries held between batches), :mod:`.offsets`, :mod:`.options`, :mod:`.frames` (a
partition's messages), :mod:`.partition_server` (executors fetch large partitions from the
driver) and :mod:`.arrow` (rows to Arrow record batches). Stream mode (RabbitMQ streams and
super streams, ``stream_*``): :mod:`.stream_reader` (the readers), :mod:`.stream_consumer`
(an executor reads one offset range), :mod:`.stream_offsets`, :mod:`.stream_options` and
:mod:`.stream_probe` (the driver asks the broker for a stream's offsets).
"""
