"""Routing through every exchange type (AMQP 0-9-1 §3.1.3, RabbitMQ extensions §3 of
amqp-0-9-1-from-the-seeds.md): default, direct, fanout, topic, headers, exchange-to-exchange
bindings, alternate-exchange, internal exchanges, and at-most-once delivery per queue."""

from __future__ import annotations

import time

import pika
import pytest

from conformance_helpers import Collector, broker_closes_channel, get, get_all


def bodies(ch, queue):
    return [m.body for m in get_all(ch, queue)]


# --- default exchange -----------------------------------------------------------------------

def test_default_exchange_routes_by_queue_name(amqp, ch):
    # Rule 22: every queue is bound to the default exchange with its name as routing key.
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"hit")
    ch.basic_publish("", q + ".other", b"miss")
    assert bodies(ch, q) == [b"hit"]


def test_default_exchange_is_direct_and_passively_declarable(amqp, ch):
    # amq.* pre-declared exchanges exist with their types (rule 11); passive ignores the type.
    for name in ("amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match"):
        ch.exchange_declare(name, passive=True)
    ch.exchange_declare("amq.match", exchange_type="headers", passive=True)


# --- direct ---------------------------------------------------------------------------------

def test_amq_direct_exact_key(amqp, ch):
    q = amqp.queue(ch)
    key = amqp.unique("key")
    ch.queue_bind(q, "amq.direct", key)
    ch.basic_publish("amq.direct", key, b"1")
    ch.basic_publish("amq.direct", key + "x", b"2")
    ch.basic_publish("amq.direct", key.upper(), b"3")  # keys are case-sensitive
    assert bodies(ch, q) == [b"1"]


def test_direct_several_keys_and_queues(amqp, ch):
    x = amqp.exchange(ch, "direct")
    q1, q2 = amqp.queue(ch), amqp.queue(ch)
    ch.queue_bind(q1, x, "a")
    ch.queue_bind(q1, x, "b")
    ch.queue_bind(q2, x, "b")
    for k in ("a", "b", "c"):
        ch.basic_publish(x, k, k.encode())
    assert bodies(ch, q1) == [b"a", b"b"]
    assert bodies(ch, q2) == [b"b"]


def test_unbind_stops_routing(amqp, ch):
    x = amqp.exchange(ch, "direct")
    q = amqp.queue(ch)
    ch.queue_bind(q, x, "k")
    ch.basic_publish(x, "k", b"before")
    ch.queue_unbind(q, x, "k")
    ch.basic_publish(x, "k", b"after")
    assert bodies(ch, q) == [b"before"]


def test_duplicate_bind_is_not_an_error_and_delivers_once(amqp, ch):
    # Rule 24: a duplicate bind is not an error; no duplicate delivery.
    x = amqp.exchange(ch, "direct")
    q = amqp.queue(ch)
    ch.queue_bind(q, x, "k")
    ch.queue_bind(q, x, "k")
    ch.basic_publish(x, "k", b"once")
    assert bodies(ch, q) == [b"once"]


# --- fanout ---------------------------------------------------------------------------------

def test_amq_fanout_ignores_routing_key(amqp, ch):
    x = amqp.exchange(ch, "fanout")
    q1, q2 = amqp.queue(ch), amqp.queue(ch)
    ch.queue_bind(q1, x, "ignored")
    ch.queue_bind(q2, x, "")
    ch.basic_publish(x, "anything", b"m")
    assert bodies(ch, q1) == [b"m"]
    assert bodies(ch, q2) == [b"m"]


def test_amq_fanout_predeclared(amqp, ch):
    q = amqp.queue(ch)
    ch.queue_bind(q, "amq.fanout")
    try:
        ch.basic_publish("amq.fanout", "whatever", b"f")
        assert b"f" in bodies(ch, q)  # other tests may fan out concurrently; ours arrives
    finally:
        ch.queue_unbind(q, "amq.fanout")


# --- topic ----------------------------------------------------------------------------------

