"""A minimal asyncio AMQP 0-9-1 client built on the project's codec, for broker tests that
need many connections (load) or byte-level control (fuzz, heartbeats); and
:class:`FakeTransport`, for tests that drive a broker connection in process."""

from __future__ import annotations

import asyncio
from collections import deque

from spark_amqp.protocol import (PROTOCOL_HEADER, BasicProperties, Decoder,
                                 Heartbeat, MethodFrame, encode_message, encode_method, spec)


class RawClient:
    """``await RawClient.connect(port)``; then ``call``/``send``/``next_event``."""

    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer
        self.decoder = Decoder(frame_max=131072)
        self.events: deque = deque()
        self.frame_max = 131072

    @classmethod
    async def connect(cls, port: int, heartbeat: int = 0, user: str = "guest", password: str = "guest",
                      vhost: str = "/", host: str = "127.0.0.1") -> "RawClient":
        r, w = await asyncio.open_connection(host, port)
        c = cls(r, w)
        w.write(PROTOCOL_HEADER)
        start = await c.expect(spec.Connection.Start)
        resp = b"\x00" + user.encode() + b"\x00" + password.encode()
        c.send(0, spec.Connection.StartOk(client_properties={"capabilities": {
            "authentication_failure_close": True, "consumer_cancel_notify": True, "connection.blocked": True}},
            mechanism="PLAIN", response=resp, locale="en_US"))
        tune = await c.expect(spec.Connection.Tune)
        c.frame_max = tune.frame_max
        c.send(0, spec.Connection.TuneOk(channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=heartbeat))
        c.send(0, spec.Connection.Open(virtual_host=vhost))
        await c.expect(spec.Connection.OpenOk)
        return c

    def send(self, channel: int, method) -> None:
        self.writer.write(encode_method(channel, method))

    def publish(self, channel: int, body: bytes, routing_key: str, exchange: str = "",
                properties: BasicProperties | None = None) -> None:
        self.writer.write(encode_message(channel, spec.Basic.Publish(exchange=exchange, routing_key=routing_key),
                                         properties, body, self.frame_max))

    async def next_event(self, timeout: float = 10.0):
        while not self.events:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not data:
                raise ConnectionError("connection closed by the broker")
            for e in self.decoder.feed(data):
                if isinstance(e, Heartbeat):
                    continue
                self.events.append(e)
        return self.events.popleft()

    async def expect(self, cls, timeout: float = 10.0):
        e = await self.next_event(timeout)
        m = e.method
        if not isinstance(m, cls):
            raise AssertionError(f"expected {cls.NAME}, got {m!r}")
        return m

    async def call(self, channel: int, method, timeout: float = 10.0):
        self.send(channel, method)
        return (await self.next_event(timeout)).method

    async def open_channel(self, channel: int = 1) -> None:
        await self.call(channel, spec.Channel.Open())

    async def close(self) -> None:
        try:
            self.send(0, spec.Connection.Close(reply_code=200, reply_text="bye"))
            while True:
                e = await self.next_event(5)
                if isinstance(e, MethodFrame) and isinstance(e.method, spec.Connection.CloseOk):
                    break
        except Exception:
            pass
        self.writer.close()


class FakeTransport:
    """What AMQPServerProtocol uses of an asyncio transport; collects what it writes."""

    def __init__(self):
        self.out = bytearray()
        self.closed = False

    def get_extra_info(self, name, default=None):
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 5672)}.get(name, default)

    def set_write_buffer_limits(self, high=None, low=None):
        pass

    def write(self, data):
        self.out += data

    def close(self):
        self.closed = True

    abort = close

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass
