"""One AMQP channel on the broker side: consumers, deliveries, acks, qos, confirms, tx.

The :class:`Channel` is its state (this module) plus one part per AMQP class, each in its
own module: :mod:`.channel_basic` (publish, consume, get, acks, qos),
:mod:`.channel_delivery` (basic.deliver, the hot path), :mod:`.channel_confirm_tx` (confirm,
tx), :mod:`.channel_exchange`, :mod:`.channel_queue`; and the channel owns its parts' state
objects: its publisher confirms (:class:`.confirms.PublisherConfirms`), its unacked deliveries
(:class:`.unacked.Unacked`), and per consumer the typed delivery frames
(:mod:`.deliver_frames`). The connection dispatches a method to the handler :data:`HANDLERS`
names for its generated method class (``spec.Basic.Ack`` ...; :mod:`spark_amqp.protocol.
methods`); the handlers raise their own errors without method ids and the dispatcher fills in
those of the method that failed.

Semantics (RabbitMQ 3.10, checked on the real broker where the spec is loose):

- delivery tags count from 1 per channel across basic.deliver and basic.get-ok;
- ack/nack/reject with ``multiple`` (tag 0 + multiple = everything outstanding); an unknown
  tag → channel.close 406 PRECONDITION_FAILED "unknown delivery tag N";
- requeued messages go back to their queue's head in original order, redelivered=true;
  closing the channel requeues everything unacked;
- basic.qos: ``global=false`` limits each *new* consumer, ``global=true`` the channel
  (RabbitMQ's reinterpretation); prefetch-size≠0 → 540;
- publisher confirms: sequence numbers from 1; basic.ack (multiple where possible) after
  routing and enqueueing, and for persistent messages in durable queues after the store
  fsynced; basic.return 312 NO_ROUTE precedes the ack of an unroutable mandatory message;
  basic.nack when a reject-publish queue refused the message, or when the store failed to
  commit the message (disk full etc., see :mod:`.store`); a tx.commit whose messages the
  store failed to write closes the channel with 506 RESOURCE_ERROR;
- tx.select/commit/rollback: publishes and acks are buffered until commit; commit/rollback on
  a non-tx channel → 406; tx and confirm modes exclude each other → 406;
- channel.flow active=false → 540 (RabbitMQ ≥ 3.3); basic.recover requeue=false → 540.
"""

from __future__ import annotations

from typing import Any, Callable

from ..protocol import spec
from ..protocol.errors import AMQPNotImplemented
from .channel_basic import BasicMethods
from .channel_confirm_tx import ConfirmTxMethods
from .channel_delivery import DeliveryMethods, shortstr
from .channel_exchange import ExchangeMethods
from .channel_queue import QueueMethods
from .confirms import PublisherConfirms
from .names import REPLY_TO, new_name
from .queue import Consumer, Queue
from .unacked import Unacked

__all__ = ["Channel", "HANDLERS", "new_name", "shortstr", "REPLY_TO"]


class Channel(BasicMethods, DeliveryMethods, ConfirmTxMethods, ExchangeMethods, QueueMethods):
    """Broker-side state of channel ``number`` on connection ``conn``."""

    METHODS = {spec.Channel.Flow: "on_flow", spec.Access.Request: "on_access_request"}

    def __init__(self, conn, number: int):
        self.conn = conn
        self.broker = conn.broker
        self.vhost = conn.vhost
        self.number = number
        self.closing = False          # channel.close sent, waiting for close-ok
        self.flow_active = True
        self.can_deliver = conn.writable
        self.next_tag = 1
        self.unacked = Unacked()
        self.consumers: dict[str, Consumer] = {}
        #: cancelled consumers of this channel whose deliveries are not all settled yet
        self.former_consumers: list[Consumer] = []
        self.prefetch_consumer = 0
        self.prefetch_global = 0
        #: publisher confirms (:mod:`.confirms`): the one owner of their state
        self.confirms = PublisherConfirms(self)
        self.tx = False
        self.tx_publishes: list = []
        self.tx_acks: list = []
        self.last_queue: str | None = None
        self.frame_max = conn.frame_max
        self.reply_queue: Queue | None = None

    @property
    def unacked_count(self) -> int:
        """Deliveries to this channel's consumers not yet settled: what ``basic.qos
        global=true`` limits (basic.get-ok deliveries do not count, RabbitMQ 3.10). Derived
        from the consumers' counts, which their queues keep (:meth:`Queue.count_delivered`);
        acks held in a transaction count until tx.commit."""
        n = 0
        for c in self.consumers.values():
            n += c.unacked
        if self.former_consumers:
            self.former_consumers = former = [c for c in self.former_consumers if c.unacked]
            for c in former:
                n += c.unacked
        return n

    def _forget_consumer(self, c: Consumer) -> None:
        """``c`` is no longer a consumer of this channel; its unsettled deliveries still count."""
        if c.unacked:
            self.former_consumers.append(c)

    # ================================================================== output
    def send(self, method) -> None:
        self.conn.send_method(self.number, method)

    # ================================================================== channel / access class
    def on_flow(self, method) -> None:
        if not method.active:
            raise AMQPNotImplemented("active=false")
        self.send(spec.Channel.FlowOk(active=True))

    def on_access_request(self, method) -> None:
        self.send(spec.Access.RequestOk(reserved_1=1))

    # ================================================================== teardown
    def shutdown(self) -> None:
        """The channel is gone (closed or its connection died): cancel consumers, requeue."""
        for c in list(self.consumers.values()):
            c.queue.remove_consumer(c)
        self.consumers.clear()
        self.requeue_all()
        self.former_consumers = []
        self._drop_reply_queue()
        self.tx_publishes, self.tx_acks = [], []
        self.confirms.drop()


def _handlers() -> dict[int, Callable[[Channel, Any], None]]:
    """``method INDEX -> handler`` from the METHODS tables of the channel's parts."""
    table: dict[int, Callable[[Channel, Any], None]] = {}
    for part in Channel.__mro__:
        for cls, name in vars(part).get("METHODS", {}).items():
            table[cls.INDEX] = getattr(Channel, name)
    return table


#: handler of each method a client may send on an open channel, by the generated method
#: class's INDEX (``(class_id << 16) | method_id``), as the connection dispatches
HANDLERS: dict[int, Callable[[Channel, Any], None]] = _handlers()
