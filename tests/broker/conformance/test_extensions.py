"""RabbitMQ extensions beyond issue 3's explicit list that common clients use: sender-selected
distribution (CC/BCC headers), consumer priorities (x-priority) and direct reply-to
(amq.rabbitmq.reply-to). Where RabbitMQ advertises the feature with a server capability
(consumer_priorities, direct_reply_to), the test is skipped for a broker that does not
advertise it, as a client would check the capability before relying on it."""

from __future__ import annotations

import time

import pika
import pytest

from conformance_helpers import Collector, get


def require_capability(conn, name):
    if not conn._impl.server_capabilities.get(name):
        pytest.skip(f"broker does not advertise the {name} capability")


def test_cc_and_bcc_headers_route_copies(amqp, ch):
    # Sender-selected distribution (rabbitmq.com/sender-selected.html): the CC and BCC headers
    # (arrays of longstr) add routing keys on the same exchange; BCC is removed from the
    # delivered messages, CC is kept.
    q1, q2, q3 = amqp.queue(ch), amqp.queue(ch), amqp.queue(ch)
    ch.basic_publish("", q1, b"x", pika.BasicProperties(headers={"CC": [q2], "BCC": [q3]}))
    amqp.wait_counts(q3, (1, 0))
    for q in (q1, q2, q3):
        m = get(ch, q, auto_ack=True)
        assert m is not None and m.body == b"x", q
        assert m.headers == {"CC": [q2]}, (q, m.headers)


def test_consumer_priorities(amqp, conn, ch):
    # x-priority consumer argument: the highest-priority consumer with capacity gets the
    # messages; lower ones only when it is blocked (rabbitmq.com/consumer-priority.html).
    require_capability(conn, "consumer_priorities")
    q = amqp.queue(ch)
    low, high = Collector(conn), Collector(conn)
    ch.basic_consume(q, low, auto_ack=True, arguments={"x-priority": 1})
    ch.basic_consume(q, high, auto_ack=True, arguments={"x-priority": 10})
    for i in range(6):
        ch.basic_publish("", q, str(i).encode())
    high.wait(6)
    low.settle()
    assert (len(low.messages), len(high.messages)) == (0, 6)


def test_direct_reply_to(amqp, conn, ch):
    # Direct reply-to (rabbitmq.com/direct-reply-to.html): consume no-ack from the pseudo-queue
    # amq.rabbitmq.reply-to, publish with reply_to=amq.rabbitmq.reply-to; the server rewrites
    # reply_to to amq.rabbitmq.reply-to.<token>, and a publish to that name on the default
    # exchange reaches the consumer.
    require_capability(conn, "direct_reply_to")
    replies = Collector(conn)
    ch.basic_consume("amq.rabbitmq.reply-to", replies, auto_ack=True)
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"request", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
    request = None
    deadline = time.monotonic() + 5
    while request is None and time.monotonic() < deadline:
        request = get(ch, q, auto_ack=True)
    assert request is not None
    reply_to = request.properties.reply_to
    assert reply_to.startswith("amq.rabbitmq.reply-to.")
    amqp.channel().basic_publish("", reply_to, b"response")
    assert replies.wait(1) and replies.bodies == [b"response"]
