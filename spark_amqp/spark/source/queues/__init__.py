"""Queue mode of the ``amqp`` source: classic and quorum queues (options ``queue``/``queues``).

The driver consumes (one connection, a channel per queue: :mod:`.consumer`), holds the
deliveries (:mod:`.buffer`) under offsets counted per session (:mod:`.offsets`), plans batches
and acks a batch only after Spark committed it (:mod:`.reader`,
:class:`.reader.AmqpQueueStreamReader`, the Spark-facing adapter); a batch's messages travel
to the executors as frames (:mod:`.frames`), inside the partitions or fetched from the driver
(:mod:`.partition_server`).

Laid out as Spark's Kafka source: the reader (Kafka's ``KafkaMicroBatchStream``) asks a pure
batch planner (:mod:`.planner`: per-queue batch ends from what is buffered, the read limits
and Trigger.AvailableNow's :mod:`.budget`), keeps its connection through a supervisor
(:mod:`.supervisor`: connect, back-off, reconnect deadlines, an injected clock) and talks to
the broker only through the :class:`.consumer.QueueConsumer` protocol; :mod:`.errors` holds
what a query fails with.
"""
