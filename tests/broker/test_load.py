"""Load: 200 concurrent connections publish (with confirms) and consume while another
connection keeps sending fuzzed frames; nothing is lost and the broker stays up."""

from __future__ import annotations

import asyncio
import random

import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.protocol import ContentMessage, MethodFrame, PROTOCOL_HEADER, encode_method, spec

from rawclient import RawClient

N_CONN = 200
PER_CONN = 200


async def _fuzzer(port: int, stop: asyncio.Event, stats: dict) -> None:
    rng = random.Random(7)
    valid = [encode_method(1, spec.Channel.Open()), encode_method(1, spec.Basic.Publish(routing_key="x")),
             encode_method(1, spec.Queue.Declare(queue="fuzz", auto_delete=True))]
    while not stop.is_set():
        try:
            if rng.random() < 0.5:
                c = await RawClient.connect(port)
                w = c.writer
            else:
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(PROTOCOL_HEADER)
            data = bytearray(b"".join(rng.choices(valid, k=3)))
            for _ in range(rng.randint(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            w.write(bytes(data) + bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))))
            await w.drain()
            await asyncio.sleep(0.01)
            w.close()
            stats["fuzz"] += 1
        except (OSError, ConnectionError, asyncio.TimeoutError, AssertionError):
            stats["fuzz"] += 1


async def _run(port: int) -> dict:
    stats = {"fuzz": 0}
    clients = []
    for i in range(N_CONN):
        c = await RawClient.connect(port)
        await c.open_channel(1)
        await c.call(1, spec.Queue.Declare(queue=f"load-{i}", exclusive=True))
        await c.call(1, spec.Basic.Qos(prefetch_count=10))
        await c.call(1, spec.Confirm.Select())
        await c.call(1, spec.Basic.Consume(queue=f"load-{i}"))
        clients.append(c)
    stop = asyncio.Event()
    fuzz = asyncio.create_task(_fuzzer(port, stop, stats))

    async def worker(i: int, c: RawClient):
        target = f"load-{(i + 1) % N_CONN}"
        for k in range(PER_CONN):
            c.publish(1, b"%d:%d" % (i, k), target)
            if k % 10 == 9:
                await c.writer.drain()
        received, confirmed = [], 0
        while len(received) < PER_CONN or confirmed < PER_CONN:
            e = await c.next_event(30)
            if isinstance(e, ContentMessage):
                received.append(e.body)
                c.send(1, spec.Basic.Ack(delivery_tag=e.method.delivery_tag))
            elif isinstance(e, MethodFrame) and isinstance(e.method, spec.Basic.Ack):
                confirmed = e.method.delivery_tag  # multiple acks: the highest confirmed seq
            elif isinstance(e, MethodFrame) and isinstance(e.method, spec.Basic.Nack):
                raise AssertionError(f"publish nacked on connection {i}")
        return received

    results = await asyncio.wait_for(asyncio.gather(*(worker(i, c) for i, c in enumerate(clients))), 60)
    stop.set()
    await fuzz
    for i, got in enumerate(results):
        src = (i - 1) % N_CONN
        assert got == [b"%d:%d" % (src, k) for k in range(PER_CONN)], f"connection {i}"
    for c in clients:
        await c.close()
    return stats


@pytest.mark.slow
def test_200_connections_with_a_fuzzer():
    with EmbeddedBroker() as b:
        stats = asyncio.run(_run(b.port))
        assert stats["fuzz"] > 0
        # the broker still serves new connections
        async def probe():
            c = await RawClient.connect(b.port)
            await c.open_channel(1)
            ok = await c.call(1, spec.Queue.Declare(queue="", exclusive=True))
            await c.close()
            return ok
        assert isinstance(asyncio.run(probe()), spec.Queue.DeclareOk)
        assert len(b.broker.connections) <= 2
