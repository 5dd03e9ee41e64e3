"""Publisher confirms (RabbitMQ extension, §3.5-3.7 and rule 41), mandatory/immediate
(rule 33) and transactions (rules 39, 40).

Confirm sequence numbers and the order of basic.return versus basic.ack are not visible through
pika's BlockingChannel API, so :class:`ConfirmRecorder` drives pika's underlying asynchronous
``Channel`` (``BlockingChannel._impl``) and records every ack/nack/return in arrival order while
``BlockingConnection.process_data_events`` pumps the I/O.
"""

from __future__ import annotations

import time

import pika
import pika.exceptions
import pytest

from conformance_helpers import broker_closes_channel, broker_closes_connection, get, get_all


class ConfirmRecorder:
    """Confirm mode on ``ch`` with every basic.ack / basic.nack / basic.return recorded as
    ``("ack"|"nack", delivery_tag, multiple)`` / ``("return", reply_code, body)``."""

    def __init__(self, conn, ch):
        self.conn, self.impl = conn, ch._impl
        self.events: list[tuple] = []
        self.published = 0
        selected = []
        self.impl.add_on_return_callback(
            lambda _c, method, _p, body: self.events.append(("return", method.reply_code, body)))
        self.impl.confirm_delivery(self._on_confirm, callback=selected.append)
        self.pump(lambda: selected)

    def _on_confirm(self, frame):
        kind = "ack" if isinstance(frame.method, pika.spec.Basic.Ack) else "nack"
        self.events.append((kind, frame.method.delivery_tag, frame.method.multiple))

    def publish(self, exchange, routing_key, body, properties=None, mandatory=False):
        self.impl.basic_publish(exchange, routing_key, body, properties, mandatory)
        self.published += 1
        return self.published

    def confirmed(self) -> dict[int, str]:
        """seq -> "ack"/"nack", expanding multiple=True confirms."""
        out: dict[int, str] = {}
        for ev in self.events:
            if ev[0] in ("ack", "nack"):
                _, tag, multiple = ev
                for seq in (range(1, tag + 1) if multiple else [tag]):
                    out.setdefault(seq, ev[0])
        return out

    def pump(self, until, timeout=5.0):
        deadline = time.monotonic() + timeout
        while not until() and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.02)
        assert until(), f"timed out; events so far: {self.events}"

    def wait_all(self):
        self.pump(lambda: len(self.confirmed()) >= self.published)
        return self.confirmed()


# --- confirms --------------------------------------------------------------------------------

def test_confirm_acks_every_publish_with_sequence_numbers(amqp, conn, ch):
    # Rule 41: every publish after confirm.select gets exactly one ack/nack; tags are publish
    # sequence numbers starting at 1 (multiple=true means "up to and including").
    q = amqp.queue(ch)
    rec = ConfirmRecorder(conn, ch)
    seqs = [rec.publish("", q, f"m{i}".encode()) for i in range(20)]
    assert seqs == list(range(1, 21))
    confirmed = rec.wait_all()
    assert confirmed == {i: "ack" for i in range(1, 21)}
    tags = [ev[1] for ev in rec.events]
    assert tags == sorted(tags) and len(set(tags)) == len(tags)  # each seq confirmed once
    amqp.wait_counts(q, (20, 0))


def test_confirm_acks_unroutable_non_mandatory(amqp, conn, ch):
    # An unroutable message without mandatory is dropped silently, and still acked.
    rec = ConfirmRecorder(conn, ch)
    rec.publish("amq.direct", amqp.unique("nobody"), b"x")
    assert rec.wait_all() == {1: "ack"}
    assert not [e for e in rec.events if e[0] == "return"]


def test_mandatory_unroutable_returned_312_before_ack(amqp, conn, ch):
    # §3.5 / rule 41: an unroutable mandatory message -> basic.return 312 NO_ROUTE, then ack.
    q = amqp.queue(ch)
    rec = ConfirmRecorder(conn, ch)
    rec.publish("", q, b"routed", mandatory=True)
    rec.publish("amq.direct", amqp.unique("nobody"), b"lost", mandatory=True)
    rec.publish("", q, b"routed2", mandatory=True)
    assert rec.wait_all() == {1: "ack", 2: "ack", 3: "ack"}
    returns = [i for i, e in enumerate(rec.events) if e[0] == "return"]
    assert len(returns) == 1
    assert rec.events[returns[0]][1:] == (312, b"lost")
    ack2 = next(i for i, e in enumerate(rec.events)
                if e[0] == "ack" and (e[1] == 2 or (e[2] and e[1] >= 2)))
    assert returns[0] < ack2, rec.events


