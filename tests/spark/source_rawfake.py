"""A fake driver consumer whose drain returns RawDeliveries runs mixed with single decoded
Deliveries (as the raw-mode channel does), channel-scoped tags shared by several consumers,
multiple=True acks with 406 on an unknown tag, and requeue-on-loss."""
from __future__ import annotations

import random

from spark_amqp.client import Delivery
from spark_amqp.protocol import BasicProperties, Decoder, RawDeliveries, encode_message, spec

from source_fakes import FakeBroker

D = spec.Basic.Deliver


def make_run(deliveries):
    """deliveries: list of (ctag, tag, redelivered, body) with consecutive tags."""
    parts = [encode_message(1, D(c, t, r, "", "rk"), None, b, frame_max=131072)
             for c, t, r, b in deliveries]
    dec = Decoder(frame_max=131072)
    dec.raw_channels.add(1)
    evs = dec.feed(b"".join(parts))
    assert len(evs) == 1 and type(evs[0]) is RawDeliveries, evs
    return evs[0]


class RawConsumer:
    def __init__(self, broker, options, rng, consumers=3):
        self.broker, self.options, self.rng = broker, options, rng
        self.consumers = consumers
        self.is_open = False
        self.unacked, self.next_tag, self.initial_counts = {}, {}, {}
        self.acks = []
        self.fail_next_ack = False

    def open(self):
        if self.broker.fail_open:
            raise self.broker.fail_open
        self.is_open = True
        for q in self.options.queues:
            self.unacked[q] = []
            self.next_tag[q] = 1
            self.initial_counts[q] = len(self.broker.ready[q])

    def drain(self, queue, timeout=0.0):
        if not self.is_open:
            raise ConnectionError("connection lost")
        pf = self.options.prefetch
        take = []
        ready = self.broker.ready[queue]
        limit = self.rng.randint(0, 12)
        while ready and len(take) < limit and (pf == 0 or len(self.unacked[queue]) + len(take) < pf):
            body, props, red = ready.pop(0)
            tag = self.next_tag[queue]
            self.next_tag[queue] += 1
            ctag = f"c{self.rng.randrange(self.consumers)}"  # several consumers, one tag sequence
            take.append((ctag, tag, red, body))
        for ctag, tag, red, body in take:
            self.unacked[queue].append((tag, body, None, red))
        out = []
        i = 0
        while i < len(take):
            n = self.rng.randint(1, len(take) - i)
            chunk = take[i:i + n]
            if n == 1 and self.rng.random() < 0.5:
                c, t, r, b = chunk[0]
                out.append(Delivery(c, t, r, "", "rk", BasicProperties(), b, None, 1))
            else:
                out.append(make_run(chunk))
            i += n
        return out

    def ack(self, queue, tag):
        if not self.is_open:
            raise ConnectionError("connection lost")
        if self.fail_next_ack:
            self.fail_next_ack = False
            raise ConnectionError("channel closed under the ack")
        known = [u for u in self.unacked[queue] if u[0] <= tag]
        assert known and known[-1][0] == tag, f"unknown delivery tag {tag} (406)"
        self.acks.append((queue, tag))
        self.broker.acked[queue] += [u[1] for u in known]
        self.unacked[queue] = [u for u in self.unacked[queue] if u[0] > tag]

    def kill(self):
        if not self.is_open:
            return
        self.is_open = False
        for q, us in self.unacked.items():
            self.broker.ready[q][0:0] = [(b, BasicProperties(), True) for _, b, _, _ in us]
            self.unacked[q] = []

    def close(self):
        self.kill()

    def abort(self):
        self.kill()


class RawBroker(FakeBroker):
    def __init__(self, queues, seed=0):
        super().__init__(queues)
        self.rng = random.Random(seed)

    def factory(self, options):
        c = RawConsumer(self, options, self.rng)
        self.consumers.append(c)
        return c
