"""spark_amqp.spark.sink: the ``amqp`` sink (``df.write``, ``df.writeStream``): publish, confirmed.
May import: the shared modules beside it (spark.schema, spark.connection_options,
spark.option_values), client, protocol.
Imported by: spark.datasource (lazily) and spark_amqp.bench.sink.

:mod:`.writer` (Spark's writers; one task publishes its partition), :mod:`.options`,
:mod:`.convert` (input columns to messages), :mod:`.publish` (a task's publisher: confirms,
returns, connection.blocked), :mod:`.stream_publish` (a task's publisher over the stream
protocol: ``rabbitmq-stream://`` uris, deduplication with ``producerName``) and
:mod:`.super_stream` (a key's partition, as RabbitMQ's stream clients pick it). :mod:`.options` reads the source's option names
(:data:`spark_amqp.spark.source.options.KNOWN_OPTIONS`) to accept and ignore them.
"""
