"""spark_amqp.broker: an embedded AMQP 0-9-1 broker with RabbitMQ semantics (asyncio).

``from spark_amqp.broker import EmbeddedBroker`` (or ``from spark_amqp import EmbeddedBroker``);
``serve()`` is the blocking entry point of ``spark-amqp broker``.
"""

import logging as _logging

# library convention: silent unless the application configures logging (serve() does)
_logging.getLogger("spark_amqp.broker").addHandler(_logging.NullHandler())

from .config import BrokerConfig, ConfigError, TLSConfig, load_config  # noqa: F401
from .embedded import EmbeddedBroker  # noqa: F401
from .server import Broker, BrokerError, PortInUseError, serve  # noqa: F401

__all__ = ["EmbeddedBroker", "Broker", "BrokerConfig", "BrokerError", "PortInUseError",
           "ConfigError", "TLSConfig", "load_config", "serve"]
