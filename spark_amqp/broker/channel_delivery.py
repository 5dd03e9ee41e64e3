"""basic.deliver on the broker side: the hot path from a queue's dispatch to the output buffer.

Part of :class:`~.channel.Channel` (a mixin: it uses the channel's ``conn``, ``number``,
``next_tag``, ``unacked`` and ``frame_max``). Each delivery takes the channel's next delivery
tag; one that waits for an ack is recorded in ``unacked`` and counted by its queue
(:meth:`.queue.Queue.count_delivered`). The frame bytes around a delivery tag depend only on
the exchange / routing key, the properties and the body size, so they are built once per run
of equal ones and kept in the consumer's typed ``frames`` (:mod:`.deliver_frames`). Quorum-queue deliveries carry the
delivery-count headers of the RabbitMQ version the broker behaves like (see
:func:`with_delivery_count`).
"""

from __future__ import annotations

import struct

from ..protocol.amqp10.props091 import offset_header_split
from ..protocol.server_frames import (append_deliver, append_stream_run, deliver_frames,
                                      deliver_parts, stream_deliver_parts)
from .deliver_frames import DeliverFrames
from .message import Message
from .queue import Consumer, Queue
from .stream_queue import StreamEntry

__all__ = ["DeliveryMethods", "with_delivery_count", "shortstr"]

_Q = struct.Struct(">q").pack


def shortstr(s: str) -> bytes:
    b = s.encode("utf-8")
    return bytes((len(b),)) + b


class DeliveryMethods:
    """basic.deliver of queue and stream messages to a consumer of this channel."""

    def record_delivery(self, q: Queue, m: Message, owner, no_ack: bool) -> int:
        """The next delivery tag, for ``m`` from ``q`` sent to ``owner`` (a consumer, or ``q``
        for a basic.get-ok): recorded as outstanding and counted by ``q`` unless ``no_ack``
        (then ``m`` is gone for good)."""
        tag = self.next_tag
        self.next_tag = tag + 1
        if no_ack:
            q._forget(m)
        else:
            self.unacked.add(tag, m, owner)
            q.count_delivered(owner)
        return tag

    def deliver(self, c: Consumer, m: Message, q: Queue) -> None:
        """basic.deliver ``m`` from ``q`` to consumer ``c`` (called by Queue.dispatch)."""
        q.stat_deliver += 1
        tag = self.record_delivery(q, m, c, c.no_ack)
        f = c.frames
        if len(m.body) == f.blen and m.props_raw == f.props and m.enc == f.enc and not (q.quorum and m.acquired_count):
            # the frame parts of the consumer's previous delivery fit (round-robin hot path)
            conn = self.conn
            append_deliver(conn.out, f.pre, tag, m.redelivered, f.post, m.body)
            if not conn.dirty:
                conn.mark_dirty()
            return
        self._encode_delivers(c, (m,), tag, q, c.frames)

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
        self._encode_delivers(c, msgs, tag, q, c.frames)

    def deliver_stream(self, c: Consumer, entries: list, first: int, q) -> None:
        """basic.deliver stream messages ``entries`` ((enc, props_raw, body) read from offset
        ``first`` on: the 0-9-1 form of the stored AMQP 1.0 messages, ``stream_convert.py``)
        to consumer ``c`` of stream ``q``, each with the header ``x-stream-offset`` in its
        sorted place among the headers (as RabbitMQ, ``props091.offset_header_split``). The
        unacked entries hold the offsets (acks only give credit).

        The frame bytes around the delivery tag and the offset depend only on the exchange /
        routing key, the properties and the body size: built once per run of equal ones."""
        n = len(entries)
        tag = self.next_tag
        self.next_tag = tag + n
        self.unacked.add_run(tag, range(first, first + n), c)
        q.count_delivered(c, n)
        conn = self.conn
        out = conn.out
        ch_n = self.number
        limit = self.frame_max - 8
        ctag = c.tag_enc
        f = c.frames
        k_enc, k_props, k_blen, pre, mid, post = f.enc, f.props, f.blen, f.pre, f.mid, f.post
        i = 0
        while i < n:
            # the run of entries the cached parts fit: appended without a Python-level loop
            j = append_stream_run(out, pre, tag + i, mid, first + i, post, entries, i, k_enc,
                                  k_props, k_blen) if k_enc is not None else i
            if j == n:
                break
            enc, props_raw, body = entries[j]
            blen = len(body)
            if not 0 < blen <= limit:
                # no body frame, or several: the general encoder
                offset = first + j
                before, after = offset_header_split(props_raw)
                self._encode_delivers(c, (StreamEntry(enc, before + _Q(offset) + after, body, offset),),
                                      tag + j, q, DeliverFrames())
                k_enc = None
                i = j + 1
                continue
            before, after = offset_header_split(props_raw)
            k_enc, k_props, k_blen = enc, props_raw, blen
            pre, mid, post = stream_deliver_parts(ch_n, ctag, enc, before, after, blen)
            i = j
        f.enc, f.props, f.blen, f.pre, f.mid, f.post = k_enc, k_props, k_blen, pre, mid, post
        if not conn.dirty:
            conn.mark_dirty()

    def _encode_delivers(self, c: Consumer, msgs, tag: int, q: Queue, f: DeliverFrames) -> None:
        """Append the basic.deliver frames of ``msgs`` (tags from ``tag``) to the output.

        The frame bytes around the delivery tag depend only on the exchange / routing key,
        the properties and the body size, so they are built once and reused while those stay
        the same (kept in ``f``, the consumer's :class:`.deliver_frames.DeliverFrames`, or a
        scratch one)."""
        conn = self.conn
        out = conn.out
        ctag = c.tag_enc
        n = self.number
        limit = self.frame_max - 8
        quorum = q.quorum
        k_enc, k_props, k_blen, pre, post = f.enc, f.props, f.blen, f.pre, f.post
        for m in msgs:
            props_raw = m.props_raw
            if quorum and m.acquired_count:
                # RabbitMQ 3.10.8 (checked with pika): basic.deliver of a quorum queue carries
                # x-delivery-count only once the message was returned (1, 2, ...); basic.get-ok
                # carries it from 0. 4.3: see with_delivery_count.
                props_raw = with_delivery_count(m, not q.requeue_counts)
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
        f.enc, f.props, f.blen, f.pre, f.post = k_enc, k_props, k_blen, pre, post
        if not conn.dirty:
            conn.mark_dirty()


def with_delivery_count(m: Message, v4: bool = False) -> bytes:
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
