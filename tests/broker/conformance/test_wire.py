"""Wire-level conformance with a raw socket peer (raw_amqp.RawPeer): protocol headers,
framing errors and their connection.close codes, channel-state errors, authentication
mechanisms and heartbeats (rules 1-9 of amqp-0-9-1-from-the-seeds.md §5). pika cannot send
malformed frames, so these tests write bytes themselves; the expected replies are those of
RabbitMQ 3.10.8, observed on this machine (2026-11-21) and quoted per test."""

from __future__ import annotations

import struct
import time

import pytest

from raw_amqp import RawPeer, content_header, frame
from spark_amqp.protocol import PROTOCOL_HEADER, spec
from spark_amqp.protocol.values import encode_table


@pytest.fixture
def peer(broker_url):
    p = RawPeer(broker_url)
    yield p
    p.close()


@pytest.fixture
def opened(peer):
    """A peer with an open connection and channel 1."""
    peer.open()
    peer.open_channel(1)
    return peer


def assert_connection_close(peer, code, class_id=None, method_id=None):
    close = peer.wait_connection_close(5)
    assert close is not None, f"expected connection.close {code}, got EOF={peer.eof}"
    assert close.reply_code == code, close
    if class_id is not None:
        assert (close.class_id, close.method_id) == (class_id, method_id), close
    assert peer.wait_eof(5), "the server must close the socket after close/close-ok"
    return close


# --- protocol header ---------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [b"HTTP/1.1 GET /\r\n", b"AMQP\x00\x00\x09\x02",
                                 b"AMQP\x00\x00\x0a\x00"], ids=["http", "0-9-2", "0-10"])
def test_bad_protocol_header_answered_with_0_9_1_and_closed(peer, raw):
    # Rule 1: an unsupported header -> the server writes its own "AMQP 0 0 9 1" and closes.
    peer.send(raw)
    assert peer.read_raw(8, 5) == PROTOCOL_HEADER
    assert peer.wait_eof(5)


@pytest.mark.parametrize("raw,version", [(b"AMQP\x01\x01\x08\x00", (8, 0)),
                                         (b"AMQP\x01\x01\x00\x09", (0, 9))],
                         ids=["0-8", "0-9"])
def test_older_protocol_header_gets_connection_start(peer, raw, version):
    # §4.1: RabbitMQ 3.10 still speaks 0-8 and 0-9: it answers those headers with a
    # connection.start carrying that version (version-major, version-minor octets right after
    # the method id), not with its 0-9-1 header (which the spec prescribes only for versions
    # the server does not support).
    peer.send(raw)
    data = peer.read_raw(13, 5)
    assert not data.startswith(b"AMQP"), f"answered with a protocol header: {data!r}"
    ftype, channel, _size, class_id, method_id, major, minor = struct.unpack(">BHIHHBB", data[:13])
    assert (ftype, channel, class_id, method_id) == (1, 0, 10, 10)
    assert (major, minor) == version


def test_connection_start_offers_0_9_1_plain_and_en_us(peer):
    # Rule 2: version <= client's, server-properties, mechanisms, locales include en_US.
    peer.send(PROTOCOL_HEADER)
    start = peer.expect(spec.Connection.Start).method
    assert (start.version_major, start.version_minor) == (0, 9)
    mechanisms = start.mechanisms.decode() if isinstance(start.mechanisms, bytes) else start.mechanisms
    locales = start.locales.decode() if isinstance(start.locales, bytes) else start.locales
    assert "PLAIN" in mechanisms.split() and "AMQPLAIN" in mechanisms.split()
    assert "en_US" in locales.split()
    caps = start.server_properties.get("capabilities", {})
    assert caps.get("publisher_confirms") is True
    assert {"product", "version", "platform"} <= set(start.server_properties)


def test_tune_proposes_rabbitmq_defaults(peer):
    # RabbitMQ 3.10 defaults: channel_max 2047, frame_max 131072, heartbeat 60 s.
    tune = peer.open()
    assert (tune.channel_max, tune.frame_max, tune.heartbeat) == (2047, 131072, 60)


