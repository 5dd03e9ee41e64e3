"""One stream-protocol connection of the embedded broker (port 5552), as RabbitMQ's
``rabbit_stream_reader.erl`` serves it (v3.10.8 and v4.3.5; the broker's version decides
where they differ).

The sans-IO state machine (:class:`~spark_amqp.protocol.stream.StreamConnection`, server
role) decodes frames, checks the command order, frame sizes and credit; this module does what
is the broker's: authentication (SASL PLAIN, AMQPLAIN, EXTERNAL on a TLS listener that
requires client certificates: :mod:`.auth`), the user's vhost access and permissions
(:mod:`.rules`: write to publish or store an offset, read to subscribe or query, configure to
create and delete), publishers with deduplication by producer name, subscriptions with credit
per chunk, stored offsets, metadata with the broker's advertised address, super streams, and
the version differences:

===========================  =========================  ===================================
what                         3.10 mode                  4.3 mode
===========================  =========================  ===================================
frames before ``open``       8192 bytes (3.10.8 closes  8192 bytes (``initial_frame_max``)
                             at once on a big frame)
exchange command versions,   unknown frame: the         answered (deliver v2 with the
stream stats, super-stream   connection is closed       committed chunk id, publish v2 with
create/delete, resolve       with UNKNOWN_FRAME         filter values, stats
offset spec, publish v2                                 ``first_chunk_id`` /
                                                        ``committed_chunk_id`` /
                                                        ``last_chunk_id``)
route / partitions answers   without the response bit   with it
filtering (``filter.N``)     ignored                    chunks whose Bloom filter cannot
                                                        match are skipped
===========================  =========================  ===================================

Single active consumer (3.11+, the 4.3 mode; ``rabbit_stream_sac_coordinator``): the
subscriptions of a stream with ``single-active-consumer = true`` and the same ``name`` form a
group (a name is required: PRECONDITION_FAILED without one); the first is told ``consumer
update active = true`` and starts from the offset specification its answer gives, the others
get nothing until the active one goes (unsubscribe or connection lost), when the next is made
active the same way. Not modelled: the partition-aware choice of super-stream groups (the
``super-stream`` property): the first registered is active. In the 3.10 mode the properties
are ignored, as RabbitMQ 3.10.8 does.

Response codes and when they come are RabbitMQ's (checked against RabbitMQ 3.10.8 with the
raw state machine and with rstream; tests/broker/test_stream_protocol.py). Errors in received
bytes: before ``open`` the socket is closed without a word, after it a ``close`` with
UNKNOWN_FRAME or FRAME_TOO_LARGE is sent (as RabbitMQ does), and the broker goes on serving
the others.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..protocol import stream as S
from ..protocol.stream import Code, OffsetType
from .auth import MECHANISMS, TLS_CLIENT_CERT_MECHANISMS, AuthFailure, authenticate, authenticate_external, \
    check_loopback
from .listener_guard import UNGUARDED
from .versions import BEHAVIOURS
from .stream_filter import StreamMatcher
from .stream_manager import (create_stream, create_super_stream, delete_stream, delete_super_stream, lookup_stream,
                             partitions, route)

__all__ = ["StreamServerProtocol", "Subscription", "Publisher", "RABBITMQ_VERSIONS"]

log = logging.getLogger("spark_amqp.broker.stream")
conn_log = logging.getLogger("spark_amqp.broker.connections")  # see broker/connection.py

#: the version a stream-protocol client is told (clients gate commands on it)
RABBITMQ_VERSIONS = {v: b.release for v, b in BEHAVIOURS.items()}  # mode -> release reported
_SINCE_3_11 = (S.ExchangeCommandVersions, S.StreamStats, S.CreateSuperStream, S.DeleteSuperStream,
               S.ResolveOffsetSpec, S.ConsumerUpdateResponse)
_CLOSE_WAIT = 3.0        # seconds to wait for the client's close response


class Publisher:
    """A declared publisher: ``stream`` (the queue), ``reference`` (producer name, bytes, or
    None), counters for the management API."""

    __slots__ = ("id", "stream", "reference", "published", "confirmed", "errored", "queue", "to_confirm")

    def __init__(self, pid: int, queue, reference: bytes | None):
        self.id = pid
        self.queue = queue
        self.stream = queue.name
        self.reference = reference
        self.published = self.confirmed = self.errored = 0
        self.to_confirm: list = []      # publishing ids confirmed in this tick, sent at its end


class Subscription:
    """A subscription: the connection, ``id``, the stream queue, ``pos`` (the offset the next
    chunk to send holds or follows), ``matcher`` (4.3 filtering, or None), ``properties``,
    counters (chunks and records sent) for the management API."""

    __slots__ = ("conn", "id", "queue", "pos", "matcher", "properties", "offset", "consumed", "chunks",
                 "group", "active")

    def __init__(self, conn, sid: int, queue, pos: int, matcher, properties: dict):
        self.conn = conn
        self.id = sid
        self.queue = queue
        self.pos = pos
        self.matcher = matcher
        self.properties = properties
        self.offset = pos        # the first offset of the last chunk sent (management: "offset")
        self.consumed = 0
        self.chunks = 0
        self.group = None        # single active consumer: the group's name
        self.active = True

    @property
    def credit(self) -> int:
        return self.conn.sm.credits.get(self.id, 0)


class StreamServerProtocol(asyncio.Protocol):
    """One client connection on the stream listener. ``broker`` is the owning
    :class:`~.server.Broker`; ``tls``: the listener's :class:`~.config.TLSConfig` (None: plain
    TCP). ``admission``: the listener guard's (handshake deadline until ``open``)."""

    admission = UNGUARDED

    def __init__(self, broker, tls=None):
        self.broker = broker
        self.loop = broker.loop
        cfg = broker.config
        self.v310 = cfg.behaviour.version == "3.10"
        sc = cfg.stream
        # frames before open: at most 8192 bytes in both modes (4.x's stream.initial_frame_max;
        # 3.10 has no such setting, but RabbitMQ 3.10.8 closes a connection whose first frame
        # announces 1 MiB or more at once: checked with the raw client)
        self.sm = S.StreamConnection(S.SERVER, frame_max=sc.frame_max, heartbeat=sc.heartbeat,
                                     initial_frame_max=S.DEFAULT_INITIAL_FRAME_MAX)
        self.tls = tls
        self.peercert = None
        self.transport = None
        self.peer = "?"
        self.peer_host, self.peer_port = "", 0
        self.local_host, self.local_port = "", 0
        self.out = bytearray()
        self.dirty = False
        self.writable = True
        self.closed = False
        self.user: str | None = None
        self.vhost = None
        self.perm = None
        self.publishers: dict[int, Publisher] = {}
        self.publisher_refs: dict[tuple, int] = {}
        self.subscriptions: dict[int, Subscription] = {}
        self.deliver_v2 = False
        self._consumer_updates: dict[int, Subscription] = {}   # correlation id -> subscription
        self._confirming: list = []     # publishers with ids in to_confirm
        self.connected_at = int(time.time() * 1000)
        self.client_properties: dict = {}
        self._hb_timer = None
        self._close_timer = None
        self.frames_in = self.frames_out = 0
        self.bytes_in = self.bytes_out = 0      # management: recv_oct / send_oct
        self.reads = self.writes = 0            # management: recv_cnt / send_cnt

    # ================================================================== asyncio callbacks
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        local = transport.get_extra_info("sockname")
        if peer:
            self.peer_host, self.peer_port = peer[0], peer[1]
        if isinstance(local, tuple) and local:
            self.local_host, self.local_port = local[0], local[1]
        self.peer = f"{self.peer_host}:{self.peer_port}"
        if self.tls is not None:
            self.peercert = transport.get_extra_info("peercert") or None
        transport.set_write_buffer_limits(high=self.broker.config.write_buffer_limit)
        self.broker.stream_connections.add(self)
        conn_log.info("accepting stream connection from %s", self.peer)

    def connection_lost(self, exc) -> None:
        self._cleanup()
        conn_log.info("closed stream connection from %s", self.peer)

    # ------------------------------------------------------------------ resource alarms
    @property
    def published(self) -> bool:
        """Whether the connection has publishers (the ones a resource alarm stops)."""
        return bool(self.publishers)

    def block(self) -> None:
        """A resource alarm: stop reading from this publishing connection (RabbitMQ's stream
        reader stops reading its socket while blocked); deliveries go on."""
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def unblock(self) -> None:
        if self.transport is not None and not self.closed:
            try:
                self.transport.resume_reading()
            except RuntimeError:    # not paused
                pass

    def pause_writing(self) -> None:
        self.writable = False

    def resume_writing(self) -> None:
        self.writable = True
        for sub in self.subscriptions.values():
            self.broker.mark_queue(sub.queue)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.bytes_in += len(data)
        self.reads += 1
        try:
            events = self.sm.receive_data(data)
        except S.StreamError as exc:
            for ev in exc.events:
                self._handle(ev)
            self._protocol_error(exc)
            return
        for ev in events:
            self._handle(ev)
            if self.closed:
                return

    # ================================================================== output
    def _write(self, data: bytes) -> None:
        self.out += data
        self.frames_out += 1
        if not self.dirty:
            self.dirty = True
            self.broker.mark_conn(self)

    def send(self, cmd) -> None:
        self._write(self.sm.send(cmd))

    def flush(self) -> None:
        self.dirty = False
        if self._confirming:
            # the confirms of a tick in one frame per publisher (as osiris confirms a write
            # batch at once), not one per publish frame
            for p in self._confirming:
                ids, p.to_confirm = p.to_confirm, []
                if ids:
                    p.confirmed += len(ids)
                    self.out += self.sm.send(S.PublishConfirm(p.id, ids))
            self._confirming = []
        if self.out and self.transport is not None and not self.transport.is_closing():
            self.bytes_out += len(self.out)
            self.writes += 1
            self.transport.write(bytes(self.out))
        self.out.clear()

    def mark_dirty(self) -> None:
        if not self.dirty:
            self.dirty = True
            self.broker.mark_conn(self)

    # ================================================================== closing
    def _protocol_error(self, exc: S.StreamError) -> None:
        frame = self.sm.close_frame_for(exc)
        log.warning("stream connection %s: %s", self.peer, exc)
        if frame is None:
            self._abort()
            return
        self._write(frame)
        self._closing()

    def close_by_server(self, code: int = Code.OK, reason: str = "broker shutdown") -> None:
        """Close from the broker's side (shutdown): a ``close``, then the socket."""
        if self.closed:
            return
        if self.sm.state is S.State.OPENED:
            try:
                self.send(S.Close(0, code, reason))
            except S.StreamError:
                pass
            self._closing()
        else:
            self._abort()

    def _closing(self) -> None:
        self.mark_dirty()
        if self._close_timer is None:
            self._close_timer = self.loop.call_later(_CLOSE_WAIT, self._abort)

    def _abort(self) -> None:
        if self.transport is not None:
            self.flush()
            self.transport.close()
        self._cleanup()

    def _cleanup(self) -> None:
        if self.closed:
            return
        self.closed = True
        for t in (self._hb_timer, self._close_timer):
            if t is not None:
                t.cancel()
        for sub in list(self.subscriptions.values()):
            self._drop_subscription(sub)
        for p in list(self.publishers.values()):
            self._drop_publisher(p)
        self.broker.stream_connections.discard(self)

    # ================================================================== heartbeats
    def _heartbeat(self) -> None:
        self._hb_timer = None
        if self.closed:
            return
        action = self.sm.heartbeat_action()
        if action == "dead":
            log.warning("stream connection %s: no frame for two heartbeat intervals (%ds); closing",
                        self.peer, 2 * self.sm.heartbeat)
            self._abort()
            return
        if action == "send":
            self._write(self.sm.heartbeat_frame())
        self._arm_heartbeat()

    def _arm_heartbeat(self) -> None:
        deadline = self.sm.heartbeat_deadline()
        if deadline is not None and not self.closed:
            self._hb_timer = self.loop.call_later(max(0.05, deadline - time.monotonic()), self._heartbeat)

    # ================================================================== commands
    def _handle(self, cmd) -> None:
        self.frames_in += 1
        fn = _HANDLERS.get(type(cmd))
        if fn is None:
            return
        if self.v310 and (type(cmd) in _SINCE_3_11 or (type(cmd) is S.Publish and cmd.filter_values is not None)):
            self._protocol_error(S.UnknownFrame(f"{type(cmd).__name__} is not a command of RabbitMQ 3.10"))
            return
        try:
            fn(self, cmd)
        except S.StreamError as exc:
            self._protocol_error(exc)

    # ------------------------------------------------------------------ handshake
    def _peer_properties(self, cmd) -> None:
        self.client_properties = dict(cmd.properties)
        version = RABBITMQ_VERSIONS[self.broker.config.behaviour.version]
        from .._version import __version__
        props = {"product": "RabbitMQ", "version": version, "cluster_name": "spark-amqp@localhost",
                 "platform": "Python/asyncio",
                 "copyright": "spark-amqp contributors",
                 "information": f"spark-amqp {__version__} embedded broker, behaving like RabbitMQ {version}"}
        self.send(S.PeerPropertiesResponse(cmd.correlation_id, Code.OK, props))

    @property
    def offers_external(self) -> bool:
        t = self.tls
        return bool(t is not None and t.verify_peer and t.fail_if_no_peer_cert and self.peercert)

    def _sasl_handshake(self, cmd) -> None:
        mechs = (TLS_CLIENT_CERT_MECHANISMS if self.offers_external else MECHANISMS).decode().split()
        self.send(S.SaslHandshakeResponse(cmd.correlation_id, Code.OK, mechs))

    def _sasl_authenticate(self, cmd) -> None:
        cfg = self.broker.config
        mech = cmd.mechanism
        allowed = (TLS_CLIENT_CERT_MECHANISMS if self.offers_external else MECHANISMS).decode().split()
        if mech not in allowed:
            self.send(S.SaslAuthenticateResponse(cmd.correlation_id, Code.SASL_MECHANISM_NOT_SUPPORTED))
            self._closing()
            return
        try:
            if mech == "EXTERNAL":
                user = authenticate_external(cfg, self.peercert, self.tls.cert_login_from)
            else:
                user = authenticate(cfg, mech, bytes(cmd.data or b""))
        except AuthFailure as exc:
            log.warning("stream connection %s: %s", self.peer, exc)
            self.send(S.SaslAuthenticateResponse(cmd.correlation_id, Code.AUTHENTICATION_FAILURE))
            self._closing()
            return
        try:
            check_loopback(cfg, user, self.local_host, mech)
        except AuthFailure as exc:
            log.warning("stream connection %s: %s", self.peer, exc)
            self.send(S.SaslAuthenticateResponse(cmd.correlation_id, Code.SASL_AUTHENTICATION_FAILURE_LOOPBACK))
            self._closing()
            return
        self.user = user
        self.send(S.SaslAuthenticateResponse(cmd.correlation_id, Code.OK))
        self.send(S.Tune(self.sm.frame_max, self.sm.heartbeat))
        self.admission.handshake_progress()

    def _tune(self, cmd) -> None:
        self._arm_heartbeat()

    def advertised(self) -> tuple[str, int]:
        """The host and port this node advertises to this client (``stream.advertised_host``
        / ``_port``; by default the address and port the client connected to)."""
        sc = self.broker.config.stream
        host = sc.advertised_host or (self.local_host if self.local_host not in ("0.0.0.0", "::") else "localhost")
        if host.startswith("::ffff:"):
            host = host[7:]
        return host, sc.advertised_port or self.local_port

    def _open(self, cmd) -> None:
        cfg = self.broker.config
        v = self.broker.vhosts.get(cmd.vhost)
        perm = cfg.permission(self.user, cmd.vhost) if v is not None else None
        if v is None or perm is None:
            log.warning("stream connection %s: user %r may not access vhost %r", self.peer, self.user, cmd.vhost)
            self.send(S.OpenResponse(cmd.correlation_id, Code.VIRTUAL_HOST_ACCESS_FAILURE, {}))
            self._closing()
            return
        self.vhost, self.perm = v, perm
        host, port = self.advertised()
        self.send(S.OpenResponse(cmd.correlation_id, Code.OK,
                                 {"advertised_host": host, "advertised_port": str(port)}))
        self.admission.handshake_done()
        conn_log.info("stream connection %s: user %r, vhost %r", self.peer, self.user, cmd.vhost)

    def _close(self, cmd) -> None:
        self.send(S.CloseResponse(cmd.correlation_id, Code.OK))
        self.flush()
        self._abort()

    def _close_response(self, cmd) -> None:
        self._abort()

    # ------------------------------------------------------------------ permissions
    def _allowed(self, kind: str, name: str) -> bool:
        return self.perm is not None and self.perm.allows(kind, name)

    def _readable(self, name: str):
        """(the stream queue, OK), or (None, ACCESS_REFUSED / STREAM_DOES_NOT_EXIST): the
        checks of every command that reads a stream, in RabbitMQ's order."""
        if not self._allowed("read", name):
            return None, Code.ACCESS_REFUSED
        q = lookup_stream(self.vhost, name)
        return (q, Code.OK) if q is not None else (None, Code.STREAM_DOES_NOT_EXIST)

    # ------------------------------------------------------------------ publishers
    def _declare_publisher(self, cmd) -> None:
        code = self._declare_publisher_code(cmd)
        self.send(S.DeclarePublisherResponse(cmd.correlation_id, code))

    def _declare_publisher_code(self, cmd) -> int:
        if self.broker.blocked:
            return Code.PRECONDITION_FAILED
        if not self._allowed("write", cmd.stream):
            return Code.ACCESS_REFUSED
        ref = cmd.reference.encode() if cmd.reference else None
        if cmd.publisher_id in self.publishers or (ref is not None and (cmd.stream, ref) in self.publisher_refs):
            return Code.PRECONDITION_FAILED
        q = lookup_stream(self.vhost, cmd.stream)
        if q is None:
            return Code.STREAM_DOES_NOT_EXIST
        p = Publisher(cmd.publisher_id, q, ref)
        self.publishers[p.id] = p
        if ref is not None:
            self.publisher_refs[(q.name, ref)] = p.id
        q.stream_publishers.add(p)
        p.queue = q
        return Code.OK

    def _delete_publisher(self, cmd) -> None:
        p = self.publishers.get(cmd.publisher_id)
        if p is None:
            self.send(S.DeletePublisherResponse(cmd.correlation_id, Code.PUBLISHER_DOES_NOT_EXIST))
            return
        self._drop_publisher(p)
        self.send(S.DeletePublisherResponse(cmd.correlation_id, Code.OK))

    def _drop_publisher(self, p: Publisher) -> None:
        self.publishers.pop(p.id, None)
        if p.reference is not None:
            self.publisher_refs.pop((p.stream, p.reference), None)
        p.queue.stream_publishers.discard(p)

    def _publish(self, cmd) -> None:
        p = self.publishers.get(cmd.publisher_id)
        ids = cmd.publishing_ids
        if p is None or p.queue.deleted:
            self.send(S.PublishError(cmd.publisher_id, [(i, Code.PUBLISHER_DOES_NOT_EXIST) for i in ids]))
            return
        p.published += len(ids)
        if not self._allowed("write", p.stream):
            p.errored += len(ids)
            self.send(S.PublishError(p.id, [(i, Code.ACCESS_REFUSED) for i in ids]))
            return
        q = p.queue
        log_ = q.log
        ref = p.reference
        fvs = cmd.filter_values if log_.filter_bytes is not None else None
        was = log_.pending_records
        msgs = cmd.messages
        for k, (pid, m) in enumerate(zip(ids, msgs)):
            if ref is not None:
                if log_.is_duplicate(ref, pid):
                    continue            # osiris: a duplicate is confirmed, not stored
                log_.track_writer(ref, pid)
            fv = fvs[k] if fvs is not None else None
            if fv is not None:
                fv = fv.encode()
            if type(m) is bytes:
                log_.append(m, fv)
            else:                       # a sub-batch entry, stored as it came
                log_.append_entry(m.header() + bytes(m.data), m.count, fv)
        if log_.pending_records != was or log_.pending_writers:
            q.mark_pending()
        ticket = self.broker.store.current_ticket + 1 if q.on_disk else 0
        if ticket:
            self.broker.after_commit(ticket, lambda: self._confirm(p, ids),
                                     lambda err: self._confirm_failed(p, ids))
        else:
            self._confirm(p, ids)

    def _confirm(self, p: Publisher, ids) -> None:
        if self.closed:
            return
        if not p.to_confirm:
            self._confirming.append(p)
        p.to_confirm.extend(ids)
        self.mark_dirty()

    def _confirm_failed(self, p: Publisher, ids) -> None:
        if self.closed:
            return
        p.errored += len(ids)
        self.send(S.PublishError(p.id, [(i, Code.INTERNAL_ERROR) for i in ids]))

    def _query_publisher_sequence(self, cmd) -> None:
        q, code = self._readable(cmd.stream)
        if q is None:
            self.send(S.QueryPublisherSequenceResponse(cmd.correlation_id, code, 0))
            return
        seq = q.log.writer_sequence(cmd.reference.encode())
        self.send(S.QueryPublisherSequenceResponse(cmd.correlation_id, Code.OK, seq or 0))

    # ------------------------------------------------------------------ subscriptions
    def _subscribe(self, cmd) -> None:
        q, code = self._readable(cmd.stream)
        if q is None:
            self.send(S.SubscribeResponse(cmd.correlation_id, code))
            return
        if cmd.subscription_id in self.subscriptions:
            self.send(S.SubscribeResponse(cmd.correlation_id, Code.SUBSCRIPTION_ID_ALREADY_EXISTS))
            return
        pos = resolve_spec(q.log, cmd.offset_spec)
        props = dict(cmd.properties or {})
        sac = not self.v310 and props.get("single-active-consumer") == "true"
        if sac and not props.get("name"):
            self.send(S.SubscribeResponse(cmd.correlation_id, Code.PRECONDITION_FAILED))
            return
        matcher = self._matcher(q, props)
        sub = Subscription(self, cmd.subscription_id, q, pos, matcher, props)
        self.send(S.SubscribeResponse(cmd.correlation_id, Code.OK))
        self.subscriptions[sub.id] = sub
        q.subscribers.append(sub)
        if sac:
            sub.group = props["name"]
            sub.active = False
            group = q.sac_groups.setdefault(sub.group, [])
            group.append(sub)
            if len(group) == 1:
                self._activate(sub)
        self.broker.mark_queue(q)

    def _activate(self, sub: Subscription) -> None:
        """Tell ``sub`` it is its group's active consumer; it starts once the client answers
        with where to start (``consumer_update``, rabbit_stream_reader
        ``maybe_send_consumer_update``)."""
        cmd = S.ConsumerUpdate(0, sub.id, True)
        self.send(cmd)
        self._consumer_updates[cmd.correlation_id] = sub

    def _consumer_update_response(self, cmd) -> None:
        sub = self._consumer_updates.pop(cmd.correlation_id, None)
        if sub is None or sub.id not in self.subscriptions:
            return
        spec = cmd.offset_spec
        if spec is not None and spec[0] != OffsetType.NONE:
            sub.pos = resolve_spec(sub.queue.log, spec)
        sub.active = True
        self.broker.mark_queue(sub.queue)

    def _matcher(self, q, props: dict):
        """4.3 filtering: ``filter.N`` values and ``match-unfiltered`` (``rabbit_stream_utils:
        filter_spec/1``); None without values or without filtering."""
        if q.log.filter_bytes is None:
            return None
        values = [v.encode() for k, v in props.items() if k.startswith("filter.")]
        if not values:
            return None
        return StreamMatcher(values, props.get("match-unfiltered") == "true", q.log.filter_bytes)

    def _credit(self, cmd) -> None:
        sub = self.subscriptions.get(cmd.subscription_id)
        if sub is None:
            # RabbitMQ answers with a credit response (correlation-less) only on this error
            self.send(S.CreditResponse(Code.SUBSCRIPTION_ID_DOES_NOT_EXIST, cmd.subscription_id))
            return
        self.broker.mark_queue(sub.queue)

    def _unsubscribe(self, cmd) -> None:
        sub = self.subscriptions.get(cmd.subscription_id)
        if sub is None:
            self.send(S.UnsubscribeResponse(cmd.correlation_id, Code.SUBSCRIPTION_ID_DOES_NOT_EXIST))
            return
        self._drop_subscription(sub)
        self.send(S.UnsubscribeResponse(cmd.correlation_id, Code.OK))

    def _drop_subscription(self, sub: Subscription) -> None:
        self.subscriptions.pop(sub.id, None)
        try:
            sub.queue.subscribers.remove(sub)
        except ValueError:
            pass
        if sub.group is not None:
            group = sub.queue.sac_groups.get(sub.group, [])
            was_first = bool(group) and group[0] is sub
            if sub in group:
                group.remove(sub)
            if not group:
                sub.queue.sac_groups.pop(sub.group, None)
            elif was_first:          # the next of the group becomes active
                nxt = group[0]
                if not nxt.conn.closed:
                    nxt.conn._activate(nxt)

    def deliver(self, sub: Subscription, header: bytes, data: bytes) -> None:
        """Send one chunk to ``sub`` (one credit): the stored header and entries."""
        log_ = sub.queue.log
        committed = log_.last_user_chunk_id() if self.deliver_v2 else None
        self.send(S.Deliver(sub.id, header + data, committed))
        sub.chunks += 1

    def stream_gone(self, q) -> None:
        """Stream ``q`` was deleted: its publishers and subscriptions on this connection are
        dropped and the client gets a metadata update STREAM_NOT_AVAILABLE
        (``rabbit_stream_reader``: ``clean_state_after_stream_deletion_or_failure``)."""
        touched = False
        for sub in [s for s in self.subscriptions.values() if s.queue is q]:
            self._drop_subscription(sub)
            touched = True
        for p in [p for p in self.publishers.values() if p.queue is q]:
            self._drop_publisher(p)
            touched = True
        if touched and not self.closed and self.sm.state is S.State.OPENED:
            self.send(S.MetadataUpdate(Code.STREAM_NOT_AVAILABLE, q.name))

    # ------------------------------------------------------------------ offsets
    def _store_offset(self, cmd) -> None:
        if not self._allowed("write", cmd.stream):
            log.warning("stream connection %s: not authorized to store offset on stream %r", self.peer, cmd.stream)
            return
        q = lookup_stream(self.vhost, cmd.stream)
        if q is None:
            return                      # fire and forget, as RabbitMQ
        q.log.store_offset(cmd.reference.encode(), cmd.offset)
        q.mark_pending()

    def _query_offset(self, cmd) -> None:
        q, code = self._readable(cmd.stream)
        if q is None:
            self.send(S.QueryOffsetResponse(cmd.correlation_id, code, 0))
            return
        off = q.log.query_offset(cmd.reference.encode())
        if off is None:
            self.send(S.QueryOffsetResponse(cmd.correlation_id, Code.NO_OFFSET, 0))
        else:
            self.send(S.QueryOffsetResponse(cmd.correlation_id, Code.OK, off))

    # ------------------------------------------------------------------ streams
    def _create_stream(self, cmd) -> None:
        if not self._allowed("configure", cmd.stream):
            code = Code.ACCESS_REFUSED
        else:
            code = create_stream(self.broker, self.vhost, cmd.stream, dict(cmd.arguments or {}), self.user)
        self.send(S.CreateStreamResponse(cmd.correlation_id, code))

    def _delete_stream(self, cmd) -> None:
        if not self._allowed("configure", cmd.stream):
            self.send(S.DeleteStreamResponse(cmd.correlation_id, Code.ACCESS_REFUSED))
            return
        self.send(S.DeleteStreamResponse(cmd.correlation_id, delete_stream(self.vhost, cmd.stream)))

    def _metadata(self, cmd) -> None:
        host, port = self.advertised()
        streams = []
        found = False
        # RabbitMQ folds an Erlang map into the answer, prepending: the streams come in
        # descending name order (rabbit_stream_core:response_body/1)
        for name in sorted(set(cmd.streams), key=lambda n: n.encode("utf-8", "surrogateescape"), reverse=True):
            q = lookup_stream(self.vhost, name)
            if q is None:
                streams.append((name, Code.STREAM_DOES_NOT_EXIST, 0xFFFF, ()))
            else:
                found = True
                streams.append((name, Code.OK, 0, ()))
        self.send(S.MetadataResponse(cmd.correlation_id, [(0, host, port)] if found else [], streams))

    def _route_or_partitions(self, resp) -> None:
        data = self.sm.send(resp)
        if self.v310:   # RabbitMQ 3.10 writes these two responses without the response bit
            data = data[:4] + bytes((data[4] & 0x7F,)) + data[5:]
        self._write(data)

    def _route(self, cmd) -> None:
        code, streams = route(self.vhost, cmd.routing_key, cmd.super_stream)
        self._route_or_partitions(S.RouteResponse(cmd.correlation_id, code, streams))

    def _partitions(self, cmd) -> None:
        code, streams = partitions(self.vhost, cmd.super_stream)
        self._route_or_partitions(S.PartitionsResponse(cmd.correlation_id, code, streams))

    # ------------------------------------------------------------------ 3.11+ (4.3 mode)
    def _exchange_command_versions(self, cmd) -> None:
        for c in cmd.commands:
            if c[0] == S.Key.DELIVER and c[2] >= 2:
                self.deliver_v2 = True
        self.send(S.ExchangeCommandVersionsResponse(cmd.correlation_id, Code.OK, COMMAND_VERSIONS))

    def _stream_stats(self, cmd) -> None:
        q, code = self._readable(cmd.stream)
        if q is None:
            self.send(S.StreamStatsResponse(cmd.correlation_id, code, {}))
            return
        lg = q.log
        last = lg.c_first[-1] if len(lg.c_first) > lg.head else -1
        stats = {"first_chunk_id": lg.first if last >= 0 else -1, "committed_chunk_id": last,
                 "last_chunk_id": last}
        self.send(S.StreamStatsResponse(cmd.correlation_id, Code.OK, stats))

    def _create_super_stream(self, cmd) -> None:
        if not (self._allowed("configure", cmd.name) and all(self._allowed("configure", p) for p in cmd.partitions)
                and self._allowed("write", cmd.name) and self._allowed("read", cmd.name)):
            code = Code.ACCESS_REFUSED
        else:
            code = create_super_stream(self.broker, self.vhost, cmd.name, list(cmd.partitions),
                                       list(cmd.binding_keys), dict(cmd.arguments or {}), self.user)
        self.send(S.CreateSuperStreamResponse(cmd.correlation_id, code))

    def _delete_super_stream(self, cmd) -> None:
        if not self._allowed("configure", cmd.name):
            self.send(S.DeleteSuperStreamResponse(cmd.correlation_id, Code.ACCESS_REFUSED))
            return
        self.send(S.DeleteSuperStreamResponse(cmd.correlation_id, delete_super_stream(self.vhost, cmd.name)))

    def _resolve_offset_spec(self, cmd) -> None:
        q, code = self._readable(cmd.stream)
        if q is None:
            self.send(S.ResolveOffsetSpecResponse(cmd.correlation_id, code))
            return
        self.send(S.ResolveOffsetSpecResponse(cmd.correlation_id, Code.OK, OffsetType.OFFSET,
                                              resolve_spec(q.log, cmd.offset_spec)))

    def _heartbeat_frame(self, cmd) -> None:
        pass


