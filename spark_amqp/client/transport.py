"""Byte transports under the client: plain TCP and TLS (``ssl.MemoryBIO``).

Threading model: exactly one reader thread calls :meth:`recv` / :meth:`wait_readable`;
any number of writer threads call :meth:`send` while holding the connection's write lock
(writes are serialised by the caller). The TLS transport never shares an ``SSLSocket``
between threads: it drives an ``ssl.SSLObject`` over memory BIOs, decrypting under a small
lock that is never held across blocking I/O, and every ciphertext write drains the outgoing
BIO under the write lock so TLS records leave in the order they were produced.
"""

from __future__ import annotations

import select
import socket
import ssl
import sys
import threading
import time

try:  # Linux: SIOCOUTQ == TIOCOUTQ, bytes in the send queue not yet acked by the peer
    import fcntl
    import termios
    _OUTQ = termios.TIOCOUTQ if sys.platform.startswith("linux") else None
except (ImportError, AttributeError):  # pragma: no cover - Windows, exotic platforms
    fcntl = None  # type: ignore[assignment]
    _OUTQ = None

__all__ = ["Transport", "TCPTransport", "TLSTransport", "open_socket", "RECV_SIZE"]

#: Bytes per ``recv()``: ~220 deliveries of 200-byte bodies per syscall. Larger reads (256 KiB
#: was tried) swallow most of a 1,000-message prefetch window at once, so the consumer sees and
#: acks it only after all of it is decoded, and the broker idles meanwhile; 64 KiB keeps the
#: syscall cost per message negligible while acks flow sooner.
RECV_SIZE = 64 * 1024


def open_socket(host: str, port: int, timeout: float | None) -> socket.socket:
    """Connect a TCP socket (IPv4/IPv6 via ``create_connection``) with TCP_NODELAY (no Nagle
    delay for small frames such as acks) and SO_KEEPALIVE set. Raises ``OSError`` (e.g. ``ConnectionRefusedError``, ``TimeoutError``)."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        # SO_RCVBUF/SO_SNDBUF are left alone: setting them disables Linux's buffer
        # autotuning (tcp_rmem/tcp_wmem), which grows them further than a fixed size would
    except OSError:
        sock.close()
        raise
    return sock


class Transport:
    """Interface: ``send(data)``, ``recv() -> bytes`` (b"" at EOF, or — TLS only — when a
    partial record arrived: then :attr:`eof` is False), ``wait_readable(timeout)``,
    ``set_timeout(seconds | None)``, ``shutdown()``, ``close()``."""

    sock: socket.socket
    eof = True  # TCP: an empty recv() is always the end of the stream

    def send(self, data) -> None:
        raise NotImplementedError

    def recv(self) -> bytes:
        raise NotImplementedError

    def wait_readable(self, timeout: float | None) -> bool:
        """True when :meth:`recv` will not block (data or EOF pending)."""
        if timeout is None:
            return True
        r, _, _ = select.select((self.sock,), (), (), max(0.0, timeout))
        return bool(r)

    def set_timeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def shutdown(self) -> None:
        """Wake the reader (its recv returns EOF) without closing the descriptor."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def shutdown_write(self) -> None:
        """Half-close (``shutdown(SHUT_WR)``): the kernel sends FIN after every byte already
        queued, so the peer reads all of them and then EOF; this side can still read. Also
        wakes a writer blocked in ``sendall`` (it fails with EPIPE). Never raises."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def unsent_bytes(self) -> int | None:
        """Bytes in the kernel send queue that the peer has not acknowledged yet (Linux
        ``SIOCOUTQ``, see tcp(7)); a falling value shows the peer is reading. ``None`` where
        the platform cannot tell or the socket is closed."""
        if _OUTQ is None:
            return None
        try:
            buf = fcntl.ioctl(self.sock.fileno(), _OUTQ, b"\0\0\0\0")
        except (OSError, ValueError):
            return None
        return int.from_bytes(buf, sys.byteorder, signed=True)

    def wait_writable(self, timeout: float) -> bool:
        """True when a small ``send`` will not block (select(2) writability: on Linux at least
        a third of the send buffer is free); False after ``timeout`` seconds or on a closed
        socket."""
        try:
            _, w, _ = select.select((), (self.sock,), (), max(0.0, timeout))
        except (OSError, ValueError):
            return False
        return bool(w)

    def discard_input(self, timeout: float) -> bool:
        """Read and drop raw bytes until EOF, for at most ``timeout`` seconds (0: only what is
        already buffered). Closing a socket whose receive queue holds unread bytes makes the
        kernel send RST instead of FIN (RFC 2525 §2.17, tcp(7)), and an RST makes the peer
        discard what *it* has not read yet. Returns True at EOF, False on timeout or a
        socket error (e.g. ECONNRESET). Call only when no other thread reads the socket."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            try:
                r, _, _ = select.select((self.sock,), (), (), max(0.0, deadline - time.monotonic()))
                if not r:
                    return False
                if not self.sock.recv(RECV_SIZE):
                    return True
            except (OSError, ValueError):
                return False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:  # pragma: no cover
            pass


