"""The stream-protocol client against a scripted server (the codec's server role on a local
socket): bad input from a broker (a chunk with a flipped CRC, a frame announcing 2 GiB, a
deliver beyond credit, garbage in the handshake) ends the connection with the protocol's code
(the client sends ``close`` with it) and reaches every waiting caller; a silent broker is found
dead after two heartbeat intervals; the broker's ``close`` and ``metadata_update`` reach the
producers and consumers."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from spark_amqp.client.errors import ConnectionLost
from spark_amqp.client.stream import connect
from spark_amqp.protocol.stream import commands as C
from spark_amqp.protocol.stream.chunk import encode_chunk
from spark_amqp.protocol.stream.connection import SERVER, StreamConnection
from spark_amqp.protocol.stream.constants import Code
from spark_amqp.protocol.stream.errors import (AccessRefused, AuthenticationFailure,
                                               CorruptChunk, FrameTooLarge, StreamNotAvailable,
                                               UnknownFrame)


class Peer:
    """The server side of one accepted connection."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.sm = StreamConnection(SERVER, initial_frame_max=0)
        self.pending: list = []
        self.seen: list = []

    def recv(self, timeout: float = 10.0):
        self.sock.settimeout(timeout)
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError
            self.pending.extend(self.sm.receive_data(data))
        cmd = self.pending.pop(0)
        self.seen.append(cmd)
        return cmd

    def send(self, cmd) -> None:
        self.sock.sendall(self.sm.send(cmd))

    def handshake(self, heartbeat: int = 0, auth_code: int = Code.OK) -> None:
        pp = self.recv()
        self.send(C.PeerPropertiesResponse(pp.correlation_id, Code.OK, {"version": "3.10.8"}))
        h = self.recv()
        self.send(C.SaslHandshakeResponse(h.correlation_id, Code.OK, ["PLAIN"]))
        a = self.recv()
        self.send(C.SaslAuthenticateResponse(a.correlation_id, auth_code))
        if auth_code != Code.OK:
            return
        self.send(C.Tune(1048576, heartbeat))
        self.recv()  # the tune answer
        o = self.recv()
        host, port = self.sock.getsockname()[:2]
        self.send(C.OpenResponse(o.correlation_id, Code.OK,
                                 {"advertised_host": host, "advertised_port": str(port)}))

    def answer_metadata(self, stream: str) -> None:
        m = self.recv()
        host, port = self.sock.getsockname()[:2]
        self.send(C.MetadataResponse(m.correlation_id, [C.Broker(0, host, port)],
                                     [C.StreamMetadata(stream, Code.OK, 0, ())]))


