"""The per-connection protocol handler: handshake, frame parsing, dispatch, heartbeats, close.

An :class:`asyncio.Protocol`. Bytes are split into frames by the codec's
:class:`spark_amqp.protocol.frames.Decoder` (0-9-1 spec §4.2.3; the same code, limits and
reply codes as the client's), in its server configuration: ``raw_content`` (a complete
``basic.publish`` comes out as one :class:`~spark_amqp.protocol.raw_publish.RawPublish` with
the exchange, routing key and the *raw* properties - decoded later only if needed - so the
publish → route → enqueue → deliver path allocates little), ``drop_oversized`` (bodies above
``max_message_size``) and ``on_content`` (503/504 for content a client may not send). Each
event is handled as the decoder reaches it (``feed(data, emit)``), so a tune-ok's frame-max or
a channel.open applies to the frames right after it in the same read. Replies and deliveries
are appended to the ``out`` bytearray and written once per event-loop tick.

Connection lifecycle (0-9-1 spec §4.2.2 and the connection class; RabbitMQ 3.10 behaviour):

- protocol header: 0-9-1, and the 0-9 / 0-8 headers (answered with a connection.start of that
  version, as RabbitMQ 3.10); anything else is answered with ``AMQP 0 0 9 1`` and the socket
  is closed;
- start / start-ok (PLAIN, AMQPLAIN; a mechanism not offered, bad credentials or a
  ``loopback_users`` user on a non-loopback address close the socket, or send 403
  ACCESS_REFUSED to clients with the authentication_failure_close capability; the reason is
  only logged) / tune / tune-ok (frame-max < 4096 or above ours, channel-max above ours → 530) /
  open (unknown vhost or no permission → 530 NOT_ALLOWED, as RabbitMQ);
- limits before authentication: frames before tune-ok carry at most 4096 bytes
  (``initial_frame_max``, caps start-ok), and the handshake must reach open-ok within
  ``handshake_timeout`` (10 s) or the socket is dropped (the listener guard's deadline,
  :mod:`.listener_guard`, with the connection limits of every listener);
- a message above ``max_message_size`` is read and dropped, then its channel is closed with
  406 PRECONDITION_FAILED (RabbitMQ 3.10 ``rabbit_channel:check_msg_size``);
- a connection method out of order: 504 CHANNEL_ERROR (the state machine's rule; RabbitMQ
  3.10 replies so once open and drops the socket silently before);
- errors: channel errors (403/404/405/406, ...) send channel.close and ignore the channel
  until close-ok; connection errors (501 frame, 502 syntax, 503 command invalid, 504
  channel error, 505 unexpected frame, 530, 540, 541) send connection.close, ignore all but
  close/close-ok, and drop the socket after close-ok or a timeout;
- heartbeats: the negotiated interval; a heartbeat is sent when nothing was sent for half of
  it; a peer silent for two intervals is dropped (the state machine's ``heartbeat_action`` /
  ``heartbeat_deadline`` decide, fed every read and write; silence while the broker does not
  read, flow control or a resource alarm, is not the peer's);
- flow control: when the transport's write buffer passes its high-water mark the connection
  stops reading from the socket and deliveries to it pause (bounded memory per connection);
- read coalescing: a small read holding only publishes on channels that wait for nothing
  (no confirms, no tx) pauses reading for 1 ms, so a client that writes one publish per
  ``send`` (pika) is read in batches instead of one event-loop iteration per message.

The handshake and close rules (protocol header, start/start-ok, tune/tune-ok, open, close and
close-ok, which connection methods may come when) are the sans-IO
:class:`spark_amqp.protocol.connection.AMQPConnection`'s in the server role (``self.sm``):
channel-0 methods are validated by it and channel-0 replies sent through it; only channel-0
methods reach it, so it costs nothing per publish or ack. This handler adds what is the
broker's: authentication, its configured limits, vhosts and permissions, timers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ..protocol import spec
from ..protocol.errors import (AMQPError, ChannelErrorCode, CommandInvalid, InternalError,
                               NotAllowed, PreconditionFailed, AccessRefused)
from ..protocol.frames import (PROTOCOL_HEADER, ContentMessage, Decoder,
                               OversizedContent, ProtocolHeader, RawPublish)
from ..protocol.connection import AMQPConnection, ConnectionState, Role
from ..protocol.server_frames import method_frame
from .auth import MECHANISMS, AuthFailure, authenticate, check_loopback
from .channel import HANDLERS, Channel
from .listener_guard import UNGUARDED
from .message import route_enc
from .rules import check_permission

__all__ = ["AMQPServerProtocol"]

log = logging.getLogger("spark_amqp.broker")
#: each connection's open, login and close, at INFO as RabbitMQ logs them; the command line's
#: terminal hides this logger unless asked (`spark-amqp broker --log-connections`)
conn_log = logging.getLogger("spark_amqp.broker.connections")

_PUBLISH = spec.Basic.Publish.INDEX
_PUBLISH_IDS = (spec.Basic.Publish.CLASS_ID, spec.Basic.Publish.METHOD_ID)
METHODS = spec.METHODS
_CONN_CLASS = 10
#: RabbitMQ's ?CLOSING_TIMEOUT (rabbit_reader.erl): how long a closed connection's socket is
#: left to the peer, at most; the negotiated heartbeat interval when shorter (and not 0).
_CLOSING_TIMEOUT = 30.0
#: RabbitMQ's ?SILENT_CLOSE_DELAY: after a framing error the socket is closed this long after
#: connection.close, close-ok or not.
_SILENT_CLOSE_DELAY = 3.0
_COALESCE_BELOW = 16384   # bytes: reads smaller than this may trigger read coalescing
_COALESCE_DELAY = 0.001   # seconds
_INITIAL_FRAME_MAX = 4096  # bytes of frame payload before tune-ok (RabbitMQ's initial_frame_max)

def _with_ids(exc: AMQPError, class_id: int, method_id: int) -> AMQPError:
    """``exc`` with the ids of the method whose handling raised it, unless it names a method
    already: the channel's handlers raise their errors without ids, the dispatcher fills them
    in (the ``class-id``/``method-id`` of channel.close / connection.close, AMQP 0-9-1
    §1.5.2.5)."""
    if not (exc.class_id or exc.method_id):
        exc.class_id, exc.method_id = class_id, method_id
    return exc


_CS = ConnectionState
_OPEN = _CS.OPEN
_CLOSING = _CS.CLOSING
#: states before the client's tune-ok: frames are limited to initial_frame_max
_PRE_TUNE = frozenset((_CS.AWAIT_HEADER, _CS.AWAIT_START, _CS.AWAIT_START_OK, _CS.AWAIT_SECURE_OK,
                       _CS.AWAIT_TUNE, _CS.AWAIT_TUNE_OK))
#: the connection's phase by state machine state: what the broker waits for ("start-ok" also
#: while it authenticates, "open" also while it checks the vhost), "opened", "closing" (it
#: sent connection.close) or "closed" (close handshake done, or the client's close answered)
_PHASE = {
    _CS.AWAIT_HEADER: "header", _CS.AWAIT_START: "start-ok", _CS.AWAIT_START_OK: "start-ok",
    _CS.AWAIT_SECURE_OK: "start-ok", _CS.AWAIT_TUNE: "start-ok", _CS.AWAIT_TUNE_OK: "tune-ok",
    _CS.AWAIT_OPEN: "open", _CS.AWAIT_OPEN_OK: "open", _OPEN: "opened", _CLOSING: "closing",
    _CS.CLOSE_RECEIVED: "closed", _CS.CLOSED: "closed",
}


class AMQPServerProtocol(asyncio.Protocol):
    """One client connection. ``broker`` is the owning :class:`~.server.Broker`.

    ``admission``: the listener guard's :class:`~.listener_guard.Admission` of the socket (its
    handshake deadline ends at connection.open-ok); a no-op without a guard."""

    admission = UNGUARDED

    def __init__(self, broker):
        self.broker = broker
        self.loop = broker.loop
        self.transport = None
        self.peer = "?"
        self._head = b""  # the protocol header's first bytes, while it is incomplete
        self.out = bytearray()
        self.dirty = False
        self.writable = True
        self.reading_paused = False
        self.blocked_by_alarm = False
        self.channels: dict[int, Channel] = {}
        #: publisher confirms (:class:`.confirms.PublisherConfirms`) to send at the next flush
        self.confirm_channels: set = set()
        cfg = broker.config
        self.frame_max = cfg.frame_max or 131072
        self.channel_max = cfg.channel_max or 65535
        self.user: str | None = None
        self.local_address: str | None = None  # the server-side address (loopback_users)
        self.vhost = None
        self.capabilities: dict[str, Any] = {}
        self.client_properties: dict[str, Any] = {}
        self.exclusive_queues: list = []
        self.write_ok: set[str] = set()
        self.perm = None
        self.published = False
        self.only_publishes = False
        self._hb_timer = None
        self._close_timer = None
        self.closed = False
        #: the handshake and close rules (sans-IO, server role); see _on_connection_method.
        #: The connection's phase is its state (see ``state``).
        self.sm = AMQPConnection(Role.SERVER, min_frame_max=cfg.behaviour.min_frame_max)
        self.decoder: Decoder | None = None
        self._new_decoder()

    @property
    def state(self) -> str:
        """The connection's phase, derived from the state machine's
        :class:`~spark_amqp.protocol.connection.ConnectionState` (read-only): "header",
        "start-ok", "tune-ok", "open" (waiting for connection.open), "opened", "closing",
        "closed" (the management API shows "running" for "opened")."""
        return _PHASE[self.sm.state]

    @property
    def heartbeat(self) -> int:
        """The negotiated heartbeat interval in seconds (connection.tune-ok; 0 = none)."""
        return self.sm.heartbeat

    # ================================================================== asyncio callbacks
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        local = transport.get_extra_info("sockname")
        self.local_address = local[0] if isinstance(local, tuple) and local else None
        transport.set_write_buffer_limits(high=self.broker.config.write_buffer_limit)
        self.broker.connections.add(self)
        conn_log.info("accepting AMQP connection from %s", self.peer)
        # RabbitMQ's handshake_timeout is the listener guard's (Broker.listen): it runs until
        # connection.open-ok (self.admission.handshake_done()), then heartbeats take over

    def connection_lost(self, exc) -> None:
        if self.user is not None and self.state not in ("closed", "closing"):
            log.warning("client %s (user %r) closed the socket without connection.close", self.peer, self.user)
        self._cleanup()
        conn_log.info("closed AMQP connection from %s", self.peer)

    def pause_writing(self) -> None:
        self.writable = False
        for ch in self.channels.values():
            ch.can_deliver = False
        self._pause_reading()

    def resume_writing(self) -> None:
        self.writable = True
        for ch in self.channels.values():
            ch.can_deliver = ch.flow_active
            for c in ch.consumers.values():
                self.broker.mark_queue(c.queue)
        if not self.blocked_by_alarm:
            self._resume_reading()
        self.broker.kick()

    def _pause_reading(self) -> None:
        if not self.reading_paused and self.transport is not None and not self.closed:
            self.reading_paused = True
            try:
                self.transport.pause_reading()
            except Exception:
                pass

    def _resume_reading(self) -> None:
        if self.reading_paused and self.transport is not None and not self.closed:
            self.reading_paused = False
            try:
                self.transport.resume_reading()
            except Exception:
                pass

    # ================================================================== output
    def mark_dirty(self) -> None:
        if not self.dirty:
            self.dirty = True
            self.broker.mark_conn(self)

    def send_method(self, channel: int, method) -> None:
        if channel:
            self.out += method_frame(channel, method)
        else:  # connection methods: the state machine checks and follows the handshake
            try:
                self.out += self.sm.send_method(0, method)
            except AMQPError as exc:  # a bug here; the peer still gets the method
                log.error("connection %s: sending %s: %s", self.peer, method.NAME, exc)
                self.out += method_frame(0, method)
        if not self.dirty:
            self.mark_dirty()

    def flush(self) -> None:
        """Write everything buffered (called by the broker once per tick)."""
        self.dirty = False
        if self.confirm_channels:
            pending, self.confirm_channels = self.confirm_channels, set()
            for confirms in pending:
                confirms.flush()
        out = self.out
        if out and self.transport is not None and not self.closed:
            self.out = bytearray()
            self.transport.write(out)
            self.sm.note_sent()
        elif out:
            self.out = bytearray()

    # ================================================================== input
    def data_received(self, data: bytes) -> None:
        self.sm.note_received()
        if self.closed:
            return
        broker = self.broker
        # run the broker's tick inline at the end of this read instead of scheduling it: one
        # event-loop iteration per read (mark_* calls see _scheduled set and do not schedule)
        was_scheduled = broker._scheduled
        broker._scheduled = True
        try:
            self._received(data)
        finally:
            if not was_scheduled:
                broker._scheduled = False
                broker._tick()

    def _received(self, data: bytes) -> None:
        self.only_publishes = True
        if self.sm.state is _CS.AWAIT_HEADER:
            # refuse at once what cannot become "AMQP", before all 8 header bytes are in
            head = self._head = (self._head + bytes(data[:8]))[:8]
            if head[:4] != b"AMQP"[:min(len(head), 4)]:
                self._bad_header(head)
                return
        try:
            self.decoder.feed(data, self._on_event, self._on_method)
        except AMQPError as exc:
            self.connection_error(exc)
            self._new_decoder()  # the stream cannot be resynchronised: start afresh
            return
        except _Stopped:  # the connection closed while its frames were dispatched
            return
        except Exception as exc:  # a bug: never take the broker down for one connection
            log.exception("internal error on connection %s", self.peer)
            self.connection_error(InternalError(f"internal error: {type(exc).__name__}: {exc}"))
            self._new_decoder()
            return
        if self.published and self.broker.blocked and not self.blocked_by_alarm:
            self.block()
        elif self.only_publishes and len(data) < _COALESCE_BELOW and self.published and not self.reading_paused:
            # A client writing one publish per send (pika) costs one loop iteration per
            # message. When a small read held nothing but publishes on channels that wait
            # for nothing (no confirms, no tx), pause reading for a millisecond so the next
            # read carries a batch. Nothing is waiting on a reply from us meanwhile.
            if not any(ch.confirms.enabled or ch.tx for ch in self.channels.values()):
                self._pause_reading()
                self.loop.call_later(_COALESCE_DELAY, self._coalesce_resume)

    def _coalesce_resume(self) -> None:
        if self.writable and not self.blocked_by_alarm:
            self._resume_reading()

    def _new_decoder(self) -> None:
        """A decoder for what follows (the first one, or after a framing error: the bytes
        after a connection.close are parsed from a frame boundary, as RabbitMQ does)."""
        header = self.decoder is None
        # before tune-ok, frames carry at most RabbitMQ's initial_frame_max (4096-byte
        # payload), which also caps connection.start-ok (RabbitMQ 3.10.8 drops the socket
        # for a larger one); then the negotiated frame-max
        # (RabbitMQ 4.1+: initial_frame_max defaults to FRAME_MIN_SIZE, 8192, rabbit_reader at v4.3.0)
        fm = self.broker.config.behaviour.initial_frame_max + 8 if self.sm.state in _PRE_TUNE else self.frame_max
        self.decoder = Decoder(frame_max=fm, expect_protocol_header=header,
                               max_body_size=self.broker.config.max_message_size,
                               raw_content=True, drop_oversized=True,
                               on_content=self._on_content_method)

    def _on_event(self, ev) -> None:
        """Act on one decoded event (``Decoder.feed``'s ``emit``: called frame by frame, so
        that a method takes effect before the frames after it are checked)."""
        t = ev.__class__
        if t is RawPublish:  # the hot path: a whole publish, properties raw
            ch = self.channels.get(ev.channel)
            if ch is None:
                self._on_content_method(ev.channel, spec.Basic.Publish)
            elif not ch.closing:
                try:
                    ch.on_publish(ev.exchange, ev.routing_key, ev.mandatory, ev.immediate,
                                  ev.enc, ev.properties, ev.body)
                except AMQPError as exc:
                    _with_ids(exc, *_PUBLISH_IDS)
                    if exc.connection_level:
                        raise
                    self.channel_error(ch, exc)
            return
        if t is ContentMessage:  # a publish in several pieces (the general path)
            m = ev.method
            ch = self.channels.get(ev.channel)
            if ch is None or ch.closing:
                return
            try:
                ch.on_publish(m.exchange, m.routing_key, m.mandatory, m.immediate,
                              route_enc(m.exchange, m.routing_key), ev.properties, ev.body)
            except AMQPError as exc:
                _with_ids(exc, *_PUBLISH_IDS)
                if exc.connection_level:
                    raise
                self.channel_error(ch, exc)
            return
        if t is OversizedContent:
            self._too_large(ev.channel, ev.body_size)
            return
        if t is ProtocolHeader:
            self._on_header(ev.raw)
            if self.closed:
                raise _Stopped
        # Heartbeat: nothing to do (data_received notes every read to the state machine)

    def _on_content_method(self, chan: int, method) -> None:
        """``Decoder(on_content=...)``: a content method starts (not complete in the read).
        Clients may only send basic.publish, on an open channel (RabbitMQ 3.10 replies)."""
        if method.INDEX != _PUBLISH:
            raise CommandInvalid(f"{method.NAME} may not be sent by a client", method.CLASS_ID, method.METHOD_ID)
        if chan == 0:
            raise ChannelErrorCode("basic.publish on channel 0", method.CLASS_ID, method.METHOD_ID)
        if chan not in self.channels:
            raise ChannelErrorCode(f"expected 'channel.open' on channel {chan}", method.CLASS_ID, method.METHOD_ID)

    def _too_large(self, chan: int, size: int) -> None:
        """A message above ``max_message_size`` was read (and dropped): 406 on its channel, as
        RabbitMQ 3.10 ``rabbit_channel:check_msg_size`` ("message size N is larger than
        configured max size M")."""
        ch = self.channels.get(chan)
        if ch is None or ch.closing:
            return
        limit = self.broker.config.max_message_size
        self.channel_error(ch, PreconditionFailed(
            f"message size {size} is larger than configured max size {limit}", *_PUBLISH_IDS))

    def _publish(self, chan: int, c: list, body: bytes) -> None:
        ch = self.channels.get(chan)
        if ch is None or ch.closing:
            return
        try:
            ch.on_publish(c[0], c[1], bool(c[2]), bool(c[3]), c[4], c[5], body)
        except AMQPError as exc:
            _with_ids(exc, *_PUBLISH_IDS)
            if exc.connection_level:
                raise
            self.channel_error(ch, exc)

    # ================================================================== handshake
    def _bad_header(self, raw: bytes) -> None:
        log.warning("connection %s sent an unsupported protocol header %r; answered AMQP 0-9-1", self.peer, bytes(raw[:8]))
        self.transport.write(PROTOCOL_HEADER)
        self._close_transport()

    def _on_header(self, raw: bytes) -> None:
        # RabbitMQ 3.10 answers 0-9 (AMQP 1 1 0 9) and 0-8 (AMQP 1 1 8 0 / 1 1 9 1) headers with a
        # connection.start of that version (checked on the real broker); the methods this broker
        # then accepts are 0-9-1's, which 0-8/0-9 clients use for everything common.
        header = self.sm.receive_header(ProtocolHeader(raw), accept_0_8=True)
        if header.__class__ is not ProtocolHeader:  # ProtocolHeaderRejected
            self._bad_header(raw)
            return
        major, minor = (8, 0) if header.version == "0-8" else (0, 9)
        from .._version import __version__
        props = {
            "product": "spark-amqp embedded broker", "version": __version__,
            "platform": "Python/asyncio", "copyright": "spark-amqp contributors",
            "information": "AMQP 0-9-1 embedded broker; https://www.rabbitmq.com/amqp-0-9-1-reference.html semantics",
            "cluster_name": "spark-amqp@localhost",
            # not a RabbitMQ key: lets spark-amqp clients learn the limit (client/broker_limits.py)
            "max_message_size": self.broker.config.max_message_size,
            "capabilities": {
                "publisher_confirms": True, "exchange_exchange_bindings": True, "basic.nack": True,
                "consumer_cancel_notify": True, "connection.blocked": True,
                "consumer_priorities": True, "authentication_failure_close": True,
                "per_consumer_qos": True, "direct_reply_to": True,
            },
        }
        self.send_method(0, spec.Connection.Start(version_major=major, version_minor=minor, server_properties=props,
                                                  mechanisms=self.mechanisms, locales=b"en_US"))

    #: SASL mechanisms offered in connection.start (space-separated, AMQP 0-9-1 §1.4.2.1).
    mechanisms = MECHANISMS

    def _authenticate(self, mechanism: str, response: bytes) -> str:
        """The user name for a start-ok; raises :class:`AuthFailure`. Listeners that offer
        more mechanisms (TLS: EXTERNAL) override this."""
        return authenticate(self.broker.config, mechanism, response)

    def _on_connection_method(self, method) -> None:
        """A connection-class method on channel 0. The negotiation order and the close
        handshake are :class:`~spark_amqp.protocol.connection.AMQPConnection`'s (server
        role): a method out of order raises its 504 (RabbitMQ 3.10: "unexpected method in
        connection state ..."), a frame to discard while closing returns False; this method
        adds what is the broker's: authentication, its limits, vhosts and permissions."""
        if not self.sm.receive_method(0, method):
            return
        idx = method.INDEX
        if idx == spec.Connection.Close.INDEX:
            self.send_method(0, spec.Connection.CloseOk())
            self.flush()
            conn_log.info("client %s closed the connection (%s %s)", self.peer, method.reply_code, method.reply_text)
            self._leave_socket_to_client()
            return
        if idx == spec.Connection.CloseOk.INDEX:
            self._close_transport()
            return
        if idx == spec.Connection.StartOk.INDEX:
            self.client_properties = method.client_properties or {}
            caps = self.client_properties.get("capabilities") or {}
            self.capabilities = caps if isinstance(caps, dict) else {}
            mech = method.mechanism
            if mech.encode() not in self.mechanisms.split():
                log.warning("connection %s: mechanism %r not offered; closing", self.peer, mech)
                self._close_transport()
                return
            try:
                user = self._authenticate(mech, method.response)
                check_loopback(self.broker.config, user, self.local_address, mech)
            except AuthFailure as exc:
                # RabbitMQ logs the reason, tells the client only that the login was refused
                log.warning("connection %s: %s login refused: %s", self.peer, mech, exc)
                if self.capabilities.get("authentication_failure_close"):
                    self.connection_error(AccessRefused(exc.client_text or str(exc), method.CLASS_ID, method.METHOD_ID))
                else:
                    self._close_transport()
                return
            self.user = user
            cfg = self.broker.config
            self.send_method(0, spec.Connection.Tune(channel_max=cfg.channel_max, frame_max=cfg.frame_max,
                                                     heartbeat=cfg.heartbeat))
            return
        if idx == spec.Connection.TuneOk.INDEX:
            # the state machine refused values above our tune (0 = "no limit" is above any
            # limit, RabbitMQ 3.10) or a frame_max below 4096 with 530 NOT_ALLOWED
            fm = method.frame_max or (1 << 32)
            cm = method.channel_max or (1 << 16)
            self.frame_max = fm
            self.decoder.set_frame_max(fm)  # from the next frame on, even in this read
            self.channel_max = cm
            return
        if idx == spec.Connection.Open.INDEX:
            vname = method.virtual_host
            v = self.broker.vhosts.get(vname)
            if v is None:
                raise NotAllowed(f"vhost {vname} not found", method.CLASS_ID, method.METHOD_ID)
            limit = self.broker.config.max_connections
            if limit and sum(1 for c in self.broker.connections if c.sm.state is _OPEN) >= limit:
                # RabbitMQ's wording for its per-vhost max-connections limit
                raise NotAllowed(f"access to vhost '{vname}' refused for user '{self.user}': "
                                 f"connection limit ({limit}) is reached", method.CLASS_ID, method.METHOD_ID)
            perm = self.broker.config.permission(self.user, vname)
            if perm is None:
                raise NotAllowed(f"access to vhost '{vname}' refused for user '{self.user}'", method.CLASS_ID, method.METHOD_ID)
            self.vhost = v
            self.perm = perm
            self.send_method(0, spec.Connection.OpenOk())
            self.admission.handshake_done()
            self._arm_heartbeat(time.monotonic())
            conn_log.info("connection %s: user '%s' authenticated and granted access to vhost '%s'", self.peer, self.user, vname)
            return
        if idx == spec.Connection.UpdateSecret.INDEX:
            # RabbitMQ extension (token refresh). RabbitMQ's internal auth backend does not check
            # the new secret against the user's password: its update_state accepts it, the
            # reader answers update-secret-ok and the connection and its channels stay open
            # (rabbit_reader handle_method0 connection.update_secret; seen on RabbitMQ 3.10.8).
            conn_log.info("connection %s (user '%s') updated secret, reason: %s", self.peer, self.user,
                     method.reason)
            self.send_method(0, spec.Connection.UpdateSecretOk())
            return
        # the state machine lets nothing else through (update-secret-ok, secure-ok: 504 there)
        raise ChannelErrorCode(f"unexpected method in connection state {self.state}: {method.NAME}",
                               method.CLASS_ID, method.METHOD_ID)

    # ================================================================== dispatch
    def _on_method(self, chan: int, method) -> None:
        """A method without content (``Decoder.feed``'s ``emit_method``, frame by frame)."""
        self.only_publishes = False
        cid = method.CLASS_ID
        if chan == 0:
            if cid != _CONN_CLASS:
                raise ChannelErrorCode(f"{method.NAME} on channel 0", cid, method.METHOD_ID)
            self._on_connection_method(method)
            if self.closed:
                raise _Stopped
            return
        st = self.sm.state
        if st is not _OPEN:
            if st is _CLOSING:
                return
            # the state machine's 504 ("channels ... after open-ok")
            self.sm.receive_method(chan, method)
            raise CommandInvalid(f"{method.NAME} before the connection was opened", cid, method.METHOD_ID)
        if cid == _CONN_CLASS:
            raise CommandInvalid(f"{method.NAME} on channel {chan}; connection methods use channel 0",
                                 cid, method.METHOD_ID)
        ch = self.channels.get(chan)
        idx = method.INDEX
        if ch is None:
            if idx == spec.Channel.Open.INDEX:
                # RabbitMQ 3.10 enforces channel_max as a count of open channels, not as a
                # bound on the channel number (checked on the real broker)
                if len(self.channels) >= self.channel_max:
                    raise NotAllowed(f"number of channels opened ({len(self.channels)}) has reached the "
                                     f"negotiated channel_max ({self.channel_max})", method.CLASS_ID, method.METHOD_ID)
                ch = Channel(self, chan)
                self.channels[chan] = ch
                self.send_method(chan, spec.Channel.OpenOk())
                return
            raise ChannelErrorCode(f"expected 'channel.open' on channel {chan}, got {method.NAME}", cid, method.METHOD_ID)
        if ch.closing:
            if idx == spec.Channel.CloseOk.INDEX:
                del self.channels[chan]
            elif idx == spec.Channel.Close.INDEX:
                self.send_method(chan, spec.Channel.CloseOk())
                del self.channels[chan]
            return
        if idx == spec.Channel.Close.INDEX:
            ch.closing = True
            ch.shutdown()
            del self.channels[chan]
            self.send_method(chan, spec.Channel.CloseOk())
            return
        if idx == spec.Channel.Open.INDEX:
            raise ChannelErrorCode(f"second 'channel.open' seen on channel {chan}", method.CLASS_ID, method.METHOD_ID)
        if idx == spec.Channel.CloseOk.INDEX:
            # RabbitMQ 3.10: 503 "unimplemented method" for a close-ok that answers nothing
            raise CommandInvalid("channel.close-ok without a channel.close", method.CLASS_ID, method.METHOD_ID)
        h = HANDLERS.get(idx)
        if h is None:
            raise CommandInvalid(f"{method.NAME} may not be sent by a client", cid, method.METHOD_ID)
        try:
            h(ch, method)
        except AMQPError as exc:
            _with_ids(exc, method.CLASS_ID, method.METHOD_ID)
            if exc.connection_level:
                raise
            self.channel_error(ch, exc)

    # ================================================================== errors / close
    def check_perm(self, kind: str, what: str, name: str, cid: int, mid: int) -> None:
        """RabbitMQ-style permission check (:func:`.rules.check_permission`); raises 403
        ACCESS_REFUSED. Full permissions (".*" x3) skip the regexes (hot path)."""
        perm = self.perm
        if perm is not None and perm.configure == perm.write == perm.read == ".*":
            return
        check_permission(perm, self.user, self.vhost.name, kind, what, name, cid, mid)

    def channel_error(self, ch: Channel, exc: AMQPError) -> None:
        """Close channel ``ch`` with ``exc``'s code (a soft error)."""
        log.info("channel %d on %s: %s", ch.number, self.peer, exc)
        ch.shutdown()
        ch.closing = True
        ch.confirms.drop()
        self.send_method(ch.number, spec.Channel.Close(reply_code=exc.reply_code, reply_text=_text(exc),
                                                       class_id=exc.class_id, method_id=exc.method_id))

    def connection_error(self, exc: AMQPError) -> None:
        """Send connection.close with ``exc``'s code; wait for close-ok (or a timeout)."""
        phase = self.state
        if self.closed or phase in ("closing", "closed"):
            return
        log.log(logging.INFO if exc.reply_code == 320 else logging.WARNING, "closing connection %s: %s", self.peer, exc)
        if phase == "header":
            self._close_transport()
            return
        self._teardown_channels()
        self.send_method(0, spec.Connection.Close(reply_code=exc.reply_code, reply_text=_text(exc),
                                                  class_id=exc.class_id, method_id=exc.method_id))
        self.flush()
        # A framing error (501) leaves the byte stream unparseable, so a close-ok may never be
        # recognised: RabbitMQ's fatal_frame_error closes after ?SILENT_CLOSE_DELAY (3 s).
        wait = _SILENT_CLOSE_DELAY if exc.reply_code == 501 else self.closing_timeout()
        self._close_timer = self.loop.call_later(wait, self._abort)

    def close_by_server(self, code: int = 320, text: str = "CONNECTION_FORCED - broker shutdown") -> None:
        """Close the connection from the broker side (shutdown): 320 CONNECTION_FORCED."""
        from ..protocol.errors import ConnectionForced
        if self.sm.state is _OPEN:
            self.connection_error(ConnectionForced(text))
        else:
            self._abort()

    def block(self) -> None:
        """Resource alarm (memory or disk): stop reading from this publishing connection; tell
        capable clients why (connection.blocked reason "low on memory" / "low on disk")."""
        if self.blocked_by_alarm:
            return
        self.blocked_by_alarm = True
        if self.capabilities.get("connection.blocked") and self.sm.state is _OPEN:
            self.send_method(0, spec.Connection.Blocked(reason=self.broker.block_reason or "low on memory"))
            self.flush()
        self._pause_reading()

    def unblock(self) -> None:
        if not self.blocked_by_alarm:
            return
        self.blocked_by_alarm = False
        if self.capabilities.get("connection.blocked") and self.sm.state is _OPEN:
            self.send_method(0, spec.Connection.Unblocked())
        if self.writable:
            self._resume_reading()

    def _arm_heartbeat(self, now: float) -> None:
        """Time the next heartbeat check at the state machine's deadline (none: heartbeats off)."""
        delay = self.sm.heartbeat_deadline(now)
        if delay is not None:
            self._hb_timer = self.loop.call_later(delay, self._heartbeat_tick)

    def _heartbeat_tick(self) -> None:
        self._hb_timer = None
        if self.closed:
            return
        sm = self.sm
        now = time.monotonic()
        if self.reading_paused:
            # we stopped reading (flow control / memory alarm): the peer is not to blame
            sm.note_received(now)
        action = sm.heartbeat_action(now)
        if action == "dead":
            log.warning("missed heartbeats from client %s, timeout: %ds", self.peer, sm.heartbeat)
            self._abort()
            return
        if action == "send" and self.transport is not None:
            self.transport.write(sm.send_heartbeat(now))
        self._arm_heartbeat(now)

    def _teardown_channels(self) -> None:
        for ch in list(self.channels.values()):
            if not ch.closing:
                ch.closing = True
                ch.shutdown()
        self.confirm_channels.clear()

    def closing_timeout(self) -> float:
        """Seconds a closing connection waits for its peer: for ``close-ok`` after the broker
        sent ``connection.close``, and for the peer to close its socket after the broker sent
        ``close-ok``. RabbitMQ's rule (rabbit_reader ``close_connection``): the negotiated
        heartbeat interval if it is 1–29 s, else 30 s (measured on RabbitMQ 3.10.8: 2.0 s with
        heartbeat 2, 30.0 s with heartbeat 0)."""
        hb = self.heartbeat
        return float(hb) if 0 < hb < _CLOSING_TIMEOUT else _CLOSING_TIMEOUT

    def _leave_socket_to_client(self) -> None:
        """After ``close-ok`` to a client's ``connection.close``: the connection is closed (its
        channels, consumers and exclusive queues are gone, further bytes are ignored), but the
        TCP close is the client's, as in RabbitMQ, so that asyncio clients finish their own
        close handshake before they see end-of-file. A client that never closes its socket has
        it closed for it after :meth:`closing_timeout`."""
        self._cleanup()
        if self.transport is None:
            return
        self.broker.lingering.add(self)
        self._close_timer = self.loop.call_later(self.closing_timeout(), self._abort)

    def _close_transport(self) -> None:
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()
            self._cleanup()

    def _abort(self) -> None:
        self.broker.lingering.discard(self)
        if self.transport is not None:
            self.closed = True
            self.transport.abort()
            self._cleanup()

    def _cleanup(self) -> None:
        self.closed = True
        self.broker.lingering.discard(self)
        if self._hb_timer is not None:
            self._hb_timer.cancel()
            self._hb_timer = None
        if self._close_timer is not None:
            self._close_timer.cancel()
            self._close_timer = None
        if self not in self.broker.connections:
            return
        self.broker.connections.discard(self)
        self._teardown_channels()
        self.channels.clear()
        for q in list(self.exclusive_queues):
            q.vhost.delete_queue(q)
        self.exclusive_queues = []
        self.broker.kick()


class _Stopped(Exception):
    """Raised out of ``Decoder.feed`` when the connection closed while its frames were being
    dispatched: the rest of the read is not parsed."""




def _text(exc: AMQPError) -> str:
    """RabbitMQ-style reply text: ``NAME - detail`` (at most 255 bytes)."""
    t = exc.reply_text
    if not t.startswith(exc.name):
        t = f"{exc.name} - {t}"
    b = t.encode("utf-8")
    if len(b) > 255:
        t = b[:252].decode("utf-8", "ignore") + "..."
    return t
