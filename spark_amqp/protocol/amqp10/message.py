"""The AMQP 1.0 message format (OASIS AMQP 1.0 part 3 §3.2): sections, encode and decode.

A message is a sequence of described sections: header (0x70), delivery-annotations (0x71),
message-annotations (0x72) — the annotated part — then the bare message: properties (0x73),
application-properties (0x74), the body (one or more data sections 0x75, one or more
amqp-sequence sections 0x76, or one amqp-value 0x77), and a footer (0x78). It is what a
RabbitMQ stream stores for each message, whichever protocol wrote it (``mc_amqp.erl``,
``rabbit_msg_record.erl``), and what the stream protocol delivers.

:class:`Message` holds the decoded sections; :func:`encode_message` / :func:`decode_message`
convert. :func:`scan_sections` finds the sections' byte ranges without decoding them (the
broker converts by section). Values use the types of :mod:`.types`.
"""

from __future__ import annotations

from typing import Any

from .types import (RABBIT_4, DecodeError, Described, Encoder, EncodeError, Symbol, Timestamp,
                    UByte, UInt, ULong, decode_value, skip_value)

__all__ = ["Header", "Properties", "Message", "encode_message", "decode_message", "scan_sections",
           "HEADER", "DELIVERY_ANNOTATIONS", "MESSAGE_ANNOTATIONS", "PROPERTIES",
           "APPLICATION_PROPERTIES", "DATA", "AMQP_SEQUENCE", "AMQP_VALUE", "FOOTER",
           "SECTION_NAMES", "BODY_DATA", "BODY_VALUE", "BODY_SEQUENCE"]

# section descriptor codes (§3.2: 0x00000000:0x00000070 ... 0x78)
HEADER = 0x70
DELIVERY_ANNOTATIONS = 0x71
MESSAGE_ANNOTATIONS = 0x72
PROPERTIES = 0x73
APPLICATION_PROPERTIES = 0x74
DATA = 0x75
AMQP_SEQUENCE = 0x76
AMQP_VALUE = 0x77
FOOTER = 0x78

#: symbolic descriptors of the sections (§3.2), accepted on decode like the codes
SECTION_NAMES = {
    "amqp:header:list": HEADER, "amqp:delivery-annotations:map": DELIVERY_ANNOTATIONS,
    "amqp:message-annotations:map": MESSAGE_ANNOTATIONS, "amqp:properties:list": PROPERTIES,
    "amqp:application-properties:map": APPLICATION_PROPERTIES, "amqp:data:binary": DATA,
    "amqp:amqp-sequence:list": AMQP_SEQUENCE, "amqp:amqp-value:*": AMQP_VALUE,
    "amqp:footer:map": FOOTER,
}

BODY_DATA = "data"
BODY_VALUE = "value"
BODY_SEQUENCE = "sequence"


def _coerce(kind, v):
    """A header/properties field value in its AMQP type (None stays None)."""
    if v is None:
        return None
    if kind is bool:
        return bool(v)
    if kind is bytes:
        return v.encode("utf-8") if isinstance(v, str) else bytes(v)
    if kind is str:
        return v if isinstance(v, str) else str(v)
    if kind is Timestamp:
        if isinstance(v, Timestamp):
            return v
        if hasattr(v, "tzinfo"):
            return Timestamp.from_datetime(v)
        return Timestamp(v)
    if kind is None:                          # message-id / correlation-id: kept as given
        return v
    return v if type(v) is kind else kind(v)


