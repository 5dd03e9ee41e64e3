"""The 0-9-1 <-> AMQP 1.0 conversions of the codec (protocol/amqp10/convert.py) against the live
RabbitMQ 3.10.8: what it stores for 0-9-1 messages published to a stream (read over the stream
protocol by rstream, an independent client) and what it delivers back over 0-9-1, byte for byte.
tests/protocol/test_amqp10_convert.py checks the same against bytes recorded this way."""

from __future__ import annotations

import asyncio
import struct
from urllib.parse import urlparse

import pytest

from spark_amqp.protocol.amqp10.convert import from_amqp091_v310, to_amqp091_v310
from spark_amqp.protocol.amqp10.props091 import offset_header_split
from stream_capture import body_of, capture

pytest.importorskip("rstream")

STREAM_PORT = 5552


def test_conversions_match_rabbitmq_3_10_8(rabbitmq_url):
    u = urlparse(rabbitmq_url)
    rec = asyncio.run(capture(u.port or 5672, STREAM_PORT, u.hostname or "127.0.0.1"))
    for case in rec["cases"]:
        body = body_of(case["body"])
        stored = bytes.fromhex(case["stored_prefix"]) + body
        assert case["stored_ends_with_body"], case["name"]
        ours = from_amqp091_v310(case["exchange"], case["routing_key"], bytes.fromhex(case["props"]), body)
        assert ours.hex() == stored.hex(), case["name"]
        ex, rk, props, got = to_amqp091_v310(stored, case["queue"])
        before, after = offset_header_split(props)
        delivered = before + struct.pack(">q", case["offset"]) + after
        assert (ex, rk, delivered.hex(), len(got)) == (case["delivered_exchange"], case["delivered_routing_key"],
                                                       case["delivered_props"], case["delivered_body_len"]), case["name"]
