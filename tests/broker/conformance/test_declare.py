"""exchange.declare / queue.declare / delete / bind semantics and their reply codes
(rules 11-27 of amqp-0-9-1-from-the-seeds.md §5; RabbitMQ deviations noted per test)."""

from __future__ import annotations

import datetime
import decimal

import pika
import pytest

from conformance_helpers import broker_closes_channel, broker_closes_connection, get


# --- passive --------------------------------------------------------------------------------

def test_passive_declare_missing_queue_is_404(amqp, ch):
    with broker_closes_channel(404):
        ch.queue_declare(amqp.unique("missing"), passive=True)


def test_passive_declare_missing_exchange_is_404(amqp, ch):
    with broker_closes_channel(404):
        ch.exchange_declare(amqp.unique("missing"), passive=True)


def test_passive_declare_ignores_other_fields(amqp, ch):
    # Rule 14: passive ignores every other field (type, durable, arguments).
    x = amqp.exchange(ch, "direct")
    ch.exchange_declare(x, exchange_type="fanout", durable=True, passive=True)
    q = amqp.queue(ch, arguments={"x-message-ttl": 1000})
    ok = ch.queue_declare(q, passive=True, durable=True, arguments={"x-message-ttl": 5})
    assert ok.method.queue == q


def test_channel_error_keeps_connection_and_other_channels(amqp, conn, ch):
    # A channel exception (4xx) closes only that channel.
    other = conn.channel()
    with broker_closes_channel(404):
        ch.queue_declare(amqp.unique("missing"), passive=True)
    assert not ch.is_open and conn.is_open and other.is_open
    q = amqp.queue(other)
    assert other.queue_declare(q, passive=True).method.queue == q
    assert conn.channel().is_open


# --- equivalence ------------------------------------------------------------------------------

def test_queue_redeclare_durable_mismatch_is_406(amqp, ch):
    # Rule 19: redeclare with different properties -> channel exception; RabbitMQ uses 406
    # PRECONDITION_FAILED "inequivalent arg 'durable'".
    q = amqp.queue(ch, durable=False)
    with broker_closes_channel(406):
        ch.queue_declare(q, durable=True)


def test_queue_redeclare_arguments_mismatch_is_406(amqp, ch):
    q = amqp.queue(ch, arguments={"x-message-ttl": 1000})
    with broker_closes_channel(406):
        ch.queue_declare(q, arguments={"x-message-ttl": 2000})


def test_queue_redeclare_same_is_ok(amqp, ch):
    q = amqp.queue(ch, arguments={"x-message-ttl": 1000})
    ok = ch.queue_declare(q, arguments={"x-message-ttl": 1000})
    assert (ok.method.queue, ok.method.message_count, ok.method.consumer_count) == (q, 0, 0)


def test_exchange_redeclare_type_mismatch_is_406(amqp, ch):
    # Spec (0-9-1 [004]): redeclare with another type -> 530 NOT_ALLOWED (connection).
    # RabbitMQ 3.10 deviates: 406 PRECONDITION_FAILED channel error ("inequivalent arg 'type'").
    x = amqp.exchange(ch, "direct")
    with broker_closes_channel(406):
        ch.exchange_declare(x, exchange_type="fanout")


def test_exchange_redeclare_durable_mismatch_is_406(amqp, ch):
    x = amqp.exchange(ch, "direct", durable=False)
    with broker_closes_channel(406):
        ch.exchange_declare(x, exchange_type="direct", durable=True)


def test_exchange_redeclare_same_is_ok(amqp, ch):
    x = amqp.exchange(ch, "topic")
    ch.exchange_declare(x, exchange_type="topic")


# --- reserved names ---------------------------------------------------------------------------

def test_queue_amq_prefix_is_403(amqp, ch):
    # Rule 18: non-passive declare of an 'amq.' name -> 403 ACCESS_REFUSED.
    with broker_closes_channel(403):
        ch.queue_declare("amq.conformance-" + amqp.unique("r"))


def test_exchange_amq_prefix_is_403(amqp, ch):
    with broker_closes_channel(403):
        ch.exchange_declare("amq.conformance-" + amqp.unique("r"), exchange_type="direct")


def test_redeclare_predeclared_amq_exchange_is_ok(amqp, ch):
    # The 'amq.' rule applies only to exchanges that do not exist yet.
    ch.exchange_declare("amq.direct", exchange_type="direct", durable=True)


def test_delete_amq_exchange_is_403(amqp, ch):
    # RabbitMQ [ext]: deleting a system 'amq.*' exchange -> 403 ACCESS_REFUSED.
    with broker_closes_channel(403):
        ch.exchange_delete("amq.direct")


