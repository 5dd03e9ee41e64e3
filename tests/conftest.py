"""Shared fixtures: one SparkSession per run, broker URLs for the embedded broker and RabbitMQ.

RabbitMQ at 127.0.0.1:5672 (override with SPARK_AMQP_RABBITMQ_URL) is the reference broker.
Tests that need it skip with a reason when it is unreachable, unless
SPARK_AMQP_REQUIRE_RABBITMQ=1 (set by .ci/run), which turns the skip into a failure.
"""

from __future__ import annotations

import os
import socket
import sys
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
RABBITMQ_URL = os.environ.get("SPARK_AMQP_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
REQUIRE_RABBITMQ = os.environ.get("SPARK_AMQP_REQUIRE_RABBITMQ") == "1"


def _reachable(url: str) -> bool:
    u = urlparse(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 5672), timeout=2) as s:
            s.sendall(b"AMQP\x00\x00\x09\x01")
            s.settimeout(3)
            return s.recv(1) == b"\x01"  # a method frame: connection.start
    except OSError:
        return False


_RABBIT_OK: bool | None = None


def rabbitmq_available() -> bool:
    global _RABBIT_OK
    if _RABBIT_OK is None:
        _RABBIT_OK = _reachable(RABBITMQ_URL)
    return _RABBIT_OK


def require_rabbitmq() -> str:
    """Return the RabbitMQ URL, or skip (fail under SPARK_AMQP_REQUIRE_RABBITMQ=1)."""
    if rabbitmq_available():
        return RABBITMQ_URL
    reason = (f"RabbitMQ not reachable at {RABBITMQ_URL}: start it with `rabbitmq-server -detached` "
              "or set SPARK_AMQP_RABBITMQ_URL")
    if REQUIRE_RABBITMQ:
        pytest.fail(reason + " (SPARK_AMQP_REQUIRE_RABBITMQ=1 makes this a failure)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def rabbitmq_url() -> str:
    return require_rabbitmq()


@pytest.fixture(scope="session")
def embedded_broker():
    """One in-memory embedded broker on an ephemeral port for the whole run."""
    from spark_amqp import EmbeddedBroker

    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture(params=["embedded", "rabbitmq"])
def broker_url(request) -> str:
    """The same test against the embedded broker and against the real RabbitMQ."""
    if request.param == "rabbitmq":
        return require_rabbitmq()
    return request.getfixturevalue("embedded_broker").url


@pytest.fixture
def unique():
    """A factory of unique names for queues/exchanges: ``unique("orders")``."""
    def make(prefix: str = "t") -> str:
        return f"spark-amqp-test.{prefix}.{uuid.uuid4().hex[:10]}"
    return make


@pytest.fixture(scope="session")
def spark():
    """The one shared SparkSession of the test run (local[2], quiet logs)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    log4j = ROOT / "conf" / "log4j2.properties"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("spark-amqp-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{log4j}")
        .config("spark.executor.extraJavaOptions", f"-Dlog4j.configurationFile=file:{log4j}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    import spark_amqp

    spark_amqp.register(session)
    yield session
    session.stop()
