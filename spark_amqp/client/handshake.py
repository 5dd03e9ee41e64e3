"""The client's connection negotiation (AMQP 0-9-1 spec §2.2.4): protocol header,
start/start-ok, [secure/secure-ok]*, tune/tune-ok, open/open-ok, driven through the sans-IO
state machine (:class:`~spark_amqp.protocol.connection.AMQPConnection`), which checks the
order and the tune-ok values and applies the negotiated frame-max to its decoder.

:func:`negotiate` runs in the connecting thread before the connection's I/O thread starts: it
reads the socket itself and writes through a ``write(bytes)`` callable. What the broker says
it needs (SASL mechanism, tune values) is decided here; the connection only stores the
:class:`Negotiated` result.

Sources: AMQP 0-9-1 spec §2.2.4 and §connection.tune-ok (the lower non-zero value, 0 = no
limit); RabbitMQ docs "Connections", "Client Capabilities", "Authentication Failure
Notifications" (``authentication_failure_close``), "Detecting Dead TCP Connections with
Heartbeats" (the heartbeat negotiation), and its rabbitmq_auth_mechanism_ssl plugin
(EXTERNAL).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from .._version import __version__
from ..protocol import MethodFrame, encode_table, spec
from ..protocol.connection import AMQPConnection, error_from_close
from ..protocol.errors import AccessRefused
from ..protocol.peer import AMQP091, closed_before_answer_hint, wrong_protocol_message
from .errors import ConnectionLost, ProtocolMismatch, close_text, connection_level
from .transport import Transport
from .uri import ConnectionParameters

__all__ = ["CLIENT_CAPABILITIES", "Negotiated", "negotiate", "negotiate_value",
           "auth_response"]

#: Capabilities announced in connection.start-ok (RabbitMQ docs "Client Capabilities").
CLIENT_CAPABILITIES = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
}

_Close = spec.Connection.Close
_CloseOk = spec.Connection.CloseOk


@dataclass
class Negotiated:
    """What the negotiation settled.

    Attributes:
        server_properties: dict from ``connection.start`` (product, version, capabilities).
        channel_max: highest channel number (1..65535; a negotiated 0, no limit, is 65535).
        frame_max: bytes, framing included (0 = no limit).
        heartbeat: seconds (0 = off).
        events: frames the broker sent after ``open-ok`` in the same read (none expected),
            for the connection to dispatch.
    """

    server_properties: dict
    channel_max: int
    frame_max: int
    heartbeat: int
    events: list = field(default_factory=list)


def negotiate(tr: Transport, sm: AMQPConnection, p: ConnectionParameters, where: str,
              write: Callable[[bytes], None]) -> Negotiated:
    """Run the negotiation on the open transport ``tr`` (TLS already set up) with the
    client-role state machine ``sm`` (not yet initiated); ``write`` sends bytes (under the
    connection's write lock); ``where`` names the broker in messages (a redacted URI).

    Raises:
        ProtocolMismatch: the server answered with another protocol header, in HTTP (the
            management port) or with a TLS record (a TLS port): :mod:`..protocol.peer`.
        AccessRefused: no SASL mechanism in common, a refused login (403, from the broker's
            connection.close), or a socket closed during authentication (a probable bad
            login, or a failing network/broker: the message says both).
        the broker's typed error: any other connection.close during the negotiation (e.g.
            NotAllowed 530 for the vhost); connection-close-ok is answered first.
        ConnectionLost: EOF at another step, or a frame out of order.
        OSError / TimeoutError: from the socket (the caller maps them).
    """
    reader = _MethodReader(tr, sm, where, p.username, write)
    write(sm.initiate())
    start = reader.next_method("connection.start")
    if type(start) is not spec.Connection.Start:
        raise ConnectionLost(f"expected connection.start from {where}, got {start.NAME}")
    server_properties = start.server_properties or {}
    offered = start.mechanisms.decode("utf-8", "replace").split()
    for mech in p.auth_mechanisms:
        if mech in offered:
            break
    else:
        raise connection_level(AccessRefused(
            f"the broker at {where} offers SASL mechanisms {offered}; none of the requested "
            f"{list(p.auth_mechanisms)} (auth_mechanism): change auth_mechanism or enable "
            "the mechanism on the broker"))
    reader.mechanism = mech
    props = {
        "product": "spark-amqp",
        "version": __version__,
        "platform": "Python",
        "capabilities": dict(CLIENT_CAPABILITIES),
    }
    props.update(p.client_properties)
    response = auth_response(mech, p.username, p.password)
    write(sm.send_method(0, spec.Connection.StartOk(props, mech, response, "en_US")))
    m = reader.next_method("connection.tune")
    while type(m) is spec.Connection.Secure:
        # PLAIN/AMQPLAIN/EXTERNAL need no challenge round; answer with the same response
        write(sm.send_method(0, spec.Connection.SecureOk(response)))
        m = reader.next_method("connection.tune")
    if type(m) is not spec.Connection.Tune:
        raise ConnectionLost(f"expected connection.tune from {where}, got {m.NAME}")
    # spec §connection.tune-ok: the lower non-zero value; 0 = no limit
    wire_channel_max = negotiate_value(p.channel_max, m.channel_max)
    frame_max = negotiate_value(p.frame_max, m.frame_max)
    if p.heartbeat is None:
        hb = m.heartbeat  # accept the server's proposal (RabbitMQ: 60 s)
    elif p.heartbeat == 0:
        hb = 0  # disabled on request, as pika does; RabbitMQ accepts tune-ok heartbeat 0
    else:
        hb = min(p.heartbeat, m.heartbeat) if m.heartbeat else p.heartbeat
    write(sm.send_method(0, spec.Connection.TuneOk(wire_channel_max, frame_max, hb)))
    write(sm.send_method(0, spec.Connection.Open(p.vhost, "", False)))
    m = reader.next_method("connection.open-ok")
    if type(m) is not spec.Connection.OpenOk:
        raise ConnectionLost(f"expected connection.open-ok from {where}, got {m.NAME}")
    return Negotiated(server_properties, wire_channel_max or 65535, frame_max, hb,
                      list(reader.events))


class _MethodReader:
    """Reads the broker's channel-0 methods one by one during the negotiation."""

    def __init__(self, tr: Transport, sm: AMQPConnection, where: str, username: str,
                 write: Callable[[bytes], None]):
        self.tr, self.sm, self.where, self.username, self.write = tr, sm, where, username, write
        self.events: deque = deque()
        self.first = True
        self.mechanism = ""  # the SASL mechanism chosen, once start-ok is sent

    def next_method(self, expect: str):
        """The next method frame's method (``expect`` names it for messages). A
        ``connection.close`` is answered with close-ok and raised as its typed error."""
        events = self.events
        while not events:
            events.extend(self.sm.receive_data(self._read(expect)))
        ev = events.popleft()
        if not isinstance(ev, MethodFrame) or ev.channel != 0:
            raise ConnectionLost(f"unexpected frame {ev!r} from {self.where} during the "
                                 "handshake")
        m = ev.method
        if type(m) is _Close:
            self.write(self.sm.send_method(0, _CloseOk()))
            err = error_from_close(m)
            err.reply_text = close_text(m, self.where)
            raise err
        return m

    def _read(self, expect: str) -> bytes:
        tr, where = self.tr, self.where
        while True:
            data = tr.recv()
            if data or tr.eof:
                break
            # TLS: a partial record
        if not data:
            if expect in ("connection.tune", "connection.secure"):
                # brokers without the authentication_failure_close capability (RabbitMQ < 3.2,
                # others) drop the socket on a bad login, but so does a failing network or
                # broker: say both (pika raises the same guess, ProbableAuthenticationError).
                # RabbitMQ with the capability sends connection.close 403 ACCESS_REFUSED
                # first, handled in next_method.
                raise connection_level(AccessRefused(
                    f"the broker at {where} closed the connection during authentication: user "
                    f"{self.username!r} or its password is probably wrong (mechanism "
                    f"{self.mechanism}), or the network/broker failed"))
            hint = (closed_before_answer_hint(_peer_port(tr), AMQP091)
                    if expect == "connection.start" else "")
            raise ConnectionLost(f"the broker at {where} closed the connection while this "
                                 f"client waited for {expect}{hint}")
        if self.first:
            # the first bytes tell another protocol (an HTTP status line, a TLS alert, another
            # AMQP header) before they are decoded as a frame (protocol/peer.py)
            while len(data) < 8:
                more = tr.recv()
                if more:
                    data += more
                elif tr.eof:  # TCP: an empty recv() is the end; TLS: a partial record
                    break
            self.first = False
            text = wrong_protocol_message(data, where, AMQP091)
            if text:
                raise ProtocolMismatch(text)
        return data