KEYS = ["", "a", "a.", ".a", ".", "a.b", "a..b", "a.b.c", "a.x.b", "a.x.y.b", "b.a", "..", "a.a"]
# Observed on RabbitMQ 3.10.8 (this machine, 2026-11-21): pattern -> routing keys it matches.
# Words are split on '.', so "a." is ["a", ""] and "" is zero words ('*' needs exactly one word:
# it matches neither "" nor "."; '#' matches zero or more words, including the empty key).
TOPIC_CASES = {
    "*": ["a"],
    "#": KEYS,
    "#.#": KEYS,
    "": [""],
    "a.*": ["a.", "a.b", "a.a"],
    "*.*": ["a.", ".a", ".", "a.b", "b.a", "a.a"],
    "a.#": ["a", "a.", "a.b", "a..b", "a.b.c", "a.x.b", "a.x.y.b", "a.a"],
    "#.a": ["a", ".a", "b.a", "a.a"],
    "a.#.b": ["a.b", "a..b", "a.x.b", "a.x.y.b"],
    "a.*.b": ["a..b", "a.x.b"],
    "a..b": ["a..b"],
    "*.#": [k for k in KEYS if k != ""],
    "#.*": [k for k in KEYS if k != ""],
}


@pytest.mark.parametrize("pattern", list(TOPIC_CASES), ids=lambda p: repr(p))
def test_topic_pattern(amqp, ch, pattern):
    x = amqp.exchange(ch, "topic")
    q = amqp.queue(ch)
    ch.queue_bind(q, x, pattern)
    for k in KEYS:
        ch.basic_publish(x, k, k.encode())
    assert [b.decode() for b in bodies(ch, q)] == TOPIC_CASES[pattern]


def test_amq_topic_predeclared(amqp, ch):
    q = amqp.queue(ch)
    prefix = amqp.unique("tp").replace(".", "_")
    ch.queue_bind(q, "amq.topic", prefix + ".*.z")
    ch.basic_publish("amq.topic", prefix + ".y.z", b"1")
    ch.basic_publish("amq.topic", prefix + ".y", b"2")
    assert bodies(ch, q) == [b"1"]


def test_topic_no_duplicate_delivery_through_several_bindings(amqp, ch):
    # Rule 24: a message is delivered at most once to a queue, however many bindings match.
    x = amqp.exchange(ch, "topic")
    q = amqp.queue(ch)
    for p in ("a.*", "#", "a.b", "*.b", "a.#"):
        ch.queue_bind(q, x, p)
    ch.basic_publish(x, "a.b", b"once")
    assert bodies(ch, q) == [b"once"]


# --- headers --------------------------------------------------------------------------------

def _headers_publish(ch, x, headers_list):
    for i, h in enumerate(headers_list):
        ch.basic_publish(x, "", str(i).encode(), pika.BasicProperties(headers=h))


HEADER_MSGS = [
    {"a": 1, "b": "two"},            # 0
    {"a": 1, "b": "two", "c": 3},    # 1
    {"a": 1},                        # 2
    {"c": 3},                        # 3
    None,                            # 4: no headers at all
    {"a": "1", "b": "two"},          # 5: a is a string, not an int
]


@pytest.mark.parametrize("args,expected", [
    ({"x-match": "all", "a": 1, "b": "two"}, [b"0", b"1"]),
    ({"x-match": "any", "a": 1, "b": "two"}, [b"0", b"1", b"2", b"5"]),
    ({"a": 1, "b": "two"}, [b"0", b"1"]),                    # missing x-match = all
    ({"x-match": "any", "zz": 9}, []),
    ({}, [b"0", b"1", b"2", b"3", b"4", b"5"]),              # all of nothing: matches everything
], ids=["all", "any", "default-all", "any-none", "empty"])
def test_headers_exchange_x_match(amqp, ch, args, expected):
    x = amqp.exchange(ch, "headers")
    q = amqp.queue(ch)
    ch.queue_bind(q, x, "", arguments=args)
    _headers_publish(ch, x, HEADER_MSGS)
    assert bodies(ch, q) == expected


