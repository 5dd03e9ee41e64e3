"""Smaller codec behaviours: typed errors, encode error messages, the spec table loader."""

from __future__ import annotations

import datetime as dt
import pickle
import struct
from decimal import Decimal

import pytest

from spark_amqp.protocol import (AMQPError, BasicProperties, Decoder, Heartbeat, Typed,
                                 encode_message, encode_method, encode_table, spec)
from spark_amqp.protocol.errors import (ERROR_CLASSES, AMQPSyntaxError, ChannelError,
                                        ConnectionError_, NotFound, error_for_code)
from spark_amqp.protocol.values import (_decode_value, decode_array, decode_table, hash_key,
                                        to_bytes)


# ------------------------------------------------------------------------------ errors

@pytest.mark.parametrize("code", sorted(ERROR_CLASSES))
def test_every_error_class_pickles_and_names_its_level(code):
    err = error_for_code(code, "text", 50, 10)
    assert err.reply_code == code and type(err) is ERROR_CLASSES[code]
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is type(err) and again.reply_text == "text"
    assert (again.class_id, again.method_id) == (50, 10)
    assert err.channel_level == (not err.connection_level)
    scope = "connection" if err.connection_level else "channel"
    assert str(err) == f"{code} {err.name} [{scope} exception]: text (class 50, method 10)"


def test_unknown_reply_codes():
    e = error_for_code(599)
    assert isinstance(e, ConnectionError_) and e.reply_code == 599 and "599" in e.reply_text
    e = error_for_code(418, "teapot")
    assert isinstance(e, ChannelError) and e.reply_code == 418
    e = error_for_code(418, "x", connection_level=True)
    assert isinstance(e, ConnectionError_)
    assert str(NotFound()) == "404 NOT_FOUND [channel exception]: NOT_FOUND"


# ------------------------------------------------------------------------------ encode errors

@pytest.mark.parametrize("kw,needle", [
    ({"content_type": 5}, "content_type must be str"),
    ({"content_type": "x" * 300}, "content_type is longer than 255"),
    ({"priority": 300}, "priority=300 is not an octet"),
    ({"priority": "high"}, "priority='high' is not an octet"),
    ({"timestamp": -1}, "timestamp=-1 is not an unsigned 64-bit"),
    ({"timestamp": 2**64}, "not an unsigned 64-bit"),
    ({"headers": {"k" * 300: 1}}, "field name longer than 255"),
    ({"headers": {5: 1}}, "keys must be str"),
    ({"headers": {"k": object()}}, "cannot encode a object"),
    ({"headers": [1, 2]}, "must be a dict"),
    # a valid property of each type before the bad one
    ({"content_type": "ok", "headers": {"a": 1}, "delivery_mode": 2, "timestamp": 5,
      "priority": 256}, "priority=256"),
    ({"timestamp": 5, "cluster_id": "c" * 256}, "cluster_id is longer than 255"),
    ({"headers": {"a": 1, "b" * 256: 2}}, "field name longer than 255"),
])
def test_property_encode_errors_name_the_property(kw, needle):
    with pytest.raises(AMQPSyntaxError) as info:
        BasicProperties(**kw).encode()
    assert needle in str(info.value)


def test_property_bytes_values_are_accepted():
    p = BasicProperties(content_type=bytearray(b"a/b"), headers={b"k": b"v"})
    raw = p.encode()
    from spark_amqp.protocol.properties import decode_properties
    q = decode_properties(raw, 0, len(raw))
    assert q.content_type == "a/b" and q.headers == {"k": b"v"}
    assert BasicProperties(headers={}).encode() == b"\x20\x00\x00\x00\x00\x00"


@pytest.mark.parametrize("method,needle", [
    (spec.Basic.Publish(routing_key="r" * 256), "routing_key: short string longer than 255"),
    (spec.Basic.Publish(exchange=7), "exchange must be str or bytes"),
    (spec.Basic.Qos(prefetch_count=-1), "prefetch_count=-1 does not fit an AMQP short"),
    (spec.Connection.SecureOk(response=3.5), "response must be str or bytes"),
    (spec.Queue.Declare(arguments={"k": object()}), "cannot encode a object"),
    (spec.Queue.Declare(arguments="nope"), "must be a dict"),
])
def test_method_encode_errors_name_the_field(method, needle):
    with pytest.raises(AMQPSyntaxError) as info:
        method.encode()
    assert needle in str(info.value)
    with pytest.raises(AMQPSyntaxError):
        encode_method(1, method)
    with pytest.raises(AMQPSyntaxError) as info:  # the one-join form of encode_message
        method.message_bytes(1, b"", b"", b"", b"")
    assert needle in str(info.value)


def test_octet_property_out_of_range_is_a_syntax_error():
    for v in (-1, 256, 2.0, "2"):
        with pytest.raises(AMQPSyntaxError):
            BasicProperties(delivery_mode=v).encode()
    assert BasicProperties(delivery_mode=True).encode() == b"\x10\x00\x01"


def test_channel_out_of_range_is_a_syntax_error():
    with pytest.raises(AMQPSyntaxError) as info:
        encode_method(70000, spec.Basic.Ack(1))
    assert "basic.ack: cannot encode" in str(info.value)


