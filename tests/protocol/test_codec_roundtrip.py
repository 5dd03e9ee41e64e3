"""Round trips of the codec: every method, every property combination, field tables with every
tag, bit packing, body splitting at frame-max, and decoding in chunks of any size."""

from __future__ import annotations

import datetime as dt
import itertools
import struct
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_strategies import (ALL_METHOD_CLASSES, bodies, channels, field_tables, method_of,
                             methods, properties)
from spark_amqp.protocol import (BasicProperties, ContentMessage, Decoder, Heartbeat,
                                 MethodFrame, Typed, decode_table, encode_heartbeat,
                                 encode_message, encode_method, encode_table, spec)
from spark_amqp.protocol.errors import AMQPSyntaxError
from spark_amqp.protocol.frames import encode_frames, parse_protocol_header, ProtocolHeader
from spark_amqp.protocol import properties as properties_module
from spark_amqp.protocol import codegen
from spark_amqp.protocol.properties import PROPERTIES, decode_properties, properties_decoder
from spark_amqp.protocol.values import (decode_array, decode_longstr, decode_shortstr,
                                        encode_array, encode_longstr, encode_shortstr)

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def decode_all(data: bytes, frame_max: int = 0):
    return Decoder(frame_max=frame_max).feed(data)


# ------------------------------------------------------------------------ methods

def test_spec_table_has_the_66_methods_of_0_9_1_plus_rabbitmq_extensions():
    names = {c.NAME for c in ALL_METHOD_CLASSES}
    assert len(names) == 66
    for ext in ("confirm.select", "basic.nack", "exchange.bind", "exchange.unbind",
                "connection.blocked", "connection.unblocked", "connection.update-secret"):
        assert ext in names
    for cls in ALL_METHOD_CLASSES:
        assert spec.METHODS[cls.INDEX] is cls
        assert spec.method_class(cls.CLASS_ID, cls.METHOD_ID) is cls
        for r in cls.responses:
            assert r.CLASS_ID == cls.CLASS_ID
        assert cls.synchronous == bool(cls.responses)
    assert {c.NAME for c in ALL_METHOD_CLASSES if c.has_content} == {
        "basic.publish", "basic.return", "basic.deliver", "basic.get-ok"}


@pytest.mark.parametrize("cls", ALL_METHOD_CLASSES, ids=lambda c: c.NAME)
def test_every_method_round_trips(cls):
    content = st.tuples(properties(), bodies) if cls.has_content else st.just((None, b""))

    @settings(SETTINGS, max_examples=40)
    @given(method_of(cls), channels, content)
    def check(method, channel, pb):
        props, body = pb
        if cls.has_content:
            data = encode_message(channel, method, props, body, frame_max=4096)
            [ev] = decode_all(data)
            assert ev == ContentMessage(channel, method, props, body)
        else:
            [ev] = decode_all(encode_method(channel, method))
            assert ev == MethodFrame(channel, method)
        # value equality also survives repr/pickle-style reconstruction
        again = type(method)(*method.__reduce__()[1])
        assert again == method and hash(again) == hash(method)
        assert method.NAME in repr(method)
        assert set(method.as_dict()) == set(cls.fields)
        # the one-join form of a message's frames is the method frame + the given parts
        mid, raw_props, bhead = b"<mid>", b"<props>", b"<bhead>"
        assert (method.message_bytes(channel, mid, raw_props, bhead, body)
                == b"".join((*method.frame_parts(channel), mid, raw_props, bhead, body, b"\xce")))
    check()


def test_method_equality_details():
    a = spec.Queue.Declare(queue="q", arguments=None)
    assert a == spec.Queue.Declare(queue="q", arguments={})
    assert a != spec.Queue.Declare(queue="r")
    assert (a == spec.Basic.Ack()) is False
    assert a.__eq__(5) is NotImplemented


def test_default_defaults():
    m = spec.Basic.Publish()
    assert (m.reserved_1, m.exchange, m.routing_key, m.mandatory, m.immediate) == (0, "", "", False, False)
    assert spec.Basic.Qos(global_=True).global_ is True


