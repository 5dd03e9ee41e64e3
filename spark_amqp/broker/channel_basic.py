"""The basic class on the broker side: publish, consume / cancel, get, ack / nack / reject,
recover, qos, direct reply-to (AMQP 0-9-1 class ``basic``, RabbitMQ 3.10 semantics as in
:mod:`.channel`).

Part of :class:`~.channel.Channel` (a mixin over the channel's state). Settling deliveries goes
through their queues (:meth:`.queue.Queue.ack`, ``reject_one``, ``return_unacked``), which own
the unacked counts; publishing goes through :meth:`.server.Broker.enqueue`; publisher confirms
and transactions are :mod:`.channel_confirm_tx`'s.
"""

from __future__ import annotations

from ..protocol import spec
from ..protocol.errors import (AccessRefused, AMQPNotImplemented, InternalError, NotAllowed,
                               NotFound, PreconditionFailed)
from ..protocol.server_frames import content_frames, get_ok_payload, return_payload
from .channel_delivery import shortstr, with_delivery_count
from .message import Message, peek_properties
from .names import REPLY_TO, new_name
from .queue import Consumer, Queue
from .rules import check_consumer_max, check_publish

__all__ = ["BasicMethods"]

_B = spec.Basic
_PUBLISH = (_B.Publish.CLASS_ID, _B.Publish.METHOD_ID)
_NACK = (_B.Nack.CLASS_ID, _B.Nack.METHOD_ID)
_REJECT = (_B.Reject.CLASS_ID, _B.Reject.METHOD_ID)
#: basic.recover's ids, also for basic.recover-async (as RabbitMQ 3.10 reports them)
_RECOVER = (_B.Recover.CLASS_ID, _B.Recover.METHOD_ID)


