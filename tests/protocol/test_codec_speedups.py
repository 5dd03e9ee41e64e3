"""The compiled twins (``spark_amqp/protocol/_*.pyx``) against the pure-Python code:
the same bytes, the same decoded values, the same typed errors with the same text, on random
and on mutated input. The rest of tests/protocol runs against whichever implementation is in
use (the compiled one when built; ``SPARK_AMQP_PURE_PYTHON=1`` forces pure Python)."""

from __future__ import annotations

import datetime as dt
import os
import sys
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_strategies import ALL_METHOD_CLASSES, bodies, channels, method_of, methods, properties
from speedups_switch import SPEEDUPS, installed
from spark_amqp.protocol import (AMQPError, BasicProperties, ContentMessage, Decoder, Typed,
                                 encode_message, spec)
from spark_amqp.protocol import frames as frames_module
from spark_amqp.protocol import properties as props_module

needs_speedups = pytest.mark.skipif(
    SPEEDUPS is None and os.environ.get("SPARK_AMQP_REQUIRE_SPEEDUPS") != "1",
    reason="compiled fast paths not built or SPARK_AMQP_PURE_PYTHON=1")


DIFF = settings(max_examples=int(os.environ.get("AMQP_FUZZ_EXAMPLES", "300")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def outcome(fn, *args):
    """repr of the result (a mutated float may be a NaN), or the error's type, code, text."""
    try:
        return "ok", repr(fn(*args))
    except AMQPError as exc:
        return type(exc), exc.reply_code, exc.reply_text
    except Exception as exc:  # e.g. UnicodeEncodeError from a lone surrogate on encode
        return type(exc), str(exc)


def test_selection_of_the_implementation(monkeypatch):
    assert props_module._load_speedups("1") is None
    # as if one twin were not built: importing it raises ImportError; they go together
    monkeypatch.delattr(sys.modules["spark_amqp.protocol"], "_frames", raising=False)
    monkeypatch.setitem(sys.modules, "spark_amqp.protocol._frames", None)
    assert props_module._load_speedups(None) is None
    try:
        props_module._install(None)
        assert props_module.decode_properties is props_module.py_decode_properties
        assert BasicProperties.encode is props_module.py_encode
    finally:
        props_module._install(SPEEDUPS)
    if SPEEDUPS is not None:
        assert props_module.decode_properties is SPEEDUPS.decode_properties
        assert BasicProperties.encode is SPEEDUPS.encode_properties
    assert frames_module._content_fast(None) is None
    assert frames_module._content_fast(SPEEDUPS) is frames_module._CONTENT_FAST


@needs_speedups
def test_speedups_are_in_use_unless_pure_python_is_forced():
    assert SPEEDUPS is not None, "SPARK_AMQP_REQUIRE_SPEEDUPS=1 but the compiled twins are not built"
    assert props_module.decode_properties is SPEEDUPS.decode_properties


@needs_speedups
@DIFF
@given(properties())
def test_random_properties_same_bytes_and_values(p):
    raw = SPEEDUPS.encode_properties(p)
    assert raw == props_module.py_encode(p)
    assert SPEEDUPS.decode_properties(raw, 0, len(raw)) == p
    framed = b"ab" + raw + b"c"
    assert (outcome(SPEEDUPS.decode_properties, framed, 2, len(framed) - 1)
            == outcome(props_module.py_decode_properties, framed, 2, len(framed) - 1))


@needs_speedups
@DIFF
@given(properties(), st.data())
def test_mutated_properties_same_value_or_same_error(p, data):
    raw = bytearray(SPEEDUPS.encode_properties(p))
    for _ in range(data.draw(st.integers(0, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw = bytes(raw[:data.draw(st.integers(0, len(raw)))]) + data.draw(st.binary(max_size=4))
    off = data.draw(st.integers(0, 2))
    end = data.draw(st.integers(0, len(raw) + 2))
    for buf in (raw, bytearray(raw)):
        assert (outcome(SPEEDUPS.decode_properties, buf, off, end)
                == outcome(props_module.py_decode_properties, buf, off, end))


@needs_speedups
@DIFF
@given(st.binary(max_size=80), st.integers(0, 3))
def test_random_bytes_same_value_or_same_error(raw, off):
    assert (outcome(SPEEDUPS.decode_properties, raw, off, len(raw))
            == outcome(props_module.py_decode_properties, raw, off, len(raw)))


ODD = [
    {"content_type": 5}, {"content_type": "x" * 300}, {"content_type": b"a/b"},
    {"content_type": "\ud800"}, {"priority": 300}, {"priority": -1}, {"priority": True},
    {"priority": "high"}, {"delivery_mode": 2.0}, {"timestamp": -1}, {"timestamp": 2**64},
    {"timestamp": 2**64 - 1}, {"timestamp": True}, {"headers": {}}, {"headers": []},
    {"headers": [1, 2]}, {"headers": {"k" * 300: 1}}, {"headers": {5: 1}},
    {"headers": {b"k": b"v"}}, {"headers": {"k": object()}}, {"headers": {"k": "\ud800"}},
    {"headers": {"b": True, "l": 2**40, "n": None, "f": 1.5, "d": Decimal("1.25"),
                 "t": dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc), "a": [1, "x"],
                 "F": {"x": {"y": 1}}, "T": Typed("u", 7), "neg": -2**31, "big": 2**31}},
    {"cluster_id": "c" * 256}, {"app_id": "é" * 128},
    # beyond the compiled slot path's 2 KiB stack buffer, and just below it
    {"headers": {"h": "x" * 5000}}, {"headers": {"h": "x" * 2030}},
    {"content_type": "a" * 255, "message_id": "b" * 255, "app_id": "c" * 255,
     "headers": {f"k{i}": "v" * 200 for i in range(6)}},
]


@needs_speedups
@pytest.mark.parametrize("kw", ODD, ids=lambda kw: repr(kw)[:40])
def test_uncommon_and_bad_values_encode_the_same_or_fail_the_same(kw):
    p = BasicProperties(**kw)
    assert outcome(SPEEDUPS.encode_properties, p) == outcome(props_module.py_encode, p)
    if outcome(props_module.py_encode, p)[0] == "ok":
        raw = props_module.py_encode(p)
        assert (outcome(SPEEDUPS.decode_properties, raw, 0, len(raw))
                == outcome(props_module.py_decode_properties, raw, 0, len(raw)))


def _headers_raw(value_bytes: bytes) -> bytes:
    """Properties bytes with only ``headers`` = one entry ``k`` whose tag and value are
    ``value_bytes``, as a broker writes them (no encoder in between)."""
    entry = b"\x01k" + value_bytes
    return b"\x20\x00" + len(entry).to_bytes(4, "big") + entry


# the tags the compiled table decoder reads itself ('l'/'L': a stream delivery's
# x-stream-offset, 't'), at their bounds, and each cut short by one byte
INT64_AND_BOOL = [b"l" + v.to_bytes(8, "big", signed=True) for v in (0, 1, -1, 2**63 - 1, -2**63)]
INT64_AND_BOOL += [b"L" + (2**64 - 5).to_bytes(8, "big"), b"t\x00", b"t\x01", b"t\x07",
                   b"l" + bytes(7), b"L", b"t"]


@needs_speedups
@pytest.mark.parametrize("value", INT64_AND_BOOL, ids=lambda v: repr(v))
def test_int64_and_boolean_header_values_decode_as_pure_python(value):
    raw = _headers_raw(value)
    assert (outcome(SPEEDUPS.decode_properties, raw, 0, len(raw))
            == outcome(props_module.py_decode_properties, raw, 0, len(raw)))


class _SubProperties(BasicProperties):
    __slots__ = ()


@needs_speedups
def test_properties_of_a_subclass_or_with_an_unset_slot_encode_as_pure_python():
    sub = _SubProperties(content_type="t", headers={"a": 1}, priority=3)
    assert SPEEDUPS.encode_properties(sub) == props_module.py_encode(sub)
    unset = object.__new__(BasicProperties)  # no slot set: the attribute error of pure Python
    assert outcome(SPEEDUPS.encode_properties, unset) == outcome(props_module.py_encode, unset)
    assert outcome(props_module.py_encode, unset)[0] is AttributeError


# ------------------------------------------------------------------------------ methods

@needs_speedups
@DIFF
@given(methods, st.data())
def test_methods_decode_the_same_or_fail_the_same(method, data):
    cls = type(method)
    wire = method.encode()
    assert cls.decode(wire, 4, len(wire)) == method  # the compiled decoder, on valid input
    raw = bytearray(wire)
    for _ in range(data.draw(st.integers(0, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw = bytes(raw[:data.draw(st.integers(4, len(raw)))]) + data.draw(st.binary(max_size=3))
    end = data.draw(st.integers(4, len(raw) + 1))
    for buf in (raw, bytearray(raw)):
        assert outcome(cls.decode, buf, 4, end) == outcome(cls._py_decode, buf, 4, end)


@needs_speedups
def test_every_method_class_uses_the_compiled_decoder():
    for cls in ALL_METHOD_CLASSES:
        assert cls.decode.__func__ is SPEEDUPS.decode_method
    try:
        spec._install_decoders(None)
        assert all(cls.decode.__func__ is not SPEEDUPS.decode_method for cls in ALL_METHOD_CLASSES)
    finally:
        spec._install_decoders(SPEEDUPS)


# ------------------------------------------------------------------------------ frames

content_classes = st.sampled_from([c for c in ALL_METHOD_CLASSES if c.has_content])


@needs_speedups
@DIFF
@given(content_classes.flatmap(method_of), channels, properties(), bodies)
def test_compiled_content_path_decodes_well_formed_messages(method, channel, props, body):
    wire = encode_message(channel, method, props, body, frame_max=131072)
    mend = 7 + int.from_bytes(wire[3:7], "big")
    r = SPEEDUPS.content_after_method(wire, mend + 1, len(wire), channel, method,
                                      method.CLASS_ID, 131064, 1 << 30)
    assert r is not None, "the compiled fast path declined a well-formed message"
    ev, end = r
    assert end == len(wire) and ev == ContentMessage(channel, method, props, body)
    assert type(ev.body) is bytes


@needs_speedups
@DIFF
@given(content_classes.flatmap(method_of), channels, properties(), bodies, st.data())
def test_mutated_messages_same_events_or_same_error_as_pure_python(method, channel, props,
                                                                   body, data):
    wire = bytearray(encode_message(channel, method, props, body, frame_max=4096)
                     + b"\x08\x00\x00\x00\x00\x00\x00\xce")
    for _ in range(data.draw(st.integers(0, 3))):
        wire[data.draw(st.integers(0, len(wire) - 1))] = data.draw(st.integers(0, 255))
    wire = bytes(wire[:data.draw(st.integers(0, len(wire)))])
    max_body = data.draw(st.sampled_from([1 << 20, len(body), max(0, len(body) - 1)]))

    def feed():
        dec = Decoder(frame_max=4096, max_body_size=max_body)
        return dec.feed(wire), dec.buffered, dec.pending_channels()

    compiled = outcome(feed)
    with installed(None):  # everything pure Python: the fast path, method and property decoders
        pure = outcome(feed)
    assert compiled == pure


@needs_speedups
@DIFF
@given(methods, channels, properties(), bodies,
       st.sampled_from([0, 9, 4096, 131072, 2**70]) | st.integers(9, 400))
def test_encode_message_same_bytes_or_same_error_as_pure_python(method, channel, props, body,
                                                                 frame_max):
    """encode_message's compiled common case (``_speedups.encode_content``) against the pure
    encoder, any method (content or not), body split or not."""
    compiled = outcome(encode_message, channel, method, props, body, frame_max)
    with installed(None):
        pure = outcome(encode_message, channel, method, props, body, frame_max)
    assert compiled == pure


@needs_speedups
@pytest.mark.parametrize("method", [
    spec.Basic.Publish(0, "x" * 256, "k"),                # a short string over 255 bytes
    spec.Basic.Publish(70000, "x", "k"),                  # a short out of range
    spec.Basic.Publish(0, b"x", "k"),                     # bytes where text is expected
    spec.Basic.Deliver("c", -1, False, "x", "k"),         # a negative delivery tag
    spec.Basic.Deliver("c", 2**64, False, "x", "k"),      # a delivery tag over 64 bits
    spec.Basic.Deliver("c", 1, 1, "x", "k"),              # an int where a bit is expected
    spec.Basic.Deliver("c", True, False, "x", "k"),       # a bool where an int is expected
], ids=lambda m: repr(m)[:50])
def test_encode_message_odd_arguments_as_pure_python(method):
    compiled = outcome(encode_message, 1, method, None, b"body")
    with installed(None):
        pure = outcome(encode_message, 1, method, None, b"body")
    assert compiled == pure
    for channel in (-1, 65536):
        compiled = outcome(encode_message, channel, spec.Basic.Publish(), None, b"b")
        with installed(None):
            assert outcome(encode_message, channel, spec.Basic.Publish(), None, b"b") == compiled


@pytest.mark.parametrize("kw", [{"max_body_size": 2**70}, {"frame_max": 2**70},
                                {"max_body_size": -1}, {"max_body_size": 3}, {"frame_max": 0}])
def test_decoder_limits_of_any_size(kw):
    """Limits that do not fit a C integer or reject the body give what pure Python gives."""
    wire = encode_message(1, spec.Basic.Publish(), BasicProperties(delivery_mode=2), b"body")

    def feed():
        return Decoder(**kw).feed(wire)

    compiled = outcome(feed)
    saved = frames_module._CONTENT_FAST, frames_module._MESSAGE_FAST
    try:
        frames_module._CONTENT_FAST = frames_module._MESSAGE_FAST = None
        assert outcome(feed) == compiled
    finally:
        frames_module._CONTENT_FAST, frames_module._MESSAGE_FAST = saved
    if "max_body_size" in kw and kw["max_body_size"] < 4:
        assert compiled[1] == 501  # FRAME_ERROR: body over the limit
    else:
        assert compiled[0] == "ok"


@pytest.mark.parametrize("body", [b"", b"x" * 100])
def test_pure_python_fast_path_with_and_without_a_body(monkeypatch, body):
    """The pure-Python content fast path of Decoder._parse, whichever implementation is built."""
    monkeypatch.setattr(frames_module, "_CONTENT_FAST", None)
    p = BasicProperties(content_type="t", headers={"a": 1})
    m = spec.Basic.Deliver("c", 7, True, "e", "r")
    wire = encode_message(3, m, p, body) * 2
    assert Decoder().feed(wire) == [ContentMessage(3, m, p, body)] * 2


@needs_speedups
def test_the_compiled_encoder_takes_the_common_messages():
    """Not always declining: publish and deliver with a one-frame body or none."""
    for m in (spec.Basic.Publish(0, "amq.direct", "k", True), spec.Basic.Deliver("c", 9, True, "e", "r"),
              spec.Basic.GetOk(3, False, "e", "r", 5), spec.Basic.Return(312, "NO_ROUTE", "e", "r")):
        for body in (b"", b"abc"):
            got = SPEEDUPS.encode_content(7, m, b"\x00\x00", body, 131072)
            with installed(None):
                assert got == encode_message(7, m, None, body)


@pytest.mark.parametrize("impl", ["built", "pure"])
def test_a_whole_message_after_a_split_one_is_decoded_at_once(impl):
    """The whole-message step in ``Decoder.feed`` leaves the decoder wanting a frame header
    (7 bytes), not what the split message before needed: a small message right after a large
    one that came in two reads is decoded by the read that completes it."""
    big = encode_message(1, spec.Basic.Deliver("c", 1, False, "e", "r"), None, b"x" * 5000)
    small = encode_message(1, spec.Basic.Deliver("c", 2, False, "e", "r"), None, b"y")
    with installed(SPEEDUPS if impl == "built" else None):
        dec = Decoder()
        assert dec.feed(big[:100]) == []
        assert [e.method.delivery_tag for e in dec.feed(big[100:])] == [1]
        assert [e.method.delivery_tag for e in dec.feed(small)] == [2]
        assert [e.method.delivery_tag for e in dec.feed(small + small[:3])] == [2]
        assert dec.buffered == 3