@pytest.mark.parametrize("cls", [spec.Basic.Publish, spec.Connection.Open, spec.Basic.Nack,
                                 spec.Queue.Declare], ids=lambda c: c.NAME)
def test_known_wire_bytes(cls):
    # a few vectors written out by hand from the spec's grammar
    vectors = {
        "basic.publish": (spec.Basic.Publish(0, "ex", "rk", True, False),
                          b"\x00\x3c\x00\x28\x00\x00\x02ex\x02rk\x01"),
        "connection.open": (spec.Connection.Open("/", "", True),
                            b"\x00\x0a\x00\x28\x01/\x00\x01"),
        "basic.nack": (spec.Basic.Nack(7, False, True),
                       b"\x00\x3c\x00\x78" + struct.pack(">Q", 7) + b"\x02"),
        "queue.declare": (spec.Queue.Declare(0, "q", False, True, False, True, False, {"a": 1}),
                          b"\x00\x32\x00\x0a\x00\x00\x01q\x0a" + encode_table({"a": 1})),
    }
    method, wire = vectors[cls.NAME]
    assert method.encode() == wire
    assert cls.decode(wire, 4, len(wire)) == method


def test_shortstr_too_long_and_bad_integers_are_syntax_errors():
    with pytest.raises(AMQPSyntaxError):
        spec.Basic.Publish(routing_key="x" * 256).encode()
    with pytest.raises(AMQPSyntaxError):
        spec.Basic.Qos(prefetch_count=70000).encode()
    with pytest.raises(AMQPSyntaxError):
        BasicProperties(message_id="é" * 200).encode()
    with pytest.raises(AMQPSyntaxError):
        BasicProperties(priority=256).encode()
    with pytest.raises(AMQPSyntaxError):
        BasicProperties(timestamp=-1).encode()


def test_bytes_accepted_for_string_fields():
    m = spec.Basic.Publish(exchange=b"ex", routing_key=bytearray(b"rk"))
    assert spec.Basic.Publish.decode(m.encode(), 4, len(m.encode())).exchange == "ex"
    m = spec.Connection.SecureOk("text")  # str for a longstr is UTF-8 encoded
    assert spec.Connection.SecureOk.decode(m.encode(), 4, len(m.encode())).response == b"text"
    p = BasicProperties(content_type=b"text/plain")
    assert decode_properties(p.encode(), 0, len(p.encode())).content_type == "text/plain"


# ------------------------------------------------------------------------ bit packing

def _synthetic(fields):
    return codegen.build_method("test", 200, "bits", 10, fields)


def test_more_than_eight_consecutive_bits():
    """Spec §4.2.5.2: consecutive bits share octets from the low bit; a 9th starts a new one."""
    fields = [("before", "octet")] + [(f"b{i}", "bit") for i in range(10)] + [("after", "short")]
    cls = _synthetic(fields)
    values = dict(before=7, after=513, **{f"b{i}": i in (0, 3, 7, 8) for i in range(10)})
    m = cls(**values)
    wire = m.encode()
    assert wire == b"\x00\xc8\x00\x0a" + bytes([7, 0b10001001, 0b00000001]) + b"\x02\x01"
    assert cls.decode(wire, 4, len(wire)) == m


@SETTINGS
@given(st.integers(1, 20), st.data())
def test_bit_runs_of_any_length_round_trip(nbits, data):
    fields = [(f"b{i}", "bit") for i in range(nbits)] + [("s", "shortstr")] + [("z", "bit")]
    cls = _synthetic(fields)
    m = data.draw(method_of(cls))
    wire = m.encode()
    assert len(wire) == 4 + (nbits + 7) // 8 + 1 + len(m.s.encode()) + 1
    assert cls.decode(wire, 4, len(wire)) == m


# ------------------------------------------------------------------------ properties

