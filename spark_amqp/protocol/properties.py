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

from . import values as _values
from .errors import AMQPSyntaxError, FrameError

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


_GROUPS = ((0xF000, 0, 4), (0x0F00, 4, 8), (0x00FC, 8, 14))  # flag masks of 4/4/6 properties


def _decode_lines(n: str, t: str, indent: str) -> list[str]:
    """Source lines decoding property ``n`` of type ``t`` at ``buf[off]`` and advancing
    ``off`` (shared by the general decoder and the per-flags decoders)."""
    if t == "shortstr":
        # running past ``end``: caught by the final check or the UTF-8 handler
        lines = ["n = off + 1 + buf[off]", f"{n} = buf[off + 1:n].decode()", "off = n"]
    elif t == "table":
        # the table decoder's loop, inlined (saves a call per message)
        lines = ["stop = off + 4 + _u32_from(buf, off)[0]",
                 "off += 4",
                 "if stop > end:",
                 "    raise FrameError('basic property headers: field table runs past the end of the content header')",
                 f"{n} = {{}}",
                 "depth = 0"]
        lines += _values.table_body_source(n, "").rstrip("\n").split("\n")
        lines.append("off = stop")
    elif t == "octet":
        lines = [f"{n} = buf[off]", "off += 1"]
    else:  # timestamp
        lines = [f"{n}, = _U64f(buf, off)", "off += 8"]
    return [indent + line for line in lines]


def _decode_tail(present: tuple[str, ...] | None) -> list[str]:
    """The end of a decoder: error handlers, the final length check, building the object
    (``present``: the properties held in local variables; ``None`` = all of them)."""
    return [
        "    except (struct.error, IndexError) as exc:",
        "        raise FrameError('truncated or malformed basic properties in a content header') from exc",
        "    except UnicodeDecodeError as exc:",
        "        if n > end:",
        "            raise FrameError('content header: a short string runs past its end') from exc",
        "        raise AMQPSyntaxError('a basic property short string is not valid UTF-8') from exc",
        "    if off != end:",
        "        raise FrameError('content header: ' + ('%d unexpected trailing bytes after the properties' % (end - off) if off < end else 'truncated properties'))",
        "    p = _new(BasicProperties)",
    ] + [f"    p.{n} = {n if present is None or n in present else None}" for n in _NAMES] + [
        "    return p"]


def _specialised_source(flags: int) -> str:
    """Source of ``decode_properties`` for one value of the property-flags word (bits 0 and
    1 clear: no continuation word): it decodes the present properties in order without
    testing the other flag bits; the checks and errors are those of the general decoder."""
    present = tuple(n for i, n in enumerate(_NAMES) if flags & (1 << (15 - i)))
    body = ["def decode_properties(buf, off, end):", "    n = 0", "    try:", "        off += 2"]
    for n, t in PROPERTIES:
        if n in present:
            body += _decode_lines(n, t, " " * 8)
    return "\n".join(body + _decode_tail(present)) + "\n"


