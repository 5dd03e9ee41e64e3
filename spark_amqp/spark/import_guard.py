"""The ``amqp`` data source as ``spark_amqp.register`` registers it: a guard that says what to
do when one of Spark's Python processes cannot import ``spark_amqp``.

Spark pickles the registered data source class on the driver and unpickles it in Python
processes it starts itself (``pyspark.sql.worker.create_data_source``, the streaming source
runner on the driver, the planning workers), with the Python of ``PYSPARK_PYTHON`` (default
``python3`` from the PATH: not necessarily the one the user runs) and their own ``sys.path``.
A class pickled by reference makes such a process fail with a bare ``PYTHON_DATA_SOURCE_ERROR
... ModuleNotFoundError: No module named 'spark_amqp'``. This module is pickled *by value*
(``cloudpickle.register_pickle_by_value``): its class reaches the worker without importing the
package, and its first method call imports :class:`spark_amqp.spark.datasource.AmqpDataSource`
and delegates to it; if that import fails, the error names the worker's Python, the driver's,
and the three fixes (``PYSPARK_PYTHON``, installing the package there, ``--py-files`` with
``PYTHONPATH``). Nothing here may import ``spark_amqp`` at module level.

Executors that run the reads unpickle the stream reader itself (pickled by reference); in
local mode they use the same Python as the processes guarded here, so the guard's error
comes first.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

__all__ = ["AmqpDataSourceImportGuard"]


def _help(driver_python: str | None) -> str:
    import os
    import sys

    here = sys.executable or "python"
    driver = driver_python or "the Python that has spark_amqp"
    return (
        f"spark_amqp cannot be imported in this Spark Python process ({here}; "
        f"PYSPARK_PYTHON={os.environ.get('PYSPARK_PYTHON', '<unset: python3 from the PATH>')}),"
        f" while the driver registered the 'amqp' source from {driver}. Every Python process "
        f"Spark starts must import the package. Fix one of: (1) export PYSPARK_PYTHON={driver} "
        "before the SparkSession starts (or activate that virtualenv first); (2) install "
        f"spark-amqp into {here} (pip install spark-amqp / the wheel); (3) with spark-submit "
        "--py-files spark_amqp.zip, also put the zip on the driver's PYTHONPATH (Spark starts "
        "the streaming source's runner without the --py-files). See the docs' 'Getting started', "
        "'Troubleshooting' and 'Running on a cluster' pages. Python path here: " + os.pathsep.join(sys.path))


def _datasource_class(driver_python: str | None):
    try:
        from spark_amqp.spark.datasource import AmqpDataSource
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "spark_amqp":
            raise
        raise ModuleNotFoundError(_help(driver_python), name=exc.name) from None
    return AmqpDataSource


class AmqpDataSourceImportGuard(DataSource):
    """The ``amqp`` data source, delegating every method to
    :class:`spark_amqp.spark.datasource.AmqpDataSource` (same options, schema and errors).

    ``driver_python``: the driver's ``sys.executable``, set by :func:`spark_amqp.register` and
    named in the ``ModuleNotFoundError`` raised where ``spark_amqp`` cannot be imported.
    """

    driver_python: str | None = None

    @classmethod
    def name(cls) -> str:
        return "amqp"

    def _delegate(self):
        return _datasource_class(self.driver_python)(self.options)

    def schema(self):
        return self._delegate().schema()

    def reader(self, schema):
        return self._delegate().reader(schema)

    def streamReader(self, schema):
        return self._delegate().streamReader(schema)

    def writer(self, schema, overwrite: bool):
        return self._delegate().writer(schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        return self._delegate().streamWriter(schema, overwrite)


def guarded_data_source(driver_python: str):
    """The class to register: :class:`AmqpDataSourceImportGuard` with ``driver_python`` set,
    its module registered with Spark's cloudpickle to be pickled by value."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    AmqpDataSourceImportGuard.driver_python = driver_python
    return AmqpDataSourceImportGuard