def test_every_property_combination_round_trips():
    """All 2^14 presence combinations, exhaustively, with fixed sample values."""
    sample = {"shortstr": "vé", "octet": 2, "timestamp": 1_700_000_000,
              "table": {"k": "v", "n": -5}}
    names = [n for n, _ in PROPERTIES]
    types = dict(PROPERTIES)
    for mask in range(1 << 14):
        kw = {n: sample[types[n]] for i, n in enumerate(names) if mask >> i & 1}
        p = BasicProperties(**kw)
        raw = p.encode()
        flags = struct.unpack(">H", raw[:2])[0]
        assert flags & 1 == 0 and flags & 2 == 0
        assert bin(flags).count("1") == len(kw)
        assert decode_properties(raw, 0, len(raw)) == p


@SETTINGS
@given(properties())
def test_random_properties_round_trip(p):
    raw = p.encode()
    q = decode_properties(raw, 0, len(raw))
    assert q == p and hash(q) == hash(p)
    assert BasicProperties(**p.as_dict()) == p
    assert BasicProperties(*p.__reduce__()[1]) == p
    assert "BasicProperties(" in repr(p)


def test_per_flags_decoders_match_the_general_decoder(monkeypatch):
    """The decoders generated per property-flags word decode what the general one does:
    no property, each one alone, each pair, and all 14 (pure Python: with the compiled fast
    paths in use every word gets the general decoder)."""
    monkeypatch.setattr(properties_module, "_DECODERS", {})
    monkeypatch.setattr(properties_module, "SPEEDUPS", None)
    sample = {"shortstr": "vé", "octet": 2, "timestamp": 1_700_000_000,
              "table": {"k": "v", "n": -5, "f": 1.5}}
    names = [n for n, _ in PROPERTIES]
    types = dict(PROPERTIES)
    subsets = [(), tuple(names)] + [(n,) for n in names] + list(itertools.combinations(names, 2))
    for subset in subsets:
        p = BasicProperties(**{n: sample[types[n]] for n in subset})
        raw = b"xy" + p.encode() + b"z"  # decoded at an offset, up to an end
        flags = struct.unpack(">H", raw[2:4])[0]
        dec = properties_decoder(flags)
        assert dec is not decode_properties and properties_module._DECODERS[flags] is dec
        assert dec(raw, 2, len(raw) - 1) == p == decode_properties(raw, 2, len(raw) - 1)
    assert len(properties_module._DECODERS) == len(subsets)


def test_per_flags_decoders_are_bounded(monkeypatch):
    """Continuation words use the general decoder; so does every word once the bound on
    generated decoders is reached (a peer cycling through flags cannot grow it)."""
    monkeypatch.setattr(properties_module, "_DECODERS", {})
    monkeypatch.setattr(properties_module, "SPEEDUPS", None)
    monkeypatch.setattr(properties_module, "_MAX_DECODERS", 2)
    assert properties_decoder(0x1001) is decode_properties
    assert properties_decoder(0x8000) is not decode_properties
    assert properties_decoder(0x4000) is decode_properties  # bound reached
    assert sorted(properties_module._DECODERS) == [0x1001, 0x8000]
    monkeypatch.setattr(properties_module, "SPEEDUPS", object())  # compiled: general only
    assert properties_decoder(0x1000) is decode_properties
    monkeypatch.setattr(properties_module, "_MAX_DECODERS", 4)
    assert properties_decoder(0x2000) is decode_properties
    # the decoder uses them for content headers as well
    wire = encode_message(1, spec.Basic.Publish(), BasicProperties(delivery_mode=2), b"b")
    assert Decoder().feed(wire)[0].properties == BasicProperties(delivery_mode=2)


def test_property_flag_bits_match_the_spec():
    # content_type is bit 15, cluster_id bit 2 (0-9-1 §basic property table)
    assert BasicProperties(content_type="a").encode()[:2] == b"\x80\x00"
    assert BasicProperties(delivery_mode=2).encode() == b"\x10\x00\x02"
    assert BasicProperties(cluster_id="c").encode()[:2] == b"\x00\x04"
    assert BasicProperties().encode() == b"\x00\x00"
    assert BasicProperties() != 3 and BasicProperties().__eq__(3) is NotImplemented


def test_property_flags_continuation_word_is_accepted_when_empty():
    raw = b"\x10\x01\x00\x00\x02"  # delivery-mode + continuation bit, empty second word
    assert decode_properties(raw, 0, len(raw)) == BasicProperties(delivery_mode=2)


