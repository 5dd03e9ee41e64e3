"""The broker's heartbeats come from the protocol layer's state machine: its
``heartbeat_action`` / ``heartbeat_deadline`` decide when the broker sends a heartbeat and when
it drops a silent client (spec §4.2.7, rabbitmq.com/docs/heartbeats), fed with every read
(``note_received``) and write (``note_sent``). Checked here without waiting: on the sans-IO
state machine with given times, and on an in-process broker connection whose clock readings
are moved back. (tests/broker/test_robustness.py checks the same on real sockets, in real
time.)"""

from __future__ import annotations

import asyncio
import time

from spark_amqp.broker.config import BrokerConfig
from spark_amqp.broker.connection import AMQPServerProtocol
from spark_amqp.broker.server import Broker
from spark_amqp.protocol import encode_method, spec
from spark_amqp.protocol.connection import AMQPConnection, ConnectionState, Role
from spark_amqp.protocol.frames import HEARTBEAT_FRAME, PROTOCOL_HEADER

from rawclient import FakeTransport


def _open_server(heartbeat: int, now: float) -> AMQPConnection:
    """A server-role state machine negotiated up to OPEN at time ``now``."""
    s = AMQPConnection(Role.SERVER)
    s.receive_data(PROTOCOL_HEADER, now=now)
    s.send_method(0, spec.Connection.Start(0, 9, {}, b"PLAIN", b"en_US"), now=now)
    s.receive_method(0, spec.Connection.StartOk({}, "PLAIN", b"\0guest\0guest", "en_US"), now=now)
    s.send_method(0, spec.Connection.Tune(2047, 131072, heartbeat), now=now)
    s.receive_method(0, spec.Connection.TuneOk(2047, 131072, heartbeat), now=now)
    s.receive_method(0, spec.Connection.Open("/"), now=now)
    s.send_method(0, spec.Connection.OpenOk(), now=now)
    assert s.state is ConnectionState.OPEN and s.heartbeat == heartbeat
    return s


def test_note_received_keeps_the_peer_alive():
    s = _open_server(10, now=100.0)
    assert s.heartbeat_action(119.9) == "send"      # nothing sent for 5 s
    s.note_sent(now=119.9)
    assert s.heartbeat_action(120.0) == "dead"      # nothing received for 2 x 10 s
    s.note_received(now=115.0)                      # bytes the caller framed itself
    assert s.heartbeat_action(120.0) is None
    assert abs(s.heartbeat_deadline(120.0) - 4.9) < 1e-9   # the next send, before death at 135
    s.note_sent(now=134.0)
    assert s.heartbeat_action(134.9) is None
    assert s.heartbeat_action(135.0) == "dead"


def _broker_connection(loop, heartbeat: int) -> tuple[AMQPServerProtocol, FakeTransport]:
    broker = Broker(BrokerConfig(heartbeat=heartbeat), loop=loop)
    proto = AMQPServerProtocol(broker)
    t = FakeTransport()
    proto.connection_made(t)
    proto.data_received(b"".join((
        PROTOCOL_HEADER,
        encode_method(0, spec.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                                 response=b"\0guest\0guest", locale="en_US")),
        encode_method(0, spec.Connection.TuneOk(channel_max=2047, frame_max=131072,
                                                heartbeat=heartbeat)),
        encode_method(0, spec.Connection.Open(virtual_host="/")),
    )))
    assert proto.state == "opened" and proto.heartbeat == heartbeat
    t.out.clear()
    return proto, t


def test_broker_times_heartbeats_by_the_state_machine_deadline():
    loop = asyncio.new_event_loop()
    try:
        proto, t = _broker_connection(loop, 10)
        timer = proto._hb_timer
        assert timer is not None
        # armed at the state machine's deadline: the first send, 5 s after open-ok
        assert 4.0 < timer.when() - loop.time() <= 5.0
        now = time.monotonic()
        # quiet for 6 s both ways: the tick sends a heartbeat and re-arms
        proto.sm.note_sent(now - 6)
        proto.sm.note_received(now - 6)
        proto._heartbeat_tick()
        assert bytes(t.out) == HEARTBEAT_FRAME and not t.closed
        assert proto.sm.heartbeat_action(time.monotonic()) is None
        assert proto._hb_timer is not None
        # silent for 2 intervals while the broker reads: dropped
        proto.sm.note_received(now - 21)
        proto._heartbeat_tick()
        assert t.closed and proto.closed
    finally:
        loop.close()


def test_broker_does_not_drop_a_client_it_stopped_reading():
    loop = asyncio.new_event_loop()
    try:
        proto, t = _broker_connection(loop, 10)
        proto._pause_reading()    # flow control: the silence is the broker's
        proto.sm.note_received(time.monotonic() - 60)
        proto._heartbeat_tick()
        assert not t.closed and not proto.closed
        assert proto.sm.heartbeat_action(time.monotonic()) is None
    finally:
        proto._abort()
        loop.close()


def test_no_heartbeat_timer_when_heartbeats_are_off():
    loop = asyncio.new_event_loop()
    try:
        proto, t = _broker_connection(loop, 0)
        assert proto._hb_timer is None and proto.sm.heartbeat_deadline(time.monotonic()) is None
    finally:
        loop.close()
