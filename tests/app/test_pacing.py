"""A publisher's steady rate (``spark_amqp.tools.pacing``) and ``publish_messages(rate=...)``,
which the main job's ``--live`` demo and ``bench.latency`` publish with: no broker, a fake clock
or a fake channel."""

from __future__ import annotations

import time

import pytest

from spark_amqp.tools.flights import OutgoingMessage
from spark_amqp.tools.pacing import due, next_send_delay, paced_sends
from spark_amqp.tools.publishing import publish_messages


def test_due_counts_the_first_message_at_zero_and_caps_at_total():
    assert due(100, -0.1, 50) == 0
    assert due(100, 0.0, 50) == 1
    assert due(100, 0.0099, 50) == 1
    assert due(100, 0.0101, 50) == 2
    assert due(100, 10.0, 50) == 50


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        assert s > 0
        self.t += s


@pytest.mark.parametrize("rate", [100, 1000, 10_000, 37])
def test_paced_sends_keep_the_rate_and_send_each_message_on_time(rate):
    clock = FakeClock()
    sends = []                                 # (time, n)
    total = rate * 3
    sent, seconds = paced_sends(rate, total, lambda n: sends.append((clock.t, n)), clock,
                                clock.sleep)
    assert sent == total == sum(n for _, n in sends)
    # the last message is due at (total - 1) / rate: the run lasts that long, not more
    assert (total - 1) / rate <= seconds < (total - 1) / rate + 2 * 0.002 + 1e-9
    i = 0
    for t, n in sends:
        for k in range(i, i + n):              # message k goes out at or after its due time,
            assert k / rate <= t + 1e-9       # and at most one tick late
            assert t < k / rate + 0.002 + 1e-6
        i += n
    if rate <= 100:                            # slower than the tick: one message per send
        assert all(n == 1 for _, n in sends)
    else:                                      # faster: batches, not one wake-up per message
        assert len(sends) <= seconds / 0.002 + 2


def test_paced_sends_end_when_the_messages_run_out():
    clock = FakeClock()
    left = [25]

    def send(n):
        went = min(n, left[0])
        left[0] -= went
        return went

    sent, seconds = paced_sends(1000, None, send, clock, clock.sleep)
    assert sent == 25 and 0.024 <= seconds < 0.03
    with pytest.raises(ValueError, match="> 0"):
        paced_sends(0, 10, send, clock, clock.sleep)


def test_next_send_delay_never_spins():
    assert next_send_delay(10_000, 1.0, 10_001) == pytest.approx(0.002)
    assert next_send_delay(10, 1.0, 11) == pytest.approx(0.1)
    assert next_send_delay(10, 5.0, 11) == 0.002     # behind: send at the next tick


class FakeChannel:
    """publish_batch records (time, batch size); every publish is confirmed at once."""

    def __init__(self):
        self.sends = []
        self.confirms = 0

    def confirm_select(self):
        pass

    def publish_batch(self, batch):
        assert all(item[4] is True for item in batch)      # mandatory
        self.sends.append((time.monotonic(), len(batch)))

    def wait_for_confirms(self):
        self.confirms += 1

        class Result:
            returned = []
        return Result()


def test_publish_messages_at_a_rate_spreads_the_messages_over_time():
    ch = FakeChannel()
    msgs = [OutgoingMessage(body=b"x%d" % i, routing_key="k") for i in range(400)]
    t0 = time.monotonic()
    stats = publish_messages(ch, msgs, "ex", progress=False, rate=2000, batch_size=500)
    took = time.monotonic() - t0
    assert stats.confirmed == 400 and stats.returned == 0
    assert sum(n for _, n in ch.sends) == 400
    assert took >= 399 / 2000                       # not faster than the rate
    assert len(ch.sends) > 10                        # in many small sends, not one


def test_publish_messages_without_a_rate_sends_in_batches():
    ch = FakeChannel()
    msgs = [OutgoingMessage(body=b"x", routing_key="k") for _ in range(1200)]
    stats = publish_messages(ch, msgs, "ex", progress=False, batch_size=500)
    assert stats.confirmed == 1200
    assert [n for _, n in ch.sends] == [500, 500, 200]
