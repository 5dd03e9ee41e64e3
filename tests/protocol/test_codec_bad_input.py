"""Bad input: each case gives the typed error with the right reply code (never another
exception type, never a hang, never unbounded memory), and a fuzz test that mutates valid
frames (bit flips, truncation, insertion, length fields) and feeds them to the decoder and to
the server-role state machine."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_strategies import methods, mutate, mutation, properties
from spark_amqp.protocol import (AMQPError, BasicProperties, Decoder, encode_message,
                                 encode_method, encode_table, spec)
from spark_amqp.protocol.connection import AMQPConnection, Role
from spark_amqp.protocol.errors import (AMQPSyntaxError, ChannelErrorCode, CommandInvalid,
                                        FrameError, UnexpectedFrame)
from spark_amqp.protocol.properties import _specialised, decode_properties
from spark_amqp.protocol.values import decode_array, decode_table, decode_longstr, decode_shortstr

PUBLISH = encode_message(1, spec.Basic.Publish(0, "ex", "rk"),
                         BasicProperties(content_type="a/b", headers={"h": 1}), b"body")
DECLARE = encode_method(1, spec.Queue.Declare(0, "q", arguments={"x-a": "b"}))


def frame(ftype: int, channel: int, payload: bytes, end: int = 0xCE) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + bytes([end])


def method_payload(cls_id, meth_id, args=b""):
    return struct.pack(">HH", cls_id, meth_id) + args


def header_payload(body_size, props=b"\x00\x00", class_id=60, weight=0):
    return struct.pack(">HHQ", class_id, weight, body_size) + props


def table_with(raw_value: bytes) -> bytes:
    entry = b"\x01k" + raw_value
    return struct.pack(">I", len(entry)) + entry


BAD = [
    # name, bytes, expected error class, reply code
    ("wrong frame-end", DECLARE[:-1] + b"\x00", FrameError, 501),
    ("unknown frame type", frame(9, 0, b""), FrameError, 501),
    ("oversized beyond frame-max", struct.pack(">BHI", 1, 1, 200_000), FrameError, 501),
    ("method frame too short for ids", frame(1, 1, b"\x00\x32"), FrameError, 501),
    ("unknown class", frame(1, 1, method_payload(99, 10)), CommandInvalid, 503),
    ("unknown method", frame(1, 1, method_payload(60, 99)), CommandInvalid, 503),
    ("truncated method arguments", frame(1, 1, method_payload(50, 10, b"\x00\x00\x05qu")),
     FrameError, 501),
    ("trailing bytes after arguments", frame(1, 1, spec.Basic.Ack(1).encode() + b"\x00"),
     FrameError, 501),
    ("invalid UTF-8 in short string",
     frame(1, 1, method_payload(50, 10, b"\x00\x00\x02\xff\xfe\x00" + b"\x00" * 4)),
     AMQPSyntaxError, 502),
    ("bad field-table tag",
     frame(1, 1, method_payload(50, 10, b"\x00\x00\x01q\x00" + table_with(b"Z\x00"))),
     FrameError, 501),
    ("field-table length past the frame",
     frame(1, 1, method_payload(50, 10, b"\x00\x00\x01q\x00" + b"\x00\x00\x10\x00")),
     FrameError, 501),
    ("invalid UTF-8 in a field name",
     frame(1, 1, method_payload(50, 10, b"\x00\x00\x01q\x00"
                                + struct.pack(">I", 3) + b"\x01\xffV")), AMQPSyntaxError, 502),
    ("body without header", frame(3, 1, b"abc"), UnexpectedFrame, 505),
    ("header without method", frame(2, 1, header_payload(3)), UnexpectedFrame, 505),
    ("method between content method and header",
     frame(1, 1, spec.Basic.Publish().encode()) + DECLARE, UnexpectedFrame, 505),
    ("two headers", frame(1, 1, spec.Basic.Publish().encode()) + frame(2, 1, header_payload(3))
     + frame(2, 1, header_payload(3)), UnexpectedFrame, 505),
    ("body longer than announced", frame(1, 1, spec.Basic.Publish().encode())
     + frame(2, 1, header_payload(2)) + frame(3, 1, b"abc"), UnexpectedFrame, 505),
    ("header of another class", frame(1, 1, spec.Basic.Publish().encode())
     + frame(2, 1, header_payload(2, class_id=50)), UnexpectedFrame, 505),
    ("non-zero weight", frame(1, 1, spec.Basic.Publish().encode())
     + frame(2, 1, header_payload(2, weight=1)), FrameError, 501),
    ("header too short", frame(1, 1, spec.Basic.Publish().encode()) + frame(2, 1, b"\x00<"),
     FrameError, 501),
    ("body size over the limit", frame(1, 1, spec.Basic.Publish().encode())
     + frame(2, 1, header_payload(2**40)), FrameError, 501),
    ("unknown property flag bit 1", frame(1, 1, spec.Basic.Publish().encode())
     + frame(2, 1, header_payload(0, b"\x00\x02")), FrameError, 501),
    ("flags continuation with unknown bits", frame(1, 1, spec.Basic.Publish().encode())
     + frame(2, 1, header_payload(0, b"\x00\x01\x80\x00")), FrameError, 501),
    ("truncated properties", frame(1, 1, spec.Basic.Publish().encode())
     + frame(2, 1, header_payload(0, b"\x80\x00\x05ab")), FrameError, 501),
    ("trailing bytes after properties", frame(1, 1, spec.Basic.Publish().encode())
     + frame(2, 1, header_payload(0, b"\x00\x00zz")), FrameError, 501),
    ("invalid UTF-8 in a property", frame(1, 1, spec.Basic.Publish().encode())
     + frame(2, 1, header_payload(0, b"\x80\x00\x01\xff")), AMQPSyntaxError, 502),
    ("content method on channel 0", frame(1, 0, spec.Basic.Publish().encode()),
     ChannelErrorCode, 504),
    ("heartbeat on a channel", frame(8, 3, b""), UnexpectedFrame, 505),
]


@pytest.mark.parametrize("name,data,exc,code", BAD, ids=[b[0] for b in BAD])
def test_bad_input_gives_typed_error(name, data, exc, code):
    for chunks in (1, 3):  # whole, and in small pieces
        dec = Decoder()
        with pytest.raises(exc) as info:
            step = max(1, len(data) // chunks) if chunks > 1 else len(data)
            for i in range(0, len(data), step):
                dec.feed(data[i:i + step])
            dec.feed(b"")
        err = info.value
        assert err.reply_code == code and err.connection_level
        assert str(err).startswith(f"{code} ")
        # the decoder stays failed: it cannot resynchronise
        with pytest.raises(exc):
            dec.feed(DECLARE)


def test_truncated_input_just_waits():
    dec = Decoder()
    assert dec.feed(PUBLISH[:-1]) == [] and dec.buffered > 0
    assert dec.pending_channels() == [1]
    assert len(dec.feed(PUBLISH[-1:])) == 1


def test_oversized_frame_rejected_before_buffering():
    dec = Decoder(frame_max=4096)
    with pytest.raises(FrameError):
        dec.feed(struct.pack(">BHI", 3, 1, 5000))
    assert dec.buffered == 0


def test_frame_max_zero_means_unlimited():
    data = encode_message(1, spec.Basic.Publish(), None, b"x" * 200_000, frame_max=0)
    [ev] = Decoder(frame_max=0).feed(data)
    assert len(ev.body) == 200_000


def test_value_helpers_reject_truncation():
    with pytest.raises(FrameError):
        decode_shortstr(b"", 0, 0)
    with pytest.raises(FrameError):
        decode_shortstr(b"\x05ab", 0, 3)
    with pytest.raises(AMQPSyntaxError):
        decode_shortstr(b"\x01\xff", 0, 2)
    with pytest.raises(FrameError):
        decode_longstr(b"\x00\x00", 0, 2)
    with pytest.raises(FrameError):
        decode_longstr(b"\x00\x00\x00\x09ab", 0, 6)
    with pytest.raises(FrameError):
        decode_array(b"\x00\x00", 0, 2)
    with pytest.raises(FrameError):
        decode_array(b"\x00\x00\x00\x09", 0, 4)
    with pytest.raises(FrameError):
        decode_table(b"\x00\x00\x00\x02\x05a")


TRUNCATED_VALUES = [b"S\x00\x00", b"S\x00\x00\x00\x09a", b"I\x00", b"t", b"l\x00", b"T\x00",
                    b"b", b"B", b"s\x00", b"u\x00", b"i\x00", b"f\x00", b"d\x00", b"D\x00",
                    b"x\x00", b"x\x00\x00\x00\x09", b"", b"F\x00", b"A\x00"]


@pytest.mark.parametrize("raw", TRUNCATED_VALUES, ids=repr)
def test_truncated_field_values(raw):
    with pytest.raises(FrameError):
        decode_table(table_with(raw))


def test_nesting_too_deep_and_timestamp_overflow():
    raw = b"A\x00\x00\x00\x00"
    for _ in range(70):
        raw = b"A" + struct.pack(">I", len(raw)) + raw
    with pytest.raises(FrameError):
        decode_table(table_with(raw))
    raw = b"F" + table_with(b"V")
    for _ in range(70):
        raw = b"F" + table_with(raw)
    with pytest.raises(FrameError):
        decode_table(table_with(raw))
    with pytest.raises(AMQPSyntaxError):
        decode_table(table_with(b"T\xff\xff\xff\xff\xff\xff\xff\xff"))


# ------------------------------------------------------------------------------- fuzz

# AMQP_FUZZ_EXAMPLES=20000 for a long fuzzing run; the default keeps the suite fast
FUZZ = settings(max_examples=int(os.environ.get("AMQP_FUZZ_EXAMPLES", "300")), deadline=2000,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

corpus = st.one_of(
    methods.map(lambda m: encode_method(1, m) if not m.has_content
                else encode_message(1, m, BasicProperties(), b"b")),
    st.tuples(properties(), st.binary(max_size=10_000)).map(
        lambda pb: encode_message(2, spec.Basic.Deliver("c", 1), pb[0], pb[1], frame_max=4096)),
)

@FUZZ
@given(st.lists(corpus, min_size=1, max_size=4), st.lists(mutation, min_size=1, max_size=4),
       st.integers(1, 64))
def test_fuzz_decoder_raises_only_typed_errors(frames, muts, chunk):
    data = mutate(b"".join(frames), muts)
    for frame_max in (4096, 131072):
        dec = Decoder(frame_max=frame_max)
        try:
            for i in range(0, len(data), chunk):
                dec.feed(data[i:i + chunk])
        except AMQPError as exc:
            assert 500 <= exc.reply_code <= 505 and exc.connection_level
        # bounded memory: never more than what was fed is held
        assert dec.buffered <= len(data)


@FUZZ
@given(st.lists(corpus, min_size=1, max_size=3), st.lists(mutation, min_size=1, max_size=3))
def test_fuzz_server_state_machine_raises_only_typed_errors(frames, muts):
    # a valid client preamble followed by mutated frames
    client = AMQPConnection(Role.CLIENT)
    server = AMQPConnection(Role.SERVER)
    server.receive_data(client.initiate())
    client.receive_data(server.send_method(0, spec.Connection.Start()))
    server.receive_data(client.send_method(0, spec.Connection.StartOk()))
    client.receive_data(server.send_method(0, spec.Connection.Tune(0, 131072, 0)))
    server.receive_data(client.send_method(0, spec.Connection.TuneOk(0, 131072, 0)))
    server.receive_data(client.send_method(0, spec.Connection.Open("/")))
    server.send_method(0, spec.Connection.OpenOk())
    server.receive_data(encode_method(1, spec.Channel.Open()))
    server.send_method(1, spec.Channel.OpenOk())
    data = mutate(b"".join(frames), muts)
    try:
        server.receive_data(data)
    except AMQPError as exc:
        assert exc.connection_level or exc.reply_code < 500


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_random_bytes(data):
    for dec in (Decoder(), Decoder(expect_protocol_header=True)):
        try:
            dec.feed(data)
        except AMQPError:
            pass
    try:
        decode_table(data)
    except AMQPError:
        pass
    try:
        decode_properties(data, 0, len(data))
    except AMQPError:
        pass
    for cls in (spec.Queue.Declare, spec.Connection.Start, spec.Basic.Deliver):
        try:
            cls.decode(data, 0, len(data))
        except AMQPError:
            pass


def _outcome(fn, *args):
    try:
        return repr(fn(*args))  # (repr: a mutated float may be a NaN, unequal to itself)
    except AMQPError as exc:
        return type(exc), exc.reply_code, exc.reply_text


@FUZZ
@given(properties(), st.data())
def test_fuzz_per_flags_property_decoders_fail_like_the_general_one(p, data):
    """Mutated content-header properties (same flags word) decoded by the per-flags decoder
    give the same value or the same typed error and text as the general decoder."""
    raw = bytearray(p.encode())
    if len(raw) > 2:
        for _ in range(data.draw(st.integers(1, 3))):
            i = data.draw(st.integers(2, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
    raw = bytes(raw[:data.draw(st.integers(2, len(raw)))]) + data.draw(st.binary(max_size=3))
    end = data.draw(st.integers(2, len(raw)))
    flags = raw[0] << 8 | raw[1]
    assert (_outcome(_specialised(flags), raw, 0, end)
            == _outcome(decode_properties, raw, 0, end))


def test_encoded_table_helper_sanity():
    assert decode_table(encode_table({"a": 1}))[0] == {"a": 1}


# --- issue 11 §4: edge bugs found by differential fuzzing ---------------------------------

ACK = bytes.fromhex("0100010000000d003c0050000000000000000701ce")   # basic.ack(7, multiple)


@pytest.mark.parametrize("kind", ["memoryview", "bytearray"])
@pytest.mark.parametrize("impl", ["compiled", "pure"])
def test_feed_copies_a_reused_buffer_at_every_split_point(impl, kind):
    """``Decoder.feed`` takes any bytes-like object and must not keep a reference to it: a
    caller reusing one buffer (as ``recv_into`` does) overwrites it before the frame is
    complete. Every two-cut split of ack + publish, fed through one reused buffer that is
    scribbled over after each call, gives the events of feeding the bytes whole."""
    import speedups_switch
    if impl == "compiled" and speedups_switch.SPEEDUPS is None:
        pytest.skip("compiled fast paths not built")
    wire = ACK + PUBLISH
    with speedups_switch.installed(speedups_switch.SPEEDUPS if impl == "compiled" else None):
        expected = repr(Decoder().feed(wire))
        reused = bytearray(len(wire))
        for i in range(1, len(wire)):
            for j in range(i, len(wire)):
                dec, got = Decoder(), []
                for piece in (wire[:i], wire[i:j], wire[j:]):
                    if kind == "memoryview":
                        reused[:len(piece)] = piece
                        got += dec.feed(memoryview(reused)[:len(piece)])
                        reused[:] = b"\xff" * len(reused)      # the caller reuses its buffer
                    else:
                        ba = bytearray(piece)
                        got += dec.feed(ba)
                        ba[:] = b"\xff" * len(ba)
                assert repr(got) == expected, (i, j)


def test_feed_reused_bytearray_repro():
    """The issue's repro: 3 B + 3 B in one bytearray overwritten in place, then the rest."""
    buf = bytearray(ACK[:3])
    dec = Decoder()
    assert dec.feed(buf) == []
    buf[:] = ACK[3:6]
    assert dec.feed(buf) == []
    buf[:] = b"\xff\xff\xff"                                   # overwrite the second piece
    events = dec.feed(ACK[6:])
    assert [e.method.delivery_tag for e in events] == [7]


def test_float32_overflow_is_a_syntax_error_everywhere():
    """A ``Typed("f", 1e300)`` does not fit a 32-bit float: ``encode_table`` and
    ``encode_message`` (headers) raise AMQPSyntaxError 502 like ``encode_method`` does, never a
    bare OverflowError."""
    from spark_amqp.protocol import Typed
    table = {"a": Typed("f", 1e300)}
    with pytest.raises(AMQPSyntaxError) as e1:
        encode_table(table)
    with pytest.raises(AMQPSyntaxError) as e2:
        encode_message(1, spec.Basic.Publish(0, "ex", "rk"), BasicProperties(headers=table), b"x")
    with pytest.raises(AMQPSyntaxError) as e3:
        encode_method(1, spec.Queue.Declare(0, "q", arguments=table))
    assert e1.value.reply_code == e2.value.reply_code == e3.value.reply_code == 502
    assert "'f'" in str(e1.value)
    assert encode_table({"a": Typed("f", 3.0e38)})             # in range: still encodes
