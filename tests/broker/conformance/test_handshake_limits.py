"""Limits that protect the broker from unauthenticated clients, against both brokers
(RabbitMQ 3.10.8 behaviour observed on this machine, 2026-11-25):

- frames before connection.tune-ok may carry at most 4096 bytes of payload (RabbitMQ's
  ``initial_frame_max``), which caps a connection.start-ok (its SASL response, client
  properties): a 4097-byte start-ok gets no connection.tune and the socket is dropped
  (RabbitMQ: silently, ~3 s later);
- ``handshake_timeout`` (RabbitMQ's default 10 s): a connection that has not finished its
  handshake is dropped.

frame_max, channel_max and max_connections after the handshake are in test_wire.py and
tests/broker/test_server.py; max_message_size (RabbitMQ: 406 after the whole message) in
tests/broker/test_broker_security.py (RabbitMQ's 128 MiB default is too big to send to a shared broker).
"""

from __future__ import annotations

import threading
import time

import pytest

from raw_amqp import RawPeer
from spark_amqp.protocol import PROTOCOL_HEADER, spec


def _start_ok(pad: int) -> spec.Connection.StartOk:
    return spec.Connection.StartOk(client_properties={"pad": "x" * pad}, mechanism="PLAIN",
                                   response=b"\0guest\0guest", locale="en_US")


def _payload_size(pad: int) -> int:
    return len(_start_ok(pad).encode())


def _pad_for(payload: int) -> int:
    pad = payload - _payload_size(0)
    assert _payload_size(pad) == payload
    return pad


@pytest.mark.parametrize("payload,accepted", [(4096, True), (4097, False)])
def test_start_ok_larger_than_initial_frame_max_is_refused(broker_url, payload, accepted):
    peer = RawPeer(broker_url)
    try:
        peer.send(PROTOCOL_HEADER)
        peer.expect(spec.Connection.Start)
        peer.send_method(0, _start_ok(_pad_for(payload)))
        ev = peer.next_event(6)
        if accepted:
            assert ev is not None and isinstance(ev.method, spec.Connection.Tune), ev
            return
        assert ev is None or isinstance(ev.method, spec.Connection.Close), ev
        if ev is not None:
            peer.send_method(0, spec.Connection.CloseOk())
        assert peer.wait_eof(8), "the server must drop a connection whose start-ok is too large"
    finally:
        peer.close()


def test_unfinished_handshake_dropped_after_10_s(embedded_broker, rabbitmq_url):
    """Both brokers at once (one 10 s wait, not two): a client that got connection.start and
    then says nothing is dropped ~10 s after connecting (RabbitMQ's handshake_timeout)."""
    results: dict[str, float | None] = {}

    def run(name: str, url: str) -> None:
        peer = RawPeer(url)
        t0 = time.monotonic()
        peer.send(PROTOCOL_HEADER)
        peer.expect(spec.Connection.Start)
        results[name] = time.monotonic() - t0 if peer.wait_eof(20) else None
        peer.close()

    threads = [threading.Thread(target=run, args=a) for a in (("embedded", embedded_broker.url),
                                                              ("rabbitmq", rabbitmq_url))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for name in ("embedded", "rabbitmq"):
        took = results.get(name)
        assert took is not None, f"{name}: a silent client was not dropped within 20 s"
        assert 8.0 <= took <= 15.0, f"{name}: dropped after {took:.1f} s, expected ~10 s"
