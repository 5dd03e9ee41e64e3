"""Queues: ready messages, consumers, prefetch, TTL, max-length, dead-lettering, priorities.

Semantics follow RabbitMQ 3.10 classic and quorum queues (RabbitMQ docs "Queues", "TTL",
"Dead Letter Exchanges", "Queue Length Limit", "Priority Queue Support", "Quorum Queues",
"Consumer Prefetch", "Single Active Consumer"):

- ready messages are kept in enqueue order (``Message.seq``); requeued messages (reject/nack
  with requeue, recover, a closed channel) go back to their *original position*, i.e. at the
  head, in their original order, with ``redelivered=true``;
- consumers are served round-robin; a consumer takes a message when its own prefetch
  (``basic.qos global=false``) and its channel's (``global=true``) allow it; no-ack consumers
  are not limited; deliveries also pause while the consumer's connection is not writable
  (asyncio flow control), so memory stays bounded;
- ``x-message-ttl`` / per-message ``expiration``: messages expire when they reach the head
  (as RabbitMQ), a timer expires the head without consumers; ``x-expires`` deletes an unused
  queue;
- ``x-max-length`` / ``x-max-length-bytes`` count ready messages; ``x-overflow`` ``drop-head``
  (default; dead-letters with reason ``maxlen``), ``reject-publish`` (nack to confirming
  publishers) or ``reject-publish-dlx``;
- ``x-max-priority``: one FIFO per priority level, highest first;
- ``x-queue-type=quorum``: ``x-delivery-limit`` and the ``x-delivery-count`` header on
  redelivery; messages over the limit are dead-lettered with reason ``delivery_limit`` (or
  dropped without a dead-letter exchange). RabbitMQ 4.3 (``rabbitmq_version``, see
  :mod:`.versions`): the limit defaults to 20 (rabbit_quorum_queue ``DEFAULT_DELIVERY_LIMIT``),
  a negative one means none (rabbit_fifo ``update_config``), and only failed deliveries count
  (basic.reject with requeue, a closed channel or lost connection), not basic.nack/recover
  with requeue (rabbit_fifo ``incr_msg_headers``, release-notes/4.3.0.md); deliveries then
  carry ``x-acquired-count`` (every return) besides ``x-delivery-count`` (failed ones);
- ``x-single-active-consumer``: only the first consumer receives, the next takes over when
  it goes away.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from .deliver_frames import frames_for
from .message import Message
from .queue_arguments import parse_queue_arguments

__all__ = ["Queue", "Consumer", "PriorityReady"]


class Consumer:
    """A ``basic.consume`` subscription. ``unacked`` counts its outstanding deliveries (its
    queue keeps the count, see :meth:`Queue.count_delivered`); ``frames`` holds the
    channel's last basic.deliver frame parts for it (:mod:`.deliver_frames`: typed by the
    queue's delivery shape)."""

    __slots__ = ("tag", "channel", "queue", "no_ack", "exclusive", "prefetch", "unacked", "arguments",
                 "tag_enc", "priority", "frames", "stream_pos", "stream_filter")

    def __init__(self, tag: str, channel, queue: "Queue", no_ack: bool, exclusive: bool,
                 prefetch: int, arguments: dict | None):
        self.tag = tag
        self.channel = channel
        self.queue = queue
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.prefetch = prefetch
        self.unacked = 0
        self.arguments = arguments or {}
        self.tag_enc = b""
        self.priority = 0
        self.frames = frames_for(queue)
        self.stream_pos = 0   # next offset to deliver (stream queues only)
        self.stream_filter = None   # a stream_filter.StreamMatcher (filtered stream consumers)


