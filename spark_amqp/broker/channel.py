"""One AMQP channel on the broker side: consumers, deliveries, acks, qos, confirms, tx.

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

import base64
import os
from collections import deque
from typing import Any

from ..protocol import spec
from ..protocol.errors import (AccessRefused, AMQPNotImplemented, InternalError, NotAllowed,
                               NotFound, PreconditionFailed, ResourceError)
from ..protocol.server_frames import (append_deliver, append_stream_deliver, content_frames,
                                      deliver_frames, deliver_parts, get_ok_payload,
                                      return_payload, stream_deliver_parts)
from .message import Message, peek_properties
from .queue import Consumer, Queue
from .rules import check_binding, check_exchange_declare, check_publish, check_queue_declare
from .stream import add_offset_header, offset_header_split
from .stream_queue import StreamEntry
from .unacked import Unacked

__all__ = ["Channel", "new_name", "REPLY_TO"]

REPLY_TO = "amq.rabbitmq.reply-to"



def new_name(prefix: str) -> str:
    """A server-generated name like RabbitMQ's: ``amq.gen-`` / ``amq.ctag-`` + 22 url-safe chars."""
    return prefix + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


def shortstr(s: str) -> bytes:
    b = s.encode("utf-8")
    return bytes((len(b),)) + b


