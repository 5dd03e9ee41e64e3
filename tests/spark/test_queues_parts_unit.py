"""The queue mode's parts on their own (no broker, no Spark): the connection supervisor under a
fake clock, the pure batch planner, Trigger.AvailableNow's budget, and the consumer protocol
that the driver's consumer and the tests' fake both implement."""

from __future__ import annotations

import pytest

from spark_amqp.spark.source.queues.options import parse_source_options
from spark_amqp.spark.source.queues.budget import AvailableNowBudget
from spark_amqp.spark.source.queues.buffer import DECODED_OVERHEAD, QueueBuffer
from spark_amqp.spark.source.queues.consumer import DriverConsumer, QueueConsumer, QueueMissing
from spark_amqp.spark.source.queues.errors import BrokerUnreachable
from spark_amqp.spark.source.queues.planner import (BatchPlan, available_now_full,
                                                    cannot_grow, plan_batch)
from spark_amqp.spark.source.queues.supervisor import ConnectionSupervisor

from source_fakes import FakeBroker, FakeClock, FakeDelivery


def _supervisor(broker, clock, **opts):
    o = parse_source_options({"queues": ",".join(broker.ready), **opts})
    return ConnectionSupervisor(lambda: broker.factory(o), o, clock, sleep=clock.advance)


def test_the_fake_and_the_driver_consumer_implement_the_protocol():
    o = parse_source_options({"queue": "a"})
    assert isinstance(FakeBroker(["a"]).factory(o), QueueConsumer)
    assert isinstance(DriverConsumer(o), QueueConsumer)        # no I/O before open()
    assert not isinstance(object(), QueueConsumer)


def test_back_off_doubles_up_to_30_s_with_one_address():
    broker, clock = FakeBroker(["a"]), FakeClock(0.0)
    sup = _supervisor(broker, clock)
    assert sup.connect() is broker.consumers[0] and sup.is_open
    broker.fail_open = ConnectionRefusedError("refused")
    sup.lost()
    assert sup.consumer is None and broker.consumers[0].is_open is False
    assert (sup.failing_since, sup.next_attempt) == (0.0, 0.5)
    assert sup.connect() is None and len(broker.consumers) == 1   # within the back-off
    waits = []
    for _ in range(9):
        clock.t = sup.next_attempt
        assert sup.connect() is None                             # failed, logged, not raised
        waits.append(sup.next_attempt - clock.t)
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]
    assert len(broker.consumers) == 10
    broker.fail_open = None
    clock.t = sup.next_attempt
    assert sup.connect() is not None
    assert (sup.backoff, sup.failing_since) == (0.5, None)        # reset by a connection


def test_several_addresses_reconnect_at_once_then_back_off_up_to_5_s():
    broker, clock = FakeBroker(["a"]), FakeClock(0.0)
    sup = _supervisor(broker, clock, uri="amqp://g:g@h1,h2/%2F")
    sup.connect()
    broker.fail_open = ConnectionRefusedError("refused")
    sup.lost()
    assert sup.retry_due() and sup.connect() is None             # tried at once
    for _ in range(6):
        clock.t = sup.next_attempt
        sup.connect()
    assert sup.backoff == 5.0 and sup.next_attempt - clock.t == 5.0


def test_failover_timeout_raises_broker_unreachable_and_first_errors_propagate():
    broker, clock = FakeBroker(["a"]), FakeClock(0.0)
    sup = _supervisor(broker, clock, failoverTimeout="10")
    broker.fail_open = ConnectionRefusedError("h:1 refused")
    with pytest.raises(ConnectionRefusedError):                  # the first connection
        sup.connect()
    broker.fail_open = None
    sup.connect()
    broker.fail_open = ConnectionRefusedError("h:1 refused")
    sup.lost()
    for t in (0.5, 1.5, 3.5, 7.5):                               # the back-off: 0.5, 1, 2, 4
        assert sup.next_attempt == t
        clock.t = t
        assert sup.connect() is None                             # logged, not raised
    clock.t = sup.next_attempt                                   # 15.5: past the 10 s
    with pytest.raises(BrokerUnreachable, match=r"15\.5 s \(failoverTimeout 10 s\).*h:1 refused"):
        sup.connect()
    broker.fail_open = QueueMissing("gone")                      # failOnDataLoss=true
    clock.t = 100.0
    with pytest.raises(QueueMissing):
        sup.connect()