def test_mandatory_return_without_confirms(amqp, conn, ch):
    returned = []
    ch.add_on_return_callback(lambda _c, method, props, body: returned.append(
        (method.reply_code, method.reply_text, method.exchange, method.routing_key, body,
         props.headers)))
    key = amqp.unique("nobody")
    ch.basic_publish("amq.direct", key, b"back", pika.BasicProperties(headers={"h": 1}),
                     mandatory=True)
    deadline = time.monotonic() + 5
    while not returned and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.02)
    assert returned == [(312, "NO_ROUTE", "amq.direct", key, b"back", {"h": 1})]


def test_blocking_confirm_raises_unroutable(amqp, conn, ch):
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.UnroutableError):
        ch.basic_publish("amq.direct", amqp.unique("nobody"), b"x", mandatory=True)
    assert ch.is_open


def test_immediate_is_540(amqp, conn, ch):
    # Rule 33: spec returns 313 NO_CONSUMERS; RabbitMQ >= 3.0 closes the connection with
    # 540 NOT_IMPLEMENTED "immediate=true". pika 1.x has no `immediate` argument, so the
    # basic.publish is sent through the underlying channel.
    q = amqp.queue(ch)
    ch._impl._send_method(pika.spec.Basic.Publish(exchange="", routing_key=q, immediate=True),
                          (pika.BasicProperties(), b"x"))
    with broker_closes_connection(540):
        conn.process_data_events(time_limit=2)
        conn.process_data_events(time_limit=2)


def test_confirm_select_is_idempotent(amqp, conn, ch):
    q = amqp.queue(ch)
    ch.confirm_delivery()
    ch._impl._rpc(pika.spec.Confirm.Select(), None, [pika.spec.Confirm.SelectOk])
    conn.process_data_events(time_limit=0.1)
    ch.basic_publish("", q, b"x")
    assert ch.is_open


# --- transactions ------------------------------------------------------------------------------

def test_tx_commit_publishes(amqp, ch):
    # Rule 39: published messages become visible only at commit.
    q = amqp.queue(ch)
    ch.tx_select()
    ch.basic_publish("", q, b"a")
    ch.basic_publish("", q, b"b")
    assert amqp.counts(q) == (0, 0)
    ch.tx_commit()
    amqp.wait_counts(q, (2, 0))
    assert [m.body for m in get_all(amqp.channel(), q)] == [b"a", b"b"]


def test_tx_rollback_discards_publishes(amqp, ch):
    q = amqp.queue(ch)
    ch.tx_select()
    ch.basic_publish("", q, b"a")
    ch.tx_rollback()
    ch.basic_publish("", q, b"b")
    ch.tx_commit()
    amqp.wait_counts(q, (1, 0))
    assert [m.body for m in get_all(amqp.channel(), q)] == [b"b"]


def test_tx_acks_apply_at_commit_and_rollback_does_not_redeliver(amqp, ch):
    # Rule 39: acks in a transaction take effect at commit; rollback discards them and does
    # not redeliver (the message stays unacked until the channel closes).
    q = amqp.queue(ch)
    for b in (b"a", b"b"):
        ch.basic_publish("", q, b)
    amqp.wait_counts(q, (2, 0))
    ch.tx_select()
    a = get(ch, q)
    b = get(ch, q)
    ch.basic_ack(a.tag)
    ch.tx_rollback()
    assert get(ch, q) is None          # not redelivered by the rollback
    ch.basic_ack(b.tag)
    ch.tx_commit()
    ch.close()                         # a's ack was rolled back: a is requeued
    amqp.wait_counts(q, (1, 0))
    again = get(amqp.channel(), q, auto_ack=True)
    assert again.body == b"a" and again.redelivered


def test_tx_ack_unknown_tag_checked_immediately(amqp, ch):
    # Rule 35: on a tx channel the ack tag is checked immediately, not at commit.
    q = amqp.queue(ch)
    ch.tx_select()
    ch.basic_ack(42)
    with broker_closes_channel(406):
        ch.queue_declare(q, passive=True)


@pytest.mark.parametrize("op", ["commit", "rollback"])
def test_tx_commit_rollback_on_non_tx_channel_is_406(amqp, ch, op):
    # Rule 39.
    with broker_closes_channel(406):
        getattr(ch, f"tx_{op}")()


