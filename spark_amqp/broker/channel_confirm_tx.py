"""confirm.select and transactions on the broker side (AMQP 0-9-1 classes ``confirm``,
RabbitMQ's extension, and ``tx``; semantics as in :mod:`.channel`): the confirm mode (whose
sequence numbers and basic.ack / basic.nack are :class:`.confirms.PublisherConfirms`'), and
tx.commit / rollback of buffered publishes and acks.

Part of :class:`~.channel.Channel` (a mixin over the channel's state; routing and settling
are :mod:`.channel_basic`'s). Sources: rabbitmq.com/docs/confirms, the 0-9-1 reference
(tx class).
"""

from __future__ import annotations

from ..protocol import spec
from ..protocol.errors import PreconditionFailed, ResourceError

__all__ = ["ConfirmTxMethods"]

_TX_COMMIT = (spec.Tx.Commit.CLASS_ID, spec.Tx.Commit.METHOD_ID)


class ConfirmTxMethods:
    """confirm.select, tx.select / commit / rollback."""

    METHODS = {spec.Confirm.Select: "on_confirm_select", spec.Tx.Select: "on_tx_select",
               spec.Tx.Commit: "on_tx_commit", spec.Tx.Rollback: "on_tx_rollback"}

    def on_confirm_select(self, method) -> None:
        if self.tx:
            raise PreconditionFailed("cannot switch from tx to confirm mode")
        self.confirms.select()
        if not method.nowait:
            self.send(spec.Confirm.SelectOk())

    def on_tx_select(self, method) -> None:
        if self.confirms.enabled:
            raise PreconditionFailed("cannot switch from confirm to tx mode")
        self.tx = True
        self.send(spec.Tx.SelectOk())

    def on_tx_commit(self, method) -> None:
        if not self.tx:
            raise PreconditionFailed("channel is not transactional")
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
            raise PreconditionFailed("channel is not transactional")
        # acks recorded in the transaction are undone: those messages are unacked again
        restored = [batch for batch, *_ in self.tx_acks if batch[0]]
        self.tx_publishes, self.tx_acks = [], []
        if restored:
            self.unacked.restore(restored)
        self.send(spec.Tx.RollbackOk())
