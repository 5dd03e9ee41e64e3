"""The stream-protocol connection state machine, a client wired to a server (both sans-IO):
the handshake in order, out-of-order and wrong-role commands refused with UNKNOWN_FRAME,
the pre-open frame ceiling, credit accounting, heartbeats, close."""

from __future__ import annotations

import struct

import pytest

from spark_amqp.protocol.stream import commands as C
from spark_amqp.protocol.stream.chunk import encode_chunk
from spark_amqp.protocol.stream.connection import CLIENT, SERVER, State, StreamConnection
from spark_amqp.protocol.stream.constants import Code
from spark_amqp.protocol.stream.errors import FrameTooLarge, UnknownFrame


def pump(src: StreamConnection, dst: StreamConnection, cmd) -> list:
    """``src`` sends ``cmd``, ``dst`` receives it: the events ``dst`` sees."""
    return dst.receive_data(src.send(cmd))


def handshake(client_kw=None, server_kw=None, frame_max=1048576, heartbeat=60):
    c = StreamConnection(CLIENT, **(client_kw or {}))
    s = StreamConnection(SERVER, frame_max=frame_max, heartbeat=heartbeat, **(server_kw or {}))
    [pp] = pump(c, s, C.PeerProperties(0, {"product": "test"}))
    pump(s, c, C.PeerPropertiesResponse(pp.correlation_id, Code.OK, {"version": "4.3.5"}))
    [h] = pump(c, s, C.SaslHandshake())
    pump(s, c, C.SaslHandshakeResponse(h.correlation_id, Code.OK, ["PLAIN"]))
    [a] = pump(c, s, C.SaslAuthenticate(0, "PLAIN", b"\0guest\0guest"))
    pump(s, c, C.SaslAuthenticateResponse(a.correlation_id, Code.OK))
    [t] = pump(s, c, C.Tune(frame_max, heartbeat))
    assert c.state is State.TUNE
    pump(c, s, C.TuneResponse(c.frame_max, c.heartbeat))
    [o] = pump(c, s, C.Open(0, "/"))
    pump(s, c, C.OpenResponse(o.correlation_id, Code.OK, {"advertised_host": "h",
                                                          "advertised_port": "5552"}))
    return c, s


def test_the_handshake_both_roles():
    c, s = handshake()
    assert c.state is State.OPENED and s.state is State.OPENED
    assert c.peer_properties == {"version": "4.3.5"} and s.peer_properties == {"product": "test"}
    assert c.open_properties["advertised_host"] == "h" and c.vhost == s.vhost == "/"
    assert (c.frame_max, c.heartbeat) == (s.frame_max, s.heartbeat) == (1048576, 60)
    assert c.mechanism == s.mechanism == "PLAIN"


def test_the_client_lowers_frame_max_and_heartbeat_it_was_asked_to():
    c, s = handshake(client_kw={"frame_max": 65536, "heartbeat": 5})
    assert (c.frame_max, c.heartbeat) == (s.frame_max, s.heartbeat) == (65536, 5)
    c, s = handshake(client_kw={"frame_max": 65536, "heartbeat": 0}, frame_max=0, heartbeat=60)
    assert (c.frame_max, c.heartbeat) == (s.frame_max, s.heartbeat) == (65536, 0)
    c, s = handshake(client_kw={"frame_max": 0, "heartbeat": None}, frame_max=4096, heartbeat=7)
    assert (c.frame_max, c.heartbeat) == (4096, 7)


def test_a_server_refuses_a_client_command_before_open():
    s = StreamConnection(SERVER)
    with pytest.raises(UnknownFrame, match="Open received in state peer-properties"):
        s.receive_data(C.Open(1, "/").encode())
    s = StreamConnection(SERVER)
    with pytest.raises(UnknownFrame, match="CreateStream received in state peer-properties"):
        s.receive_data(C.CreateStream(1, "x").encode())
    # RabbitMQ closes the socket before open without a frame
    assert s.close_frame_for(UnknownFrame("x")) is None and s.state is State.CLOSED


def test_wrong_role_commands():
    c, s = handshake()
    ch = encode_chunk([b"m"], 0, 0)
    with pytest.raises(UnknownFrame, match="server does not receive Deliver"):
        s.receive_data(C.Deliver(0, ch).encode())
    with pytest.raises(UnknownFrame, match="client does not send Deliver"):
        c.send(C.Deliver(0, ch))
    with pytest.raises(UnknownFrame, match="client does not receive Publish"):
        c.receive_data(C.encode_publish(1, 1, [b"x"]))


def test_the_initial_frame_max_before_open_and_the_negotiated_one_after():
    s = StreamConnection(SERVER, frame_max=65536, initial_frame_max=8192)
    big = C.PeerProperties(1, {"k": "v" * 9000}).encode()
    with pytest.raises(FrameTooLarge, match="8,192"):
        s.receive_data(big)
    c, s = handshake(frame_max=65536, server_kw={"initial_frame_max": 8192})
    s.receive_data(C.CreateStream(0, "x" * 9000).encode())  # allowed after open
    with pytest.raises(FrameTooLarge) as e:
        s.receive_data(struct.pack(">I", 2 ** 31) + b"\0" * 16)
    assert e.value.code == Code.FRAME_TOO_LARGE
    frame = s.close_frame_for(e.value)
    assert C.decode(frame, 4) == C.Close(frame and C.decode(frame, 4).correlation_id,
                                         Code.FRAME_TOO_LARGE, e.value.text)


