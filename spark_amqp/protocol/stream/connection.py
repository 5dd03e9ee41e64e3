"""Sans-IO stream-protocol connection state machine, for both roles (as the 0-9-1 one).

One :class:`StreamConnection` per transport connection. The caller owns the socket: it feeds
received bytes to :meth:`~StreamConnection.receive_data`, which returns the decoded commands
(in the client role a ``deliver`` comes out as the :class:`~.chunk.Chunk` it carries, parsed
where it lies in the received bytes, its CRC-32 checked, with ``subscription_id`` and
``committed_chunk_id`` set: the hot path makes no other object), and writes the bytes
:meth:`~StreamConnection.send` returns.

The handshake (PROTOCOL.adoc "Authentication"; ``rabbit_stream_reader`` v3.10.8/v4.3.5)::

    client                      server
    peer_properties  ------->   (state PEER_PROPERTIES)
                     <-------   peer_properties response
    sasl_handshake   ------->   (SASL_HANDSHAKE)
                     <-------   mechanisms
    sasl_authenticate ------>   (SASL_AUTHENTICATE; repeated while the code is SASL_CHALLENGE)
                     <-------   OK  (or AUTHENTICATION_FAILURE ...: the server closes)
                     <-------   tune (frame_max, heartbeat)          (TUNE)
    tune (response)  ------->
    open (vhost)     ------->   (OPEN)
                     <-------   OK + advertised_host/advertised_port  (OPENED)

What it checks, and what it raises (typed :mod:`~.errors`):

* the order above, in both directions: a command out of order, or one the sender's role never
  sends (e.g. a ``deliver`` from a client), raises :class:`~.errors.UnknownFrame` from
  :meth:`receive_data` (RabbitMQ: before ``open`` it closes the socket without a word; after,
  it sends ``close`` with ``UNKNOWN_FRAME``) and from :meth:`send` without changing state;
* frame sizes: a server enforces ``initial_frame_max`` until ``open`` succeeds (RabbitMQ 4.x:
  8192 bytes, ``stream.initial_frame_max``; 3.10 has no such ceiling: pass 0) and then the
  negotiated ``frame_max``; a client accepts frames up to ``max_receive_size`` (chunks can be
  larger than ``frame_max``: the broker writes each as it is stored). Over the limit:
  :class:`~.errors.FrameTooLarge`, from the 4-byte size alone;
* responses: one whose correlation id answers no pending request raises UnknownFrame;
* credit (PROTOCOL.adoc "Credit": one credit = one chunk): the client counts each
  subscription's credit (initial credit of ``subscribe`` plus every ``credit`` sent, minus
  every ``deliver`` received); a ``deliver`` for a subscription without credit, or for one
  that was never subscribed, raises UnknownFrame. The server counts the same and refuses to
  encode a ``deliver`` beyond it (``ValueError``).

Errors found in received data are raised from :meth:`receive_data` with the commands decoded
before the bad one attached as ``.events``. :meth:`close_frame_for` gives what to write then
(``None`` before ``open``, as RabbitMQ closes silently; else a ``close`` with the error's code).

Heartbeats (rabbit_heartbeat, as in 0-9-1): the negotiated interval is in seconds;
:meth:`heartbeat_action` says ``"send"`` when nothing was sent for half an interval (what
RabbitMQ's sender does) and ``"dead"`` when nothing was received for two intervals; :meth:`heartbeat_deadline` says
when to ask next.
"""

from __future__ import annotations

import enum
import struct
import time

from .commands import (CLIENT_SENDS, SERVER_SENDS, Close, CloseResponse, Command, Credit,
                       CreditResponse, Deliver, Heartbeat, MetadataResponse, Open, OpenResponse,
                       PeerProperties, PeerPropertiesResponse, Request, Response,
                       SaslAuthenticate, SaslAuthenticateResponse, SaslHandshake,
                       SaslHandshakeResponse, Subscribe, SubscribeResponse, Tune, TuneResponse,
                       Unsubscribe, UnsubscribeResponse, decode, Publish, DeclarePublisher,
                       DeclarePublisherResponse, DeletePublisher, DeletePublisherResponse,
                       ConsumerUpdate, ConsumerUpdateResponse)
