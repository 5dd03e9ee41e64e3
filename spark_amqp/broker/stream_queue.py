"""A stream queue (``x-queue-type=stream``) as RabbitMQ 3.10.8 serves it over AMQP 0-9-1.

The queue side of :mod:`.stream`: declare arguments, consumers reading from their own
``x-stream-offset`` position with prefetch as credit, and the refusals RabbitMQ answers for
what a stream cannot do. Reply codes and texts were checked on RabbitMQ 3.10.8 with pika
(tests/broker/conformance/test_streams.py runs the same assertions on both brokers; facts in
/work/shared/reference/rabbitmq-streams-over-0-9-1.md):

- declare: durable, not exclusive, not auto-delete (406 "invalid property ..."); arguments
  ``x-max-length-bytes``, ``x-max-age``, ``x-stream-max-segment-size-bytes``,
  ``x-initial-cluster-size``, ``x-queue-leader-locator``; classic-queue arguments are 406;
- consume: a per-consumer prefetch is required (406); ``no_ack``, global QoS next to a
  consumer prefetch, ``basic.get``, ``queue.purge``, ``basic.nack``/``basic.reject`` are 540
  (connection); ``basic.recover`` with unacked stream deliveries is 541; acks only give credit
  back, nothing is ever requeued or redelivered;
- ``x-stream-offset``: ``first`` / ``last`` / ``next`` (the default), an integer offset, an
  AMQP timestamp (seconds), an interval string (``"1h"``, ``"7D"``: now minus it). An interval
  string with value 0 or an unknown unit is 406 ``invalid_stream_offset_arg``; a string
  without leading digits, a boolean or an array closes the connection with 541 INTERNAL_ERROR
  as RabbitMQ 3.10.8 does (its parser crashes), with a reply text here that names the
  argument and the accepted values.

Filtering (RabbitMQ 3.13+; the 4.3 mode only, ``Behaviour.stream_filtering``;
:mod:`.stream_filter`): ``x-stream-filter-size-bytes`` (16..255, default 16; else 406
"Invalid value for  x-stream-filter-size-bytes", RabbitMQ's text with its two spaces) sizes
each chunk's Bloom filter; a consumer's ``x-stream-filter`` / ``x-stream-match-unfiltered``
make the dispatch skip chunks that cannot match. In the 3.10 mode, as RabbitMQ 3.10.8 (tried
with pika), the declare argument is accepted with any value and the consumer arguments are
ignored: every chunk is delivered.
"""

from __future__ import annotations

import datetime as _dt
import time

from ..protocol.errors import AMQPNotImplemented, InternalError, PreconditionFailed
from .queue import Queue
from .stream import DEFAULT_SEGMENT_BYTES, MAX_SEGMENT_BYTES, StreamLog, parse_max_age
from .stream_convert import StreamConversions
from .stream_filter import DEFAULT_FILTER_BYTES, MAX_FILTER_BYTES, MIN_FILTER_BYTES, \
    filter_value_of, matcher_from_arguments

__all__ = ["StreamQueue", "StreamEntry", "resolve_offset", "DISPATCH_MAX"]

#: At most this many messages go to one consumer per dispatch round.
DISPATCH_MAX = 2048
#: At most this many chunks go to one stream-protocol subscription per dispatch round.
DISPATCH_CHUNKS = 8


class StreamEntry:
    """One message read from a stream, in the shape :class:`~.channel.Channel` delivers
    (``enc``, ``props_raw`` with the ``x-stream-offset`` header, ``body``)."""

    __slots__ = ("enc", "props_raw", "body", "offset")
    redelivered = False
    delivery_count = 0

    def __init__(self, enc: bytes, props_raw: bytes, body: bytes, offset: int):
        self.enc = enc
        self.props_raw = props_raw
        self.body = body
        self.offset = offset


def _where(name: str, vhost: str) -> str:
    return f"queue '{name}' in vhost '{vhost}'"


