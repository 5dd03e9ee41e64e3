"""The stream-protocol client against each broker of ``stream_url`` (RabbitMQ 3.10.8 on port
5552 today): streams, publishing with confirms, deduplication, subscriptions from every offset
specification with credit, offsets, metadata, errors, failover over a host list."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest

from stream_client_helpers import amqp10, amqp10_body, client, new_stream, stream_url  # noqa: F401
from spark_amqp.client.failover import BrokerUnreachable
from spark_amqp.client.stream import OffsetSpec, connect, parse_stream_uri
from spark_amqp.protocol.stream import Code
from spark_amqp.protocol.stream.errors import (AuthenticationFailure, PreconditionFailed,
                                               StreamAlreadyExists, StreamDoesNotExist,
                                               VirtualHostAccessFailure)


def publish(client, stream, bodies, name=None, batch_size=500):
    """Publish AMQP 1.0 messages of ``bodies`` with confirms; the producer's next id."""
    with client.producer(stream, name=name, batch_size=batch_size) as p:
        for b in bodies:
            p.send(amqp10(b))
        r = p.wait_for_confirms(30)
        assert r.ok and r.confirmed == len(bodies)
        return p.next_publishing_id


def read(client, stream, offset="first", want=None, idle=1.0, **kw):
    """``[(offset, body)]`` read from ``offset`` until ``want`` arrived (or idle)."""
    out = []
    with client.consumer(stream, offset, **kw) as c:
        deadline = time.monotonic() + 30
        while want is None or len(out) < want:
            got = [(o, amqp10_body(m)) for o, m in c.messages(timeout=idle)]
            out += got
            if not got and (want is None or time.monotonic() > deadline):
                break
    return out


def test_create_delete_and_metadata(client, new_stream):
    s = new_stream(create=False)
    assert client.create_stream(s, max_age="1h", max_length_bytes=10_000_000) is True
    assert client.create_stream(s, max_age="1h", max_length_bytes=10_000_000,
                                exists_ok=True) is False
    with pytest.raises(StreamAlreadyExists):
        client.create_stream(s, max_age="1h", max_length_bytes=10_000_000)
    with pytest.raises(PreconditionFailed):  # other arguments: RabbitMQ says precondition
        client.create_stream(s, exists_ok=True)
    info = client.metadata(s, s + "-missing")
    assert info[s].exists and info[s].leader is not None
    assert info[s].leader == client.locator.advertised
    assert info[s + "-missing"].code == Code.STREAM_DOES_NOT_EXIST
    assert client.stream_exists(s) and not client.stream_exists(s + "-missing")
    assert client.delete_stream(s) is True
    assert client.delete_stream(s, missing_ok=True) is False
    with pytest.raises(StreamDoesNotExist, match="create it first"):
        client.delete_stream(s)


def test_bad_stream_arguments_are_refused_before_anything_is_sent(client, new_stream):
    # RabbitMQ 3.10.8's stream manager crashes on these (badarg) and drops the connection
    s = new_stream(create=False)
    for kw, name in (({"max_age": "yesterday"}, "max_age"), ({"max_age": "0D"}, "max_age"),
                     ({"max_length_bytes": "ten"}, "max_length_bytes"),
                     ({"arguments": {"stream-max-segment-size-bytes": "1.5"}},
                      "stream_max_segment_size_bytes"),
                     ({"initial_cluster_size": 0}, "initial_cluster_size")):
        with pytest.raises(ValueError, match=name):
            client.create_stream(s, **kw)
    assert not client.stream_exists(s)
    assert client.create_stream(s, max_age="7D") is True


def test_publish_with_confirms_and_read_back(client, new_stream):
    s = new_stream()
    bodies = [f"m{i}".encode() * (i % 7 + 1) for i in range(2500)]
    publish(client, s, bodies)
    got = read(client, s, "first", want=len(bodies))
    assert [o for o, _ in got] == list(range(len(bodies)))
    assert [b for _, b in got] == bodies


