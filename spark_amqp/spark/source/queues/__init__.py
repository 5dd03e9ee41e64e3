"""Queue mode of the ``amqp`` source: classic and quorum queues (options ``queue``/``queues``).

The driver consumes (one connection, a channel per queue: :mod:`.consumer`), holds the
deliveries (:mod:`.buffer`) under offsets counted per session (:mod:`.offsets`), plans batches
and acks a batch only after Spark committed it (:mod:`.reader`,
:class:`.reader.AmqpQueueStreamReader`); a batch's messages travel to the executors as frames
(:mod:`.frames`), inside the partitions or fetched from the driver (:mod:`.partition_server`).
"""
