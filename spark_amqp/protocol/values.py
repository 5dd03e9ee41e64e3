"""AMQP 0-9-1 field values: short/long strings, field tables and field arrays.

Tags follow RabbitMQ (``rabbit_binary_parser.erl``, rabbitmq.com/amqp-0-9-1-errata), not the
0-9-1 PDF grammar: ``s`` is a signed 16-bit int, ``l`` and ``L`` are both signed 64-bit ints,
``x`` is a byte array. Decoded Python types:

=====  ==========================  ==========================
tag    wire                        Python
=====  ==========================  ==========================
t      octet, non-zero is true     bool
b / B  int8 / uint8                int
s / u  int16 / uint16              int
I / i  int32 / uint32              int
l / L  int64 (both signed)         int
f / d  float32 / float64           float
D      scale octet + int32         decimal.Decimal
S      uint32 length + bytes       str (bytes if not valid UTF-8, as pika does)
x      uint32 length + bytes       bytes
A      uint32 byte length + values list
T      uint64 POSIX seconds        datetime.datetime (UTC, aware)
F      nested table                dict
V      nothing                     None
=====  ==========================  ==========================

Encoding picks: bool→t, int→I (int32 range), l (int64), else a :class:`FrameError`-free
:class:`~spark_amqp.protocol.errors.AMQPSyntaxError`; float→d; Decimal→D; str→S; bytes→x;
datetime→T; None→V; list/tuple→A; dict→F. Use :class:`Typed` to force a tag.

Malformed input raises :class:`~spark_amqp.protocol.errors.FrameError` (501): truncation,
unknown tag, nesting deeper than :data:`MAX_DEPTH`. Invalid UTF-8 in a field name (a short
string) raises :class:`~spark_amqp.protocol.errors.AMQPSyntaxError` (502).
"""

from __future__ import annotations

import datetime as _dt
import struct
from decimal import Decimal
from typing import Any

from .errors import AMQPSyntaxError, FrameError
from .tables import table_codec

__all__ = [
    "Typed", "MAX_DEPTH", "decode_table", "encode_table", "decode_array", "encode_array",
    "encode_shortstr", "encode_longstr", "decode_shortstr", "decode_longstr",
]

MAX_DEPTH = 64
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