def test_amq_match_is_headers_and_ignores_routing_key(amqp, ch):
    q = amqp.queue(ch)
    tag = amqp.unique("h")
    args = {"x-match": "all", "conformance-tag": tag}
    ch.queue_bind(q, "amq.match", "some-key", arguments=args)
    try:
        ch.basic_publish("amq.match", "other-key", b"hit",
                         pika.BasicProperties(headers={"conformance-tag": tag}))
        ch.basic_publish("amq.match", "some-key", b"miss",
                         pika.BasicProperties(headers={"conformance-tag": tag + "x"}))
        assert bodies(ch, q) == [b"hit"]
    finally:
        ch.queue_unbind(q, "amq.match", "some-key", arguments=args)


# --- exchange-to-exchange -------------------------------------------------------------------

def test_exchange_to_exchange_bind_and_unbind(amqp, ch):
    # RabbitMQ extension exchange.bind/unbind (§3.3).
    src = amqp.exchange(ch, "direct")
    dst = amqp.exchange(ch, "fanout")
    q = amqp.queue(ch)
    ch.queue_bind(q, dst)
    ch.exchange_bind(destination=dst, source=src, routing_key="k")
    ch.basic_publish(src, "k", b"through")
    ch.basic_publish(src, "other", b"not")
    assert bodies(ch, q) == [b"through"]
    ch.exchange_unbind(destination=dst, source=src, routing_key="k")
    ch.basic_publish(src, "k", b"after-unbind")
    assert bodies(ch, q) == []


def test_exchange_to_exchange_chain_and_cycle_deliver_once(amqp, ch):
    # §3.3: cycles are allowed; a message reaches each queue at most once.
    a = amqp.exchange(ch, "fanout")
    b = amqp.exchange(ch, "fanout")
    q = amqp.queue(ch)
    ch.exchange_bind(destination=b, source=a)
    ch.exchange_bind(destination=a, source=b)   # cycle
    ch.exchange_bind(destination=a, source=a)   # self-binding
    ch.queue_bind(q, a)
    ch.queue_bind(q, b)
    ch.basic_publish(a, "", b"once")
    assert bodies(ch, q) == [b"once"]


def test_exchange_bind_missing_source_is_404(amqp, ch):
    dst = amqp.exchange(ch, "fanout")
    with broker_closes_channel(404):
        ch.exchange_bind(destination=dst, source=amqp.unique("missing"))


def test_exchange_bind_missing_destination_is_404(amqp, ch):
    src = amqp.exchange(ch, "fanout")
    with broker_closes_channel(404):
        ch.exchange_bind(destination=amqp.unique("missing"), source=src)


def test_queue_bind_missing_exchange_is_404(amqp, ch):
    q = amqp.queue(ch)
    with broker_closes_channel(404):
        ch.queue_bind(q, amqp.unique("missing"))


def test_queue_bind_missing_queue_is_404(amqp, ch):
    with broker_closes_channel(404):
        ch.queue_bind(amqp.unique("missing"), "amq.direct", "k")


# --- alternate exchange -----------------------------------------------------------------------

def test_alternate_exchange_receives_unroutable(amqp, ch):
    ae = amqp.exchange(ch, "fanout", prefix="ae")
    main = amqp.exchange(ch, "direct", arguments={"alternate-exchange": ae})
    q_main, q_ae = amqp.queue(ch), amqp.queue(ch)
    ch.queue_bind(q_main, main, "k")
    ch.queue_bind(q_ae, ae)
    ch.basic_publish(main, "k", b"routed")
    ch.basic_publish(main, "nope", b"unroutable")
    assert bodies(ch, q_main) == [b"routed"]
    assert bodies(ch, q_ae) == [b"unroutable"]