def _peer_port(tr: Transport) -> int:
    """The remote port of ``tr``'s socket (0 when the socket cannot say)."""
    try:
        return int(tr.sock.getpeername()[1])
    except (OSError, AttributeError, IndexError):
        return 0


def negotiate_value(client: int, server: int) -> int:
    """Lower non-zero of the two (0 = no limit) — spec §connection.tune-ok."""
    if not client:
        return server
    if not server:
        return client
    return min(client, server)


def auth_response(mechanism: str, username: str, password: str) -> bytes:
    """SASL response: PLAIN (RFC 4616: ``\\0user\\0password``), EXTERNAL (empty: identity
    from the client certificate, RabbitMQ's rabbitmq_auth_mechanism_ssl plugin), AMQPLAIN
    (a field table LOGIN/PASSWORD without its length prefix, RabbitMQ docs).

    Raises ``ValueError`` for another mechanism."""
    if mechanism == "PLAIN":
        return b"\x00" + username.encode("utf-8") + b"\x00" + password.encode("utf-8")
    if mechanism == "EXTERNAL":
        return b""
    if mechanism == "AMQPLAIN":
        return encode_table({"LOGIN": username, "PASSWORD": password})[4:]
    raise ValueError(f"unsupported auth mechanism {mechanism!r}")
