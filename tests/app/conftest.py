"""Fixtures of the CLI tests: ``run`` invokes ``spark-amqp`` in-process (click's CliRunner),
``cleanup`` collects queue/exchange names to delete on ``broker_url`` after the test."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from spark_amqp.cli.main import cli


@pytest.fixture
def run():
    """``run(*args, input=None)`` → click's Result of ``spark-amqp ARGS``."""
    runner = CliRunner()

    def invoke(*args, input=None):
        return runner.invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)
    return invoke


@pytest.fixture
def cleanup(broker_url):
    """Collects queue/exchange names to delete after the test (RabbitMQ state persists)."""
    from spark_amqp.client import connect

    names: dict[str, list[str]] = {"queues": [], "exchanges": []}
    yield names
    with connect(broker_url) as conn:
        ch = conn.channel()
        for q in names["queues"]:
            ch.queue_delete(q)
        for e in names["exchanges"]:
            ch.exchange_delete(e)