class TCPTransport(Transport):
    """Plain TCP: ``sendall`` and ``recv(RECV_SIZE)``."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.send = sock.sendall  # type: ignore[assignment]  # hot path: no wrapper call
        self._recv = sock.recv

    def recv(self) -> bytes:
        return self._recv(RECV_SIZE)


class TLSTransport(Transport):
    """TLS over a TCP socket through ``ssl.SSLObject`` + two ``MemoryBIO``s.

    :meth:`handshake` runs in the connecting thread before the reader thread starts.
    ``send`` must be called with the connection write lock held (as the client does).
    """

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_hostname: str | None,
                 write_lock: threading.Lock):
        self.sock = sock
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=False,
                                     server_hostname=server_hostname)
        self._lock = threading.Lock()  # guards the SSLObject; never held across socket I/O
        self._write_lock = write_lock
        self._eof = False

    def _flush(self) -> None:
        # called with the write lock held: BIO order == wire order
        with self._lock:
            data = self._out.read()
        if data:
            self.sock.sendall(data)

    def handshake(self) -> None:
        """Run the TLS handshake (blocking, honours the socket timeout).
        Raises ``ssl.SSLError`` (e.g. certificate verify failed) or ``OSError``."""
        while True:
            try:
                with self._lock:
                    self._obj.do_handshake()
                with self._write_lock:
                    self._flush()
                return
            except ssl.SSLWantReadError:
                with self._write_lock:
                    self._flush()
                data = self.sock.recv(RECV_SIZE)
                if not data:
                    raise ConnectionResetError("the server closed the connection during the TLS handshake")
                with self._lock:
                    self._in.write(data)

    @property
    def peer_certificate(self):
        """The server certificate (dict) as ``SSLSocket.getpeercert`` gives it."""
        return self._obj.getpeercert()

    @property
    def version(self) -> str | None:
        return self._obj.version()

    def send(self, data) -> None:  # caller holds the write lock
        with self._lock:
            self._obj.write(data)
            out = self._out.read()
        self.sock.sendall(out)

    def wait_readable(self, timeout: float | None) -> bool:
        if self._obj.pending() or self._in.pending or self._eof:
            return True
        return super().wait_readable(timeout)

    @property
    def eof(self) -> bool:  # type: ignore[override]
        return self._eof

    def recv(self) -> bytes:
        """Decrypted bytes; b"" at EOF, or after one raw read that completed no TLS record
        (``eof`` False), so the caller's heartbeat timer keeps running."""
        raw_reads = 0
        while True:
            try:
                with self._lock:
                    data = self._obj.read(RECV_SIZE)
                    extra = self._out.pending
                if extra:  # e.g. a TLS 1.3 key update answer
                    with self._write_lock:
                        self._flush()
                return data
            except ssl.SSLWantReadError:
                if raw_reads:
                    return b""
                raw = self.sock.recv(RECV_SIZE)
                raw_reads += 1
                if not raw:
                    self._eof = True
                    return b""
                with self._lock:
                    self._in.write(raw)
            except ssl.SSLZeroReturnError:
                self._eof = True
                return b""
