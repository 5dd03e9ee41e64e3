"""Helpers of the stream-protocol client tests: the broker parametrisation, unique streams that
are deleted afterwards, and a minimal AMQP 1.0 message encoder/decoder of the tests' own (the
message format is the codec's other half; these helpers only wrap a body in a data section and
find it again, so the tests do not depend on it).

``stream_url`` is parametrised by broker: ``"rabbitmq"`` (the local RabbitMQ 3.10.8 with
``rabbitmq_stream`` on port 5552) and ``"embedded"`` (the embedded broker in its 3.10 mode with
a stream listener, ``EmbeddedBroker(stream_port=0).stream_url``): the same assertions on both.
"""

from __future__ import annotations

import struct

import pytest
from session_guard import unique_name
from stream_urls import STREAM_URL, rabbitmq_stream_url  # noqa: F401

STREAM_BROKERS = ["rabbitmq", "embedded"]


@pytest.fixture(params=STREAM_BROKERS)
def stream_url(request) -> str:
    """The ``rabbitmq-stream://`` URL of each broker under test."""
    if request.param == "rabbitmq":
        return rabbitmq_stream_url(request)
    return request.getfixturevalue("embedded_stream_broker").stream_url


@pytest.fixture
def client(stream_url):
    from spark_amqp.client.stream import connect

    with connect(stream_url) as c:
        yield c


@pytest.fixture
def new_stream(client):
    """A factory of unique streams (created), all deleted at the end of the test."""
    made: list[str] = []

    def make(prefix: str = "h38p-stream", create: bool = True, **kw) -> str:
        name = unique_name(prefix)
        if create:
            client.create_stream(name, **kw)
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            client.delete_stream(name, missing_ok=True)
        except Exception:  # noqa: BLE001 - the connection may be what a test broke
            from spark_amqp.client.stream import connect

            with connect(client.params) as c2:
                c2.delete_stream(name, missing_ok=True)


# --------------------------------------------------------------- AMQP 1.0 (tests' own)

def amqp10(body: bytes, subject: str | None = None) -> bytes:
    """An AMQP 1.0 bare message: (a properties section with ``subject``,) one data section."""
    out = b""
    if subject is not None:
        s = subject.encode()
        # properties: list of 4 fields (message-id, user-id, to null; subject str8)
        fields = b"\x40\x40\x40\xa1" + bytes([len(s)]) + s
        out += b"\x00\x53\x73\xc0" + bytes([len(fields) + 1, 4]) + fields
    if len(body) < 256:
        out += b"\x00\x53\x75\xa0" + bytes([len(body)]) + body
    else:
        out += b"\x00\x53\x75\xb0" + struct.pack(">I", len(body)) + body
    return out


_FIXED = {0x4: 0, 0x5: 1, 0x6: 2, 0x7: 4, 0x8: 8, 0x9: 16}


def _skip(buf: bytes, i: int) -> int:
    """The index after the AMQP 1.0 value at ``i``."""
    c = buf[i]
    if c == 0x00:  # described: descriptor, then value
        return _skip(buf, _skip(buf, i + 1))
    hi = c >> 4
    if hi in _FIXED:
        return i + 1 + _FIXED[hi]
    if hi in (0xA, 0xC, 0xE):
        return i + 2 + buf[i + 1]
    if hi in (0xB, 0xD, 0xF):
        return i + 5 + struct.unpack_from(">I", buf, i + 1)[0]
    raise ValueError(f"AMQP 1.0 constructor {c:#04x} at {i}")


def amqp10_sections(msg: bytes) -> dict:
    """``{section code: raw bytes of its value}`` of an AMQP 1.0 message (0x70 header, 0x71
    delivery annotations, 0x72 message annotations, 0x73 properties, 0x74 application
    properties, 0x75 data (joined), 0x77 amqp-value, 0x78 footer)."""
    out: dict = {}
    i = 0
    while i < len(msg):
        if msg[i] != 0x00 or msg[i + 1] != 0x53:
            raise ValueError(f"not a section at {i}: {msg[i:i + 3]!r}")
        code = msg[i + 2]
        end = _skip(msg, i + 3)
        value = msg[i + 3:end]
        if code == 0x75:
            c = value[0]
            data = value[2:] if c == 0xA0 else value[5:]
            out[code] = out.get(code, b"") + data
        else:
            out[code] = value
        i = end
    return out


def amqp10_body(msg: bytes) -> bytes:
    """The data section(s) of an AMQP 1.0 message."""
    return amqp10_sections(msg).get(0x75, b"")