def _generate() -> tuple[str, dict]:
    """Source of ``__init__``, ``encode`` and ``decode_properties`` (compiled with exec)."""
    ns: dict[str, Any] = {
        "_U8": struct.Struct(">B").pack, "_U64": struct.Struct(">Q").pack,
        "_U64f": struct.Struct(">Q").unpack_from, "_U16": struct.Struct(">H").pack,
        "_encode_table": _values.encode_table, "_decode_table": _values._decode_table_at,
        "AMQPSyntaxError": AMQPSyntaxError, "FrameError": FrameError, "struct": struct,
        "_B": _values._BYTE, "_new": object.__new__, "_u32_from": _values._u32_from,
        "_i32_from": _values._i32_from, "_decode_value": _values._decode_value,
        "_u32": _values._u32_pack, "_BYTE": _values._BYTE, "_S_HEAD": _values._S_HEAD,
        "_I_VALUE": _values._I_VALUE, "_encode_value": _values._encode_value,
        "_key_bytes": _values._key_bytes, "_to_bytes": _values.to_bytes,
    }
    init = ["def __init__(self, " + ", ".join(f"{n}=None" for n in _NAMES) + "):"]
    init += [f"    self.{n} = {n}" for n in _NAMES]
    enc = ["def encode(self):", "    flags = 0", "    parts = [b'']", "    try:"]
    dec = ["def decode_properties(buf, off, end):",
           "    n = 0",
           "    try:",
           "        flags = buf[off] << 8 | buf[off + 1]",
           "        off += 2",
           "        if flags & 3:",
           "            if flags & 2:",
           "                raise FrameError('content header sets unknown basic property flag bit 1')",
           "            more = 1",
           "            while more & 1:",
           "                more = buf[off] << 8 | buf[off + 1]",
           "                off += 2",
           "                if more & 0xFFFE:",
           "                    raise FrameError('content header sets unknown basic property flags 0x%04x in a continuation word' % more)",
           "        " + " = ".join(_NAMES) + " = None"]
    for mask, lo, hi in _GROUPS:
        dec.append(f"        if flags & {mask:#06x}:")
        for i in range(lo, hi):
            n, t = PROPERTIES[i]
            bit = 1 << (15 - i)
            enc.append(f"        if self.{n} is not None:")  # 3 bytecodes when absent
            enc.append(f"            v = self.{n}")
            enc.append(f"            flags |= {bit:#06x}")
            dec.append(f"            if flags & {bit:#06x}:")
            dec += _decode_lines(n, t, " " * 16)
            if t == "shortstr":
                enc.append(f"            v = v.encode() if v.__class__ is str else _to_bytes(v, 'basic property {n}')")
                enc.append("            parts += (_B[len(v)], v)")
            elif t == "table":
                # the table encoder's loop, inlined (saves two calls per message)
                enc.append("            if v:")
                enc.append("                ti = len(parts)")
                enc.append("                parts.append(b'')  # the table length, set below")
                enc.append("                size = depth = 0")
                enc.append(_values.table_encode_source("v", "parts", " " * 16).rstrip("\n"))
                enc.append("                parts[ti] = _u32(size)")
                enc.append("            else:")
                enc.append("                parts.append(b'\\x00\\x00\\x00\\x00')")
            elif t == "octet":  # (a negative v: struct.error from _U8; over 255: IndexError)
                enc.append("            parts.append(_B[v] if v >= 0 else _U8(v))")
            else:  # timestamp
                enc.append("            parts.append(_U64(v))")
    enc += ["    except (struct.error, IndexError, TypeError, OverflowError, AttributeError) as exc:",
            "        raise _explain(self, exc) from exc",
            "    parts[0] = _U16(flags)",
            "    return b''.join(parts)"]
    dec += _decode_tail(None)
    return "\n".join(init + [""] + enc + [""] + dec) + "\n", ns


def _explain_encode_error(props: "BasicProperties", exc: Exception) -> AMQPSyntaxError:
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


_SRC, _NS = _generate()
_NS["_explain"] = _explain_encode_error
exec(compile(_SRC, "<amqp basic properties>", "exec"), _NS)


class BasicProperties:
    """The 14 basic content properties; every attribute defaults to ``None`` (absent).

    ``encode()`` returns the property-flags short(s) followed by the present values.
    Raises :class:`AMQPSyntaxError` (502) for values that cannot be encoded (a short string
    over 255 bytes, an octet outside 0-255).
    """

    __slots__ = _NAMES
    __init__ = _NS["__init__"]
    encode = _NS["encode"]

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


_NS["BasicProperties"] = BasicProperties
_NS["_new"] = object.__new__
py_decode_properties = decode_properties = _NS["decode_properties"]
py_decode_properties.__doc__ = """Decode basic properties at ``buf[off:end]`` (flags + values).

Returns a :class:`BasicProperties`. Raises FrameError (501) on truncation, unknown flag bits
or trailing bytes, AMQPSyntaxError (502) on invalid UTF-8.
"""
py_encode = BasicProperties.encode
EMPTY_PROPERTIES_BYTES = b"\x00\x00"


def _load_speedups(pure: str | None):
    """The compiled fast paths (``_speedups``, built by ``setup.py`` with Cython), or
    ``None`` when ``pure`` (the ``SPARK_AMQP_PURE_PYTHON`` environment variable) is ``"1"``
    or the module was not built. They give the results and errors of the pure-Python code."""
    if pure == "1":
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    _speedups.setup(BasicProperties, py_decode_properties, py_encode, _values._decode_value,
                    _values._encode_value)
    return _speedups


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
    """Compile the decoder of :func:`_specialised_source` for ``flags`` (bits 0, 1 clear)."""
    ns = dict(_NS)
    exec(compile(_specialised_source(flags), f"<amqp basic properties {flags:#06x}>", "exec"), ns)
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
