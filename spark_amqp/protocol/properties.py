"""Basic content properties (the content header of class 60), all 14 of them.

Order, types and flag bits from the 0-9-1 reference [002] §basic and the digest's table 2.3:
the first property is flag bit 15 of the first property-flags short; bit 0 of a flags word
means another flags word follows. Absent properties are ``None``.

=================  =========  ====  ======================================================
property           type       bit   Python value
=================  =========  ====  ======================================================
content_type       shortstr   15    str
content_encoding   shortstr   14    str
headers            table      13    dict (see :mod:`spark_amqp.protocol.values`)
delivery_mode      octet      12    int (1 transient, 2 persistent)
priority           octet      11    int (0-9; RabbitMQ up to 255 with x-max-priority)
correlation_id     shortstr   10    str
reply_to           shortstr    9    str
expiration         shortstr    8    str (RabbitMQ: per-message TTL in milliseconds)
message_id         shortstr    7    str
timestamp          timestamp   6    int, POSIX seconds
type               shortstr    5    str
user_id            shortstr    4    str (RabbitMQ checks it against the login user)
app_id             shortstr    3    str
cluster_id         shortstr    2    str (reserved in 0-9-1, "must be empty")
=================  =========  ====  ======================================================
"""

from __future__ import annotations

import os
import struct
from itertools import repeat
from typing import Any

from . import compiled
from . import values as _values
from .errors import AMQPSyntaxError
from .property_codec import property_codec

__all__ = ["BasicProperties", "PROPERTIES", "decode_properties", "properties_decoder",
           "EncodedProperties", "encode_delivery_mode_and_ids", "property_flag"]

PROPERTIES: tuple[tuple[str, str], ...] = (
    ("content_type", "shortstr"),
    ("content_encoding", "shortstr"),
    ("headers", "table"),
    ("delivery_mode", "octet"),
    ("priority", "octet"),
    ("correlation_id", "shortstr"),
    ("reply_to", "shortstr"),
    ("expiration", "shortstr"),
    ("message_id", "shortstr"),
    ("timestamp", "timestamp"),
    ("type", "shortstr"),
    ("user_id", "shortstr"),
    ("app_id", "shortstr"),
    ("cluster_id", "shortstr"),
)
_NAMES = tuple(n for n, _ in PROPERTIES)


def explain_encode_error(props: "BasicProperties", exc: Exception) -> AMQPSyntaxError:
    """Slow path after a failed encode: name the property that cannot be encoded."""
    for n, t in PROPERTIES:
        v = getattr(props, n)
        if v is None:
            continue
        if t == "shortstr":  # (a non-string raises its own error before this)
            if len(_values.to_bytes(v, n)) > 255:
                return AMQPSyntaxError(f"basic property {n} is longer than 255 bytes")
        elif t == "octet":
            if not isinstance(v, int) or not 0 <= v <= 255:
                return AMQPSyntaxError(f"basic property {n}={v!r} is not an octet (0-255)")
        elif t == "timestamp":
            if not isinstance(v, int) or not 0 <= v < 2**64:
                return AMQPSyntaxError(f"basic property {n}={v!r} is not an unsigned 64-bit "
                                       "POSIX time in seconds")
        else:  # table
            try:
                _values.encode_table(v)
            except AMQPSyntaxError as e:
                return AMQPSyntaxError(f"basic property {n}: {e.reply_text}")
    return AMQPSyntaxError(f"basic properties cannot be encoded: {exc}")  # pragma: no cover


class BasicProperties:
    """The 14 basic content properties; every attribute defaults to ``None`` (absent).

    ``encode()`` returns the property-flags short(s) followed by the present values.
    Raises :class:`AMQPSyntaxError` (502) for values that cannot be encoded (a short string
    over 255 bytes, an octet outside 0-255).
    """

    __slots__ = _NAMES

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BasicProperties):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in _NAMES)

    def __hash__(self) -> int:
        return hash(tuple(_values.hash_key(getattr(self, n)) for n in _NAMES))

    def __repr__(self) -> str:
        present = ", ".join(f"{n}={getattr(self, n)!r}" for n in _NAMES if getattr(self, n) is not None)
        return f"BasicProperties({present})"

    def __reduce__(self):
        return (BasicProperties, tuple(getattr(self, n) for n in _NAMES))

    def as_dict(self) -> dict[str, Any]:
        """Present properties as a dict (absent ones omitted)."""
        return {n: getattr(self, n) for n in _NAMES if getattr(self, n) is not None}


# the generated __init__, encode and decode_properties (codegen_values.py, checked in): they
# build BasicProperties objects and name a bad property with explain_encode_error above
BasicProperties.__init__, BasicProperties.encode, py_decode_properties = property_codec(
    BasicProperties, explain_encode_error)
decode_properties = py_decode_properties
py_encode = BasicProperties.encode
EMPTY_PROPERTIES_BYTES = b"\x00\x00"


def _load_speedups(pure: str | None):
    """The compiled twins (:func:`.compiled.load`: one namespace of their functions), this
    module's bound to :class:`BasicProperties` and the pure-Python fallbacks, or ``None`` when
    ``pure`` (the ``SPARK_AMQP_PURE_PYTHON`` environment variable) is ``"1"`` or they were not
    built. They give the results and errors of the pure-Python code."""
    speedups = compiled.load(pure)
    if speedups is not None:
        speedups.bind_properties(BasicProperties, py_decode_properties, py_encode,
                                 _values._decode_value, _values._encode_value)
    return speedups