def resolve_spec(log_, spec) -> int:
    """The offset a subscription starts from for offset specification ``spec`` (osiris
    ``init_offset_reader``): first, last (the last user chunk), next, an offset (below the
    first retained: the first; beyond the end: the end) or a timestamp (ms: the first chunk
    written at or after it). The chunk holding it is delivered whole."""
    t, v = spec[0], spec[1] if len(spec) > 1 else 0
    if t == OffsetType.FIRST:
        return log_.first
    if t == OffsetType.LAST:
        return log_.last_chunk_start()
    if t == OffsetType.OFFSET:
        return min(max(v, log_.first), log_.end)
    if t == OffsetType.TIMESTAMP:
        return log_.offset_for_timestamp(v)
    return log_.end


#: ``rabbit_stream_utils:command_versions/0`` (v4.3.5), what the 4.3 mode offers
COMMAND_VERSIONS = [(k, 1, 2 if k in (S.Key.PUBLISH,) else 1) for k in (
    S.Key.DECLARE_PUBLISHER, S.Key.PUBLISH, S.Key.QUERY_PUBLISHER_SEQUENCE, S.Key.DELETE_PUBLISHER,
    S.Key.SUBSCRIBE, S.Key.CREDIT, S.Key.STORE_OFFSET, S.Key.QUERY_OFFSET, S.Key.UNSUBSCRIBE,
    S.Key.CREATE_STREAM, S.Key.DELETE_STREAM, S.Key.METADATA, S.Key.CLOSE, S.Key.HEARTBEAT, S.Key.ROUTE,
    S.Key.PARTITIONS, S.Key.STREAM_STATS, S.Key.CREATE_SUPER_STREAM, S.Key.DELETE_SUPER_STREAM,
    S.Key.RESOLVE_OFFSET_SPEC)]

