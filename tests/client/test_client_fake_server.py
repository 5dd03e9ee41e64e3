"""Client behaviour that needs a misbehaving peer: a scripted fake server (ephemeral port)
and the fault proxy (tests/faults_proxy.py) stalling the path to the real RabbitMQ."""

from __future__ import annotations

import ssl
import threading
import time

import pytest
from client_fakes import FakeServer
from faults_proxy import FaultProxy

from spark_amqp.client import ConnectionLost, ProtocolMismatch, connect
from spark_amqp.protocol import Heartbeat, decode_table, spec
from spark_amqp.protocol.errors import (
    AccessRefused, ChannelErrorCode, ConnectionForced, NotAllowed,
)


def _no_io_threads_left(timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not [t for t in threading.enumerate() if t.name.startswith("spark-amqp-io")]:
            return True
        time.sleep(0.02)
    return False


def test_heartbeat_timeout_detected_fake_server():
    """Handshake with heartbeat=1, then the server goes silent (reads nothing, sends
    nothing): the client must give up after 2 missed intervals (RabbitMQ docs, heartbeats)."""
    with FakeServer(lambda side: side.handshake(heartbeat=1)) as srv:
        conn = connect(srv.url, heartbeat=1)
        assert conn.heartbeat == 1
        t0 = time.monotonic()
        with pytest.raises(ConnectionLost, match="heartbeat"):
            conn.channel()  # channel.open never answered
        elapsed = time.monotonic() - t0
        assert 1.5 <= elapsed <= 3.5, elapsed
        assert not conn.is_open
        conn.close()
    assert srv.error is None
    assert _no_io_threads_left()


def test_client_sends_heartbeats_when_idle():
    seen = []

    def script(side):
        side.handshake(heartbeat=1)
        t_end = time.monotonic() + 2.2
        while time.monotonic() < t_end:
            try:
                ev = side.recv_event(timeout=0.5)
            except OSError:
                continue
            if isinstance(ev, Heartbeat):
                seen.append(time.monotonic())
            side.sock.sendall(side.sm.send_heartbeat())
        finished.set()

    finished = threading.Event()
    with FakeServer(script) as srv:
        with connect(srv.url, heartbeat=1):
            finished.wait(5)
    assert srv.error is None
    assert len(seen) >= 3, seen  # every heartbeat/2 of send-silence


@pytest.mark.rabbitmq
def test_heartbeat_timeout_detected_through_frozen_proxy(rabbitmq_url):
    proxy = FaultProxy(rabbitmq_url)
    try:
        conn = connect(proxy.url, heartbeat=1)
        ch = conn.channel()
        q = ch.queue_declare("", exclusive=True).queue
        ch.basic_consume(q)
        proxy.stall()
        t0 = time.monotonic()
        with pytest.raises(ConnectionLost):
            ch.drain(timeout=10)
        assert time.monotonic() - t0 <= 3.5
        conn.close()
    finally:
        proxy.close()


def test_connection_timeout_when_server_never_answers():
    with FakeServer(lambda side: side.recv_event()) as srv:
        t0 = time.monotonic()
        with pytest.raises(ConnectionLost, match="timed out"):
            connect(srv.url + "?connection_timeout=300")
        assert time.monotonic() - t0 < 2


def test_connection_refused_is_connection_lost():
    import socket
    s = socket.create_server(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ConnectionLost, match="cannot connect"):
        connect(f"amqp://127.0.0.1:{port}")
    assert isinstance(ConnectionLost("x"), OSError)


def test_protocol_header_mismatch():
    def script(side):
        side.sock.recv(8)
        side.sock.sendall(b"AMQP\x01\x01\x00\x09")

    with FakeServer(script) as srv:
        with pytest.raises(ProtocolMismatch, match="0-9-1"):
            connect(srv.url)


def test_external_and_amqplain_mechanisms():
    for mech, response in (("external", b""),
                           ("amqplain", None)):
        with FakeServer(lambda side: side.handshake(mechanisms=b"PLAIN AMQPLAIN EXTERNAL")) as srv:
            with connect(srv.url, auth_mechanism=mech):
                pass
            ok = srv.side.start_ok
        assert ok.mechanism == mech.upper()
        if response is not None:
            assert ok.response == response
        else:
            table, _ = decode_table(len(ok.response).to_bytes(4, "big") + ok.response)
            assert table == {"LOGIN": "guest", "PASSWORD": "guest"}
        caps = ok.client_properties["capabilities"]
        assert caps["authentication_failure_close"] and caps["consumer_cancel_notify"]


def test_mechanism_not_offered():
    with FakeServer(lambda side: side.handshake(mechanisms=b"PLAIN")) as srv:
        with pytest.raises(AccessRefused, match="EXTERNAL"):
            connect(srv.url, auth_mechanism="external")


def test_login_failure_without_close_is_access_refused():
    """A broker without authentication_failure_close support just drops the socket."""
    def script(side):
        side.recv_event()
        side.send(0, spec.Connection.Start(0, 9, {}, b"PLAIN", b"en_US"))
        side.recv_method()
        side.sock.close()

    with FakeServer(script) as srv:
        with pytest.raises(AccessRefused) as ei:
            connect(srv.url)
    text = str(ei.value)
    assert ei.value.reply_code == 403 and ei.value.connection_level
    assert "closed the connection during authentication" in text
    assert "user 'guest' or its password is probably wrong (mechanism PLAIN)" in text
    assert "or the network/broker failed" in text
    assert "password is wrong" not in text  # a guess, not a certainty


def test_connection_cut_while_waiting_for_secure_or_tune_after_secure():
    """EOF after a connection.secure round is the same probable-login-failure guess."""
    def script(side):
        side.recv_event()
        side.send(0, spec.Connection.Start(0, 9, {}, b"PLAIN", b"en_US"))
        side.recv_method()
        side.send(0, spec.Connection.Secure(b"challenge"))
        side.recv_method()  # secure-ok
        side.sock.close()

    with FakeServer(script) as srv:
        with pytest.raises(AccessRefused, match="probably wrong .*network/broker failed"):
            connect(srv.url)
    assert isinstance(srv.side.received[-1].method, spec.Connection.SecureOk)


def test_tune_negotiation_lower_non_zero():
    with FakeServer(lambda side: side.handshake(heartbeat=10, frame_max=8192, channel_max=0)) as srv:
        with connect(srv.url + "?heartbeat=30&channel_max=100") as conn:
            assert (conn.heartbeat, conn.frame_max, conn.channel_max) == (10, 8192, 100)
        tune_ok = srv.side.tune_ok
        assert (tune_ok.heartbeat, tune_ok.frame_max, tune_ok.channel_max) == (10, 8192, 100)
    with FakeServer(lambda side: side.handshake(heartbeat=10)) as srv:
        with connect(srv.url, heartbeat=0) as conn:
            assert conn.heartbeat == 0
    with FakeServer(lambda side: side.handshake(heartbeat=10)) as srv:
        with connect(srv.url) as conn:  # no preference: the server's value
            assert conn.heartbeat == 10


def test_connection_close_from_server_wakes_waiters():
    def script(side):
        side.handshake()
        ch, m = side.recv_method()  # channel.open
        side.send(ch, spec.Channel.OpenOk(b""))
        side.recv_method()  # queue.declare: answer with a forced connection close
        side.send(0, spec.Connection.Close(320, "CONNECTION_FORCED - broker shutdown", 0, 0))
        side.recv_method()  # close-ok

    with FakeServer(script) as srv:
        conn = connect(srv.url)
        ch = conn.channel()
        with pytest.raises(ConnectionForced) as ei:
            ch.queue_declare("q")
        assert ei.value.reply_code == 320 and "shutdown" in ei.value.reply_text
        with pytest.raises(ConnectionForced):
            ch.basic_publish(b"x")
        with pytest.raises(ConnectionForced):
            conn.channel()
        assert not conn.is_open and not ch.is_open
        conn.close()
        srv.done.wait(5)
    assert srv.error is None
    assert isinstance(srv.side.received[-1].method, spec.Connection.CloseOk)


def test_protocol_violation_by_server_closes_connection():
    """basic.deliver on a channel that was never opened: the client answers 504 CHANNEL_ERROR
    with connection.close (as RabbitMQ does for the mirror-image violation)."""
    def script(side):
        side.handshake()
        # bypass the server state machine: raw frame on channel 5
        from spark_amqp.protocol import encode_message
        side.sock.sendall(encode_message(5, spec.Basic.Deliver("t", 1, False, "", "q"), None, b"x"))
        ch, m = side.recv_method()
        side.close_sent = m

    with FakeServer(script) as srv:
        conn = connect(srv.url)
        srv.done.wait(5)
        with pytest.raises(ChannelErrorCode):
            conn.channel()
        conn.close()
    assert srv.error is None
    assert srv.side.close_sent.reply_code == 504


def test_vhost_refused_is_not_allowed():
    def script(side):
        side.recv_event()
        side.send(0, spec.Connection.Start(0, 9, {}, b"PLAIN", b"en_US"))
        side.recv_method()
        side.send(0, spec.Connection.Tune(0, 131072, 0))
        side.recv_method()
        side.recv_method()
        side.send(0, spec.Connection.Close(530, "NOT_ALLOWED - vhost x not found", 10, 40))
        side.recv_method()

    with FakeServer(script) as srv:
        with pytest.raises(NotAllowed, match="vhost"):
            connect(srv.url)


# ----------------------------------------------------------------------------- TLS

def _server_context(cert: str, key: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx


def _tls_script(side):
    side.handshake(mechanisms=b"PLAIN EXTERNAL")
    ch, m = side.recv_method()
    side.send(ch, spec.Channel.OpenOk(b""))
    ch, m = side.recv_method()  # queue.declare
    side.send(ch, spec.Queue.DeclareOk(m.queue, 7, 0))
    side.recv_method()  # connection.close
    side.send(0, spec.Connection.CloseOk())


def test_tls_handshake_and_amqp_over_tls(tls_files):
    ca, cert, key = tls_files
    with FakeServer(_tls_script, tls_context=_server_context(cert, key)) as srv:
        url = srv.url.replace("127.0.0.1", "localhost") + f"?cacertfile={ca}"
        with connect(url) as conn:
            assert conn._transport.version.startswith("TLS")
            assert conn.channel().queue_declare("q").message_count == 7
        srv.done.wait(5)
    assert srv.error is None


def test_tls_verify_failure_raises_ssl_error(tls_files):
    ca, cert, key = tls_files
    with FakeServer(lambda side: None, tls_context=_server_context(cert, key)) as srv:
        with pytest.raises(ssl.SSLCertVerificationError):
            connect(srv.url.replace("127.0.0.1", "localhost"))  # system CAs: self-signed fails


def test_tls_verify_none_accepts_self_signed(tls_files):
    _, cert, key = tls_files
    with FakeServer(_tls_script, tls_context=_server_context(cert, key)) as srv:
        with connect(srv.url + "?verify=verify_none") as conn:
            assert conn.channel().queue_declare("q").message_count == 7


def test_tls_client_certificate_presented(tls_files):
    ca, cert, key = tls_files
    ctx = _server_context(cert, key)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(ca)
    peer = {}

    def script(side):
        peer["cert"] = side.sock.getpeercert()
        _tls_script(side)

    with FakeServer(script, tls_context=ctx) as srv:
        url = (srv.url + f"?cacertfile={ca}&certfile={cert}&keyfile={key}"
               "&server_name_indication=localhost&auth_mechanism=external")
        with connect(url) as conn:
            conn.channel().queue_declare("q")
        srv.done.wait(5)
    assert srv.error is None
    assert dict(x[0] for x in peer["cert"]["subject"])["commonName"] == "localhost"
    assert srv.side.start_ok.mechanism == "EXTERNAL"


# ------------------------------------------------------------------ confirms, flow, blocked

def _open_channel(side):
    ch, m = side.recv_method()
    assert isinstance(m, spec.Channel.Open)
    side.send(ch, spec.Channel.OpenOk(b""))
    return ch


def _confirm_mode(side):
    ch = _open_channel(side)
    _, m = side.recv_method()
    assert isinstance(m, spec.Confirm.Select)
    side.send(ch, spec.Confirm.SelectOk())
    return ch


def _confirm_after(side, publishes: int, *confirms):
    """Server side: confirm mode, read ``publishes`` basic.publish, then send ``confirms``."""
    side.handshake()
    ch = _confirm_mode(side)
    for _ in range(publishes):
        side.recv_method()  # basic.publish (content)
    for m in confirms:
        side.send(ch, m)


def test_confirms_out_of_order_multiple_and_nacks():
    """Broker confirms may come out of order, single or ``multiple`` (up to and including)."""
    def script(side):
        _confirm_after(side, 6,
                       spec.Basic.Ack(3, False),
                       spec.Basic.Nack(5, False, False),
                       spec.Basic.Ack(2, True),   # 1, 2 (3 already)
                       spec.Basic.Ack(3, False),  # duplicate: ignored
                       spec.Basic.Nack(6, True, False))  # 4 and 6 (5 already)

    from spark_amqp.client import PublishNacked
    with FakeServer(script) as srv:
        with connect(srv.url) as conn:
            ch = conn.channel()
            ch.confirm_select()
            assert ch.publish_batch([(b"%d" % i,) for i in range(6)]) == [1, 2, 3, 4, 5, 6]
            with pytest.raises(PublishNacked) as ei:
                ch.wait_for_confirms(timeout=5)
            assert ei.value.result.acked == 3 and ei.value.result.nacked == [4, 5, 6]
            assert ch.in_flight == 0
    assert srv.error is None


def test_keep_unconfirmed_messages_until_settled():
    """keep_unconfirmed: the messages of unsettled publishes, in publish order and as complete
    publish_batch items, until an ack or nack settles them (out of order included); what the
    sink publishes again after a lost connection."""
    acked = threading.Event()

    def script(side):
        _confirm_after(side, 4, spec.Basic.Ack(3, False), spec.Basic.Nack(1, True, False))
        acked.wait(5)

    with FakeServer(script) as srv:
        with connect(srv.url) as conn:
            ch = conn.channel()
            with pytest.raises(RuntimeError, match="confirm mode"):
                ch.keep_unconfirmed()
            ch.confirm_select()
            ch.keep_unconfirmed()
            ch.publish_batch([(b"a",), (b"b", "ex", None, None, True)], routing_key="rk")
            ch.basic_publish(b"c", "", "q")
            ch.basic_publish(b"d", "", "q", mandatory=True)
            deadline = time.monotonic() + 10
            while ch.in_flight > 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert ch.unconfirmed_messages() == [(b"b", "ex", "rk", None, True),
                                                 (b"d", "", "q", None, True)]
            acked.set()
    assert srv.error is None


def test_confirm_timeout_and_window_wakeup():
    release = threading.Event()

    def script(side):
        side.handshake()
        ch = _confirm_mode(side)
        side.recv_method()
        side.recv_method()
        release.wait(5)
        side.send(ch, spec.Basic.Ack(2, True))

    from spark_amqp.client import ConfirmTimeout
    with FakeServer(script) as srv:
        with connect(srv.url) as conn:
            ch = conn.channel()
            ch.confirm_select()
            ch.max_in_flight = 2
            ch.basic_publish(b"1")
            ch.basic_publish(b"2")
            with pytest.raises(ConfirmTimeout) as ei:
                ch.wait_for_confirms(timeout=0.2)
            assert ei.value.outstanding == 2
            ch.window_timeout = 0.1
            with pytest.raises(ConfirmTimeout):
                ch.basic_publish(b"not sent: the window stays full")
            ch.window_timeout = None
            threading.Timer(0.2, release.set).start()
            t0 = time.monotonic()
            assert ch.basic_publish(b"3") == 3  # blocked by the window until the ack
            assert time.monotonic() - t0 >= 0.15
            assert ch.in_flight == 1


def test_blocked_unblocked_and_flow():
    events = []
    got_flow_ok = threading.Event()

    def script(side):
        side.handshake()
        ch = _open_channel(side)
        side.send(0, spec.Connection.Blocked("low on memory"))
        side.send(0, spec.Connection.Unblocked())
        side.send(ch, spec.Channel.Flow(False))
        _, m = side.recv_method()
        assert isinstance(m, spec.Channel.FlowOk) and m.active is False
        got_flow_ok.set()

    with FakeServer(script) as srv:
        with connect(srv.url) as conn:
            conn.on_blocked = lambda reason: events.append(("blocked", reason, conn.blocked))
            conn.on_unblocked = lambda: events.append(("unblocked", conn.blocked))
            ch = conn.channel()
            assert got_flow_ok.wait(5)
            assert events == [("blocked", "low on memory", True), ("unblocked", False)]
            assert ch.flow_active is False
    assert srv.error is None


def test_update_secret_is_sent():
    def script(side):
        side.handshake()
        _, m = side.recv_method()
        assert isinstance(m, spec.Connection.UpdateSecret)
        assert m.new_secret == b"token-2" and m.reason == "refresh"
        side.send(0, spec.Connection.UpdateSecretOk())
        seen.set()

    seen = threading.Event()
    with FakeServer(script) as srv:
        with connect(srv.url) as conn:
            conn.update_secret("token-2", "refresh")
            assert seen.wait(5)
    assert srv.error is None


def test_socket_reset_mid_rpc_is_connection_lost():
    def script(side):
        side.handshake()
        _open_channel(side)
        side.recv_method()
        side.sock.close()

    with FakeServer(script) as srv:
        conn = connect(srv.url)
        ch = conn.channel()
        with pytest.raises(ConnectionLost):
            ch.queue_declare("q")
        with pytest.raises(ConnectionLost):
            ch.basic_publish(b"x")
        conn.close()


def test_rpc_timeout_drops_a_connection_whose_broker_never_answers():
    """A live broker that keeps the socket open but never answers queue.declare: with
    ``rpc_timeout`` the call raises ConnectionLost naming the method and the connection is
    dropped (not reused with an unknown channel state); without it the caller would hang."""
    def script(side):
        side.handshake()
        _open_channel(side)
        side.recv_method()          # queue.declare: never answered
        side.answer_close(10)

    with FakeServer(script) as srv:
        conn = connect(srv.url, rpc_timeout=0.5)
        ch = conn.channel()
        t0 = time.monotonic()
        with pytest.raises(ConnectionLost, match=r"queue\.declare.*0\.5 s \(rpc_timeout\)"):
            ch.queue_declare("q")
        assert 0.4 < time.monotonic() - t0 < 5
        assert not conn.is_open
        with pytest.raises(ConnectionLost):
            conn.channel()
        conn.close()
    assert _no_io_threads_left()


def test_rpc_timeout_must_be_positive():
    with pytest.raises(ValueError, match="rpc_timeout"):
        connect("amqp://127.0.0.1:1/", rpc_timeout=0)


def test_tls_large_message_and_heartbeat_timeout(tls_files):
    """1 MiB over TLS (many records and frames), then the server goes silent: dead-peer
    detection must work through the TLS transport too."""
    _, cert, key = tls_files
    big = bytes(range(256)) * 4096

    def script(side):
        side.handshake(heartbeat=1)
        ch, _ = side.recv_method()
        side.send(ch, spec.Channel.OpenOk(b""))
        ch, m = side.recv_method()
        assert isinstance(m, spec.Basic.Get)
        from spark_amqp.protocol import BasicProperties
        side.sock.sendall(side.sm.send_message(ch, spec.Basic.GetOk(1, False, "", "q", 0),
                                               BasicProperties(message_id="big"), big))
        # then silence

    with FakeServer(script, tls_context=_server_context(cert, key)) as srv:
        conn = connect(srv.url + "?verify=verify_none", heartbeat=1)
        ch = conn.channel()
        d = ch.basic_get("q")
        assert d.body == big and d.properties.message_id == "big"
        t0 = time.monotonic()
        with pytest.raises(ConnectionLost, match="heartbeat"):
            ch.basic_get("q")
        assert time.monotonic() - t0 <= 3.5
        conn.close()
    assert srv.error is None


def test_close_does_not_hang_behind_a_blocked_writer():
    """The server stops reading (as RabbitMQ does for a blocked publisher): a publishing
    thread sticks in sendall; close(timeout) must still return and unblock it."""
    stop_reading = threading.Event()

    def script(side):
        side.handshake()
        _open_channel(side)
        stop_reading.set()

    with FakeServer(script) as srv:
        conn = connect(srv.url)
        ch = conn.channel()
        assert stop_reading.wait(5)
        errors = []

        def publisher():
            try:
                while True:
                    ch.basic_publish(b"x" * 65536)
            except Exception as exc:
                errors.append(exc)

        t = threading.Thread(target=publisher, daemon=True)
        t.start()
        time.sleep(0.5)  # socket buffers full, publisher blocked in sendall
        assert t.is_alive()
        t0 = time.monotonic()
        conn.close(timeout=0.5)
        assert time.monotonic() - t0 < 3
        t.join(5)
        assert not t.is_alive() and errors
        from spark_amqp.client import ConnectionClosed
        assert isinstance(errors[0], (ConnectionClosed, ConnectionLost))


def test_slow_callback_is_not_a_dead_peer():
    """A consumer callback blocking the I/O thread for > 2 heartbeat intervals must not be
    mistaken for a dead broker: data waiting in the socket is read first."""
    def script(side):
        side.handshake(heartbeat=1)
        ch, _ = side.recv_method()
        side.send(ch, spec.Channel.OpenOk(b""))
        ch, m = side.recv_method()
        side.send(ch, spec.Basic.ConsumeOk("ctag"))
        from spark_amqp.protocol import BasicProperties
        for i in range(2):
            side.sock.sendall(side.sm.send_message(ch, spec.Basic.Deliver("ctag", i + 1, False, "", "q"),
                                                   BasicProperties(), b"m"))
        t_end = time.monotonic() + 4
        while time.monotonic() < t_end:  # keep the heartbeats coming
            side.sock.sendall(side.sm.send_heartbeat())
            time.sleep(0.3)

    got = []

    def slow(d):
        got.append(d.delivery_tag)
        if d.delivery_tag == 1:
            time.sleep(2.6)  # > 2 intervals of heartbeat=1 without reading

    with FakeServer(script) as srv:
        with connect(srv.url, heartbeat=1) as conn:
            conn.channel().basic_consume("q", no_ack=True, callback=slow)
            time.sleep(3.2)
            assert got == [1, 2] and conn.is_open, conn.error
