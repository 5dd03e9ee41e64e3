"""The cached-method publish encoder (``protocol.publish``) gives the bytes of
``frames.encode_message`` for any properties, body and frame_max, and they decode back."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_strategies import channels, properties, shortstr
from spark_amqp.protocol import BasicProperties, ContentMessage, Decoder, encode_message, spec
from spark_amqp.protocol.errors import AMQPSyntaxError
from spark_amqp.protocol.publish import MAX_CACHED_METHODS, PublishEncoder

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# 0 = no limit; 9 leaves one byte per body frame; the others around common and tiny sizes
frame_maxes = st.sampled_from([0, 9, 10, 4096, 131072]) | st.integers(9, 600)


def reference(channel, body, exchange, routing_key, props, mandatory, frame_max):
    return encode_message(channel, spec.Basic.Publish(0, exchange, routing_key, mandatory, False),
                          props, body, frame_max)


@SETTINGS
@given(channel=channels, frame_max=frame_maxes,
       messages=st.lists(st.tuples(st.binary(max_size=2000), shortstr(), shortstr(),
                                   st.none() | properties(), st.booleans()),
                         min_size=1, max_size=4))
def test_same_bytes_as_encode_message(channel, frame_max, messages):
    enc = PublishEncoder(channel, frame_max)
    for body, exchange, routing_key, props, mandatory in messages * 2:  # second round: cached
        got = enc.encode(body, exchange, routing_key, props, mandatory)
        assert got == reference(channel, body, exchange, routing_key, props, mandatory, frame_max)


@SETTINGS
@given(channel=channels, frame_max=st.sampled_from([0, 4096]) | st.integers(9, 300),
       body=st.binary(max_size=1500), props=st.none() | properties(), mandatory=st.booleans())
def test_decodes_back(channel, frame_max, body, props, mandatory):
    data = PublishEncoder(channel, frame_max).encode(bytearray(body), "ex", "rk", props,
                                                     mandatory)
    # no frame limit on decoding: below 4096 the method and header frames may exceed frame_max
    # (only bodies are split; a negotiated frame_max is at least 4096, spec §4.2.3)
    [ev] = Decoder(frame_max=0).feed(data)
    assert isinstance(ev, ContentMessage)
    assert ev.channel == channel and ev.body == body
    assert ev.method == spec.Basic.Publish(0, "ex", "rk", mandatory, False)
    assert ev.properties == (props if props is not None else BasicProperties())


def test_body_frames_split_at_frame_max():
    data = PublishEncoder(1, 4096).encode(b"x" * 10000, "", "q")
    # method, header, then bodies of 4088 + 4088 + 1824 bytes
    sizes = []
    pos = 0
    while pos < len(data):
        ftype, size = data[pos], int.from_bytes(data[pos + 3:pos + 7], "big")
        assert data[pos + 7 + size] == 0xCE
        sizes.append((ftype, size))
        pos += 8 + size
    assert [t for t, _ in sizes] == [1, 2, 3, 3, 3]
    assert [s for t, s in sizes if t == 3] == [4088, 4088, 1824]


def test_empty_body_has_no_body_frame_and_tiny_frame_max_refuses_a_body():
    enc = PublishEncoder(3, 8)
    assert enc.encode(b"", "", "q") == reference(3, b"", "", "q", None, False, 8)
    with pytest.raises(ValueError):
        enc.encode(b"x", "", "q")


def test_pre_encoded_properties_are_used_as_given():
    class Encoded:
        def encode(self):
            return BasicProperties(delivery_mode=2, message_id="m1").encode()

    got = PublishEncoder(1, 131072).encode(b"body", "", "q", Encoded())
    assert got == reference(1, b"body", "", "q", BasicProperties(delivery_mode=2,
                                                                 message_id="m1"), False, 131072)


def test_too_long_routing_key_raises_syntax_error_and_caches_nothing():
    enc = PublishEncoder(1, 131072)
    with pytest.raises(AMQPSyntaxError):
        enc.encode(b"x", "", "k" * 256)
    assert enc._methods == {}


def test_method_cache_is_bounded():
    enc = PublishEncoder(1, 131072)
    for i in range(MAX_CACHED_METHODS + 5):
        assert enc.encode(b"x", "", f"q{i}") == reference(1, b"x", "", f"q{i}", None, False,
                                                          131072)
    assert len(enc._methods) <= MAX_CACHED_METHODS
