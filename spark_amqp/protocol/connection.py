"""Sans-IO AMQP 0-9-1 connection and channel state machines, for both roles (like h11).

One :class:`AMQPConnection` per transport connection. The caller owns the socket: it feeds
received bytes to :meth:`AMQPConnection.receive_data` and writes the bytes returned by
:meth:`~AMQPConnection.send_method`, :meth:`~AMQPConnection.send_message` and
:meth:`~AMQPConnection.send_heartbeat`. The same object works as a client
(``Role.CLIENT``) or as a server (``Role.SERVER``); both see the same events
(:class:`~spark_amqp.protocol.frames.MethodFrame`,
:class:`~spark_amqp.protocol.frames.ContentMessage`,
:class:`~spark_amqp.protocol.frames.Heartbeat`,
:class:`~spark_amqp.protocol.frames.ProtocolHeader`, and :class:`ProtocolHeaderRejected`).

What it checks (and the reply code it raises, as :mod:`~spark_amqp.protocol.errors` types):

* the negotiation order start → start-ok → (secure → secure-ok)* → tune → tune-ok → open →
  open-ok (0-9-1 spec §2.2.4, §4.2.2); a connection method out of order → 504 CHANNEL_ERROR
  ("unexpected method in connection state …", what RabbitMQ 3.10 replies; checked on the
  real broker);
* tune-ok values: channel-max/frame-max above the server's tune, or frame-max below 4096 →
  530 NOT_ALLOWED (RabbitMQ's ``rabbit_reader`` rejects the negotiation with not_allowed);
  the negotiated frame-max is applied to the decoder;
* who may send what: a method the sender's role never sends (e.g. ``basic.deliver`` from a
  client, ``channel.open-ok`` from a client) → 503 COMMAND_INVALID (RabbitMQ 3.10 replies
  ``503 COMMAND_INVALID - unimplemented method``; checked), except connection-class methods
  on channel 0 (e.g. ``connection.tune`` from a client) → 504, as RabbitMQ checks the
  connection state first; a connection method on a channel other than 0 → 503 (RabbitMQ:
  same reply); a channel-class method on channel 0 → 504 (RabbitMQ: "unexpected method in
  connection state running");
* channels: a method on a channel that is not open → 504 ("expected 'channel.open'" in
  RabbitMQ); ``channel.open`` on an open channel → 504 ("second 'channel.open' seen");
  ``channel.open`` on a channel number above the negotiated channel-max → 530 NOT_ALLOWED
  (RabbitMQ 3.10 does not check the number itself but closes with 530 "number of channels
  opened (N) has reached the negotiated channel_max (M)"; numbers 1..channel-max make the
  two rules equivalent);
* close handshakes (spec §2.2.4 / §4.2.6 rules on ``close``): after sending
  ``connection.close`` every frame except ``connection.close``/``close-ok`` is discarded;
  after sending ``channel.close`` every frame of that channel except ``channel.close`` /
  ``close-ok`` is discarded; after receiving a close, only the matching ``close-ok`` may be
  sent; an unsolicited ``close-ok`` → 503 (channel) / 504 (connection), as RabbitMQ replies;
* content framing (out-of-order header/body frames → 505 UNEXPECTED_FRAME) and malformed
  frames (501/502) are detected by :class:`~spark_amqp.protocol.frames.Decoder`.

Errors found in *received* data are raised from :meth:`~AMQPConnection.receive_data`; the
events decoded before the offending one are attached to the exception as ``.events``. The
application then answers with :func:`close_method_for` (a ``connection.close`` for hard
errors, a ``channel.close`` for soft ones). Errors in what the application tries to *send*
raise the same typed errors from the ``send_*`` methods without changing any state.

Heartbeats (spec §4.2.7, rabbitmq.com/docs/heartbeats): the negotiated interval is in
seconds; :meth:`~AMQPConnection.heartbeat_action` (the caller passes a monotonic ``now``)
says ``"send"`` when nothing has been sent for half the interval (RabbitMQ's sender does the
same) and ``"dead"`` when nothing at all has been received for two intervals;
:meth:`~AMQPConnection.heartbeat_deadline` says when to ask next. A caller that frames bytes
itself reports traffic with :meth:`~AMQPConnection.note_received` /
:meth:`~AMQPConnection.note_sent`.
"""

from __future__ import annotations

import enum
import time
from typing import Any

from . import spec
from .errors import (AMQPError, ChannelErrorCode, CommandInvalid, NotAllowed, error_for_code)
from .frames import (FRAME_MIN_SIZE, HEARTBEAT_FRAME, PROTOCOL_HEADER, ContentMessage, Decoder,
                     Heartbeat, MethodFrame, ProtocolHeader, encode_message, encode_method)
from .raw_deliveries import RawDeliveries
from .spec import Method

__all__ = [
    "Role", "ConnectionState", "ChannelState", "AMQPConnection", "ChannelInfo",
    "ProtocolHeaderRejected", "close_method_for", "error_from_close", "SENDERS",
]