def test_dedup_same_name_and_ids_twice_the_stream_grows_once(client, new_stream):
    s = new_stream()
    bodies = [f"d{i}".encode() for i in range(300)]
    with client.producer(s, name="writer") as p:
        assert p.next_publishing_id == 1
        p.send_batch([amqp10(b) for b in bodies], list(range(1, 301)))
        assert p.wait_for_confirms(30).confirmed == 300
    assert client.query_publisher_sequence("writer", s) == 300
    with client.producer(s, name="writer") as p:
        assert p.next_publishing_id == 301  # resumes after the stored sequence
        p.send_batch([amqp10(b) for b in bodies], list(range(1, 301)))  # replayed
        r = p.wait_for_confirms(30)
        assert r.ok and r.confirmed == 300  # deduplicated messages are confirmed too
        p.send(amqp10(b"new"))
        p.wait_for_confirms(30)
    assert client.query_publisher_sequence("writer", s) == 301
    got = read(client, s, "first", want=301)
    assert [b for _, b in got] == bodies + [b"new"]
    assert client.query_publisher_sequence("nobody", s) == 0


def test_every_offset_specification(client, new_stream):
    s = new_stream()
    with client.producer(s) as p:  # two chunks: two confirmed batches
        for i in range(10):
            p.send(amqp10(b"a%d" % i))
        p.wait_for_confirms(30)
        time.sleep(0.3)
        mark = dt.datetime.now(dt.timezone.utc)
        time.sleep(0.3)
        for i in range(10):
            p.send(amqp10(b"b%d" % i))
        p.wait_for_confirms(30)
    assert [o for o, _ in read(client, s, "first", want=20)] == list(range(20))
    assert [o for o, _ in read(client, s, 13, want=7)] == list(range(13, 20))
    assert [o for o, _ in read(client, s, OffsetSpec.offset(5), want=15)] == list(range(5, 20))
    assert [b for _, b in read(client, s, "last", want=10)] == [b"b%d" % i for i in range(10)]
    assert [b for _, b in read(client, s, mark, want=10)] == [b"b%d" % i for i in range(10)]
    # next: only what is written after the subscription, while it reads
    with client.consumer(s, "next") as c:
        time.sleep(0.2)
        publish(client, s, [b"c0", b"c1"])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 2 and time.monotonic() < deadline:
            got += [(o, amqp10_body(m)) for o, m in c.messages(timeout=0.5)]
    assert got == [(20, b"c0"), (21, b"c1")]


def test_a_reader_keeps_up_while_a_publisher_writes(client, new_stream):
    s = new_stream()
    n = 20_000
    done = threading.Event()

    def writer():
        with connect(client.params) as c2, c2.producer(s, batch_size=100) as p:
            for i in range(n):
                p.send(amqp10(i.to_bytes(4, "big")))
                if i % 1000 == 0:
                    p.flush()
                    time.sleep(0.01)
            p.wait_for_confirms(60)
        done.set()

    t = threading.Thread(target=writer)
    with client.consumer(s, "first", credit=4) as c:
        t.start()
        got = []
        deadline = time.monotonic() + 120
        while len(got) < n and time.monotonic() < deadline:
            got += [o for o, _ in c.messages(timeout=0.5)]
    t.join(60)
    assert done.is_set()
    assert got == list(range(n))


def test_credit_bounds_the_chunks_in_flight(client, new_stream):
    s = new_stream()
    with client.producer(s) as p:
        for i in range(6):  # six chunks
            p.send(amqp10(b"x%d" % i))
            p.wait_for_confirms(30)
    with client.consumer(s, "first", credit=1) as c:
        time.sleep(0.5)
        assert c.chunks_received == 1  # one credit: one chunk, however long we wait
        for k in range(1, 6):
            assert c.next_chunk(timeout=10) is not None
            deadline = time.monotonic() + 10
            while c.chunks_received < k + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.05)
            assert c.chunks_received == k + 1


def test_store_and_query_offset(client, new_stream):
    s = new_stream()
    publish(client, s, [b"a", b"b", b"c"])
    assert client.query_offset("reader-1", s) is None
    with client.consumer(s, "first", name="reader-1") as c:
        offsets = [o for o, _ in c.messages(timeout=1.0)]
        c.store_offset(offsets[-1])
    deadline = time.monotonic() + 10
    while client.query_offset("reader-1", s) != 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.query_offset("reader-1", s) == 2
    client.store_offset("reader-2", s, 1)
    deadline = time.monotonic() + 10
    while client.query_offset("reader-2", s) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.query_offset("reader-2", s) == 1
    with pytest.raises(StreamDoesNotExist):
        client.query_offset("reader-1", s + "-missing")


