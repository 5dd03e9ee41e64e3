"""The listener guard (spark_amqp/broker/listener_guard.py, issue 41): connection limits per
listener, per source address and by the file-descriptor reserve; the oldest unfinished
handshake making room; a handshake deadline that data does not extend; the rate-limited log
of refusals; any asyncio protocol (plain or buffered) behind it.

On the code before issue 41 (checked): the listener and per-address limits did not exist (all
sockets were admitted: the refusal tests fail), a handshake sent a byte at a time was dropped
at handshake_timeout too (that test passed), and there was no guard to wrap other protocols.
~12 s.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time

import pytest

from spark_amqp.broker.config import BrokerConfig
from spark_amqp.broker.embedded import EmbeddedBroker
from spark_amqp.broker.listener_guard import ListenerGuards, open_file_descriptors
from spark_amqp.broker.log_limit import RateLimitedLog
from spark_amqp.client import connect
from spark_amqp.protocol import PROTOCOL_HEADER


def _sock(port: int, source: str = "127.0.0.1") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
    s.settimeout(5)
    return s


def _closed_by_peer(s: socket.socket, within: float = 2.0) -> bool:
    """True when the peer closes ``s`` (EOF or reset) within ``within`` seconds; a connection
    that the broker answers (connection.start) is not closed."""
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _amqp_works(url: str) -> None:
    with connect(url) as c:
        ch = c.channel()
        ch.queue_declare("", exclusive=True)


def _on_loop(b: EmbeddedBroker, fn):
    fut = asyncio.run_coroutine_threadsafe(_call(fn), b._loop)
    return fut.result(10)


async def _call(fn):
    return fn()


def test_listener_maximum_refuses_then_the_oldest_handshake_makes_room(caplog):
    caplog.set_level(logging.WARNING, "spark_amqp.broker")
    cfg = BrokerConfig(ranch_connection_max=3)
    with EmbeddedBroker(config=cfg) as b:
        held = [_sock(b.port) for _ in range(3)]
        time.sleep(0.2)
        late = _sock(b.port)
        assert _closed_by_peer(late), "a 4th socket within a second must be refused"
        assert any("refused amqp connection" in r.message and "ranch_connection_max = 3" in r.message
                   for r in caplog.records), [r.message for r in caplog.records]
        time.sleep(1.0)   # the held sockets are now older than EVICT_AFTER
        new = _sock(b.port)
        new.sendall(PROTOCOL_HEADER)
        assert new.recv(1), "the new socket must be admitted and answered (connection.start)"
        assert _closed_by_peer(held[0]), "the oldest unfinished handshake must have been closed"
        assert any("oldest unfinished handshake" in r.message for r in caplog.records)
        for s in held + [late, new]:
            s.close()
        time.sleep(0.3)
        # opened connections are never evicted: with the maximum taken by them, a new one is refused
        conns = [connect(b.url) for _ in range(3)]
        try:
            time.sleep(1.2)
            extra = _sock(b.port)
            assert _closed_by_peer(extra)
            extra.close()
            for c in conns:
                c.channel().queue_declare("", exclusive=True)
        finally:
            for c in conns:
                c.close()


def test_per_address_maximum_spares_other_addresses(caplog):
    caplog.set_level(logging.WARNING, "spark_amqp.broker")
    with EmbeddedBroker(config=BrokerConfig(max_connections_per_address=2)) as b:
        try:
            mine = [_sock(b.port, "127.0.0.2") for _ in range(2)]
        except OSError as exc:
            pytest.skip(f"cannot bind 127.0.0.2 here: {exc}")
        time.sleep(1.2)   # older than EVICT_AFTER: the per-address rule evicts nothing all the same
        third = _sock(b.port, "127.0.0.2")
        assert _closed_by_peer(third)
        assert any("max_connections_per_address = 2" in r.message and "127.0.0.2" in r.message
                   for r in caplog.records)
        _amqp_works(b.url)   # from 127.0.0.1
        assert not _closed_by_peer(mine[0], 0.2)
        for s in mine + [third]:
            s.close()


def test_descriptor_reserve_refuses_before_the_process_runs_out(caplog):
    caplog.set_level(logging.WARNING, "spark_amqp.broker")
    with EmbeddedBroker() as b:
        guards = b.broker.guards

        def shrink():   # no descriptor left above the reserve (this process holds both ends)
            guards.nofile = open_file_descriptors() + guards.reserve + 1
            guards._fd_at = -1e9   # count again at the next socket
        opened = [connect(b.url) for _ in range(3)]   # admitted (their handshakes done: not evictable)
        _on_loop(b, shrink)
        try:
            s = _sock(b.port)
            assert _closed_by_peer(s)
            s.close()
            assert any("file descriptors are free" in r.message for r in caplog.records)
        finally:
            for c in opened:
                c.close()


def test_handshake_deadline_is_not_extended_by_a_trickle():
    with EmbeddedBroker(config=BrokerConfig(handshake_timeout=1000)) as b:
        s = _sock(b.port)
        t0 = time.monotonic()
        dropped = None
        for byte in PROTOCOL_HEADER * 4:
            try:
                s.sendall(bytes([byte]))
            except OSError:
                dropped = time.monotonic() - t0
                break
            time.sleep(0.15)
            if _closed_by_peer(s, 0.01):
                dropped = time.monotonic() - t0
                break
        s.close()
        assert dropped is not None and 0.8 <= dropped <= 2.5, dropped


def test_rate_limited_log_writes_one_line_then_a_count(caplog):
    caplog.set_level(logging.WARNING, "h41.test")
    loop = asyncio.new_event_loop()
    try:
        rl = RateLimitedLog(logging.getLogger("h41.test"), 0.2, loop)

        async def flood():
            for i in range(50):
                rl.warning("k", "refused %d", i)
            rl.warning("other", "something else")
            await asyncio.sleep(0.35)
        loop.run_until_complete(flood())
    finally:
        loop.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "h41.test"]
    assert lines == ["refused 0", "something else", "refused 49 (and 49 more like it in the last 0 s)"], lines
    assert rl.counts == {"k": 50, "other": 1}


class _Echo(asyncio.BufferedProtocol):
    def __init__(self):
        self.buf = bytearray(1024)
        self.transport = None
        self.admission = None

    def connection_made(self, transport):
        self.transport = transport

    def get_buffer(self, sizehint):
        return self.buf

    def buffer_updated(self, nbytes):
        data = bytes(self.buf[:nbytes])
        if data == b"hello":
            self.admission.handshake_done()
        self.transport.write(data)


def test_any_protocol_behind_a_guard_buffered_and_write_stall():
    """A guard around another asyncio protocol (the stream listener's way in): a buffered
    echo protocol that ends its handshake on b"hello" outlives the deadline; one that does not
    is closed; a peer that reads nothing of a flood is dropped after write_timeout."""
    loop = asyncio.new_event_loop()
    out: dict = {}

    class _Flood(asyncio.Protocol):
        def connection_made(self, transport):
            transport.set_write_buffer_limits(high=1024)
            self.t = transport
            self.t.write(b"x" * (16 << 20))   # far more than the socket buffers hold

    async def main():
        guards = ListenerGuards(loop)
        g = guards.listener("test", handshake_timeout=0.5)
        srv = await loop.create_server(g.protocol_factory(_Echo), "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        r1, w1 = await asyncio.open_connection("127.0.0.1", port)
        r2, w2 = await asyncio.open_connection("127.0.0.1", port)
        w1.write(b"hello")
        assert await r1.readexactly(5) == b"hello"
        w2.write(b"other")
        await r2.readexactly(5)
        await asyncio.sleep(0.8)
        w1.write(b"again")
        out["kept"] = await asyncio.wait_for(r1.readexactly(5), 2)
        out["dropped"] = await asyncio.wait_for(r2.read(), 2)
        out["open"] = g.open
        w1.close()
        w2.close()
        srv.close()
        fg = guards.listener("flood", write_timeout=0.5)
        fsrv = await loop.create_server(fg.protocol_factory(_Flood), "127.0.0.1", 0)
        sock = socket.create_connection(("127.0.0.1", fsrv.sockets[0].getsockname()[1]))
        sock.setblocking(False)
        while not fg.open:
            await asyncio.sleep(0.01)
        t0 = loop.time()
        while fg.open and loop.time() - t0 < 5:
            await asyncio.sleep(0.05)
        out["stall"] = loop.time() - t0
        sock.close()
        fsrv.close()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert out["kept"] == b"again" and out["dropped"] == b"" and out["open"] == 1, out
    assert 0.4 <= out["stall"] <= 2.0, out


def test_config_keys_of_the_limits(tmp_path):
    from spark_amqp.broker.config import ConfigError, ManagementLimits, load_config

    p = tmp_path / "broker.toml"
    p.write_text('[broker]\nconnection_max = 7\nranch_connection_max = 100\nmax_connections_per_address = 20\n'
                 'consumer_max_per_channel = 50\n[management]\nmax_connections = 64\ntcp.request_timeout = 3000\n'
                 'tcp.idle_timeout = 20000\nhttp.max_body_size = "1MB"\nallowed_hosts = ["Rabbit.Example"]\n')
    c = load_config(p)
    assert (c.max_connections, c.ranch_connection_max, c.max_connections_per_address,
            c.consumer_max_per_channel) == (7, 100, 20, 50)
    assert c.management == ManagementLimits(64, 3000, 20000, 1_000_000, ["rabbit.example"])
    d = BrokerConfig()
    assert (d.ranch_connection_max, d.max_connections_per_address, d.consumer_max_per_channel) == (0, 0, 0)
    assert d.management == ManagementLimits(1024, 5000, 60000, 10_000_000, [])
    p.write_text('[management]\ntcp.request_timeot = 3000\n')
    with pytest.raises(ConfigError, match="unknown \\[management\\] key.*tcp.request_timeot"):
        load_config(p)
    p.write_text('[broker]\nmax_connections_per_address = -1\n')
    with pytest.raises(ConfigError, match="max_connections_per_address must be a non-negative integer"):
        load_config(p)
