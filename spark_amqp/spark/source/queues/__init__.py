"""Queue mode of the ``amqp`` source: classic and quorum queues (options ``queue``/``queues``).

Laid out as Spark's Kafka source: the micro-batch stream (:mod:`.micro_batch_stream`, Kafka's
``KafkaMicroBatchStream``) only adapts Spark's callbacks; the offset reader
(:mod:`.offset_reader`, the driver's consumer session: drain, plan, take, ack, loss) talks to
the broker only through the :class:`.consumer.QueueConsumer` protocol (the driver's consumer,
:mod:`.consumer`, which the tests' fake implements in full), keeps its connection through a
supervisor (:mod:`.supervisor`: connect, back-off, ``failoverTimeout``, on the client's failure
model), holds the deliveries (:mod:`.buffer`) under offsets counted per session
(:mod:`.offsets`), plans with the pure :mod:`.planner` under Trigger.AvailableNow's
:mod:`.budget`, and reports the lag (:mod:`.lag`). A batch's messages travel to the executors as
frames (:mod:`.frames`), inside the partitions or fetched from the driver (:mod:`.partitions`,
:mod:`.partition_server`), and are read there by :mod:`.partition_reader`. The mode's options
are :mod:`.options`; what a query fails with besides the client's errors is :mod:`.errors`.
"""
