"""Message counters of the broker, for the management API and Prometheus metrics.

Each queue counts, as plain integer attributes incremented on the paths that already touch
the queue (a few nanoseconds per message):

- ``stat_publish``: messages enqueued (published or dead-lettered into it);
- ``stat_deliver``: basic.deliver to consumers (ack and no-ack);
- ``stat_get``: messages fetched with basic.get;
- ``stat_ack``: deliveries acknowledged;
- ``stat_redeliver``: messages requeued (reject/nack/recover/closed channel) - each is
  delivered again with redelivered=true, RabbitMQ's ``redeliver`` counts them at that
  delivery, so a requeued message that is purged before it goes out is counted here only.

The broker counts, in :class:`BrokerStats`, the messages received from publishers
(``received``), the publisher confirms sent (``confirmed``), the unroutable ones
(``unroutable``, returned or dropped), and keeps the totals of deleted queues so that broker-wide
totals (RabbitMQ's ``rabbitmq_global_messages_*_total``) never go down.

Source: RabbitMQ management HTTP API ``message_stats`` (publish, deliver, deliver_get, get,
ack, redeliver, confirm, return_unroutable/drop_unroutable) and its Prometheus plugin's
``rabbitmq_global_messages_received_total`` / ``delivered_total`` / ``acknowledged_total`` /
``confirmed_total`` / ``redelivered_total``.
"""

from __future__ import annotations

__all__ = ["BrokerStats", "QUEUE_COUNTERS"]

#: the per-queue counter attributes (all ints, initialised to 0 by Queue)
QUEUE_COUNTERS = ("stat_publish", "stat_deliver", "stat_get", "stat_ack", "stat_redeliver")


class BrokerStats:
    """Broker-wide counters (ints, monotonic since the broker started)."""

    __slots__ = ("received", "confirmed", "unroutable", "retired")

    def __init__(self) -> None:
        self.received = 0
        self.confirmed = 0
        self.unroutable = 0
        #: the QUEUE_COUNTERS of deleted queues, summed
        self.retired = dict.fromkeys(QUEUE_COUNTERS, 0)

    def retire(self, q) -> None:
        """Queue ``q`` is being deleted: keep its counts in the broker-wide totals."""
        r = self.retired
        for k in QUEUE_COUNTERS:
            r[k] += getattr(q, k, 0)

    def totals(self, queues) -> dict[str, int]:
        """The QUEUE_COUNTERS summed over ``queues`` (iterable of live queues) and the
        deleted ones."""
        t = dict(self.retired)
        for q in queues:
            for k in QUEUE_COUNTERS:
                t[k] += getattr(q, k)
        return t
