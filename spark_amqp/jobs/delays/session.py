"""The job's SparkSession: the package's ``conf/`` under plain ``python``, the submit-time
configuration under ``spark-submit``, and the job's Spark SQL settings either way."""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The package's default configuration files (``spark-amqp conf`` writes copies to edit).
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"  # = spark_amqp.cli.conf.default_conf_dir()


def read_spark_defaults(path: Path) -> dict[str, str]:
    """Parse a ``spark-defaults.conf`` (``key whitespace value`` lines, ``#`` comments)."""
    conf: dict[str, str] = {}
    if not path.is_file():
        return conf
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        conf[key.strip()] = value.strip()
    return conf


#: The job's Spark SQL settings. :func:`build_spark` applies them to the session (``python``
#: and ``spark-submit`` alike, with or without ``--properties-file``) unless the Spark conf
#: already sets the key (``--conf``, a properties file, ``SparkSession.builder.config``): the
#: user's value wins. A restarted query keeps the shuffle partitions and the state store of its
#: checkpoint (Spark records them in the offset log). Evidence for each value: CHANGELOG.md's
#: "Speed of the main job" (``python -m spark_amqp.bench.job``).
JOB_SQL_CONF: dict[str, str] = {
    # alert bodies format window_start/window_end with a literal 'Z' (date_format uses the
    # session time zone)
    "spark.sql.session.timeZone": "UTC",
    # run_job sums numInputRows over query.recentProgress: keep every batch of a run
    "spark.sql.streaming.numRecentProgressUpdates": "1000",
    # one state store (and one parquet file) per shuffle partition, every batch: the state
    # stores' commit + update time over the 336,776 flights was 2.4 s with 4, 1.4 s with 2
    # (Spark's default, 200, is far slower still); 2 keeps both cores of local[2] busy
    "spark.sql.shuffle.partitions": "2",
}


def apply_job_conf(spark, conf: dict[str, str] | None = None) -> dict[str, str]:
    """Set ``conf`` (default :data:`JOB_SQL_CONF`) on ``spark`` (``spark.conf.set``), except
    the keys that the SparkContext's conf already holds (set by the user at submit or build
    time). Returns the settings applied."""
    conf = JOB_SQL_CONF if conf is None else conf
    given = spark.sparkContext.getConf()
    applied = {k: v for k, v in conf.items() if not given.contains(k)}
    for key, value in applied.items():
        spark.conf.set(key, value)
    return applied


def build_spark(app_name: str = "flight-delays", master: str | None = None):
    """Get or create the SparkSession with the ``amqp`` data source registered and the job's
    settings (:func:`apply_job_conf`).

    Under ``spark-submit`` (a JVM gateway already exists) the submit-time configuration is
    used as is. Under plain ``python``, the package's ``conf/spark-defaults.conf`` is applied
    and its ``conf/log4j2.properties`` keeps Spark's logs to warnings (:data:`CONF_DIR`).
    Either way :data:`JOB_SQL_CONF` then fills in the keys that configuration left unset.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_amqp

    builder = SparkSession.builder.appName(app_name)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # plain python, not spark-submit
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        conf = read_spark_defaults(CONF_DIR / "spark-defaults.conf")
        log4j = f"-Dlog4j.configurationFile=file:{CONF_DIR / 'log4j2.properties'}"
        conf["spark.driver.extraJavaOptions"] = log4j
        conf["spark.executor.extraJavaOptions"] = log4j
        for key, value in conf.items():
            builder = builder.config(key, value)
        if master:
            builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    apply_job_conf(spark)
    spark_amqp.register(spark)
    return spark