def test_to_bytes_and_hash_key():
    assert to_bytes("é", "x") == b"\xc3\xa9" and to_bytes(memoryview(b"a"), "x") == b"a"
    with pytest.raises(AMQPSyntaxError):
        to_bytes(None, "field")
    assert hash_key({"a": 1}) == ("container", 1) and hash_key(5) == hash(5)
    class Unhashable:
        __hash__ = None
    assert hash_key(Unhashable()) == "Unhashable"


# ------------------------------------------------------------------------------ values

class MyInt(int):
    pass


class MyStr(str):
    pass


class MyDict(dict):
    pass


class MyFloat(float):
    pass


class MyList(list):
    pass


def test_subclassed_values_encode_like_their_base():
    enc = encode_table({"i": MyInt(5), "s": MyStr("x"), "d": MyDict(a=1), "f": MyFloat(0.5),
                        "l": [MyInt(1)], "t": (True,), "b": bytearray(b"z"),
                        "m": memoryview(b"q"), "big": MyInt(2**40), "ls": MyList([1])})
    assert decode_table(enc)[0] == {"i": 5, "s": "x", "d": {"a": 1}, "f": 0.5, "l": [1],
                                    "t": [True], "b": b"z", "m": b"q", "big": 2**40, "ls": [1]}


def test_decode_value_for_arrays_covers_every_tag_path():
    # arrays go through _decode_value for S and I too
    arr = encode_table({"a": ["s", 1, b"\xff", Typed("S", b"\xff\xfe")]})
    assert decode_table(arr)[0] == {"a": ["s", 1, b"\xff", b"\xff\xfe"]}
    for raw in (b"S\x00\x00", b"S\x00\x00\x00\x05ab", b"I\x00"):
        body = raw
        wire = b"A" + struct.pack(">I", len(body)) + body
        with pytest.raises(AMQPError):
            decode_table(struct.pack(">I", 2 + len(wire)) + b"\x01a" + wire)
    assert _decode_value(b"V", 0, 1, 0) == (None, 1)
    with pytest.raises(AMQPError):
        _decode_value(b"", 0, 0, 0)


def test_typed_datetime_and_naive_datetime():
    naive = dt.datetime(2001, 2, 3, 4, 5, 6)
    enc = encode_table({"a": Typed("T", naive), "b": Typed("D", 3), "c": Typed("S", "x")})
    got = decode_table(enc)[0]
    assert got["a"] == naive.replace(tzinfo=dt.timezone.utc)
    assert got["b"] == Decimal(3) and got["c"] == "x"


def test_array_helpers():
    from spark_amqp.protocol.values import encode_array
    assert decode_array(encode_array([1, "a", None]))[0] == [1, "a", None]


# ------------------------------------------------------------------------------ frames

def test_heartbeat_is_hashable_and_shared():
    evs = Decoder().feed(b"\x08\x00\x00\x00\x00\x00\x00\xce" * 2)
    assert evs == [Heartbeat(), Heartbeat()] and hash(evs[0]) == hash(Heartbeat())


def test_empty_body_frames_and_split_header():
    """A body sent as several frames, including an empty one, and a header arriving alone."""
    method = encode_method(1, spec.Basic.Publish())
    props = BasicProperties(priority=1).encode()
    header = struct.pack(">BHIHHQ", 2, 1, 12 + len(props), 60, 0, 4) + props + b"\xce"
    body = [struct.pack(">BHI", 3, 1, len(b)) + b + b"\xce" for b in (b"ab", b"", b"cd")]
    dec = Decoder()
    assert dec.feed(method) == [] and dec.pending_channels() == [1]
    assert dec.feed(header) == []
    assert dec.feed(body[0] + body[1]) == []
    [ev] = dec.feed(body[2])
    assert ev.body == b"abcd" and ev.properties.priority == 1
    # zero-length content announced in a separately arriving header
    dec = Decoder()
    dec.feed(method)
    empty = struct.pack(">BHIHHQ", 2, 1, 14, 60, 0, 0) + b"\x00\x00\xce"
    [ev] = dec.feed(empty)
    assert ev.body == b""


def test_content_fast_path_with_empty_body_and_partial_body():
    data = encode_message(1, spec.Basic.Publish(), None, b"")
    [ev] = Decoder().feed(data)
    assert ev.body == b""
    data = encode_message(1, spec.Basic.Publish(), None, b"x" * 100)
    dec = Decoder()
    assert dec.feed(data[:-10]) == []  # method + header decoded, body incomplete
    [ev] = dec.feed(data[-10:])
    assert ev.body == b"x" * 100


def test_decoder_accepts_bytearray_and_memoryview():
    data = encode_method(1, spec.Basic.Ack(3))
    assert Decoder().feed(bytearray(data))[0].method.delivery_tag == 3
    assert Decoder().feed(memoryview(data))[0].method.delivery_tag == 3
    dec = Decoder()
    assert dec.feed(memoryview(data)[:3]) == []
    assert dec.feed(bytearray(data[3:]))[0].method.delivery_tag == 3


# ------------------------------------------------------------------------------ spec table

def test_spec_table_parser_skips_blank_lines():
    from spark_amqp.protocol import codegen

    src = codegen.read_table()
    rows = codegen.parse_table(src.replace("\n", "\n\n", 3))
    assert len(rows) == len(spec.METHODS)
    assert codegen.render_methods(src.replace("\n", "\n\n", 3)) == codegen.render_methods(src)
    assert spec.CLASSES["basic"].CLASS_ID == 60 and spec.CLASS_IDS[60] == "basic"
