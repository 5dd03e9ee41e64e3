"""Fixtures of the broker conformance suite (pika ``BlockingConnection`` as the client).

Every test in this folder takes the ``broker_url`` fixture of tests/conftest.py, so it runs
once against the embedded broker and once against the real RabbitMQ 3.10 at 127.0.0.1:5672;
the same assertions must hold on both. Where RabbitMQ 3.10 differs from the AMQP 0-9-1 spec
the tests assert RabbitMQ's behaviour and say so in a comment (rules and deviations:
/work/shared/reference/amqp-0-9-1-from-the-seeds.md §3 and §5, broker-and-codec-anchors.md).

Fixtures:
- ``conn`` / ``ch``: one pika ``BlockingConnection`` to ``broker_url`` and one channel on it,
  closed at teardown.
- ``amqp``: an :class:`Amqp` helper bound to ``broker_url`` (new connections, resource
  declaration with automatic cleanup, polling).

Helpers live in conformance_helpers.py (``from conformance_helpers import ...``):
- :func:`broker_closes_channel` / :func:`broker_closes_connection`: context managers asserting
  the broker's channel.close / connection.close reply code.
- :class:`Collector`: a ``basic_consume`` callback that buffers deliveries, with ``wait(n)``.
"""

from __future__ import annotations

import pytest

from conformance_helpers import Amqp

@pytest.fixture
def amqp(broker_url, unique):
    """An :class:`Amqp` helper for ``broker_url``; deletes what it declared at teardown."""
    helper = Amqp(broker_url, unique)
    yield helper
    helper.cleanup()


@pytest.fixture
def conn(amqp):
    """A pika BlockingConnection to the broker under test (closed at teardown)."""
    return amqp.connect()


@pytest.fixture
def ch(conn):
    """A channel on ``conn``."""
    return conn.channel()


@pytest.fixture(scope="session")
def embedded_broker(embedded_broker_310):
    """The conformance suite compare the embedded broker with the local RabbitMQ 3.10.8: its 3.10 mode
    (tests/test_rabbitmq_versions.py and the 4.3 tests here cover the default 4.3 mode)."""
    return embedded_broker_310
