"""A TCP proxy for fault tests: forwards 127.0.0.1:<port> to a target and can **cut** every
open connection (RST, like a network failure), **stall** them (stop forwarding in both
directions while the sockets stay open: a silently dead path, only heartbeats notice) and
**slow** them (each chunk of at most ``chunk`` bytes waits ``delay`` seconds). New connections
are accepted throughout (a cut is not a permanent outage); ``accepted`` counts them and
``bytes_up`` holds the bytes each one forwarded client → broker, in accept order.

The one TCP proxy of the tests (tests/faults, tests/spark, tests/client, tests/rabbitmq_cluster
import it as ``faults_proxy``: tests/ is on ``sys.path``, the root conftest's folder).

Only loopback addresses are used. Threads are daemons and ``close()`` ends them.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from urllib.parse import urlparse, urlunparse

__all__ = ["FaultProxy"]


class FaultProxy:
    """``FaultProxy(url)``: ``url`` is an ``amqp://`` URL of the target; ``proxy.url`` is the
    same URL through the proxy. Use as a context manager or call :meth:`close`."""

    def __init__(self, url: str):
        u = urlparse(url)
        self.target = (u.hostname or "127.0.0.1", u.port or 5672)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        auth, _, _ = u.netloc.rpartition("@")
        self.url = urlunparse(u._replace(netloc=(auth + "@" if auth else "") + f"127.0.0.1:{self.port}"))
        self.accepted = 0
        self.bytes_up: list[int] = []
        self.stalled = threading.Event()
        self.delay = 0.0
        self.chunk = 65536
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy-accept").start()

    # -- faults ----------------------------------------------------------------------------
    def cut(self) -> None:
        """Drop every open connection with an RST on both sides (SO_LINGER 0)."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for s in pair:
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.close()
                except OSError:
                    pass

    def stall(self) -> None:
        """Stop forwarding (both directions); the bytes wait in the kernel buffers."""
        self.stalled.set()

    def slow(self, delay: float, chunk: int = 1024) -> None:
        """Forward at most ``chunk`` bytes at a time, each after ``delay`` seconds."""
        self.chunk, self.delay = chunk, delay

    def heal(self) -> None:
        """Undo :meth:`stall` and :meth:`slow`."""
        self.delay, self.chunk = 0.0, 65536
        self.stalled.clear()

    def close(self) -> None:
        self._closed.set()
        try:
            self.listener.close()
        except OSError:
            pass
        self.cut()

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- forwarding ------------------------------------------------------------------------
    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except (socket.timeout, OSError):
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
                self.accepted += 1
                self.bytes_up.append(0)
                index = len(self.bytes_up) - 1
            threading.Thread(target=self._pump, args=(client, upstream, index), daemon=True,
                             name="fault-proxy-pump").start()

    def _pump(self, a: socket.socket, b: socket.socket, index: int) -> None:
        """Forward between client ``a`` and upstream ``b``; ``bytes_up[index]`` counts a → b."""
        peer = {a: b, b: a}
        try:
            while not self._closed.is_set():
                if self.stalled.is_set():
                    time.sleep(0.02)
                    continue
                r, _, _ = select.select([a, b], [], [], 0.05)
                for src in r:
                    data = src.recv(self.chunk)
                    if not data:
                        raise OSError("closed")
                    if self.delay:
                        time.sleep(self.delay)
                    peer[src].sendall(data)
                    if src is a:
                        self.bytes_up[index] += len(data)
        except (OSError, ValueError):
            pass
        for s in (a, b):
            try:
                s.close()
            except OSError:
                pass
