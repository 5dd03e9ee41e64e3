"""A channel's publisher confirms on the broker side (RabbitMQ's ``confirm`` class,
rabbitmq.com/docs/confirms): the one owner of their state.

Off until ``confirm.select``; then every publish takes the next sequence number (from 1), and
is confirmed with ``basic.ack`` (``multiple`` where possible) once it is routed and enqueued
and, when the store wrote it (a persistent message in a durable queue), once the store
fsynced the batch holding it; with ``basic.nack`` when a queue refused it (``x-overflow
=reject-publish``) or the store failed to commit it. ``basic.return`` 312 NO_ROUTE of an
unroutable mandatory message precedes its ack (the channel sends it before
:meth:`PublisherConfirms.published`).

The connection and the broker only schedule: the connection keeps the confirms to send after
its reads (``conn.confirm_channels``) and the broker the ones waiting on the store
(``broker.store_waiters``), both as references to these objects.
"""

from __future__ import annotations

from collections import deque

from ..protocol import spec

__all__ = ["PublisherConfirms"]

_Ack, _Nack = spec.Basic.Ack, spec.Basic.Nack


class PublisherConfirms:
    """Publisher confirms of ``channel`` (a broker :class:`~.channel.Channel`: its ``conn``,
    ``broker``, ``send`` and ``closing`` are used).

    State: :attr:`enabled` (confirm.select seen), :attr:`seq` (the last sequence number
    given), :attr:`acked` (the last one confirmed), :attr:`pending` (``(seq, store ticket,
    nack)`` of the publishes that cannot be confirmed in one ``multiple`` ack right away:
    waiting on the store, or to be nacked).
    """

    __slots__ = ("channel", "enabled", "seq", "acked", "pending")

    def __init__(self, channel):
        self.channel = channel
        self.enabled = False
        self.seq = 0
        self.acked = 0
        self.pending: deque = deque()

    @property
    def unconfirmed(self) -> int:
        """Publishes not confirmed yet (the management API's ``messages_unconfirmed``)."""
        return self.seq - self.acked if self.enabled else 0

    def select(self) -> None:
        """``confirm.select``: every later publish is confirmed."""
        self.enabled = True

    def published(self, ticket: int, rejected: bool) -> None:
        """A publish was routed: ``ticket`` (the store batch holding it, 0 when not stored)
        and ``rejected`` (a queue refused it: nack). Its confirm is sent at the connection's
        next flush (:meth:`flush`)."""
        ch = self.channel
        broker = ch.broker
        seq = self.seq = self.seq + 1
        pend = self.pending
        if rejected or ticket > broker.store.durable_ticket or pend:
            pend.append((seq, ticket, rejected))
            if ticket:
                broker.store_waiters.add(self)
        conn = ch.conn
        conn.confirm_channels.add(self)
        if not conn.dirty:
            conn.mark_dirty()

    def flush(self) -> None:
        """Send basic.ack / basic.nack for every publish whose outcome is settled (in order,
        with multiple=true where possible)."""
        ch = self.channel
        if not self.enabled or ch.closing:
            return
        broker = ch.broker
        durable = broker.store.durable_ticket
        pend = self.pending
        acked = self.acked
        send = ch.send
        while pend:
            seq, ticket, nack = pend[0]
            if ticket > durable:
                break
            pend.popleft()
            if nack:
                if seq - 1 > acked:
                    send(_Ack(delivery_tag=seq - 1, multiple=True))
                send(_Nack(delivery_tag=seq, multiple=False, requeue=False))
                acked = seq
        target = pend[0][0] - 1 if pend else self.seq
        broker.stats.confirmed += target - self.acked
        if target > acked:
            send(_Ack(delivery_tag=target, multiple=target - acked > 1))
            acked = target
        self.acked = acked
        if not any(t > durable for _, t, _ in pend):
            broker.store_waiters.discard(self)

    def fail(self, first: int, last: int) -> None:
        """Store batches ``first..last`` failed to commit: the publishes waiting on them get
        basic.nack instead of basic.ack (sent by :meth:`flush`)."""
        pend = self.pending
        if any(first <= t <= last for _, t, _ in pend):
            self.pending = deque((s, t, n or first <= t <= last) for s, t, n in pend)

    def stored(self) -> None:
        """The store committed more: flush at the connection's next write."""
        conn = self.channel.conn
        conn.confirm_channels.add(self)
        conn.mark_dirty()

    def drop(self) -> None:
        """The channel is gone: nothing more is sent, nothing waits on the store."""
        self.channel.broker.store_waiters.discard(self)
        self.channel.conn.confirm_channels.discard(self)
