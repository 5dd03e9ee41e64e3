"""The broker's framing is the codec's: random and malformed byte streams fed to the embedded
broker's connection handler (``AMQPServerProtocol.data_received``, in process, on a fake
transport) end in the connection.close reply code the codec's :class:`Decoder` raises for the
same bytes.

The codec is run twice on each stream: in its default configuration (properties decoded) and
in the broker's (``raw_content``: properties kept as bytes, as the broker stores them). Where
both agree - the error is about framing, not about a property list the broker does not decode
- the broker must reply that code, with the same class and method ids. Streams in which an
event before the bad frame already made the broker close the connection for its own reasons
(a method the broker refuses: 503/504/530...) are compared on that point only: the broker
dispatched no more events than the codec decoded before its error.
"""

from __future__ import annotations

import asyncio
import os
import struct
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
from amqp_strategies import mutate, mutation  # noqa: E402  (tests/protocol's fuzz mutations)
from spark_amqp.broker.config import BrokerConfig
from spark_amqp.broker.connection import AMQPServerProtocol
from spark_amqp.broker.server import Broker
from spark_amqp.protocol import (AMQPError, BasicProperties, Decoder, MethodFrame,
                                 encode_message, encode_method, spec)
from spark_amqp.protocol.frames import PROTOCOL_HEADER

from rawclient import FakeTransport  # noqa: E402  (tests/broker, on sys.path as the test folder)

