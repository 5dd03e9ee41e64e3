"""spark-amqp: a PySpark Structured Streaming connector for AMQP 0-9-1 (RabbitMQ).
May import: spark_amqp.spark and spark_amqp.broker, only lazily (``register``, ``__getattr__``).
Imported by: users and the applications; the lower layers import none of it
(they read the version from :mod:`spark_amqp._version`, which imports nothing).

Layers, each depending only on the ones before it:

1. :mod:`spark_amqp.protocol` - sans-IO codec and connection/channel state machines.
2. :mod:`spark_amqp.client` (blocking client transport) and :mod:`spark_amqp.broker`
   (the embedded asyncio broker).
3. :mod:`spark_amqp.spark` - the ``amqp`` data source (``source/`` readers, ``sink/`` writers),
   and :mod:`spark_amqp.management` (the broker's management API).
4. :mod:`spark_amqp.cli` - the ``spark-amqp`` command; over it :mod:`spark_amqp.jobs` (they
   use its flights code), and over both :mod:`spark_amqp.bench` (it runs the job).

``tests/test_layers.py`` checks this order and that no imports form a cycle.

Heavy imports (pyspark, the broker) happen lazily so that importing the package is cheap.
"""

from __future__ import annotations

from ._version import __version__

__all__ = ["register", "EmbeddedBroker", "AmqpDataSource", "offsets_behind_latest",
           "__version__"]


def register(spark) -> None:
    """Register the ``amqp`` data source with ``spark`` (a SparkSession).

    Registers :class:`~spark_amqp.spark.datasource.AmqpDataSource` behind an import guard
    (:mod:`spark_amqp.spark.import_guard`): the same source, but a Spark Python process that
    cannot import ``spark_amqp`` fails with an error saying what to do (``PYSPARK_PYTHON``,
    install, ``--py-files`` + ``PYTHONPATH``) instead of a bare ``No module named``.
    """
    import sys

    from .spark.datasource import AmqpDataSource  # noqa: F401  (fails here if pyspark is missing)
    from .spark.import_guard import guarded_data_source

    spark.dataSource.register(guarded_data_source(sys.executable))


def __getattr__(name: str):
    if name == "EmbeddedBroker":
        from .broker.embedded import EmbeddedBroker

        return EmbeddedBroker
    if name == "AmqpDataSource":
        from .spark.datasource import AmqpDataSource

        return AmqpDataSource
    if name == "offsets_behind_latest":
        from .spark.lag import offsets_behind_latest

        return offsets_behind_latest
    raise AttributeError(f"module 'spark_amqp' has no attribute {name!r}")
