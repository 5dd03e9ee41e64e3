"""Connection/channel state machines, both roles: legal sequences and violations with the
reply codes RabbitMQ 3.10 uses (see spark_amqp/protocol/connection.py for the sources)."""

from __future__ import annotations

import pytest

from spark_amqp.protocol import (AMQPError, BasicProperties, ContentMessage, Heartbeat,
                                 MethodFrame, ProtocolHeader, encode_message, encode_method,
                                 spec)
from spark_amqp.protocol.connection import (SENDERS, AMQPConnection, ChannelState,
                                            ConnectionState, ProtocolHeaderRejected, Role,
                                            close_method_for, error_from_close)
from spark_amqp.protocol.errors import (AccessRefused, ChannelErrorCode, CommandInvalid,
                                        FrameError, NotFound)

C, S = Role.CLIENT, Role.SERVER


def start_ok():
    return spec.Connection.StartOk({"product": "t"}, "PLAIN", b"\x00guest\x00guest", "en_US")


def transfer(src: AMQPConnection, dst: AMQPConnection, channel, method, now=None):
    """src sends, dst receives; returns dst's events."""
    data = src.send_method(channel, method, now=now)
    return dst.receive_data(data, now=now)


def negotiate(tune=(2047, 131072, 60), tune_ok=None, now=None):
    c, s = AMQPConnection(C), AMQPConnection(S)
    assert s.initiate() == b""
    evs = s.receive_data(c.initiate(now=now), now=now)
    assert evs == [ProtocolHeader(b"AMQP\x00\x00\x09\x01")]
    assert s.state is ConnectionState.AWAIT_START and c.state is ConnectionState.AWAIT_START
    transfer(s, c, 0, spec.Connection.Start(0, 9, {"product": "x"}, b"PLAIN", b"en_US"), now)
    assert c.server_properties == {"product": "x"} and c.mechanisms == b"PLAIN"
    transfer(c, s, 0, start_ok(), now)
    assert s.mechanism == "PLAIN" and s.client_properties == {"product": "t"}
    transfer(s, c, 0, spec.Connection.Tune(*tune), now)
    transfer(c, s, 0, spec.Connection.TuneOk(*(tune_ok or tune)), now)
    transfer(c, s, 0, spec.Connection.Open("/"), now)
    assert s.virtual_host == "/"
    transfer(s, c, 0, spec.Connection.OpenOk(), now)
    assert c.state is ConnectionState.OPEN and s.state is ConnectionState.OPEN
    assert c.is_open and s.is_open
    return c, s


def open_channel(c, s, n=1):
    transfer(c, s, n, spec.Channel.Open())
    assert s.channel_state(n) is ChannelState.OPENING and c.channel_state(n) is ChannelState.OPENING
    transfer(s, c, n, spec.Channel.OpenOk())
    assert s.channel_state(n) is ChannelState.OPEN and c.channel_state(n) is ChannelState.OPEN


def raises(code, fn, *args, **kw):
    with pytest.raises(AMQPError) as info:
        fn(*args, **kw)
    assert info.value.reply_code == code, info.value
    return info.value


# ------------------------------------------------------------------------- negotiation

def test_full_negotiation_applies_tune_ok_values():
    c, s = negotiate(tune=(2047, 131072, 60), tune_ok=(100, 65536, 30))
    for x in (c, s):
        assert (x.channel_max, x.frame_max, x.heartbeat) == (100, 65536, 30)
        assert x.decoder.frame_max == 65536


def test_secure_round():
    c, s = AMQPConnection(C), AMQPConnection(S)
    s.receive_data(c.initiate())
    transfer(s, c, 0, spec.Connection.Start(0, 9, {}, b"AMQPLAIN", b"en_US"))
    transfer(c, s, 0, start_ok())
    assert s.state is ConnectionState.AWAIT_TUNE
    transfer(s, c, 0, spec.Connection.Secure(b"challenge"))
    assert c.state is ConnectionState.AWAIT_SECURE_OK
    transfer(c, s, 0, spec.Connection.SecureOk(b"answer"))
    transfer(s, c, 0, spec.Connection.Secure(b"again"))
    transfer(c, s, 0, spec.Connection.SecureOk(b"answer2"))
    transfer(s, c, 0, spec.Connection.Tune(0, 0, 0))
    transfer(c, s, 0, spec.Connection.TuneOk(0, 0, 0))
    assert s.frame_max == 0 and s.decoder.frame_max == 0


