"""Record what a broker does with 0-9-1 messages published to a stream: the AMQP 1.0 bytes it
stores (read back over the stream protocol with rstream, an independent client) and the 0-9-1
properties it delivers back (raw bytes). Used by the live conversion tests and to regenerate
tests/protocol/data/rabbitmq-3.10.8-stream-conversions.json:

    python tests/broker/stream_capture.py 5672 5552 > tests/protocol/data/rabbitmq-3.10.8-stream-conversions.json
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import struct
import sys
import uuid

from rawclient import RawClient
from spark_amqp.protocol import BasicProperties, Decoder, spec
from spark_amqp.protocol.values import Typed

UTC = dt.timezone.utc


def cases() -> list[tuple[str, BasicProperties, bytes]]:
    """(name, properties, body) of the messages: every property, every header tag, long and
    254/255-byte strings (RabbitMQ 3.10 switches to 4-byte lengths at 255), URN message ids."""
    P = BasicProperties
    return [
        ("empty", P(), b"body0"),
        ("all", P(content_type="text/plain", content_encoding="gzip", headers={"k": "v", "n": 5},
                  delivery_mode=2, priority=3, correlation_id="corr", reply_to="rq", expiration="60000",
                  message_id="mid", timestamp=1700000000, type="ty", user_id="guest", app_id="app"), b"hello"),
        ("headers", P(headers={"t": True, "f0": False, "b": Typed("b", -3), "B": Typed("B", 200),
                               "s": Typed("s", -300), "u": Typed("u", 60000), "I": Typed("I", -7),
                               "i": Typed("i", 4000000000), "l": Typed("l", 2 ** 40), "L": Typed("L", -5),
                               "fl": Typed("f", 1.5), "d": Typed("d", 2.25), "S": "str", "x": b"\xff\x00",
                               "V": None, "T": dt.datetime(2020, 1, 1, tzinfo=UTC), "A": [1, "two"],
                               "F": {"a": 1}, "zz": "last", "aa": "first", "x-custom": "xv",
                               "x-stream-offset": 99, "Sbin": Typed("S", b"\xff\xfe")}), b""),
        ("longstr", P(message_id="m" * 255, correlation_id="c" * 200, headers={"long": "L" * 300}), b"x" * 300),
        ("uuidmsg", P(message_id="urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8",
                      correlation_id="6ba7b810-9dad-11d1-80b4-00c04fd430c8"), b"u"),
        ("big", P(delivery_mode=1), b"B" * 70000),
        ("str254", P(message_id="n" * 254, type="t" * 255, headers={"h": "h" * 254, "h2": "h" * 255}), b"b" * 254),
        ("direct", P(), b"via-direct"),
    ]


async def capture(amqp_port: int, stream_port: int | None, host: str = "127.0.0.1") -> dict:
    """Publish :func:`cases` to a new stream (the last one through amq.direct), read them back
    over both protocols (``stream_port`` None: over 0-9-1 only), delete the stream. Returns the
    JSON-able record."""
    q = "capture-" + uuid.uuid4().hex[:8]
    c = await RawClient.connect(amqp_port, host=host)
    c.decoder = Decoder(frame_max=c.frame_max, raw_content=True)
    c.send(1, spec.Channel.Open())
    await c.next_event()
    c.send(1, spec.Queue.Declare(queue=q, durable=True, arguments={"x-queue-type": "stream"}))
    await c.next_event()
    c.send(1, spec.Queue.Bind(queue=q, exchange="amq.direct", routing_key="rk-" + q))
    await c.next_event()
    c.send(1, spec.Confirm.Select())
    await c.next_event()
    cs = cases()
    out = {"cases": []}
    for name, props, body in cs:
        ex, rk = ("amq.direct", "rk-" + q) if name == "direct" else ("", q)
        c.publish(1, body, rk, exchange=ex, properties=props)
        out["cases"].append({"name": name, "exchange": ex, "routing_key": rk, "queue": q,
                             "props": props.encode().hex(), "body": _body_spec(body)})
    acks = 0
    while acks < len(cs):
        m = getattr(await c.next_event(), "method", None)
        if isinstance(m, spec.Basic.Ack):
            acks = m.delivery_tag if m.multiple else acks + 1
    got = await read_stream_protocol(host, stream_port, q, len(cs)) if stream_port else [(None, b"")] * len(cs)
    c.send(1, spec.Basic.Qos(prefetch_count=100))
    await c.next_event()
    c.send(1, spec.Basic.Consume(queue=q, arguments={"x-stream-offset": "first"}))
    dels = []
    while len(dels) < len(cs):
        e = await c.next_event()
        if type(e).__name__ == "ContentMessage":
            dels.append((e.method.exchange, e.method.routing_key, bytes(e.properties), len(e.body)))
    for rec, (off, stored), (ex, rk, props, blen) in zip(out["cases"], got, dels):
        body = body_of(rec["body"])
        # the stored message ends with the body (its data section's payload): kept apart
        rec.update(offset=off, delivered_offset=offset_of(props),
                   stored_prefix=stored[:len(stored) - len(body)].hex() if stream_port else None,
                   stored_ends_with_body=stored.endswith(body), delivered_exchange=ex,
                   delivered_routing_key=rk, delivered_props=props.hex(), delivered_body_len=blen)
    c.send(1, spec.Queue.Delete(queue=q))
    try:
        await c.next_event(5)
    finally:
        c.writer.close()
    return out


async def read_stream_protocol(host: str, port: int, stream: str, n: int) -> list[tuple[int, bytes]]:
    """(offset, stored bytes) of the first ``n`` messages of ``stream``, read with rstream."""
    from rstream import Consumer, ConsumerOffsetSpecification, OffsetType

    got: list = []
    done = asyncio.Event()
    sc = Consumer(host, port, username="guest", password="guest")
    await sc.start()

    async def cb(msg, ctx):
        got.append((ctx.offset, bytes(msg)))
        if len(got) == n:
            done.set()
    await sc.subscribe(stream, cb, decoder=lambda b: b,
                       offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None))
    try:
        await asyncio.wait_for(done.wait(), 30)
    finally:
        await sc.close()
    return got


def _body_spec(body: bytes):
    if len(body) > 1000 and body == body[:1] * len(body):
        return {"repeat": body[:1].hex(), "times": len(body)}
    return body.hex()


def body_of(spec_) -> bytes:
    if isinstance(spec_, dict):
        return bytes.fromhex(spec_["repeat"]) * spec_["times"]
    return bytes.fromhex(spec_)


def offset_of(props: bytes) -> int:
    """The x-stream-offset header of delivered properties (the 8 bytes after its tag)."""
    i = props.index(b"\x0fx-stream-offsetl") + 17
    return struct.unpack(">q", props[i:i + 8])[0]


if __name__ == "__main__":
    json.dump(asyncio.run(capture(int(sys.argv[1]), int(sys.argv[2]))), sys.stdout, indent=1)