class Role(enum.Enum):
    """Which end of the connection this state machine is."""

    CLIENT = "client"
    SERVER = "server"


class ConnectionState(enum.Enum):
    """Connection states; each names what the connection waits for next.

    ``AWAIT_HEADER``: the client has not called :meth:`AMQPConnection.initiate` / the server
    has not received the protocol header. ``AWAIT_START``: the server must send
    ``connection.start``. ``AWAIT_START_OK``, ``AWAIT_SECURE_OK``: the client must answer.
    ``AWAIT_TUNE``: the server must send ``secure`` or ``tune``. ``AWAIT_TUNE_OK``,
    ``AWAIT_OPEN``: the client must send. ``AWAIT_OPEN_OK``: the server must answer.
    ``OPEN``: channels may be used. ``CLOSING``: this side sent ``connection.close`` and
    waits for ``close-ok``. ``CLOSE_RECEIVED``: the peer sent ``connection.close``; this side
    must send ``close-ok``. ``CLOSED``: finished (also after a rejected protocol header).
    """

    AWAIT_HEADER = "await-header"
    AWAIT_START = "await-start"
    AWAIT_START_OK = "await-start-ok"
    AWAIT_SECURE_OK = "await-secure-ok"
    AWAIT_TUNE = "await-tune"
    AWAIT_TUNE_OK = "await-tune-ok"
    AWAIT_OPEN = "await-open"
    AWAIT_OPEN_OK = "await-open-ok"
    OPEN = "open"
    CLOSING = "closing"
    CLOSE_RECEIVED = "close-received"
    CLOSED = "closed"


class ChannelState(enum.Enum):
    """Channel states. ``OPENING``: ``channel.open`` sent, ``open-ok`` not yet. ``CLOSING``:
    this side sent ``channel.close``. ``CLOSE_RECEIVED``: the peer sent ``channel.close``;
    this side must send ``close-ok``. ``CLOSED``: not open (never opened or finished)."""

    OPENING = "opening"
    OPEN = "open"
    CLOSING = "closing"
    CLOSE_RECEIVED = "close-received"
    CLOSED = "closed"


class ProtocolHeaderRejected:
    """Event (server role): the client sent a protocol header this server does not speak.

    Per the 0-9-1 spec §4.2.2 the server must write ``reply`` (its own protocol header,
    ``AMQP 0 0 9 1``) and then close the socket; no ``connection.close`` is exchanged.
    RabbitMQ 3.10 does exactly that for unknown headers (checked on the real broker).
    ``header`` is the :class:`~spark_amqp.protocol.frames.ProtocolHeader` received.
    """

    __slots__ = ("header",)
    reply = PROTOCOL_HEADER

    def __init__(self, header: ProtocolHeader):
        self.header = header

    def __repr__(self) -> str:
        return f"ProtocolHeaderRejected({self.header!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProtocolHeaderRejected) and self.header == other.header


# ------------------------------------------------------------------------ who sends what

_BOTH = frozenset((Role.CLIENT, Role.SERVER))
_C = frozenset((Role.CLIENT,))
_S = frozenset((Role.SERVER,))
# Methods either peer may send (0-9-1 "Method accepted by" lines [002], RabbitMQ extensions
# from [004]: server-sent basic.cancel = consumer cancel notification, basic.ack/nack from the
# server = publisher confirms).
_BOTH_NAMES = {
    "connection.close", "connection.close-ok", "channel.flow", "channel.flow-ok",
    "channel.close", "channel.close-ok", "basic.cancel", "basic.cancel-ok", "basic.ack",
    "basic.nack",
}
_SERVER_NAMES = {
    "connection.start", "connection.secure", "connection.tune", "connection.blocked",
    "connection.unblocked", "basic.return", "basic.deliver", "basic.get-empty",
}


_CLIENT_OK_NAMES = {"connection.start-ok", "connection.secure-ok", "connection.tune-ok"}


def _senders(cls: type) -> frozenset:
    name = cls.NAME
    if name in _BOTH_NAMES:
        return _BOTH
    if name in _CLIENT_OK_NAMES:
        return _C
    if name in _SERVER_NAMES or name.endswith("-ok"):
        return _S
    return _C


SENDERS: dict[int, frozenset] = {idx: _senders(cls) for idx, cls in spec.METHODS.items()}
"""``method INDEX -> frozenset of Roles`` allowed to send it (see the module docstring)."""

_CONN_CLASS = 10
_CHANNEL_CLASS = 20
_IDX = {name: cls.INDEX for name, cls in spec.METHODS_BY_NAME.items()}
_I_CH_OPEN = _IDX["channel.open"]
_I_CH_OPEN_OK = _IDX["channel.open-ok"]
_I_CH_FLOW = _IDX["channel.flow"]
_I_CH_FLOW_OK = _IDX["channel.flow-ok"]
_I_CH_CLOSE = _IDX["channel.close"]
_I_CH_CLOSE_OK = _IDX["channel.close-ok"]
_I_CLOSE = _IDX["connection.close"]
_I_CLOSE_OK = _IDX["connection.close-ok"]

