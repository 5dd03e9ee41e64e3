"""Stream mode of the ``amqp`` source: RabbitMQ streams and super streams (options
``stream``/``superStream``).

The driver probes the streams' offsets (:mod:`.probe`) and plans offset ranges
(:mod:`.offsets`, :mod:`.reader`: :class:`.reader.AmqpStreamOffsetReader` for
``readStream``, :class:`.reader.AmqpStreamBatchReader` for ``read``); each executor reads its
range itself (:mod:`.consumer`), failing over across a cluster's nodes on the client's failure
model (:mod:`spark_amqp.client.failover`).
"""