# ------------------------------------------------------------------------ field tables

EVERY_TAG = [
    # (Typed or plain value, expected wire after the key, decoded value)
    (Typed("t", True), b"t\x01", True),
    (Typed("b", -5), b"b\xfb", -5),
    (Typed("B", 250), b"B\xfa", 250),
    (Typed("s", -2), b"s\xff\xfe", -2),              # int16, as RabbitMQ
    (Typed("u", 65000), b"u\xfd\xe8", 65000),
    (Typed("I", -7), b"I\xff\xff\xff\xf9", -7),
    (Typed("i", 4_000_000_000), b"i" + struct.pack(">I", 4_000_000_000), 4_000_000_000),
    (Typed("l", -(2**40)), b"l" + struct.pack(">q", -(2**40)), -(2**40)),
    (Typed("L", 2**62), b"L" + struct.pack(">q", 2**62), 2**62),
    (Typed("f", 1.5), b"f" + struct.pack(">f", 1.5), 1.5),
    (Typed("d", -0.25), b"d" + struct.pack(">d", -0.25), -0.25),
    (Typed("D", Decimal("-12.345")), b"D\x03" + struct.pack(">i", -12345), Decimal("-12.345")),
    (Typed("S", "héllo"), b"S\x00\x00\x00\x06h\xc3\xa9llo", "héllo"),
    (Typed("A", [1, "a"]), b"A\x00\x00\x00\x0bI\x00\x00\x00\x01S\x00\x00\x00\x01a", [1, "a"]),
    (Typed("T", 1_700_000_000), b"T" + struct.pack(">Q", 1_700_000_000),
     dt.datetime.fromtimestamp(1_700_000_000, dt.timezone.utc)),
    (Typed("F", {"x": None}), b"F\x00\x00\x00\x03\x01xV", {"x": None}),
    (Typed("V", None), b"V", None),
    (Typed("x", b"\x00\xff"), b"x\x00\x00\x00\x02\x00\xff", b"\x00\xff"),
    # the default choices for plain Python values
    (True, b"t\x01", True),
    (5, b"I\x00\x00\x00\x05", 5),
    (2**40, b"l" + struct.pack(">q", 2**40), 2**40),
    (0.5, b"d" + struct.pack(">d", 0.5), 0.5),
    ("s", b"S\x00\x00\x00\x01s", "s"),
    (b"b", b"x\x00\x00\x00\x01b", b"b"),
    (None, b"V", None),
    ((1,), b"A\x00\x00\x00\x05I\x00\x00\x00\x01", [1]),
    ({"k": False}, b"F\x00\x00\x00\x04\x01kt\x00", {"k": False}),
    (Decimal("1E+2"), b"D\x00\x00\x00\x00\x64", Decimal(100)),
    (dt.datetime(2020, 1, 1), b"T" + struct.pack(">Q", 1577836800),
     dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)),
]


@pytest.mark.parametrize("value,wire,decoded", EVERY_TAG, ids=lambda v: repr(v)[:30])
def test_field_table_every_tag(value, wire, decoded):
    enc = encode_table({"k": value})
    assert enc == struct.pack(">I", 2 + len(wire)) + b"\x01k" + wire
    table, end = decode_table(enc)
    assert end == len(enc) and table == {"k": decoded}
    assert type(table["k"]) is type(decoded)


def test_field_table_all_tags_in_one_table_and_arrays():
    table = {f"k{i}": v for i, (v, _, _) in enumerate(EVERY_TAG)}
    enc = encode_table(table)
    dec, _ = decode_table(enc)
    assert dec == {f"k{i}": d for i, (_, _, d) in enumerate(EVERY_TAG)}
    arr = [v for v, _, _ in EVERY_TAG]
    dec_arr, end = decode_array(encode_array(arr))
    assert dec_arr == [d for _, _, d in EVERY_TAG]


