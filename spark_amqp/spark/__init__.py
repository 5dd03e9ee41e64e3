"""spark_amqp.spark: the ``amqp`` data source of Spark's Python Data Source API (reader and writer).
May import: spark_amqp.client and spark_amqp.protocol (and pyspark, pyarrow); never a higher layer.
Imported by: spark_amqp (``register``, ``AmqpDataSource``), spark_amqp.bench; Spark unpickles it.

Folders: :mod:`.source` (reading queues and streams) and :mod:`.sink` (publishing), which do
not import each other (but for the sink's table of source option names). Beside them, shared:
:mod:`.schema` (the fixed message columns), :mod:`.connection_options` (``uri``, TLS,
heartbeat), :mod:`.option_values` (integers, numbers, booleans, choices, names and their
errors, for every option parser); and over both, the entry point: :mod:`.datasource`
(``AmqpDataSource``, importing either side lazily) and :mod:`.import_guard` (what
``spark_amqp.register`` registers).
"""