def test_amqplain_login(peer):
    # RabbitMQ accepts AMQPLAIN: the response is a field table without its length prefix.
    response = encode_table({"LOGIN": peer.user, "PASSWORD": peer.password})[4:]
    peer.open(mechanism="AMQPLAIN", response=response)
    peer.open_channel(1)


def test_unknown_mechanism_closes_socket_without_close_method(peer):
    # Rule 3: a mechanism that was not offered -> close the socket, send nothing more
    # (RabbitMQ 3.10: EOF, no connection.close).
    peer.send(PROTOCOL_HEADER)
    peer.expect(spec.Connection.Start)
    peer.send_method(0, spec.Connection.StartOk(client_properties={}, mechanism="FOO",
                                                response=b"x", locale="en_US"))
    assert peer.wait_connection_close(5) is None
    assert peer.eof


def test_wrong_password_raw_403(peer):
    # Rule 3: with the authentication_failure_close capability (sent by RawPeer) bad
    # credentials -> connection.close 403 ACCESS_REFUSED instead of connection.tune.
    peer.send(PROTOCOL_HEADER)
    peer.expect(spec.Connection.Start)
    peer.send_method(0, spec.Connection.StartOk(
        client_properties={"capabilities": {"authentication_failure_close": True}},
        mechanism="PLAIN", response=b"\0" + peer.user.encode() + b"\0wrong-password",
        locale="en_US"))
    close = peer.wait_connection_close(5)
    assert close is not None and close.reply_code == 403, close


# --- framing errors ---------------------------------------------------------------------------

def test_bad_frame_end_is_501(opened):
    # Rule 7: wrong frame-end octet -> 501 FRAME_ERROR.
    opened.send(frame(1, 1, spec.Basic.Qos(prefetch_count=1).encode(), end=b"\x00"))
    assert_connection_close(opened, 501)


def test_unknown_frame_type_is_501(opened):
    opened.send(frame(9, 0, b"abc"))
    assert_connection_close(opened, 501)


def test_frame_larger_than_frame_max_is_501(opened):
    # Rule 4/7: a frame above the negotiated frame-max (131072 here) -> 501.
    opened.send(frame(1, 1, b"\x00" * 200_000))
    assert_connection_close(opened, 501)


def test_truncated_method_arguments_is_501(opened):
    # RabbitMQ: "FRAME_ERROR - cannot decode <<0>>" for a queue.declare with 1 byte of args
    # (the spec's 502 SYNTAX_ERROR would also describe it; RabbitMQ uses 501).
    opened.send(frame(1, 1, struct.pack(">HH", 50, 10) + b"\x00"))
    assert_connection_close(opened, 501, 50, 10)


def test_header_without_method_is_505(opened):
    # Rule 7: content header without a content method -> 505 UNEXPECTED_FRAME.
    opened.send(frame(2, 1, content_header(3)))
    assert_connection_close(opened, 505)


def test_body_without_header_is_505(opened):
    opened.send(frame(3, 1, b"abc"))
    assert_connection_close(opened, 505)


def test_method_in_the_middle_of_content_is_505(opened):
    # basic.publish, then a method instead of the content header -> 505 (class 60, method 40).
    opened.send_method(1, spec.Basic.Publish(exchange="", routing_key="x"))
    opened.send_method(1, spec.Basic.Qos(prefetch_count=1))
    assert_connection_close(opened, 505, 60, 40)


def test_body_instead_of_header_is_505(opened):
    opened.send_method(1, spec.Basic.Publish(exchange="", routing_key="x"))
    opened.send(frame(3, 1, b"abc"))
    assert_connection_close(opened, 505, 60, 40)


def test_content_header_of_wrong_class_is_505(opened):
    opened.send_method(1, spec.Basic.Publish(exchange="", routing_key="x"))
    opened.send(frame(2, 1, content_header(3, class_id=50)))
    assert_connection_close(opened, 505, 60, 40)