def test_field_values_that_do_not_fit_are_syntax_errors():
    for bad in (Typed("b", 200), Typed("u", -1), Typed("D", Decimal("NaN")),
                Typed("D", Decimal("1E-300")), Typed("T", -5), 2**70, object(),
                {"x" * 256: 1}):
        with pytest.raises(AMQPSyntaxError):
            encode_table({"k": bad} if not isinstance(bad, dict) else bad)
    with pytest.raises(ValueError):
        Typed("Q", 1)


def test_invalid_utf8_in_long_string_value_decodes_to_bytes_like_pika():
    enc = b"\x00\x00\x00\x09\x01kS\x00\x00\x00\x02\xff\xfe"
    assert decode_table(enc) == ({"k": b"\xff\xfe"}, len(enc))


def test_typed_helpers():
    t = Typed("u", 3)
    assert t == Typed("u", 3) and t != Typed("s", 3) and hash(t) == hash(Typed("u", 3))
    assert repr(t) == "Typed('u', 3)"


def test_string_helpers():
    assert encode_shortstr("ab") == b"\x02ab" and encode_shortstr(b"\xff") == b"\x01\xff"
    with pytest.raises(AMQPSyntaxError):
        encode_shortstr("x" * 256)
    assert decode_shortstr(b"\x02ab", 0, 3) == ("ab", 3)
    assert encode_longstr("é") == b"\x00\x00\x00\x02\xc3\xa9"
    assert decode_longstr(b"\x00\x00\x00\x02\xc3\xa9", 0, 6) == (b"\xc3\xa9", 6)


@SETTINGS
@given(field_tables())
def test_random_field_tables_round_trip(table):
    enc = encode_table(table)
    dec, end = decode_table(enc)
    assert end == len(enc)
    assert dec == _expected(table)


def _expected(v):
    """What decoding returns for a value we encoded: tuples become lists."""
    if isinstance(v, dict):
        return {k: _expected(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_expected(x) for x in v]
    return v


def test_deep_nesting_limit():
    from spark_amqp.protocol.values import MAX_DEPTH
    t: dict = {}
    for _ in range(MAX_DEPTH + 2):
        t = {"n": t}
    with pytest.raises(AMQPSyntaxError):
        encode_table(t)
    a: list = []
    for _ in range(MAX_DEPTH + 2):
        a = [a]
    with pytest.raises(AMQPSyntaxError):
        encode_table({"a": a})


# ------------------------------------------------------------------------ body split

@pytest.mark.parametrize("frame_max", [4096, 5000, 131072])
def test_body_split_at_frame_max(frame_max):
    chunk = frame_max - 8
    for size in (0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 2 * chunk + 1, 5 * chunk + 7):
        body = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
        data = encode_message(3, spec.Basic.Publish(), None, body, frame_max=frame_max)
        # walk the frames: every frame fits frame_max, bodies are full chunks but the last
        pos, sizes = 0, []
        while pos < len(data):
            ftype, ch, n = struct.unpack_from(">BHI", data, pos)
            assert n + 8 <= frame_max and ch == 3 and data[pos + 7 + n] == 0xCE
            if ftype == 3:
                sizes.append(n)
            pos += 8 + n
        expected = [chunk] * (size // chunk) + ([size % chunk] if size % chunk else [])
        assert sizes == expected
        [ev] = Decoder(frame_max=frame_max).feed(data)
        assert ev.body == body and ev.properties == BasicProperties()


def test_unlimited_frame_max_sends_one_body_frame():
    data = encode_message(1, spec.Basic.Publish(), None, b"z" * 300_000, frame_max=0)
    assert data.count(b"\x03\x00\x01") == 1
    with pytest.raises(ValueError):
        encode_message(1, spec.Basic.Publish(), None, b"z", frame_max=8)


# ------------------------------------------------------------------------ chunked decoding

frame_items = st.one_of(
    st.tuples(st.just("method"), channels, methods.filter(lambda m: not m.has_content)),
    st.tuples(st.just("content"), channels,
              st.sampled_from([spec.Basic.Publish, spec.Basic.Deliver, spec.Basic.GetOk,
                               spec.Basic.Return]).flatmap(method_of),
              properties(), st.binary(max_size=9000)),
    st.tuples(st.just("heartbeat")),
)


def _encode_items(items):
    parts, expected = [], []
    for item in items:
        if item[0] == "method":
            parts.append(encode_method(item[1], item[2]))
            expected.append(MethodFrame(item[1], item[2]))
        elif item[0] == "content":
            _, ch, m, p, body = item
            parts.append(encode_message(ch, m, p, body, frame_max=4096))
            expected.append(ContentMessage(ch, m, p, body))
        else:
            parts.append(encode_heartbeat())
            expected.append(Heartbeat())
    return b"".join(parts), expected


@SETTINGS
@given(st.lists(frame_items, min_size=1, max_size=8), st.data())
def test_decoder_gives_the_same_events_for_any_chunking(items, data):
    wire, expected = _encode_items(items)
    assert Decoder().feed(wire) == expected
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=30)))
    dec = Decoder()
    events = []
    prev = 0
    for cut in cuts + [len(wire)]:
        events += dec.feed(wire[prev:cut])
        prev = cut
    assert events == expected
    assert dec.buffered == 0 and dec.pending_channels() == []


