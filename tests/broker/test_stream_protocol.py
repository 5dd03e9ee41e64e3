"""The embedded broker's stream protocol (port 5552) against RabbitMQ 3.10.8: the same assertions
on both brokers (``stream_broker``: RabbitMQ's port 5552 and the embedded broker in its 3.10
mode), with rstream (an independent client, asyncio) and with the codec's raw client
(``stream_raw.RawStream``) where exact response codes matter. The embedded broker's own
features (the 4.3 mode's commands, permissions, TLS, heartbeats, restarts) follow."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from spark_amqp.protocol import stream as S
from spark_amqp.protocol.stream import Code, OffsetSpec, OffsetType
from stream_raw import RawStream, amqp10_data, stream_broker, streams  # noqa: F401
from session_guard import unique_name

rstream = pytest.importorskip("rstream")


def _run(coro, timeout: float = 60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def _publish(port: int, stream: str, bodies, name: str | None = None, ids=None) -> None:
    """Publish ``bodies`` with rstream's producer and wait for every confirm."""
    from rstream import AMQPMessage, Producer

    p = Producer("127.0.0.1", port, username="guest", password="guest")
    await p.start()
    try:
        msgs = []
        for i, b in enumerate(bodies):
            m = AMQPMessage(body=b)
            if ids is not None:
                m.publishing_id = ids[i]
            msgs.append(m)
        await p.send_batch(stream, msgs, publisher_name=name) if name else await p.send_batch(stream, msgs)
    finally:
        await p.close()


async def _read(port: int, stream: str, spec, n: int, idle: float = 1.5) -> list[tuple[int, bytes]]:
    """``(offset, stored bytes)`` read with rstream's consumer from offset spec ``spec``."""
    from rstream import Consumer, ConsumerOffsetSpecification

    got: list = []
    c = Consumer("127.0.0.1", port, username="guest", password="guest")
    await c.start()

    async def cb(msg, ctx):
        got.append((ctx.offset, bytes(msg)))
    await c.subscribe(stream, cb, decoder=lambda b: b, offset_specification=ConsumerOffsetSpecification(*spec))
    deadline = time.monotonic() + 30
    last = -1
    while time.monotonic() < deadline:
        await asyncio.sleep(idle / 3)
        if len(got) >= n and len(got) == last:
            break
        last = len(got)
    await c.close()
    return got


def _bodies(msgs) -> list[bytes]:
    from spark_amqp.protocol.amqp10 import decode_message
    return [decode_message(m).data for _, m in msgs]


# ------------------------------------------------------------------ rstream, both brokers

def test_rstream_publishes_with_confirms_and_reads_every_offset_spec(stream_broker, streams):
    from rstream import OffsetType as RT
    port, _ = stream_broker
    s = streams()
    bodies = [b"m%03d" % i for i in range(30)]
    for i in range(3):   # three confirmed batches: three chunks at least
        _run(_publish(port, s, bodies[10 * i:10 * i + 10]))
    first = _run(_read(port, s, (RT.FIRST, None), 30))
    assert [o for o, _ in first] == list(range(30)) and _bodies(first) == bodies
    assert _run(_read(port, s, (RT.OFFSET, 17), 13))[0][0] == 17
    last = _run(_read(port, s, (RT.LAST, None), 1))
    assert last and last[-1][0] == 29 and last[0][0] >= 20      # the last chunk, whole
    assert _run(_read(port, s, (RT.NEXT, None), 0, idle=0.6)) == []
    ts = _run(_read(port, s, (RT.TIMESTAMP, int(time.time() * 1000) - 60_000), 30))
    assert [o for o, _ in ts] == list(range(30))
    assert _run(_read(port, s, (RT.TIMESTAMP, int(time.time() * 1000) + 60_000), 0, idle=0.6)) == []