class PriorityReady:
    """Ready messages of a priority queue: one deque per level, highest level first.

    Offers the deque operations :class:`Queue` uses (``popleft``, ``append``, ``len``,
    ``[0]``, iteration in delivery order, ``clear``).
    """

    __slots__ = ("levels", "n")

    def __init__(self, max_priority: int):
        self.levels = [deque() for _ in range(max_priority + 1)]
        self.n = 0

    def _level(self, m: Message) -> deque:
        p = m.priority
        top = len(self.levels) - 1
        return self.levels[p if p <= top else top]

    def append(self, m: Message) -> None:
        self._level(m).append(m)
        self.n += 1

    def popleft(self) -> Message:
        for d in reversed(self.levels):
            if d:
                self.n -= 1
                return d.popleft()
        raise IndexError("pop from an empty queue")

    def __getitem__(self, i: int) -> Message:
        if i != 0:
            raise IndexError(i)
        for d in reversed(self.levels):
            if d:
                return d[0]
        raise IndexError("empty")

    def __len__(self) -> int:
        return self.n

    def __bool__(self) -> bool:
        return self.n > 0

    def __iter__(self):
        for d in reversed(self.levels):
            yield from d

    def clear(self) -> None:
        for d in self.levels:
            d.clear()
        self.n = 0

    def requeue(self, msgs: list[Message]) -> None:
        by_level: dict[int, list[Message]] = {}
        for m in msgs:
            by_level.setdefault(id(self._level(m)), []).append(m)
        for d in self.levels:
            ms = by_level.get(id(d))
            if ms:
                _merge_head(d, ms)
        self.n += len(msgs)


def _merge_head(d: deque, msgs: list[Message]) -> None:
    """Put ``msgs`` (sorted by seq) back into the seq-sorted deque ``d`` at their positions."""
    last = msgs[-1].seq
    head = []
    while d and d[0].seq < last:
        head.append(d.popleft())
    if head:
        msgs = sorted(head + msgs, key=lambda m: m.seq)
    d.extendleft(reversed(msgs))


