"""The compiled AMQP 1.0 decoder (``protocol/amqp10/_speedups.pyx``) against the pure-Python one
(``types.decode_value``, ``message.decode_message``, the oracle): the same values with the same
types, the same errors, on random messages and on mutated and cut bytes."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp10_strategies import VALUES, messages
from spark_amqp.protocol.amqp10 import SPEEDUPS, encode_message, encode_value
from spark_amqp.protocol.amqp10 import message as message_module
from spark_amqp.protocol.amqp10 import types as types_module
from test_amqp10_codec import typed, typed_message

pytestmark = pytest.mark.skipif(
    SPEEDUPS is None and os.environ.get("SPARK_AMQP_REQUIRE_SPEEDUPS") != "1",
    reason="compiled fast paths not built or SPARK_AMQP_PURE_PYTHON=1")

DIFF = settings(max_examples=int(os.environ.get("AMQP_FUZZ_EXAMPLES", "300")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_built():
    assert SPEEDUPS is not None, "SPARK_AMQP_REQUIRE_SPEEDUPS=1 but amqp10/_speedups is not built"


def outcome(fn, *args, kind=typed):
    try:
        r = fn(*args)
    except Exception as exc:
        return type(exc).__name__, str(exc)
    if isinstance(r, tuple):
        return "ok", kind(r[0]), r[1]
    return "ok", typed_message(r)


@DIFF
@given(VALUES)
def test_values_same(v):
    raw = encode_value(v)
    assert outcome(SPEEDUPS.decode_value, raw) == outcome(types_module.decode_value, raw)


@DIFF
@given(messages())
def test_messages_same(m):
    raw = encode_message(m)
    assert outcome(SPEEDUPS.decode_message, raw) == outcome(message_module.decode_message, raw)
    # inside a larger buffer, at an offset
    buf = b"\xff" * 7 + raw + b"\xee" * 3
    assert (outcome(SPEEDUPS.decode_message, buf, 7, 7 + len(raw))
            == outcome(message_module.decode_message, buf, 7, 7 + len(raw)))
    assert (outcome(SPEEDUPS.decode_message, memoryview(buf), 7, 7 + len(raw))
            == outcome(message_module.decode_message, buf, 7, 7 + len(raw)))


@DIFF
@given(messages(), st.data())
def test_mutated_and_cut_messages_same(m, data):
    raw = bytearray(encode_message(m))
    for _ in range(data.draw(st.integers(0, 3))):
        if raw:
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    b = bytes(raw[:cut])
    assert outcome(SPEEDUPS.decode_message, b) == outcome(message_module.decode_message, b)
    assert outcome(SPEEDUPS.decode_value, b) == outcome(types_module.decode_value, b)


# ------------------------------------------------------------------ the broker's chunk view

from spark_amqp.protocol.amqp10 import Message, Properties  # noqa: E402
from spark_amqp.protocol.amqp10.chunk_view import chunk_to_091 as py_chunk_to_091  # noqa: E402

_PREFIXED = [encode_message(Message(b"", properties=Properties(message_id=m)))[:-5] for m in ("a", "b")]


@st.composite
def chunk_data(draw):
    """osiris entries: simple entries (messages with a shared prefix, random messages, garbage)
    and sub-batch entries."""
    out = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["shared", "shared", "message", "garbage", "batch"]))
        if kind == "shared":
            body = draw(st.binary(max_size=300))
            head = bytes((0x00, 0x53, 0x75, 0xa0, len(body))) if len(body) < 256 else \
                bytes((0x00, 0x53, 0x75, 0xb0)) + len(body).to_bytes(4, "big")
            m = draw(st.sampled_from(_PREFIXED)) + head + body
        elif kind == "message":
            m = encode_message(draw(messages()))
        elif kind == "garbage":
            m = draw(st.binary(max_size=30))
        else:
            inner = b"".join(len(x).to_bytes(4, "big") + x for x in (b"r1", b"r2"))
            out.append(bytes((0x80 | (draw(st.integers(0, 1)) << 4), 0, 2)) + len(inner).to_bytes(4, "big")
                       + len(inner).to_bytes(4, "big") + inner)
            continue
        out.append(len(m).to_bytes(4, "big") + m)
    return b"".join(out)


def _run(fn, data, cut):
    calls = []
    cache: dict = {}

    def prefix(p, m):
        calls.append(("p", p, m))
        return (b"E" + p[:2], p)

    def whole(e, batch):
        calls.append(("w", e, batch))
        return [(b"W", e, b"")] if not batch else [None, (b"B", e, b"")]

    try:
        out = fn(data, 0, cut, cache, prefix, whole)
    except Exception as exc:
        return type(exc).__name__, calls
    ident = [(a[0] is b[0], a[1] is b[1]) for a, b in zip(out, out[1:]) if a is not None and b is not None]
    return out, calls, sorted(cache.items()), ident


@DIFF
@given(chunk_data(), st.data())
def test_chunk_view_same(data, d):
    cut = d.draw(st.integers(0, len(data)))
    assert _run(SPEEDUPS.chunk_to_091, data, len(data)) == _run(py_chunk_to_091, data, len(data))
    assert _run(SPEEDUPS.chunk_to_091, data, cut) == _run(py_chunk_to_091, data, cut)


@DIFF
@given(st.binary(max_size=50), st.binary(max_size=600), st.sampled_from([254, 255]),
       st.sampled_from([bytes, bytearray, memoryview]))
def test_data_entry_same(prefix, body, short_max, kind):
    from spark_amqp.protocol.amqp10.convert import data_entry
    from spark_amqp.protocol.amqp10.message import decode_message as py_decode
    got = SPEEDUPS.data_entry(prefix, kind(body), short_max)
    assert got == data_entry(prefix, body, short_max)
    assert int.from_bytes(got[:4], "big") == len(got) - 4
    if not prefix:
        assert py_decode(got[4:]).body == body
