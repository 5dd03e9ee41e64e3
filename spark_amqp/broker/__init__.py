"""spark_amqp.broker: an embedded AMQP 0-9-1 broker with RabbitMQ semantics (asyncio).

``from spark_amqp.broker import EmbeddedBroker`` (or ``from spark_amqp import EmbeddedBroker``);
``serve()`` is the blocking entry point of ``spark-amqp broker``.
"""

from .config import BrokerConfig, ConfigError, load_config  # noqa: F401
from .embedded import EmbeddedBroker  # noqa: F401
from .server import Broker, BrokerError, PortInUseError, serve  # noqa: F401

__all__ = ["EmbeddedBroker", "Broker", "BrokerConfig", "BrokerError", "PortInUseError",
           "ConfigError", "load_config", "serve"]