class Queue:
    """A queue in a vhost. Counts: ``message_count`` (ready), ``consumer_count``,
    ``unacked_count`` (delivered, not yet settled; changed by the methods under "unacked
    counts"), the ``stat_*`` message counters of the management API.

    ``broker`` gives access to memory accounting, the store, dirty-marking and timers.
    ``stream`` is True for :class:`~.stream_queue.StreamQueue` (x-queue-type=stream).
    """

    stream = False

    def __init__(self, broker, vhost, name: str, durable: bool = False, exclusive_owner=None,
                 auto_delete: bool = False, arguments: dict | None = None):
        self.broker = broker
        self.vhost = vhost
        self.name = name
        self.durable = durable
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        self.arguments = args = arguments or {}
        #: the parsed arguments (:mod:`.queue_arguments`); their fields are copied below for
        #: the hot paths
        self.args = a = parse_queue_arguments(args, name, vhost.name, broker.config.behaviour)
        self.ttl_ms, self.expires_ms = a.ttl_ms, a.expires_ms
        self.max_length, self.max_length_bytes, self.overflow = (a.max_length,
                                                                 a.max_length_bytes, a.overflow)
        self.dlx, self.dlrk = a.dead_letter_exchange, a.dead_letter_routing_key
        self.queue_type, self.quorum = a.queue_type, a.quorum
        self.delivery_limit = a.delivery_limit
        #: a requeue by basic.nack / basic.recover counts as a failed delivery (3.10)
        self.requeue_counts = broker.config.behaviour.requeue_counts_delivery
        self.single_active = a.single_active_consumer
        self.max_priority = mp = a.max_priority
        self.ready: Any = PriorityReady(mp) if self.max_priority else deque()
        self.ready_bytes = 0
        self.unacked_count = 0
        # message counters for the management API (see .stats)
        self.stat_publish = self.stat_deliver = self.stat_get = self.stat_ack = self.stat_redeliver = 0
        self.consumers: list[Consumer] = []
        self.rr = 0
        self.prioritised = False
        self.next_seq = 1
        self.had_consumers = False
        self.deleted = False
        self.last_used = time.monotonic()
        self._ttl_timer = None
        self._expires_timer = None
        self.has_ttl = self.ttl_ms is not None
        # no queue TTL, length limits or priorities: publish appends directly
        self.plain = (self.ttl_ms is None and self.max_length is None and self.max_length_bytes is None
                      and not self.max_priority)
        #: x-overflow reject-publish(-dlx) with a length limit: publish may be refused (refuses)
        self.rejects_publish = (self.overflow != "drop-head"
                                and (self.max_length is not None or self.max_length_bytes is not None))
        if self.expires_ms is not None:
            self._arm_expires()

    # ------------------------------------------------------------------ counts
    @property
    def message_count(self) -> int:
        return len(self.ready)

    @property
    def consumer_count(self) -> int:
        return len(self.consumers)

    def exclusive_consumer(self) -> Consumer | None:
        for c in self.consumers:
            if c.exclusive:
                return c
        return None

    # ------------------------------------------------------------------ enqueue
    def is_full(self, size: int) -> bool:
        """True when a reject-publish queue must refuse one more message of ``size`` bytes."""
        ml = self.max_length
        n = len(self.ready)
        if self.quorum:
            # RabbitMQ 3.10 quorum queues reject once the limit is *exceeded* (a soft limit)
            return (ml is not None and n > ml) or (self.max_length_bytes is not None
                                                    and self.ready_bytes > self.max_length_bytes)
        if ml is not None and n >= ml:
            return True
        mb = self.max_length_bytes
        if mb is not None and self.ready_bytes + size > mb:
            return True
        return False

    def refuses(self, msg: Message) -> bool:
        """True when this queue refuses a publish of ``msg`` (``x-overflow`` reject-publish or
        reject-publish-dlx, queue full: see :meth:`is_full`); a reject-publish-dlx queue then
        dead-letters it with reason ``maxlen`` (RabbitMQ docs "Queue Length Limit"). The
        publisher gets basic.nack. Only ``rejects_publish`` queues can refuse."""
        if not self.rejects_publish or not self.is_full(len(msg.body)):
            return False
        if self.overflow == "reject-publish-dlx" and self.dlx is not None:
            self.vhost.dead_letter(self, msg, "maxlen")
        return True

    def publish(self, msg: Message) -> int:
        """A published (or dead-lettered) ``msg``, now owned by this queue: count it, persist
        it (persistent message, durable non-exclusive queue, durable store), then append it
        with its TTL and the length limits applied once (:meth:`enqueue`), and mark the queue
        for dispatch. Returns the store ticket its publisher confirm waits for (0: none).
        The caller checked :meth:`refuses` first."""
        size = len(msg.body)
        self.stat_publish += 1
        b = self.broker
        b.mem_used += size
        ticket = 0
        if msg.persistent and self.durable and self.exclusive_owner is None:
            store = b.store
            if store.durable:
                ticket = store.add_message(self.vhost.name, self.name, msg)
        if self.plain and msg.ttl_ms is None:
            # hot path: no TTL, length limit or priority applies
            msg.seq = self.next_seq
            self.next_seq += 1
            self.ready.append(msg)
            self.ready_bytes += size
        else:
            self.enqueue(msg)
        b.mark_queue(self)
        return ticket

    def enqueue(self, msg: Message) -> None:
        """Append ``msg`` (already owned by this queue) and apply TTL and length limits.

        :meth:`publish` and recovery call it; they account for the message (memory, store)
        and mark the queue dirty for dispatch.
        """
        msg.seq = self.next_seq
        self.next_seq += 1
        ttl = msg.ttl_ms
        qttl = self.ttl_ms
        if qttl is not None and (ttl is None or qttl < ttl):
            ttl = qttl
        if ttl is not None:
            msg.expires_at = time.monotonic() + ttl / 1000.0
            if self._ttl_timer is None:
                self._arm_ttl(msg.expires_at)
        self.ready.append(msg)
        self.ready_bytes += len(msg.body)
        if self.max_length is not None or self.max_length_bytes is not None:
            # a consumer waiting with capacity takes the message before the limit applies
            # (RabbitMQ: x-max-length=0 still delivers to a ready consumer)
            if self.consumers:
                self.dispatch()
            if self.overflow == "drop-head":
                self._enforce_limits()

    def _enforce_limits(self) -> None:
        ml, mb = self.max_length, self.max_length_bytes
        ready = self.ready
        dropped = []
        while ready and ((ml is not None and len(ready) > ml) or (mb is not None and self.ready_bytes > mb)):
            m = ready.popleft()
            self.ready_bytes -= len(m.body)
            dropped.append(m)
        for m in dropped:
            self.discard(m, "maxlen")

    # ------------------------------------------------------------------ unacked counts
    # The queue owns the counts of its outstanding deliveries: ``unacked_count`` (the queue's,
    # for queue.declare-ok's siblings in the management API) and each consumer's ``unacked``
    # (its prefetch). They change only here: a channel records which deliveries are
    # outstanding (:class:`~.unacked.Unacked`) and tells the queue when they are sent and
    # settled; an ``owner`` is the :class:`Consumer` of a basic.deliver or this queue for a
    # basic.get-ok (RabbitMQ 3.10: basic.get does not count against a prefetch).
    def count_delivered(self, owner, n: int = 1) -> None:
        """``n`` deliveries to ``owner`` that wait for an ack (not no-ack ones)."""
        if owner is not self:
            owner.unacked += n
        self.unacked_count += n

    def ack(self, msgs: list[Message], owner) -> None:
        """basic.ack of ``msgs`` delivered to ``owner``: forget them for good."""
        if owner is not self:
            owner.unacked -= len(msgs)
        self.settle_many(msgs)

    def reject_one(self, msg: Message, owner) -> None:
        """basic.reject/nack without requeue (or into a deleted queue) of ``msg`` delivered
        to ``owner``: dead-lettered with reason ``rejected`` or dropped."""
        if owner is not self:
            owner.unacked -= 1
        self.reject(msg, False)

    def return_unacked(self, msgs: list[Message], owners: list, failed: bool = True) -> None:
        """Deliveries ``msgs`` (to ``owners``, one each) come back: reject/nack with requeue,
        basic.recover, a closed channel. They go back as :meth:`requeue` says."""
        for o in owners:
            if o is not self:
                o.unacked -= 1
        self.unacked_count -= len(msgs)
        self.requeue(msgs, failed)

    # ------------------------------------------------------------------ removal
    def settle(self, msg: Message) -> None:
        """A delivered message was acked (or dropped): forget it for good."""
        self.unacked_count -= 1
        self.stat_ack += 1
        self._forget(msg)

    def settle_many(self, msgs: list[Message]) -> None:
        """Delivered messages were acked: forget them for good."""
        self.unacked_count -= len(msgs)
        self.stat_ack += len(msgs)
        self.forget_many(msgs)

    def forget_many(self, msgs: list[Message]) -> None:
        """Release messages that left the queue for good (acked, or sent to a no-ack consumer)."""
        size = 0
        store = None
        for m in msgs:
            size += len(m.body)
            sid = m.store_id
            if sid is not None:
                if store is None:
                    store = self.broker.store
                store.delete_message(sid)
                m.store_id = None
        self.broker.mem_used -= size

    def _forget(self, msg: Message) -> None:
        b = self.broker
        b.mem_used -= len(msg.body)
        if msg.store_id is not None:
            b.store.delete_message(msg.store_id)
            msg.store_id = None

    def discard(self, msg: Message, reason: str | None) -> None:
        """Drop a message that is no longer ready nor unacked; dead-letter it when configured
        (``reason`` = "rejected", "expired", "maxlen", "delivery_limit")."""
        if reason is not None and self.dlx is not None and not self.deleted:
            self.vhost.dead_letter(self, msg, reason)
        self._forget(msg)

    def reject(self, msg: Message, requeue: bool) -> None:
        """basic.reject/nack of a delivered message: back to the head or dead-lettered."""
        self.unacked_count -= 1
        if requeue and not self.deleted:
            self.requeue([msg])
        else:
            self.discard(msg, "rejected")

    def requeue(self, msgs: list[Message], failed: bool = True) -> None:
        """Return delivered (now unacked-count-adjusted) messages to their original positions
        with redelivered=true. Quorum queues count the delivery and dead-letter over the limit:
        every return in RabbitMQ 3.10; in 4.3 only ``failed`` ones (a reject, a closed channel,
        a lost connection; not a basic.nack/recover requeue), and ``acquired_count`` counts all."""
        keep = []
        limit = self.delivery_limit
        now = time.monotonic()
        for m in msgs:
            m.redelivered = True
            if m.expires_at is not None and m.expires_at <= now:
                # the TTL passed while it was unacked: it expires instead (RabbitMQ 3.10)
                self.discard(m, "expired")
                continue
            if self.quorum:
                m.acquired_count += 1
                if failed or self.requeue_counts:
                    m.delivery_count += 1
                if limit is not None and m.delivery_count > limit:
                    self.discard(m, "delivery_limit")
                    continue
            keep.append(m)
        if not keep:
            return
        self.stat_redeliver += len(keep)
        if self.quorum:
            # RabbitMQ 3.10 quorum queues append returned messages at the back, in return order
            for m in keep:
                m.seq = self.next_seq
                self.next_seq += 1
                self.ready.append(m)
        else:
            keep.sort(key=lambda m: m.seq)
            if isinstance(self.ready, PriorityReady):
                self.ready.requeue(keep)
            else:
                _merge_head(self.ready, keep)
        for m in keep:
            self.ready_bytes += len(m.body)
        self.rearm_ttl()
        self.broker.mark_queue(self)

    def rearm_ttl(self) -> None:
        """Make sure the expiry timer fires no later than the head's deadline."""
        ready = self.ready
        if not ready:
            return
        ea = ready[0].expires_at
        if ea is None:
            return
        t = self._ttl_timer
        if t is not None:
            if t.when() <= self.broker.loop.time() + (ea - time.monotonic()) + 0.01:
                return
            t.cancel()
        self._arm_ttl(ea)

    def purge(self) -> int:
        """Drop every ready message (unacked ones stay); returns how many (queue.purge-ok)."""
        n = len(self.ready)
        b = self.broker
        store = b.store
        for m in self.ready:
            b.mem_used -= len(m.body)
            if m.store_id is not None:
                store.delete_message(m.store_id)
                m.store_id = None
        self.ready.clear()
        self.ready_bytes = 0
        return n

    # ------------------------------------------------------------------ TTL / expiry
    def _arm_ttl(self, at: float) -> None:
        loop = self.broker.loop
        delay = max(0.0, at - time.monotonic()) + 0.002
        self._ttl_timer = loop.call_later(delay, self._ttl_fire)

    def _ttl_fire(self) -> None:
        self._ttl_timer = None
        if self.deleted:
            return
        self.expire_head()
        # arm for the next message with a deadline at the head
        ready = self.ready
        if ready:
            head = ready[0]
            if head.expires_at is not None:
                self._arm_ttl(head.expires_at)
        self.broker.kick()

    def expire_head(self) -> None:
        """Drop (dead-letter "expired") expired messages at the head (RabbitMQ expires at the head)."""
        ready = self.ready
        now = time.monotonic()
        while ready:
            m = ready[0]
            ea = m.expires_at
            if ea is None or ea > now:
                break
            ready.popleft()
            self.ready_bytes -= len(m.body)
            self.discard(m, "expired")

    def touch(self) -> None:
        """Mark the queue used (x-expires counts from the last use)."""
        self.last_used = time.monotonic()

    def _arm_expires(self) -> None:
        if self._expires_timer is not None:
            self._expires_timer.cancel()
        loop = self.broker.loop
        self._expires_timer = loop.call_later(self.expires_ms / 1000.0 + 0.002, self._expires_fire)

    def _expires_fire(self) -> None:
        self._expires_timer = None
        if self.deleted:
            return
        idle = time.monotonic() - self.last_used
        if not self.consumers and idle * 1000.0 >= self.expires_ms:
            self.vhost.delete_queue(self, reason="expired")
            self.broker.kick()
            return
        remaining = max(0.0, self.expires_ms / 1000.0 - idle)
        self._expires_timer = self.broker.loop.call_later(remaining + 0.002, self._expires_fire)

    def cancel_timers(self) -> None:
        for t in (self._ttl_timer, self._expires_timer):
            if t is not None:
                t.cancel()
        self._ttl_timer = self._expires_timer = None

    # ------------------------------------------------------------------ consumers
    def add_consumer(self, c: Consumer) -> None:
        self.consumers.append(c)
        if c.priority or self.prioritised:
            # consumer priorities (x-priority): highest first, stable within a priority
            self.consumers.sort(key=lambda k: -k.priority)
            self.prioritised = any(k.priority for k in self.consumers)
        self.had_consumers = True
        self.touch()
        self.broker.mark_queue(self)

    def remove_consumer(self, c: Consumer) -> None:
        try:
            self.consumers.remove(c)
        except ValueError:
            return
        self.touch()
        if self.expires_ms is not None and not self.consumers:
            self._arm_expires()
        if not self.consumers and self.auto_delete and self.had_consumers and not self.deleted:
            self.vhost.delete_queue(self, reason="auto_delete")
        else:
            self.broker.mark_queue(self)

    def get(self) -> Message | None:
        """basic.get: pop the head (expired messages dropped first) or None."""
        self.touch()
        ready = self.ready
        if self.has_ttl or ready and ready[0].expires_at is not None:
            self.expire_head()
        if not ready:
            return None
        m = ready.popleft()
        self.ready_bytes -= len(m.body)
        if ready and ready[0].expires_at is not None:
            self.rearm_ttl()
        return m

    def _can_take(self, c: Consumer) -> bool:
        ch = c.channel
        if not ch.can_deliver:
            return False
        if c.no_ack:
            return True
        if c.prefetch and c.unacked >= c.prefetch:
            return False
        gp = ch.prefetch_global
        return not (gp and ch.unacked_count >= gp)

    def _dispatch_by_priority(self) -> None:
        """Consumer priorities: a message goes to the highest-priority consumer with capacity,
        round-robin among equals (rabbitmq.com/consumer-priority.html)."""
        ready = self.ready
        consumers = self.consumers
        while ready:
            chosen = None
            i = 0
            n = len(consumers)
            while i < n:
                p = consumers[i].priority
                j = i
                while j < n and consumers[j].priority == p:
                    j += 1
                group = consumers[i:j]
                start = self.rr % len(group)
                for k in range(len(group)):
                    c = group[(start + k) % len(group)]
                    if self._can_take(c):
                        chosen = c
                        self.rr = start + k + 1
                        break
                if chosen is not None:
                    break
                i = j
            if chosen is None:
                break
            m = ready.popleft()
            self.ready_bytes -= len(m.body)
            if m.expires_at is not None and m.expires_at <= time.monotonic() - 0.005:
                self.discard(m, "expired")
                continue
            chosen.channel.deliver(chosen, m, self)

    def _dispatch_batch(self, c: Consumer) -> bool:
        """Deliver to ``c``, the only consumer, as many head messages as it can take, in one
        batch. False when it stopped at an expired message (the per-message loop dead-letters
        those) and ``c`` could take more."""
        ready = self.ready
        if ready.__class__ is not deque:
            return False
        ch = c.channel
        if not ch.can_deliver:
            return True
        k = len(ready)
        if not c.no_ack:
            p = c.prefetch
            if p and p - c.unacked < k:
                k = p - c.unacked
            gp = ch.prefetch_global
            if gp and gp - ch.unacked_count < k:
                k = gp - ch.unacked_count
            if k <= 0:
                return True
        msgs = []
        take = msgs.append
        popleft = ready.popleft
        size = 0
        done = True
        now = None
        for _ in range(k):
            m = popleft()
            ea = m.expires_at
            if ea is not None:
                if now is None:
                    now = time.monotonic() - 0.005   # the grace of dispatch()
                if ea <= now:
                    ready.appendleft(m)
                    done = False
                    break
            take(m)
            size += len(m.body)
        if msgs:
            self.ready_bytes -= size
            ch.deliver_many(c, msgs, self)
        return done

    def dispatch(self) -> None:
        """Deliver ready messages to consumers that can take them (round-robin)."""
        ready = self.ready
        consumers = self.consumers
        if not ready or not consumers:
            return
        if self.single_active:
            consumers = consumers[:1]
        elif self.prioritised:
            self._dispatch_by_priority()
            return
        n = len(consumers)
        if n == 1 and self._dispatch_batch(consumers[0]):
            # what the loop below leaves after serving its only consumer
            self.rr = 1
            if ready and ready[0].expires_at is not None:
                self.rearm_ttl()
            return
        i = self.rr
        idle = 0
        now = None
        while ready and idle < n:
            if i >= n:
                i = 0
            c = consumers[i]
            i += 1
            ch = c.channel
            if not ch.can_deliver:
                idle += 1
                continue
            if not c.no_ack:
                p = c.prefetch
                if p and c.unacked >= p:
                    idle += 1
                    continue
                gp = ch.prefetch_global
                if gp and ch.unacked_count >= gp:
                    idle += 1
                    continue
            m = ready.popleft()
            self.ready_bytes -= len(m.body)
            ea = m.expires_at
            if ea is not None:
                if now is None:
                    # a 5 ms grace: a message that can go to a consumer in the tick it arrived
                    # in is delivered even with x-message-ttl=0 (RabbitMQ delivers "immediately")
                    now = time.monotonic() - 0.005
                if ea <= now:
                    self.discard(m, "expired")
                    i -= 1
                    continue
            idle = 0
            ch.deliver(c, m, self)
        self.rr = i
        if ready and ready[0].expires_at is not None:
            self.rearm_ttl()
