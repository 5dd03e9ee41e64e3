"""The queue mode's micro-batch stream under the name it had before issue 43
(``AmqpQueueStreamReader``, PySpark's "stream reader"): see :mod:`.micro_batch_stream`."""

from spark_amqp.client.failover import BrokerUnreachable

from .errors import MessageTooLarge
from .micro_batch_stream import AmqpQueueMicroBatchStream
from .partition_reader import QueueInputPartition
from .supervisor import DEFAULT_FAILOVER_TIMEOUT

AmqpQueueStreamReader = AmqpQueueMicroBatchStream

__all__ = ["AmqpQueueStreamReader", "QueueInputPartition", "MessageTooLarge", "BrokerUnreachable",
           "DEFAULT_FAILOVER_TIMEOUT"]
