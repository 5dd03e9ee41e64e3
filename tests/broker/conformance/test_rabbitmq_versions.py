"""RabbitMQ 3.10 vs 4.3: each row of docs/broker/rabbitmq-versions.md, on the embedded broker
in both modes (``rabbitmq_version="3.10"`` / ``"4.3"``) and on the local RabbitMQ 3.10.8,
which must agree with the 3.10 mode. The 4.3 expectations (reply codes and texts) come from
rabbitmq/rabbitmq-server at tag v4.3.0, cited in spark_amqp/broker/versions.py.
"""

from __future__ import annotations

import time

import pika
import pytest

from conformance_helpers import Amqp, broker_closes_channel, broker_closes_connection, get
from raw_amqp import RawPeer
from spark_amqp.protocol import PROTOCOL_HEADER, spec

MiB = 1024 * 1024


@pytest.fixture(params=["3.10", "4.3", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def versioned(request, unique):
    """(version the broker behaves like, :class:`Amqp` helper): the embedded broker in each
    mode, and RabbitMQ 3.10.8 (whose expectations are those of "3.10")."""
    if request.param == "rabbitmq":
        version, url = "3.10", request.getfixturevalue("rabbitmq_url")
    else:
        fx = "embedded_broker_310" if request.param == "3.10" else "embedded_broker_43"
        version, url = request.param, request.getfixturevalue(fx).url
    helper = Amqp(url, unique)
    yield version, helper
    helper.cleanup()


def _dead_letter_pair(amqp: Amqp, ch, **arguments) -> tuple[str, str]:
    """A quorum queue dead-lettering (via the default exchange) into a durable DLQ."""
    dlq = amqp.queue(ch, "dlq", durable=True)
    args = {"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
    args.update(arguments)
    q = amqp.queue(ch, "qq", durable=True, arguments=args)
    return q, dlq


def test_quorum_queue_default_delivery_limit_dead_letters_the_21st_return(versioned):
    # 4.x: x-delivery-limit defaults to 20 (rabbit_quorum_queue DEFAULT_DELIVERY_LIMIT): the
    # 21st failed delivery (basic.reject requeue=true counts in every version) dead-letters the
    # message with reason delivery_limit. 3.10: no default limit.
    version, amqp = versioned
    ch = amqp.channel()
    q, dlq = _dead_letter_pair(amqp, ch)
    ch.basic_publish("", q, b"poison")
    for i in range(1, 21):
        m = amqp.wait_for(lambda: get(ch, q), what=f"delivery {i}")
        assert m.body == b"poison" and m.redelivered == (i > 1)
        ch.basic_reject(m.method.delivery_tag, requeue=True)
    m = amqp.wait_for(lambda: get(ch, q), what="delivery 21")
    assert m.headers.get("x-delivery-count") == 20
    ch.basic_reject(m.method.delivery_tag, requeue=True)
    if version == "4.3":
        dead = amqp.wait_for(lambda: get(ch, dlq, auto_ack=True), what="the dead-lettered message")
        assert dead.body == b"poison"
        death = dead.headers["x-death"][0]
        assert (death["reason"], death["queue"], death["count"]) == ("delivery_limit", q, 1)
        assert get(ch, q) is None
    else:
        m = amqp.wait_for(lambda: get(ch, q), what="delivery 22")
        assert m.headers.get("x-delivery-count") == 21
        assert get(ch, dlq) is None


def test_requeueing_nack_counts_toward_the_limit_only_in_3_10(versioned):
    # 4.3: basic.nack requeue=true is a ``requeue`` (rabbit_fifo return, DeliveryFailed=false):
    # x-acquired-count grows, x-delivery-count and the limit do not; basic.reject requeue=true
    # is ``{modify, true, ...}`` and counts (release-notes/4.3.0.md, "unlimited explicit
    # returns"). 3.10 counts both.
    version, amqp = versioned
    ch = amqp.channel()
    q, dlq = _dead_letter_pair(amqp, ch, **{"x-delivery-limit": 1})
    ch.basic_publish("", q, b"m")
    for i in range(3):
        m = amqp.wait_for(lambda: get(ch, q), what=f"delivery after {i} nacks")
        if version == "4.3":
            assert m.headers.get("x-acquired-count") == (i or None)
            assert "x-delivery-count" not in m.headers
        ch.basic_nack(m.method.delivery_tag, requeue=True)
        if version == "3.10" and i == 1:
            break   # the 2nd counted return is over the limit of 1
    if version == "3.10":
        dead = amqp.wait_for(lambda: get(ch, dlq, auto_ack=True), what="dead-lettered after 2 nacks")
        assert dead.headers["x-death"][0]["reason"] == "delivery_limit"
        return
    m = amqp.wait_for(lambda: get(ch, q), what="delivery after 3 nacks")
    ch.basic_reject(m.method.delivery_tag, requeue=True)          # failed delivery 1: kept
    m = amqp.wait_for(lambda: get(ch, q), what="delivery after a reject")
    assert (m.headers.get("x-delivery-count"), m.headers.get("x-acquired-count")) == (1, 4)
    ch.basic_reject(m.method.delivery_tag, requeue=True)          # failed delivery 2: > 1
    dead = amqp.wait_for(lambda: get(ch, dlq, auto_ack=True), what="dead-lettered after 2 rejects")
    assert dead.headers["x-death"][0]["reason"] == "delivery_limit"


def test_lost_connection_counts_as_a_failed_delivery(versioned):
    # Every version: unacked deliveries of a connection that goes away return as failed
    # deliveries (4.3: rabbit_fifo consumer ``down`` -> return_all(DeliveryFailed=true)).
    # With x-delivery-limit=0 the first such return dead-letters; what a crashing Spark
    # query does to its in-flight batch.
    _version, amqp = versioned
    ch = amqp.channel()
    q, dlq = _dead_letter_pair(amqp, ch, **{"x-delivery-limit": 0})
    ch.basic_publish("", q, b"in-flight")
    c2 = amqp.connect()
    ch2 = c2.channel()
    assert amqp.wait_for(lambda: get(ch2, q), what="the delivery").body == b"in-flight"
    c2.close()   # unacked
    dead = amqp.wait_for(lambda: get(ch, dlq, auto_ack=True), what="the dead-lettered message")
    assert dead.headers["x-death"][0]["reason"] == "delivery_limit"


def test_max_message_size_default(versioned):
    # 4.x: max_message_size 16 MiB (deps/rabbit/Makefile), 3.10: 128 MiB. Above it: 406 on
    # the channel, "message size N is larger than configured max size M" (rabbit_channel
    # check_msg_size).
    version, amqp = versioned
    ch = amqp.channel()
    q = amqp.queue(ch, "big", durable=True)
    ch.confirm_delivery()
    body = b"x" * (16 * MiB + 1)
    if version == "4.3":
        with broker_closes_channel(406) as ei:
            ch.basic_publish("", q, body)
        assert ei.value.reply_text == ("PRECONDITION_FAILED - message size 16777217 is larger than "
                                       "configured max size 16777216")
    else:
        ch.basic_publish("", q, body)
        amqp.wait_counts(q, (1, 0))


def _tune_ok_open(peer: RawPeer, frame_max: int):
    peer.send(PROTOCOL_HEADER)
    peer.expect(spec.Connection.Start)
    peer.send_method(0, spec.Connection.StartOk(
        client_properties={}, mechanism="PLAIN",
        response=b"\0" + peer.user.encode() + b"\0" + peer.password.encode(), locale="en_US"))
    peer.expect(spec.Connection.Tune)
    peer.send_method(0, spec.Connection.TuneOk(channel_max=2047, frame_max=frame_max, heartbeat=0))
    peer.send_method(0, spec.Connection.Open(virtual_host="/"))
    return peer.next_event(3.0)


def test_frame_max_below_8192_is_refused_from_4_1(versioned):
    # 4.1+: FRAME_MIN_SIZE is 8192 (rabbit_framing.hrl), rabbit_reader refuses a smaller
    # tune-ok frame_max with 530 "negotiated frame_max = 4096 is lower than the minimum
    # allowed value (8192)". 3.10 accepts 4096.
    version, amqp = versioned
    peer = RawPeer(amqp.url)
    try:
        ev = _tune_ok_open(peer, 4096)
        if version == "4.3":
            assert ev is not None and isinstance(ev.method, spec.Connection.Close), ev
            assert ev.method.reply_code == 530
            assert ev.method.reply_text == ("NOT_ALLOWED - negotiated frame_max = 4096 is lower than "
                                            "the minimum allowed value (8192)")
        else:
            assert ev is not None and isinstance(ev.method, spec.Connection.OpenOk), ev
    finally:
        peer.close()


def test_global_qos_is_per_consumer_in_4_3(versioned):
    # 4.3: the deprecated feature global_qos is denied by default; basic.qos global=true is
    # handled as global=false (rabbit_channel at v4.3.0). 3.10: one window for the channel.
    version, amqp = versioned
    setup = amqp.channel()
    qa, qb = amqp.queue(setup, "qa", durable=True), amqp.queue(setup, "qb", durable=True)
    for q in (qa, qb):
        for i in range(3):
            setup.basic_publish("", q, b"%d" % i)
    conn = amqp.connect()
    ch = conn.channel()
    ch.basic_qos(prefetch_count=1, global_qos=True)
    got = []
    for q in (qa, qb):
        ch.basic_consume(q, lambda _c, m, p, b: got.append(b))
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        conn.process_data_events(time_limit=0.05)
    assert len(got) == (2 if version == "4.3" else 1)


def test_transient_non_exclusive_queue_is_refused_in_4_3(versioned):
    # 4.3: transient_nonexcl_queues is denied_by_default; rabbit_amqqueue:declare answers
    # {protocol_error, internal_error, Warning}: connection.close 541 with the deprecated
    # feature's text (cut to 255 characters). Durable or exclusive queues are fine.
    version, amqp = versioned
    ch = amqp.channel()
    amqp.queue(ch, "durable", durable=True)
    amqp.queue(ch, "exclusive", exclusive=True)
    if version == "4.3":
        with broker_closes_connection(541) as ei:
            amqp.queue(ch, "transient")
        assert ei.value.reply_text.startswith(
            "INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated.\n"
            "By default, this feature is not permitted anymore.\n")
    else:
        amqp.queue(ch, "transient")


@pytest.mark.parametrize("arguments,refused", [
    ({"x-queue-version": 1}, True), ({"x-queue-version": 2}, False), ({"x-queue-mode": "lazy"}, False),
], ids=["version-1", "version-2", "mode-lazy"])
def test_classic_queue_v1_arguments(versioned, arguments, refused):
    # 4.3 removed CQv1: x-queue-version other than 2 -> 406 (rabbit_amqqueue check_queue_version).
    # x-queue-mode is still accepted at tag v4.3.0 (no validator; still a classic queue
    # argument), although the release notes say it fails.
    version, amqp = versioned
    ch = amqp.channel()
    if version == "4.3" and refused:
        with broker_closes_channel(406) as ei:
            amqp.queue(ch, "cq", durable=True, arguments=arguments)
        assert ei.value.reply_text.endswith(": \"unsupported queue version '1'\"")
        assert ei.value.reply_text.startswith("PRECONDITION_FAILED - invalid arg 'x-queue-version' for queue")
    else:
        amqp.queue(ch, "cq", durable=True, arguments=arguments)


def test_published_x_death_is_not_continued_in_4_x(versioned):
    # 4.x keeps deaths as annotations and does not interpret an x-death header that a client
    # (re-)published (mc_amqpl is_internal_header; release-notes/4.0.1.md): dead-lettering
    # starts a new x-death (count 1). 3.10 continues the published entry (count 5 -> 6).
    version, amqp = versioned
    ch = amqp.channel()
    dlq = amqp.queue(ch, "dlq", durable=True)
    q = amqp.queue(ch, "src", durable=True, arguments={"x-dead-letter-exchange": "",
                                                        "x-dead-letter-routing-key": dlq})
    death = {"count": 5, "reason": "rejected", "queue": q, "exchange": "", "routing-keys": [q]}
    ch.basic_publish("", q, b"again", pika.BasicProperties(headers={"x-death": [death]}))
    m = amqp.wait_for(lambda: get(ch, q), what="the message")
    ch.basic_reject(m.method.delivery_tag, requeue=False)
    dead = amqp.wait_for(lambda: get(ch, dlq, auto_ack=True), what="the dead-lettered message")
    deaths = dead.headers["x-death"]
    assert len(deaths) == 1 and deaths[0]["queue"] == q and deaths[0]["reason"] == "rejected"
    assert deaths[0]["count"] == (1 if version == "4.3" else 6)
