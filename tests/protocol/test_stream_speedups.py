"""The stream codec's compiled fast paths (``spark_amqp/protocol/stream/_speedups.pyx``) against
the pure-Python functions, their oracle: the same bytes, the same values, the same typed errors
with the same text, on random and on mutated input."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_strategies import messages, sub_batches
from spark_amqp.protocol.stream import chunk as K
from spark_amqp.protocol.stream import commands as C
from spark_amqp.protocol.stream import speedups

SPEEDUPS = speedups.SPEEDUPS
needs_speedups = pytest.mark.skipif(
    SPEEDUPS is None and os.environ.get("SPARK_AMQP_REQUIRE_SPEEDUPS") != "1",
    reason="compiled fast paths not built or SPARK_AMQP_PURE_PYTHON=1")
DIFF = settings(max_examples=int(os.environ.get("AMQP_FUZZ_EXAMPLES", "300")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as exc:
        return type(exc), str(exc)


def mutated(data: bytes, draw) -> bytes:
    b = bytearray(data)
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["flip", "cut", "insert"]))
        if op == "flip" and b:
            i = draw(st.integers(0, len(b) - 1))
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut" and b:
            i = draw(st.integers(0, len(b) - 1))
            del b[i:i + draw(st.integers(1, 8))]
        elif op == "insert":
            i = draw(st.integers(0, len(b)))
            b[i:i] = draw(st.binary(min_size=1, max_size=6))
    return bytes(b)


def test_the_installed_functions():
    if SPEEDUPS is None:
        assert C.encode_publish is C.py_encode_publish and K.split_entries is K.py_split_entries
    else:
        assert C.encode_publish is SPEEDUPS.encode_publish
        assert K.split_entries is SPEEDUPS.split_entries
        assert C.split_publish is SPEEDUPS.split_publish
    try:
        speedups.install(None)
        assert C.encode_publish is C.py_encode_publish and K.join_entries is K.py_join_entries
    finally:
        speedups.install(SPEEDUPS)


@needs_speedups
def test_speedups_are_in_use_unless_pure_python_is_forced():
    assert SPEEDUPS is not None, "SPARK_AMQP_REQUIRE_SPEEDUPS=1 but the stream _speedups is not built"


@needs_speedups
@DIFF
@given(st.lists(st.one_of(messages, sub_batches()), max_size=10), st.data())
def test_split_entries_same_records_and_errors(entries, data):
    raw = K.encode_chunk(entries, 0, 0)
    bad = mutated(raw, data.draw)
    for buf in (raw, bad):
        c = K.parse_chunk(buf, verify_crc=False) if buf is raw else None
        n_e, n_r = (c.num_entries, c.num_records) if c else (
            data.draw(st.integers(0, 12)), data.draw(st.integers(0, 12)))
        end = data.draw(st.integers(48, max(48, len(buf)))) if buf is bad else len(buf)
        assert outcome(SPEEDUPS.split_entries, buf, 48, end, n_e, n_r) == \
            outcome(K.py_split_entries, buf, 48, end, n_e, n_r)


@needs_speedups
@DIFF
@given(st.integers(0, 255), st.integers(0, 2 ** 64 - 1), st.lists(messages, max_size=20))
def test_encode_publish_same_bytes(pid, first, msgs):
    first = min(first, 2 ** 64 - 1 - len(msgs))
    assert SPEEDUPS.encode_publish(pid, first, msgs) == C.py_encode_publish(pid, first, msgs)
    ids = list(range(first, first + len(msgs)))[::-1]
    assert SPEEDUPS.encode_publish_ids(pid, ids, msgs) == C.py_encode_publish_ids(pid, ids, msgs)


@needs_speedups
def test_encode_publish_bad_arguments_same_errors():
    for args in ((256, 1, [b"x"]), (-1, 1, [b"x"]), (1, 1, ["not bytes"]), (1, 1, [b"x", 3])):
        assert outcome(SPEEDUPS.encode_publish, *args) == outcome(C.py_encode_publish, *args)
    for args in ((1, [1, 2], [b"x"]), (1, [-1], [b"x"]), (1, [2 ** 64], [b"x"]),
                 (1, [1.5], [b"x"])):
        assert outcome(SPEEDUPS.encode_publish_ids, *args) == \
            outcome(C.py_encode_publish_ids, *args)


@needs_speedups
@DIFF
@given(st.integers(0, 255), st.lists(st.tuples(st.integers(0, 2 ** 64 - 1),
                                               st.one_of(messages, sub_batches())), max_size=8),
       st.booleans(), st.data())
def test_split_publish_same_values_and_errors(pid, entries, v2, data):
    cmd = C.Publish(pid, [e[0] for e in entries], [e[1] for e in entries],
                    [None] * len(entries) if v2 else None)
    raw = cmd.encode()
    for buf in (raw, mutated(raw, data.draw)):
        a = outcome(SPEEDUPS.split_publish, buf, 4, len(buf))
        b = outcome(C.py_split_publish, buf, 4, len(buf))
        assert a == b


@needs_speedups
@DIFF
@given(st.lists(messages, max_size=20))
def test_join_entries_same_bytes(msgs):
    assert SPEEDUPS.join_entries(msgs) == K.py_join_entries(msgs)
    assert outcome(SPEEDUPS.join_entries, msgs + ["x"]) == outcome(K.py_join_entries, msgs + ["x"])
