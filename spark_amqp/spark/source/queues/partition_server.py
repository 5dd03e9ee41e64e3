"""Partitions by reference: the driver's source runner serves planned partitions' frames over a
local TCP socket, so a big micro-batch does not travel inside Spark's tasks.

Why (issue 19): the queue-mode source consumes on the driver (it acks after Spark's commit),
so a batch's messages must get from the driver's source runner to the executors. Inside the
``InputPartition`` the driver JVM holds them and serialises each partition into its task
(Spark warns "Stage N contains a task of very large size" above 1000 KiB). Here a partition
carries only a :class:`FramesRef` (address, per-query secret token, key, byte count) and the
executor's ``read`` fetches its frames from the runner (:func:`fetch`).

Ack-after-commit stays as it was: the :class:`PartitionServer` keeps a partition's frames
until the batch is committed (the reader calls :meth:`PartitionServer.release` with the
committed offset), so a retried task fetches them again; a restarted query has a new runner
and a new session whose ``partitions`` of an uncommitted batch are empty (the broker
redelivers those messages), so no reference outlives its runner in a way that matters. A
fetch that fails (runner gone, connection refused or cut, frames already released, wrong
token) raises :class:`PartitionFetchError`: the task and the batch fail, nothing in the batch
is acked and the messages stay in the queue.

Wire format (one request per connection, big-endian): the executor sends the 16-byte token
and the 8-byte key; the runner answers a status byte (0 ok, 1 unknown key, 2 bad token), an
8-byte length and that many bytes (the frames, or a UTF-8 error text).

Address: the server binds to the driver host as Spark picks it by default (``Utils.localHostName``:
the ``SPARK_LOCAL_IP`` environment variable, else the address of this host's name, a loopback
one replaced by the default route's interface address; see :func:`server_host`), on an
ephemeral port; the Python source runner has no Spark conf to read
``spark.driver.host`` from.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import socket
import socketserver
import struct
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Sequence
from ...errors import PartitionFetchError

__all__ = ["FramesRef", "PartitionServer", "PartitionFetchError", "fetch", "server_host"]

log = logging.getLogger(__name__)

_REQ = struct.Struct(">16sQ")
_RESP = struct.Struct(">BQ")
_OK, _UNKNOWN, _BAD_TOKEN = 0, 1, 2
#: seconds a fetch waits to connect and between reads before it fails the task
FETCH_TIMEOUT = 120.0
_RECV_CHUNK = 1 << 20


@dataclass(frozen=True)
class FramesRef:
    """Where to fetch messages ``start .. start + n - 1`` of ``queue``: ``nbytes`` bytes of
    frames under ``key`` at ``host:port``, asked for with ``token`` (16 bytes)."""

    queue: str
    start: int
    n: int
    nbytes: int
    host: str
    port: int
    token: bytes
    key: int


def server_host() -> str:
    """The address to bind and advertise (see module doc): ``SPARK_LOCAL_IP``, else the
    address this host's name resolves to; when that is a loopback address, the address of the
    interface of the default route (Spark's ``Utils.findLocalInetAddress`` also swaps a
    loopback name address for a non-loopback interface's); else ``127.0.0.1``."""
    env = os.environ.get("SPARK_LOCAL_IP")
    if env:
        return env
    try:
        addr = socket.gethostbyname(socket.gethostname())
    except OSError:
        addr = "127.0.0.1"
    if addr.startswith("127."):
        try:  # a UDP connect sends nothing; it only picks the outgoing interface
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                probe.connect(("192.0.2.1", 9))  # TEST-NET-1 (RFC 5737): never a real peer
                addr = probe.getsockname()[0]
        except OSError:
            pass
    return addr


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        srv: PartitionServer = self.server.owner  # type: ignore[attr-defined]
        sock: socket.socket = self.request
        sock.settimeout(FETCH_TIMEOUT)
        try:
            req = _recv_exactly(sock, _REQ.size)
        except (OSError, EOFError):
            return
        token, key = _REQ.unpack(req)
        if not hmac.compare_digest(token, srv.token):
            _send_error(sock, _BAD_TOKEN, "bad token")
            return
        chunks = srv.lookup(key)
        if chunks is None:
            _send_error(sock, _UNKNOWN, f"partition {key} is not held by the source runner "
                        "(its batch was committed, or the runner was restarted)")
            return
        total = sum(len(c) for c in chunks)
        try:
            sock.sendall(_RESP.pack(_OK, total))
            for c in chunks:
                sock.sendall(c)
            srv.count_served(total)
        except OSError as e:
            log.info("amqp source: an executor's fetch of partition %s broke off: %s", key, e)


def _send_error(sock: socket.socket, status: int, text: str) -> None:
    data = text.encode()
    try:
        sock.sendall(_RESP.pack(status, len(data)) + data)
    except OSError:
        pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = False
    request_queue_size = 64


class PartitionServer:
    """Driver side: holds the frames of planned partitions and serves them (see module doc).

    ``host``: address to bind and advertise (default :func:`server_host`); the port is
    ephemeral. Starts a daemon thread; :meth:`close` stops it. Raises ``OSError`` when it
    cannot bind.
    """

    def __init__(self, host: str | None = None):
        self.host = host or server_host()
        self.token = secrets.token_bytes(16)
        self._lock = threading.Lock()
        self._held: dict[int, tuple[str, str, int, Sequence[Any]]] = {}  # key -> (session, q, hi, chunks)
        self._next_key = 0
        self.stats = {"held": 0, "served": 0, "served_bytes": 0, "released": 0}
        self._server = _Server((self.host, 0), _Handler)
        self._server.owner = self  # type: ignore[attr-defined]
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="amqp-partition-server", daemon=True)
        self._thread.start()

    def hold(self, session: str, queue: str, start: int, n: int,
             chunks: Sequence[Any]) -> FramesRef:
        """Keep ``chunks`` (bytes-like, concatenated they are the frames of messages
        ``start .. start + n - 1`` of ``queue`` in ``session``) until :meth:`release` passes
        their end; return the reference a partition carries."""
        with self._lock:
            key = self._next_key
            self._next_key += 1
            self._held[key] = (session, queue, start + n, chunks)
            self.stats["held"] += 1
        nbytes = sum(len(c) for c in chunks)
        return FramesRef(queue, start, n, nbytes, self.host, self.port, self.token, key)

    def lookup(self, key: int) -> Sequence[Any] | None:
        """The chunks held under ``key``, or None."""
        with self._lock:
            e = self._held.get(key)
        return None if e is None else e[3]

    def count_served(self, nbytes: int) -> None:
        with self._lock:
            self.stats["served"] += 1
            self.stats["served_bytes"] += nbytes

    def release(self, session: str, committed: Mapping[str, int], current: str | None) -> int:
        """Forget what a committed offset covers: partitions of ``session`` ending at or below
        ``committed[queue]``, and partitions of any session other than ``session`` and
        ``current`` (older sessions: their batches precede the committed one). Returns how
        many were dropped."""
        with self._lock:
            drop = [k for k, (s, q, hi, _) in self._held.items()
                    if (s == session and hi <= committed.get(q, 0))
                    or (s != session and s != current)]
            for k in drop:
                del self._held[k]
            self.stats["released"] += len(drop)
        return len(drop)

    @property
    def held(self) -> int:
        """Partitions held now."""
        with self._lock:
            return len(self._held)

    @property
    def held_bytes(self) -> int:
        """Bytes of frames held now."""
        with self._lock:
            return sum(len(c) for e in self._held.values() for c in e[3])

    def close(self, wait: bool = True) -> None:
        """Stop serving and forget everything held. ``wait``: wait (up to ~0.5 s) for the
        serving thread to end; without it only the listening socket is closed (the process is
        ending)."""
        if wait:
            self._server.shutdown()
        self._server.server_close()
        with self._lock:
            self._held.clear()


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, _RECV_CHUNK))
        if k == 0:
            raise EOFError(f"connection closed after {got} of {n} bytes")
        got += k
    return bytes(buf) if n < 64 else buf  # type: ignore[return-value]