def _install(speedups) -> None:
    """Make :func:`decode_properties` and ``BasicProperties.encode`` the compiled ones of
    ``speedups``, or the pure-Python ones when it is ``None``."""
    global decode_properties
    if speedups is None:
        decode_properties = py_decode_properties
        BasicProperties.encode = py_encode
    else:
        decode_properties = speedups.decode_properties
        BasicProperties.encode = speedups.encode_properties


SPEEDUPS = _load_speedups(os.environ.get("SPARK_AMQP_PURE_PYTHON"))
_install(SPEEDUPS)

_DECODERS: dict[int, Any] = {}  # first property-flags word -> its decoder
_MAX_DECODERS = 256  # bounds the code generated for a peer that varies its flags


def properties_decoder(flags: int):
    """The decoder for a content header whose first property-flags word is ``flags``.

    Returns a function with the signature and errors of :func:`decode_properties`
    (``(buf, off, end) -> BasicProperties``, ``off`` at the flags word). For a word without
    continuation (bits 0 and 1 clear) it is generated for exactly the properties present,
    so no other flag bit is tested per message; it is kept for the next header with the same
    flags (the code, never a decoded value). Other words, any word once ``_MAX_DECODERS``
    decoders exist, and every word when the compiled fast paths are in use
    (:data:`SPEEDUPS`), get the general :func:`decode_properties`.
    """
    if len(_DECODERS) >= _MAX_DECODERS:
        return decode_properties
    general = flags & 3 or SPEEDUPS is not None
    fn = _DECODERS[flags] = decode_properties if general else _specialised(flags)
    return fn


def _specialised(flags: int):
    """Compile the per-flags decoder of :func:`.codegen_values.specialised_decoder_source`
    for ``flags`` (bits 0, 1 clear), in the generated module's namespace (pure Python only:
    one of 2**14 possible words, generated at its first use)."""
    from . import property_codec as codec
    from .codegen_values import specialised_decoder_source

    ns = {**vars(codec), "BasicProperties": BasicProperties, "_explain": explain_encode_error}
    source = specialised_decoder_source(flags, PROPERTIES)
    exec(compile(source, f"<amqp basic properties {flags:#06x}>", "exec"), ns)
    return ns["decode_properties"]


def property_flag(name: str) -> int:
    """The flag bit of property ``name`` in the first property-flags short (``content_type``
    0x8000 ... ``cluster_id`` 0x0004; 0-9-1 §4.2.6.1, the table above). Raises KeyError."""
    try:
        return 1 << (15 - _NAMES.index(name))
    except ValueError:
        raise KeyError(f"no basic property named {name!r}") from None


class EncodedProperties:
    """Basic properties already encoded (property flags + values, AMQP 0-9-1 §4.2.6.1).

    Duck-types :class:`BasicProperties` for a publish path, which only calls :meth:`encode`:
    a batch of messages with the same properties, or properties built by
    :func:`encode_delivery_mode_and_ids`, shares encoded bytes instead of a
    ``BasicProperties`` per message. ``raw``: bytes.
    """

    __slots__ = ("raw",)

    def __init__(self, raw: bytes):
        self.raw = raw

    def encode(self) -> bytes:
        """The encoded property list (bytes)."""
        return self.raw

    def __repr__(self) -> str:
        return f"EncodedProperties({self.raw!r})"


def encode_delivery_mode_and_ids(delivery_mode: int, message_ids: list[bytes] | None, n: int):
    """``n`` messages' properties ``delivery_mode`` (+ ``message_id``, one per message, when
    ``message_ids``: a list of ``n`` UTF-8 encoded ids), pre-encoded: one shared
    :class:`EncodedProperties` (an iterable of ``n``) when there are no ids, else a list of ``n``.

    Equal, byte for byte, to ``BasicProperties(delivery_mode=dm, message_id=id).encode()``
    (tests/spark/test_sink_unit.py); no ``BasicProperties`` object per message (the sink's
    fast path, about a third of its per-row cost). Raises AMQPSyntaxError (502) for a
    ``delivery_mode`` outside 0-255 or an id over 255 bytes (an AMQP shortstr): a caller that
    can name the row catches it.
    """
    if not 0 <= delivery_mode <= 255:
        raise AMQPSyntaxError(f"delivery_mode {delivery_mode} is not an octet (0-255)")
    if message_ids is None:
        return repeat(EncodedProperties(struct.pack(">HB", _DELIVERY_MODE_FLAG, delivery_mode)), n)
    if max(map(len, message_ids), default=0) > 255:
        raise AMQPSyntaxError("a message_id is over 255 bytes (an AMQP shortstr)")
    head = struct.pack(">HB", _DELIVERY_MODE_FLAG | _MESSAGE_ID_FLAG, delivery_mode)
    return [EncodedProperties(b"%b%c%b" % (head, len(b), b)) for b in message_ids]


_DELIVERY_MODE_FLAG = property_flag("delivery_mode")
_MESSAGE_ID_FLAG = property_flag("message_id")