_U8 = struct.Struct(">B")
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_U64 = struct.Struct(">Q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
_DEC = struct.Struct(">Bi")
_u32_from = _U32.unpack_from
_u32_pack = _U32.pack
_i32_from = _I32.unpack_from
_S_HEAD = struct.Struct(">BI").pack   # tag + uint32 length
_I_VALUE = struct.Struct(">Bi").pack  # tag 'I' + int32
_BYTE = tuple(bytes((i,)) for i in range(256))  # one-octet bytes, e.g. short string lengths


class Typed:
    """A value with an explicit field-table tag, e.g. ``Typed("b", -3)`` or ``Typed("u", 7)``.

    Decoding never returns this wrapper; it is only for choosing the wire width on encode.
    """

    __slots__ = ("tag", "value")

    def __init__(self, tag: str, value: Any):
        if tag not in _ENCODERS_BY_TAG:
            raise ValueError(f"unknown field-table tag {tag!r}; expected one of {''.join(_ENCODERS_BY_TAG)}")
        self.tag = tag
        self.value = value

    def __repr__(self) -> str:
        return f"Typed({self.tag!r}, {self.value!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Typed) and (self.tag, self.value) == (other.tag, other.value)

    def __hash__(self) -> int:
        return hash((self.tag, self.value))


def hash_key(value: Any) -> Any:
    """A hashable stand-in for ``value`` consistent with ``==`` (containers hash by length)."""
    if isinstance(value, (dict, list, tuple)):
        return ("container", len(value))
    try:
        return hash(value)
    except TypeError:
        return type(value).__name__


# ---------------------------------------------------------------------------------- strings

def encode_shortstr(value: str | bytes) -> bytes:
    """Encode a short string: 1-octet length + at most 255 bytes (UTF-8 for ``str``).

    Raises AMQPSyntaxError (502) when longer than 255 bytes.
    """
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if len(raw) > 255:
        raise AMQPSyntaxError(f"short string of {len(raw)} bytes exceeds 255: {raw[:40]!r}...")
    return bytes((len(raw),)) + raw


def encode_longstr(value: str | bytes) -> bytes:
    """Encode a long string: uint32 length + bytes (UTF-8 for ``str``)."""
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    return _u32_pack(len(raw)) + raw


def decode_shortstr(buf: bytes, off: int, end: int) -> tuple[str, int]:
    """Decode a short string at ``off``; returns ``(str, new_offset)``.

    Raises FrameError (501) when truncated, AMQPSyntaxError (502) on invalid UTF-8.
    """
    if off >= end:
        raise FrameError("truncated short string")
    n = buf[off]
    off += 1
    stop = off + n
    if stop > end:
        raise FrameError("truncated short string")
    try:
        return buf[off:stop].decode("utf-8"), stop
    except UnicodeDecodeError as exc:
        raise AMQPSyntaxError(f"short string is not valid UTF-8: {bytes(buf[off:stop])[:40]!r}") from exc


def decode_longstr(buf: bytes, off: int, end: int) -> tuple[bytes, int]:
    """Decode a long string at ``off``; returns ``(bytes, new_offset)``. Raises FrameError."""
    if off + 4 > end:
        raise FrameError("truncated long string length")
    n = _u32_from(buf, off)[0]
    off += 4
    stop = off + n
    if stop > end:
        raise FrameError(f"long string of {n} bytes runs past the end of its frame")
    return bytes(buf[off:stop]), stop


# ---------------------------------------------------------------------------------- decode

def _decode_value(buf: bytes, off: int, end: int, depth: int) -> tuple[Any, int]:
    if off >= end:
        raise FrameError("truncated field value: missing type tag")
    tag = buf[off]
    off += 1
    # Ordered by how often each tag is seen in practice.
    if tag == 83:  # 'S'
        if off + 4 > end:
            raise FrameError("truncated long string length in field value")
        n = _u32_from(buf, off)[0]
        off += 4
        stop = off + n
        if stop > end:
            raise FrameError(f"long string of {n} bytes runs past the end of its table")
        raw = buf[off:stop]
        try:
            return raw.decode("utf-8"), stop
        except UnicodeDecodeError:
            return bytes(raw), stop
    if tag == 73:  # 'I'
        if off + 4 > end:
            raise FrameError("truncated int32 field value")
        return _I32.unpack_from(buf, off)[0], off + 4
    if tag == 116:  # 't'
        if off >= end:
            raise FrameError("truncated boolean field value")
        return buf[off] != 0, off + 1
    if tag == 108 or tag == 76:  # 'l' / 'L': both signed int64 in RabbitMQ
        if off + 8 > end:
            raise FrameError("truncated int64 field value")
        return _I64.unpack_from(buf, off)[0], off + 8
    if tag == 70:  # 'F'
        return _decode_table_at(buf, off, end, depth + 1)
    if tag == 65:  # 'A'
        return _decode_array_at(buf, off, end, depth + 1)
    if tag == 84:  # 'T'
        if off + 8 > end:
            raise FrameError("truncated timestamp field value")
        secs = _U64.unpack_from(buf, off)[0]
        try:
            return _EPOCH + _dt.timedelta(seconds=secs), off + 8
        except OverflowError as exc:
            raise AMQPSyntaxError(f"timestamp {secs} out of range") from exc
    if tag == 86:  # 'V'
        return None, off
    if tag == 98:  # 'b'
        if off >= end:
            raise FrameError("truncated int8 field value")
        return _I8.unpack_from(buf, off)[0], off + 1
    if tag == 66:  # 'B'
        if off >= end:
            raise FrameError("truncated uint8 field value")
        return buf[off], off + 1
    if tag == 115:  # 's' = int16 (RabbitMQ errata)
        if off + 2 > end:
            raise FrameError("truncated int16 field value")
        return _I16.unpack_from(buf, off)[0], off + 2
    if tag == 117:  # 'u'
        if off + 2 > end:
            raise FrameError("truncated uint16 field value")
        return _U16.unpack_from(buf, off)[0], off + 2
    if tag == 105:  # 'i'
        if off + 4 > end:
            raise FrameError("truncated uint32 field value")
        return _u32_from(buf, off)[0], off + 4
    if tag == 102:  # 'f'
        if off + 4 > end:
            raise FrameError("truncated float32 field value")
        return _F32.unpack_from(buf, off)[0], off + 4
    if tag == 100:  # 'd'
        if off + 8 > end:
            raise FrameError("truncated float64 field value")
        return _F64.unpack_from(buf, off)[0], off + 8
    if tag == 68:  # 'D'
        if off + 5 > end:
            raise FrameError("truncated decimal field value")
        scale, raw = _DEC.unpack_from(buf, off)
        return Decimal(raw).scaleb(-scale), off + 5
    if tag == 120:  # 'x'
        if off + 4 > end:
            raise FrameError("truncated byte-array length")
        n = _u32_from(buf, off)[0]
        off += 4
        stop = off + n
        if stop > end:
            raise FrameError(f"byte array of {n} bytes runs past the end of its table")
        return bytes(buf[off:stop]), stop
    raise FrameError(f"unknown field-table type tag {chr(tag)!r} (0x{tag:02x})")


def _decode_array_at(buf: bytes, off: int, end: int, depth: int) -> tuple[list, int]:
    if depth > MAX_DEPTH:
        raise FrameError(f"field arrays nested deeper than {MAX_DEPTH}")
    if off + 4 > end:
        raise FrameError("truncated field-array length")
    n = _u32_from(buf, off)[0]
    off += 4
    stop = off + n
    if stop > end:
        raise FrameError(f"field array of {n} bytes runs past the end of its frame")
    result = []
    append = result.append
    while off < stop:
        value, off = _decode_value(buf, off, stop, depth)
        append(value)
    return result, stop


def decode_table(buf: bytes, off: int = 0, end: int | None = None) -> tuple[dict, int]:
    """Decode a field table at ``buf[off:]``; returns ``(dict, new_offset)``.

    ``end`` bounds the read (default ``len(buf)``). Raises FrameError/AMQPSyntaxError.
    """
    return _decode_table_at(buf, off, len(buf) if end is None else end, 0)


def decode_array(buf: bytes, off: int = 0, end: int | None = None) -> tuple[list, int]:
    """Decode a field array at ``buf[off:]``; returns ``(list, new_offset)``."""
    return _decode_array_at(buf, off, len(buf) if end is None else end, 0)


# ---------------------------------------------------------------------------------- encode

def _enc_S(v: Any, depth: int) -> bytes:
    raw = v.encode("utf-8") if isinstance(v, str) else bytes(v)
    return b"S" + _u32_pack(len(raw)) + raw


def _enc_x(v: Any, depth: int) -> bytes:
    raw = bytes(v)
    return b"x" + _u32_pack(len(raw)) + raw


def _int_encoder(tag: str, st: struct.Struct):
    prefix = tag.encode()
    pack = st.pack

    def enc(v: Any, depth: int) -> bytes:
        try:
            return prefix + pack(int(v))
        except struct.error as exc:
            raise AMQPSyntaxError(f"value {v!r} does not fit field-table type {tag!r}") from exc
    return enc


def _enc_t(v: Any, depth: int) -> bytes:
    return b"t\x01" if v else b"t\x00"


def _enc_f(v: Any, depth: int) -> bytes:
    try:
        return b"f" + _F32.pack(float(v))
    except (OverflowError, struct.error) as exc:    # |v| beyond float32's range (~3.4e38)
        raise AMQPSyntaxError(f"value {v!r} does not fit field-table type 'f' (32-bit float); "
                              f"send it as a plain float (type 'd')") from exc


def _enc_d(v: Any, depth: int) -> bytes:
    return b"d" + _F64.pack(float(v))


def _enc_D(v: Any, depth: int) -> bytes:
    d = Decimal(v)
    sign, digits, exponent = d.as_tuple()
    if not isinstance(exponent, int):
        raise AMQPSyntaxError(f"decimal {v!r} is not finite")
    scale = -exponent if exponent < 0 else 0
    raw = int("".join(map(str, digits)) or "0") * (10 ** (exponent if exponent > 0 else 0))
    if sign:
        raw = -raw
    if scale > 255 or not -(2 ** 31) <= raw < 2 ** 31:
        raise AMQPSyntaxError(f"decimal {v!r} does not fit AMQP's scale octet + int32 value")
    return b"D" + _DEC.pack(scale, raw)


def _enc_T(v: Any, depth: int) -> bytes:
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.timezone.utc)
        secs = int(v.timestamp())
    else:
        secs = int(v)
    try:
        return b"T" + _U64.pack(secs)
    except struct.error as exc:
        raise AMQPSyntaxError(f"timestamp {v!r} is out of range for an unsigned 64-bit value") from exc