class _Composite:
    """A section that is a described list of fields (header, properties)."""

    __slots__ = ()
    FIELDS: tuple = ()
    KINDS: tuple = ()
    CODE = 0

    def __init__(self, *args, **kwargs):
        if len(args) > len(self.FIELDS):
            raise TypeError(f"{type(self).__name__} takes at most {len(self.FIELDS)} fields")
        for name in self.FIELDS:
            object.__setattr__(self, name, None)
        for name, v in zip(self.FIELDS, args):
            object.__setattr__(self, name, v)
        for name, v in kwargs.items():
            if name not in self.FIELDS:
                raise TypeError(f"{type(self).__name__} has no field {name!r}")
            object.__setattr__(self, name, v)

    def values(self) -> list:
        """The field values in wire order, in their AMQP types."""
        return [_coerce(k, getattr(self, n)) for n, k in zip(self.FIELDS, self.KINDS)]

    def is_empty(self) -> bool:
        return all(getattr(self, n) is None for n in self.FIELDS)

    def as_dict(self) -> dict:
        """The fields that are set, by name."""
        return {n: getattr(self, n) for n in self.FIELDS if getattr(self, n) is not None}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in self.FIELDS)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.as_dict().items())})"

    @classmethod
    def from_list(cls, fields: list):
        """The section from its decoded field list (missing trailing fields: None)."""
        if len(fields) > len(cls.FIELDS):
            raise DecodeError(f"AMQP 1.0 {cls.__name__.lower()} section with {len(fields)} fields "
                              f"(at most {len(cls.FIELDS)})")
        s = cls.__new__(cls)
        for i, name in enumerate(cls.FIELDS):
            object.__setattr__(s, name, fields[i] if i < len(fields) else None)
        return s


class Header(_Composite):
    """The header section (§3.2.1): ``durable`` (bool), ``priority`` (0..255), ``ttl``
    (milliseconds), ``first_acquirer`` (bool), ``delivery_count``; None = absent (the spec's
    defaults: false, 4, none, false, 0)."""

    __slots__ = ("durable", "priority", "ttl", "first_acquirer", "delivery_count")
    FIELDS = __slots__
    KINDS = (bool, UByte, UInt, bool, UInt)
    CODE = HEADER


class Properties(_Composite):
    """The properties section (§3.2.4), the immutable properties of the bare message:
    ``message_id`` / ``correlation_id`` (str, bytes, ``uuid.UUID`` or :class:`~.types.ULong`),
    ``user_id`` (bytes), ``to``, ``subject``, ``reply_to`` (str), ``content_type``,
    ``content_encoding`` (:class:`~.types.Symbol`), ``absolute_expiry_time``, ``creation_time``
    (:class:`~.types.Timestamp`: ms since the epoch; a ``datetime`` is converted),
    ``group_id`` (str), ``group_sequence`` (uint), ``reply_to_group_id`` (str)."""

    __slots__ = ("message_id", "user_id", "to", "subject", "reply_to", "correlation_id",
                 "content_type", "content_encoding", "absolute_expiry_time", "creation_time",
                 "group_id", "group_sequence", "reply_to_group_id")
    FIELDS = __slots__
    KINDS = (None, bytes, str, str, str, None, Symbol, Symbol, Timestamp, Timestamp, str, UInt, str)
    CODE = PROPERTIES


class Message:
    """An AMQP 1.0 message: its sections, each None when absent.

    ``header`` (:class:`Header`), ``delivery_annotations``, ``message_annotations`` (dicts of
    :class:`~.types.Symbol` keys), ``properties`` (:class:`Properties`),
    ``application_properties`` (dict of str keys), the body and ``footer`` (dict).

    The body: ``body_type`` :data:`BODY_DATA` (``body`` is ``bytes`` for one data section, a
    list of ``bytes`` for several), :data:`BODY_VALUE` (``body`` is the amqp-value's value) or
    :data:`BODY_SEQUENCE` (``body`` is a list of amqp-sequence sections, each a list).
    ``Message(b"...")`` is a message of one data section.
    """

    __slots__ = ("header", "delivery_annotations", "message_annotations", "properties",
                 "application_properties", "body", "body_type", "footer")

    def __init__(self, body: Any = b"", *, body_type: str = BODY_DATA, header: Header | None = None,
                 delivery_annotations: dict | None = None, message_annotations: dict | None = None,
                 properties: Properties | None = None, application_properties: dict | None = None,
                 footer: dict | None = None):
        if body_type not in (BODY_DATA, BODY_VALUE, BODY_SEQUENCE):
            raise ValueError(f"body_type must be {BODY_DATA!r}, {BODY_VALUE!r} or {BODY_SEQUENCE!r}")
        self.header = header
        self.delivery_annotations = delivery_annotations
        self.message_annotations = message_annotations
        self.properties = properties
        self.application_properties = application_properties
        self.body = body
        self.body_type = body_type
        self.footer = footer

    @property
    def data(self) -> bytes:
        """The body's bytes: the data sections joined (``TypeError`` for another body type)."""
        if self.body_type != BODY_DATA:
            raise TypeError(f"the message body is an amqp-{self.body_type}, not data sections")
        b = self.body
        return b if isinstance(b, bytes) else b"".join(b)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Message) and all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __repr__(self) -> str:
        parts = [f"{n}={getattr(self, n)!r}" for n in self.__slots__
                 if getattr(self, n) is not None and n not in ("body", "body_type")]
        body = self.body
        if isinstance(body, (bytes, bytearray)) and len(body) > 64:
            body = bytes(body[:64]) + b"..."
        return f"Message({body!r}, body_type={self.body_type!r}{''.join(', ' + p for p in parts)})"

    def encode(self, encoder: Encoder = RABBIT_4) -> bytes:
        """The encoded message (:func:`encode_message`)."""
        return encode_message(self, encoder)