# Plain methods (not connection/channel class) each role may send: the receive fast path.
_PLAIN_BY_SENDER = {
    role: frozenset(idx for idx, who in SENDERS.items()
                    if role in who and (idx >> 16) not in (_CONN_CLASS, _CHANNEL_CLASS))
    for role in Role
}

# Connection-class negotiation: (method name, sender) -> (required state, next state).
_NEGOTIATION = {
    "connection.start": (ConnectionState.AWAIT_START, ConnectionState.AWAIT_START_OK),
    "connection.start-ok": (ConnectionState.AWAIT_START_OK, ConnectionState.AWAIT_TUNE),
    "connection.secure": (ConnectionState.AWAIT_TUNE, ConnectionState.AWAIT_SECURE_OK),
    "connection.secure-ok": (ConnectionState.AWAIT_SECURE_OK, ConnectionState.AWAIT_TUNE),
    "connection.tune": (ConnectionState.AWAIT_TUNE, ConnectionState.AWAIT_TUNE_OK),
    "connection.tune-ok": (ConnectionState.AWAIT_TUNE_OK, ConnectionState.AWAIT_OPEN),
    "connection.open": (ConnectionState.AWAIT_OPEN, ConnectionState.AWAIT_OPEN_OK),
    "connection.open-ok": (ConnectionState.AWAIT_OPEN_OK, ConnectionState.OPEN),
}
_NEGOTIATION_IDX = {_IDX[n]: v for n, v in _NEGOTIATION.items()}
_OPEN_ONLY_IDX = frozenset(_IDX[n] for n in (
    "connection.blocked", "connection.unblocked", "connection.update-secret",
    "connection.update-secret-ok"))
# States in which connection.close may be sent or received: once connection.start went out.
_CLOSABLE = frozenset((
    ConnectionState.AWAIT_START_OK, ConnectionState.AWAIT_SECURE_OK, ConnectionState.AWAIT_TUNE,
    ConnectionState.AWAIT_TUNE_OK, ConnectionState.AWAIT_OPEN, ConnectionState.AWAIT_OPEN_OK,
    ConnectionState.OPEN))

_OPEN = ChannelState.OPEN
_OPENING = ChannelState.OPENING
_CLOSING = ChannelState.CLOSING
_CLOSE_RECEIVED = ChannelState.CLOSE_RECEIVED
_CS_OPEN = ConnectionState.OPEN


class ChannelInfo:
    """Per-channel state: ``number``, ``state`` (:class:`ChannelState`), ``close_received``
    (the peer's ``channel.close`` arrived while ours was outstanding, so a ``close-ok`` is
    owed), ``peer_flow_active`` (the last ``channel.flow`` received: ``False`` asks this side
    to stop sending content), ``flow_active`` (the last ``channel.flow-ok`` received)."""

    __slots__ = ("number", "state", "close_received", "peer_flow_active", "flow_active")

    def __init__(self, number: int, state: ChannelState):
        self.number = number
        self.state = state
        self.close_received = False
        self.peer_flow_active = True
        self.flow_active = True

    def __repr__(self) -> str:
        return f"ChannelInfo({self.number}, {self.state.value})"


_DISCARD = object()