class FakeServer:
    """A listening socket on 127.0.0.1:0; ``script(peer)`` runs in a thread per connection."""

    def __init__(self, script):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.script = script
        self.peers: list[Peer] = []
        self.errors: list = []
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"rabbitmq-stream://guest:guest@127.0.0.1:{self.port}/%2F"

    def _serve(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        peer = Peer(sock)
        self.peers.append(peer)
        try:
            self.script(peer)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            self.errors.append(exc)
        finally:
            self.done.set()

    def close(self) -> None:
        self.listener.close()
        for p in self.peers:
            p.sock.close()


@pytest.fixture
def fake():
    servers = []

    def make(script):
        s = FakeServer(script)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def subscribed(peer: Peer, stream: str = "s"):
    peer.handshake()
    peer.answer_metadata(stream)
    sub = peer.recv()
    peer.send(C.SubscribeResponse(sub.correlation_id, Code.OK))
    return sub


def wait_close(peer: Peer):
    """The client's close (skipping credits), answered."""
    while True:
        cmd = peer.recv()
        if type(cmd) is C.Close:
            try:
                peer.send(C.CloseResponse(cmd.correlation_id, Code.OK))
            except OSError:
                pass
            return cmd


def test_a_chunk_with_a_flipped_crc_is_refused_with_unknown_frame(fake):
    got = {}

    def script(peer):
        sub = subscribed(peer)
        good = encode_chunk([b"one"], 0, 0)
        bad = bytearray(encode_chunk([b"two"], 1, 0))
        bad[-1] ^= 0x01  # a flipped bit in the entries: the CRC no longer matches
        peer.send(C.Deliver(sub.subscription_id, good))
        peer.send(C.Deliver(sub.subscription_id, bytes(bad)))
        got["close"] = wait_close(peer)

    srv = fake(script)
    with connect(srv.url) as client:
        c = client.consumer("s", "first")
        assert c.next_chunk(timeout=10).messages() == [b"one"]  # the good one is kept
        with pytest.raises(CorruptChunk, match="CRC-32"):
            c.next_chunk(timeout=10)
    assert srv.done.wait(10) and not srv.errors
    assert got["close"].closing_code == Code.UNKNOWN_FRAME


def test_a_frame_announcing_2_gib_is_refused_from_its_size(fake):
    got = {}

    def script(peer):
        peer.handshake()
        req = peer.recv()  # create_stream
        peer.sock.sendall(struct.pack(">I", 2 ** 31) + b"\0" * 64)
        got["close"] = wait_close(peer)
        got["req"] = req

    srv = fake(script)
    client = connect(srv.url, max_receive_size=1 << 20)
    try:
        t0 = time.monotonic()
        with pytest.raises(FrameTooLarge, match="2,147,483,648"):
            client.create_stream("x")
        assert time.monotonic() - t0 < 5
    finally:
        client.close()
    assert srv.done.wait(10) and not srv.errors
    assert got["close"].closing_code == Code.FRAME_TOO_LARGE


def test_a_deliver_beyond_credit_is_refused(fake):
    got = {}

    def script(peer):
        sub = subscribed(peer)
        for i in range(3):  # credit 2: the third is a protocol violation
            peer.sock.sendall(C.Deliver(sub.subscription_id,
                                        encode_chunk([b"m%d" % i], i, 0)).encode())
        got["close"] = wait_close(peer)

    srv = fake(script)
    with connect(srv.url) as client:
        c = client.consumer("s", "first", credit=2)
        time.sleep(0.5)
        with pytest.raises(UnknownFrame, match="beyond its credit"):
            for _ in range(3):
                c.next_chunk(timeout=10)
    assert srv.done.wait(10) and not srv.errors
    assert got["close"].closing_code == Code.UNKNOWN_FRAME


def test_garbage_in_the_handshake(fake):
    def script(peer):
        peer.recv()
        peer.sock.sendall(struct.pack(">I", 6) + b"\x7f\x7f\x00\x01zz")
        time.sleep(0.5)

    srv = fake(script)
    with pytest.raises(UnknownFrame, match="unknown command"):
        connect(srv.url)


def test_a_refused_login(fake):
    srv = fake(lambda peer: peer.handshake(auth_code=Code.AUTHENTICATION_FAILURE))
    with pytest.raises(AuthenticationFailure, match="'guest' or its password is wrong"):
        connect(srv.url)


def test_a_silent_broker_is_dead_after_two_heartbeat_intervals(fake):
    release = threading.Event()

    def script(peer):
        sub = subscribed(peer)
        assert sub is not None
        release.wait(20)  # then says nothing at all: no heartbeats

    srv = fake(script)
    client = connect(srv.url, heartbeat=1)
    try:
        assert client.locator.heartbeat == 1
        c = client.consumer("s", "first")
        t0 = time.monotonic()
        with pytest.raises(ConnectionLost, match="2 intervals missed"):
            c.next_chunk(timeout=20)
        assert 1.5 <= time.monotonic() - t0 < 10
    finally:
        release.set()
        client.close()


def test_the_brokers_close_and_metadata_update_reach_producers_and_consumers(fake):
    step = threading.Event()

    def script(peer):
        peer.handshake()
        peer.answer_metadata("s")
        d = peer.recv()  # declare publisher
        peer.send(C.DeclarePublisherResponse(d.correlation_id, Code.OK))
        peer.answer_metadata("s")
        sub = peer.recv()
        peer.send(C.SubscribeResponse(sub.correlation_id, Code.OK))
        step.wait(10)
        peer.send(C.MetadataUpdate(Code.STREAM_NOT_AVAILABLE, "s"))
        peer.send(C.Close(0, Code.ACCESS_REFUSED, "permissions changed"))
        cr = peer.recv()
        assert type(cr) is C.CloseResponse

    srv = fake(script)
    client = connect(srv.url)
    try:
        p = client.producer("s")
        c = client.consumer("s", "first")
        step.set()
        with pytest.raises(StreamNotAvailable, match="leader moved"):
            c.next_chunk(timeout=10)
        deadline = time.monotonic() + 10
        while client.locator.is_open and time.monotonic() < deadline:
            time.sleep(0.02)
        with pytest.raises(StreamNotAvailable):
            p.send(b"x")
        with pytest.raises(AccessRefused, match="permissions changed"):
            client.metadata("s")
    finally:
        client.close()
    assert srv.done.wait(10) and not srv.errors