def test_initiate_twice_is_an_error():
    c = AMQPConnection(C)
    c.initiate()
    raises(503, c.initiate)
    s = AMQPConnection(S)
    s.receive_data(b"AMQP\x00\x00\x09\x01")
    raises(503, s.initiate)


def test_role_must_be_a_role():
    with pytest.raises(TypeError):
        AMQPConnection("client")


@pytest.mark.parametrize("header,accepted", [
    (b"AMQP\x00\x00\x09\x01", True),
    (b"AMQP\x01\x01\x00\x09", True),   # 0-9: RabbitMQ answers with 0-9-1 (checked)
    (b"AMQP\x01\x01\x08\x00", False),  # 0-8
    (b"AMQP\x01\x01\x09\x01", False),  # 0-8 document's own spelling
    (b"AMQP\x00\x01\x00\x00", False),  # 1.0
    (b"HTTP/1.1", False),
])
def test_server_protocol_header(header, accepted):
    s = AMQPConnection(S)
    extra = b"\x08\x00\x00\x00\x00\x00\x00\xce"  # a heartbeat right after the header
    evs = s.receive_data(header + extra)
    if accepted:
        assert evs[0] == ProtocolHeader(header) and s.state is ConnectionState.AWAIT_START
        assert evs[1:] == [Heartbeat()]  # parsing continues after an accepted header
    else:
        assert evs == [ProtocolHeaderRejected(ProtocolHeader(header))]
        assert evs[0].reply == b"AMQP\x00\x00\x09\x01"
        assert s.state is ConnectionState.CLOSED and s.is_closed
        assert "ProtocolHeaderRejected" in repr(evs[0])
        assert s.receive_data(b"more garbage") == []


def test_header_in_pieces():
    s = AMQPConnection(S)
    assert s.receive_data(b"AMQ") == []
    assert s.receive_data(b"P\x00\x00\x09\x01") == [ProtocolHeader(b"AMQP\x00\x00\x09\x01")]


@pytest.mark.parametrize("sender,method,state", [
    # start-ok before start, tune before start-ok, open before tune-ok, open-ok before open
    (S, spec.Connection.Tune(0, 0, 0), ConnectionState.AWAIT_START),
    (S, spec.Connection.OpenOk(), ConnectionState.AWAIT_START),
    (S, spec.Connection.Blocked("x"), ConnectionState.AWAIT_START),
])
def test_out_of_order_connection_methods_are_504(sender, method, state):
    c = AMQPConnection(C)
    c.initiate()
    assert c.state is state
    err = raises(504, c.receive_data, encode_method(0, method))
    assert err.connection_level and "unexpected" in err.reply_text


def test_negotiation_violations_both_directions():
    c, s = AMQPConnection(C), AMQPConnection(S)
    s.receive_data(c.initiate())
    # the client may not send start-ok before start (send side: state unchanged)
    raises(504, c.send_method, 0, start_ok())
    assert c.state is ConnectionState.AWAIT_START
    raises(504, s.receive_data, encode_method(0, start_ok()))
    # the server may not send tune before start-ok
    s2 = AMQPConnection(S)
    s2.receive_data(b"AMQP\x00\x00\x09\x01")
    raises(504, s2.send_method, 0, spec.Connection.Tune(0, 0, 0))
    # a client never sends connection.start: 504 on channel 0, as RabbitMQ (state first)
    raises(504, s2.receive_data, encode_method(0, spec.Connection.Start()))


def test_connection_method_after_open_is_504():
    c, s = negotiate()
    # RabbitMQ 3.10: tune after open -> 504 "unexpected method in connection state running"
    raises(504, c.receive_data, encode_method(0, spec.Connection.Tune(0, 0, 0)))
    raises(504, s.receive_data, encode_method(0, spec.Connection.Open("/")))