def resolve_offset(log: StreamLog, spec, now: float | None = None) -> int:
    """The offset a new consumer starts at for consumer argument ``x-stream-offset`` = ``spec``.

    ``None``/``"next"``: the end; ``"first"``: the first retained offset; ``"last"``: the first
    offset of the last chunk; an int: that offset (below the retained start: the start; above
    the end: it waits there); a ``datetime`` (AMQP timestamp): the first chunk written at or
    after it; an interval string ``<int><unit>`` (units Y M D h m s): now minus it.
    Raises ValueError for anything else. Source: RabbitMQ docs "Streams", osiris_log offset specs.
    """
    if spec is None:
        return log.end
    if isinstance(spec, (bytes, bytearray)):
        spec = bytes(spec).decode("utf-8", "replace")
    if isinstance(spec, bool):
        raise ValueError(spec)
    if isinstance(spec, int):
        return max(spec, log.first)
    if isinstance(spec, _dt.datetime):
        if spec.tzinfo is None:
            spec = spec.replace(tzinfo=_dt.timezone.utc)
        return _at_time(log, spec.timestamp())
    if isinstance(spec, str):
        if spec == "first":
            return log.first
        if spec == "last":
            return log.last_chunk_start()
        if spec == "next":
            return log.end
        secs = parse_max_age(spec)
        if secs is not None:
            return _at_time(log, (time.time() if now is None else now) - secs)
    raise ValueError(spec)


def _at_time(log: StreamLog, ts: float) -> int:
    return log.offset_for_timestamp(int(ts * 1000))


#: Arguments RabbitMQ 3.10.8 refuses on a stream: 406 "invalid arg 'x-max-length' for queue 'q'
#: in vhost '/' of queue type rabbit_stream_queue".
UNSUPPORTED_ARGS = ("x-max-length", "x-message-ttl", "x-overflow", "x-dead-letter-exchange",
                    "x-dead-letter-routing-key", "x-expires", "x-max-priority",
                    "x-single-active-consumer", "x-delivery-limit", "x-queue-mode",
                    "x-max-in-memory-length", "x-max-in-memory-bytes", "x-queue-master-locator")
#: Stream arguments compared on a redeclare (406 "inequivalent arg ..."), besides the common ones.
STREAM_EQUIV_ARGS = ("x-max-age", "x-stream-max-segment-size-bytes", "x-initial-cluster-size")
_LEADER_LOCATORS = ("client-local", "balanced", "random", "least-leaders")