class AMQPConnection:
    """The state machine of one AMQP 0-9-1 connection (client or server role), sans-IO.

    Args:
        role: :class:`Role` of this end.
        max_body_size: largest content body accepted from the peer, bytes (decoder bound).
        min_frame_max: (server role) the smallest non-zero frame_max a client's tune-ok may
            choose, bytes; below it: 530 NOT_ALLOWED "negotiated frame_max = N is lower than
            the minimum allowed value (M)" (RabbitMQ rabbit_reader; 4096 in 3.10, 8192 from
            4.1, rabbit_framing.hrl ``FRAME_MIN_SIZE``).

    Typical client use::

        c = AMQPConnection(Role.CLIENT)
        sock.sendall(c.initiate())                       # protocol header
        for ev in c.receive_data(sock.recv(65536)):      # MethodFrame(0, connection.start)
            ...
        sock.sendall(c.send_method(0, spec.Connection.StartOk(...)))

    Negotiated values (``channel_max``, ``frame_max``, ``heartbeat``) are those of the
    ``connection.tune-ok`` (0 = no limit / no heartbeat); before tune-ok they are the
    0-9-1 pre-tune defaults (channel_max 0, frame_max 131072 accepted on receive, heartbeat 0).
    ``server_properties``, ``mechanisms``, ``client_properties``, ``mechanism``,
    ``virtual_host`` and ``blocked`` record what the negotiation carried.
    """

    def __init__(self, role: Role, max_body_size: int | None = None,
                 min_frame_max: int = FRAME_MIN_SIZE):
        if not isinstance(role, Role):
            raise TypeError(f"role must be Role.CLIENT or Role.SERVER, not {role!r}")
        self.role = role
        self.peer_role = Role.SERVER if role is Role.CLIENT else Role.CLIENT
        kw = {} if max_body_size is None else {"max_body_size": max_body_size}
        self._decoder = Decoder(expect_protocol_header=role is Role.SERVER, **kw)
        self.state = ConnectionState.AWAIT_HEADER
        self._channels: dict[int, ChannelInfo] = {}
        self.channel_max = 0
        self.frame_max = 0
        #: the smallest frame_max a tune-ok may choose (0-9-1 frame-min-size 4096; RabbitMQ
        #: 4.1+ refuses below 8192, rabbit_framing.hrl FRAME_MIN_SIZE)
        self.min_frame_max = min_frame_max
        self.heartbeat = 0
        self._tune: Method | None = None
        self._close_received = False  # peer's close arrived while ours is outstanding
        self.close_reason: Method | None = None  # the connection.close sent or received
        self.blocked: str | None = None  # connection.blocked reason (client role)
        self.server_properties: dict | None = None
        self.mechanisms: bytes | None = None
        self.client_properties: dict | None = None
        self.mechanism: str | None = None
        self.virtual_host: str | None = None
        self.header: ProtocolHeader | None = None
        self._rejected = False  # the client's protocol header was refused
        self._last_sent = 0.0
        self._last_received = 0.0
        self._peer_plain = _PLAIN_BY_SENDER[self.peer_role]
        self._own_plain = _PLAIN_BY_SENDER[role]

    def set_max_body_size(self, max_body_size: int) -> None:
        """Change the largest content body accepted from the peer (bytes), e.g. once the
        server-properties told the broker's limit; takes effect for the next content."""
        self._decoder.max_body_size = max_body_size

    # ------------------------------------------------------------------ queries

    def channel_state(self, channel: int) -> ChannelState:
        """The :class:`ChannelState` of ``channel`` (``CLOSED`` when unknown)."""
        ch = self._channels.get(channel)
        return ChannelState.CLOSED if ch is None else ch.state

    def channel_info(self, channel: int) -> ChannelInfo | None:
        """The :class:`ChannelInfo` of ``channel``, or ``None`` when it is closed."""
        return self._channels.get(channel)

    @property
    def channels(self) -> dict[int, ChannelInfo]:
        """Channels not fully closed, ``{number: ChannelInfo}`` (a copy)."""
        return dict(self._channels)

    @property
    def decoder(self) -> Decoder:
        """The underlying frame decoder (its ``frame_max`` follows the negotiation)."""
        return self._decoder

    @property
    def is_open(self) -> bool:
        """True in state ``OPEN``."""
        return self.state is _CS_OPEN

    @property
    def is_closed(self) -> bool:
        """True in state ``CLOSED``."""
        return self.state is ConnectionState.CLOSED

    # ------------------------------------------------------------------ start

    def initiate(self, now: float | None = None) -> bytes:
        """Start the connection. Client: returns the 8-byte protocol header to write.
        Server: returns ``b""`` (it waits for the client's header).

        Raises CommandInvalid (503) if called twice.
        """
        if self.state is not ConnectionState.AWAIT_HEADER or self.header is not None:
            raise CommandInvalid(f"initiate() called in connection state {self.state.value}")
        if self.role is Role.SERVER:
            return b""
        self.header = ProtocolHeader(PROTOCOL_HEADER)
        self.state = ConnectionState.AWAIT_START
        self._last_sent = _now(now)
        return PROTOCOL_HEADER

    # ------------------------------------------------------------------ receive

    def receive_data(self, data: bytes, now: float | None = None) -> list[Any]:
        """Feed bytes received from the peer; return the validated events they complete.

        Events: ``MethodFrame``, ``ContentMessage``, ``Heartbeat``, ``ProtocolHeader``
        (server role, first) or :class:`ProtocolHeaderRejected` (server role; write its
        ``reply`` and close). Frames this side must discard (see the module docstring) are
        dropped. ``now`` is a monotonic time in seconds (default ``time.monotonic()``) used
        for dead-peer detection.

        Raises the typed :class:`~spark_amqp.protocol.errors.AMQPError` for the first
        violation (decoder errors: 501/502/503/505; state errors: 503/504/530), with the
        events before it in ``exc.events``. After a decoder error the byte stream cannot be
        resynchronised: later calls raise the same error.
        """
        if data:
            self._last_received = _now(now)
        if self._rejected:  # after a header we do not speak, nothing is parsed
            return []
        try:
            raw = self._decoder.feed(data)
        except AMQPError as exc:
            # validate what was decoded before the bad frame (a state violation among those
            # comes first in the stream and is raised instead)
            exc.events = self._validate(exc.events)
            raise
        if not raw:
            return raw
        return self._validate(raw)

    def _validate(self, raw: list) -> list:
        """Check decoded events against the state machine; return those to deliver."""
        out: list[Any] = []
        append = out.append
        channels = self._channels
        peer_plain = self._peer_plain
        for ev in raw:
            t = ev.__class__
            if t is MethodFrame or t is ContentMessage or t is RawDeliveries:
                # fast path: a plain (non connection/channel class) method on an open channel
                if self.state is _CS_OPEN:
                    ch = channels.get(ev.channel)
                    if (ch is not None and ch.state is _OPEN
                            and ev.method.INDEX in peer_plain):
                        append(ev)
                        continue
                try:
                    keep = self._check(self.peer_role, ev.channel, ev.method, False)
                except AMQPError as exc:
                    exc.events = out
                    raise
                if keep is not _DISCARD:
                    append(ev)
            elif t is Heartbeat:
                if self.state is not ConnectionState.CLOSING and self.state is not ConnectionState.CLOSED:
                    append(ev)
            else:  # ProtocolHeader
                self.header = ev
                if ev.is_supported:
                    self.state = ConnectionState.AWAIT_START
                    append(ev)
                else:
                    self.state = ConnectionState.CLOSED
                    self._rejected = True
                    append(ProtocolHeaderRejected(ev))
                    break  # (the decoder may frame what follows a 0-8 header; ignored)
        return out

    def receive_header(self, header: ProtocolHeader, accept_0_8: bool = False) -> Any:
        """Server role, for a caller that frames the bytes itself: the protocol header the
        client sent. Returns ``header`` (state ``AWAIT_START``: send ``connection.start``)
        or a :class:`ProtocolHeaderRejected` (state ``CLOSED``: write its ``reply``, close).

        ``accept_0_8``: also go on after an ``AMQP 1 1 8 0`` / ``AMQP 1 1 9 1`` header, as
        RabbitMQ 3.10 does (it answers with a connection.start of version 8-0; the methods that
        follow are 0-9-1's). Raises CommandInvalid (503) when a header was already received.
        """
        if self.role is not Role.SERVER or self.state is not ConnectionState.AWAIT_HEADER:
            raise CommandInvalid(f"a protocol header in connection state {self.state.value}")
        if accept_0_8 and header.version == "0-8":
            self.header = header
            self.state = ConnectionState.AWAIT_START
            return header
        return self._validate([header])[0]

    def receive_method(self, channel: int, method: Method, now: float | None = None) -> bool:
        """Validate one method the peer sent, for a caller that frames the bytes itself (the
        embedded broker passes its channel-0 methods here), and apply its state change.

        Returns False when the rules say to discard it (a closing connection: see the module
        docstring), True when the caller acts on it. Raises the typed error of the first rule
        it breaks (503/504/530, as :meth:`receive_data`).
        """
        self._last_received = _now(now)
        return self._check(self.peer_role, channel, method, False) is not _DISCARD

    # ------------------------------------------------------------------ send

    def send_method(self, channel: int, method: Method, now: float | None = None) -> bytes:
        """Validate and encode one method without content; returns the frame bytes.

        Raises TypeError for a content-bearing method (use :meth:`send_message`), and the
        typed AMQPError (503/504/530, 501 when the frame exceeds the negotiated frame-max)
        when this side may not send it now; the state is unchanged then.
        """
        if method.has_content:
            raise TypeError(f"{method.NAME} carries content: use send_message()")
        data = encode_method(channel, method)
        if self.frame_max and len(data) > self.frame_max:
            from .errors import FrameError
            raise FrameError(f"{method.NAME} frame of {len(data)} bytes exceeds the negotiated "
                             f"frame-max {self.frame_max}", method.CLASS_ID, method.METHOD_ID)
        self._check(self.role, channel, method, True)
        self._last_sent = _now(now)
        return data

    def send_message(self, channel: int, method: Method, properties: Any, body: bytes,
                     now: float | None = None) -> bytes:
        """Validate and encode a content method (basic.publish/deliver/get-ok/return) with
        its content header and body frames, the body split to the negotiated frame-max.

        ``properties`` is a :class:`~spark_amqp.protocol.properties.BasicProperties` or None.
        Raises TypeError for a method without content; typed AMQPError as :meth:`send_method`.
        """
        if not method.has_content:
            raise TypeError(f"{method.NAME} carries no content: use send_method()")
        if self.state is not _CS_OPEN or method.INDEX not in self._own_plain:
            self._check(self.role, channel, method, True)
        else:
            ch = self._channels.get(channel)
            if ch is None or ch.state is not _OPEN:
                self._check(self.role, channel, method, True)
        self._last_sent = _now(now)
        return encode_message(channel, method, properties, body, self.frame_max)

    def send_heartbeat(self, now: float | None = None) -> bytes:
        """Return the 8-byte heartbeat frame and note the send time (any state before close)."""
        self._last_sent = _now(now)
        return HEARTBEAT_FRAME

    def note_sent(self, now: float | None = None) -> None:
        """Record that bytes were written (if the caller writes other pre-encoded frames)."""
        self._last_sent = _now(now)

    def note_received(self, now: float | None = None) -> None:
        """Record that the peer was heard from at ``now`` (monotonic seconds; default
        ``time.monotonic()``) without handing its bytes to :meth:`receive_data`: for a caller
        that frames the bytes itself (the embedded broker feeds only its channel-0 methods to
        :meth:`receive_method`; any traffic counts as a heartbeat, spec §4.2.7, so the peer is
        not dead while it sends), and for a caller that stopped reading on purpose
        (back-pressure, flow control), whose unread input is not the peer's silence.
        :meth:`heartbeat_action` measures "dead" from the most recent of this and the last
        :meth:`receive_data` with bytes."""
        self._last_received = _now(now)

    @property
    def last_received(self) -> float:
        """Monotonic time (seconds) of the last bytes received (or :meth:`note_received`);
        0.0 before any."""
        return self._last_received

    # ------------------------------------------------------------------ heartbeats

    def heartbeat_action(self, now: float) -> str | None:
        """What the heartbeat timer asks for at monotonic time ``now`` (seconds).

        Returns ``"dead"`` when nothing was received for 2 × heartbeat seconds (the peer is
        considered unreachable; close the socket without a handshake), ``"send"`` when nothing
        was sent for heartbeat / 2 seconds (write :meth:`send_heartbeat`), else ``None``.
        Always ``None`` when heartbeats are off (negotiated 0) or before tune-ok.
        """
        hb = self.heartbeat
        if not hb or self.state is ConnectionState.CLOSED:
            return None
        if now - self._last_received >= 2 * hb:
            return "dead"
        if now - self._last_sent >= hb / 2:
            return "send"
        return None

    def heartbeat_deadline(self, now: float) -> float | None:
        """Seconds from ``now`` until :meth:`heartbeat_action` may next return non-None
        (0 when it already would); ``None`` when heartbeats are off. Use as a select timeout.
        """
        hb = self.heartbeat
        if not hb or self.state is ConnectionState.CLOSED:
            return None
        dead = self._last_received + 2 * hb
        send = self._last_sent + hb / 2
        return max(0.0, min(dead, send) - now)

    # ------------------------------------------------------------------ the rules

    def _check(self, sender: Role, channel: int, method: Method, sending: bool) -> Any:
        """Validate ``method`` on ``channel`` from ``sender`` and apply its state change.

        Returns ``_DISCARD`` when a received frame must be dropped (closing), else None.
        """
        idx = method.INDEX
        name = method.NAME
        cid, mid = method.CLASS_ID, method.METHOD_ID
        state = self.state
        peer = "this side" if sending else "the peer"
        if state is ConnectionState.CLOSED:
            if sending:
                raise CommandInvalid(f"cannot send {name}: the connection is closed", cid, mid)
            return _DISCARD
        # After connection.close was sent: discard all but close/close-ok (spec §4.2.6 rules).
        if state is ConnectionState.CLOSING and not sending:
            if channel != 0:
                return _DISCARD
            if idx == _I_CLOSE:  # simultaneous close: this side must still answer close-ok
                self._close_received = True
                return None
            if idx == _I_CLOSE_OK:
                self.state = ConnectionState.CLOSED
                self._channels.clear()
                return None
            return _DISCARD
        if sender not in SENDERS[idx]:
            if cid == _CONN_CLASS and channel == 0:
                # RabbitMQ 3.10 checks the connection state first on channel 0: a client's
                # connection.tune gives "504 CHANNEL_ERROR - unexpected method in
                # connection state running" (checked on the real broker)
                raise ChannelErrorCode(
                    f"unexpected {name} in connection state {state.value}: a "
                    f"{sender.value} never sends {name}", cid, mid)
            # RabbitMQ 3.10: "503 COMMAND_INVALID - unimplemented method" (checked)
            raise CommandInvalid(
                f"{name} is never sent by a {sender.value} (a {sender.value} sent it on "
                f"channel {channel})", cid, mid)
        if cid == _CONN_CLASS:
            if channel != 0:
                # RabbitMQ 3.10 replies 503 COMMAND_INVALID here (checked)
                raise CommandInvalid(f"{name} on channel {channel}: connection-class methods "
                                     "must use channel 0", cid, mid)
            return self._connection_method(sender, method, sending)
        if channel == 0:
            # RabbitMQ 3.10: "504 CHANNEL_ERROR - unexpected method in connection state running"
            raise ChannelErrorCode(f"{name} on channel 0: channel 0 carries only "
                                   "connection-class methods", cid, mid)
        if state is not _CS_OPEN:
            if state is ConnectionState.CLOSING or state is ConnectionState.CLOSE_RECEIVED:
                raise CommandInvalid(f"cannot send {name} on channel {channel}: the connection "
                                     f"is closing (state {state.value}); only "
                                     "connection.close-ok may be sent", cid, mid)
            raise ChannelErrorCode(f"unexpected {name} in connection state {state.value}: "
                                   "channels can be used only after connection.open-ok",
                                   cid, mid)
        ch = self._channels.get(channel)
        if ch is None:
            if idx != _I_CH_OPEN:
                raise ChannelErrorCode(
                    f"{name} on channel {channel}, which is not open (expected "
                    "'channel.open' first)", cid, mid)
            if self.channel_max and channel > self.channel_max:
                raise NotAllowed(
                    f"channel.open on channel {channel}, above the negotiated channel_max "
                    f"({self.channel_max}); use channels 1..{self.channel_max}", cid, mid)
            self._channels[channel] = ChannelInfo(channel, _OPENING)
            self._decoder.raw_channels.discard(channel)  # a reused number starts decoded
            return None
        cstate = ch.state
        if cstate is _CLOSING:
            # this side sent channel.close: discard all but close / close-ok
            if sending:
                if idx == _I_CH_CLOSE_OK and ch.close_received:
                    ch.close_received = False
                    return None
                raise CommandInvalid(f"cannot send {name} on channel {channel}: channel.close "
                                     "was sent and its close-ok has not arrived", cid, mid)
            if idx == _I_CH_CLOSE:
                ch.close_received = True
                return None
            if idx == _I_CH_CLOSE_OK:
                del self._channels[channel]
                return None
            return _DISCARD
        if cstate is _CLOSE_RECEIVED:
            if sending:
                if idx == _I_CH_CLOSE_OK:
                    del self._channels[channel]
                    return None
                raise CommandInvalid(f"cannot send {name} on channel {channel}: the peer "
                                     "closed the channel; send channel.close-ok", cid, mid)
            raise CommandInvalid(f"{name} on channel {channel} after {peer} sent channel.close",
                                 cid, mid)
        if idx == _I_CH_OPEN:
            # RabbitMQ 3.10: "504 CHANNEL_ERROR - second 'channel.open' seen" (checked)
            raise ChannelErrorCode(f"second 'channel.open' on channel {channel}, which is "
                                   f"already {cstate.value}", cid, mid)
        if cstate is _OPENING:
            if idx == _I_CH_OPEN_OK:
                ch.state = _OPEN
                return None
            if idx == _I_CH_CLOSE:
                ch.state = _CLOSING if sending else _CLOSE_RECEIVED
                return None
            # the client (opener) may pipeline methods after channel.open (RabbitMQ accepts
            # them); the server must answer open-ok first
            if sender is Role.SERVER:
                raise CommandInvalid(f"{name} on channel {channel} before channel.open-ok",
                                     cid, mid)
            return self._channel_method(ch, idx, method, sending)
        # OPEN
        if idx == _I_CH_OPEN_OK:
            raise CommandInvalid(f"channel.open-ok on channel {channel}, which is already open",
                                 cid, mid)
        if idx == _I_CH_CLOSE:
            ch.state = _CLOSING if sending else _CLOSE_RECEIVED
            return None
        if idx == _I_CH_CLOSE_OK:
            # RabbitMQ 3.10 replies 503 COMMAND_INVALID to an unsolicited close-ok (checked)
            raise CommandInvalid(f"channel.close-ok on channel {channel}, but no channel.close "
                                 "was sent", cid, mid)
        return self._channel_method(ch, idx, method, sending)

    def _channel_method(self, ch: ChannelInfo, idx: int, method: Method, sending: bool) -> None:
        if idx == _I_CH_FLOW:
            if not sending:
                ch.peer_flow_active = bool(method.active)
        elif idx == _I_CH_FLOW_OK:
            if not sending:
                ch.flow_active = bool(method.active)
        return None

    def _connection_method(self, sender: Role, method: Method, sending: bool) -> Any:
        idx = method.INDEX
        state = self.state
        name = method.NAME
        cid, mid = method.CLASS_ID, method.METHOD_ID
        step = _NEGOTIATION_IDX.get(idx)
        if step is not None:
            required, nxt = step
            if state is not required:
                raise ChannelErrorCode(f"unexpected {name} in connection state {state.value}",
                                       cid, mid)
            if idx == _IDX["connection.tune-ok"]:
                self._apply_tune_ok(method)
            elif idx == _IDX["connection.tune"]:
                self._check_tune(method)
                self._tune = method
            elif idx == _IDX["connection.start"]:
                self.server_properties = method.server_properties or {}
                self.mechanisms = method.mechanisms
            elif idx == _IDX["connection.start-ok"]:
                self.client_properties = method.client_properties or {}
                self.mechanism = method.mechanism
            elif idx == _IDX["connection.open"]:
                self.virtual_host = method.virtual_host
            self.state = nxt
            return None
        if idx == _I_CLOSE:
            if state is ConnectionState.CLOSING:  # sending a second close
                raise CommandInvalid("connection.close was already sent", cid, mid)
            if state is ConnectionState.CLOSE_RECEIVED:
                if sending:
                    raise CommandInvalid("the peer sent connection.close: answer with "
                                         "connection.close-ok, not another close", cid, mid)
                return _DISCARD  # a repeated close from the peer
            if state not in _CLOSABLE:
                raise ChannelErrorCode(f"unexpected {name} in connection state {state.value}",
                                       cid, mid)
            self.close_reason = method
            self.state = ConnectionState.CLOSING if sending else ConnectionState.CLOSE_RECEIVED
            return None
        if idx == _I_CLOSE_OK:
            # sending: allowed after the peer's close (also during our own CLOSING)
            if sending and (state is ConnectionState.CLOSE_RECEIVED
                            or (state is ConnectionState.CLOSING and self._close_received)):
                self.state = ConnectionState.CLOSED
                self._channels.clear()
                return None
            # RabbitMQ 3.10 replies 504 "unexpected method in connection state running" (checked)
            raise ChannelErrorCode(f"unexpected connection.close-ok in connection state "
                                   f"{state.value}: no connection.close was "
                                   f"{'received' if sending else 'sent'}", cid, mid)
        if state is ConnectionState.CLOSING or state is ConnectionState.CLOSE_RECEIVED:
            if sending:
                raise CommandInvalid(f"cannot send {name}: the connection is closing", cid, mid)
            return _DISCARD
        if idx in _OPEN_ONLY_IDX:
            if state is not _CS_OPEN:
                raise ChannelErrorCode(f"unexpected {name} in connection state {state.value}",
                                       cid, mid)
            if name == "connection.blocked":
                self.blocked = method.reason
            elif name == "connection.unblocked":
                self.blocked = None
            return None
        raise ChannelErrorCode(f"unexpected {name} in connection state {state.value}",  # pragma: no cover
                               cid, mid)

    def _check_tune(self, tune: Method) -> None:
        if tune.frame_max and tune.frame_max < FRAME_MIN_SIZE:
            raise NotAllowed(f"connection.tune frame_max {tune.frame_max} is below the minimum "
                             f"frame size {FRAME_MIN_SIZE}", tune.CLASS_ID, tune.METHOD_ID)

    def _apply_tune_ok(self, ok: Method) -> None:
        tune = self._tune
        assert tune is not None
        cid, mid = ok.CLASS_ID, ok.METHOD_ID
        for field in ("channel_max", "frame_max"):
            offered = getattr(tune, field)
            chosen = getattr(ok, field)
            if offered and (chosen == 0 or chosen > offered):
                # RabbitMQ's rabbit_reader wording -> 530 NOT_ALLOWED
                raise NotAllowed(f"negotiated {field} = {chosen or '0 (no limit)'} is greater "
                                 f"than the maximum allowed value ({offered})", cid, mid)
        if ok.frame_max and ok.frame_max < self.min_frame_max:
            raise NotAllowed(f"negotiated frame_max = {ok.frame_max} is lower than the minimum "
                             f"allowed value ({self.min_frame_max})", cid, mid)
        self.channel_max = ok.channel_max
        self.frame_max = ok.frame_max
        self.heartbeat = ok.heartbeat
        self._decoder.set_frame_max(ok.frame_max)