def test_deduplication_by_producer_name(stream_broker, streams):
    port, _ = stream_broker
    s = streams()
    name = "producer-" + uuid.uuid4().hex[:6]
    _run(_publish(port, s, [b"a", b"b", b"c"], name=name, ids=[1, 2, 3]))
    _run(_publish(port, s, [b"b", b"c", b"d"], name=name, ids=[2, 3, 4]))   # 2, 3 are duplicates
    got = _run(_read(port, s, (rstream.OffsetType.FIRST, None), 4))
    assert _bodies(got) == [b"a", b"b", b"c", b"d"]
    with RawStream(port) as c:
        c.handshake()
        r = c.rpc(S.QueryPublisherSequence(0, name, s))
        assert (r.code, r.sequence) == (Code.OK, 4)
        assert c.rpc(S.QueryPublisherSequence(0, "nobody", s)).sequence == 0


def test_stored_offsets_take_an_offset(stream_broker, streams):
    """As osiris: StoreOffset between two publishes writes a tracking chunk, which takes an
    offset; readers skip it (RabbitMQ 3.10.8: offsets 0 and 3 after two StoreOffset)."""
    port, _ = stream_broker
    s = streams()
    _run(_publish(port, s, [b"a"]))
    with RawStream(port) as c:
        c.handshake()
        assert c.rpc(S.QueryOffset(0, "ref1", s)).code == Code.NO_OFFSET
        c.send(S.StoreOffset("ref1", s, 0))
        time.sleep(0.3)
        c.send(S.StoreOffset("ref2", s, 0))
        time.sleep(0.3)
        r = c.rpc(S.QueryOffset(0, "ref1", s))
        assert (r.code, r.offset) == (Code.OK, 0)
    _run(_publish(port, s, [b"b"]))
    got = _run(_read(port, s, (rstream.OffsetType.FIRST, None), 2))
    assert [o for o, _ in got] == [0, 3] and _bodies(got) == [b"a", b"b"]


def test_credit_is_per_chunk(stream_broker, streams):
    port, _ = stream_broker
    s = streams()
    for i in range(3):
        _run(_publish(port, s, [b"c%d" % i]))        # a chunk each
    with RawStream(port) as c:
        c.handshake()
        assert c.rpc(S.Subscribe(0, 1, s, OffsetSpec(OffsetType.FIRST), 1)).code == Code.OK
        chunks = [e for e in c.events(1.0) if isinstance(e, S.Chunk)]
        assert len(chunks) == 1 and chunks[0].chunk_id == 0
        c.send(S.Credit(1, 1))
        chunks = [e for e in c.events(1.0) if isinstance(e, S.Chunk)]
        assert len(chunks) == 1 and chunks[0].chunk_id == 1
        c.send(S.Credit(1, 5))
        chunks = [e for e in c.events(1.0) if isinstance(e, S.Chunk)]
        assert [ch.chunk_id for ch in chunks] == [2]
        c.send(S.Credit(9, 1))                       # an unknown subscription
        r = c.wait_for(S.CreditResponse)
        assert (r.code, r.subscription_id) == (Code.SUBSCRIPTION_ID_DOES_NOT_EXIST, 9)