def test_alternate_exchange_route_is_not_returned_for_mandatory(amqp, conn, ch):
    ae = amqp.exchange(ch, "fanout", prefix="ae")
    main = amqp.exchange(ch, "direct", arguments={"alternate-exchange": ae})
    q_ae = amqp.queue(ch)
    ch.queue_bind(q_ae, ae)
    ch.confirm_delivery()
    # Raises UnroutableError if the broker returned it: the AE routed it, so no basic.return.
    ch.basic_publish(main, "nope", b"m", mandatory=True)
    assert bodies(ch, q_ae) == [b"m"]


# --- internal exchange ----------------------------------------------------------------------

def test_internal_exchange_publish_is_403_but_e2e_routes(amqp, ch):
    # §3.4: clients cannot publish to an internal exchange (403 ACCESS_REFUSED); it is used
    # as the destination of exchange-to-exchange bindings.
    front = amqp.exchange(ch, "fanout")
    internal = amqp.exchange(ch, "fanout", internal=True)
    q = amqp.queue(ch)
    ch.queue_bind(q, internal)
    ch.exchange_bind(destination=internal, source=front)
    ch.basic_publish(front, "", b"via-front")
    assert bodies(ch, q) == [b"via-front"]
    ch.basic_publish(internal, "", b"direct")  # asynchronous: the close comes back later
    with broker_closes_channel(403):
        get(ch, q)


# --- publish to a missing exchange ------------------------------------------------------------

def test_publish_to_missing_exchange_is_404(amqp, ch):
    # Rule 16: publish to a missing exchange -> 404 NOT_FOUND (channel).
    ch.basic_publish(amqp.unique("missing"), "k", b"x")
    with broker_closes_channel(404):
        ch.queue_declare("", exclusive=True)


def test_consumer_receives_routed_messages_in_publish_order(amqp, conn, ch):
    x = amqp.exchange(ch, "topic")
    q = amqp.queue(ch)
    ch.queue_bind(q, x, "o.#")
    col = Collector(conn)
    ch.basic_consume(q, col, auto_ack=True)
    for i in range(10):
        ch.basic_publish(x, f"o.{i}", str(i).encode())
    assert col.wait(10) and col.bodies == [str(i).encode() for i in range(10)]


# Observed on RabbitMQ 3.10.8: binding arguments starting with "x-" are ignored by all/any;
# "all-with-x"/"any-with-x" (new in 3.10) include them; a void (None) binding value matches
# any message that has the header, whatever its value.
X_MSGS = [{"a": 1}, {"a": 1, "x-foo": 2}, {"x-foo": 2}, {"a": "zz"}, {"b": 1}]


@pytest.mark.parametrize("args,expected", [
    ({"x-match": "all", "a": 1, "x-foo": 2}, [b"0", b"1"]),
    ({"x-match": "all-with-x", "a": 1, "x-foo": 2}, [b"1"]),
    ({"x-match": "any", "x-foo": 2}, []),
    ({"x-match": "any-with-x", "x-foo": 2}, [b"1", b"2"]),
    ({"x-match": "all", "a": None}, [b"0", b"1", b"3"]),
    ({"x-match": "any", "a": None}, [b"0", b"1", b"3"]),
], ids=["all-ignores-x", "all-with-x", "any-ignores-x", "any-with-x", "void-all", "void-any"])
def test_headers_x_arguments_and_void_values(amqp, ch, args, expected):
    x = amqp.exchange(ch, "headers")
    q = amqp.queue(ch)
    ch.queue_bind(q, x, "", arguments=args)
    _headers_publish(ch, x, X_MSGS)
    assert bodies(ch, q) == expected


def test_headers_unbind_needs_the_same_arguments(amqp, ch):
    # A binding is identified by (exchange, queue, routing key, arguments).
    x = amqp.exchange(ch, "headers")
    q = amqp.queue(ch)
    ch.queue_bind(q, x, arguments={"a": 1})
    ch.queue_unbind(q, x, arguments={"a": 2})      # another binding: nothing removed
    _headers_publish(ch, x, [{"a": 1}])
    assert bodies(ch, q) == [b"0"]
    ch.queue_unbind(q, x, arguments={"a": 1})
    _headers_publish(ch, x, [{"a": 1}])
    assert bodies(ch, q) == []