# ---------------------------------------------------------------------------------- encoding

_SECTION_HEAD = {code: bytes((0x00, 0x53, code)) for code in range(HEADER, FOOTER + 1)}


def encode_section(out: bytearray, code: int, value: Any, encoder: Encoder = RABBIT_4) -> None:
    """Append the section ``code`` (0x70..0x78) holding ``value`` (already in its AMQP types:
    a list for header/properties/amqp-sequence, a dict for annotations/application-properties/
    footer, bytes for data, any value for amqp-value) to ``out``."""
    out += _SECTION_HEAD[code]
    encoder.write(out, value)


def composite_fields(section: _Composite, trim: bool = True) -> list:
    """The field list of a header/properties section; ``trim``: without trailing nulls
    (RabbitMQ 4.x, ``encode_fields_omit_trailing_null``; 3.10 sends all fields)."""
    vals = section.values()
    if trim:
        while vals and vals[-1] is None:
            vals.pop()
    return vals


def encode_message(msg: Message, encoder: Encoder = RABBIT_4, trim: bool = True) -> bytes:
    """The AMQP 1.0 encoding of ``msg``: its sections in the order of §3.2, absent ones (None)
    omitted. A header or properties section with no field set is omitted as RabbitMQ does
    (``mc_amqp:omit/1``), and so are empty annotation / application-properties / footer maps.
    Raises :class:`~.types.EncodeError` for a value with no encoding."""
    out = bytearray()
    h = msg.header
    if h is not None and not h.is_empty():
        encode_section(out, HEADER, composite_fields(h, trim), encoder)
    for code, m in ((DELIVERY_ANNOTATIONS, msg.delivery_annotations), (MESSAGE_ANNOTATIONS, msg.message_annotations)):
        if m:
            encode_section(out, code, _annotations(m), encoder)
    p = msg.properties
    if p is not None and not p.is_empty():
        encode_section(out, PROPERTIES, composite_fields(p, trim), encoder)
    if msg.application_properties:
        encode_section(out, APPLICATION_PROPERTIES, msg.application_properties, encoder)
    body = msg.body
    bt = msg.body_type
    if bt == BODY_DATA:
        if isinstance(body, (bytes, bytearray, memoryview)):
            encode_section(out, DATA, body, encoder)
        else:
            for b in body:
                encode_section(out, DATA, bytes(b), encoder)
    elif bt == BODY_VALUE:
        encode_section(out, AMQP_VALUE, body, encoder)
    else:
        for seq in body:
            encode_section(out, AMQP_SEQUENCE, list(seq), encoder)
    if msg.footer:
        encode_section(out, FOOTER, _annotations(msg.footer), encoder)
    return bytes(out)


def _annotations(m: dict) -> dict:
    """Annotation keys are symbols (or ulongs): plain ``str`` keys become symbols."""
    if all(type(k) is not str for k in m):
        return m
    return {(Symbol(k) if type(k) is str else k): v for k, v in m.items()}


# ---------------------------------------------------------------------------------- decoding

def _section_code(descriptor) -> int:
    if isinstance(descriptor, int) and HEADER <= descriptor <= FOOTER:
        return int(descriptor)
    if isinstance(descriptor, str):
        code = SECTION_NAMES.get(str(descriptor))
        if code is not None:
            return code
    raise DecodeError(f"not an AMQP 1.0 message section: descriptor {descriptor!r}")