def test_confirm_select_on_tx_channel_is_406(amqp, ch):
    # Rule 40: "cannot switch from tx to confirm mode".
    ch.tx_select()
    with broker_closes_channel(406):
        ch.confirm_delivery()


def test_tx_select_on_confirm_channel_is_406(amqp, ch):
    # Rule 40: "cannot switch from confirm to tx mode".
    ch.confirm_delivery()
    with broker_closes_channel(406):
        ch.tx_select()


def test_tx_mandatory_unroutable_returned_at_commit(amqp, conn, ch):
    returned = []
    ch.add_on_return_callback(lambda _c, m, _p, body: returned.append((m.reply_code, body)))
    ch.tx_select()
    ch.basic_publish("amq.direct", amqp.unique("nobody"), b"r", mandatory=True)
    ch.tx_commit()
    deadline = time.monotonic() + 5
    while not returned and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.02)
    assert returned == [(312, b"r")]


def test_reject_publish_nacks_by_sequence_number(amqp, conn, ch):
    # x-overflow=reject-publish under confirms: the refused publishes are basic.nack'ed
    # (observed: ack 1, nack 2, nack 3).
    q = amqp.queue(ch, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    rec = ConfirmRecorder(conn, ch)
    for i in range(3):
        rec.publish("", q, f"m{i}".encode())
    assert rec.wait_all() == {1: "ack", 2: "nack", 3: "nack"}
    amqp.wait_counts(q, (1, 0))


def test_nack_when_any_target_queue_refuses(amqp, conn, ch):
    # A message routed to two queues, one of which refuses it (reject-publish, full): the
    # publisher gets a nack, and the other queue still keeps its copy.
    x = amqp.exchange(ch, "fanout")
    ok_q = amqp.queue(ch)
    full_q = amqp.queue(ch, arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    ch.queue_bind(ok_q, x)
    ch.queue_bind(full_q, x)
    rec = ConfirmRecorder(conn, ch)
    rec.publish(x, "", b"m")
    assert rec.wait_all() == {1: "nack"}
    amqp.wait_counts(ok_q, (1, 0))
    assert amqp.counts(full_q) == (0, 0)


def test_reject_publish_dlx_nacks_and_dead_letters(amqp, conn, ch):
    dlq = amqp.queue(ch, prefix="dlq")
    q = amqp.queue(ch, arguments={"x-max-length": 1, "x-overflow": "reject-publish-dlx",
                                  "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
    rec = ConfirmRecorder(conn, ch)
    rec.publish("", q, b"kept")
    rec.publish("", q, b"refused")
    assert rec.wait_all() == {1: "ack", 2: "nack"}
    amqp.wait_counts(dlq, (1, 0))
    dead = get(ch, dlq, auto_ack=True)
    assert dead.body == b"refused"
    assert dead.headers["x-death"][0]["reason"] == "maxlen"
    assert dead.headers["x-death"][0]["queue"] == q


def test_returns_precede_acks_under_load(amqp, conn, ch):
    # 200 pipelined mandatory publishes, every third one unroutable: each of the 67 returns
    # (312) arrives before the ack that covers its sequence number (acks may be multiple).
    q = amqp.queue(ch)
    rec = ConfirmRecorder(conn, ch)
    unroutable = set()
    for i in range(200):
        if i % 3 == 0:
            seq = rec.publish("amq.direct", amqp.unique("nobody"), f"r{i}".encode(),
                              mandatory=True)
            unroutable.add(seq)
        else:
            rec.publish("", q, f"m{i}".encode(), mandatory=True)
    confirmed = rec.wait_all()
    assert confirmed == {s: "ack" for s in range(1, 201)}
    returns = [e for e in rec.events if e[0] == "return"]
    assert len(returns) == len(unroutable) and all(e[1] == 312 for e in returns)
    # Position of the first ack covering each sequence number.
    first_ack = {}
    for pos, e in enumerate(rec.events):
        if e[0] == "ack":
            for s in (range(1, e[1] + 1) if e[2] else [e[1]]):
                first_ack.setdefault(s, pos)
    return_pos = [pos for pos, e in enumerate(rec.events) if e[0] == "return"]
    # Returns come in publish order: the k-th return belongs to the k-th unroutable publish.
    for pos, seq in zip(return_pos, sorted(unroutable)):
        assert pos < first_ack[seq], (seq, pos, first_ack[seq])
    amqp.wait_counts(q, (200 - len(unroutable), 0))
