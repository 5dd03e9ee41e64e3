"""Publisher confirms and transactions on the broker side (AMQP 0-9-1 classes ``confirm``,
RabbitMQ's extension, and ``tx``; semantics as in :mod:`.channel`): confirm sequence numbers,
basic.ack / basic.nack once a publish is routed, enqueued and (persistent, durable queue)
stored; tx.commit / rollback of buffered publishes and acks.

Part of :class:`~.channel.Channel` (a mixin over the channel's state; routing and settling
are :mod:`.channel_basic`'s). Sources: rabbitmq.com/docs/confirms, the 0-9-1 reference
(tx class).
"""

from __future__ import annotations

from collections import deque

from ..protocol import spec
from ..protocol.errors import PreconditionFailed, ResourceError

__all__ = ["ConfirmTxMethods"]

_TX_COMMIT = (spec.Tx.Commit.CLASS_ID, spec.Tx.Commit.METHOD_ID)


class ConfirmTxMethods:
    """confirm.select, tx.select / commit / rollback, and settling publisher confirms."""

    METHODS = {spec.Confirm.Select: "on_confirm_select", spec.Tx.Select: "on_tx_select",
               spec.Tx.Commit: "on_tx_commit", spec.Tx.Rollback: "on_tx_rollback"}

    def flush_confirms(self) -> None:
        """Send basic.ack / basic.nack for every publish whose outcome is settled (in order,
        with multiple=true where possible)."""
        if not self.confirm or self.closing:
            return
        durable = self.broker.store.durable_ticket
        pend = self.confirm_pending
        acked = self.confirm_acked
        send = self.send
        while pend:
            seq, ticket, nack = pend[0]
            if ticket > durable:
                break
            pend.popleft()
            if nack:
                if seq - 1 > acked:
                    send(spec.Basic.Ack(delivery_tag=seq - 1, multiple=True))
                send(spec.Basic.Nack(delivery_tag=seq, multiple=False, requeue=False))
                acked = seq
        target = pend[0][0] - 1 if pend else self.confirm_seq
        self.broker.stats.confirmed += target - self.confirm_acked
        if target > acked:
            send(spec.Basic.Ack(delivery_tag=target, multiple=target - acked > 1))
            acked = target
        self.confirm_acked = acked
        if not any(t > durable for _, t, _ in pend):
            self.broker.store_waiters.discard(self)

    def fail_confirms(self, first: int, last: int) -> None:
        """Store batches ``first..last`` failed to commit: the publishes waiting on them get
        basic.nack instead of basic.ack (sent by :meth:`flush_confirms`)."""
        pend = self.confirm_pending
        if any(first <= t <= last for _, t, _ in pend):
            self.confirm_pending = deque((s, t, n or first <= t <= last) for s, t, n in pend)

    def on_confirm_select(self, method) -> None:
        if self.tx:
            raise PreconditionFailed("cannot switch from tx to confirm mode", method.CLASS_ID, method.METHOD_ID)
        self.confirm = True
        if not method.nowait:
            self.send(spec.Confirm.SelectOk())

    def on_tx_select(self, method) -> None:
        if self.confirm:
            raise PreconditionFailed("cannot switch from confirm to tx mode", method.CLASS_ID, method.METHOD_ID)
        self.tx = True
        self.send(spec.Tx.SelectOk())

    def on_tx_commit(self, method) -> None:
        if not self.tx:
            raise PreconditionFailed("channel is not transactional", method.CLASS_ID, method.METHOD_ID)
        pubs, acks = self.tx_publishes, self.tx_acks
        self.tx_publishes, self.tx_acks = [], []
        ticket = 0
        for x, m, mandatory in pubs:
            queues = self._queues_for(x, m)
            if not queues:
                if mandatory:
                    self._return(m, 312, "NO_ROUTE")
                continue
            t, _ = self.broker.enqueue(queues, m)
            ticket = max(ticket, t)
        for entries, requeue, failed in acks:
            self._settle(entries, requeue, failed)
        if ticket and ticket > self.broker.store.durable_ticket:
            self.broker.after_commit(ticket, lambda: self.closing or self.send(spec.Tx.CommitOk()),
                                     self._tx_commit_failed)
        else:
            self.send(spec.Tx.CommitOk())

    def _tx_commit_failed(self, error: BaseException) -> None:
        """The store could not write this transaction's persistent messages: tx.commit fails
        with channel.close 506 RESOURCE_ERROR (AMQP 0-9-1 tx.commit: a failed commit raises a
        channel exception); the messages stay in their queues but are not durable."""
        if self.closing:
            return
        self.conn.channel_error(self, ResourceError(
            f"tx.commit failed: the broker could not store the transaction's messages "
            f"({type(error).__name__}: {error}); they are not durable", *_TX_COMMIT))

    def on_tx_rollback(self, method) -> None:
        if not self.tx:
            raise PreconditionFailed("channel is not transactional", method.CLASS_ID, method.METHOD_ID)
        # acks recorded in the transaction are undone: those messages are unacked again
        restored = [batch for batch, *_ in self.tx_acks if batch[0]]
        self.tx_publishes, self.tx_acks = [], []
        if restored:
            self.unacked.restore(restored)
        self.send(spec.Tx.RollbackOk())
