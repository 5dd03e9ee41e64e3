"""The 0-9-1 <-> AMQP 1.0 conversions of stream messages against RabbitMQ 3.10.8: the codec's
(protocol/amqp10/convert.py) against the live RabbitMQ (what it stores for 0-9-1 messages
published to a stream, read over the stream protocol by rstream, an independent client, and
what it delivers back over 0-9-1, byte for byte), and the embedded broker in its 3.10 mode
against what RabbitMQ 3.10.8 delivered (recorded in tests/protocol/data).
tests/protocol/test_amqp10_convert.py checks the codec against the recorded bytes."""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path
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


RECORDED = json.loads((Path(__file__).parent.parent / "protocol" / "data"
                       / "rabbitmq-3.10.8-stream-conversions.json").read_text())


def test_embedded_310_delivers_what_rabbitmq_3_10_8_delivers(embedded_broker_310):
    """0-9-1 in, 0-9-1 out through a stream: the same properties bytes (sorted headers, types
    converted twice, x-stream-offset in its place), the same offsets."""
    rec = asyncio.run(capture(embedded_broker_310.port, None))
    for got, want in zip(rec["cases"], RECORDED["cases"]):
        assert got["name"] == want["name"]
        assert got["delivered_props"] == want["delivered_props"], got["name"]
        assert got["delivered_offset"] == want["offset"]
        assert got["delivered_body_len"] == want["delivered_body_len"]
        assert got["delivered_exchange"] == want["delivered_exchange"]


def test_embedded_310_stores_what_rabbitmq_3_10_8_stores(embedded_stream_broker):
    """0-9-1 in, stream protocol out (read with rstream): the AMQP 1.0 bytes the embedded broker
    stores are RabbitMQ 3.10.8's (the recorded ones, queue name substituted: same length)."""
    b = embedded_stream_broker
    rec = asyncio.run(capture(b.port, b.stream_port))
    for got, want in zip(rec["cases"], RECORDED["cases"]):
        assert got["name"] == want["name"] and got["offset"] == want["offset"]
        expect = bytes.fromhex(want["stored_prefix"]).replace(want["queue"].encode(), got["queue"].encode())
        assert got["stored_ends_with_body"]
        assert got["stored_prefix"] == expect.hex(), got["name"]