def test_available_now_waits_for_the_retry_within_its_deadline():
    broker, clock = FakeBroker(["a"]), FakeClock(0.0)
    sup = _supervisor(broker, clock)
    sup.connect()
    sup.lost()                                                   # next attempt at 0.5
    assert sup.wait_for_retry(2.0) and clock.t == 0.5           # slept out the back-off
    sup.next_attempt = 10.0                                      # a long back-off
    assert sup.wait_for_retry(2.0) and clock.t == 2.0           # cut at the deadline ...
    assert sup.next_attempt == 0.0                               # ... one last try at once
    assert not sup.wait_for_retry(2.0) and sup.reconnect_deadline is None


def _buffers(**sizes):
    out = {}
    for q, bodies in sizes.items():
        b = QueueBuffer(q)
        b.add([FakeDelivery(b"x" * n, i + 1) for i, n in enumerate(bodies)])
        out[q] = b
    return out


def test_plan_batch_rows_budget_and_bytes():
    bufs = _buffers(a=[10] * 8, b=[10] * 2)
    assert plan_batch(bufs, 6, None).want == {"a": 4, "b": 2}
    assert plan_batch(bufs, None, None, {"a": 3, "b": 5}).want == {"a": 3, "b": 2}
    w = 10 + DECODED_OVERHEAD
    p = plan_batch(bufs, None, 4 * w)
    assert p.byte_capped and p.total == 4 and p.want == {"a": 2, "b": 2}
    big = _buffers(a=[10_000])
    assert plan_batch(big, None, 100) == BatchPlan({"a": 1})   # a large one goes alone


def test_full_batches():
    bufs = _buffers(a=[10] * 4)
    plan = BatchPlan({"a": 4})
    assert available_now_full(plan, {"a": 4}, bufs, 0)
    assert not available_now_full(plan, {"a": 5}, bufs, 0)
    assert available_now_full(plan, {"a": 5}, bufs, 4)           # the prefetch window is full
    assert available_now_full(BatchPlan({"a": 1}, True), {"a": 5}, bufs, 0)
    assert cannot_grow(plan, 4, bufs, 0, 100, 0)                 # the row cap
    assert not cannot_grow(plan, 5, bufs, 0, 100, 0)
    assert cannot_grow(plan, None, bufs, 100, 100, 0)            # maxBufferedBytes held


def test_available_now_budget_is_derived_from_the_buffers():
    b = AvailableNowBudget({"a": 5, "b": 1})
    bufs = _buffers(a=[10] * 6, b=[10] * 3)
    bufs["a"].plan(4)
    bufs["b"].plan(3)                                            # never below 0
    assert b.remaining(bufs) == {"a": 1, "b": 0} and not b.done(bufs)
    assert b.goal(bufs, None) == {"a": 1, "b": 0}
    bufs["a"].plan(1)
    assert b.done(bufs)
    bufs["a"].ack_upto(3)                                        # the session acked 3 of 5
    b.session_lost(bufs)                   # what was planned but not acked goes back
    fresh = _buffers(a=[], b=[])
    assert b.remaining(fresh) == {"a": 2, "b": 1}
    fresh["a"].add([FakeDelivery(b"x", 1)])
    fresh["a"].plan(1)
    assert b.remaining(fresh) == {"a": 1, "b": 1}
    b.give_up()
    assert b.done(fresh) and b.remaining(fresh) == {"a": 0, "b": 0}
