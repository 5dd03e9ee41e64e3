"""A fake driver consumer whose drain returns RawDeliveries runs mixed with single decoded
Deliveries (as the raw-mode channel does), channel-scoped tags shared by several consumers,
multiple=True acks with 406 on an unknown tag, and requeue-on-loss."""
from __future__ import annotations

import random

from spark_amqp.client import Delivery
from spark_amqp.protocol import BasicProperties, Decoder, RawDeliveries, encode_message, spec

from source_fakes import FakeBroker, FakeConsumer

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


class RawConsumer(FakeConsumer):
    """:class:`FakeConsumer` whose drain returns runs and single deliveries, tags shared by
    ``consumers`` consumers on one channel."""

    def __init__(self, broker, options, rng, consumers=3):
        super().__init__(broker, options)
        self.rng = rng
        self.consumers = consumers

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
            self.unacked[queue].append((tag, body, BasicProperties(), red))
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


class RawBroker(FakeBroker):
    def __init__(self, queues, seed=0):
        super().__init__(queues)
        self.rng = random.Random(seed)

    def factory(self, options):
        c = RawConsumer(self, options, self.rng)
        self.consumers.append(c)
        return c
