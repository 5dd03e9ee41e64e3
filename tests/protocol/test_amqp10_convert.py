"""0-9-1 <-> AMQP 1.0 conversions as RabbitMQ does them (spark_amqp.protocol.amqp10.convert).

RabbitMQ 3.10: byte for byte against RabbitMQ 3.10.8, from bytes recorded on it
(data/rabbitmq-3.10.8-stream-conversions.json, made by tests/broker/stream_capture.py; the live
check is tests/broker/test_stream_conversions.py). RabbitMQ 4.3: the behaviour of mc_amqpl.erl
and mc_amqp.erl at v4.3.5, field by field."""

from __future__ import annotations

import json
import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_amqp.protocol import BasicProperties
from spark_amqp.protocol.properties import decode_properties
from spark_amqp.protocol.amqp10 import (Header, Message, Properties, Symbol, Timestamp, UByte, UInt, ULong,
                                        encode_message)
from spark_amqp.protocol.amqp10 import message as message_module
from spark_amqp.protocol.amqp10.convert import (ConversionError, from_amqp091_v43, from_amqp091_v310,
                                                to_amqp091_v43, to_amqp091_v310)
from spark_amqp.protocol.amqp10.props091 import offset_header_split, parse_properties
from spark_amqp.protocol.values import Typed

RECORDED = json.loads((Path(__file__).parent / "data" / "rabbitmq-3.10.8-stream-conversions.json").read_text())


def _body(spec):
    if isinstance(spec, dict):
        return bytes.fromhex(spec["repeat"]) * spec["times"]
    return bytes.fromhex(spec)


def _delivered(props: bytes, offset: int) -> bytes:
    before, after = offset_header_split(props)
    return before + struct.pack(">q", offset) + after


@pytest.mark.parametrize("case", RECORDED["cases"], ids=lambda c: c["name"])
def test_v310_stores_what_rabbitmq_3_10_8_stores(case):
    body = _body(case["body"])
    assert case["stored_ends_with_body"]
    want = bytes.fromhex(case["stored_prefix"]) + body
    got = from_amqp091_v310(case["exchange"], case["routing_key"], bytes.fromhex(case["props"]), body)
    assert got.hex() == want.hex()


@pytest.mark.parametrize("case", RECORDED["cases"], ids=lambda c: c["name"])
def test_v310_delivers_what_rabbitmq_3_10_8_delivers(case):
    body = _body(case["body"])
    stored = bytes.fromhex(case["stored_prefix"]) + body
    ex, rk, props, got_body = to_amqp091_v310(stored, case["queue"])
    assert (ex, rk) == (case["delivered_exchange"], case["delivered_routing_key"])
    assert _delivered(props, case["offset"]).hex() == case["delivered_props"]
    assert len(got_body) == case["delivered_body_len"] and got_body == body


def test_v310_refuses_what_rabbitmq_3_10_cannot_convert():
    # a decimal header: RabbitMQ 3.10.8 closes the publisher with 541 (checked with the raw client)
    raw = BasicProperties(headers={"d": Typed("D", __import__("decimal").Decimal("1.5"))}).encode()
    with pytest.raises(ConversionError, match="decimal"):
        from_amqp091_v310("", "q", raw, b"x")
    # stored messages 3.10 cannot read back (its 0-9-1 consumer is closed with 541)
    for m in (Message(b"x", header=Header(durable=True)), Message({"a": 1}, body_type="value"),
              Message(b"x", application_properties={"u": ULong(5)}),
              Message(b"x", application_properties={"s": Symbol("s")}), Message(b"x", footer={"x-f": 1})):
        with pytest.raises(ConversionError):
            to_amqp091_v310(encode_message(m), "q")
    with pytest.raises(ConversionError):
        to_amqp091_v310(b"not amqp", "q")


def test_v310_messages_of_the_stream_protocol():
    """What the stream plugin's publishers write (no x-exchange / x-routing-key): the default
    exchange and the queue's name, as RabbitMQ 3.10's binary_to_msg/2 simulates."""
    m = Message(b"payload", properties=Properties(message_id=uuid.UUID(int=1), correlation_id=ULong(7),
                                                  creation_time=Timestamp(1700000000999),
                                                  content_type="application/json"),
                application_properties={"k": "v", "i": UInt(4), "b": b"\x00"})
    ex, rk, props, body = to_amqp091_v310(encode_message(m), "stream-q")
    assert (ex, rk, body) == ("", "stream-q", b"payload")
    p = decode_properties(props, 0, len(props))
    assert p.message_id == "00000000-0000-0000-0000-000000000001" and p.correlation_id == "7"
    assert p.headers == {"b": b"\x00", "i": 4, "k": "v", "x-correlation-id-type": "ulong",
                         "x-message-id-type": "uuid"}
    assert list(p.headers) == sorted(p.headers)
    assert p.timestamp == 1700000000 and p.content_type == "application/json"


# ------------------------------------------------------------------ RabbitMQ 4.3

def _v43(props: BasicProperties, body: bytes = b"b", exchange: str = "ex", rk: str = "rk") -> Message:
    return message_module.decode_message(from_amqp091_v43(exchange, rk, props.encode(), body))