def test_same_key_different_arguments_are_two_bindings(amqp, ch):
    x = amqp.exchange(ch, "direct")
    q = amqp.queue(ch)
    ch.queue_bind(q, x, "k", arguments={"v": 1})
    ch.queue_bind(q, x, "k", arguments={"v": 2})
    ch.queue_unbind(q, x, "k", arguments={"v": 1})
    ch.basic_publish(x, "k", b"still-bound")
    assert bodies(ch, q) == [b"still-bound"]


def test_exchange_to_exchange_topic_source_and_return(amqp, conn, ch):
    # A topic exchange feeding a headers exchange; mandatory messages that reach an exchange
    # but no queue are returned 312.
    src = amqp.exchange(ch, "topic")
    dst = amqp.exchange(ch, "headers")
    q = amqp.queue(ch)
    ch.exchange_bind(destination=dst, source=src, routing_key="a.#")
    ch.queue_bind(q, dst, arguments={"x-match": "any", "k": "v"})
    returned = []
    ch.add_on_return_callback(lambda _c, m, _p, body: returned.append((m.reply_code, body)))
    ch.basic_publish(src, "a.b", b"in", pika.BasicProperties(headers={"k": "v"}), mandatory=True)
    ch.basic_publish(src, "a.b", b"no-header", pika.BasicProperties(headers={}), mandatory=True)
    ch.basic_publish(src, "b.a", b"no-route", pika.BasicProperties(headers={"k": "v"}),
                     mandatory=True)
    assert bodies(ch, q) == [b"in"]
    deadline = time.monotonic() + 5
    while len(returned) < 2 and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.02)
    assert returned == [(312, b"no-header"), (312, b"no-route")]


def test_headers_value_types(amqp, ch):
    # Observed on RabbitMQ 3.10.8: bool true does not equal int 1; a longstr (bytes) header
    # equals the same text as str (both are longstr on the wire); nested tables/arrays compare
    # by value.
    x = amqp.exchange(ch, "headers")
    q_any = amqp.queue(ch)
    q_nested = amqp.queue(ch)
    ch.queue_bind(q_any, x, arguments={"x-match": "any", "b": True, "s": "1"})
    ch.queue_bind(q_nested, x, arguments={"x-match": "all", "t": {"a": 1}, "l": [1, 2]})
    _headers_publish(ch, x, [{"b": 1}, {"s": b"1"}, {"b": True},
                             {"t": {"a": 1}, "l": [1, 2]}, {"t": {"a": 2}, "l": [1, 2]}])
    assert bodies(ch, q_any) == [b"1", b"2"]
    assert bodies(ch, q_nested) == [b"3"]


def test_long_names_and_keys(amqp, ch):
    # Names and routing keys are shortstr: up to 255 bytes, any UTF-8.
    base = amqp.unique("long") + "."
    q = amqp.queue(ch, name=base + "x" * (255 - len(base)))
    assert len(q) == 255
    uq = amqp.queue(ch, name=f"spark-amqp-test.ünï cödé {amqp.unique('u')}")
    key = "k" * 255
    ch.queue_bind(q, "amq.direct", key)
    try:
        ch.basic_publish("amq.direct", key, b"long")
        ch.basic_publish("", uq, b"unicode")
        m = get(ch, q, auto_ack=True)
        assert m.body == b"long" and m.method.routing_key == key
        assert get(ch, uq, auto_ack=True).body == b"unicode"
    finally:
        ch.queue_unbind(q, "amq.direct", key)


def test_topic_long_keys(amqp, ch):
    x = amqp.exchange(ch, "topic")
    q = amqp.queue(ch)
    ch.queue_bind(q, x, "#.z.#")
    ch.basic_publish(x, ".".join(["a"] * 100 + ["z"] + ["b"] * 20), b"hit")
    ch.basic_publish(x, ".".join(["a"] * 120), b"miss")
    assert bodies(ch, q) == [b"hit"]