def test_heartbeat_on_nonzero_channel_is_505(opened):
    # Rule 9 says heartbeats must use channel 0; RabbitMQ answers 505 UNEXPECTED_FRAME
    # (the spec's frame rules would suggest 501).
    opened.send(frame(8, 1, b""))
    assert_connection_close(opened, 505)


def test_unknown_method_ends_connection(opened):
    # The spec expects 503/540; RabbitMQ 3.10 just drops the socket on an unknown class/method
    # id. Both brokers must at least end the connection.
    opened.send(frame(1, 1, struct.pack(">HH", 60, 999)))
    close = opened.wait_connection_close(5)
    assert close is None or close.reply_code in (503, 540)
    assert opened.wait_eof(5)


# --- channel state ----------------------------------------------------------------------------

def test_method_on_unopened_channel_is_504(opened):
    # Rule 8: any method on an unopened channel -> 504 CHANNEL_ERROR (connection).
    opened.send_method(5, spec.Queue.Declare(queue="", exclusive=True))
    assert_connection_close(opened, 504, 50, 10)


def test_channel_open_twice_is_504(opened):
    opened.send_method(1, spec.Channel.Open())
    assert_connection_close(opened, 504, 20, 10)


def test_channel_method_on_channel_zero_is_504(opened):
    # RabbitMQ: "CHANNEL_ERROR - unexpected method in connection state running".
    opened.send_method(0, spec.Queue.Declare(queue="", exclusive=True))
    assert_connection_close(opened, 504, 50, 10)


def test_connection_method_on_channel_is_503(opened):
    # RabbitMQ: "COMMAND_INVALID - unimplemented method" for connection.open on channel 1.
    opened.send_method(1, spec.Connection.Open(virtual_host="/"))
    assert_connection_close(opened, 503, 10, 40)


def test_methods_after_channel_close_are_discarded(opened):
    # Rule 6 (channel form): after the server sends channel.close it discards everything on
    # that channel except close/close-ok; after close-ok the channel number can be reopened.
    opened.send_method(1, spec.Queue.Declare(queue="spark-amqp-test.no-such-queue", passive=True))
    ev = opened.next_event(5)
    assert isinstance(ev.method, spec.Channel.Close) and ev.method.reply_code == 404
    assert (ev.method.class_id, ev.method.method_id) == (50, 10)
    opened.send_method(1, spec.Queue.Declare(queue="", exclusive=True))  # ignored
    assert opened.next_event(0.3) is None
    opened.send_method(1, spec.Channel.CloseOk())
    opened.send_method(1, spec.Channel.Open())
    assert isinstance(opened.next_event(5).method, spec.Channel.OpenOk)


def test_client_channel_close_handshake(opened):
    opened.send_method(1, spec.Channel.Close(reply_code=200, reply_text="bye"))
    assert isinstance(opened.next_event(5).method, spec.Channel.CloseOk)
    opened.send_method(1, spec.Channel.Open())
    assert isinstance(opened.next_event(5).method, spec.Channel.OpenOk)


def test_client_connection_close_handshake(opened):
    opened.send_method(0, spec.Connection.Close(reply_code=200, reply_text="bye"))
    ev = opened.next_event(5)
    assert isinstance(ev.method, spec.Connection.CloseOk)
    # After close-ok the client closes the socket (RabbitMQ waits for it to do so).


def test_after_close_ok_the_socket_is_the_clients_to_close(peer):
    # RabbitMQ 3.10.8 (rabbit_reader close_connection): after close-ok to the client's
    # connection.close the broker leaves the TCP close to the client, bounded by the heartbeat
    # interval (30 s without heartbeats). Measured: heartbeat 2 -> EOF 2.0 s after close-ok.
    peer.open(heartbeat=2)
    peer.send_method(0, spec.Connection.Close(reply_code=200, reply_text="bye"))
    assert isinstance(peer.next_event(5).method, spec.Connection.CloseOk)
    t0 = time.monotonic()
    assert not peer.wait_eof(1.0), "the broker closed the socket right after close-ok"
    assert peer.wait_eof(10), "a client that never closes its socket must not hold it forever"
    assert 1.5 <= time.monotonic() - t0 <= 6