def _enc_V(v: Any, depth: int) -> bytes:
    return b"V"


def _enc_F(v: Any, depth: int) -> bytes:
    return b"F" + _encode_table(v, depth + 1)


def _enc_A(v: Any, depth: int) -> bytes:
    return b"A" + _encode_array(v, depth + 1)


_ENCODERS_BY_TAG = {
    "t": _enc_t, "b": _int_encoder("b", _I8), "B": _int_encoder("B", _U8),
    "s": _int_encoder("s", _I16), "u": _int_encoder("u", _U16), "I": _int_encoder("I", _I32),
    "i": _int_encoder("i", _U32), "l": _int_encoder("l", _I64), "L": _int_encoder("L", _I64),
    "f": _enc_f, "d": _enc_d, "D": _enc_D, "S": _enc_S, "x": _enc_x, "A": _enc_A, "T": _enc_T,
    "F": _enc_F, "V": _enc_V,
}
_enc_I = _ENCODERS_BY_TAG["I"]
_enc_l = _ENCODERS_BY_TAG["l"]


def _encode_value(v: Any, depth: int) -> bytes:
    t = type(v)
    if t is str:
        raw = v.encode("utf-8")
        return b"S" + _u32_pack(len(raw)) + raw
    if t is bool:
        return b"t\x01" if v else b"t\x00"
    if t is int:
        if -2147483648 <= v <= 2147483647:
            return b"I" + _I32.pack(v)
        return _enc_l(v, depth)
    if t is dict:
        return b"F" + _encode_table(v, depth + 1)
    if t is bytes or t is bytearray or t is memoryview:
        return _enc_x(v, depth)
    if t is float:
        return b"d" + _F64.pack(v)
    if v is None:
        return b"V"
    if t is list or t is tuple:
        return b"A" + _encode_array(v, depth + 1)
    if isinstance(v, Typed):
        return _ENCODERS_BY_TAG[v.tag](v.value, depth)
    if isinstance(v, Decimal):
        return _enc_D(v, depth)
    if isinstance(v, _dt.datetime):
        return _enc_T(v, depth)
    if isinstance(v, int):  # (bool cannot be subclassed: int subclasses only)
        return _encode_value(int(v), depth)
    if isinstance(v, str):
        return _enc_S(v, depth)
    if isinstance(v, dict):
        return _enc_F(v, depth)
    if isinstance(v, (list, tuple)):
        return _enc_A(v, depth)
    if isinstance(v, float):
        return _enc_d(v, depth)
    raise AMQPSyntaxError(f"cannot encode a {t.__name__} ({v!r}) in an AMQP field table")


