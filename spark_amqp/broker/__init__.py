"""An embedded AMQP 0-9-1 broker with RabbitMQ semantics on asyncio (``EmbeddedBroker``; ``serve()`` runs ``spark-amqp broker``).
May import: spark_amqp.protocol (its only framing and codec), the standard library, and spark_amqp.management lazily when enabled.
Imported by: spark_amqp (``EmbeddedBroker``), spark_amqp.management, the CLI, the benchmarks and the tests.
"""

import logging as _logging

# library convention: silent unless the application configures logging (serve() does)
_logging.getLogger("spark_amqp.broker").addHandler(_logging.NullHandler())

from .config import BrokerConfig, ConfigError, TLSConfig, load_config  # noqa: F401
from .embedded import EmbeddedBroker  # noqa: F401
from .server import Broker, BrokerError, PortInUseError, serve  # noqa: F401

__all__ = ["EmbeddedBroker", "Broker", "BrokerConfig", "BrokerError", "PortInUseError",
           "ConfigError", "TLSConfig", "load_config", "serve"]