def scan_sections(buf, start: int = 0, end: int | None = None) -> list[tuple[int, int, int, int]]:
    """The sections of the message at ``buf[start:end]`` without decoding their values:
    a list of ``(code, section start, value start, section end)``. Raises
    :class:`~.types.DecodeError` when the bytes are not a sequence of described sections."""
    if end is None:
        end = len(buf)
    out = []
    pos = start
    while pos < end:
        if buf[pos] != 0x00:
            raise DecodeError(f"AMQP 1.0 message section expected at {pos}: constructor 0x{buf[pos]:02x}, "
                              f"not a described type (0x00)")
        if pos + 3 <= end and buf[pos + 1] == 0x53:
            code = buf[pos + 2]
            vpos = pos + 3
            if not HEADER <= code <= FOOTER:
                raise DecodeError(f"not an AMQP 1.0 message section: descriptor 0x{code:02x}")
        else:
            descriptor, vpos = decode_value(buf, pos + 1, end)
            code = _section_code(descriptor)
        stop = skip_value(buf, vpos, end)
        out.append((code, pos, vpos, stop))
        pos = stop
    return out


def decode_message(buf, start: int = 0, end: int | None = None) -> Message:
    """Decode the AMQP 1.0 message at ``buf[start:end]`` (``bytes``, ``bytearray`` or
    ``memoryview``; default: all of it).

    Sections may come in any order (a later one of a kind replaces an earlier one, body
    sections accumulate). Raises :class:`~.types.DecodeError` for malformed bytes, a
    descriptor that is not a section, a section of the wrong shape, or no body."""
    if end is None:
        end = len(buf)
    msg = Message.__new__(Message)
    msg.header = msg.delivery_annotations = msg.message_annotations = None
    msg.properties = msg.application_properties = msg.footer = None
    body: list = []
    body_type = None
    pos = start
    while pos < end:
        v, pos = decode_value(buf, pos, end)
        if type(v) is not Described:
            raise DecodeError(f"AMQP 1.0 message section expected, got {type(v).__name__}")
        code = _section_code(v.descriptor)
        val = v.value
        if code == DATA:
            if not isinstance(val, bytes):
                raise DecodeError("AMQP 1.0 data section does not hold binary")
            _body_kind(body_type, BODY_DATA)
            body_type = BODY_DATA
            body.append(val)
        elif code == AMQP_SEQUENCE:
            if not isinstance(val, list):
                raise DecodeError("AMQP 1.0 amqp-sequence section does not hold a list")
            _body_kind(body_type, BODY_SEQUENCE)
            body_type = BODY_SEQUENCE
            body.append(val)
        elif code == AMQP_VALUE:
            if body_type is not None:
                raise DecodeError("AMQP 1.0 message with an amqp-value section beside another body section")
            body_type = BODY_VALUE
            body.append(val)
        elif code in (HEADER, PROPERTIES):
            if val is None:
                val = []
            if not isinstance(val, list):
                raise DecodeError(f"AMQP 1.0 section 0x{code:02x} does not hold a list")
            if code == HEADER:
                msg.header = Header.from_list(val)
            else:
                msg.properties = Properties.from_list(val)
        else:
            if val is None:
                val = {}
            if not isinstance(val, dict):
                raise DecodeError(f"AMQP 1.0 section 0x{code:02x} does not hold a map")
            name = _MAP_SECTIONS[code]
            setattr(msg, name, val)
    if body_type is None:
        raise DecodeError("AMQP 1.0 message without a body section (data, amqp-sequence or amqp-value)")
    msg.body_type = body_type
    if body_type == BODY_DATA:
        msg.body = body[0] if len(body) == 1 else body
    elif body_type == BODY_VALUE:
        msg.body = body[0]
    else:
        msg.body = body
    return msg


_MAP_SECTIONS = {DELIVERY_ANNOTATIONS: "delivery_annotations", MESSAGE_ANNOTATIONS: "message_annotations",
                 APPLICATION_PROPERTIES: "application_properties", FOOTER: "footer"}


def _body_kind(have, want) -> None:
    if have is not None and have != want:
        raise DecodeError(f"AMQP 1.0 message mixes body sections: amqp-{want} after {have}")


# re-exported for callers that build sections by hand
__all__ += ["encode_section", "composite_fields", "ULong", "EncodeError"]