class Channel:
    """Broker-side state of channel ``number`` on connection ``conn``."""

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
        self.confirm = False
        self.confirm_seq = 0
        self.confirm_acked = 0
        self.confirm_pending: deque = deque()  # [seq, ticket, nack] for non-trivial confirms
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

    # ================================================================== output helpers
    def send(self, method) -> None:
        self.conn.send_method(self.number, method)

    # ================================================================== delivery (hot path)
    def deliver(self, c: Consumer, m: Message, q: Queue) -> None:
        """basic.deliver ``m`` from ``q`` to consumer ``c`` (called by Queue.dispatch)."""
        tag = self.next_tag
        self.next_tag = tag + 1
        q.stat_deliver += 1
        if c.no_ack:
            q._forget(m)
        else:
            self.unacked.add(tag, m, c)
            q.count_delivered(c)
        k_enc, k_props, k_blen, pre, post = c.frame_cache
        if len(m.body) == k_blen and m.props_raw == k_props and m.enc == k_enc and not (q.quorum and m.acquired_count):
            # the frame parts of the consumer's previous delivery fit (round-robin hot path)
            conn = self.conn
            append_deliver(conn.out, pre, tag, m.redelivered, post, m.body)
            if not conn.dirty:
                conn.mark_dirty()
            return
        self._encode_delivers(c, (m,), tag, q)

    def deliver_many(self, c: Consumer, msgs: list[Message], q: Queue) -> None:
        """basic.deliver each of ``msgs`` (taken from ``q``'s head, in order) to consumer ``c``
        (called by Queue.dispatch when ``c`` is the only consumer that can take them)."""
        n = len(msgs)
        tag = self.next_tag
        self.next_tag = tag + n
        q.stat_deliver += n
        if c.no_ack:
            q.forget_many(msgs)
        else:
            self.unacked.add_run(tag, msgs, c)
            q.count_delivered(c, n)
        self._encode_delivers(c, msgs, tag, q)

    def deliver_stream(self, c: Consumer, entries: list, first: int, q) -> None:
        """basic.deliver stream messages ``entries`` ((enc, props_raw, body) read from offset
        ``first`` on) to consumer ``c`` of stream ``q``, each with the header
        ``x-stream-offset``. The unacked entries hold the offsets (acks only give credit).

        The frame bytes around the delivery tag and the offset depend only on the exchange /
        routing key, the properties and the body size: built once per run of equal ones."""
        n = len(entries)
        tag = self.next_tag
        self.next_tag = tag + n
        self.unacked.add_run(tag, list(range(first, first + n)), c)
        q.count_delivered(c, n)
        conn = self.conn
        out = conn.out
        ch_n = self.number
        limit = self.frame_max - 8
        ctag = c.tag_enc
        k_enc, k_props, k_blen, pre, mid, post = c.frame_cache if len(c.frame_cache) == 6 else (None,) * 6
        offset = first
        for enc, props_raw, body in entries:
            blen = len(body)
            if blen != k_blen or props_raw != k_props or enc != k_enc:
                if not 0 < blen <= limit:
                    # no body frame, or several: the general encoder
                    self._encode_delivers(c, (StreamEntry(enc, add_offset_header(props_raw, offset), body, offset),),
                                          tag, q)
                    tag += 1
                    offset += 1
                    k_blen = -1
                    continue
                before, after = offset_header_split(props_raw)
                k_enc, k_props, k_blen = enc, props_raw, blen
                pre, mid, post = stream_deliver_parts(ch_n, ctag, enc, before, after, blen)
            append_stream_deliver(out, pre, tag, mid, offset, post, body)
            tag += 1
            offset += 1
        c.frame_cache = (k_enc, k_props, k_blen, pre, mid, post)
        if not conn.dirty:
            conn.mark_dirty()

    def _encode_delivers(self, c: Consumer, msgs, tag: int, q: Queue) -> None:
        """Append the basic.deliver frames of ``msgs`` (tags from ``tag``) to the output.

        The frame bytes around the delivery tag depend only on the exchange / routing key,
        the properties and the body size, so they are built once and reused while those stay
        the same (the consumer keeps the last ones in ``frame_cache``)."""
        conn = self.conn
        out = conn.out
        ctag = c.tag_enc
        n = self.number
        limit = self.frame_max - 8
        quorum = q.quorum
        fc = c.frame_cache
        k_enc, k_props, k_blen, pre, post = fc if len(fc) == 5 else (None, None, -1, b"", b"")
        for m in msgs:
            props_raw = m.props_raw
            if quorum and m.acquired_count:
                # RabbitMQ 3.10.8 (checked with pika): basic.deliver of a quorum queue carries
                # x-delivery-count only once the message was returned (1, 2, ...); basic.get-ok
                # carries it from 0. 4.3: see _with_delivery_count.
                props_raw = _with_delivery_count(m, not q.requeue_counts)
            enc = m.enc
            body = m.body
            blen = len(body)
            if blen != k_blen or props_raw != k_props or enc != k_enc:
                if not 0 < blen <= limit:
                    # no body frame, or several: not worth caching
                    deliver_frames(out, n, ctag, tag, m.redelivered, enc, props_raw, body,
                                   self.frame_max)
                    tag += 1
                    continue
                k_enc, k_props, k_blen = enc, props_raw, blen
                pre, post = deliver_parts(n, ctag, enc, props_raw, blen)
            append_deliver(out, pre, tag, m.redelivered, post, body)
            tag += 1
        c.frame_cache = (k_enc, k_props, k_blen, pre, post)
        if not conn.dirty:
            conn.mark_dirty()

    # ================================================================== publish (hot path)
    def on_publish(self, exchange: str, routing_key: str, mandatory: bool, immediate: bool,
                   enc: bytes, props_raw: bytes, body: bytes) -> None:
        """A complete basic.publish (method + header + body)."""
        if immediate:
            raise AMQPNotImplemented("immediate=true", 60, 40)
        vhost = self.vhost
        x = vhost.exchanges.get(exchange)
        if x is None:
            raise NotFound(f"no exchange '{exchange}' in vhost '{vhost.name}'", 60, 40)
        conn = self.conn
        if exchange not in conn.write_ok:
            if x.internal:
                raise AccessRefused(f"cannot publish to internal exchange '{exchange}' in vhost '{vhost.name}'", 60, 40)
            conn.check_perm("write", "exchange", exchange, 60, 40)
            conn.write_ok.add(exchange)
        props = peek_properties(props_raw) if props_raw != b"\x00\x00" else None
        check_publish(self.broker.config, conn.user, None if props is None else props.user_id, len(body))
        if props is None and props_raw != b"\x00\x00" and self.reply_queue is not None:
            props = peek_properties(props_raw, True)
        if props is not None and props.reply_to == REPLY_TO:
            if self.reply_queue is None:
                raise PreconditionFailed("fast reply consumer does not exist", 60, 40)
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
        if self.confirm:
            seq = self.confirm_seq = self.confirm_seq + 1
            pend = self.confirm_pending
            if rejected or ticket > self.broker.store.durable_ticket or pend:
                pend.append((seq, ticket, rejected))
                if ticket:
                    self.broker.store_waiters.add(self)
            self.conn.confirm_channels.add(self)
            if not self.conn.dirty:
                self.conn.mark_dirty()

    def _return(self, m: Message, code: int, text: str) -> None:
        content_frames(self.conn.out, self.number, return_payload(code, text, m.enc),
                       m.props_raw, m.body, self.frame_max)
        self.conn.mark_dirty()

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

    # ================================================================== acks
    def _take(self, tag: int, multiple: bool, cid: int, mid: int) -> tuple[list, list, list]:
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
            raise PreconditionFailed(f"unknown delivery tag {tag}", cid, mid)
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
        entries = self._take(method.delivery_tag, method.multiple, 60, 80)
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
                                         f"'{q.name}' in vhost '{self.vhost.name}'", 60, 120 if multiple else 90)

    def on_nack(self, method) -> None:
        """basic.nack. With requeue, RabbitMQ 4.3 returns the messages without counting a
        failed delivery (rabbit_channel: ``requeue`` -> rabbit_fifo ``return``, DeliveryFailed
        false, at v4.3.0); 3.10 counts it."""
        if self.unacked:
            self._refuse_stream_settle(method.delivery_tag, method.multiple)
        entries = self._take(method.delivery_tag, method.multiple, 60, 120)
        failed = self.broker.config.behaviour.requeue_counts_delivery
        if self.tx:
            self.tx_acks.append((entries, method.requeue, failed))
            return
        self._settle(entries, method.requeue, failed)

    def on_reject(self, method) -> None:
        if self.unacked:
            self._refuse_stream_settle(method.delivery_tag, False)
        entries = self._take(method.delivery_tag, False, 60, 90)
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
            raise AMQPNotImplemented("requeue=false", 60, 110)
        if self.unacked and any((o.queue if o.__class__ is Consumer else o).stream
                                for o in self.unacked.owners_upto(0, True)):
            # RabbitMQ 3.10.8 crashes (541) on basic.recover with unacked stream deliveries
            raise InternalError("basic.recover with unacknowledged deliveries from a stream queue: a stream "
                                "never redelivers; consume again from the offset to read", 60, 110)
        self.requeue_all(self.broker.config.behaviour.requeue_counts_delivery)
        if method.INDEX == spec.Basic.Recover.INDEX:
            self.send(spec.Basic.RecoverOk())

    # ================================================================== qos / consume
    def on_qos(self, method) -> None:
        """basic.qos. RabbitMQ 4.3 (deprecated feature ``global_qos``, denied_by_default):
        ``global=true`` is handled as ``global=false``, a prefetch for each new consumer
        (rabbit_channel ``handle_method(#'basic.qos'{global = true})`` at v4.3.0)."""
        if method.prefetch_size:
            raise AMQPNotImplemented(f"prefetch_size!=0 ({method.prefetch_size})", 60, 10)
        if method.global_ and self.broker.config.behaviour.global_qos:
            self.prefetch_global = method.prefetch_count
            for c in self.consumers.values():
                self.broker.mark_queue(c.queue)
        else:
            self.prefetch_consumer = method.prefetch_count
        self.send(spec.Basic.QosOk())

    def _queue_name(self, name: str, cid: int, mid: int) -> str:
        if name == "":
            if self.last_queue is None:
                raise NotFound("no previously declared queue", cid, mid)
            return self.last_queue
        return name

    def _queue_to_read(self, method, cid: int, mid: int) -> Queue:
        """The queue named by ``method.queue`` ("" = the channel's last declared one) for
        basic.get / queue.purge: 404 NOT_FOUND when it does not exist (or 405 when another
        connection holds it exclusively), 403 ACCESS_REFUSED without read permission on it
        (RabbitMQ access-control.html: consume, get and purge need "read")."""
        name = self._queue_name(method.queue, cid, mid)
        q = self.vhost.get_queue(name, self.conn, cid, mid)
        self.conn.check_perm("read", "queue", name, cid, mid)
        return q

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
        cid, mid = 60, 20
        name = self._queue_name(method.queue, cid, mid)
        if name == REPLY_TO:
            q = self._reply_queue(method.no_ack, cid, mid)
        else:
            q = self.vhost.get_queue(name, self.conn, cid, mid)
        self.conn.check_perm("read", "queue", name, cid, mid)
        tag = method.consumer_tag or new_name("amq.ctag-")
        if tag in self.consumers:
            raise NotAllowed(f"attempt to reuse consumer tag '{tag}'", cid, mid)
        if q.exclusive_consumer() is not None or (method.exclusive and q.consumers):
            raise AccessRefused(f"queue '{name}' in vhost '{self.vhost.name}' in exclusive use", cid, mid)
        args = method.arguments or {}
        if q.stream:
            start = q.check_consume(self, method.no_ack, args)
        else:
            start = 0
            if "x-stream-offset" in args:   # RabbitMQ 3.10.8: 406 on classic and quorum queues
                qtype = "rabbit_quorum_queue" if q.quorum else "rabbit_classic_queue"
                raise PreconditionFailed(f"invalid arg 'x-stream-offset' for queue '{name}' in vhost "
                                         f"'{self.vhost.name}' of queue type {qtype}", cid, mid)
        if q.quorum and self.prefetch_global:
            raise AMQPNotImplemented(f"queue '{name}' in vhost '{self.vhost.name}' does not support global qos", cid, mid)
        prio = args.get("x-priority", 0)
        if isinstance(prio, bool) or not isinstance(prio, int):
            raise PreconditionFailed(f"invalid arg 'x-priority' for consumer: {prio!r} is not an integer", cid, mid)
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
        q = self._queue_to_read(method, 60, 70)
        m = q.get()
        if m is None:
            self.send(spec.Basic.GetEmpty())
            return
        tag = self.next_tag
        self.next_tag += 1
        q.stat_get += 1
        if method.no_ack:
            q._forget(m)
        else:
            # RabbitMQ 3.10: basic.get messages do not count against the channel's prefetch
            self.unacked.add(tag, m, q)
            q.count_delivered(q)
        props_raw = (_with_delivery_count(m, not q.requeue_counts) if q.quorum else m.props_raw)
        content_frames(self.conn.out, self.number,
                       get_ok_payload(tag, m.redelivered, m.enc, q.message_count),
                       props_raw, m.body, self.frame_max)
        self.conn.mark_dirty()

    # ================================================================== confirm / tx / flow
    def on_confirm_select(self, method) -> None:
        if self.tx:
            raise PreconditionFailed("cannot switch from tx to confirm mode", 85, 10)
        self.confirm = True
        if not method.nowait:
            self.send(spec.Confirm.SelectOk())

    def on_tx_select(self, method) -> None:
        if self.confirm:
            raise PreconditionFailed("cannot switch from confirm to tx mode", 90, 10)
        self.tx = True
        self.send(spec.Tx.SelectOk())

    def on_tx_commit(self, method) -> None:
        if not self.tx:
            raise PreconditionFailed("channel is not transactional", 90, 20)
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
            f"({type(error).__name__}: {error}); they are not durable", 90, 20))

    def on_tx_rollback(self, method) -> None:
        if not self.tx:
            raise PreconditionFailed("channel is not transactional", 90, 30)
        # acks recorded in the transaction are undone: those messages are unacked again
        restored = [batch for batch, *_ in self.tx_acks if batch[0]]
        self.tx_publishes, self.tx_acks = [], []
        if restored:
            self.unacked.restore(restored)
        self.send(spec.Tx.RollbackOk())

    def on_flow(self, method) -> None:
        if not method.active:
            raise AMQPNotImplemented("active=false", 20, 20)
        self.send(spec.Channel.FlowOk(active=True))

    # ================================================================== declare & co
    def on_exchange_declare(self, method) -> None:
        cid, mid = 40, 10
        if not method.passive:
            c = self.conn
            check_exchange_declare(c.perm, c.user, self.vhost.name, method.exchange, method.arguments or {},
                                   cid, mid)
        self.vhost.declare_exchange(method.exchange, method.type, method.passive, method.durable,
                                    method.auto_delete, method.internal, method.arguments or {})
        if not method.no_wait:
            self.send(spec.Exchange.DeclareOk())

    def on_exchange_delete(self, method) -> None:
        self.conn.check_perm("configure", "exchange", method.exchange, 40, 20)
        self.vhost.delete_exchange(method.exchange, method.if_unused)
        if not method.no_wait:
            self.send(spec.Exchange.DeleteOk())

    def _bind_ex(self, method, bind: bool) -> None:
        cid, mid = (40, 30) if bind else (40, 40)
        v = self.vhost
        c = self.conn
        if method.source == "" or method.destination == "":
            raise AccessRefused("operation not permitted on the default exchange", cid, mid)
        if bind:
            src = v.get_exchange(method.source, cid, mid)
            dst = v.get_exchange(method.destination, cid, mid)
        else:
            src = v.exchanges.get(method.source)
            dst = v.exchanges.get(method.destination)
        check_binding(c.perm, c.user, v.name, method.source, "exchange", method.destination, cid, mid)
        if src is not None and dst is not None:
            if bind:
                v.bind(src, dst, method.routing_key, method.arguments or {})
            else:
                v.unbind(src, dst, method.routing_key, method.arguments or {})
        if not method.no_wait:
            self.send(spec.Exchange.BindOk() if bind else spec.Exchange.UnbindOk())

    def on_exchange_bind(self, method) -> None:
        self._bind_ex(method, True)

    def on_exchange_unbind(self, method) -> None:
        self._bind_ex(method, False)

    def on_queue_declare(self, method) -> None:
        cid, mid = 50, 10
        name = method.queue
        server_named = False
        if name == "" and not method.passive:
            name = new_name("amq.gen-")
            server_named = True
        elif name == "" and method.passive:
            name = self._queue_name("", cid, mid)
        if not method.passive:
            c = self.conn
            check_queue_declare(c.perm, c.user, self.vhost.name, name, method.arguments or {}, cid, mid)
        q = self.vhost.declare_queue(self.conn, name, method.passive, method.durable, method.exclusive,
                                     method.auto_delete, method.arguments or {}, server_named)
        self.last_queue = q.name
        if not method.no_wait:
            self.send(spec.Queue.DeclareOk(queue=q.name, message_count=q.message_count,
                                           consumer_count=q.consumer_count))

    def on_queue_bind(self, method) -> None:
        cid, mid = 50, 20
        v = self.vhost
        name = self._queue_name(method.queue, cid, mid)
        c = self.conn
        if method.exchange == "":
            raise AccessRefused("operation not permitted on the default exchange", cid, mid)
        q = v.get_queue(name, c, cid, mid)
        x = v.get_exchange(method.exchange, cid, mid)
        check_binding(c.perm, c.user, v.name, method.exchange, "queue", name, cid, mid)
        v.bind(x, q, method.routing_key, method.arguments or {})
        if not method.no_wait:
            self.send(spec.Queue.BindOk())

    def on_queue_unbind(self, method) -> None:
        cid, mid = 50, 50
        v = self.vhost
        name = self._queue_name(method.queue, cid, mid)
        c = self.conn
        if method.exchange == "":
            raise AccessRefused("operation not permitted on the default exchange", cid, mid)
        q = v.queues.get(name)
        if q is not None:
            q = v.get_queue(name, c, cid, mid)
        x = v.exchanges.get(method.exchange)
        # unbind needs what bind needs: write on the queue *and* read on the exchange
        check_binding(c.perm, c.user, v.name, method.exchange, "queue", name, cid, mid)
        if q is not None and x is not None:
            v.unbind(x, q, method.routing_key, method.arguments or {})
        self.send(spec.Queue.UnbindOk())

    def on_queue_purge(self, method) -> None:
        q = self._queue_to_read(method, 50, 30)
        if q.stream:
            raise AMQPNotImplemented(f"queue.purge not supported by stream queues queue '{q.name}' in vhost "
                                     f"'{self.vhost.name}'", 50, 30)
        n = q.purge()
        if not method.no_wait:
            self.send(spec.Queue.PurgeOk(message_count=n))

    def on_queue_delete(self, method) -> None:
        cid, mid = 50, 40
        name = self._queue_name(method.queue, cid, mid)
        v = self.vhost
        q = v.queues.get(name)
        n = 0
        if q is not None:
            q = v.get_queue(name, self.conn, cid, mid)
            self.conn.check_perm("configure", "queue", name, cid, mid)
            if method.if_unused and q.consumers:
                raise PreconditionFailed(f"queue '{name}' in vhost '{v.name}' in use", cid, mid)
            # RabbitMQ 3.10.8 deletes a non-empty stream despite if-empty (it has no "ready" messages)
            if method.if_empty and q.message_count and not q.stream:
                raise PreconditionFailed(f"queue '{name}' in vhost '{v.name}' is not empty", cid, mid)
            n = v.delete_queue(q)
        if not method.no_wait:
            self.send(spec.Queue.DeleteOk(message_count=n))

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
        self.broker.store_waiters.discard(self)


