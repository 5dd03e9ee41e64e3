"""Raw publishes (``spark_amqp/protocol/raw_publish.py``): the server-role decoder options the
embedded broker runs (``raw_content``, ``drop_oversized``, ``on_content``, ``emit``), and the
compiled twin of ``scan_publish``.

The property: a ``raw_content`` decoder gives, for any stream of publishes, the same messages
as the default decoder - exchange, routing key, bits, body, and the property bytes that decode
to the default decoder's ``BasicProperties`` - and raises the same reply code on the same
malformed streams (property lists aside: they are not decoded in raw mode).
"""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_strategies import properties, shortstr
from speedups_switch import SPEEDUPS, installed
from spark_amqp.protocol import (AMQPError, BasicProperties, ContentMessage, Decoder, MethodFrame,
                                 encode_message, encode_method, spec)
from spark_amqp.protocol import frames as frames_module
from spark_amqp.protocol.errors import CommandInvalid, FrameError
from spark_amqp.protocol.frames import OversizedContent
from spark_amqp.protocol.properties import decode_properties
from spark_amqp.protocol.raw_publish import RawPublish, scan_publish

PUB_SPEEDUPS = SPEEDUPS if SPEEDUPS is not None and hasattr(SPEEDUPS, "scan_publish") else None
REQUIRE = os.environ.get("SPARK_AMQP_REQUIRE_SPEEDUPS") == "1"
PROP = settings(max_examples=int(os.environ.get("AMQP_RAW_EXAMPLES", "120")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def implementations():
    out = [("pure", None)]
    if PUB_SPEEDUPS is not None:
        out.append(("compiled", PUB_SPEEDUPS))
    return out


def frame(ftype: int, channel: int, payload: bytes, end: int = 0xCE) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + bytes([end])


def as_message(ev):
    """(channel, exchange, routing key, mandatory, immediate, properties, body) of a raw or a
    decoded publish."""
    if ev.__class__ is RawPublish:
        props = decode_properties(ev.properties, 0, len(ev.properties))
        assert ev.enc == (bytes([len(ev.exchange.encode())]) + ev.exchange.encode()
                          + bytes([len(ev.routing_key.encode())]) + ev.routing_key.encode())
        return (ev.channel, ev.exchange, ev.routing_key, ev.mandatory, ev.immediate, props, ev.body)
    m = ev.method
    props = ev.properties
    if isinstance(props, bytes):
        props = decode_properties(props, 0, len(props))
    return (ev.channel, m.exchange, m.routing_key, m.mandatory, m.immediate, props, ev.body)


def feed_all(dec, data, chunk):
    out = []
    for i in range(0, len(data), chunk):
        out += dec.feed(data[i:i + chunk])
    return out


publishes = st.tuples(
    st.integers(1, 3), shortstr(40), shortstr(40), st.booleans(), st.booleans(),
    st.one_of(st.none(), properties()), st.binary(max_size=600), st.sampled_from([4096, 131072]),
).map(lambda t: encode_message(t[0], spec.Basic.Publish(0, t[1], t[2], t[3], t[4]), t[5], t[6],
                               frame_max=t[7] if len(t[6]) > 300 else 131072))


@pytest.mark.parametrize("impl", implementations(), ids=lambda i: i[0])
@PROP
@given(st.lists(st.one_of(publishes, st.just(encode_method(2, spec.Basic.Qos(0, 5, False)))),
                min_size=1, max_size=6), st.sampled_from([1, 13, 1 << 20]))
def test_raw_content_gives_the_default_decoders_messages(impl, stream, chunk):
    data = b"".join(stream)
    with installed(impl[1]):
        raw = feed_all(Decoder(raw_content=True), data, chunk)
        full = feed_all(Decoder(), data, chunk)
    assert len(raw) == len(full)
    for r, f in zip(raw, full):
        if f.__class__ is MethodFrame:
            assert r == f
        else:
            assert as_message(r) == as_message(f)
    if chunk > len(data):  # complete in one read: single-frame publishes come out raw
        assert all(e.__class__ is not ContentMessage or len(e.body) > 4088 for e in raw)


@pytest.mark.parametrize("impl", implementations(), ids=lambda i: i[0])
@PROP
@given(st.lists(publishes, min_size=1, max_size=3), st.integers(0, 10**6), st.integers(0, 7))
def test_raw_content_fails_like_the_default_decoder(impl, stream, at, bit):
    b = bytearray(b"".join(stream))
    b[at % len(b)] ^= 1 << bit
    data = bytes(b)
    with installed(impl[1]):
        errs = []
        for dec in (Decoder(raw_content=True), Decoder()):
            try:
                n = len(dec.feed(data))
                errs.append((None, n))
            except AMQPError as exc:
                errs.append(((exc.reply_code, exc.class_id, exc.method_id), len(exc.events)))
    (raw_err, raw_n), (full_err, full_n) = errs
    if raw_err is not None and full_err is not None and full_n == raw_n:
        assert raw_err == full_err
    # raw mode does not decode properties: it may accept what the default decoder rejects,
    # never the other way round
    if full_err is None:
        assert raw_err is None and raw_n == full_n


@pytest.mark.skipif(PUB_SPEEDUPS is None and not REQUIRE, reason="compiled scan_publish not built")
@PROP
@given(st.lists(publishes, min_size=1, max_size=2), st.integers(0, 10**6), st.integers(0, 7),
       st.integers(0, 200), st.sampled_from([4088, 131064, 0]), st.sampled_from([0, 10, 1 << 29]))
def test_scan_compiled_equals_pure(stream, at, bit, cut, fmax8, max_body):
    assert PUB_SPEEDUPS is not None, "SPARK_AMQP_REQUIRE_SPEEDUPS=1 but scan_publish is not built"
    b = bytearray(b"".join(stream))
    if at % 3:
        b[at % len(b)] ^= 1 << bit
    data = bytes(b[:max(11, len(b) - cut)])
    size = struct.unpack_from(">I", data, 3)[0]
    mend = 7 + size
    if mend >= len(data):
        return
    pure = scan_publish(data, 11, mend, len(data), 1, fmax8, max_body)
    fast = PUB_SPEEDUPS.scan_publish(data, 11, mend, len(data), 1, fmax8, max_body)
    assert pure == fast


def test_compiled_scan_is_installed():
    if PUB_SPEEDUPS is None:
        assert frames_module._SCAN_PUBLISH is scan_publish
    else:
        assert frames_module._SCAN_PUBLISH is PUB_SPEEDUPS.scan_publish


def test_a_whole_publish_is_one_raw_event_and_pieces_are_content_messages():
    props = BasicProperties(content_type="a/b", headers={"h": 1})
    data = encode_message(1, spec.Basic.Publish(0, "ex", "rk", True, False), props, b"body")
    for impl in implementations():
        with installed(impl[1]):
            [ev] = Decoder(raw_content=True).feed(data)
            assert ev.__class__ is RawPublish
            assert (ev.exchange, ev.routing_key, ev.mandatory, ev.immediate, ev.body) == ("ex", "rk", True, False, b"body")
            assert ev.enc == b"\x02ex\x02rk" and ev.properties == props.encode()
            dec = Decoder(raw_content=True)
            assert dec.feed(data[:-3]) == []
            [ev] = dec.feed(data[-3:])
            assert ev.__class__ is ContentMessage and ev.properties == props.encode()


def test_drop_oversized_reads_the_body_and_reports_it():
    data = encode_message(1, spec.Basic.Publish(0, "", "q"), None, b"x" * 100, frame_max=40)
    ok = encode_method(1, spec.Basic.Qos(0, 1, False))
    dec = Decoder(max_body_size=99, raw_content=True, drop_oversized=True)
    events = feed_all(dec, data + ok, 7)
    assert events[0] == OversizedContent(1, spec.Basic.Publish(0, "", "q"), 100)
    assert events[1] == MethodFrame(1, spec.Basic.Qos(0, 1, False))
    with pytest.raises(FrameError):
        Decoder(max_body_size=99).feed(data)


def test_emit_passes_events_in_order_and_tune_ok_frame_max_applies_to_the_next_frame():
    big = frame(1, 1, spec.Basic.Qos(0, 1, False).encode() + b"")  # small
    tune_ok = encode_method(0, spec.Connection.TuneOk(0, 131072, 0))
    large = encode_method(1, spec.Queue.Declare(0, "q" * 200, arguments={"x": "y" * 5000}))
    seen = []
    dec = Decoder(frame_max=4104)

    def on_method(channel, method):
        seen.append((channel, method.NAME))
        if method.NAME == "connection.tune-ok":
            dec.set_frame_max(method.frame_max)

    assert dec.feed(big + tune_ok + large, seen.append, on_method) == []
    assert seen == [(1, "basic.qos"), (0, "connection.tune-ok"), (1, "queue.declare")]
    with pytest.raises(FrameError):  # without the tune-ok the large frame is refused
        Decoder(frame_max=4104).feed(big + large)


def test_on_content_refuses_a_content_method_before_its_header():
    def refuse(channel, method):
        raise CommandInvalid(f"{method.NAME} may not be sent by a client", method.CLASS_ID, method.METHOD_ID)

    dec = Decoder(raw_content=True, on_content=refuse)
    with pytest.raises(CommandInvalid) as info:
        dec.feed(encode_method(1, spec.Basic.Deliver("c", 1)))
    assert (info.value.class_id, info.value.method_id) == (60, 60)


def test_heartbeat_with_a_payload_is_a_frame_error():
    with pytest.raises(FrameError):
        Decoder().feed(frame(8, 0, b"xx"))
