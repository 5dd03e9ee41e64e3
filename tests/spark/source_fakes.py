"""A fake driver consumer for unit tests of the queue-mode reader (no broker, no Spark): it
implements the whole ``spark_amqp.spark.source.queues.consumer.QueueConsumer`` protocol; and a
fake clock for the reader's ``clock`` parameter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spark_amqp.protocol import BasicProperties


@dataclass
class FakeDelivery:
    body: bytes
    delivery_tag: int
    exchange: str = ""
    routing_key: str = ""
    redelivered: bool = False
    properties: Any = field(default_factory=BasicProperties)
    consumer_tag: str = "ctag"


class FakeBroker:
    """Queues of bodies; a 'connection' takes what is published, acks remove for good,
    losing the connection requeues everything unacked as redelivered (AMQP 0-9-1 §1.8.3.13)."""

    def __init__(self, queues):
        self.ready = {q: [] for q in queues}       # (body, props, redelivered)
        self.acked = {q: [] for q in queues}
        self.consumers = []
        self.fail_open = None

    def publish(self, queue, body, props=None):
        self.ready[queue].append((body, props or BasicProperties(), False))

    def factory(self, options):
        c = FakeConsumer(self, options)
        self.consumers.append(c)
        return c


class FakeClock:
    """Monotonic seconds that move only when told (``advance``)."""

    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class FakeConsumer:
    """A ``QueueConsumer`` over a :class:`FakeBroker`."""

    def __init__(self, broker: FakeBroker, options):
        self.broker = broker
        self.options = options
        self.is_open = False
        self.unacked = {}      # queue -> list[(tag, body, props, redelivered)]
        self.next_tag = {}
        self.initial_counts = {}
        self.acks = []         # (queue, tag)
        self.closed_politely = False
        #: the next basic.ack raises (the broker closed the queue's channel under it)
        self.fail_next_ack = False
        self.error = None      # why the connection ended (the fake never says)
        self.read_limit = None  # (max_bytes, extra) from set_read_limit

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
        out = []
        pf = self.options.prefetch
        while self.broker.ready[queue] and (pf == 0 or len(self.unacked[queue]) < pf):
            body, props, red = self.broker.ready[queue].pop(0)
            tag = self.next_tag[queue]
            self.next_tag[queue] += 1
            self.unacked[queue].append((tag, body, props, red))
            out.append(FakeDelivery(body, tag, "", queue, red, props))
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

    def set_read_limit(self, max_bytes, extra):
        self.read_limit = (max_bytes, extra)

    def resume_reading(self):
        pass

    def queue_depths(self):
        if not self.is_open:
            raise ConnectionError("connection lost")
        return {q: len(self.broker.ready[q]) for q in self.options.queues}

    def queue_of_channel(self, channel):
        return None

    def kill(self):
        """Connection loss: the broker requeues unacked deliveries as redelivered."""
        if not self.is_open:
            return
        self.is_open = False
        for q, us in self.unacked.items():
            self.broker.ready[q][0:0] = [(b, p, True) for _, b, p, _ in us]
            self.unacked[q] = []

    def close(self):
        self.closed_politely = True
        self.kill()

    def abort(self):
        self.kill()