def test_server_named_queue(amqp, conn, ch):
    # Rule 18: an empty name -> a server-generated name; RabbitMQ's are 'amq.gen-...'.
    ok = ch.queue_declare("", exclusive=True)
    name = ok.method.queue
    assert name.startswith("amq.gen-") and len(name) > len("amq.gen-")
    assert ch.queue_declare("", exclusive=True).method.queue != name
    # The default exchange routes to it by name.
    ch.basic_publish("", name, b"x")
    assert get(ch, name, auto_ack=True).body == b"x"


def test_empty_queue_name_means_last_declared(amqp, ch):
    # Rule 23: an empty queue name refers to the channel's last declared queue.
    q = amqp.queue(ch)
    ch.queue_bind("", "amq.direct", q)
    ch.basic_publish("amq.direct", q, b"x")
    assert get(ch, q, auto_ack=True).body == b"x"
    ch.queue_unbind(q, "amq.direct", q)


def test_empty_queue_name_without_previous_declare_is_404(amqp, ch):
    # Rule 23: no last queue -> RabbitMQ 404 "no previously declared queue" (domain text: 502).
    with broker_closes_channel(404):
        ch.queue_bind("", "amq.direct", "k")


# --- exclusive / auto-delete --------------------------------------------------------------------

@pytest.mark.parametrize("op", ["declare", "passive", "consume", "get", "purge", "delete", "bind"])
def test_exclusive_queue_from_other_connection_is_405(amqp, ch, op):
    # Rule 20: another connection using an exclusive queue -> 405 RESOURCE_LOCKED.
    q = amqp.queue(ch, exclusive=True)
    other = amqp.channel()
    with broker_closes_channel(405):
        if op == "declare":
            other.queue_declare(q, exclusive=True)
        elif op == "passive":
            other.queue_declare(q, passive=True)
        elif op == "consume":
            other.basic_consume(q, lambda *a: None)
        elif op == "get":
            other.basic_get(q)
        elif op == "purge":
            other.queue_purge(q)
        elif op == "delete":
            other.queue_delete(q)
        elif op == "bind":
            other.queue_bind(q, "amq.direct", "k")


def test_exclusive_queue_deleted_when_connection_closes(amqp):
    c = amqp.connect()
    cch = c.channel()
    q = amqp.queue(cch, exclusive=True)
    assert cch.queue_declare(q, passive=True).method.queue == q
    c.close()
    amqp.wait_counts(q, None)


def test_exclusive_queue_usable_from_another_channel_of_same_connection(amqp, conn, ch):
    q = amqp.queue(ch, exclusive=True)
    other = conn.channel()
    other.basic_publish("", q, b"x")
    assert get(other, q, auto_ack=True).body == b"x"


def test_auto_delete_queue_deleted_after_last_consumer_cancels(amqp, conn, ch):
    # Rule 21: deleted when its last consumer is cancelled.
    q = amqp.queue(ch, auto_delete=True)
    t1 = ch.basic_consume(q, lambda *a: None)
    t2 = ch.basic_consume(q, lambda *a: None)
    ch.basic_cancel(t1)
    assert amqp.counts(q) == (0, 1)
    ch.basic_cancel(t2)
    amqp.wait_counts(q, None)


def test_auto_delete_queue_deleted_when_consumer_channel_closes(amqp, conn):
    ch = conn.channel()
    q = amqp.queue(ch, auto_delete=True)
    ch.basic_consume(q, lambda *a: None)
    ch.close()
    amqp.wait_counts(q, None)


def test_auto_delete_queue_without_consumer_survives(amqp, conn, ch):
    # Rule 21: never deleted if it never had a consumer.
    q = amqp.queue(ch, auto_delete=True)
    ch.basic_publish("", q, b"x")
    ch.close()
    amqp.wait_counts(q, (1, 0))


# --- delete -----------------------------------------------------------------------------------

def test_queue_delete_if_unused_with_consumer_is_406(amqp, conn, ch):
    q = amqp.queue(ch)
    conn.channel().basic_consume(q, lambda *a: None)
    with broker_closes_channel(406):
        ch.queue_delete(q, if_unused=True)


def test_queue_delete_if_empty_with_messages_is_406(amqp, ch):
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"x")
    with broker_closes_channel(406):
        ch.queue_delete(q, if_empty=True)


def test_queue_delete_if_unused_if_empty_ok_when_satisfied(amqp, ch):
    q = amqp.queue(ch)
    ok = ch.queue_delete(q, if_unused=True, if_empty=True)
    assert ok.method.message_count == 0
    assert amqp.counts(q) is None


