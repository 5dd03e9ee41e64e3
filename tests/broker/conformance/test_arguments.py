"""Validation of declare arguments, binding arguments and message properties, and the
remaining equivalence rules. All of these are RabbitMQ behaviour (the spec leaves argument
semantics to the server); the reply codes and texts were observed on RabbitMQ 3.10.8."""

from __future__ import annotations

import pika
import pytest

from conformance_helpers import broker_closes_channel, broker_closes_connection, get


@pytest.mark.parametrize("args", [
    {"x-message-ttl": -1},                      # {value_negative,-1}
    {"x-message-ttl": "abc"},                   # "expected integer, got longstr"
    {"x-max-priority": 300},                    # {max_value_exceeded,300} (max 255)
    {"x-max-priority": -1},
    {"x-queue-type": "bogus"},                  # "unsupported queue type 'bogus'"
    {"x-overflow": "bogus"},                    # invalid_overflow
    {"x-max-length": -1},
    {"x-max-length-bytes": -1},
    {"x-expires": 0},                           # {value_zero,0}
    {"x-expires": -5},
    {"x-dead-letter-routing-key": "k"},         # routing_key_but_no_dlx_defined
    {"x-single-active-consumer": "yes"},        # {unacceptable_type,longstr}
    {"x-delivery-limit": 3},                    # only for quorum queues
], ids=lambda a: "-".join(f"{k}={v}" for k, v in a.items()))
def test_invalid_queue_argument_is_406(amqp, ch, args):
    # RabbitMQ: 406 PRECONDITION_FAILED "invalid arg '<name>' for queue ...".
    name = amqp.track_queue(amqp.unique("badarg"))
    with broker_closes_channel(406) as ei:
        ch.queue_declare(name, arguments=args)
    assert "invalid arg" in str(ei.value)
    assert amqp.counts(name) is None  # nothing was created


def test_unknown_queue_argument_is_accepted(amqp, ch):
    # RabbitMQ ignores arguments it does not know.
    q = amqp.queue(ch, arguments={"x-spark-amqp-unknown": 1})
    assert amqp.counts(q) == (0, 0)


@pytest.mark.parametrize("expiration", ["abc", "-5"])
def test_invalid_expiration_is_406(amqp, ch, expiration):
    # RabbitMQ: 406 "invalid expiration 'abc': no_integer" / "{value_negative,-5}".
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"x", pika.BasicProperties(expiration=expiration))
    with broker_closes_channel(406):
        ch.queue_declare(q, passive=True)


def test_invalid_x_match_is_406(amqp, ch):
    # RabbitMQ: 406 "Invalid x-match field value ...; expected all, any, all-with-x, or any-with-x".
    x = amqp.exchange(ch, "headers")
    q = amqp.queue(ch)
    with broker_closes_channel(406):
        ch.queue_bind(q, x, arguments={"x-match": "bogus"})


def test_missing_alternate_exchange_drops_silently(amqp, ch):
    x = amqp.exchange(ch, "direct", arguments={"alternate-exchange": amqp.unique("missing")})
    ch.basic_publish(x, "k", b"x")
    amqp.queue(ch)  # a round trip: the channel is still open
    assert ch.is_open


@pytest.mark.parametrize("field", ["auto_delete", "exclusive"])
def test_queue_redeclare_flag_mismatch(amqp, ch, field):
    # Rule 19. RabbitMQ: auto_delete mismatch -> 406 "inequivalent arg 'auto_delete'";
    # exclusive mismatch -> 405 RESOURCE_LOCKED (even on the declaring connection).
    q = amqp.queue(ch)
    with broker_closes_channel(405 if field == "exclusive" else 406):
        ch.queue_declare(q, **{field: True})


@pytest.mark.parametrize("change", [{"auto_delete": True}, {"internal": True},
                                    {"arguments": {"alternate-exchange": "foo"}}],
                         ids=["auto_delete", "internal", "arguments"])
def test_exchange_redeclare_mismatch_is_406(amqp, ch, change):
    # Rule 13: RabbitMQ 406 "inequivalent arg '<name>' for exchange ...".
    x = amqp.exchange(ch, "direct")
    with broker_closes_channel(406):
        ch.exchange_declare(x, exchange_type="direct", **change)


def test_redeclare_server_named_queue_is_403(amqp, ch):
    # §3.11 says the 'amq.' prefix is refused "unless passive or the queue already exists";
    # RabbitMQ 3.10 refuses a non-passive redeclare of an existing amq.gen-* queue too
    # (403 "queue name 'amq.gen-...' contains reserved prefix 'amq.*'"), even on the owning
    # connection. A passive declare is fine.
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_declare(q, passive=True)
    with broker_closes_channel(403):
        ch.queue_declare(q, exclusive=True)


def test_ack_multiple_beyond_last_tag_is_406(amqp, ch):
    # Rule 35: multiple=1 with a tag never delivered -> 406 "unknown delivery tag".
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"x")
    m = get(ch, q)
    ch.basic_ack(m.tag + 1, multiple=True)
    with broker_closes_channel(406):
        ch.queue_declare(q, passive=True)


@pytest.mark.parametrize("first,second", [
    ({"x-max-length": 5}, None),                                  # argument dropped
    (None, {"x-max-length": 5}),                                  # argument added
    ({"x-single-active-consumer": False}, None),
    ({"x-dead-letter-exchange": "a"}, {"x-dead-letter-exchange": "b"}),
], ids=["dropped", "added", "sac-dropped", "dlx-changed"])
def test_queue_argument_equivalence_is_406(amqp, ch, first, second):
    # Rule 19: RabbitMQ compares the arguments it knows: "inequivalent arg '<name>'".
    q = amqp.queue(ch, arguments=first)
    with broker_closes_channel(406) as ei:
        ch.queue_declare(q, arguments=second)
    assert "inequivalent arg" in str(ei.value)


def test_quorum_redeclare_without_type_is_406(amqp, ch):
    q = amqp.queue(ch, prefix="qq", durable=True, arguments={"x-queue-type": "quorum"})
    with broker_closes_channel(406):
        ch.queue_declare(q, durable=True)


def test_unknown_queue_argument_differences_are_ignored(amqp, ch):
    q = amqp.queue(ch, arguments={"x-spark-amqp-unknown": 1})
    ch.queue_declare(q, arguments={"x-spark-amqp-unknown": 2})
    ch.queue_declare(q, arguments={"x-queue-type": "classic"})  # the default type, explicitly


def test_unknown_exchange_argument_differences_are_ignored(amqp, ch):
    # RabbitMQ 3.10 checks only alternate-exchange among exchange arguments for equivalence;
    # other (unknown) arguments may differ on redeclare (observed: declare-ok).
    x = amqp.exchange(ch, "direct", arguments={"x-spark-amqp-unknown": 1})
    ch.exchange_declare(x, exchange_type="direct", arguments={"x-spark-amqp-unknown": 2})
    assert ch.is_open


def test_exchange_type_is_case_sensitive(amqp, conn, ch):
    # "Direct" is not "direct": RabbitMQ 3.10 -> 503 COMMAND_INVALID "unknown exchange type".
    name = amqp.track_exchange(amqp.unique("case"))
    with broker_closes_connection(503):
        ch.exchange_declare(name, exchange_type="Direct")