def test_response_codes(stream_broker, streams):
    """The codes RabbitMQ 3.10.8 answers (probed with the raw client), command by command."""
    port, _ = stream_broker
    s = streams(arguments={"max-age": "1h"})
    missing = "h38b-missing-" + uuid.uuid4().hex[:6]
    with RawStream(port) as c:
        opened = c.handshake()
        assert opened.code == Code.OK and set(opened.properties) == {"advertised_host", "advertised_port"}
        md = c.rpc(S.Metadata(0, [missing]))
        assert md.brokers == [] and md.streams == [(missing, Code.STREAM_DOES_NOT_EXIST, 0xFFFF, ())]
        md = c.rpc(S.Metadata(0, [s, missing]))
        by_name = {m[0]: m for m in md.streams}
        assert len(md.brokers) == 1 and by_name[s][1:3] == (Code.OK, md.brokers[0][0])
        assert [m[0] for m in md.streams] == sorted(by_name, reverse=True)   # a map folded: descending
        assert str(md.brokers[0][2]) == opened.properties["advertised_port"]
        assert c.rpc(S.CreateStream(0, s, {"max-age": "1h"})).code == Code.STREAM_ALREADY_EXISTS
        assert c.rpc(S.CreateStream(0, s, {})).code == Code.PRECONDITION_FAILED
        assert c.rpc(S.QueryOffset(0, "r", missing)).code == Code.STREAM_DOES_NOT_EXIST
        assert c.rpc(S.QueryPublisherSequence(0, "p", missing)).code == Code.STREAM_DOES_NOT_EXIST
        assert c.rpc(S.DeclarePublisher(0, 1, "p", missing)).code == Code.STREAM_DOES_NOT_EXIST
        assert c.rpc(S.DeclarePublisher(0, 1, "p", s)).code == Code.OK
        assert c.rpc(S.DeclarePublisher(0, 1, "q", s)).code == Code.PRECONDITION_FAILED   # id taken
        assert c.rpc(S.DeclarePublisher(0, 2, "p", s)).code == Code.PRECONDITION_FAILED   # name taken
        assert c.rpc(S.DeletePublisher(0, 9)).code == Code.PUBLISHER_DOES_NOT_EXIST
        assert c.rpc(S.Unsubscribe(0, 9)).code == Code.SUBSCRIPTION_ID_DOES_NOT_EXIST
        assert c.rpc(S.Subscribe(0, 1, missing, OffsetSpec(OffsetType.FIRST), 1)).code == Code.STREAM_DOES_NOT_EXIST
        assert c.rpc(S.Subscribe(0, 1, s, OffsetSpec(OffsetType.FIRST), 1)).code == Code.OK
        assert c.rpc(S.Subscribe(0, 1, s, OffsetSpec(OffsetType.FIRST), 1)).code == \
            Code.SUBSCRIPTION_ID_ALREADY_EXISTS
        assert c.rpc(S.DeletePublisher(0, 1)).code == Code.OK
        c.send(S.Publish(7, [1, 2], [amqp10_data(b"x"), amqp10_data(b"y")]))
        err = c.wait_for(S.PublishError)
        assert err.publisher_id == 7 and err.errors == [(1, Code.PUBLISHER_DOES_NOT_EXIST),
                                                        (2, Code.PUBLISHER_DOES_NOT_EXIST)]
        r = c.rpc(S.Route(0, "k", missing))
        assert (r.code, r.streams) == (Code.STREAM_DOES_NOT_EXIST, [])
        assert c.rpc(S.Partitions(0, missing)).code == Code.STREAM_DOES_NOT_EXIST
        other = RawStream(port)
        other.handshake()
        assert other.rpc(S.DeleteStream(0, s)).code == Code.OK
        upd = c.wait_for(S.MetadataUpdate)                 # the subscriber is told
        assert (upd.code, upd.stream) == (Code.STREAM_NOT_AVAILABLE, s)
        assert other.rpc(S.DeleteStream(0, s)).code == Code.STREAM_DOES_NOT_EXIST
        other.close()


def test_authentication_and_vhost_failures(stream_broker):
    port, _ = stream_broker
    with RawStream(port) as c:
        assert c.handshake(password="wrong").code == Code.AUTHENTICATION_FAILURE
        assert c.wait_closed()
    with RawStream(port) as c:
        assert c.handshake(vhost="no-such-vhost").code == Code.VIRTUAL_HOST_ACCESS_FAILURE
    with RawStream(port) as c:
        assert c.handshake(mechanism="NOPE").code == Code.SASL_MECHANISM_NOT_SUPPORTED


def test_unknown_command_after_open_is_closed_with_unknown_frame(stream_broker):
    port, _ = stream_broker
    with RawStream(port) as c:
        c.handshake()
        c.send_raw(b"\x00\x00\x00\x08\x00\x7f\x00\x01\x00\x00\x00\x01")     # key 0x7f
        close = c.wait_for(S.Close)
        assert close.closing_code == Code.UNKNOWN_FRAME


def test_super_stream_created_over_0_9_1_routes_and_lists_partitions(stream_broker):
    """A super stream as RabbitMQ 3.10 makes one: a direct exchange with x-super-stream, one
    stream per partition bound with its key and x-stream-partition-order."""
    import pika
    port, url = stream_broker
    name = unique_name("h38b-super")
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.exchange_declare(name, "direct", durable=True, arguments={"x-super-stream": True})
    parts = [f"{name}-{i}" for i in range(3)]
    for i, p in enumerate(reversed(parts)):       # bound out of order: the order argument decides
        j = 2 - i
        ch.queue_declare(p, durable=True, arguments={"x-queue-type": "stream"})
        ch.queue_bind(p, name, routing_key=f"k{j}", arguments={"x-stream-partition-order": j})
    try:
        with RawStream(port) as c:
            c.handshake()
            assert c.rpc(S.Partitions(0, name)).streams == parts
            assert c.rpc(S.Route(0, "k1", name)).streams == [parts[1]]
            r = c.rpc(S.Route(0, "nothing", name))
            assert (r.code, r.streams) == (Code.OK, [])
    finally:
        for p in parts:
            ch.queue_delete(p)
        ch.exchange_delete(name)
        conn.close()