from . import commands as _commands
from .constants import (DEFAULT_FRAME_MAX, DEFAULT_INITIAL_FRAME_MAX, RESPONSE_FLAG, Code, Key)
from .errors import StreamError, UnknownFrame
from .chunk import parse_chunk
from .framing import FrameDecoder

__all__ = ["StreamConnection", "State", "CLIENT", "SERVER", "DEFAULT_MAX_RECEIVE_SIZE"]

CLIENT = "client"
SERVER = "server"
#: the largest frame a client accepts by default (a chunk may exceed frame_max)
DEFAULT_MAX_RECEIVE_SIZE = 256 * 1024 * 1024
_KEY = struct.Struct(">HH").unpack_from
_U64 = struct.Struct(">Q").unpack_from
_monotonic = time.monotonic
_new_publish = object.__new__


class State(enum.Enum):
    """What the connection waits for next (both roles see the same states)."""

    PEER_PROPERTIES = "peer-properties"      # the client's peer_properties (and its answer)
    SASL_HANDSHAKE = "sasl-handshake"
    SASL_AUTHENTICATE = "sasl-authenticate"
    TUNE = "tune"                            # the server's tune, then the client's answer
    OPEN = "open"
    OPENED = "opened"
    CLOSING = "closing"                      # this side sent close, waits for its response
    CLOSE_RECEIVED = "close-received"        # the peer sent close; answer it
    CLOSED = "closed"


# commands allowed in each state before OPENED (the handshake), by sender role
_HANDSHAKE = {
    State.PEER_PROPERTIES: {PeerProperties, PeerPropertiesResponse},
    State.SASL_HANDSHAKE: {SaslHandshake, SaslHandshakeResponse},
    State.SASL_AUTHENTICATE: {SaslAuthenticate, SaslAuthenticateResponse},
    State.TUNE: {Tune, TuneResponse},
    State.OPEN: {Open, OpenResponse},
}
_ALWAYS = {Heartbeat, Close, CloseResponse}


