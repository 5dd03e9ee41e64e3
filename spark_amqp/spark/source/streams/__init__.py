"""Stream mode of the ``amqp`` source: RabbitMQ streams and super streams (options
``stream``/``superStream``).

Laid out as the queue mode: the micro-batch stream (:mod:`.micro_batch_stream`) adapts Spark's
callbacks; the offset reader (:mod:`.offset_reader`) probes the streams' offsets through the
:class:`.probe.TailProbe` protocol (:mod:`.probe`) and plans offset ranges (:mod:`.offsets`);
each executor reads its range itself (:mod:`.partition_reader` over :mod:`.consumer`), failing
over across a cluster's nodes on the client's failure model
(:mod:`spark_amqp.client.failover`). Batch reads: :mod:`.batch_reader`. Options:
:mod:`.options`.
"""