def test_responses_must_answer_a_pending_request():
    c, s = handshake()
    with pytest.raises(UnknownFrame, match="answers no request"):
        c.receive_data(C.CreateStreamResponse(999, Code.OK).encode())
    [req] = pump(c, s, C.CreateStream(0, "s"))
    with pytest.raises(UnknownFrame, match="answers a CreateStream"):
        c.receive_data(C.DeleteStreamResponse(req.correlation_id, Code.OK).encode())
    assert type(pump(s, c, C.CreateStreamResponse(req.correlation_id, Code.OK))[0]) is \
        C.CreateStreamResponse


def test_credit_accounting_on_both_sides():
    c, s = handshake()
    ch = encode_chunk([b"m"], 0, 0)
    with pytest.raises(ValueError, match="no subscription 0"):
        s.send(C.Deliver(0, ch))
    [sub] = pump(c, s, C.Subscribe(0, 0, "s", C.OffsetSpec.first(), 2))
    pump(s, c, C.SubscribeResponse(sub.correlation_id, Code.OK))
    assert c.credits == s.credits == {0: 2}
    for _ in range(2):
        [d] = pump(s, c, C.Deliver(0, ch))
        assert d.subscription_id == 0
    assert c.credits == s.credits == {0: 0}
    with pytest.raises(ValueError, match="no credit left"):
        s.send(C.Deliver(0, ch))
    with pytest.raises(UnknownFrame, match="beyond its credit"):
        c.receive_data(C.Deliver(0, ch).encode())
    c2, s2 = handshake()
    with pytest.raises(UnknownFrame, match="does not have"):
        c2.receive_data(C.Deliver(5, ch).encode())
    pump(c, s, C.Credit(0, 3))
    assert c.credits == s.credits == {0: 3}
    [u] = pump(c, s, C.Unsubscribe(0, 0))
    pump(s, c, C.UnsubscribeResponse(u.correlation_id, Code.OK))
    assert c.credits == s.credits == {}


def test_a_failed_subscribe_gets_no_credit():
    c, s = handshake()
    [sub] = pump(c, s, C.Subscribe(0, 3, "nope", C.OffsetSpec.first(), 2))
    pump(s, c, C.SubscribeResponse(sub.correlation_id, Code.STREAM_DOES_NOT_EXIST))
    assert c.credits == s.credits == {}


def test_publishers_tracked():
    c, s = handshake()
    [d] = pump(c, s, C.DeclarePublisher(0, 4, "p", "s"))
    pump(s, c, C.DeclarePublisherResponse(d.correlation_id, Code.OK))
    assert c.publishers == s.publishers == {4: "s"}
    [x] = pump(c, s, C.DeletePublisher(0, 4))
    pump(s, c, C.DeletePublisherResponse(x.correlation_id, Code.OK))
    assert c.publishers == s.publishers == {}


def test_close_from_either_side():
    c, s = handshake()
    [cl] = pump(c, s, C.Close(0, Code.OK, "bye"))
    assert c.state is State.CLOSING and s.state is State.CLOSE_RECEIVED
    with pytest.raises(UnknownFrame, match="only its close response"):
        s.send(C.Heartbeat())
    pump(s, c, C.CloseResponse(cl.correlation_id, Code.OK))
    assert c.state is State.CLOSED and s.state is State.CLOSED
    c, s = handshake()
    [cl] = pump(s, c, C.Close(0, Code.UNKNOWN_FRAME, "unknown frame"))
    assert c.state is State.CLOSE_RECEIVED
    pump(c, s, C.CloseResponse(cl.correlation_id, Code.OK))
    assert c.state is State.CLOSED and s.state is State.CLOSED


def test_after_sending_close_only_close_frames_matter():
    c, s = handshake()
    [cl] = pump(c, s, C.Close(0, Code.OK, "bye"))
    # the server's deliveries in flight are ignored
    assert c.receive_data(C.Heartbeat().encode()) == [C.Heartbeat()]
    with pytest.raises(UnknownFrame):
        c.send(C.CreateStream(0, "s"))


def test_heartbeats():
    c, s = handshake(heartbeat=10)
    t = c._last_send
    assert c.heartbeat_action(t + 1) is None
    assert c.heartbeat_action(t + 5.1) == "send"
    assert c.heartbeat_action(c._last_recv + 20.1) == "dead"
    assert c.heartbeat_deadline() == pytest.approx(min(c._last_send + 5, c._last_recv + 20))
    assert C.decode(c.heartbeat_frame(), 4) == C.Heartbeat()
    c0, _ = handshake(client_kw={"heartbeat": None}, heartbeat=0)
    assert c0.heartbeat_action(1e12) is None and c0.heartbeat_deadline() is None


def test_events_before_an_error_are_kept():
    c, s = handshake()
    data = C.Heartbeat().encode() + C.Heartbeat().encode() + struct.pack(">HHH", 0, 4, 0x77) + b"x"
    data = C.Heartbeat().encode() + C.Heartbeat().encode() + struct.pack(">I", 4) + b"\x00\x77\x00\x01"
    with pytest.raises(UnknownFrame) as e:
        c.receive_data(data)
    assert e.value.events == [C.Heartbeat(), C.Heartbeat()]