def test_a_subscription_without_credit_gets_nothing_and_blocks_no_one(stream_broker, streams):
    """Credit 0 forever: no chunk is sent, the stream keeps growing, and another client of the
    same stream reads everything."""
    port, _ = stream_broker
    s = streams()
    with RawStream(port) as starved:
        starved.handshake()
        assert starved.rpc(S.Subscribe(0, 1, s, OffsetSpec(OffsetType.FIRST), 0)).code == Code.OK
        for i in range(5):
            _run(_publish(port, s, [b"x%d" % i] * 20))
        got = _run(_read(port, s, (rstream.OffsetType.FIRST, None), 100))
        assert len(got) == 100
        assert [e for e in starved.events(1.0) if isinstance(e, S.Chunk)] == []


# ------------------------------------------------------------------ bad input (the embedded broker)

def _amqp_round_trip(url: str) -> float:
    import pika
    t = time.monotonic()
    c = pika.BlockingConnection(pika.URLParameters(url))
    ch = c.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", q, b"ping")
    for _ in range(100):
        m = ch.basic_get(q, auto_ack=True)
        if m[0] is not None:
            break
        time.sleep(0.01)
    c.close()
    return time.monotonic() - t


def test_garbage_and_huge_frames_close_only_that_connection(embedded_stream_broker):
    b = embedded_stream_broker
    port = b.stream_port
    # garbage before the handshake: closed without a word (RabbitMQ 3.10.8 too, at once)
    with RawStream(port) as c:
        c.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 10)
        assert c.wait_closed(5)
    # a frame of 2 GiB announced before open: over initial_frame_max/frame_max, closed at once
    with RawStream(port) as c:
        c.send_raw(b"\x7f\xff\xff\xff\x00\x11\x00\x01")
        assert c.wait_closed(5)
    # after open: a close with FRAME_TOO_LARGE, from the 4-byte size alone
    with RawStream(port) as c:
        c.handshake()
        c.send_raw(b"\x7f\xff\xff\xff\x00\x02\x00\x01")
        assert c.wait_for(S.Close).closing_code == Code.FRAME_TOO_LARGE
    # a truncated publish (its count claims more entries than the frame holds)
    with RawStream(port) as c:
        c.handshake()
        assert c.rpc(S.CreateStream(0, "h38b-bad-input", {})).code in (Code.OK, Code.STREAM_ALREADY_EXISTS)
        assert c.rpc(S.DeclarePublisher(0, 1, "", "h38b-bad-input")).code == Code.OK
        c.send_raw(b"\x00\x00\x00\x0b\x00\x02\x00\x01\x01\x00\x00\x00\x05\x00\x00")
        assert c.wait_for(S.Close).closing_code == Code.UNKNOWN_FRAME
    # meanwhile the broker serves others as before
    assert _amqp_round_trip(b.url) < 2.0
    with RawStream(port) as c:
        assert c.handshake().code == Code.OK
        assert c.rpc(S.DeleteStream(0, "h38b-bad-input")).code == Code.OK