@pytest.mark.parametrize("tune,tune_ok,code", [
    ((10, 131072, 0), (11, 131072, 0), 530),      # channel_max above the offer
    ((10, 131072, 0), (0, 131072, 0), 530),       # 0 = unlimited, above the offer
    ((0, 131072, 0), (0, 200000, 0), 530),        # frame_max above the offer
    ((0, 0, 0), (0, 4095, 0), 530),               # below frame-min-size
    ((0, 0, 0), (65535, 1 << 20, 600), None),     # no server limits: anything goes
])
def test_tune_ok_validation(tune, tune_ok, code):
    c, s = AMQPConnection(C), AMQPConnection(S)
    s.receive_data(c.initiate())
    transfer(s, c, 0, spec.Connection.Start())
    transfer(c, s, 0, start_ok())
    transfer(s, c, 0, spec.Connection.Tune(*tune))
    if code is None:
        transfer(c, s, 0, spec.Connection.TuneOk(*tune_ok))
        assert (s.channel_max, s.frame_max, s.heartbeat) == tune_ok
    else:
        raises(code, c.send_method, 0, spec.Connection.TuneOk(*tune_ok))
        assert c.state is ConnectionState.AWAIT_TUNE_OK
        raises(code, s.receive_data, encode_method(0, spec.Connection.TuneOk(*tune_ok)))


def test_tune_with_tiny_frame_max_is_refused():
    c = AMQPConnection(C)
    c.initiate()
    c.receive_data(encode_method(0, spec.Connection.Start()))
    c.send_method(0, start_ok())
    raises(530, c.receive_data, encode_method(0, spec.Connection.Tune(0, 1000, 0)))


def test_channel_method_before_open_ok_is_504():
    c = AMQPConnection(C)
    c.initiate()
    raises(504, c.receive_data, encode_method(1, spec.Channel.OpenOk()))
    raises(504, c.send_method, 1, spec.Channel.Open())


# ------------------------------------------------------------------------- roles

@pytest.mark.parametrize("name", ["basic.deliver", "channel.open-ok", "basic.consume-ok",
                                  "connection.blocked", "basic.return", "basic.get-ok"])
def test_server_only_methods_from_a_client_are_503(name):
    c, s = negotiate()
    open_channel(c, s)
    cls = spec.METHODS_BY_NAME[name]
    ch = 0 if cls.CLASS_ID == 10 else 1
    code = 504 if ch == 0 else 503  # channel 0: RabbitMQ checks the connection state first
    data = (encode_message(ch, cls(), None, b"x") if cls.has_content
            else encode_method(ch, cls()))
    err = raises(code, s.receive_data, data)
    assert "never sends" in err.reply_text or "never sent by a client" in err.reply_text
    with pytest.raises((CommandInvalid, ChannelErrorCode)):
        if cls.has_content:
            c.send_message(ch, cls(), None, b"x")
        else:
            c.send_method(ch, cls())


@pytest.mark.parametrize("name", ["basic.publish", "queue.declare", "channel.open",
                                  "connection.update-secret", "basic.get"])
def test_client_only_methods_from_a_server_are_503(name):
    c, s = negotiate()
    open_channel(c, s, 2)
    cls = spec.METHODS_BY_NAME[name]
    ch = 0 if cls.CLASS_ID == 10 else 2
    data = (encode_message(ch, cls(), None, b"") if cls.has_content
            else encode_method(ch, cls()))
    raises(504 if ch == 0 else 503, c.receive_data, data)


def test_senders_table_covers_every_method():
    assert set(SENDERS) == set(spec.METHODS)
    both = {spec.METHODS[i].NAME for i, r in SENDERS.items() if len(r) == 2}
    assert both == {"connection.close", "connection.close-ok", "channel.flow",
                    "channel.flow-ok", "channel.close", "channel.close-ok", "basic.cancel",
                    "basic.cancel-ok", "basic.ack", "basic.nack"}


def test_connection_method_on_nonzero_channel_is_503():
    c, s = negotiate()
    open_channel(c, s)
    # RabbitMQ 3.10: connection.blocked on channel 1 -> 503 (checked)
    raises(503, c.receive_data, encode_method(1, spec.Connection.Blocked("x")))


def test_channel_method_on_channel_zero_is_504():
    c, s = negotiate()
    raises(504, s.receive_data, encode_method(0, spec.Channel.Open()))
    raises(504, s.receive_data, encode_method(0, spec.Queue.Declare()))


# ------------------------------------------------------------------------- channels

