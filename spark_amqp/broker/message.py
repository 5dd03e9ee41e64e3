"""A message inside the broker: routing info, raw content-header properties and body.

Properties are kept as the raw property bytes of the publisher's content header (property
flags + values, 0-9-1 spec §4.2.6.1) and decoded lazily, only when a feature needs them
(persistence, priority, per-message TTL, headers exchange, dead-lettering, quorum delivery
count). Deliveries re-use the raw bytes unchanged, so the common publish → deliver path never
decodes or re-encodes properties.
"""

from __future__ import annotations

import struct

from ..protocol.properties import BasicProperties, decode_properties

__all__ = ["Message", "peek_properties", "route_enc"]

_U16 = struct.Struct(">H")

# flag bits (0-9-1 §basic; protocol.properties table)
F_CONTENT_TYPE = 1 << 15
F_CONTENT_ENCODING = 1 << 14
F_HEADERS = 1 << 13
F_DELIVERY_MODE = 1 << 12
F_PRIORITY = 1 << 11
F_EXPIRATION = 1 << 8
F_USER_ID = 1 << 4
_INTERESTING = F_HEADERS | F_DELIVERY_MODE | F_PRIORITY | F_EXPIRATION | F_USER_ID


def peek_properties(raw: bytes, always: bool = False) -> BasicProperties | None:
    """Decode ``raw`` only when it carries a property the broker acts on, else ``None``.

    ``raw`` is the property-flags short(s) plus values. Raises FrameError (501) /
    AMQPSyntaxError (502) on malformed properties.
    """
    if len(raw) < 2:
        return None
    flags = (raw[0] << 8) | raw[1]
    if not flags & _INTERESTING and not always:
        return None
    return decode_properties(raw, 0, len(raw))


class Message:
    """One message as held by one queue (a fan-out copies the object, never the body).

    Attributes:
        exchange, routing_key: where it was published (str).
        props_raw: raw property bytes (flags + values) as received (bytes).
        body: the body (bytes).
        persistent: delivery-mode 2 (bool).
        priority: the priority property or 0 (int).
        enc: the exchange and routing key as two AMQP short strings (bytes), reused in
            basic.deliver / get-ok / return frames.
        expires_at: monotonic deadline in seconds, or None (per-message / queue TTL).
        redelivered: delivered before and requeued (bool).
        delivery_count: failed deliveries so far (quorum queues' x-delivery-count).
        dead_lettered: made by the broker's dead-lettering (its x-death header is the
            broker's, which RabbitMQ 4.x continues; a published one it does not interpret).
        acquired_count: returns of any kind so far (RabbitMQ 4.3 quorum queues'
            x-acquired-count; not kept in the durable store).
        seq: enqueue order inside its queue (int) - requeued messages go back by it.
        store_id: the row id in the durable store, or None when not persisted.
        props: the decoded :class:`BasicProperties` (decoded on first access).
    """

    __slots__ = ("exchange", "routing_key", "props_raw", "body", "persistent", "priority",
                 "expires_at", "redelivered", "delivery_count", "acquired_count", "dead_lettered", "seq", "store_id", "_props",
                 "ttl_ms", "enc")

    def __init__(self, exchange: str, routing_key: str, props_raw: bytes, body: bytes,
                 props: BasicProperties | None = None):
        self.exchange = exchange
        self.routing_key = routing_key
        self.props_raw = props_raw
        self.body = body
        self._props = props
        self.persistent = False
        self.priority = 0
        self.ttl_ms = None
        if props is not None:
            self.persistent = props.delivery_mode == 2
            p = props.priority
            self.priority = p if p else 0
            exp = props.expiration
            if exp is not None:
                self.ttl_ms = _parse_expiration(exp)
        self.expires_at = None
        self.redelivered = False
        self.delivery_count = 0
        self.acquired_count = 0
        self.dead_lettered = False
        self.seq = 0
        self.store_id = None
        self.enc = None

    @property
    def props(self) -> BasicProperties:
        p = self._props
        if p is None:
            raw = self.props_raw
            p = self._props = decode_properties(raw, 0, len(raw)) if len(raw) >= 2 else BasicProperties()
        return p

    def set_props(self, props: BasicProperties) -> None:
        """Replace the properties (re-encodes ``props_raw``)."""
        self._props = props
        self.props_raw = props.encode()

    def copy(self) -> "Message":
        """A shallow copy for another queue (body and properties shared)."""
        m = Message.__new__(Message)
        m.exchange = self.exchange
        m.routing_key = self.routing_key
        m.props_raw = self.props_raw
        m.body = self.body
        m._props = self._props
        m.persistent = self.persistent
        m.priority = self.priority
        m.ttl_ms = self.ttl_ms
        m.expires_at = None
        m.redelivered = False
        m.delivery_count = 0
        m.acquired_count = 0
        m.dead_lettered = self.dead_lettered
        m.seq = 0
        m.store_id = None
        m.enc = self.enc
        return m


def route_enc(exchange: str, routing_key: str) -> bytes:
    """Exchange and routing key as two AMQP short strings (the tail of deliver/return frames)."""
    e = exchange.encode("utf-8")
    r = routing_key.encode("utf-8")
    return bytes((len(e),)) + e + bytes((len(r),)) + r


def _parse_expiration(value: str) -> int:
    """RabbitMQ's per-message TTL: a non-negative integer of milliseconds as a string.

    RabbitMQ answers anything else with 406 PRECONDITION_FAILED "invalid expiration".
    """
    from ..protocol.errors import PreconditionFailed

    try:
        ms = int(value)
    except (TypeError, ValueError):
        raise PreconditionFailed(f"invalid expiration '{value}': must be a non-negative integer of milliseconds", 60, 40) from None
    if ms < 0:
        raise PreconditionFailed(f"invalid expiration '{value}': must be a non-negative integer of milliseconds", 60, 40)
    return ms
