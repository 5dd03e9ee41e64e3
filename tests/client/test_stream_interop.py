"""The stream-protocol client beside the other ways into the same stream, on each broker of
``stream_url``: AMQP 0-9-1 in and stream protocol out (and back) give the same messages with
the same offsets; rstream (an independent client) reads what this client wrote and the
reverse, message for message; super streams declared over 0-9-1 route and list their
partitions over the stream protocol (RabbitMQ 3.10 has no stream-protocol command to create
one)."""

from __future__ import annotations

import time

import pytest

from stream_client_helpers import amqp10, client, new_stream, stream_url  # noqa: F401
from spark_amqp.bench.stream_protocol import have_rstream, rstream_publish, rstream_read
from spark_amqp.client import connect as connect_091
from spark_amqp.client.streams import declare_super_stream
from spark_amqp.protocol import BasicProperties
from spark_amqp.protocol.amqp10 import Message, Properties, decode_message, encode_message
from spark_amqp.protocol.stream.errors import StreamDoesNotExist
from session_guard import unique_name

needs_rstream = pytest.mark.skipif(not have_rstream(), reason="rstream is not installed")


@pytest.fixture
def amqp_url(stream_url, request):
    """The 0-9-1 URL of the broker that serves ``stream_url``."""
    if request.node.callspec.params.get("stream_url") == "embedded":
        return request.getfixturevalue("embedded_stream_broker").url
    return request.getfixturevalue("rabbitmq_url")


def read_091(url: str, stream: str, n: int) -> list:
    """``[(x-stream-offset, body, properties)]`` of ``n`` messages read over AMQP 0-9-1."""
    out = []
    with connect_091(url) as c:
        ch = c.channel()
        ch.basic_qos(500)
        ch.basic_consume(stream, arguments={"x-stream-offset": "first"})
        deadline = time.monotonic() + 60
        while len(out) < n and time.monotonic() < deadline:
            batch = ch.drain(timeout=0.5)
            for d in batch:
                out.append((d.properties.headers["x-stream-offset"], d.body, d.properties))
            if batch:
                ch.basic_ack(batch[-1].delivery_tag, multiple=True)
    return out


def read_stream(client, stream: str, n: int) -> list:
    """``[(offset, message bytes)]`` of ``n`` messages read over the stream protocol."""
    out = []
    with client.consumer(stream, "first") as c:
        deadline = time.monotonic() + 60
        while len(out) < n and time.monotonic() < deadline:
            out += list(c.messages(timeout=0.5))
    return out


def test_091_in_stream_protocol_out(client, new_stream, amqp_url):
    s = new_stream()
    n = 500
    with connect_091(amqp_url) as c:
        ch = c.channel()
        ch.confirm_select()
        for i in range(n):
            ch.basic_publish(b"body-%d" % i, routing_key=s, properties=BasicProperties(
                message_id=f"id-{i}", content_type="text/plain", headers={"i": i}))
        ch.wait_for_confirms(timeout=60)
    via_stream = read_stream(client, s, n)
    via_091 = read_091(amqp_url, s, n)
    assert [o for o, _ in via_stream] == [o for o, _, _ in via_091] == list(range(n))
    for (off, raw), (_, body, props) in zip(via_stream, via_091):
        m = decode_message(raw)
        assert m.data == body == b"body-%d" % off
        assert m.properties.message_id == props.message_id == f"id-{off}"
        assert m.properties.content_type == props.content_type == "text/plain"
        assert m.application_properties["i"] == props.headers["i"] == off


def test_stream_protocol_in_091_out(client, new_stream, amqp_url):
    s = new_stream()
    n = 500
    with client.producer(s) as p:
        for i in range(n):
            p.send(encode_message(Message(
                b"sp-%d" % i, properties=Properties(message_id=f"sp-{i}",
                                                    content_type="application/octet-stream"),
                application_properties={"k": f"v{i}"})))
        assert p.wait_for_confirms(30).ok
    via_091 = read_091(amqp_url, s, n)
    via_stream = read_stream(client, s, n)
    assert [o for o, _, _ in via_091] == [o for o, _ in via_stream] == list(range(n))
    for off, body, props in via_091:
        assert body == b"sp-%d" % off
        assert props.message_id == f"sp-{off}"
        assert props.headers["k"] == f"v{off}"


@needs_rstream
def test_rstream_reads_what_this_client_wrote(client, new_stream, stream_url):
    s = new_stream()
    msgs = [amqp10(b"ours-%d" % i) for i in range(3000)]
    with client.producer(s, batch_size=250) as p:
        p.send_batch(msgs)
        assert p.wait_for_confirms(30).ok
    _, theirs = rstream_read(stream_url, s, len(msgs), keep=True)
    assert [(o, bytes(m)) for o, m in theirs] == list(enumerate(msgs))


@needs_rstream
def test_this_client_reads_what_rstream_wrote(client, new_stream, stream_url):
    s = new_stream()
    msgs = [amqp10(b"theirs-%d" % i) for i in range(3000)]
    rstream_publish(stream_url, s, msgs, batch_size=300)
    assert read_stream(client, s, len(msgs)) == list(enumerate(msgs))
    # and rstream's AMQP decoder reads the messages this client's codec wrote
    with client.producer(s) as p:
        p.send(encode_message(Message(b"decoded", properties=Properties(message_id="m1"),
                                      application_properties={"a": "b"})))
        p.wait_for_confirms(30)
    _, theirs = rstream_read(stream_url, s, len(msgs) + 1, decode=True, keep=True)
    last = theirs[-1][1]
    assert bytes(last.body if not isinstance(last.body, list) else b"".join(last.body)) == b"decoded"
    assert last.properties.message_id in (b"m1", "m1")


def test_super_stream_route_and_partitions(client, amqp_url):
    name = unique_name("h38p-super")
    with connect_091(amqp_url) as c:
        ch = c.channel()
        parts = declare_super_stream(ch, name, 3)
    try:
        assert client.partitions(name) == parts == [f"{name}-0", f"{name}-1", f"{name}-2"]
        assert client.route("1", name) == [f"{name}-1"]
        assert client.route("no-such-key", name) == []
        with pytest.raises(StreamDoesNotExist):
            client.partitions(name + "-missing")
        # a message routed over the stream protocol lands in that partition
        [target] = client.route("2", name)
        with client.producer(target) as p:
            p.send(amqp10(b"to partition 2"))
            p.wait_for_confirms(30)
        assert [m for _, m in read_stream(client, target, 1)] == [amqp10(b"to partition 2")]
    finally:
        with connect_091(amqp_url) as c:
            ch = c.channel()
            for q in parts:
                ch.queue_delete(q)
            ch.exchange_delete(name)