def _amqp_type(v) -> str:
    """RabbitMQ's name of the AMQP field type ``v`` arrived as (for its error texts)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "signedint" if -2 ** 31 <= v < 2 ** 31 else "long"
    if isinstance(v, (str, bytes)):
        return "longstr"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "table"
    if isinstance(v, _dt.datetime):
        return "timestamp"
    return type(v).__name__


def _int_arg(args: dict, key: str, where: str, cid: int, mid: int, zero_ok: bool = True) -> int | None:
    v = args.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise PreconditionFailed(f"invalid arg '{key}' for {where}: \"expected integer, got {_amqp_type(v)}\"",
                                 cid, mid)
    if v < 0:
        raise PreconditionFailed(f"invalid arg '{key}' for {where}: {{value_negative,{v}}}", cid, mid)
    if v == 0 and not zero_ok:
        raise PreconditionFailed(f"invalid arg '{key}' for {where}: {{value_zero,0}}", cid, mid)
    return v


def _interval(v, what: str, where: str, cid: int, mid: int) -> float | None:
    """Seconds of an interval string, None when it is not a valid one; 541 (connection) for a
    string without leading digits, which crashes RabbitMQ 3.10.8's parser
    (``rabbit_amqqueue:check_max_age/1`` calls ``list_to_integer("")``)."""
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode("utf-8", "replace")
    if not v[:1].isdigit():
        raise InternalError(f"invalid {what} {v!r} for {where}: an interval must start with "
                            f"digits, like '7D' (units Y, M, D, h, m, s)", cid, mid)
    return parse_max_age(v)


def check_filter_size(name: str, vhost: str, args: dict) -> int:
    """``x-stream-filter-size-bytes`` of a stream declare (RabbitMQ 3.13+): the Bloom filter
    bytes per chunk, :data:`DEFAULT_FILTER_BYTES` when absent. Raises PreconditionFailed
    (406) with RabbitMQ's text (``rabbit_stream_queue:check_filter_size/1``) for a value
    outside 16..255 or not an integer."""
    v = args.get("x-stream-filter-size-bytes")
    if v is None:
        return DEFAULT_FILTER_BYTES
    if isinstance(v, bool) or not isinstance(v, int) or not MIN_FILTER_BYTES <= v <= MAX_FILTER_BYTES:
        raise PreconditionFailed("Invalid value for  x-stream-filter-size-bytes", 50, 10)
    return v


def check_stream_declare(name: str, vhost: str, durable: bool, exclusive: bool, auto_delete: bool,
                         args: dict) -> tuple[int | None, int | None, float | None]:
    """Validate a queue.declare of a stream; returns (segment size, max bytes, max age in s).

    Raises PreconditionFailed (406) with RabbitMQ 3.10.8's texts: non-durable, exclusive,
    auto-delete; classic-queue arguments ("... of queue type rabbit_stream_queue"); negative
    or non-integer sizes; ``x-stream-max-segment-size-bytes`` above 3,000,000,000; a bad
    ``x-max-age`` or ``x-queue-leader-locator``; InternalError (541) for an ``x-max-age``
    without leading digits (as RabbitMQ)."""
    cid, mid = 50, 10
    where = _where(name, vhost)
    for prop, bad in (("non-durable", not durable), ("exclusive-owner", exclusive), ("auto-delete", auto_delete)):
        if bad:
            raise PreconditionFailed(f"invalid property '{prop}' for {where}", cid, mid)
    for a in UNSUPPORTED_ARGS:
        if a in args:
            raise PreconditionFailed(f"invalid arg '{a}' for {where} of queue type rabbit_stream_queue", cid, mid)
    max_bytes = _int_arg(args, "x-max-length-bytes", where, cid, mid)
    seg = _int_arg(args, "x-stream-max-segment-size-bytes", where, cid, mid)
    if seg is not None and seg > MAX_SEGMENT_BYTES:
        raise PreconditionFailed("Exceeded max value for x-stream-max-segment-size-bytes", cid, mid)
    _int_arg(args, "x-initial-cluster-size", where, cid, mid, zero_ok=False)
    loc = args.get("x-queue-leader-locator")
    if loc is not None:
        if isinstance(loc, bytes):
            loc = loc.decode("utf-8", "replace")
        if loc not in _LEADER_LOCATORS:
            raise PreconditionFailed(f"invalid arg 'x-queue-leader-locator' for {where}: invalid_queue_locator_arg",
                                     cid, mid)
    age = args.get("x-max-age")
    max_age = None
    if age is not None:
        if not isinstance(age, (str, bytes)):
            raise PreconditionFailed(f"invalid arg 'x-max-age' for {where}: {{unacceptable_type,{_amqp_type(age)}}}",
                                     cid, mid)
        max_age = _interval(age, "x-max-age", where, cid, mid)
        if not max_age:
            raise PreconditionFailed(f"invalid arg 'x-max-age' for {where}: invalid_max_age", cid, mid)
    return seg, max_bytes, max_age


class StreamQueue(Queue):
    """A stream: a :class:`~.stream.StreamLog` plus consumers with their own positions.

    Raises PreconditionFailed (406) for invalid declare arguments.
    """

    stream = True

    def __init__(self, broker, vhost, name: str, durable: bool = True, exclusive_owner=None,
                 auto_delete: bool = False, arguments: dict | None = None):
        args = dict(arguments or {})
        seg, max_bytes, max_age = check_stream_declare(name, vhost.name, durable, exclusive_owner is not None,
                                                       auto_delete, args)
        filtering = broker.config.behaviour.stream_filtering
        filter_bytes = check_filter_size(name, vhost.name, args) if filtering else None
        # the classic-queue settings do not apply to a stream
        base_args = {k: v for k, v in args.items() if k in ("x-queue-type",)}
        super().__init__(broker, vhost, name, durable, exclusive_owner, auto_delete, base_args)
        self.arguments = args
        self.plain = False
        self.queue_type = "stream"
        #: the 0-9-1 <-> AMQP 1.0 conversions of the broker's version (the log holds AMQP 1.0)
        self.conv = StreamConversions(name, broker.config.behaviour.stream_conversion)
        directory = None
        if broker.data_dir and broker.store.durable:
            directory = StreamLog.directory_for(broker.data_dir, vhost.name, name)
        self.log = StreamLog(directory, seg if seg is not None else DEFAULT_SEGMENT_BYTES,
                             max_bytes, max_age, filter_bytes, convert_v1=self.conv.message)
        self.on_disk = directory is not None
        #: stream-protocol subscriptions (broker/stream_connection.py Subscription) and publishers
        self.subscribers: list = []
        self.stream_publishers: set = set()
        #: single active consumer groups: name -> subscriptions, the first one active
        self.sac_groups: dict = {}

    # ------------------------------------------------------------------ counts
    @property
    def message_count(self) -> int:
        return self.log.message_count

    # ------------------------------------------------------------------ publishing
    def append(self, msg) -> int:
        """Store 0-9-1 message ``msg`` at the next offset, as the AMQP 1.0 message RabbitMQ
        stores (:class:`~.stream_convert.StreamConversions`); returns the store ticket its
        confirm waits for. Raises InternalError (541) for a message the broker's version
        cannot convert (RabbitMQ closes the publisher)."""
        enc = msg.enc
        if enc is None:
            from .message import route_enc
            enc = route_enc(msg.exchange, msg.routing_key)
        props = msg.props_raw
        entry = self.conv.entry(msg.exchange, msg.routing_key, enc, props, msg.body)
        log = self.log
        fv = filter_value_of(props) if log.filter_bytes is not None else None
        log.append_entry(entry, 1, fv)
        if log.pending_records == 1:
            self.mark_pending()
        return self.broker.store.current_ticket + 1 if self.on_disk else 0

    def mark_pending(self) -> None:
        """Have the log's pending records and tracking sealed into a chunk in this tick
        (Broker._tick), before the store's batch, and the consumers served."""
        b = self.broker
        b.pending_streams[id(self)] = self
        b.mark_queue(self)

    def enqueue(self, msg) -> None:
        self.append(msg)

    def publish(self, msg) -> int:
        """A published message: appended to the log (:meth:`append`); returns its ticket."""
        return self.append(msg)

    def seal(self) -> None:
        """Write pending messages as chunks; register the fsync with the store's next batch."""
        log = self.log
        if log.seal() and log.unsynced:
            self.broker.store.add_sync(log.take_unsynced())

    # ------------------------------------------------------------------ settling: credit only
    def settle(self, msg) -> None:
        self.unacked_count -= 1

    def settle_many(self, msgs) -> None:
        self.unacked_count -= len(msgs)

    def forget_many(self, msgs) -> None:
        pass

    def _forget(self, msg) -> None:
        pass

    def reject(self, msg, requeue: bool) -> None:
        self.unacked_count -= 1

    def requeue(self, msgs, failed: bool = True) -> None:
        """Returned deliveries (channel closed, nack, reject): a stream never redelivers."""

    def purge(self) -> int:
        """Called by queue.delete: drop the log and its files. (queue.purge itself is refused
        by the channel, as RabbitMQ does.)"""
        n = self.log.message_count
        if self.deleted:
            self.broker.pending_streams.pop(id(self), None)
            for conn in list(getattr(self.broker, "stream_connections", ())):
                conn.stream_gone(self)
            self.log.destroy()
        return n

    def get(self):
        raise AMQPNotImplemented(f"basic.get not supported by stream queues {_where(self.name, self.vhost.name)}",
                                 60, 70)

    def cancel_timers(self) -> None:
        pass

    # ------------------------------------------------------------------ consuming
    def check_consume(self, channel, no_ack: bool, arguments: dict) -> int:
        """Validate a basic.consume on this stream; returns the starting offset.

        Raises 406 without a per-consumer prefetch, 540 (connection) for no_ack, 541
        (connection, as RabbitMQ 3.10.8) for an invalid ``x-stream-offset``."""
        cid, mid = 60, 20
        where = _where(self.name, self.vhost.name)
        if no_ack:
            raise AMQPNotImplemented(f"automatic acknowledgement not supported by stream queues {where}", cid, mid)
        if not channel.prefetch_consumer:
            raise PreconditionFailed(f"consumer prefetch count is not set for '{where}'", cid, mid)
        if channel.prefetch_global:
            raise AMQPNotImplemented(f"{where} does not support global qos", cid, mid)
        spec = arguments.get("x-stream-offset")
        if isinstance(spec, (bytes, bytearray)):
            spec = bytes(spec).decode("utf-8", "replace")
        if isinstance(spec, str) and spec not in ("first", "last", "next"):
            secs = _interval(spec, "x-stream-offset", where, cid, mid)
            if not secs:
                raise PreconditionFailed(f"invalid arg 'x-stream-offset' for {where}: "
                                         f"{{invalid_stream_offset_arg,{{longstr,<<\"{spec}\">>}}}}", cid, mid)
        try:
            return resolve_offset(self.log, spec)
        except ValueError:
            raise InternalError(f"invalid x-stream-offset {spec!r} ({_amqp_type(spec)}) for a "
                                f"consumer of {where}: use first, last, next, an integer offset, a timestamp or "
                                f"an interval like '1h' / '7D'", cid, mid) from None

    def consumer_filter(self, arguments: dict):
        """The chunk matcher of a new consumer's arguments (``x-stream-filter``,
        ``x-stream-match-unfiltered``), or None: no filter, or a broker that has no stream
        filtering (the 3.10 mode ignores the arguments, as RabbitMQ 3.10.8)."""
        if self.log.filter_bytes is None:
            return None
        return matcher_from_arguments(arguments, self.log.filter_bytes)

    def dispatch(self) -> None:
        """Deliver to every consumer that has credit, from its own position, whole chunks at
        a time, as RabbitMQ 3.10.8 does (``rabbit_stream_queue:stream_entries/4``): while the
        consumer's credit (prefetch minus unacked deliveries) is above 0 the next chunk is
        delivered whole, from the consumer's offset to the chunk's end, and the credit may
        go below 0. So a consumer with prefetch 1 gets the whole chunk its offset is in and,
        until it acks, nothing more, however much is written after it: a reader that does
        not ack learns where the log ended when it started (the driver's tail probe,
        spark/source/streams/probe.py, relies on it)."""
        log = self.log
        if log.has_pending:
            self.seal()
        nxt = log.next
        more = False
        view = self.conv.view
        for c in list(self.consumers):
            pos = c.stream_pos
            if pos >= nxt:
                continue
            ch = c.channel
            if not ch.can_deliver:
                continue
            credit = c.prefetch - c.unacked
            if credit <= 0:
                continue
            if credit > DISPATCH_MAX:
                # a big prefetch is served over several rounds, so the connection's output
                # is written (and its flow control seen) between them
                credit = DISPATCH_MAX
                more = True
            try:
                c.stream_pos, runs = log.read_chunks(pos, credit, view, c.stream_filter)
            except InternalError as exc:
                # RabbitMQ's channel crashes on a message it cannot convert: 541
                ch.conn.connection_error(exc)
                continue
            for start, entries in runs:
                ch.deliver_stream(c, entries, start, self)
        if self.subscribers and self._serve_subscribers(log):
            more = True
        if more:
            self.broker.mark_queue(self)

    def _serve_subscribers(self, log) -> bool:
        """Send stream-protocol subscriptions the chunks their credit allows (one credit per
        chunk, PROTOCOL.adoc "Credit"; user chunks only, whole, from the one holding the
        subscription's position: ``rabbit_stream_reader:send_chunks``). Returns whether a
        subscription stopped at :data:`DISPATCH_CHUNKS` with more to send."""
        more = False
        types = log.c_type
        firsts = log.c_first
        counts = log.c_count
        n = len(firsts)
        for sub in list(self.subscribers):
            conn = sub.conn
            if conn.closed or not conn.writable or not sub.active:
                continue
            credit = conn.sm.credits.get(sub.id, 0)
            if credit <= 0 or sub.pos >= log.next:
                continue
            i = log.next_user_chunk(sub.pos)
            sent = 0
            matcher = sub.matcher
            while credit > 0 and i < n:
                if types[i] != 0:
                    i += 1
                    continue
                end = firsts[i] + counts[i]
                if matcher is not None and not matcher.matches(log.c_filter[i]):
                    log.filter_stats["chunks_skipped"] += 1
                    sub.pos = end
                    i += 1
                    continue
                if sent >= DISPATCH_CHUNKS:
                    more = True
                    break
                header, data = log.chunk_header_and_data(i)
                conn.deliver(sub, header, data)
                # management's figures as rabbit_stream_reader's send_file_callback: entries
                # sent, and the first offset of the last chunk sent
                sub.consumed += (header[2] << 8) | header[3]
                sub.offset = firsts[i]
                sub.pos = end
                credit -= 1
                sent += 1
                i += 1
        return more