def _now(now: float | None) -> float:
    return time.monotonic() if now is None else now


def _shortstr_text(text: str) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= 255:
        return text
    return raw[:255].decode("utf-8", "ignore")


def close_method_for(error: AMQPError, connection: bool | None = None) -> Method:
    """The close method that reports ``error`` to the peer.

    Returns ``spec.Connection.Close`` for a connection (hard) error, to send on channel 0, or
    ``spec.Channel.Close`` for a channel (soft) error, to send on the channel concerned;
    reply code, text (cut to 255 UTF-8 bytes, prefixed with the constant name as RabbitMQ
    does, e.g. ``"NOT_FOUND - no queue 'x'"``), class id and method id come from the error.
    ``connection=True`` forces a ``connection.close`` whatever the error's level (e.g. a
    403 ACCESS_REFUSED for a failed login during negotiation, as RabbitMQ sends it).
    """
    text = error.reply_text
    if not text.startswith(error.name):
        text = f"{error.name} - {text}"
    if connection is None:
        connection = error.connection_level
    cls = spec.Connection.Close if connection else spec.Channel.Close
    return cls(error.reply_code, _shortstr_text(text), error.class_id, error.method_id)


def error_from_close(method: Method) -> AMQPError:
    """The typed error carried by a received ``connection.close`` or ``channel.close``.

    Its ``connection_level`` follows the method (``connection.close`` → hard), whatever the
    reply code's usual class. Raises TypeError for any other method.
    """
    if method.NAME not in ("connection.close", "channel.close"):
        raise TypeError(f"error_from_close() needs connection.close or channel.close, "
                        f"not {method.NAME}")
    err = error_for_code(method.reply_code, method.reply_text, method.class_id,
                         method.method_id, connection_level=method.CLASS_ID == _CONN_CLASS)
    conn = method.CLASS_ID == _CONN_CLASS
    if err.connection_level != conn:
        err.connection_level = conn
    return err