def test_missing_streams(client, new_stream):
    s = new_stream(create=False)
    with pytest.raises(StreamDoesNotExist, match="does not exist"):
        client.producer(s)
    with pytest.raises(StreamDoesNotExist):
        client.consumer(s, "first")
    with pytest.raises(StreamDoesNotExist):
        client.query_publisher_sequence("p", s)


def test_bad_arguments_fail_before_any_io(client, new_stream):
    s = new_stream()
    for bad in ("yesterday", -1, 2 ** 64, 1.5, True):
        with pytest.raises(ValueError, match="offset"):
            client.consumer(s, bad)
    with pytest.raises(ValueError, match="credit"):
        client.consumer(s, "first", credit=0)
    with pytest.raises(ValueError, match="256 bytes"):
        client.producer(s, name="n" * 300)
    with client.producer(s) as p:
        with pytest.raises(TypeError, match="bytes"):
            p.send("text")
        with pytest.raises(ValueError, match="frame_max"):
            p.send(b"x" * (client.locator.frame_max + 1))


def test_login_and_vhost_refused(stream_url):
    p = parse_stream_uri(stream_url)
    with pytest.raises(AuthenticationFailure, match="password is wrong"):
        connect(p, password="wrong")
    with pytest.raises(VirtualHostAccessFailure, match="nope"):
        connect(p, vhost="nope")


def test_commands_the_broker_lacks_say_so(client, new_stream):
    s = new_stream()
    if client.server_version >= (3, 11):
        stats = client.stream_stats(s)
        assert "first_chunk_id" in stats
    else:
        with pytest.raises(NotImplementedError, match="3.11"):
            client.stream_stats(s)
        with pytest.raises(NotImplementedError, match="3.13"):
            client.create_super_stream("x", 2)
        with pytest.raises(NotImplementedError, match="3.11"):
            client.consumer(s, "first", name="g", single_active=True)


def test_failover_over_a_host_list(stream_url):
    p = parse_stream_uri(stream_url)
    with connect(p, addresses=[("127.0.0.1", 1), (p.host, p.port)],
                 shuffle_addresses=False) as c:
        assert (c.locator.host, c.locator.port) == (p.host, p.port)
    t0 = time.monotonic()
    with pytest.raises(BrokerUnreachable) as e:
        connect(p, addresses=[("127.0.0.1", 1), ("127.0.0.1", 2)], failover_timeout=1.0)
    assert set(e.value.errors) == {"127.0.0.1:1", "127.0.0.1:2"}
    assert 0.9 <= time.monotonic() - t0 < 10
    assert "failover_timeout 1 s" in str(e.value)


def test_address_resolver_and_load_balancer_mode(stream_url, new_stream):
    p = parse_stream_uri(stream_url)
    seen = []

    def resolver(host, port):
        seen.append((host, port))
        return p.host, p.port

    with connect(p, address_resolver=resolver) as c:
        node = c._open_node(c.locator.advertised, "a test")  # a node dialled via the resolver
        try:
            assert seen == [c.locator.advertised] and node.advertised == c.locator.advertised
        finally:
            node.close()
    with connect(p, load_balancer=True) as c:
        s = f"h38p-lb-{time.monotonic_ns()}"
        c.create_stream(s)
        try:
            node = c._open_node(c.locator.advertised, "a test")
            node.close()
            publish(c, s, [b"via the balancer"])
            assert [b for _, b in read(c, s, "first", want=1)] == [b"via the balancer"]
        finally:
            c.delete_stream(s)


def test_closing_ends_producers_and_consumers(stream_url, new_stream):
    from spark_amqp.client.errors import ConnectionClosed

    s = new_stream()
    c = connect(stream_url)
    p = c.producer(s)
    cons = c.consumer(s, "first")
    c.close()
    with pytest.raises(ConnectionClosed):
        p.send(amqp10(b"late"))
    with pytest.raises(ConnectionClosed):
        cons.next_chunk(timeout=1)
    c.close()  # idempotent
