"""client/broker_limits.py: the message size limit a connector learns from a broker (issue 30)."""

from __future__ import annotations

import pytest

from spark_amqp.client import connect
from spark_amqp.client.broker_limits import max_message_size

MiB = 1024 * 1024


@pytest.mark.parametrize("props,expected", [
    ({"product": "spark-amqp embedded broker", "max_message_size": 1000}, (1000, "advertised by the broker")),
    ({"product": b"RabbitMQ", "version": b"3.10.8"}, (128 * MiB, "RabbitMQ 3.x default")),
    ({"product": "RabbitMQ", "version": "4.3.0"}, (16 * MiB, "RabbitMQ 4.x default")),
    ({}, (16 * MiB, "RabbitMQ 4.x default")),
    (None, (16 * MiB, "RabbitMQ 4.x default")),
])
def test_max_message_size_from_server_properties(props, expected):
    assert max_message_size(props) == expected


@pytest.mark.parametrize("version,expected", [("4.3", 16 * MiB), ("3.10", 128 * MiB)])
def test_embedded_broker_advertises_its_limit(request, version, expected):
    b = request.getfixturevalue("embedded_broker_43" if version == "4.3" else "embedded_broker_310")
    with connect(b.url) as conn:
        assert max_message_size(conn.server_properties) == (expected, "advertised by the broker")


def test_rabbitmq_3_10_is_recognised(rabbitmq_url):
    with connect(rabbitmq_url) as conn:
        assert max_message_size(conn.server_properties) == (128 * MiB, "RabbitMQ 3.x default")
