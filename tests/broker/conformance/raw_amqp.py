"""A minimal raw-socket AMQP 0-9-1 peer for wire-level conformance tests (frame errors,
protocol headers, heartbeats) that a well-behaved client such as pika cannot produce.

Valid frames are built with the project's codec (:mod:`spark_amqp.protocol`); invalid ones are
hand-written bytes. Server frames are decoded with :class:`spark_amqp.protocol.Decoder`.
"""

from __future__ import annotations

import socket
import struct
import time
from urllib.parse import unquote, urlsplit

from spark_amqp.protocol import (PROTOCOL_HEADER, Decoder, MethodFrame, encode_heartbeat,
                                 encode_method, spec)


def frame(ftype: int, channel: int, payload: bytes, end: bytes = b"\xce") -> bytes:
    """One raw frame: ``type:octet channel:short size:long payload frame-end``."""
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + end


def content_header(body_size: int, class_id: int = 60, flags: int = 0) -> bytes:
    """A content-header payload with no properties (flags=0)."""
    return struct.pack(">HHQH", class_id, 0, body_size, flags)


class RawPeer:
    """A blocking raw AMQP client socket. ``open()`` runs the handshake (PLAIN)."""

    def __init__(self, url: str, timeout: float = 5.0):
        u = urlsplit(url)
        self.user = unquote(u.username or "guest")
        self.password = unquote(u.password or "guest")
        self.vhost = unquote(u.path[1:]) if len(u.path) > 1 else "/"
        self.sock = socket.create_connection((u.hostname, u.port or 5672), timeout=timeout)
        self.sock.settimeout(timeout)
        self.decoder = Decoder()
        self.events: list = []
        self.eof = False
        self.raw_received = b""

    # I/O ---------------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_method(self, channel: int, method) -> None:
        self.sock.sendall(encode_method(channel, method))

    def _recv(self, timeout: float) -> bytes:
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return b""
        except (ConnectionResetError, BrokenPipeError):
            data = b""
            self.eof = True
            return data
        if not data:
            self.eof = True
        return data

    def read_raw(self, n: int, timeout: float = 5.0) -> bytes:
        """Read up to ``n`` raw bytes (before framing starts, e.g. a protocol header)."""
        deadline = time.monotonic() + timeout
        buf = b""
        while len(buf) < n and not self.eof and time.monotonic() < deadline:
            buf += self._recv(deadline - time.monotonic())
        return buf

    def next_event(self, timeout: float = 5.0, skip_heartbeats: bool = True):
        """The next decoded server event (MethodFrame/ContentMessage/Heartbeat) or None on EOF
        or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            while self.events:
                ev = self.events.pop(0)
                if skip_heartbeats and type(ev).__name__ == "Heartbeat":
                    continue
                return ev
            if self.eof or time.monotonic() >= deadline:
                return None
            data = self._recv(deadline - time.monotonic())
            if data:
                self.events.extend(self.decoder.feed(data))

    def expect(self, method_cls, timeout: float = 5.0):
        ev = self.next_event(timeout)
        assert ev is not None and isinstance(ev.method, method_cls), \
            f"expected {method_cls.NAME}, got {ev!r}"
        return ev

    def wait_connection_close(self, timeout: float = 5.0):
        """Read until a connection.close (returned, and answered with close-ok) or EOF (None)."""
        deadline = time.monotonic() + timeout
        while True:
            ev = self.next_event(max(0.0, deadline - time.monotonic()))
            if ev is None:
                return None
            if isinstance(ev, MethodFrame) and isinstance(ev.method, spec.Connection.Close):
                try:
                    self.send_method(0, spec.Connection.CloseOk())
                except OSError:
                    pass
                return ev.method

    def wait_eof(self, timeout: float) -> bool:
        """True if the server closes the socket within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.eof and time.monotonic() < deadline:
            data = self._recv(min(0.2, deadline - time.monotonic()))
            if data:
                try:
                    self.events.extend(self.decoder.feed(data))
                except Exception:
                    pass
        return self.eof

    # handshake ---------------------------------------------------------------------------
    def open(self, heartbeat: int = 0, frame_max: int = 131072, channel_max: int = 2047,
             mechanism: str = "PLAIN", response: bytes | None = None) -> spec.Connection.Tune:
        """Protocol header, start/start-ok, tune/tune-ok, open/open-ok. Returns the server's
        connection.tune."""
        self.send(PROTOCOL_HEADER)
        self.expect(spec.Connection.Start)
        if response is None:
            response = b"\0" + self.user.encode() + b"\0" + self.password.encode()
        caps = {"authentication_failure_close": True, "publisher_confirms": True,
                "consumer_cancel_notify": True, "basic.nack": True}
        self.send_method(0, spec.Connection.StartOk(
            client_properties={"product": "spark-amqp conformance raw peer", "capabilities": caps},
            mechanism=mechanism, response=response, locale="en_US"))
        tune = self.expect(spec.Connection.Tune).method
        self.send_method(0, spec.Connection.TuneOk(channel_max=channel_max, frame_max=frame_max,
                                                   heartbeat=heartbeat))
        self.decoder.set_frame_max(frame_max)
        self.send_method(0, spec.Connection.Open(virtual_host=self.vhost))
        self.expect(spec.Connection.OpenOk)
        return tune

    def open_channel(self, channel: int = 1) -> None:
        self.send_method(channel, spec.Channel.Open())
        self.expect(spec.Channel.OpenOk)

    def heartbeat(self) -> None:
        self.send(encode_heartbeat())

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