def test_broker_initiated_close_closes_the_socket_after_close_ok(opened):
    opened.send_method(1, spec.Channel.Open())          # 504: the broker closes the connection
    close = opened.next_event(5)
    assert isinstance(close.method, spec.Connection.Close) and close.method.reply_code == 504
    opened.send_method(0, spec.Connection.CloseOk())
    t0 = time.monotonic()
    assert opened.wait_eof(5)
    assert time.monotonic() - t0 < 1.0                  # RabbitMQ: at once (0.0 s)


def test_broker_initiated_close_without_close_ok_is_bounded(peer):
    # The broker waits for close-ok at most the heartbeat interval (30 s without heartbeats);
    # RabbitMQ 3.10.8, heartbeat 2: EOF 2.0 s after its connection.close.
    peer.open(heartbeat=2)
    peer.open_channel(1)
    peer.send_method(1, spec.Channel.Open())
    close = peer.next_event(5)
    assert isinstance(close.method, spec.Connection.Close) and close.method.reply_code == 504
    t0 = time.monotonic()
    assert not peer.wait_eof(1.0), "the broker must wait for close-ok before closing"
    assert peer.wait_eof(10)
    assert 1.5 <= time.monotonic() - t0 <= 6


# --- heartbeats -------------------------------------------------------------------------------

def test_server_sends_heartbeats(peer):
    # Both peers heartbeat at the negotiated interval (RabbitMQ sends every interval/2).
    peer.open(heartbeat=1)
    seen, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 2.5:
        peer.heartbeat()
        ev = peer.next_event(0.3, skip_heartbeats=False)
        if ev is not None and type(ev).__name__ == "Heartbeat":
            seen += 1
    assert seen >= 2
    assert not peer.eof


def test_silent_peer_is_dropped(peer):
    # Rule 9: a peer that sends nothing is dropped after missed heartbeats (heartbeat=1 s:
    # RabbitMQ 3.10 closed the socket after ~3 s, without connection.close).
    peer.open(heartbeat=1)
    t0 = time.monotonic()
    assert peer.wait_eof(8), "silent peer was not dropped within 8 s"
    assert time.monotonic() - t0 >= 1.0


def test_heartbeating_idle_peer_is_kept(peer):
    peer.open(heartbeat=1)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3.0:
        peer.heartbeat()
        assert not peer.wait_eof(0.4), "a heartbeating peer was dropped"


# --- handshake limits and out-of-state methods (observed on RabbitMQ 3.10.8) -------------------

def _until_tune(peer):
    peer.send(PROTOCOL_HEADER)
    peer.expect(spec.Connection.Start)
    peer.send_method(0, spec.Connection.StartOk(
        client_properties={}, mechanism="PLAIN",
        response=b"\0" + peer.user.encode() + b"\0" + peer.password.encode(), locale="en_US"))
    return peer.expect(spec.Connection.Tune).method


def _assert_refused_before_open(peer, wait_eof=False):
    """No connection.open-ok: the server either says connection.close or stays silent and
    drops the socket (RabbitMQ: silent, socket closed ~3 s later)."""
    ev = peer.next_event(1.0)
    assert ev is None or isinstance(ev.method, spec.Connection.Close), ev
    if wait_eof:
        if ev is not None:
            peer.send_method(0, spec.Connection.CloseOk())
        assert peer.wait_eof(6), "the server must drop the connection"