def test_delete_missing_queue_is_ok(amqp, ch):
    # Rule 26: spec says 404; RabbitMQ 3.x answers delete-ok(message_count=0) (idempotent).
    ok = ch.queue_delete(amqp.unique("missing"))
    assert ok.method.message_count == 0
    assert ch.is_open


def test_delete_missing_exchange_is_ok(amqp, ch):
    # Rule 15: spec says 404; RabbitMQ 3.x answers delete-ok (idempotent).
    ch.exchange_delete(amqp.unique("missing"))
    assert ch.is_open


def test_unbind_missing_binding_is_ok(amqp, ch):
    # Rule 27: RabbitMQ's queue.unbind is idempotent (unbind-ok for a binding that doesn't exist).
    q = amqp.queue(ch)
    ch.queue_unbind(q, "amq.direct", "never-bound")
    assert ch.is_open


def test_exchange_delete_if_unused_with_binding_is_406(amqp, ch):
    # Rule 15: if-unused while the exchange has bindings -> 406.
    x = amqp.exchange(ch, "direct")
    q = amqp.queue(ch)
    ch.queue_bind(q, x, "k")
    with broker_closes_channel(406):
        ch.exchange_delete(x, if_unused=True)


def test_exchange_delete_removes_bindings(amqp, ch):
    x = amqp.exchange(ch, "fanout")
    q = amqp.queue(ch)
    ch.queue_bind(q, x)
    ch.exchange_delete(x)
    assert not amqp.exchange_exists(x)
    ch.exchange_declare(x, exchange_type="fanout")  # re-created: no binding left
    ch.basic_publish(x, "", b"x")
    assert get(ch, q) is None


def test_queue_delete_removes_queue(amqp, ch):
    q = amqp.queue(ch)
    ch.queue_delete(q)
    assert amqp.counts(q) is None


# --- other declare errors ---------------------------------------------------------------------

def test_unknown_exchange_type_closes_connection_503(amqp, conn, ch):
    # Spec [004] rule 12: unknown type -> 503 COMMAND_INVALID (connection). RabbitMQ 3.10.8
    # does exactly that ("unknown exchange type 'x'"); RabbitMQ >= 3.12.x (rabbitmq-server#11214)
    # changed it to a 406 channel error. We assert 3.10's behaviour.
    with broker_closes_connection(503):
        ch.exchange_declare(amqp.track_exchange(amqp.unique("badtype")),
                            exchange_type="no-such-type")
    assert not conn.is_open


def test_bind_to_default_exchange_is_403(amqp, ch):
    # Rule 11: spec lets clients use the default exchange only via '' in bind/publish; RabbitMQ
    # forbids any bind/unbind on it: 403 "operation not permitted on the default exchange".
    q = amqp.queue(ch)
    with broker_closes_channel(403):
        ch.queue_bind(q, "", "other-key")


def test_unbind_from_default_exchange_is_403(amqp, ch):
    q = amqp.queue(ch)
    with broker_closes_channel(403):
        ch.queue_unbind(q, "", q)


def test_durable_queue_can_bind_to_transient_exchange(amqp, ch):
    # Rule 24 ([002]/[004]): a durable queue MUST be allowed to bind to a transient exchange.
    x = amqp.exchange(ch, "direct", durable=False)
    q = amqp.queue(ch, durable=True)
    ch.queue_bind(q, x, "k")
    ch.basic_publish(x, "k", b"x")
    assert get(ch, q, auto_ack=True).body == b"x"


def test_consume_missing_queue_is_404(amqp, ch):
    with broker_closes_channel(404):
        ch.basic_consume(amqp.unique("missing"), lambda *a: None)


def test_get_missing_queue_is_404(amqp, ch):
    with broker_closes_channel(404):
        ch.basic_get(amqp.unique("missing"))


def test_purge_missing_queue_is_404(amqp, ch):
    # Rule 25.
    with broker_closes_channel(404):
        ch.queue_purge(amqp.unique("missing"))


def test_exchange_auto_delete_after_last_binding_removed(amqp, ch):
    # §3.4: an auto-delete exchange is deleted when its last binding goes (RabbitMQ: at unbind).
    x = amqp.exchange(ch, "fanout", auto_delete=True)
    q = amqp.queue(ch)
    ch.queue_bind(q, x)
    assert amqp.exchange_exists(x)  # survives the declare -> bind gap
    ch.queue_unbind(q, x)
    amqp.wait_for(lambda: not amqp.exchange_exists(x), what="auto-delete exchange removal")