def fetch(ref: FramesRef, timeout: float = FETCH_TIMEOUT) -> bytes:
    """Executor side: the frames ``ref`` points to, from the driver's source runner.

    Raises :class:`PartitionFetchError` naming the queue, the offsets and the address when the
    runner cannot be reached, the connection breaks, the runner no longer holds them or the
    byte count differs."""
    what = (f"messages {ref.start}..{ref.start + ref.n - 1} of queue {ref.queue!r} from the "
            f"amqp source runner at {ref.host}:{ref.port}")
    try:
        with socket.create_connection((ref.host, ref.port), timeout=timeout) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(_REQ.pack(ref.token, ref.key))
            status, length = _RESP.unpack(_recv_exactly(sock, _RESP.size))
            data = _recv_exactly(sock, length)
    except (OSError, EOFError) as e:
        raise PartitionFetchError(
            f"could not fetch {what}: {e}. The batch fails and nothing in it is acked (the "
            "messages stay in the queue). Executors must reach the driver host on that "
            "address (set SPARK_LOCAL_IP on the driver to choose it).") from e
    if status != _OK:
        raise PartitionFetchError(f"could not fetch {what}: {bytes(data).decode(errors='replace')}; "
                                  "the batch fails and nothing in it is acked")
    if length != ref.nbytes:
        raise PartitionFetchError(f"could not fetch {what}: got {length} bytes, "
                                  f"expected {ref.nbytes}")
    return bytes(data)