def test_v43_header_and_annotations():
    m = _v43(BasicProperties(delivery_mode=2, priority=4, expiration="1500", type="t",
                             headers={"x-a": 1, "CC": ["c1"], "plain": "v", "arr": [1], "x-exchange": "no"}))
    assert m.header == Header(durable=True, priority=UByte(4), ttl=UInt(1500), first_acquirer=True,
                              delivery_count=UInt(0))
    assert list(m.message_annotations) == ["x-routing-key", "x-exchange", "x-basic-type", "x-a", "x-cc"]
    assert m.message_annotations["x-exchange"] == "ex" and m.message_annotations["x-cc"] == ["c1"]
    assert m.application_properties == {"plain": "v"}
    m = _v43(BasicProperties())
    assert m.header == Header(durable=False, first_acquirer=True, delivery_count=UInt(0))
    assert m.properties is None and m.application_properties is None


def test_v43_properties():
    u = uuid.uuid4()
    m = _v43(BasicProperties(message_id=f"urn:uuid:{u}", correlation_id="c", reply_to="amq.rabbitmq.reply-to/x y",
                             app_id="app", user_id="guest", timestamp=10, content_type="ct",
                             headers={"bin": Typed("S", b"\xff"), "nul": "a\x00b"}))
    p = m.properties
    assert p.message_id == u and type(p.message_id) is uuid.UUID and p.correlation_id == "c"
    assert p.reply_to == "/queues/amq.rabbitmq.reply-to%2Fx%20y" and p.group_id == "app"
    assert p.user_id == b"guest" and p.creation_time == 10000 and p.content_type == "ct"
    assert m.application_properties == {"bin": b"\xff", "nul": b"a\x00b"}   # not UTF-8 without NUL: binary


def test_v43_round_trip_keeps_what_0_9_1_can_say():
    props = BasicProperties(content_type="ct", content_encoding="ce", delivery_mode=2, priority=1,
                            correlation_id="urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8", reply_to="rq",
                            expiration="100", message_id="m", timestamp=1700000000, type="ty", user_id="guest",
                            app_id="ap", headers={"h": "v", "x-h": 5, "n": Typed("b", -1), "CC": ["k1", "k2"]})
    raw = from_amqp091_v43("e", "k", props.encode(), b"body")
    ex, rk, back, body = to_amqp091_v43(raw, "q")
    assert (ex, rk, body) == ("e", "k", b"body")
    p = decode_properties(back, 0, len(back))
    want = props.as_dict()
    want["headers"] = {"CC": ["k1", "k2"], "h": "v", "n": -1, "x-h": 5}
    assert p.as_dict() == want
    assert list(p.headers) == sorted(p.headers)


def test_v43_reads_other_bodies_as_amqp_1_0():
    m = Message({"k": [1, 2]}, body_type="value", properties=Properties(group_id="g"))
    raw = encode_message(m)
    ex, rk, props, body = to_amqp091_v43(raw, "q")
    assert (ex, rk) == ("", "q")
    p = decode_properties(props, 0, len(props))
    assert p.type == "amqp-1.0" and p.app_id == "g"
    assert message_module.decode_message(body).body == {"k": [1, 2]}
    # and a 0-9-1 body of type amqp-1.0 is stored as its sections again
    back = message_module.decode_message(from_amqp091_v43("", "q", props, body))
    assert back.body == {"k": [1, 2]} and back.body_type == "value"


def test_v43_refuses_a_decimal_header():
    raw = BasicProperties(headers={"d": Typed("D", __import__("decimal").Decimal("1.5"))}).encode()
    with pytest.raises(ConversionError):
        from_amqp091_v43("", "q", raw, b"x")


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=10).filter(lambda k: not k.startswith("x-") and k != "CC"),
                       st.one_of(st.text(max_size=20), st.integers(-2 ** 31, 2 ** 31 - 1), st.booleans(),
                                 st.floats(allow_nan=False)), max_size=6),
       st.binary(max_size=300))
def test_both_versions_round_trip_plain_headers(headers, body):
    props = BasicProperties(headers=headers or None, message_id="id")
    for there, back in ((from_amqp091_v310, to_amqp091_v310), (from_amqp091_v43, to_amqp091_v43)):
        _, _, praw, b = back(there("", "q", props.encode(), body), "q")
        p = decode_properties(praw, 0, len(praw))
        assert b == body and p.message_id == "id"
        assert (p.headers or {}) == headers


# ------------------------------------------------------------------ the delivery's offset header

def test_offset_header_goes_in_sorted_place_and_replaces():
    raw = BasicProperties(headers={"a": 1, "x-stream-offset": 7, "zz": "z"}).encode()
    got = _delivered(raw, 42)
    p = decode_properties(got, 0, len(got))
    assert list(p.headers) == ["a", "x-stream-offset", "zz"] and p.headers["x-stream-offset"] == 42
    got = _delivered(BasicProperties(content_type="c", priority=1).encode(), 3)
    p = decode_properties(got, 0, len(got))
    assert p.headers == {"x-stream-offset": 3} and p.content_type == "c" and p.priority == 1
    assert parse_properties(got)["headers"] == [(b"x-stream-offset", "l", 3)]