def test_a_flood_of_garbage_connections_leaves_amqp_fast(embedded_stream_broker):
    """While 50 stream connections send garbage and 50 more trickle a handshake, an AMQP
    round trip on the same broker stays fast."""
    import socket
    import threading
    b = embedded_stream_broker
    stop = threading.Event()

    def garbage():
        while not stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", b.stream_port), timeout=2)
                s.sendall(b"\x00\x00\x10\x00" + b"\xee" * 4096)
                s.close()
            except OSError:
                pass
    idle = [socket.create_connection(("127.0.0.1", b.stream_port), timeout=2) for _ in range(50)]
    threads = [threading.Thread(target=garbage, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        worst = max(_amqp_round_trip(b.url) for _ in range(5))
        assert worst < 2.0
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        for s in idle:
            s.close()


# ------------------------------------------------------------------ the embedded broker only

@pytest.fixture
def broker43():
    from spark_amqp import EmbeddedBroker
    with EmbeddedBroker(stream_port=0) as b:
        yield b


def test_43_mode_commands(broker43):
    port = broker43.stream_port
    with RawStream(port) as c:
        c.handshake()
        r = c.rpc(S.ExchangeCommandVersions(0, [(S.Key.DELIVER, 1, 2)]))
        assert r.code == Code.OK and (S.Key.PUBLISH, 1, 2) in [tuple(x) for x in r.commands]
        assert c.rpc(S.CreateSuperStream(0, "inv", ["inv-0", "inv-1"], ["a", "b"], {})).code == Code.OK
        assert c.rpc(S.Partitions(0, "inv")).streams == ["inv-0", "inv-1"]
        assert c.rpc(S.Route(0, "b", "inv")).streams == ["inv-1"]
        assert c.rpc(S.CreateSuperStream(0, "inv", ["inv-0"], ["a"], {})).code == Code.STREAM_ALREADY_EXISTS
        assert c.rpc(S.DeclarePublisher(0, 1, "", "inv-0")).code == Code.OK
        c.send(S.Publish(1, [1, 2], [amqp10_data(b"a"), amqp10_data(b"b")], ["red", None]))
        assert list(c.wait_for(S.PublishConfirm).publishing_ids) == [1, 2]
        st = c.rpc(S.StreamStats(0, "inv-0"))
        assert st.code == Code.OK and st.stats == {"first_chunk_id": 0, "committed_chunk_id": 0, "last_chunk_id": 0}
        assert c.rpc(S.Subscribe(0, 1, "inv-0", OffsetSpec(OffsetType.FIRST), 5)).code == Code.OK
        chunk = c.wait_for(S.Chunk)
        assert chunk.committed_chunk_id == 0 and chunk.num_records == 2     # deliver v2
        assert c.rpc(S.DeleteSuperStream(0, "inv")).code == Code.OK
        assert c.rpc(S.Metadata(0, ["inv-0"])).streams[0][1] == Code.STREAM_DOES_NOT_EXIST


def test_310_mode_refuses_newer_commands(embedded_stream_broker):
    with RawStream(embedded_stream_broker.stream_port) as c:
        c.handshake()
        c.send(S.StreamStats(0, "x"))
        assert c.wait_for(S.Close).closing_code == Code.UNKNOWN_FRAME


def test_43_filtering_skips_chunks(broker43):
    port = broker43.stream_port
    with RawStream(port) as c:
        c.handshake()
        assert c.rpc(S.CreateStream(0, "filtered", {})).code == Code.OK
        assert c.rpc(S.DeclarePublisher(0, 1, "", "filtered")).code == Code.OK
        for i, colour in enumerate(["red", "blue", "red"]):
            c.send(S.Publish(1, [i], [amqp10_data(colour.encode())], [colour]))
            c.wait_for(S.PublishConfirm)
        assert c.rpc(S.Subscribe(0, 1, "filtered", OffsetSpec(OffsetType.FIRST), 10,
                                 {"filter.0": "red"})).code == Code.OK
        chunks = [e for e in c.events(1.0) if isinstance(e, S.Chunk)]
        assert [ch.chunk_id for ch in chunks] == [0, 2]


def test_permissions_and_loopback(tmp_path):
    from spark_amqp import EmbeddedBroker
    cfg = tmp_path / "broker.toml"
    cfg.write_text('[[users]]\nname = "guest"\npassword = "guest"\n\n[[users]]\nname = "reader"\n'
                   'password = "r"\n\n[[vhosts]]\nname = "/"\n\n[[permissions]]\nuser = "guest"\nvhost = "/"\n\n'
                   '[[permissions]]\nuser = "reader"\nvhost = "/"\nconfigure = ""\nwrite = ""\nread = ".*"\n')
    with EmbeddedBroker(config=cfg, stream_port=0) as b:
        with RawStream(b.stream_port) as g:
            g.handshake()
            assert g.rpc(S.CreateStream(0, "perm", {})).code == Code.OK
        with RawStream(b.stream_port) as r:
            assert r.handshake("reader", "r").code == Code.OK
            assert r.rpc(S.CreateStream(0, "perm2", {})).code == Code.ACCESS_REFUSED
            assert r.rpc(S.DeleteStream(0, "perm")).code == Code.ACCESS_REFUSED
            assert r.rpc(S.DeclarePublisher(0, 1, "", "perm")).code == Code.ACCESS_REFUSED
            assert r.rpc(S.Subscribe(0, 1, "perm", OffsetSpec(OffsetType.FIRST), 1)).code == Code.OK
        with RawStream(b.stream_port, host="127.0.0.1") as c:
            # guest from a non-loopback local address is refused; here the address is loopback
            assert c.handshake().code == Code.OK


def test_heartbeat_timeout_closes_a_silent_client(tmp_path):
    from spark_amqp import EmbeddedBroker
    cfg = tmp_path / "broker.toml"
    cfg.write_text("[stream]\nheartbeat = 1\n")
    with EmbeddedBroker(config=cfg, stream_port=0) as b:
        with RawStream(b.stream_port) as c:
            c.handshake()
            t = time.monotonic()
            assert c.wait_closed(10)
            assert 1.5 < time.monotonic() - t < 6
            assert any(isinstance(e, S.Heartbeat) for e in c.pending)


def test_offsets_sequences_and_messages_survive_a_restart(tmp_path):
    from spark_amqp import EmbeddedBroker
    with EmbeddedBroker(data_dir=tmp_path, stream_port=0) as b:
        with RawStream(b.stream_port) as c:
            c.handshake()
            assert c.rpc(S.CreateStream(0, "durable", {})).code == Code.OK
            assert c.rpc(S.DeclarePublisher(0, 1, "prod", "durable")).code == Code.OK
            c.send(S.Publish(1, [5, 6], [amqp10_data(b"a"), amqp10_data(b"b")]))
            assert list(c.wait_for(S.PublishConfirm).publishing_ids) == [5, 6]
            c.send(S.StoreOffset("cons", "durable", 1))
            time.sleep(0.3)
    with EmbeddedBroker(data_dir=tmp_path, stream_port=0) as b:
        with RawStream(b.stream_port) as c:
            c.handshake()
            assert c.rpc(S.QueryPublisherSequence(0, "prod", "durable")).sequence == 6
            r = c.rpc(S.QueryOffset(0, "cons", "durable"))
            assert (r.code, r.offset) == (Code.OK, 1)
            assert c.rpc(S.DeclarePublisher(0, 1, "prod", "durable")).code == Code.OK
            c.send(S.Publish(1, [6, 7], [amqp10_data(b"b"), amqp10_data(b"c")]))   # 6: a duplicate
            assert list(c.wait_for(S.PublishConfirm).publishing_ids) == [6, 7]
            assert c.rpc(S.Subscribe(0, 1, "durable", OffsetSpec(OffsetType.FIRST), 10)).code == Code.OK
            recs = [m for e in c.events(1.0) if isinstance(e, S.Chunk) for m in e.messages()]
            from spark_amqp.protocol.amqp10 import decode_message
            assert [decode_message(m).data for m in recs] == [b"a", b"b", b"c"]


def test_43_single_active_consumer(broker43):
    """Two subscriptions of one group: the first is made active (consumer update) and reads;
    when it goes, the second is made active and starts where its answer says (first)."""
    from spark_amqp.client.stream import connect
    from spark_amqp.protocol.amqp10 import Message, encode_message

    with connect(broker43.stream_url) as client:
        client.create_stream("sac")
        with client.producer("sac") as p:
            for i in range(5):
                p.send(encode_message(Message(b"m%d" % i)))
            assert p.wait_for_confirms(30).ok
        updates = []
        a = client.consumer("sac", "first", name="group", single_active=True,
                            on_update=lambda active: updates.append(("a", active)))
        b = client.consumer("sac", "first", name="group", single_active=True,
                            on_update=lambda active: updates.append(("b", active)))
        got_a = []
        deadline = time.monotonic() + 10
        while len(got_a) < 5 and time.monotonic() < deadline:
            got_a += list(a.messages(timeout=0.5))
        assert [o for o, _ in got_a] == [0, 1, 2, 3, 4]
        assert list(b.messages(timeout=0.5)) == []          # not active: nothing
        a.close()
        got_b = []
        deadline = time.monotonic() + 10
        while len(got_b) < 5 and time.monotonic() < deadline:
            got_b += list(b.messages(timeout=0.5))
        assert [o for o, _ in got_b] == [0, 1, 2, 3, 4]
        assert ("a", True) in updates and ("b", True) in updates
        b.close()
    with RawStream(broker43.stream_port) as c:                # a group needs a name
        c.handshake()
        r = c.rpc(S.Subscribe(0, 1, "sac", OffsetSpec(OffsetType.FIRST), 1, {"single-active-consumer": "true"}))
        assert r.code == Code.PRECONDITION_FAILED


def test_retention_of_a_stream_created_over_the_stream_protocol(embedded_stream_broker):
    """max-length-bytes with small segments: old segments go, offsets stay; a subscription
    from first starts at the first retained offset."""
    port = embedded_stream_broker.stream_port
    name = "h38b-retention-" + uuid.uuid4().hex[:6]
    with RawStream(port) as c:
        c.handshake()
        assert c.rpc(S.CreateStream(0, name, {"max-length-bytes": "20000",
                                              "stream-max-segment-size-bytes": "5000"})).code == Code.OK
        assert c.rpc(S.DeclarePublisher(0, 1, "", name)).code == Code.OK
        for i in range(100):
            c.send(S.Publish(1, [i], [amqp10_data(b"r%03d" % i + b"." * 300)]))
            c.wait_for(S.PublishConfirm)
        assert c.rpc(S.Subscribe(0, 1, name, OffsetSpec(OffsetType.FIRST), 100)).code == Code.OK
        chunks = [e for e in c.events(1.0) if isinstance(e, S.Chunk)]
        first = chunks[0].chunk_id
        assert 0 < first and chunks[-1].next_offset == 100
        assert sum(ch.num_records for ch in chunks) == 100 - first
        assert c.rpc(S.DeleteStream(0, name)).code == Code.OK


def test_the_stream_listener_has_the_handshake_timeout(tmp_path):
    """The listener guard of every listener (issue 41): a socket that never finishes the
    handshake is closed after handshake_timeout."""
    import socket
    from spark_amqp import EmbeddedBroker
    cfg = tmp_path / "broker.toml"
    cfg.write_text("[broker]\nhandshake_timeout = 1000\n")
    with EmbeddedBroker(config=cfg, stream_port=0) as b:
        s = socket.create_connection(("127.0.0.1", b.stream_port), timeout=10)
        t = time.monotonic()
        assert s.recv(1) == b""
        assert 0.5 < time.monotonic() - t < 5
        s.close()


def test_a_resource_alarm_blocks_stream_publishers(broker43):
    """While an alarm is on, a publisher cannot be declared (PRECONDITION_FAILED) and a
    publishing connection is not read (its publishes wait); when it clears they go through."""
    b = broker43

    def alarm(reason):
        done = threading.Event()
        b._loop.call_soon_threadsafe(lambda: (b.broker.set_alarm("disk", reason), done.set()))
        assert done.wait(5)
    import threading
    with RawStream(b.stream_port) as c:
        c.handshake()
        assert c.rpc(S.CreateStream(0, "alarmed", {})).code == Code.OK
        assert c.rpc(S.DeclarePublisher(0, 1, "", "alarmed")).code == Code.OK
        alarm("low on disk")   # (a memory alarm clears itself at the next tick here)
        try:
            c.send(S.Publish(1, [1], [amqp10_data(b"held")]))
            assert [e for e in c.events(1.0) if isinstance(e, S.PublishConfirm)] == []
            with RawStream(b.stream_port) as other:
                other.handshake()
                assert other.rpc(S.DeclarePublisher(0, 1, "", "alarmed")).code == Code.PRECONDITION_FAILED
        finally:
            alarm(None)
        assert list(c.wait_for(S.PublishConfirm).publishing_ids) == [1]