class StreamConnection:
    """The state of one connection, ``role`` ``"client"`` or ``"server"``.

    Arguments:
        role: which end this is.
        frame_max: (server) the ``frame_max`` it proposes in ``tune``, bytes (0 = no limit;
            default 1 MiB as RabbitMQ); (client) the most it accepts (0: the server's value).
        heartbeat: (server) proposed seconds (default 60); (client) the most it accepts
            (None: the server's value; 0: none).
        initial_frame_max: (server) the ceiling before ``open`` (default 8192 as RabbitMQ
            4.x; 0 = none, as 3.10).
        max_receive_size: (client) the largest frame accepted, bytes.
        verify_crc: (client) check each delivered chunk's CRC-32 (default True).

    Attributes: ``state`` (:class:`State`), ``frame_max`` and ``heartbeat`` (negotiated),
    ``peer_properties`` (dict: the other side's), ``vhost``, ``mechanism`` (the SASL mechanism
    used), ``open_properties`` (dict: the ``open`` response's, e.g. ``advertised_host``),
    ``credits`` (``subscription id -> chunks``), ``publishers`` (``publisher id -> stream``).
    """

    def __init__(self, role: str, frame_max: int = DEFAULT_FRAME_MAX,
                 heartbeat: int | None = 60, initial_frame_max: int = DEFAULT_INITIAL_FRAME_MAX,
                 max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE, verify_crc: bool = True):
        if role not in (CLIENT, SERVER):
            raise ValueError(f"role must be 'client' or 'server', got {role!r}")
        self.role = role
        self.verify_crc = verify_crc
        self.state = State.PEER_PROPERTIES
        self.frame_max = frame_max
        self.heartbeat = heartbeat or 0
        self._want_frame_max = frame_max
        self._want_heartbeat = heartbeat
        self.peer_properties: dict = {}
        self.open_properties: dict = {}
        self.vhost: str | None = None
        self.mechanism: str | None = None
        self.credits: dict[int, int] = {}
        self.publishers: dict[int, str] = {}
        self._pending: dict[int, Request] = {}  # correlation id -> request awaiting its answer
        self._next_corr = 1
        self._closed_error: StreamError | None = None
        self._sends = CLIENT_SENDS if role == CLIENT else SERVER_SENDS
        self._receives = SERVER_SENDS if role == CLIENT else CLIENT_SENDS
        limit = max_receive_size if role == CLIENT else initial_frame_max
        self._decoder = FrameDecoder(limit)
        self._last_recv = self._last_send = _monotonic()

    # ------------------------------------------------------------------ helpers

    @property
    def is_open(self) -> bool:
        return self.state is State.OPENED

    def next_correlation_id(self) -> int:
        """A fresh correlation id (uint32, never 0, wrapping)."""
        c = self._next_corr
        self._next_corr = c % 0xFFFFFFFF + 1
        return c

    def pending(self, correlation_id: int) -> Request | None:
        """The request waiting for the response with ``correlation_id``."""
        return self._pending.get(correlation_id)

    # ------------------------------------------------------------------ sending

    def send(self, cmd: Command) -> bytes:
        """Validate ``cmd`` for this role and state, update the state, return its frame.

        A :class:`~.commands.Request` whose ``correlation_id`` is 0 gets a fresh one (read
        it back from the object). Raises :class:`~.errors.UnknownFrame` (this side may not
        send it now), ``ValueError`` (a deliver beyond the subscription's credit)."""
        cls = type(cmd)
        if cls not in self._sends:
            raise UnknownFrame(f"a {self.role} does not send {cls.__name__}")
        st = self.state
        if st is not State.OPENED and cls not in _ALWAYS:
            allowed = _HANDSHAKE.get(st, ())
            if cls not in allowed and not (self.role == SERVER and st is State.SASL_AUTHENTICATE
                                           and cls is Tune):
                raise UnknownFrame(f"{cls.__name__} cannot be sent in state {st.value}")
        if st in (State.CLOSING, State.CLOSED) and cls is not CloseResponse and cls is not Close:
            raise UnknownFrame(f"the connection is {st.value}: {cls.__name__} not sent")
        if st is State.CLOSE_RECEIVED and cls is not CloseResponse:
            raise UnknownFrame(f"the peer closed the connection: only its close response may "
                               f"be sent, not {cls.__name__}")
        if isinstance(cmd, Request) and self.role == CLIENT or cls is ConsumerUpdate or (
                cls is Close):
            if getattr(cmd, "correlation_id", 0) == 0:
                cmd.correlation_id = self.next_correlation_id()
            self._pending[cmd.correlation_id] = cmd  # type: ignore[assignment]
        if cls is Deliver:
            left = self.credits.get(cmd.subscription_id)
            if left is None:
                raise ValueError(f"no subscription {cmd.subscription_id} to deliver to")
            if left <= 0:
                raise ValueError(f"subscription {cmd.subscription_id} has no credit left: a "
                                 "chunk may be sent only for a credit (PROTOCOL.adoc Credit)")
            self.credits[cmd.subscription_id] = left - 1
        elif cls is Credit:
            if cmd.subscription_id in self.credits:
                self.credits[cmd.subscription_id] += cmd.credit
        elif isinstance(cmd, Response) or cls in (TuneResponse, MetadataResponse):
            self._sent_response(cmd)
        self._sent(cmd)
        data = cmd.encode()
        self._last_send = _monotonic()
        return data

    def _sent(self, cmd: Command) -> None:
        """State changes of sending ``cmd``."""
        cls = type(cmd)
        if cls is Tune:
            self.frame_max, self.heartbeat = cmd.frame_max, cmd.heartbeat
            self.state = State.TUNE
        elif cls is TuneResponse:
            self.frame_max, self.heartbeat = cmd.frame_max, cmd.heartbeat
            self.state = State.OPEN
        elif cls is Close:
            self.state = State.CLOSING if self.state is not State.CLOSED else State.CLOSED
        elif cls is CloseResponse:
            self.state = State.CLOSED

    def _sent_response(self, cmd: Command) -> None:
        """Server role: a response to a request received (its effect on the state)."""
        req = self._pending.pop(getattr(cmd, "correlation_id", -1), None)
        code = getattr(cmd, "code", Code.OK)
        cls = type(cmd)
        if cls is PeerPropertiesResponse:
            self.state = State.SASL_HANDSHAKE
        elif cls is SaslHandshakeResponse:
            self.state = State.SASL_AUTHENTICATE
        elif cls is SaslAuthenticateResponse:
            if code not in (Code.OK, Code.SASL_CHALLENGE):
                self.state = State.CLOSED
        elif cls is OpenResponse:
            if code == Code.OK:
                self.state = State.OPENED
                self._decoder.max_frame_size = self.frame_max
            else:
                self.state = State.CLOSED
        elif cls is SubscribeResponse and isinstance(req, Subscribe):
            if code == Code.OK:
                self.credits[req.subscription_id] = req.credit
        elif cls is UnsubscribeResponse and isinstance(req, Unsubscribe):
            if code == Code.OK:
                self.credits.pop(req.subscription_id, None)
        elif cls is DeclarePublisherResponse and isinstance(req, DeclarePublisher):
            if code == Code.OK:
                self.publishers[req.publisher_id] = req.stream
        elif cls is DeletePublisherResponse and isinstance(req, DeletePublisher):
            if code == Code.OK:
                self.publishers.pop(req.publisher_id, None)

    # ------------------------------------------------------------------ receiving

    def receive_data(self, data: bytes) -> list:
        """Decode ``data`` (bytes received, any amount) into commands, checking them.

        Returns the commands in order. Raises a :class:`~.errors.StreamError` (FrameTooLarge,
        UnknownFrame, CorruptChunk...) with ``.events`` (what was decoded before it)."""
        self._last_recv = _monotonic()
        out: list = []
        try:
            frames = self._decoder.feed(data)
        except StreamError as exc:
            frames = exc.frames  # type: ignore[attr-defined]
            try:
                self._frames(frames, out)
            except StreamError as inner:
                exc = inner
            exc.events = out  # type: ignore[attr-defined]
            raise exc
        try:
            self._frames(frames, out)
        except StreamError as exc:
            exc.events = out  # type: ignore[attr-defined]
            raise
        return out

    def _frames(self, frames: list, out: list) -> None:
        append = out.append
        role = self.role
        opened = self.state is State.OPENED
        credits = self.credits
        verify = self.verify_crc
        for buf, start, end in frames:
            if opened and role == CLIENT and end - start >= 5:
                key, version = _KEY(buf, start)
                if key == Key.DELIVER and (version == 1 or version == 2):
                    # the hot path: a chunk for a subscription, parsed where it lies
                    sub = buf[start + 4]
                    left = credits.get(sub)
                    if left is None:
                        raise UnknownFrame(f"a deliver for subscription {sub}, which this "
                                           "client does not have")
                    if left <= 0:
                        raise UnknownFrame(f"a deliver for subscription {sub} beyond its credit")
                    if version == 2:
                        if end - start < 13:
                            raise UnknownFrame("a version-2 deliver without its committed "
                                               "chunk id")
                        committed = _U64(buf, start + 5)[0]
                        cstart = start + 13
                    else:
                        committed, cstart = None, start + 5
                    credits[sub] = left - 1
                    append(parse_chunk(buf, cstart, end, verify, committed, sub))
                    continue
            if opened and role == SERVER and end - start >= 4 and _KEY(buf, start)[0] == Key.PUBLISH:
                # the server's hot path: a publish split by the compiled splitter when built
                pid, ids, msgs, fvs = _commands.split_publish(buf, start, end)
                cmd = _new_publish(Publish)
                cmd.publisher_id, cmd.publishing_ids, cmd.messages, cmd.filter_values = pid, ids, msgs, fvs
                append(cmd)
                continue
            cmd = decode(buf, start, end, role)
            self._received(cmd)
            append(cmd)
            opened = self.state is State.OPENED

    def _received(self, cmd: Command) -> None:
        cls = type(cmd)
        if cls not in self._receives and not (cls is Tune and self.role == SERVER):
            # (a server takes the client's tune answer with or without the response bit, as
            # RabbitMQ does: rstream 1.1.1 sends it without)
            raise UnknownFrame(f"a {self.role} does not receive {cls.__name__}")
        st = self.state
        if st is State.CLOSED:
            raise UnknownFrame(f"{cls.__name__} received after the connection closed")
        if st is State.CLOSING and cls not in (Close, CloseResponse):
            return  # after sending close, everything but close/close-response is ignored
        if st is not State.OPENED and cls not in _ALWAYS:
            if cls not in _HANDSHAKE.get(st, ()) and not (
                    self.role == CLIENT and st is State.SASL_AUTHENTICATE and cls is Tune):
                raise UnknownFrame(f"{cls.__name__} received in state {st.value}")
        if self.role == SERVER:
            self._server_received(cmd, cls)
        else:
            self._client_received(cmd, cls)

    def _server_received(self, cmd: Command, cls: type) -> None:
        if cls is Close:
            self._pending[cmd.correlation_id] = cmd
            self.state = State.CLOSE_RECEIVED
        elif isinstance(cmd, Request):
            self._pending[cmd.correlation_id] = cmd
        elif cls is TuneResponse or cls is Tune:  # RabbitMQ accepts the answer either way
            if self.state is not State.TUNE:
                raise UnknownFrame(f"a tune answer in state {self.state.value}")
            fm, hb = cmd.frame_max, cmd.heartbeat
            if self._want_frame_max and (fm == 0 or fm > self._want_frame_max):
                fm = self._want_frame_max  # RabbitMQ: negotiate_frame_max (min, 0 = the other)
            self.frame_max, self.heartbeat = fm, hb
            self.state = State.OPEN
        elif cls is CloseResponse:
            self._answered(cmd)
            self.state = State.CLOSED
        elif cls is ConsumerUpdateResponse:
            self._answered(cmd)
        elif cls is Credit:
            if cmd.subscription_id in self.credits:
                self.credits[cmd.subscription_id] += cmd.credit
        if cls is PeerProperties:
            self.peer_properties = dict(cmd.properties)
        elif cls is SaslAuthenticate:
            self.mechanism = cmd.mechanism
        elif cls is Open:
            self.vhost = cmd.vhost

    def _answered(self, cmd: Command) -> Request:
        req = self._pending.pop(cmd.correlation_id, None)
        if req is None:
            raise UnknownFrame(f"{type(cmd).__name__} with correlation id "
                               f"{cmd.correlation_id}, which answers no request")
        if type(cmd) is not req.RESPONSE and not (type(req) is Close and type(cmd) is CloseResponse):
            self._pending[cmd.correlation_id] = req
            raise UnknownFrame(f"{type(cmd).__name__} with correlation id {cmd.correlation_id} "
                               f"answers a {type(req).__name__}")
        return req

    def _client_received(self, cmd: Command, cls: type) -> None:
        if cls is Tune:
            if self.state not in (State.SASL_AUTHENTICATE, State.TUNE):
                raise UnknownFrame(f"tune received in state {self.state.value}")
            self.state = State.TUNE
            self.frame_max, self.heartbeat = self._negotiate(cmd.frame_max, cmd.heartbeat)
            return
        if cls is Close:
            self.state = State.CLOSE_RECEIVED
            return
        if cls is ConsumerUpdate:
            self._pending[cmd.correlation_id] = cmd  # answered by ConsumerUpdateResponse
            return
        if cls in (Deliver, Heartbeat, Publish) or not getattr(cls, "CORRELATED", False):
            if cls is Deliver:
                left = self.credits.get(cmd.subscription_id)
                if left is None or left <= 0:
                    raise UnknownFrame(f"a deliver for subscription {cmd.subscription_id} "
                                       "without credit")
                self.credits[cmd.subscription_id] = left - 1
            return
        req = self._answered(cmd)
        code = getattr(cmd, "code", Code.OK)
        if cls is PeerPropertiesResponse:
            self.peer_properties = dict(cmd.properties)
            self.state = State.SASL_HANDSHAKE
        elif cls is SaslHandshakeResponse:
            self.state = State.SASL_AUTHENTICATE
        elif cls is SaslAuthenticateResponse:
            if code == Code.OK:
                self.mechanism = req.mechanism
            elif code != Code.SASL_CHALLENGE:
                self.state = State.CLOSED
        elif cls is OpenResponse:
            if code == Code.OK:
                self.open_properties = dict(cmd.properties)
                self.vhost = req.vhost
                self.state = State.OPENED
            else:
                self.state = State.CLOSED
        elif cls is CloseResponse:
            self.state = State.CLOSED
        elif cls is SubscribeResponse:
            if code == Code.OK:
                self.credits[req.subscription_id] = req.credit
        elif cls is UnsubscribeResponse:
            if code == Code.OK:
                self.credits.pop(req.subscription_id, None)
        elif cls is DeclarePublisherResponse:
            if code == Code.OK:
                self.publishers[req.publisher_id] = req.stream
        elif cls is DeletePublisherResponse:
            if code == Code.OK:
                self.publishers.pop(req.publisher_id, None)

    def _negotiate(self, frame_max: int, heartbeat: int) -> tuple:
        """The client's answer to tune. frame_max: the smaller of the two, 0 (no limit) on
        either side meaning the other's (RabbitMQ's ``negotiate_frame_max``; the Java client's
        ``negotiatedMaxValue``). heartbeat: the server's when this client has no preference
        (None), none when it asked for 0, else the smaller (0 from the server: this one's)."""
        want_fm, want_hb = self._want_frame_max, self._want_heartbeat
        fm = frame_max if not want_fm else want_fm if not frame_max else min(frame_max, want_fm)
        if want_hb is None:
            hb = heartbeat
        elif want_hb == 0:
            hb = 0
        else:
            hb = want_hb if not heartbeat else min(heartbeat, want_hb)
        return fm, hb

    # ------------------------------------------------------------------ closing

    def close_frame_for(self, exc: StreamError, reason: str | None = None) -> bytes | None:
        """What to write after ``exc`` was raised for received data: ``None`` before the
        connection is open (RabbitMQ then closes the socket silently), else a ``close`` with
        the error's code (RabbitMQ: ``UNKNOWN_FRAME`` / ``FRAME_TOO_LARGE``)."""
        if self.state is not State.OPENED:
            self.state = State.CLOSED
            return None
        text = reason if reason is not None else exc.text
        return self.send(Close(0, exc.code, text.encode("utf-8")[:200].decode("utf-8", "ignore")))

    # ------------------------------------------------------------------ heartbeats

    def note_received(self) -> None:
        self._last_recv = _monotonic()

    def note_sent(self, when: float | None = None) -> None:
        """Count a write made without :meth:`send` (e.g. a publish frame built elsewhere) at
        monotonic time ``when`` (default now)."""
        self._last_send = _monotonic() if when is None else when

    def heartbeat_action(self, now: float | None = None) -> str | None:
        """``"dead"`` when nothing arrived for two heartbeat intervals, ``"send"`` when
        nothing was sent for half of one, else None (also without heartbeats)."""
        hb = self.heartbeat
        if not hb or self.state is not State.OPENED:
            return None
        now = _monotonic() if now is None else now
        if now - self._last_recv > 2 * hb:
            return "dead"
        if now - self._last_send >= hb / 2:
            return "send"
        return None

    def heartbeat_deadline(self) -> float | None:
        """The monotonic time at which :meth:`heartbeat_action` may next say something."""
        hb = self.heartbeat
        if not hb:
            return None
        return min(self._last_send + hb / 2, self._last_recv + 2 * hb)

    def heartbeat_frame(self) -> bytes:
        """A heartbeat frame (counts as sent)."""
        return self.send(Heartbeat())