def test_decoder_one_byte_at_a_time_and_megabytes():
    wire, expected = _encode_items([
        ("content", 1, spec.Basic.Publish(0, "e", "r"), BasicProperties(headers={"a": [1, 2]}),
         b"m" * 3_000_000),
        ("method", 2, spec.Basic.Ack(5, True)),
        ("heartbeat",),
    ])
    assert Decoder().feed(wire) == expected
    dec = Decoder()
    out = []
    small = wire[:20000] + wire[-200:]
    for i in range(len(small)):
        out += dec.feed(small[i:i + 1])
    # feed the rest in big slices
    dec = Decoder()
    out = []
    for i in range(0, len(wire), 1 << 20):
        out += dec.feed(wire[i:i + (1 << 20)])
    assert out == expected


def test_interleaved_channels_assemble_separately():
    a = encode_message(1, spec.Basic.Deliver("a", 1), None, b"A" * 10000, frame_max=4096)
    b = encode_message(2, spec.Basic.Deliver("b", 2), None, b"B" * 5000, frame_max=4096)
    fa, fb = _frames(a), _frames(b)
    mixed = b"".join(x for pair in itertools.zip_longest(fa, fb, fillvalue=b"") for x in pair)
    evs = Decoder().feed(mixed)
    assert {e.channel: e.body for e in evs} == {1: b"A" * 10000, 2: b"B" * 5000}


def _frames(data):
    out, pos = [], 0
    while pos < len(data):
        n = struct.unpack_from(">I", data, pos + 3)[0]
        out.append(data[pos:pos + 8 + n])
        pos += 8 + n
    return out


def test_misc_frame_helpers():
    assert encode_frames([(1, spec.Basic.Ack(1)), (2, spec.Basic.Ack(2))]) == (
        encode_method(1, spec.Basic.Ack(1)) + encode_method(2, spec.Basic.Ack(2)))
    h = parse_protocol_header(b"AMQP\x00\x00\x09\x01")
    assert h.version == "0-9-1" and h.is_supported and "0-9-1" in repr(h)
    assert ProtocolHeader(b"AMQP\x01\x01\x08\x00").version == "0-8"
    assert ProtocolHeader(b"AMQP\x01\x01\x09\x01").version == "0-8"
    assert ProtocolHeader(b"AMQP\x00\x01\x00\x00").version == "1.0"
    assert ProtocolHeader(b"AMQP\x00\x00\x09\x02").version == "unknown"
    assert ProtocolHeader(b"GET / HT").version is None
    assert not ProtocolHeader(b"GET / HT").is_supported
    assert repr(Heartbeat()) == "Heartbeat()" and Heartbeat() != 1
    m = MethodFrame(1, spec.Basic.Ack())
    assert "basic.ack" in repr(m) and m != 1
    c = ContentMessage(1, spec.Basic.Publish(), BasicProperties(), b"x" * 40)
    assert "..." in repr(c) and c != 1
    d = Decoder()
    d.set_frame_max(4096)
    assert d.frame_max == 4096