def to_bytes(value: Any, what: str) -> bytes:
    """str → UTF-8 bytes; bytes-like → bytes; anything else → AMQPSyntaxError naming ``what``.

    (The encoders' slow path for string fields that are not ``str``.)
    """
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise AMQPSyntaxError(f"{what} must be str or bytes, not {type(value).__name__} ({value!r})")


def _key_bytes(key: Any) -> bytes:
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, (bytes, bytearray)):
        return bytes(key)
    raise AMQPSyntaxError(f"field-table keys must be str, not {type(key).__name__} ({key!r})")


def _table_error(table: Any, exc: Exception) -> AMQPSyntaxError:
    """Slow path after a failed table encode: say what was wrong."""
    if not isinstance(table, dict):
        return AMQPSyntaxError(f"a field table must be a dict, not {type(table).__name__}")
    for key in table:
        raw = _key_bytes(key)
        if len(raw) > 255:
            return AMQPSyntaxError(f"field name longer than 255 bytes: {raw[:40]!r}...")
    return AMQPSyntaxError(f"field table cannot be encoded: {exc!r}")  # pragma: no cover


def _encode_array(values: Any, depth: int) -> bytes:
    if depth > MAX_DEPTH:
        raise AMQPSyntaxError(f"field arrays nested deeper than {MAX_DEPTH}")
    body = b"".join([_encode_value(v, depth) for v in values])
    return _u32_pack(len(body)) + body


def encode_array(values: list | tuple) -> bytes:
    """Encode a field array (uint32 byte length + tagged values)."""
    return _encode_array(values, 0)


# the field-table decoder and encoder, generated (codegen_values.py) and checked in: built
# over the value codec above, which calls them back for nested tables
_decode_table_at, _encode_table, encode_table = table_codec(
    MAX_DEPTH, _decode_value, _encode_value, _key_bytes, _table_error)