def _with_delivery_count(m: Message, v4: bool = False) -> bytes:
    """Properties of a quorum-queue delivery: headers + ``x-delivery-count`` (RabbitMQ 3.10.8
    sends it on every get-ok, 0 first, and on a basic.deliver once the count is above 0).
    ``v4`` (RabbitMQ 4.3, rabbit_fifo_client ``add_delivery_count_header`` at v4.3.0, for
    deliveries and get-ok alike): ``x-acquired-count`` once the message was returned at all,
    ``x-delivery-count`` once a delivery failed; a message never returned carries neither."""
    from ..protocol.properties import BasicProperties

    if v4 and not m.acquired_count:
        return m.props_raw
    p = m.props
    q = BasicProperties(**p.as_dict())
    h = dict(q.headers or {})
    if v4:
        h["x-acquired-count"] = m.acquired_count
        if m.delivery_count:
            h["x-delivery-count"] = m.delivery_count
    else:
        h["x-delivery-count"] = m.delivery_count
    q.headers = h
    return q.encode()


HANDLERS: dict[int, Any] = {
    spec.Basic.Ack.INDEX: Channel.on_ack,
    spec.Basic.Nack.INDEX: Channel.on_nack,
    spec.Basic.Reject.INDEX: Channel.on_reject,
    spec.Basic.Qos.INDEX: Channel.on_qos,
    spec.Basic.Consume.INDEX: Channel.on_consume,
    spec.Basic.Cancel.INDEX: Channel.on_cancel,
    spec.Basic.Get.INDEX: Channel.on_get,
    spec.Basic.Recover.INDEX: Channel.on_recover,
    spec.Basic.RecoverAsync.INDEX: Channel.on_recover,
    spec.Confirm.Select.INDEX: Channel.on_confirm_select,
    spec.Tx.Select.INDEX: Channel.on_tx_select,
    spec.Tx.Commit.INDEX: Channel.on_tx_commit,
    spec.Tx.Rollback.INDEX: Channel.on_tx_rollback,
    spec.Channel.Flow.INDEX: Channel.on_flow,
    spec.Exchange.Declare.INDEX: Channel.on_exchange_declare,
    spec.Exchange.Delete.INDEX: Channel.on_exchange_delete,
    spec.Exchange.Bind.INDEX: Channel.on_exchange_bind,
    spec.Exchange.Unbind.INDEX: Channel.on_exchange_unbind,
    spec.Queue.Declare.INDEX: Channel.on_queue_declare,
    spec.Queue.Bind.INDEX: Channel.on_queue_bind,
    spec.Queue.Unbind.INDEX: Channel.on_queue_unbind,
    spec.Queue.Purge.INDEX: Channel.on_queue_purge,
    spec.Queue.Delete.INDEX: Channel.on_queue_delete,
    spec.Access.Request.INDEX: Channel.on_access_request,
}