@pytest.mark.parametrize("channel_max,frame_max", [
    (2047, 1024),      # below the 4096 minimum (rule 4)
    (2047, 262144),    # above the server's 131072
    (2047, 0),         # 0 = "no limit": above the server's limit
    (0, 131072),       # 0 = "no limit": above the server's 2047
    (4000, 131072),    # above the server's 2047
], ids=["frame_max-1024", "frame_max-262144", "frame_max-0", "channel_max-0", "channel_max-4000"])
def test_tune_ok_out_of_range_is_refused(peer, channel_max, frame_max):
    # Rule 4: tune-ok values above the server's (or frame-max below 4096) -> the server closes
    # the connection without opening it. RabbitMQ 3.10 sends nothing and drops the socket.
    _until_tune(peer)
    peer.send_method(0, spec.Connection.TuneOk(channel_max=channel_max, frame_max=frame_max,
                                               heartbeat=0))
    peer.send_method(0, spec.Connection.Open(virtual_host="/"))
    _assert_refused_before_open(peer, wait_eof=(frame_max == 1024))


@pytest.mark.parametrize("case", ["open-before-tune-ok", "start-ok-twice", "garbage"])
def test_handshake_violations_are_refused(peer, case):
    # Out-of-order handshake methods or garbage before the connection is open: never opened
    # (RabbitMQ: no reply, socket dropped).
    if case == "garbage":
        peer.send(PROTOCOL_HEADER)
        peer.expect(spec.Connection.Start)
        peer.send(b"\x00" * 20)
    else:
        _until_tune(peer)
        if case == "open-before-tune-ok":
            peer.send_method(0, spec.Connection.Open(virtual_host="/"))
        else:
            peer.send_method(0, spec.Connection.StartOk(
                client_properties={}, mechanism="PLAIN", response=b"\0guest\0guest",
                locale="en_US"))
    _assert_refused_before_open(peer)


def test_heartbeat_with_payload_is_501(opened):
    # A heartbeat frame must be empty: RabbitMQ 501 "FRAME_ERROR - type 8, all octets = <<"xx">>:
    # unknown_frame".
    opened.send(frame(8, 0, b"xx"))
    assert_connection_close(opened, 501)


@pytest.mark.parametrize("method", [spec.Connection.Open(virtual_host="/"),
                                    spec.Connection.TuneOk(channel_max=10, frame_max=131072),
                                    spec.Connection.CloseOk(), spec.Connection.Blocked("x"),
                                    spec.Connection.Unblocked()],
                         ids=["open-again", "tune-ok-again", "unsolicited-close-ok",
                              "client-blocked", "client-unblocked"])
def test_connection_method_out_of_state_is_504(opened, method):
    # RabbitMQ: 504 "CHANNEL_ERROR - unexpected method in connection state running", with the
    # offending method's class/method ids (the spec would suggest 503 COMMAND_INVALID); also
    # for a client's connection.blocked / unblocked (server-sent methods; RabbitMQ 3.10.8,
    # checked 2026-11-25).
    opened.send_method(0, method)
    assert_connection_close(opened, 504, method.CLASS_ID, method.METHOD_ID)


def test_unsolicited_channel_close_ok_is_503(opened):
    # RabbitMQ: 503 "COMMAND_INVALID - unimplemented method" (20/41) for a channel.close-ok that
    # answers no channel.close.
    opened.send_method(1, spec.Channel.CloseOk())
    assert_connection_close(opened, 503, 20, 41)


def test_channel_count_above_channel_max_is_530(peer):
    # RabbitMQ enforces channel_max as a *count* of open channels: 530 NOT_ALLOWED "number of
    # channels opened (3) has reached the negotiated channel_max (3)".
    peer.open(channel_max=3)
    for c in (1, 2, 3):
        peer.open_channel(c)
    peer.send_method(4, spec.Channel.Open())
    assert_connection_close(peer, 530)


def test_channel_id_above_channel_max_is_accepted(peer):
    # Spec [002]: a channel number above channel-max is illegal. RabbitMQ 3.10 only counts open
    # channels, so channel 11 with channel_max 10 (one channel open) gets channel.open-ok.
    peer.open(channel_max=10)
    peer.open_channel(11)
