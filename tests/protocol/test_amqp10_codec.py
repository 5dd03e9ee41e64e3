"""The AMQP 1.0 type system and message sections (spark_amqp.protocol.amqp10): every encoding
decodes to what was encoded, type included; the compact encodings; malformed input raises
DecodeError; messages encoded here decode with rstream's AMQP 1.0 codec (an independent one,
from Azure's pyamqp) and the other way round."""

from __future__ import annotations

import math
import os
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp10_strategies import VALUES, messages
from spark_amqp.protocol.amqp10 import (Array, Boolean, Char, DecodeError, Described, EncodeError, Float, Header,
                                        Int, Message, Properties, Symbol, Timestamp, UByte, UInt, ULong,
                                        encode_message, encode_value, scan_sections)
from spark_amqp.protocol.amqp10 import message as message_module
from spark_amqp.protocol.amqp10 import types as types_module
from spark_amqp.protocol.amqp10.types import RABBIT_310

PROPS = settings(max_examples=int(os.environ.get("AMQP_FUZZ_EXAMPLES", "300")), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def typed(v):
    """``v`` with every value's Python type spelled out (== alone lets UInt(1) equal 1)."""
    if isinstance(v, Described):
        return ("described", typed(v.descriptor), typed(v.value))
    if isinstance(v, Array):
        return ("array", v.code, [typed(x) for x in v])
    if isinstance(v, list):
        return [typed(x) for x in v]
    if isinstance(v, dict):
        return [(typed(k), typed(x)) for k, x in v.items()]
    if isinstance(v, float) and math.isnan(v):
        return (type(v).__name__, "nan")
    return (type(v).__name__, v)


def typed_message(m: Message):
    return [typed(getattr(m, n)) if not isinstance(getattr(m, n), (Header, Properties))
            else (type(getattr(m, n)).__name__, [typed(x) for x in getattr(m, n).values()])
            for n in Message.__slots__]


@PROPS
@given(VALUES)
def test_values_roundtrip_with_their_types(v):
    for enc in (types_module.RABBIT_4, RABBIT_310):
        raw = enc.encode(v)
        got, end = types_module.decode_value(raw)
        assert end == len(raw)
        if isinstance(v, Array) and v.code is None:
            v = Array(v, got.code, v.descriptor)
        assert typed(_fix_arrays(got)) == typed(_fix_arrays(v))


def _fix_arrays(v):
    """Arrays compare without their element constructor (chosen by the encoder when None)."""
    if isinstance(v, Array):
        return [_fix_arrays(x) for x in v]
    if isinstance(v, Described):
        return Described(_fix_arrays(v.descriptor), _fix_arrays(v.value))
    if isinstance(v, list):
        return [_fix_arrays(x) for x in v]
    if isinstance(v, dict):
        return {k: _fix_arrays(x) for k, x in v.items()}
    return v


@PROPS
@given(messages())
def test_messages_roundtrip(m):
    raw = encode_message(m)
    got = message_module.decode_message(raw)
    assert got == m
    assert typed_message(_fix_msg(got)) == typed_message(_fix_msg(m))
    secs = scan_sections(raw)
    assert secs[0][1] == 0 and secs[-1][3] == len(raw)
    assert [c for c, *_ in secs] == sorted(c for c, *_ in secs)


def _fix_msg(m: Message) -> Message:
    m2 = Message(_fix_arrays(m.body), body_type=m.body_type, header=m.header,
                 delivery_annotations=_fix_arrays(m.delivery_annotations),
                 message_annotations=_fix_arrays(m.message_annotations), properties=m.properties,
                 application_properties=m.application_properties, footer=_fix_arrays(m.footer))
    return m2


# ------------------------------------------------------------------ the encodings, byte by byte

@pytest.mark.parametrize("raw, want", [
    (b"\x40", None), (b"\x41", True), (b"\x42", False), (b"\x56\x01", True), (b"\x56\x00", False),
    (b"\x43", UInt(0)), (b"\x52\x07", UInt(7)), (b"\x70\x00\x01\x00\x00", UInt(65536)),
    (b"\x44", ULong(0)), (b"\x53\xff", ULong(255)), (b"\x80" + (2 ** 64 - 1).to_bytes(8, "big"), ULong(2 ** 64 - 1)),
    (b"\x54\xfe", Int(-2)), (b"\x71\xff\xff\xff\xfe", Int(-2)), (b"\x55\x80", -128),
    (b"\x81\xff\xff\xff\xff\xff\xff\xff\xff", -1), (b"\x50\xc8", UByte(200)),
    (b"\x72\x3f\xc0\x00\x00", Float(1.5)), (b"\x82\x3f\xf8\x00\x00\x00\x00\x00\x00", 1.5),
    (b"\x83\x00\x00\x00\x00\x00\x00\x00\x7b", Timestamp(123)), (b"\x73\x00\x01\xf6\x00", Char("\U0001f600")),
    (b"\xa0\x02ab", b"ab"), (b"\xb0\x00\x00\x00\x02ab", b"ab"), (b"\xa1\x02\xc3\xa9", "é"),
    (b"\xb1\x00\x00\x00\x01a", "a"), (b"\xa3\x03abc", Symbol("abc")), (b"\xb3\x00\x00\x00\x01a", Symbol("a")),
    (b"\x45", []), (b"\xc0\x03\x02\x41\x42", [True, False]), (b"\xd0\x00\x00\x00\x05\x00\x00\x00\x01\x40", [None]),
    (b"\xc1\x05\x02\xa1\x01k\x41", {"k": True}), (b"\xd1\x00\x00\x00\x04\x00\x00\x00\x00", {}),
    (b"\xe0\x04\x02\x50\x01\x02", Array([UByte(1), UByte(2)], 0x50)),
    (b"\xf0\x00\x00\x00\x07\x00\x00\x00\x02\xa1\x00\x00", Array(["", ""], 0xa1)),
    (b"\x00\x53\x75\xa0\x00", Described(ULong(0x75), b"")),
    (b"\x98" + bytes(range(16)), uuid.UUID(bytes=bytes(range(16)))),
])
def test_every_constructor_decodes(raw, want):
    from spark_amqp.protocol.amqp10 import decode_value
    for dec in (types_module.decode_value, decode_value):
        got, end = dec(raw)
        assert end == len(raw)
        assert got == want and type(got) is type(want)


def test_encodings_are_rabbitmqs():
    """The forms RabbitMQ's amqp10_binary_generator picks (4.x; 3.10: the 1-byte lengths below 255)."""
    assert encode_value(UInt(0)) == b"\x43" and encode_value(UInt(255)) == b"\x52\xff"
    assert encode_value(UInt(256)) == b"\x70\x00\x00\x01\x00"
    assert encode_value(ULong(0)) == b"\x44" and encode_value(ULong(3)) == b"\x53\x03"
    assert encode_value(Int(-129)) == b"\x71\xff\xff\xff\x7f" and encode_value(Int(-128)) == b"\x54\x80"
    assert encode_value(127) == b"\x55\x7f" and encode_value(128) == b"\x81" + (128).to_bytes(8, "big")
    assert encode_value(Boolean(True)) == b"\x56\x01" and encode_value(True) == b"\x41"
    assert encode_value([]) == b"\x45"
    assert encode_value("x" * 255)[:2] == b"\xa1\xff"
    assert RABBIT_310.encode("x" * 255)[:5] == b"\xb1\x00\x00\x00\xff"
    assert RABBIT_310.encode(Symbol("x" * 255))[:2] == b"\xa3\xff"
    assert encode_value(["x" * 300])[:1] == b"\xd0"
    assert encode_value([None] * 255)[:1] == b"\xd0" and encode_value([None] * 254)[:1] == b"\xc0"


def test_sections_omitted_and_trimmed():
    m = Message(b"x", header=Header(durable=True), properties=Properties(message_id="m"),
                message_annotations={}, application_properties={})
    raw = encode_message(m)
    assert raw == b"\x00\x53\x70\xc0\x02\x01\x41" + b"\x00\x53\x73\xc0\x04\x01\xa1\x01m" + b"\x00\x53\x75\xa0\x01x"
    full = encode_message(m, RABBIT_310, trim=False)
    assert full.startswith(b"\x00\x53\x70\xc0\x06\x05\x41\x40\x40\x40\x40")
    assert encode_message(Message(b"x", header=Header(), properties=Properties())) == b"\x00\x53\x75\xa0\x01x"


def test_symbolic_descriptors_and_any_section_order():
    raw = (encode_value(Described(Symbol("amqp:data:binary"), b"ab"))
           + encode_value(Described(Symbol("amqp:application-properties:map"), {"k": 1})))
    m = message_module.decode_message(raw)
    assert m.body == b"ab" and m.application_properties == {"k": 1}


@pytest.mark.parametrize("raw", [
    b"", b"\x00\x53\x75", b"\x00\x53\x75\xa0\x05ab", b"\x00\x53\x79\xa0\x00", b"\x55\x01",
    b"\x00\x53\x75\x55\x01", b"\x00\x53\x73\xa1\x00\x00\x53\x75\xa0\x00",
    b"\x00\x53\x75\xa0\x00\x00\x53\x77\x40", b"\x00\x53\x77\x40\x00\x53\x75\xa0\x00",
    b"\x00\x53\x74\xc1\x03\x01\x40\x00\x53\x75\xa0\x00", b"\x00\x53\x72\xc1\x02\x02\x45\x00\x53\x75\xa0\x00",
    b"\x00\x53\x75\xb0\xff\xff\xff\xff", b"\x00\xa3\x03foo\xa0\x00", b"\x00\x53\x70\xc0\x07\x06\x40\x40\x40\x40\x40\x40",
    b"\x00\x53\x75\x0f", b"\x00\x53\x77\xf0\x00\x00\x00\x05\xff\xff\xff\xff\x40", b"\x00\x53\x77\x56\x02",
    b"\x00\x53\x77" + b"\xc0\x02\x01" * 70 + b"\x40",
])
def test_malformed_messages_raise_decode_error(raw):
    from spark_amqp.protocol.amqp10 import decode_message
    for dec in (message_module.decode_message, decode_message):
        with pytest.raises(DecodeError):
            dec(raw)


def test_encode_errors_name_the_value():
    with pytest.raises(EncodeError, match="long"):
        encode_value(2 ** 64)
    with pytest.raises(EncodeError):
        UByte(256)
    with pytest.raises(EncodeError, match="object"):
        encode_value(object())


def test_data_property_and_message_api():
    m = Message([b"a", b"b"])
    assert m.data == b"ab"
    with pytest.raises(TypeError):
        Message({"v": 1}, body_type="value").data
    assert Timestamp.from_datetime(Timestamp(1700000000123).datetime()) == 1700000000123
    p = Properties(content_type="text/plain", creation_time=Timestamp(5), user_id="u")
    assert encode_message(Message(b"", properties=p)) == encode_message(
        Message(b"", properties=Properties(content_type=Symbol("text/plain"), creation_time=Timestamp(5),
                                           user_id=b"u")))


# ------------------------------------------------------------------ an independent codec: rstream's

pyamqp = pytest.importorskip("rstream._pyamqp._decode")


@PROPS
@given(messages())
def test_rstream_decodes_what_we_encode(m):
    if m.body_type == "data" and not isinstance(m.body, bytes):
        m = Message(m.body[0], header=m.header, properties=m.properties)  # rstream keeps one data section
    m.delivery_annotations = m.footer = None
    for sec in ("message_annotations",):
        setattr(m, sec, None)
    if m.body_type != "data":
        return
    if m.application_properties:   # rstream's codec has no char and no decimals
        m.application_properties = {k: v for k, v in m.application_properties.items()
                                    if not isinstance(v, (Char, bytes)) or type(v) is bytes}
    raw = encode_message(m)
    theirs = pyamqp.decode_payload(memoryview(raw))
    assert theirs.body == [m.body] or theirs.body == m.body or list(theirs.body) == [m.body]
    if m.properties is not None and m.properties.message_id is not None and isinstance(m.properties.message_id, str):
        mid = theirs.properties.message_id
        assert (mid.decode() if isinstance(mid, bytes) else mid) == m.properties.message_id
    if m.application_properties:
        ap = {(k.decode() if isinstance(k, bytes) else k): v for k, v in theirs.application_properties.items()}
        assert set(ap) == set(m.application_properties)


def test_we_decode_what_rstream_encodes():
    from rstream import AMQPMessage
    from rstream._pyamqp.message import Properties as RProps
    raw = bytes(AMQPMessage(body=b"hello", application_properties={"k": "v", "n": 5},
                            properties=RProps(message_id="m1", content_type="text/plain",
                                              creation_time=1700000000123)))
    m = message_module.decode_message(raw)
    assert m.body == b"hello" and m.application_properties == {"k": "v", "n": 5}
    assert m.properties.message_id == "m1" and m.properties.content_type == "text/plain"
    assert m.properties.creation_time == 1700000000123