def test_method_on_unopened_channel_is_504():
    c, s = negotiate()
    err = raises(504, s.receive_data, encode_method(5, spec.Queue.Declare(queue="q")))
    assert err.connection_level and "channel.open" in err.reply_text
    assert (err.class_id, err.method_id) == (50, 10)
    raises(504, c.send_method, 5, spec.Queue.Declare())


def test_second_channel_open_is_504():
    c, s = negotiate()
    open_channel(c, s)
    raises(504, s.receive_data, encode_method(1, spec.Channel.Open()))
    raises(504, c.send_method, 1, spec.Channel.Open())


def test_channel_open_while_opening_is_504():
    c, s = negotiate()
    transfer(c, s, 1, spec.Channel.Open())
    raises(504, s.receive_data, encode_method(1, spec.Channel.Open()))


def test_channel_number_above_channel_max_is_530():
    c, s = negotiate(tune=(10, 131072, 0))
    raises(530, c.send_method, 11, spec.Channel.Open())
    raises(530, s.receive_data, encode_method(11, spec.Channel.Open()))
    open_channel(c, s, 10)


def test_client_may_pipeline_after_channel_open():
    c, s = negotiate()
    data = c.send_method(1, spec.Channel.Open()) + c.send_method(1, spec.Queue.Declare(queue="q"))
    evs = s.receive_data(data)
    assert [e.method.NAME for e in evs] == ["channel.open", "queue.declare"]
    # but the server must answer open-ok first
    raises(503, s.send_method, 1, spec.Queue.DeclareOk("q", 0, 0))
    raises(503, c.receive_data, encode_method(1, spec.Queue.DeclareOk("q", 0, 0)))
    transfer(s, c, 1, spec.Channel.OpenOk())
    raises(503, c.receive_data, encode_method(1, spec.Channel.OpenOk()))
    raises(503, s.send_method, 1, spec.Channel.OpenOk())


def test_channel_close_handshake_initiated_by_client():
    c, s = negotiate()
    open_channel(c, s)
    transfer(c, s, 1, spec.Channel.Close(200, "bye", 0, 0))
    assert c.channel_state(1) is ChannelState.CLOSING
    assert s.channel_state(1) is ChannelState.CLOSE_RECEIVED
    # the server may only answer close-ok; deliveries in flight are discarded by the client
    raises(503, s.send_method, 1, spec.Basic.Ack(1))
    assert c.receive_data(encode_message(1, spec.Basic.Deliver("t", 1), None, b"x")) == []
    assert c.receive_data(encode_method(1, spec.Basic.Ack(1))) == []
    raises(503, c.send_method, 1, spec.Basic.Ack(1))  # closing: nothing but close-ok
    raises(503, s.receive_data, encode_method(1, spec.Basic.Ack(1)))  # after client's close
    # a fresh server object for the rest (the one above raised)
    c, s = negotiate()
    open_channel(c, s)
    transfer(c, s, 1, spec.Channel.Close(200, "bye", 0, 0))
    evs = transfer(s, c, 1, spec.Channel.CloseOk())
    assert evs == [MethodFrame(1, spec.Channel.CloseOk())]
    assert c.channel_state(1) is ChannelState.CLOSED and s.channel_state(1) is ChannelState.CLOSED
    assert c.channel_info(1) is None and c.channels == {}
    open_channel(c, s)  # the number can be reused


def test_channel_close_by_server_with_error():
    c, s = negotiate()
    open_channel(c, s)
    err = NotFound("no queue 'q' in vhost '/'", 50, 10)
    close = close_method_for(err)
    assert close == spec.Channel.Close(404, "NOT_FOUND - no queue 'q' in vhost '/'", 50, 10)
    [ev] = transfer(s, c, 1, close)
    assert c.channel_state(1) is ChannelState.CLOSE_RECEIVED
    typed = error_from_close(ev.method)
    assert isinstance(typed, NotFound) and typed.channel_level
    # anything but close-ok from the client is refused on send
    raises(503, c.send_method, 1, spec.Basic.Qos(0, 1, False))
    raises(503, c.send_message, 1, spec.Basic.Publish(), None, b"")
    transfer(c, s, 1, spec.Channel.CloseOk())
    assert s.channel_state(1) is ChannelState.CLOSED


