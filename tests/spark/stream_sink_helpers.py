"""Helpers of the stream-protocol sink tests (test_sink_stream_protocol*.py): each broker's
stream and AMQP URLs, unique durable streams deleted afterwards, reading a stream back with
the project's stream client."""

from __future__ import annotations

import pytest
from session_guard import unique_name
from stream_urls import rabbitmq_stream_url


@pytest.fixture(params=["rabbitmq", "embedded"])
def urls(request):
    """``(stream url, amqp url)`` of each broker."""
    if request.param == "rabbitmq":
        return rabbitmq_stream_url(request), request.getfixturevalue("rabbitmq_url")
    b = request.getfixturevalue("embedded_stream_broker")
    return b.stream_url, b.url


@pytest.fixture
def streams(urls):
    """A factory of unique durable streams (``create(n_partitions=None)``), deleted after."""
    from spark_amqp.client.stream import connect

    made = []
    with connect(urls[0]) as c:
        def make(partitions=None):
            name = unique_name("stream-sink")
            if partitions is None:
                c.create_stream(name)
                made.append(name)
            else:
                from spark_amqp.client import connect as amqp_connect
                from spark_amqp.client.streams import declare_super_stream

                with amqp_connect(urls[1]) as conn:
                    made.extend(declare_super_stream(conn.channel(), name, partitions))
                    made.append(("super", name))
            return name

        make.client = c
        yield make
        for s in made:
            if isinstance(s, tuple):
                from spark_amqp.client import connect as amqp_connect

                with amqp_connect(urls[1]) as conn:
                    conn.channel().exchange_delete(s[1])
            else:
                c.delete_stream(s, missing_ok=True)


def read_stream(client, stream, want=None):
    """``[(offset, message bytes)]`` of ``stream`` from its first offset, until ``want``
    arrived (or nothing came for 1 s)."""
    import time

    out = []
    deadline = time.monotonic() + 60
    with client.consumer(stream, "first") as c:
        while want is None or len(out) < want:
            got = list(c.messages(timeout=1.0))
            out += got
            if not got and (want is None or time.monotonic() > deadline):
                break
    return out


def body_of(message: bytes) -> bytes:
    """The body of a one-data-section message as the sink writes it."""
    i = message.rfind(b"\x00\x53\x75")
    if message[i + 3] == 0xa0:
        return message[i + 5:]
    return message[i + 8:]


