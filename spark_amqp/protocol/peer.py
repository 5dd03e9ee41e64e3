"""Which protocol a server speaks, from the first bytes it answered with (sans-IO).

A client pointed at the wrong port used to fail deep in its codec: the management port's
``HTTP/1.1 400 Bad Request`` read as an AMQP frame header gave ``FrameError (501): frame of
1345270070 bytes on channel 21588 exceeds frame-max`` (``b"P/1."`` and ``b"TT"``). The
clients (:mod:`spark_amqp.client.handshake` for AMQP 0-9-1, the stream-protocol client's
handshake) look at the first bytes the server sends with :func:`identify` before decoding
them, and raise :func:`wrong_protocol_message`'s text instead.

What each signature is:

* ``HTTP/`` — an HTTP/1.x status line (RFC 9112 §4): an HTTP server (RabbitMQ's management
  plugin on 15672, Prometheus on 15692) answers the bytes it cannot parse with ``400``.
* a TLS record header (RFC 8446 §5.1, RFC 5246 §6.2.1): content type 20-23 (an alert, 21, is
  what a TLS server sends for a plain-text hello), then the legacy version ``0x03 0x00..0x04``.
* ``AMQP`` + 4 bytes — an AMQP protocol header (0-9-1 spec §4.2.2: a server that does not
  speak the client's version answers with its own): ``AMQP 0 0 9 1`` is 0-9-1,
  ``AMQP 0 1 0 0`` / ``AMQP 3 1 0 0`` AMQP 1.0 (plain / SASL layer, OASIS AMQP 1.0 §2.2).

No I/O: bytes in, a name or a sentence out.
"""

from __future__ import annotations

__all__ = ["identify", "wrong_protocol_message", "closed_before_answer_hint", "HTTP", "TLS",
           "AMQP091", "AMQP10", "STREAM", "USUAL_PORTS", "RABBITMQ_PORTS"]

HTTP = "HTTP"
TLS = "TLS"
AMQP091 = "AMQP 0-9-1"
AMQP10 = "AMQP 1.0"
STREAM = "the stream protocol"

#: the ports RabbitMQ uses for each protocol by default (RabbitMQ docs "Networking": 5672/5671
#: AMQP 0-9-1 and 1.0 plain/TLS, 5552/5551 the stream protocol, 15672 the management API)
USUAL_PORTS = {AMQP091: "5672 (5671 with TLS)", STREAM: "5552 (5551 with TLS)",
               HTTP: "15672 (the management API)"}

#: RabbitMQ's default ports (RabbitMQ docs "Networking", "Port Access"): what a client of
#: another protocol meets there. RabbitMQ 3.10.8's management and stream listeners close a
#: connection whose first bytes they cannot parse without answering (tried), so the port number
#: is all there is to tell the user.
RABBITMQ_PORTS = {5672: (AMQP091, "AMQP 0-9-1's port"),
                  5671: (AMQP091, "AMQP 0-9-1's TLS port (amqps://)"),
                  5552: (STREAM, "the stream protocol's port"),
                  5551: (STREAM, "the stream protocol's TLS port"),
                  15672: (HTTP, "RabbitMQ's management port (HTTP)"),
                  15671: (HTTP, "RabbitMQ's management port (HTTPS)"),
                  15692: (HTTP, "RabbitMQ's Prometheus port (HTTP)")}


def identify(data: bytes) -> str | None:
    """The protocol the first bytes ``data`` a server sent are in: :data:`HTTP`, :data:`TLS`,
    :data:`AMQP091`, :data:`AMQP10`, ``"AMQP x-y-z"`` for another AMQP header, or None when
    they are none of these (the caller's own protocol, or unknown). Needs at least 5 bytes for
    HTTP and TLS and 8 for an AMQP header; fewer give None."""
    head = bytes(data[:8])
    if head[:5] == b"HTTP/":
        return HTTP
    if len(head) >= 3 and head[0] in (20, 21, 22, 23) and head[1] == 3 and head[2] <= 4:
        return TLS
    if head[:4] == b"AMQP" and len(head) == 8:
        if head[4:] == b"\x00\x00\x09\x01":
            return AMQP091
        if head[4:] in (b"\x00\x01\x00\x00", b"\x03\x01\x00\x00"):
            return AMQP10
        return "AMQP " + "-".join(str(b) for b in head[4:])
    return None


def wrong_protocol_message(data: bytes, where: str, expected: str) -> str | None:
    """The error text for a server at ``where`` (a redacted URI or ``host:port``) that answered
    a client of ``expected`` (:data:`AMQP091` or ``"the stream protocol"``) with ``data``, or
    None when :func:`identify` does not recognise another protocol (the caller decodes as
    usual). The text names what the server spoke, what it likely is and the usual port of
    ``expected``."""
    peer = identify(data)
    if peer is None or peer == expected:
        return None
    usual = _usual(expected)
    if peer == HTTP:
        line = bytes(data).split(b"\r\n", 1)[0][:60].decode("ascii", "replace")
        return (f"the server at {where} answered in HTTP ({line!r}), not {expected}: is this "
                f"the management port?{usual}")
    if peer == TLS:
        return (f"the server at {where} answered with a TLS record, not {expected}: it is a "
                f"TLS port; connect with TLS (amqps://, tls=True) or to the plain port.{usual}")
    if peer == AMQP091:
        return (f"the server at {where} speaks AMQP 0-9-1, not {expected}: is this the AMQP "
                f"port?{usual}")
    return (f"the server at {where} does not speak {expected}: it answered with the protocol "
            f"header {bytes(data[:8])!r} ({peer}).{usual}")


def closed_before_answer_hint(port: int, expected: str) -> str:
    """What to add to "the server closed the connection before answering" for a client of
    ``expected`` (:data:`AMQP091`, :data:`STREAM`) at ``port``: the port's role when it is
    one of :data:`RABBITMQ_PORTS` of another protocol, else that a TLS port or another
    protocol's server closes a connection so; then the usual port of ``expected``. Starts
    with ``": "``."""
    proto, role = RABBITMQ_PORTS.get(int(port), (None, ""))
    if proto is not None and proto != expected:
        what = f"port {port} is {role} by default, which closes a connection it cannot parse"
    elif role.endswith("TLS port (amqps://)") or role.endswith("TLS port"):
        what = f"port {port} is {role} by default: connect with TLS"
    else:
        what = ("a TLS port closes a plain connection so (connect with TLS: amqps://, "
                "tls=True), and so do RabbitMQ's management and stream ports")
    return f": {what}.{_usual(expected)}"


def _usual(expected: str) -> str:
    usual = USUAL_PORTS.get(expected)
    return f" {expected[0].upper()}{expected[1:]} is usually on port {usual}." if usual else ""