class BasicMethods:
    """The basic-class methods of a channel (see the module docstring)."""

    #: method class -> handler name (the channel's dispatch table, :data:`.channel.HANDLERS`)
    METHODS = {_B.Ack: "on_ack", _B.Nack: "on_nack", _B.Reject: "on_reject", _B.Qos: "on_qos",
               _B.Consume: "on_consume", _B.Cancel: "on_cancel", _B.Get: "on_get",
               _B.Recover: "on_recover", _B.RecoverAsync: "on_recover"}

    # ================================================================== publish (hot path)
    def on_publish(self, exchange: str, routing_key: str, mandatory: bool, immediate: bool,
                   enc: bytes, props_raw: bytes, body: bytes) -> None:
        """A complete basic.publish (method + header + body)."""
        if immediate:
            raise AMQPNotImplemented("immediate=true")
        vhost = self.vhost
        x = vhost.exchanges.get(exchange)
        if x is None:
            raise NotFound(f"no exchange '{exchange}' in vhost '{vhost.name}'")
        conn = self.conn
        if exchange not in conn.write_ok:
            if x.internal:
                raise AccessRefused(f"cannot publish to internal exchange '{exchange}' in vhost '{vhost.name}'")
            conn.check_perm("write", "exchange", exchange, *_PUBLISH)
            conn.write_ok.add(exchange)
        props = peek_properties(props_raw) if props_raw != b"\x00\x00" else None
        check_publish(self.broker.config, conn.user, None if props is None else props.user_id, len(body))
        if props is None and props_raw != b"\x00\x00" and self.reply_queue is not None:
            props = peek_properties(props_raw, True)
        if props is not None and props.reply_to == REPLY_TO:
            if self.reply_queue is None:
                raise PreconditionFailed("fast reply consumer does not exist")
            from ..protocol.properties import BasicProperties
            props = BasicProperties(**props.as_dict())
            props.reply_to = self.reply_queue.name
            props_raw = props.encode()
        m = Message(exchange, routing_key, props_raw, body, props)
        m.enc = enc
        conn.published = True
        self.broker.stats.received += 1
        if self.tx:
            self.tx_publishes.append((x, m, mandatory))
            return
        self._route(x, m, mandatory)

    def _queues_for(self, x, m: Message):
        """The queues ``m`` published to exchange ``x`` routes to (CC/BCC sender-selected
        distribution headers included, RabbitMQ docs/sender-selected)."""
        p = m._props
        if p is not None and p.headers and ("CC" in p.headers or "BCC" in p.headers):
            return self.vhost.route_with_cc(x, m.routing_key, m)
        return self.vhost.route(x, m.routing_key, m)

    def _route(self, x, m: Message, mandatory: bool) -> None:
        queues = self._queues_for(x, m)
        if not queues:
            if mandatory:
                self._return(m, 312, "NO_ROUTE")
            self.broker.stats.unroutable += 1
            ticket, rejected = 0, False
        else:
            ticket, rejected = self.broker.enqueue(queues, m)
        confirms = self.confirms
        if confirms.enabled:
            confirms.published(ticket, rejected)

    def _return(self, m: Message, code: int, text: str) -> None:
        content_frames(self.conn.out, self.number, return_payload(code, text, m.enc),
                       m.props_raw, m.body, self.frame_max)
        self.conn.mark_dirty()

    # ================================================================== acks
    def _take(self, tag: int, multiple: bool) -> tuple[list, list, list]:
        """Remove and return the batch (tags, messages, owners) an ack/nack/reject settles;
        an owner is the Consumer of a basic.deliver or the Queue of a basic.get-ok."""
        unacked = self.unacked
        if multiple:
            if tag == 0:
                return unacked.take_all()
            # RabbitMQ 3.10 (rabbit_channel:collect_acks): the tag itself must be outstanding
            batch = unacked.take_upto(tag)
        else:
            batch = unacked.take_one(tag)
        if batch is None:
            raise PreconditionFailed(f"unknown delivery tag {tag}")
        return batch

    def _settle(self, batch: tuple[list, list, list], requeue: bool | None,
                failed: bool = True) -> None:
        """ack (requeue=None) or reject (requeue bool) the (tags, messages, owners) ``batch``.
        ``failed``: a requeue counts as a failed delivery (a quorum queue's delivery count and
        limit; see :meth:`Queue.requeue`)."""
        mark = self.broker.mark_queue
        _, msgs, owners = batch
        if requeue is None and msgs:
            o = owners[0]
            if owners.count(o) == len(owners):
                groups = ((o, msgs),)
            else:
                by_owner: dict[int, tuple] = {}
                for m, o in zip(msgs, owners):
                    g = by_owner.get(id(o))
                    if g is None:
                        g = by_owner[id(o)] = (o, [])
                    g[1].append(m)
                groups = by_owner.values()
            for o, ms in groups:
                q = o.queue if o.__class__ is Consumer else o
                q.ack(ms, o)
                mark(q)
        elif msgs:
            touched = set()
            by_q: dict[int, tuple[Queue, list, list]] = {}
            for m, o in zip(msgs, owners):
                q = o.queue if o.__class__ is Consumer else o
                if requeue and not q.deleted:
                    g = by_q.get(id(q))
                    if g is None:
                        g = by_q[id(q)] = (q, [], [])
                    g[1].append(m)
                    g[2].append(o)
                else:
                    q.reject_one(m, o)
                if id(q) not in touched:
                    touched.add(id(q))
                    mark(q)
            for q, ms, os_ in by_q.values():
                q.return_unacked(ms, os_, failed)
        if self.prefetch_global:
            for c in self.consumers.values():
                mark(c.queue)

    def on_ack(self, method) -> None:
        entries = self._take(method.delivery_tag, method.multiple)
        if self.tx:
            self.tx_acks.append((entries, None, True))
            return
        self._settle(entries, None)

    def _refuse_stream_settle(self, tag: int, multiple: bool) -> None:
        """RabbitMQ 3.10.8: basic.nack / basic.reject of a stream delivery closes the
        connection with 540 "basic.nack and basic.reject not supported by stream queues ..."."""
        for o in self.unacked.owners_upto(tag, multiple):
            q = o.queue if o.__class__ is Consumer else o
            if q.stream:
                raise AMQPNotImplemented(f"basic.nack and basic.reject not supported by stream queues queue "
                                         f"'{q.name}' in vhost '{self.vhost.name}'", *(_NACK if multiple else _REJECT))

    def on_nack(self, method) -> None:
        """basic.nack. With requeue, RabbitMQ 4.3 returns the messages without counting a
        failed delivery (rabbit_channel: ``requeue`` -> rabbit_fifo ``return``, DeliveryFailed
        false, at v4.3.0); 3.10 counts it."""
        if self.unacked:
            self._refuse_stream_settle(method.delivery_tag, method.multiple)
        entries = self._take(method.delivery_tag, method.multiple)
        failed = self.broker.config.behaviour.requeue_counts_delivery
        if self.tx:
            self.tx_acks.append((entries, method.requeue, failed))
            return
        self._settle(entries, method.requeue, failed)

    def on_reject(self, method) -> None:
        if self.unacked:
            self._refuse_stream_settle(method.delivery_tag, False)
        entries = self._take(method.delivery_tag, False)
        if self.tx:
            # basic.reject with requeue counts in 4.3 too (``{modify, DeliveryFailed=true}``)
            self.tx_acks.append((entries, method.requeue, True))
            return
        self._settle(entries, method.requeue)

    def requeue_all(self, failed: bool = True) -> None:
        """Requeue every unacked message (channel close or lost connection: a failed delivery,
        rabbit_fifo ``return_all`` of a consumer ``down``; basic.recover: ``failed`` false in
        RabbitMQ 4.3, where it is a ``requeue``)."""
        if not self.unacked:
            return
        self._settle(self.unacked.take_all(), True, failed)

    def on_recover(self, method) -> None:
        if not method.requeue:
            raise AMQPNotImplemented("requeue=false", *_RECOVER)
        if self.unacked and any((o.queue if o.__class__ is Consumer else o).stream
                                for o in self.unacked.owners_upto(0, True)):
            # RabbitMQ 3.10.8 crashes (541) on basic.recover with unacked stream deliveries
            raise InternalError("basic.recover with unacknowledged deliveries from a stream queue: a stream "
                                "never redelivers; consume again from the offset to read", *_RECOVER)
        self.requeue_all(self.broker.config.behaviour.requeue_counts_delivery)
        if method.INDEX == spec.Basic.Recover.INDEX:
            self.send(spec.Basic.RecoverOk())

    # ================================================================== qos / consume / get
    def on_qos(self, method) -> None:
        """basic.qos. RabbitMQ 4.3 (deprecated feature ``global_qos``, denied_by_default):
        ``global=true`` is handled as ``global=false``, a prefetch for each new consumer
        (rabbit_channel ``handle_method(#'basic.qos'{global = true})`` at v4.3.0)."""
        if method.prefetch_size:
            raise AMQPNotImplemented(f"prefetch_size!=0 ({method.prefetch_size})")
        if method.global_ and self.broker.config.behaviour.global_qos:
            self.prefetch_global = method.prefetch_count
            for c in self.consumers.values():
                self.broker.mark_queue(c.queue)
        else:
            self.prefetch_consumer = method.prefetch_count
        self.send(spec.Basic.QosOk())

    def _reply_queue(self, no_ack: bool, cid: int, mid: int) -> Queue:
        """Direct reply-to (rabbitmq.com/direct-reply-to.html): a private, unlisted queue named
        ``amq.rabbitmq.reply-to.<token>`` that the default exchange routes to."""
        if not no_ack:
            raise PreconditionFailed("reply consumer cannot acknowledge", cid, mid)
        if self.reply_queue is not None:
            raise PreconditionFailed("reply consumer already set", cid, mid)
        token = new_name("amq.rabbitmq.reply-to.")
        q = Queue(self.broker, self.vhost, token, False, self.conn, True, {})
        self.vhost.reply_queues[token] = q
        self.reply_queue = q
        return q

    def on_consume(self, method) -> None:
        cid, mid = method.CLASS_ID, method.METHOD_ID
        check_consumer_max(self.broker.config, len(self.consumers), cid, mid)
        name = self._queue_name(method.queue, cid, mid)
        if name == REPLY_TO:
            q = self._reply_queue(method.no_ack, cid, mid)
        else:
            q = self.vhost.get_queue(name, self.conn, cid, mid)
        self.conn.check_perm("read", "queue", name, cid, mid)
        tag = method.consumer_tag or new_name("amq.ctag-")
        if tag in self.consumers:
            raise NotAllowed(f"attempt to reuse consumer tag '{tag}'")
        if q.exclusive_consumer() is not None or (method.exclusive and q.consumers):
            raise AccessRefused(f"queue '{name}' in vhost '{self.vhost.name}' in exclusive use")
        args = method.arguments or {}
        if q.stream:
            start = q.check_consume(self, method.no_ack, args)
        else:
            start = 0
            if "x-stream-offset" in args:   # RabbitMQ 3.10.8: 406 on classic and quorum queues
                qtype = "rabbit_quorum_queue" if q.quorum else "rabbit_classic_queue"
                raise PreconditionFailed(f"invalid arg 'x-stream-offset' for queue '{name}' in vhost "
                                         f"'{self.vhost.name}' of queue type {qtype}")
        if q.quorum and self.prefetch_global:
            raise AMQPNotImplemented(f"queue '{name}' in vhost '{self.vhost.name}' does not support global qos")
        prio = args.get("x-priority", 0)
        if isinstance(prio, bool) or not isinstance(prio, int):
            raise PreconditionFailed(f"invalid arg 'x-priority' for consumer: {prio!r} is not an integer")
        c = Consumer(tag, self, q, method.no_ack, method.exclusive, self.prefetch_consumer, args)
        c.priority = prio
        c.stream_pos = start
        if q.stream:
            c.stream_filter = q.consumer_filter(args)
        c.tag_enc = shortstr(tag)
        self.consumers[tag] = c
        if not method.no_wait:
            self.send(spec.Basic.ConsumeOk(consumer_tag=tag))
        q.add_consumer(c)

    def on_cancel(self, method) -> None:
        c = self.consumers.pop(method.consumer_tag, None)
        if not method.no_wait:
            self.send(spec.Basic.CancelOk(consumer_tag=method.consumer_tag))
        if c is not None:
            self._forget_consumer(c)
            c.queue.remove_consumer(c)
            if c.queue is self.reply_queue:
                self._drop_reply_queue()

    def _drop_reply_queue(self) -> None:
        q = self.reply_queue
        if q is not None:
            self.reply_queue = None
            self.vhost.reply_queues.pop(q.name, None)
            q.deleted = True
            q.purge()

    def consumer_cancelled_by_server(self, c: Consumer) -> None:
        """The consumer's queue was deleted: send basic.cancel when the client supports it."""
        if self.consumers.pop(c.tag, None) is not None:
            self._forget_consumer(c)
        if self.conn.capabilities.get("consumer_cancel_notify") and not self.closing:
            self.send(spec.Basic.Cancel(consumer_tag=c.tag, no_wait=True))

    def on_get(self, method) -> None:
        q = self._queue_to_read(method, method.CLASS_ID, method.METHOD_ID)
        m = q.get()
        if m is None:
            self.send(spec.Basic.GetEmpty())
            return
        q.stat_get += 1
        # RabbitMQ 3.10: basic.get messages do not count against the channel's prefetch (the
        # queue is their owner, not a consumer)
        tag = self.record_delivery(q, m, q, method.no_ack)
        props_raw = (with_delivery_count(m, not q.requeue_counts) if q.quorum else m.props_raw)
        content_frames(self.conn.out, self.number,
                       get_ok_payload(tag, m.redelivered, m.enc, q.message_count),
                       props_raw, m.body, self.frame_max)
        self.conn.mark_dirty()
