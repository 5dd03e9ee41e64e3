"""Pre-encoded basic properties (protocol/properties.py): what the sink's fast path publishes
must be the bytes ``BasicProperties.encode`` gives, and decode back to the same values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_amqp.protocol import BasicProperties
from spark_amqp.protocol.errors import AMQPSyntaxError
from spark_amqp.protocol.properties import (PROPERTIES, EncodedProperties, decode_properties,
                                            encode_delivery_mode_and_ids, property_flag)

ids = st.text(max_size=60).map(str.encode).filter(lambda b: len(b) <= 255)


def test_property_flags_follow_the_spec_table():
    assert property_flag("content_type") == 0x8000
    assert property_flag("delivery_mode") == 0x1000
    assert property_flag("message_id") == 0x0080
    assert property_flag("cluster_id") == 0x0004
    assert sorted(property_flag(n) for n, _ in PROPERTIES) == [1 << b for b in range(2, 16)]
    with pytest.raises(KeyError, match="no basic property named 'colour'"):
        property_flag("colour")


@given(dm=st.integers(0, 255), message_ids=st.none() | st.lists(ids, max_size=8),
       n=st.integers(0, 8))
def test_same_bytes_as_basic_properties(dm, message_ids, n):
    if message_ids is not None:
        n = len(message_ids)
    out = list(encode_delivery_mode_and_ids(dm, message_ids, n))
    assert len(out) == n and all(isinstance(p, EncodedProperties) for p in out)
    want = [BasicProperties(delivery_mode=dm,
                            message_id=None if message_ids is None else message_ids[i].decode())
            for i in range(n)]
    assert [p.encode() for p in out] == [w.encode() for w in want]
    assert [decode_properties(p.encode(), 0, len(p.encode())) for p in out] == want


def test_values_an_amqp_field_cannot_hold_are_refused():
    with pytest.raises(AMQPSyntaxError, match="over 255 bytes"):
        encode_delivery_mode_and_ids(2, [b"x" * 256], 1)
    with pytest.raises(AMQPSyntaxError, match="not an octet"):
        encode_delivery_mode_and_ids(256, None, 1)