_P = StreamServerProtocol
_HANDLERS = {
    S.PeerProperties: _P._peer_properties, S.SaslHandshake: _P._sasl_handshake,
    S.SaslAuthenticate: _P._sasl_authenticate, S.TuneResponse: _P._tune, S.Tune: _P._tune, S.Open: _P._open,
    S.Close: _P._close, S.CloseResponse: _P._close_response, S.Heartbeat: _P._heartbeat_frame,
    S.DeclarePublisher: _P._declare_publisher, S.DeletePublisher: _P._delete_publisher, S.Publish: _P._publish,
    S.QueryPublisherSequence: _P._query_publisher_sequence, S.Subscribe: _P._subscribe, S.Credit: _P._credit,
    S.Unsubscribe: _P._unsubscribe, S.StoreOffset: _P._store_offset, S.QueryOffset: _P._query_offset,
    S.CreateStream: _P._create_stream, S.DeleteStream: _P._delete_stream, S.Metadata: _P._metadata,
    S.Route: _P._route, S.Partitions: _P._partitions,
    S.ExchangeCommandVersions: _P._exchange_command_versions, S.StreamStats: _P._stream_stats,
    S.CreateSuperStream: _P._create_super_stream, S.DeleteSuperStream: _P._delete_super_stream,
    S.ResolveOffsetSpec: _P._resolve_offset_spec, S.ConsumerUpdateResponse: _P._consumer_update_response,
}