def test_simultaneous_channel_close():
    c, s = negotiate()
    open_channel(c, s)
    c_close = c.send_method(1, spec.Channel.Close(200, "c", 0, 0))
    s_close = s.send_method(1, spec.Channel.Close(406, "s", 60, 80))
    # each receives the other's close while its own is outstanding: must answer close-ok
    assert len(c.receive_data(s_close)) == 1 and len(s.receive_data(c_close)) == 1
    assert c.channel_info(1).close_received
    c_ok = c.send_method(1, spec.Channel.CloseOk())
    s_ok = s.send_method(1, spec.Channel.CloseOk())
    raises(503, c.send_method, 1, spec.Channel.CloseOk())  # only once
    assert c.channel_state(1) is ChannelState.CLOSING
    c.receive_data(s_ok)
    s.receive_data(c_ok)
    assert c.channel_state(1) is ChannelState.CLOSED and s.channel_state(1) is ChannelState.CLOSED


def test_close_while_opening():
    c, s = negotiate()
    transfer(c, s, 1, spec.Channel.Open())
    transfer(s, c, 1, spec.Channel.Close(530, "nope", 20, 10))
    assert c.channel_state(1) is ChannelState.CLOSE_RECEIVED
    transfer(c, s, 1, spec.Channel.CloseOk())
    transfer(c, s, 2, spec.Channel.Open())
    transfer(c, s, 2, spec.Channel.Close(200, "", 0, 0))
    assert c.channel_state(2) is ChannelState.CLOSING


def test_unsolicited_channel_close_ok_is_503():
    c, s = negotiate()
    open_channel(c, s)
    # RabbitMQ 3.10: unsolicited channel.close-ok -> 503 (checked)
    raises(503, s.receive_data, encode_method(1, spec.Channel.CloseOk()))
    raises(503, c.send_method, 1, spec.Channel.CloseOk())


def test_channel_flow():
    c, s = negotiate()
    open_channel(c, s)
    transfer(s, c, 1, spec.Channel.Flow(False))
    assert c.channel_info(1).peer_flow_active is False
    transfer(c, s, 1, spec.Channel.FlowOk(False))
    assert s.channel_info(1).flow_active is False
    transfer(c, s, 1, spec.Channel.Flow(True))
    assert s.channel_info(1).peer_flow_active is True
    transfer(s, c, 1, spec.Channel.FlowOk(True))
    assert c.channel_info(1).flow_active is True
    assert "ChannelInfo(1, open)" == repr(c.channel_info(1))


def test_content_round_trip_and_split_to_frame_max():
    c, s = negotiate(tune=(0, 4096, 0))
    open_channel(c, s)
    props = BasicProperties(content_type="text/plain", delivery_mode=2, headers={"a": 1})
    data = c.send_message(1, spec.Basic.Publish(0, "ex", "rk"), props, b"x" * 10000)
    assert data.count(b"\xce\x03\x00\x01") >= 2  # several body frames
    [ev] = s.receive_data(data)
    assert ev == ContentMessage(1, spec.Basic.Publish(0, "ex", "rk"), props, b"x" * 10000)
    [ev] = c.receive_data(s.send_message(1, spec.Basic.Deliver("ct", 1, False, "ex", "rk"),
                                         props, b"y"))
    assert ev.body == b"y"
    with pytest.raises(TypeError):
        c.send_method(1, spec.Basic.Publish())
    with pytest.raises(TypeError):
        c.send_message(1, spec.Basic.Ack(), None, b"")
    raises(504, c.send_message, 3, spec.Basic.Publish(), None, b"")


def test_content_out_of_order_is_505():
    c, s = negotiate()
    open_channel(c, s)
    data = encode_message(1, spec.Basic.Publish(), None, b"abc")
    method_only = data[:data.index(b"\xce") + 1]
    raises(505, s.receive_data, method_only + encode_method(1, spec.Basic.Qos()))


def test_method_frame_over_frame_max_is_refused_on_send():
    c, s = negotiate(tune=(0, 4096, 0))
    open_channel(c, s)
    raises(501, c.send_method, 1, spec.Queue.Declare(queue="q", arguments={"x": "y" * 5000}))


def test_events_before_an_error_are_attached():
    c, s = negotiate()
    open_channel(c, s)
    good = encode_method(1, spec.Basic.Qos(0, 10, False))
    bad = encode_method(7, spec.Basic.Qos())
    err = raises(504, s.receive_data, good + bad)
    assert [e.method.NAME for e in err.events] == ["basic.qos"]