def test_publish_properties_round_trip(amqp, ch):
    q = amqp.queue(ch)
    props = pika.BasicProperties(
        content_type="application/json", content_encoding="utf-8",
        headers={"s": "str", "i": 42, "neg": -7, "big": 2**40, "nbig": -2**40, "f": True,
                 "l": [1, "two"], "t": {"nested": "yes"}, "b": b"bytes", "u": "h\u00e9llo",
                 "dec": decimal.Decimal("3.14"), "void": None, "empty": "", "arr": [],
                 "tbl": {}, "deep": [{"a": [1, {"b": None}]}],
                 "ts": datetime.datetime(2020, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)},
        delivery_mode=2, priority=3, correlation_id="corr", reply_to="rq", expiration="60000",
        message_id="mid", timestamp=1_700_000_000, type="typ", user_id="guest", app_id="app",
    )
    body = bytes(range(256)) * 600  # > frame_max: split into several body frames
    ch.basic_publish("", q, body, props)
    m = get(ch, q, auto_ack=True)
    assert m.body == body
    p = m.properties
    for attr in ("content_type", "content_encoding", "delivery_mode", "priority",
                 "correlation_id", "reply_to", "expiration", "message_id", "timestamp",
                 "type", "user_id", "app_id"):
        assert getattr(p, attr) == getattr(props, attr), attr
    assert p.headers == props.headers


def test_user_id_mismatch_is_406(amqp, ch):
    # RabbitMQ validated user-id: a user_id other than the connection's user -> 406.
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"x", pika.BasicProperties(user_id="somebody-else"))
    with broker_closes_channel(406):
        get(ch, q)


def test_exclusive_queue_survives_its_channel_closing(amqp, conn):
    # Exclusivity belongs to the connection: closing the declaring channel keeps the queue.
    c1 = conn.channel()
    q = c1.queue_declare("", exclusive=True).method.queue
    c1.close()
    assert conn.channel().queue_declare(q, passive=True).method.queue == q


@pytest.mark.parametrize("op", ["declare", "passive", "delete", "e2e-source", "e2e-destination"])
def test_default_exchange_operations_are_403(amqp, ch, op):
    # Rule 11: RabbitMQ refuses every operation on the default exchange other than publishing
    # through it: 403 "operation not permitted on the default exchange" (even a passive declare).
    other = None
    if op.startswith("e2e"):
        other = amqp.exchange(ch, "fanout")
    with broker_closes_channel(403):
        if op == "declare":
            ch.exchange_declare("", exchange_type="direct")
        elif op == "passive":
            ch.exchange_declare("", passive=True)
        elif op == "delete":
            ch.exchange_delete("")
        elif op == "e2e-source":
            ch.exchange_bind(destination=other, source="")
        else:
            ch.exchange_bind(destination="", source=other)


def test_exchange_delete_if_unused_counts_outgoing_bindings_only(amqp, ch):
    # if-unused looks at bindings where the exchange is the *source*: the destination of an
    # exchange-to-exchange binding can be deleted with if-unused, the source cannot (406).
    src = amqp.exchange(ch, "fanout")
    dst = amqp.exchange(ch, "fanout")
    ch.exchange_bind(destination=dst, source=src)
    with broker_closes_channel(406):
        ch.exchange_delete(src, if_unused=True)
    ch2 = amqp.channel()
    ch2.exchange_delete(dst, if_unused=True)
    assert not amqp.exchange_exists(dst)


@pytest.mark.parametrize("how", ["queue-deleted", "exclusive-owner-closed", "dest-exchange-deleted"])
def test_auto_delete_exchange_goes_with_its_last_binding(amqp, conn, ch, how):
    # §3.4: an auto-delete exchange is deleted when its last binding disappears, however it
    # disappears (observed on RabbitMQ 3.10.8 for all three ways).
    x = amqp.exchange(ch, "fanout", auto_delete=True)
    if how == "queue-deleted":
        q = amqp.queue(ch)
        ch.queue_bind(q, x)
        ch.queue_delete(q)
    elif how == "exclusive-owner-closed":
        owner = amqp.connect()
        och = owner.channel()
        q = och.queue_declare("", exclusive=True).method.queue
        och.queue_bind(q, x)
        owner.close()
    else:
        dst = amqp.exchange(ch, "fanout")
        ch.exchange_bind(destination=dst, source=x)
        ch.exchange_delete(dst)
    amqp.wait_for(lambda: not amqp.exchange_exists(x), what="auto-delete exchange removal")


def test_auto_delete_exchange_never_bound_survives(amqp, ch):
    x = amqp.exchange(ch, "fanout", auto_delete=True)
    q = amqp.queue(ch)
    ch.queue_declare(q, passive=True)  # a round trip
    assert amqp.exchange_exists(x)
