"""A queue's declare arguments parsed once (spark_amqp/broker/queue_arguments.py), and the
ids of an error a channel handler raises without them, filled by the connection's dispatcher
(queue.declare's 50/10 here, as RabbitMQ reports them)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from spark_amqp.broker.queue_arguments import QueueArguments, parse_queue_arguments
from spark_amqp.protocol.errors import PreconditionFailed

V3 = SimpleNamespace(quorum_delivery_limit=None)
V4 = SimpleNamespace(quorum_delivery_limit=20)


def test_parsed_arguments():
    a = parse_queue_arguments({"x-message-ttl": 5, "x-max-length": 3, "x-overflow": b"reject-publish",
                               "x-dead-letter-exchange": "dlx", "x-max-priority": 9}, "q", "/", V3)
    assert a == QueueArguments(ttl_ms=5, max_length=3, overflow="reject-publish",
                               dead_letter_exchange="dlx", max_priority=9)
    assert not a.quorum
    q3 = parse_queue_arguments({"x-queue-type": "quorum"}, "q", "/", V3)
    assert q3.quorum and q3.delivery_limit is None and q3.max_priority is None
    assert parse_queue_arguments({"x-queue-type": "quorum"}, "q", "/", V4).delivery_limit == 20
    assert parse_queue_arguments({"x-queue-type": "quorum", "x-delivery-limit": -1},
                                 "q", "/", V4).delivery_limit is None


@pytest.mark.parametrize("args, text", [
    ({"x-message-ttl": "5"}, "invalid arg 'x-message-ttl' for queue: '5' is not an integer"),
    ({"x-overflow": "drop-tail"}, "'drop-tail' is not one of drop-head"),
    ({"x-expires": 0}, "invalid arg 'x-expires' for queue 'q' in vhost '/': must be > 0"),
    ({"x-max-length": -1}, "{value_negative,-1}"),
    ({"x-dead-letter-routing-key": "k"}, "routing_key_but_no_dlx_defined"),
    ({"x-delivery-limit": 3}, "only quorum queues support it"),
    ({"x-single-active-consumer": 1}, "{unacceptable_type,int}"),
    ({"x-max-priority": 256}, "256 is not in 0..255"),
])
def test_refused_arguments_carry_no_ids(args, text):
    with pytest.raises(PreconditionFailed) as ei:
        parse_queue_arguments(args, "q", "/", V3)
    assert text in ei.value.reply_text
    assert (ei.value.class_id, ei.value.method_id) == (0, 0)   # the dispatcher's to fill


def test_the_dispatcher_fills_the_ids_of_the_method_that_failed(embedded_broker):
    from spark_amqp.client import connect

    with connect(embedded_broker.url) as conn:
        with pytest.raises(PreconditionFailed) as ei:
            conn.channel().queue_declare("argq", durable=True, arguments={"x-overflow": "drop-tail"})
        assert (ei.value.class_id, ei.value.method_id) == (50, 10)     # queue.declare
        ch = conn.channel()
        with pytest.raises(PreconditionFailed) as ei:
            ch.confirm_select()
            ch.tx_select()
        assert "cannot switch from confirm to tx mode" in ei.value.reply_text
        assert (ei.value.class_id, ei.value.method_id) == (90, 10)     # tx.select
