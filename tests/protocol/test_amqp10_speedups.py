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