FUZZ = settings(max_examples=int(os.environ.get("AMQP_FUZZ_EXAMPLES", "300")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

FRAME_MAX = 131072


def _preamble() -> bytes:
    """A client's handshake up to an open connection with channel 1 open."""
    return b"".join((
        PROTOCOL_HEADER,
        encode_method(0, spec.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                                 response=b"\0guest\0guest", locale="en_US")),
        encode_method(0, spec.Connection.TuneOk(channel_max=2047, frame_max=FRAME_MAX, heartbeat=0)),
        encode_method(0, spec.Connection.Open(virtual_host="/")),
        encode_method(1, spec.Channel.Open()),
    ))


class BrokerPeer:
    """One in-process broker connection; ``feed`` bytes, read the close it sent."""

    def __init__(self, loop):
        self.broker = Broker(BrokerConfig(), loop=loop)
        self.proto = AMQPServerProtocol(self.broker)
        self.transport = FakeTransport()
        self.proto.connection_made(self.transport)
        self.dispatched = 0
        self.dispatch_failed = False
        on_event = self.proto._on_event

        def counting(ev):
            self.dispatched += 1
            try:
                on_event(ev)
            except BaseException:
                self.dispatch_failed = True
                raise

        self.proto._on_event = counting
        on_method = self.proto._on_method

        def counting_methods(channel, method):
            self.dispatched += 1
            try:
                on_method(channel, method)
            except BaseException:
                self.dispatch_failed = True
                raise

        self.proto._on_method = counting_methods
        on_content = self.proto.decoder.on_content

        def refusing(channel, method):  # the broker's 503/504 for content it does not take
            try:
                on_content(channel, method)
            except BaseException:
                self.dispatch_failed = True
                raise

        self.proto.decoder.on_content = refusing
        self.proto.data_received(_preamble())
        assert self.proto.state == "opened" and 1 in self.proto.channels, self.proto.state
        self.dispatched = 0
        self.transport.out.clear()

    def feed(self, data: bytes, chunk: int) -> None:
        for i in range(0, len(data), chunk):
            if self.proto.closed or self.proto.state == "closing":
                break
            self.proto.data_received(data[i:i + chunk])

    def connection_close(self):
        """The connection.close the broker wrote, or None."""
        dec = Decoder(frame_max=0)
        try:
            events = dec.feed(bytes(self.transport.out))
        except AMQPError as exc:  # pragma: no cover - the broker writes well-formed frames
            raise AssertionError(f"the broker wrote malformed frames: {exc}") from None
        for ev in events:
            if ev.__class__ is MethodFrame and ev.method.INDEX == spec.Connection.Close.INDEX:
                return ev.method
        return None

    def shutdown(self):
        self.proto._cleanup()


def codec_error(data: bytes, chunk: int, raw: bool):
    """(error or None, events decoded before it) of the codec on ``data``."""
    dec = Decoder(frame_max=FRAME_MAX, max_body_size=BrokerConfig().max_message_size,
                  raw_content=raw, drop_oversized=raw)
    n = 0
    try:
        for i in range(0, len(data), chunk):
            n += len(dec.feed(data[i:i + chunk]))
    except AMQPError as exc:
        return exc, n + len(exc.events)
    return None, n


def frame(ftype: int, channel: int, payload: bytes, end: int = 0xCE) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + bytes([end])


PROPS = BasicProperties(content_type="text/plain", delivery_mode=2, headers={"k": "v"})

# frames the broker accepts on channel 1 without closing anything (the default exchange
# drops messages for a queue that does not exist)
corpus = st.one_of(
    st.binary(max_size=300).map(lambda b: encode_message(1, spec.Basic.Publish(0, "", "nowhere"), PROPS, b)),
    st.binary(min_size=4000, max_size=9000).map(
        lambda b: encode_message(1, spec.Basic.Publish(0, "", "nowhere"), None, b, frame_max=4096)),
    st.just(encode_method(1, spec.Basic.Qos(0, 10, False))),
    st.just(b"\x08\x00\x00\x00\x00\x00\x00\xce"),
    st.just(encode_method(1, spec.Confirm.Select())),
    # some known-bad frames, so that every stream is not only random damage
    st.sampled_from([
        frame(9, 0, b""), frame(8, 1, b""), frame(8, 0, b"xx"), frame(3, 1, b"abc"),
        frame(1, 1, b"\x00\x3c"), frame(1, 1, struct.pack(">HH", 50, 10) + b"\x00"),
        frame(1, 1, spec.Basic.Publish().encode()) + frame(1, 1, spec.Basic.Qos().encode()),
        struct.pack(">BHI", 1, 1, 200_000),
        encode_method(1, spec.Basic.Qos(0, 1, False))[:-1] + b"\x00",
    ]),
)

def check_same_reply(data: bytes, chunk: int) -> None:
    loop = asyncio.new_event_loop()
    try:
        peer = BrokerPeer(loop)
        try:
            peer.feed(data, chunk)
            close = peer.connection_close()
            dispatched, dispatch_failed = peer.dispatched, peer.dispatch_failed
        finally:
            peer.shutdown()
    finally:
        loop.close()
    raw_err, raw_n = codec_error(data, chunk, raw=True)
    full_err, _ = codec_error(data, chunk, raw=False)
    if dispatch_failed:
        # the broker refused a method the codec decoded before its error (or the stream is
        # well framed): it never looked further than the codec did
        assert close is not None
        assert raw_err is None or dispatched <= raw_n
        return
    if raw_err is None:
        # well framed: the broker has no framing complaint either
        assert close is None or close.reply_code < 500 or close.reply_code in (503, 504, 530), close
        return
    assert close is not None, f"codec: {raw_err!r}; the broker did not close the connection"
    assert close.reply_code == raw_err.reply_code, (close, raw_err)
    assert (close.class_id, close.method_id) == (raw_err.class_id, raw_err.method_id), (close, raw_err)
    assert dispatched == raw_n
    if full_err is not None and full_err.reply_code == raw_err.reply_code:
        # the codec's default configuration (properties decoded) agrees too
        assert close.reply_code == full_err.reply_code


@FUZZ
@given(st.lists(corpus, min_size=1, max_size=4), st.lists(mutation, min_size=0, max_size=3),
       st.sampled_from([1, 7, 64, 1 << 20]))
def test_broker_replies_the_codecs_code_for_malformed_streams(frames, muts, chunk):
    check_same_reply(mutate(b"".join(frames), muts), chunk)


@FUZZ
@given(st.binary(max_size=300), st.sampled_from([1, 5, 1 << 20]))
def test_broker_replies_the_codecs_code_for_random_bytes(data, chunk):
    check_same_reply(data, chunk)


def test_known_bad_frames_get_the_codecs_codes():
    """The broker conformance cases (tests/broker/conformance/test_wire.py) in process."""
    cases = {
        frame(9, 0, b""): (501, 0, 0),
        frame(8, 1, b""): (505, 0, 0),
        frame(8, 0, b"xx"): (501, 0, 0),
        frame(3, 1, b"abc"): (505, 0, 0),
        frame(1, 1, struct.pack(">HH", 50, 10) + b"\x00"): (501, 50, 10),
        frame(1, 1, spec.Basic.Publish().encode()) + frame(1, 1, spec.Basic.Qos().encode()): (505, 60, 40),
        frame(1, 1, spec.Basic.Publish().encode()) + frame(3, 1, b"abc"): (505, 60, 40),
        frame(1, 1, spec.Basic.Publish().encode())
        + frame(2, 1, struct.pack(">HHQ", 50, 0, 3) + b"\x00\x00"): (505, 60, 40),
        struct.pack(">BHI", 1, 1, 200_000): (501, 0, 0),
        encode_method(1, spec.Basic.Qos(0, 1, False))[:-1] + b"\x00": (501, 0, 0),
    }
    for data, want in cases.items():
        for chunk in (1, len(data)):
            loop = asyncio.new_event_loop()
            peer = BrokerPeer(loop)
            peer.feed(data, chunk)
            close = peer.connection_close()
            peer.shutdown()
            loop.close()
            assert close is not None and (close.reply_code, close.class_id, close.method_id) == want, (data, close)
            err, _ = codec_error(data, chunk, raw=False)
            assert (err.reply_code, err.class_id, err.method_id) == want, (data, err)