# ------------------------------------------------------------------------- connection close

def test_connection_close_handshake():
    c, s = negotiate()
    open_channel(c, s)
    [ev] = transfer(c, s, 0, spec.Connection.Close(200, "bye", 0, 0))
    assert c.state is ConnectionState.CLOSING and s.state is ConnectionState.CLOSE_RECEIVED
    assert s.close_reason == ev.method
    # after sending close, the client discards everything but close/close-ok
    assert c.receive_data(encode_message(1, spec.Basic.Deliver(), None, b"x")) == []
    assert c.receive_data(encode_method(0, spec.Connection.Blocked("x"))) == []
    assert c.receive_data(encode_method(1, spec.Channel.Close(200, "", 0, 0))) == []
    assert c.receive_data(b"\x08\x00\x00\x00\x00\x00\x00\xce") == []
    raises(503, c.send_method, 1, spec.Basic.Ack(1))
    raises(503, c.send_method, 0, spec.Connection.Close(200, "", 0, 0))
    # the server must answer close-ok only
    raises(503, s.send_method, 1, spec.Basic.Ack(1))
    raises(503, s.send_method, 0, spec.Connection.Close(200, "", 0, 0))
    raises(503, s.send_method, 0, spec.Connection.Blocked("x"))
    assert s.receive_data(encode_method(0, spec.Connection.Close(200, "", 0, 0))) == []
    assert s.receive_data(encode_method(0, spec.Connection.UpdateSecret(b"", ""))) == []
    transfer(s, c, 0, spec.Connection.CloseOk())
    assert c.state is ConnectionState.CLOSED and s.state is ConnectionState.CLOSED
    assert c.channels == {} and s.channels == {}
    assert c.receive_data(encode_method(0, spec.Connection.Close(200, "", 0, 0))) == []
    raises(503, c.send_method, 0, spec.Connection.Close(200, "", 0, 0))


def test_simultaneous_connection_close():
    c, s = negotiate()
    c_close = c.send_method(0, spec.Connection.Close(200, "c", 0, 0))
    s_close = s.send_method(0, spec.Connection.Close(320, "s", 0, 0))
    assert len(c.receive_data(s_close)) == 1
    c_ok = c.send_method(0, spec.Connection.CloseOk())
    assert c.state is ConnectionState.CLOSED
    assert len(s.receive_data(c_close)) == 1
    assert s.receive_data(c_ok) == [MethodFrame(0, spec.Connection.CloseOk())]
    assert s.state is ConnectionState.CLOSED


def test_unsolicited_connection_close_ok_is_504():
    c, s = negotiate()
    # RabbitMQ 3.10: 504 "unexpected method in connection state running" (checked)
    raises(504, s.receive_data, encode_method(0, spec.Connection.CloseOk()))
    raises(504, c.send_method, 0, spec.Connection.CloseOk())


def test_close_during_negotiation():
    # RabbitMQ with authentication_failure_close: connection.close 403 after start-ok
    c, s = AMQPConnection(C), AMQPConnection(S)
    s.receive_data(c.initiate())
    transfer(s, c, 0, spec.Connection.Start())
    transfer(c, s, 0, start_ok())
    close = close_method_for(AccessRefused("Login was refused using authentication "
                                           "mechanism PLAIN"), connection=True)
    assert close.NAME == "connection.close" and close.reply_code == 403
    [ev] = transfer(s, c, 0, close)
    assert c.state is ConnectionState.CLOSE_RECEIVED
    err = error_from_close(ev.method)
    assert isinstance(err, AccessRefused) and err.connection_level
    transfer(c, s, 0, spec.Connection.CloseOk())
    assert s.is_closed


def test_close_before_start_is_504():
    c = AMQPConnection(C)
    c.initiate()
    raises(504, c.receive_data, encode_method(0, spec.Connection.Close(200, "", 0, 0)))


def test_blocked_unblocked_and_update_secret():
    c, s = negotiate()
    transfer(s, c, 0, spec.Connection.Blocked("low on memory"))
    assert c.blocked == "low on memory"
    transfer(s, c, 0, spec.Connection.Unblocked())
    assert c.blocked is None
    transfer(c, s, 0, spec.Connection.UpdateSecret(b"token", "refresh"))
    transfer(s, c, 0, spec.Connection.UpdateSecretOk())


