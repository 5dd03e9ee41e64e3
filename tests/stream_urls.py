"""RabbitMQ's stream-protocol URL for the tests, and the reachability rule of its port: one
place for the stream client's tests (tests/client/stream_client_helpers.py) and the
stream-protocol sink's (tests/spark/stream_sink_helpers.py)."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

import pytest

STREAM_URL = os.environ.get("SPARK_AMQP_RABBITMQ_STREAM_URL",
                            "rabbitmq-stream://guest:guest@127.0.0.1:5552/%2F")


def _port_open(url: str) -> bool:
    u = urlparse(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 5552), timeout=2):
            return True
    except OSError:
        return False


def rabbitmq_stream_url(request) -> str:
    """RabbitMQ's stream URL, after the same reachability rule as ``rabbitmq_url`` (skip, or
    fail under SPARK_AMQP_REQUIRE_RABBITMQ=1) for its stream port."""
    request.getfixturevalue("rabbitmq_url")
    if not _port_open(STREAM_URL):
        reason = (f"RabbitMQ's stream port is not reachable ({STREAM_URL}): run "
                  "`rabbitmq-plugins enable rabbitmq_stream`")
        if os.environ.get("SPARK_AMQP_REQUIRE_RABBITMQ") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return STREAM_URL
