"""The broker's output frames (``spark_amqp/protocol/server_frames.py``): the same bytes as the
codec's general encoder (``encode_message`` / ``encode_method``) for every content method the
broker writes, decoded back to the same method, properties and body by :class:`Decoder`; and
the compiled delivery writers (``_server_frames.pyx``: ``append_deliver`` /
``append_stream_deliver`` / ``append_stream_run``) give the pure-Python ones' bytes, byte for
byte."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_strategies import bodies, channels, method_of, methods, properties, shortstr
from speedups_switch import SPEEDUPS
from spark_amqp.protocol.amqp10.props091 import offset_header_split
from spark_amqp.protocol import BasicProperties, ContentMessage, Decoder, encode_message, spec
from spark_amqp.protocol import server_frames as sf
from spark_amqp.protocol.frames import MethodFrame, encode_method

needs_speedups = pytest.mark.skipif(
    SPEEDUPS is None and os.environ.get("SPARK_AMQP_REQUIRE_SPEEDUPS") != "1",
    reason="compiled fast paths not built or SPARK_AMQP_PURE_PYTHON=1")

PROPS = settings(max_examples=int(os.environ.get("AMQP_FUZZ_EXAMPLES", "150")), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

tags = st.integers(0, 2**64 - 1)
frame_maxes = st.sampled_from([0, 4096, 131072]) | st.integers(9, 600)


def _ss(s: str) -> bytes:
    b = s.encode()
    return bytes((len(b),)) + b


def _decoded(data: bytes) -> list:
    """The events of ``data`` (the decoder's frame_max bounds every frame; the encoder's only
    splits bodies: decoded at the default size, which the small methods fit)."""
    return Decoder().feed(data)


def _same_message(events, channel, method, props, body):
    assert len(events) == 1 and isinstance(events[0], ContentMessage)
    ev = events[0]
    assert ev.channel == channel
    assert type(ev.method) is type(method)
    assert [getattr(ev.method, n) for n in method.__slots__] == \
        [getattr(method, n) for n in method.__slots__]
    assert ev.properties == props and bytes(ev.body) == body


@PROPS
@given(channels, shortstr(), tags, st.booleans(), shortstr(), shortstr(), properties(), bodies,
       frame_maxes, st.binary(max_size=20))
def test_deliver_as_the_codec_encodes_it(ch, ctag, tag, red, exchange, rk, props, body,
                                         frame_max, before):
    method = spec.Basic.Deliver(ctag, tag, red, exchange, rk)
    want = encode_message(ch, method, props, body, frame_max)
    ctag_b, enc, raw = _ss(ctag), _ss(exchange) + _ss(rk), props.encode()
    general = bytearray(before)
    sf.deliver_frames(general, ch, ctag_b, tag, red, enc, raw, body, frame_max)
    assert bytes(general) == before + want
    if 0 < len(body) <= (frame_max - 8 if frame_max else len(body)):  # one body frame: cached
        pre, post = sf.deliver_parts(ch, ctag_b, enc, raw, len(body))
        for append in (sf._append_deliver, sf.append_deliver):
            out = bytearray(before)
            append(out, pre, tag, red, post, body)
            assert bytes(out) == before + want
    _same_message(_decoded(want), ch, method, props, body)


@PROPS
@given(channels, tags, st.booleans(), shortstr(), shortstr(), st.integers(0, 2**32 - 1),
       properties(), bodies, frame_maxes)
def test_get_ok_as_the_codec_encodes_it(ch, tag, red, exchange, rk, count, props, body,
                                        frame_max):
    method = spec.Basic.GetOk(tag, red, exchange, rk, count)
    out = bytearray()
    sf.content_frames(out, ch, sf.get_ok_payload(tag, red, _ss(exchange) + _ss(rk), count),
                      props.encode(), body, frame_max)
    assert bytes(out) == encode_message(ch, method, props, body, frame_max)
    _same_message(_decoded(bytes(out)), ch, method, props, body)


@PROPS
@given(channels, st.integers(0, 2**16 - 1), shortstr(), shortstr(), shortstr(), properties(),
       bodies, frame_maxes)
def test_return_as_the_codec_encodes_it(ch, code, text, exchange, rk, props, body, frame_max):
    method = spec.Basic.Return(code, text, exchange, rk)
    out = bytearray()
    sf.content_frames(out, ch, sf.return_payload(code, text, _ss(exchange) + _ss(rk)),
                      props.encode(), body, frame_max)
    assert bytes(out) == encode_message(ch, method, props, body, frame_max)
    _same_message(_decoded(bytes(out)), ch, method, props, body)


@PROPS
@given(st.integers(0, 65535), methods)
def test_method_frame_as_the_codec_encodes_it(ch, method):
    data = sf.method_frame(ch, method)
    assert data == encode_method(ch, method)
    if method.CLASS_ID == 60 and method.NAME in ("basic.publish", "basic.deliver",
                                                  "basic.get-ok", "basic.return"):
        return  # content methods: a content header follows, not decodable alone
    [ev] = _decoded(data)
    assert isinstance(ev, MethodFrame) and ev.channel == ch
    assert type(ev.method) is type(method)


@PROPS
@given(channels, shortstr(), tags, shortstr(), shortstr(), properties(),
       st.binary(min_size=1, max_size=600), st.integers(-2**63, 2**63 - 1))
def test_stream_deliver_carries_its_offset(ch, ctag, tag, exchange, rk, props, body, offset):
    raw = props.encode()
    before, after = offset_header_split(raw)
    ctag_b, enc = _ss(ctag), _ss(exchange) + _ss(rk)
    pre, mid, post = sf.stream_deliver_parts(ch, ctag_b, enc, before, after, len(body))
    want = bytearray()
    with_offset = before + offset.to_bytes(8, "big", signed=True) + after
    sf.deliver_frames(want, ch, ctag_b, tag, False, enc, with_offset, body, 0)
    for append in (sf._append_stream_deliver, sf.append_stream_deliver):
        out = bytearray(b"x")
        append(out, pre, tag, mid, offset, post, body)
        assert bytes(out) == b"x" + want
    [ev] = _decoded(bytes(want))
    assert ev.method.delivery_tag == tag and bytes(ev.body) == body
    assert ev.properties.headers["x-stream-offset"] == offset


@needs_speedups
@PROPS
@given(st.binary(max_size=40), st.binary(max_size=40), st.binary(max_size=40), tags,
       st.booleans(), st.integers(-2**63, 2**63 - 1), st.binary(max_size=300),
       st.sampled_from([bytes, bytearray, memoryview]), st.binary(max_size=10))
def test_compiled_delivery_writers_as_pure(pre, mid, post, tag, red, offset, body, kind, start):
    """The compiled writers against the pure ones on any parts (not only well-formed ones),
    bodies of every bytes-like type, appended after what the buffer already holds."""
    b = kind(body)
    for fast, pure, args in ((SPEEDUPS.append_deliver, sf._append_deliver,
                              (pre, tag, red, post, b)),
                             (SPEEDUPS.append_stream_deliver, sf._append_stream_deliver,
                              (pre, tag, mid, offset, post, b))):
        x, y = bytearray(start), bytearray(start)
        fast(x, *args)
        pure(y, *args)
        assert x == y


# a stream log's entries: (enc, props_raw, body); a run of equal keys, then others
_ENC, _PROPS = _ss("") + _ss("rk"), BasicProperties(content_type="t").encode()
stream_entries = st.lists(st.tuples(st.sampled_from([_ENC, _ss("x") + _ss("rk")]),
                                    st.sampled_from([_PROPS, b"\x00\x00", bytes(_PROPS)]),
                                    st.sampled_from([b"a" * 5, b"b" * 5, b"c" * 6, b""])),
                          max_size=12)


@PROPS
@given(stream_entries, st.integers(0, 12), tags.filter(lambda t: t < 2**63),
       st.integers(0, 2**62))
def test_a_stream_run_is_each_delivery_in_turn_and_stops_at_the_first_other_key(
        entries, i, tag, offset):
    """append_stream_run (pure, and compiled when built) against append_stream_deliver one
    entry at a time: the same bytes, and it stops at the first entry whose exchange / routing
    key, properties or body size differ from the parts' (equal bytes objects that are not
    the same object count as equal)."""
    i = min(i, len(entries))
    before, after = offset_header_split(_PROPS)
    pre, mid, post = sf.stream_deliver_parts(1, _ss("c"), _ENC, before, after, 5)
    want, j = bytearray(b"x"), i
    while j < len(entries) and entries[j][0] == _ENC and entries[j][1] == _PROPS \
            and len(entries[j][2]) == 5:
        sf._append_stream_deliver(want, pre, tag + j - i, mid, offset + j - i, post, entries[j][2])
        j += 1
    for run in {sf._append_stream_run, sf.append_stream_run}:
        out = bytearray(b"x")
        assert run(out, pre, tag, mid, offset, post, entries, i, _ENC, bytes(_PROPS), 5) == j
        assert out == want


@needs_speedups
def test_the_broker_uses_the_compiled_writers():
    from spark_amqp.broker import channel_delivery   # the broker channel's basic.deliver part
    assert channel_delivery.append_deliver is SPEEDUPS.append_deliver
    assert channel_delivery.append_stream_run is SPEEDUPS.append_stream_run


def test_out_of_range_tags_are_refused_by_both():
    for append in {sf._append_deliver, sf.append_deliver}:
        with pytest.raises((OverflowError, Exception)):
            append(bytearray(), b"", -1, False, b"", b"x")
        with pytest.raises((OverflowError, Exception)):
            append(bytearray(), b"", 2**64, False, b"", b"x")


def test_a_deliver_split_over_body_frames():
    body = bytes(range(256)) * 4
    props = BasicProperties(content_type="text/plain")
    out = bytearray()
    sf.deliver_frames(out, 3, _ss("c"), 7, True, _ss("x") + _ss("k"), props.encode(), body, 100)
    assert out.count(b"\x03\x00\x03\x00\x00\x00\x5c") == len(body) // 92  # body frames of 92
    _same_message(_decoded(bytes(out)), 3, spec.Basic.Deliver("c", 7, True, "x", "k"),
                  props, body)