def test_peer_repeats_close():
    c, s = negotiate()
    transfer(c, s, 0, spec.Connection.Close(200, "", 0, 0))
    assert s.receive_data(encode_method(0, spec.Connection.Close(200, "", 0, 0))) == []
    assert s.receive_data(encode_method(0, spec.Connection.UpdateSecret(b"", ""))) == []


# ------------------------------------------------------------------------- errors

def test_close_method_for_connection_error_and_long_text():
    err = ChannelErrorCode("é" * 300, 50, 10)
    m = close_method_for(err)
    assert m.NAME == "connection.close" and m.reply_code == 504
    assert len(m.reply_text.encode()) <= 255 and m.reply_text.startswith("CHANNEL_ERROR - ")
    m.encode()  # encodable
    assert close_method_for(FrameError("FRAME_ERROR - x")).reply_text == "FRAME_ERROR - x"


def test_error_from_close_levels():
    e = error_from_close(spec.Connection.Close(404, "x", 0, 0))  # 404 on a connection close
    assert isinstance(e, NotFound) and e.connection_level
    e = error_from_close(spec.Channel.Close(599, "odd", 0, 0))
    assert e.reply_code == 599 and e.channel_level
    with pytest.raises(TypeError):
        error_from_close(spec.Basic.Ack())


def test_decoder_errors_propagate_and_stick():
    c, s = negotiate()
    bad = bytearray(encode_method(0, spec.Connection.Blocked("x")))
    bad[-1] = 0
    raises(501, c.receive_data, bytes(bad))
    raises(501, c.receive_data, b"")


def test_decoder_error_keeps_validated_events_before_it():
    c, s = negotiate()
    open_channel(c, s)
    good = encode_method(1, spec.Basic.Qos(0, 10, False))
    bad = bytearray(encode_method(1, spec.Basic.Qos()))
    bad[-1] = 0
    err = raises(501, s.receive_data, good + bytes(bad))
    assert [e.method.NAME for e in err.events] == ["basic.qos"]
    # a state violation before the garbled frame wins
    c, s = negotiate()
    err = raises(504, s.receive_data, good + bytes(bad))
    assert err.events == []


def test_unknown_channel_state_is_closed():
    c = AMQPConnection(C)
    assert c.channel_state(9) is ChannelState.CLOSED and c.channel_info(9) is None


# ------------------------------------------------------------------------- heartbeats

def test_heartbeat_timing():
    c, s = negotiate(tune=(0, 131072, 10), now=100.0)
    assert c.heartbeat == 10
    assert c.heartbeat_action(100.0) is None
    assert c.heartbeat_deadline(100.0) == pytest.approx(5.0)
    assert c.heartbeat_action(105.0) == "send"
    assert c.send_heartbeat(now=105.0) == b"\x08\x00\x00\x00\x00\x00\x00\xce"
    assert c.heartbeat_action(106.0) is None
    c.note_sent(now=111.0)
    assert c.heartbeat_action(115.9) is None
    assert c.heartbeat_action(116.0) == "send"
    # receiving resets the dead-peer clock
    assert c.receive_data(s.send_heartbeat(now=115.0), now=115.0) == [Heartbeat()]
    c.note_sent(now=134.0)
    assert c.heartbeat_action(134.9) is None
    assert c.heartbeat_action(135.0) == "dead"
    assert c.heartbeat_deadline(140.0) == 0.0


def test_heartbeat_off():
    c, s = negotiate(tune=(0, 131072, 0))
    assert c.heartbeat_action(1e9) is None and c.heartbeat_deadline(0) is None
    c2 = AMQPConnection(C)
    assert c2.heartbeat_action(1e9) is None


def test_heartbeat_after_close_is_none():
    c, s = negotiate(tune=(0, 131072, 5))
    transfer(c, s, 0, spec.Connection.Close(200, "", 0, 0))
    transfer(s, c, 0, spec.Connection.CloseOk())
    assert c.heartbeat_action(1e12) is None and c.heartbeat_deadline(1e12) is None


def test_heartbeat_event_passes_in_open_and_negotiation():
    c = AMQPConnection(C)
    c.initiate()
    assert c.receive_data(b"\x08\x00\x00\x00\x00\x00\x00\xce") == [Heartbeat()]
