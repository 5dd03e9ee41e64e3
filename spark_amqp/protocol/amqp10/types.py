"""AMQP 1.0 primitive and described types (OASIS AMQP 1.0, part 1 "Types"): encode and decode.

The part of AMQP 1.0's type system that messages use, every encoding of it (§1.6, the compact
ones included). Decoded Python values:

==================================  ========  ===============================================
AMQP type                           codes     Python
==================================  ========  ===============================================
null                                40        None
boolean                             41 42 56  bool
ubyte / ushort / uint / ulong       50 60     :class:`UByte` / :class:`UShort` / :class:`UInt`
                                    70 52 43  / :class:`ULong` (``int`` subclasses)
                                    80 53 44
byte / short / int                  51 61     :class:`Byte` / :class:`Short` / :class:`Int`
                                    71 54
long                                81 55     ``int``
float / double                      72 / 82   :class:`Float` / ``float``
decimal32 / 64 / 128                74 84 94  :class:`Decimal32` / 64 / 128 (``bytes``, IEEE 754 as sent)
char                                73        :class:`Char` (``str`` of one code point)
timestamp                           83        :class:`Timestamp` (``int``: ms since the epoch)
uuid                                98        ``uuid.UUID``
binary                              a0 b0     ``bytes``
string                              a1 b1     ``str`` (invalid UTF-8 kept with ``surrogateescape``)
symbol                              a3 b3     :class:`Symbol` (``str``)
list                                45 c0 d0  ``list``
map                                 c1 d1     ``dict`` (keys must be hashable)
array                               e0 f0     :class:`Array` (``list`` with the element type)
described                           00        :class:`Described` (descriptor, value)
==================================  ========  ===============================================

The wrappers are subclasses of ``int`` / ``str`` / ``float`` / ``list`` / ``bytes``: they
compare and hash as their base values, so ``UInt(5) == 5`` and ``{"k": 1}[Symbol("k")]``
work; they only carry the wire type, for a lossless round trip and for conversions that
depend on it (0-9-1 header tags, ``convert.py``).

Encoding plain Python values: ``None`` → null, ``bool`` → boolean, ``int`` → long,
``float`` → double, ``str`` → string, ``bytes``/``bytearray``/``memoryview`` → binary,
``dict`` → map, ``list``/``tuple`` → list, ``uuid.UUID`` → uuid, ``datetime`` → timestamp;
wrap a value in one of the classes above to choose another type. The encoder picks the
smallest encoding as RabbitMQ's ``amqp10_binary_generator`` (4.x) does; the ``Encoder``
variant :data:`RABBIT_310` reproduces RabbitMQ 3.10's (variable-width values of 255 bytes in
the 4-byte-length form).

Malformed input raises :class:`DecodeError` (a ``ValueError``): truncation, an unknown
constructor, a count or size that does not fit, nesting deeper than :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import datetime as _dt
import struct
import uuid as _uuid
from typing import Any

__all__ = [
    "DecodeError", "EncodeError", "MAX_DEPTH",
    "UByte", "UShort", "UInt", "ULong", "Byte", "Short", "Int", "Float", "Char", "Timestamp",
    "Symbol", "Boolean", "Decimal32", "Decimal64", "Decimal128", "Array", "Described",
    "decode_value", "encode_value", "Encoder", "RABBIT_310", "RABBIT_4", "skip_value",
]

MAX_DEPTH = 64


class DecodeError(ValueError):
    """Malformed AMQP 1.0 encoded data (truncated, unknown constructor, bad size or count)."""


class EncodeError(ValueError):
    """A value that has no AMQP 1.0 encoding (out of range, unsupported Python type)."""


# ---------------------------------------------------------------------------------- wrappers

class _IntType(int):
    __slots__ = ()
    code = 0
    lo = hi = 0

    def __new__(cls, value=0):
        v = int.__new__(cls, value)
        if not cls.lo <= v <= cls.hi:
            raise EncodeError(f"{cls.__name__} out of range [{cls.lo}, {cls.hi}]: {int(value)}")
        return v

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"


def _int_type(name: str, lo: int, hi: int, doc: str) -> type:
    return type(name, (_IntType,), {"__slots__": (), "lo": lo, "hi": hi, "__doc__": doc,
                                    "__module__": __name__})


UByte = _int_type("UByte", 0, 0xFF, "AMQP ``ubyte`` (0..255).")
UShort = _int_type("UShort", 0, 0xFFFF, "AMQP ``ushort`` (0..65535).")
UInt = _int_type("UInt", 0, 0xFFFFFFFF, "AMQP ``uint`` (0..2**32-1).")
ULong = _int_type("ULong", 0, 0xFFFFFFFFFFFFFFFF, "AMQP ``ulong`` (0..2**64-1).")
Byte = _int_type("Byte", -0x80, 0x7F, "AMQP ``byte`` (-128..127).")
Short = _int_type("Short", -0x8000, 0x7FFF, "AMQP ``short`` (-32768..32767).")
Int = _int_type("Int", -0x80000000, 0x7FFFFFFF, "AMQP ``int`` (signed 32-bit).")


class Timestamp(int):
    """AMQP ``timestamp``: milliseconds since the Unix epoch (signed 64-bit)."""
    __slots__ = ()

    @classmethod
    def from_datetime(cls, dt: _dt.datetime) -> "Timestamp":
        """The timestamp of ``dt`` (naive: UTC), truncated to the millisecond."""
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=_dt.timezone.utc)
        delta = dt - _EPOCH
        return cls((delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000)

    def datetime(self) -> _dt.datetime:
        """This timestamp as an aware UTC ``datetime``."""
        return _EPOCH + _dt.timedelta(milliseconds=int(self))

    def __repr__(self) -> str:
        return f"Timestamp({int(self)})"


class Float(float):
    """AMQP ``float`` (IEEE 754 32-bit); plain ``float`` encodes as ``double``."""
    __slots__ = ()

    def __repr__(self) -> str:
        return f"Float({float(self)!r})"


class Char(str):
    """AMQP ``char``: one Unicode code point (UTF-32BE on the wire)."""
    __slots__ = ()

    def __repr__(self) -> str:
        return f"Char({str(self)!r})"


class Symbol(str):
    """AMQP ``symbol``: an ASCII name (content types, annotation keys, descriptors)."""
    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str(self)!r})"


class _Decimal(bytes):
    size = 0

    def __new__(cls, raw: bytes):
        v = bytes.__new__(cls, raw)
        if len(v) != cls.size:
            raise EncodeError(f"{cls.__name__} takes {cls.size} bytes, got {len(v)}")
        return v

    def __repr__(self) -> str:
        return f"{type(self).__name__}({bytes(self)!r})"


class Decimal32(_Decimal):
    """AMQP ``decimal32`` (IEEE 754-2008 decimal32, the 4 bytes as sent)."""
    size = 4


class Decimal64(_Decimal):
    """AMQP ``decimal64`` (the 8 bytes as sent)."""
    size = 8


class Decimal128(_Decimal):
    """AMQP ``decimal128`` (the 16 bytes as sent)."""
    size = 16


class Boolean:
    """An AMQP ``boolean`` in its two-byte encoding (0x56 0x00 / 0x56 0x01), as RabbitMQ writes a
    ``{boolean, V}`` term (0-9-1 boolean headers). Decoding gives a plain ``bool`` (RabbitMQ's
    parser does too); plain ``bool`` encodes as 0x41 / 0x42."""

    __slots__ = ("value",)

    def __init__(self, value: bool):
        self.value = bool(value)

    def __bool__(self) -> bool:
        return self.value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Boolean):
            return self.value == other.value
        return isinstance(other, bool) and self.value == other

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Boolean({self.value})"


class Array(list):
    """AMQP ``array``: values of one type. ``code`` is the element constructor (e.g. 0xa1 or
    0xb1 for strings, 0x71 for ints; 0 with ``descriptor`` set for described elements); when
    encoding, ``code`` None picks it from the first element."""

    def __init__(self, values=(), code: int | None = None, descriptor: Any = None):
        super().__init__(values)
        self.code = code
        self.descriptor = descriptor

    def __repr__(self) -> str:
        return f"Array({list(self)!r}, code={self.code!r})"


class Described:
    """A described value (§1.2): ``descriptor`` (a :class:`ULong` code or a :class:`Symbol`)
    and ``value``."""

    __slots__ = ("descriptor", "value")

    def __init__(self, descriptor: Any, value: Any):
        self.descriptor = descriptor
        self.value = value

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Described) and self.descriptor == other.descriptor
                and self.value == other.value)

    def __hash__(self) -> int:
        return hash(self.descriptor)

    def __repr__(self) -> str:
        return f"Described({self.descriptor!r}, {self.value!r})"


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

# ---------------------------------------------------------------------------------- decoding

_u16 = struct.Struct(">H").unpack_from
_i16 = struct.Struct(">h").unpack_from
_u32 = struct.Struct(">I").unpack_from
_i32 = struct.Struct(">i").unpack_from
_u64 = struct.Struct(">Q").unpack_from
_i64 = struct.Struct(">q").unpack_from
_f32 = struct.Struct(">f").unpack_from
_f64 = struct.Struct(">d").unpack_from

#: payload width of each fixed-width constructor (§1.6): the high nibble gives it
_FIXED = {0x4: 0, 0x5: 1, 0x6: 2, 0x7: 4, 0x8: 8, 0x9: 16}


def _need(buf, pos: int, n: int, end: int) -> None:
    if pos + n > end:
        raise DecodeError(f"AMQP 1.0 value cut short: {n} bytes needed at {pos}, {end - pos} left")


def _str(raw) -> str:
    return str(raw, "utf-8", "surrogateescape")


def _fixed(code: int, buf, pos: int, end: int):
    """The value of fixed-width constructor ``code`` whose payload starts at ``pos``; returns
    (value, position after it)."""
    if code == 0x40:
        return None, pos
    if code == 0x41:
        return True, pos
    if code == 0x42:
        return False, pos
    if code == 0x43:
        return UInt(0), pos
    if code == 0x44:
        return ULong(0), pos
    if code == 0x45:
        return [], pos
    w = _FIXED.get(code >> 4)
    if w is None:
        raise DecodeError(f"unknown AMQP 1.0 constructor 0x{code:02x}")
    _need(buf, pos, w, end)
    if code == 0x50:
        return UByte(buf[pos]), pos + 1
    if code == 0x51:
        b = buf[pos]
        return Byte(b - 256 if b > 127 else b), pos + 1
    if code == 0x52:
        return UInt(buf[pos]), pos + 1
    if code == 0x53:
        return ULong(buf[pos]), pos + 1
    if code == 0x54:
        b = buf[pos]
        return Int(b - 256 if b > 127 else b), pos + 1
    if code == 0x55:
        b = buf[pos]
        return (b - 256 if b > 127 else b), pos + 1
    if code == 0x56:
        b = buf[pos]
        if b > 1:
            raise DecodeError(f"AMQP 1.0 boolean 0x56 with byte {b} (0 or 1 expected)")
        return b == 1, pos + 1
    if code == 0x60:
        return UShort(_u16(buf, pos)[0]), pos + 2
    if code == 0x61:
        return Short(_i16(buf, pos)[0]), pos + 2
    if code == 0x70:
        return UInt(_u32(buf, pos)[0]), pos + 4
    if code == 0x71:
        return Int(_i32(buf, pos)[0]), pos + 4
    if code == 0x72:
        return Float(_f32(buf, pos)[0]), pos + 4
    if code == 0x73:
        cp = _u32(buf, pos)[0]
        if cp > 0x10FFFF:
            raise DecodeError(f"AMQP 1.0 char out of range: {cp:#x}")
        return Char(chr(cp)), pos + 4
    if code == 0x74:
        return Decimal32(bytes(buf[pos:pos + 4])), pos + 4
    if code == 0x80:
        return ULong(_u64(buf, pos)[0]), pos + 8
    if code == 0x81:
        return _i64(buf, pos)[0], pos + 8
    if code == 0x82:
        return _f64(buf, pos)[0], pos + 8
    if code == 0x83:
        return Timestamp(_i64(buf, pos)[0]), pos + 8
    if code == 0x84:
        return Decimal64(bytes(buf[pos:pos + 8])), pos + 8
    if code == 0x94:
        return Decimal128(bytes(buf[pos:pos + 16])), pos + 16
    if code == 0x98:
        return _uuid.UUID(bytes=bytes(buf[pos:pos + 16])), pos + 16
    raise DecodeError(f"unknown AMQP 1.0 constructor 0x{code:02x}")


def _variable(code: int, raw):
    if code in (0xa0, 0xb0):
        return bytes(raw)
    if code in (0xa1, 0xb1):
        return _str(raw)
    if code in (0xa3, 0xb3):
        return Symbol(_str(raw))
    raise DecodeError(f"unknown AMQP 1.0 constructor 0x{code:02x}")


def _compound_head(code: int, buf, pos: int, end: int):
    """(count, start of the items, end of the compound) of a list/map/array constructor."""
    if code & 0xF0 in (0xc0, 0xe0):
        _need(buf, pos, 2, end)
        size = buf[pos]
        if size < 1:
            raise DecodeError(f"AMQP 1.0 compound 0x{code:02x} with size 0 (count needs 1)")
        count = buf[pos + 1]
        start, stop = pos + 2, pos + 1 + size
    else:
        _need(buf, pos, 8, end)
        size = _u32(buf, pos)[0]
        if size < 4:
            raise DecodeError(f"AMQP 1.0 compound 0x{code:02x} with size {size} (count needs 4)")
        count = _u32(buf, pos + 4)[0]
        start, stop = pos + 8, pos + 4 + size
    if stop > end:
        raise DecodeError(f"AMQP 1.0 compound of {stop - pos} bytes at {pos}, {end - pos} left")
    if count > stop - start and not (code & 0xF0 in (0xe0, 0xf0)):
        raise DecodeError(f"AMQP 1.0 compound claims {count} items in {stop - start} bytes")
    return count, start, stop


def decode_value(buf, pos: int = 0, end: int | None = None, depth: int = 0):
    """Decode the AMQP 1.0 value at ``buf[pos:]`` (``bytes``, ``bytearray`` or ``memoryview``).

    Returns (value, position after it). Raises :class:`DecodeError` for malformed input or
    a value that ends past ``end`` (default: the end of ``buf``). Source: AMQP 1.0 §1.6."""
    if end is None:
        end = len(buf)
    if depth > MAX_DEPTH:
        raise DecodeError(f"AMQP 1.0 values nested deeper than {MAX_DEPTH}")
    if pos >= end:
        raise DecodeError(f"AMQP 1.0 value expected at {pos}, none left")
    return _after(buf[pos], buf, pos + 1, end, depth)


def _after(code: int, buf, pos: int, end: int, depth: int):
    """The value of constructor ``code`` whose payload starts at ``pos`` (an array element is
    exactly this: the payload without its constructor)."""
    if code == 0x00:
        if depth > MAX_DEPTH:
            raise DecodeError(f"AMQP 1.0 values nested deeper than {MAX_DEPTH}")
        descriptor, pos = decode_value(buf, pos, end, depth + 1)
        value, pos = decode_value(buf, pos, end, depth + 1)
        return Described(descriptor, value), pos
    hi = code & 0xF0
    if hi == 0xa0:
        _need(buf, pos, 1, end)
        n = buf[pos]
        _need(buf, pos + 1, n, end)
        return _variable(code, buf[pos + 1:pos + 1 + n]), pos + 1 + n
    if hi == 0xb0:
        _need(buf, pos, 4, end)
        n = _u32(buf, pos)[0]
        _need(buf, pos + 4, n, end)
        return _variable(code, buf[pos + 4:pos + 4 + n]), pos + 4 + n
    if code in (0xc0, 0xd0):
        if depth > MAX_DEPTH:
            raise DecodeError(f"AMQP 1.0 values nested deeper than {MAX_DEPTH}")
        count, p, stop = _compound_head(code, buf, pos, end)
        out = []
        for _ in range(count):
            v, p = decode_value(buf, p, stop, depth + 1)
            out.append(v)
        _exact(p, stop, code)
        return out, stop
    if code in (0xc1, 0xd1):
        if depth > MAX_DEPTH:
            raise DecodeError(f"AMQP 1.0 values nested deeper than {MAX_DEPTH}")
        count, p, stop = _compound_head(code, buf, pos, end)
        if count % 2:
            raise DecodeError(f"AMQP 1.0 map with an odd count of {count}")
        out = {}
        for _ in range(count // 2):
            k, p = decode_value(buf, p, stop, depth + 1)
            v, p = decode_value(buf, p, stop, depth + 1)
            try:
                out[k] = v
            except TypeError:
                raise DecodeError(f"AMQP 1.0 map key of type {type(k).__name__} is not supported") from None
        _exact(p, stop, code)
        return out, stop
    if code in (0xe0, 0xf0):
        if depth > MAX_DEPTH:
            raise DecodeError(f"AMQP 1.0 values nested deeper than {MAX_DEPTH}")
        count, p, stop = _compound_head(code, buf, pos, end)
        return _array(buf, p, stop, count, depth), stop
    return _fixed(code, buf, pos, end)


_ZERO_WIDTH = frozenset((0x40, 0x41, 0x42, 0x43, 0x44, 0x45))


def _exact(p: int, stop: int, code: int) -> None:
    if p != stop:
        raise DecodeError(f"AMQP 1.0 compound 0x{code:02x}: its items end at {p}, its size says {stop}")


def _array(buf, p: int, stop: int, count: int, depth: int) -> Array:
    if p >= stop:
        raise DecodeError("AMQP 1.0 array without an element constructor")
    code = buf[p]
    p += 1
    descriptor = None
    if code == 0x00:
        descriptor, p = decode_value(buf, p, stop, depth + 1)
        _need(buf, p, 1, stop)
        code = buf[p]
        p += 1
    if code in _ZERO_WIDTH and count > stop - p + 256:
        raise DecodeError(f"AMQP 1.0 array claims {count} elements of constructor 0x{code:02x}")
    out = Array((), code, descriptor)
    add = out.append
    for _ in range(count):
        if code == 0x00:
            raise DecodeError("AMQP 1.0 array element constructor 0x00 after a descriptor")
        v, p = _after(code, buf, p, stop, depth + 1)
        add(Described(descriptor, v) if descriptor is not None else v)
    _exact(p, stop, code)
    return out


def skip_value(buf, pos: int, end: int) -> int:
    """The position after the AMQP 1.0 value at ``buf[pos:]``, without decoding it (sizes
    only; described values and compounds are skipped whole). Raises :class:`DecodeError`."""
    if pos >= end:
        raise DecodeError(f"AMQP 1.0 value expected at {pos}, none left")
    code = buf[pos]
    pos += 1
    if code == 0x00:
        return skip_value(buf, skip_value(buf, pos, end), end)
    hi = code & 0xF0
    if hi in (0xa0, 0xc0, 0xe0):
        _need(buf, pos, 1, end)
        n = pos + 1 + buf[pos]
    elif hi in (0xb0, 0xd0, 0xf0):
        _need(buf, pos, 4, end)
        n = pos + 4 + _u32(buf, pos)[0]
    else:
        w = _FIXED.get(hi >> 4)
        if w is None or (hi == 0x40 and code > 0x45):
            raise DecodeError(f"unknown AMQP 1.0 constructor 0x{code:02x}")
        n = pos + w
    if n > end:
        raise DecodeError(f"AMQP 1.0 value of {n - pos + 1} bytes at {pos - 1}, {end - pos + 1} left")
    return n


# ---------------------------------------------------------------------------------- encoding

_p8 = struct.Struct(">B").pack
_pb = struct.Struct(">b").pack
_p16 = struct.Struct(">BH").pack
_ps16 = struct.Struct(">Bh").pack
_p32 = struct.Struct(">BI").pack
_ps32 = struct.Struct(">Bi").pack
_p64 = struct.Struct(">BQ").pack
_ps64 = struct.Struct(">Bq").pack
_pf32 = struct.Struct(">Bf").pack
_pf64 = struct.Struct(">Bd").pack
_pc = struct.Struct(">BBB").pack            # constructor, size, count (8-bit compounds)
_pC = struct.Struct(">BII").pack            # constructor, size, count (32-bit compounds)
_pI = struct.Struct(">I").pack
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


class Encoder:
    """Encodes Python values as AMQP 1.0 (see the module docstring for the type mapping).

    ``short_max``: the longest string/binary/symbol (bytes) encoded with a 1-byte length:
    255 (RabbitMQ 4.x, the smallest encoding) or 254 (RabbitMQ 3.10's generator switches at
    ``size < 255``); ``sym_max``: the same for symbols (3.10 writes every symbol with a 1-byte
    length). Raises :class:`EncodeError` for a value with no encoding."""

    __slots__ = ("short_max", "sym_max")

    def __init__(self, short_max: int = 255, sym_max: int | None = None):
        self.short_max = short_max
        self.sym_max = short_max if sym_max is None else sym_max

    def encode(self, value: Any) -> bytes:
        """The encoding of ``value`` (constructor included)."""
        out = bytearray()
        self.write(out, value, 0)
        return bytes(out)

    def write(self, out: bytearray, v: Any, depth: int = 0) -> None:
        """Append the encoding of ``v`` to ``out``."""
        if depth > MAX_DEPTH:
            raise EncodeError(f"AMQP 1.0 values nested deeper than {MAX_DEPTH}")
        t = type(v)
        if t is str:
            self._var(out, 0xa1, v.encode("utf-8", "surrogateescape"))
        elif t is int:
            self._long(out, v)
        elif v is None:
            out.append(0x40)
        elif t is bool:
            out.append(0x41 if v else 0x42)
        elif t is bytes or t is bytearray or t is memoryview:
            self._var(out, 0xa0, v)
        elif t is Symbol:
            raw = v.encode("utf-8", "surrogateescape")
            if len(raw) <= self.sym_max:
                out.append(0xa3)
                out.append(len(raw))
                out += raw
            else:
                out += _p32(0xb3, len(raw))
                out += raw
        elif t is Boolean:
            out.append(0x56)
            out.append(1 if v.value else 0)
        elif t is dict:
            self._map(out, v, depth)
        elif t is list or t is tuple:
            self._list(out, v, depth)
        elif t is float:
            out += _pf64(0x82, v)
        elif isinstance(v, _IntType) or t is Timestamp:
            self._typed_int(out, v)
        elif t is Float:
            out += _pf32(0x72, v)
        elif t is Array:
            self._array(out, v, depth)
        elif t is Described:
            out.append(0x00)
            self.write(out, v.descriptor, depth + 1)
            self.write(out, v.value, depth + 1)
        elif t is Char:
            if len(v) != 1:
                raise EncodeError(f"AMQP 1.0 char must be one code point: {v!r}")
            out += _p32(0x73, ord(v))
        elif isinstance(v, _Decimal):
            out.append({4: 0x74, 8: 0x84, 16: 0x94}[len(v)])
            out += v
        elif t is _uuid.UUID:
            out.append(0x98)
            out += v.bytes
        elif isinstance(v, _dt.datetime):
            out += _ps64(0x83, Timestamp.from_datetime(v))
        elif isinstance(v, bool):
            out.append(0x41 if v else 0x42)
        elif isinstance(v, int):
            self._long(out, int(v))
        elif isinstance(v, str):
            self._var(out, 0xa1, str(v).encode("utf-8", "surrogateescape"))
        elif isinstance(v, float):
            out += _pf64(0x82, v)
        elif isinstance(v, (bytes, bytearray, memoryview)):
            self._var(out, 0xa0, bytes(v))
        elif isinstance(v, dict):
            self._map(out, v, depth)
        elif isinstance(v, (list, tuple)):
            self._list(out, v, depth)
        else:
            raise EncodeError(f"no AMQP 1.0 encoding for {t.__name__}: {v!r}")

    def _var(self, out: bytearray, code8: int, raw) -> None:
        n = len(raw)
        if n <= self.short_max:
            out.append(code8)
            out.append(n)
        else:
            out += _p32(code8 + 0x10, n)
        out += raw

    @staticmethod
    def _long(out: bytearray, v: int) -> None:
        if -128 <= v <= 127:
            out.append(0x55)
            out.append(v & 0xFF)
        elif _LONG_MIN <= v <= _LONG_MAX:
            out += _ps64(0x81, v)
        else:
            raise EncodeError(f"int {v} does not fit an AMQP 1.0 long; wrap it in ULong if it is unsigned")

    @staticmethod
    def _typed_int(out: bytearray, v) -> None:
        t = type(v)
        i = int(v)
        if t is UInt:
            if i == 0:
                out.append(0x43)
            elif i < 256:
                out.append(0x52)
                out.append(i)
            else:
                out += _p32(0x70, i)
        elif t is ULong:
            if i == 0:
                out.append(0x44)
            elif i < 256:
                out.append(0x53)
                out.append(i)
            else:
                out += _p64(0x80, i)
        elif t is UByte:
            out.append(0x50)
            out.append(i)
        elif t is UShort:
            out += _p16(0x60, i)
        elif t is Byte:
            out.append(0x51)
            out.append(i & 0xFF)
        elif t is Short:
            out += _ps16(0x61, i)
        elif t is Int:
            if -128 <= i <= 127:
                out.append(0x54)
                out.append(i & 0xFF)
            else:
                out += _ps32(0x71, i)
        elif t is Timestamp:
            if not _LONG_MIN <= i <= _LONG_MAX:
                raise EncodeError(f"timestamp {i} does not fit 64 bits")
            out += _ps64(0x83, i)
        else:
            raise EncodeError(f"no AMQP 1.0 encoding for {t.__name__}")

    @staticmethod
    def _compound(out: bytearray, code8: int, count: int, body, wide: bool = False) -> None:
        # RabbitMQ's generator: the 8-bit form when count < 255 and size (+1 for the count) < 256
        n = len(body)
        if wide or count >= 255 or n + 1 >= 256:
            out += _pC(code8 + 0x10, n + 4, count)
        else:
            out += _pc(code8, n + 1, count)
        out += body

    def _list(self, out: bytearray, v, depth: int, wide: bool = False) -> None:
        if not v and not wide:
            out.append(0x45)
            return
        body = bytearray()
        w = self.write
        for x in v:
            w(body, x, depth + 1)
        self._compound(out, 0xc0, len(v), body, wide)

    def _map(self, out: bytearray, v: dict, depth: int, wide: bool = False) -> None:
        body = bytearray()
        w = self.write
        for k, x in v.items():
            w(body, k, depth + 1)
            w(body, x, depth + 1)
        self._compound(out, 0xc1, 2 * len(v), body, wide)

    def _array(self, out: bytearray, v, depth: int, wide: bool = False) -> None:
        descriptor = getattr(v, "descriptor", None)
        code = getattr(v, "code", None)
        items = [x.value if isinstance(x, Described) else x for x in v] if descriptor is not None else v
        if code in (None, 0x00):
            code = _array_code(items[0]) if len(items) else 0x40
        body = bytearray()
        if descriptor is not None:
            body.append(0x00)
            self.write(body, descriptor, depth + 1)
        body.append(code)
        for x in items:
            self._element(body, code, x, depth + 1)
        self._compound(out, 0xe0, len(items), body, wide)

    def _element(self, body: bytearray, code: int, x, depth: int) -> None:
        """Append one array element's payload (no constructor) for element constructor ``code``."""
        hi = code & 0xF0
        if hi in (0xa0, 0xb0):
            if code & 0x0F not in (0, 1, 3):
                raise EncodeError(f"unknown array element constructor 0x{code:02x}")
            raw = x.encode("utf-8", "surrogateescape") if isinstance(x, str) else bytes(x)
            if hi == 0xa0:
                if len(raw) > 255:
                    raise EncodeError(f"array element of {len(raw)} bytes for constructor 0x{code:02x}")
                body.append(len(raw))
            else:
                body += _pI(len(raw))
            body += raw
            return
        if hi in (0xc0, 0xd0, 0xe0, 0xf0):
            tmp = bytearray()
            wide = hi in (0xd0, 0xf0)
            if code & 0x0F == 0 and hi in (0xc0, 0xd0):
                self._list(tmp, list(x), depth, True)
            elif code & 0x0F == 1 and hi in (0xc0, 0xd0):
                self._map(tmp, dict(x), depth, True)
            elif code & 0x0F == 0:
                self._array(tmp, x, depth, True)
            else:
                raise EncodeError(f"unknown array element constructor 0x{code:02x}")
            if not wide:
                # narrow element form: re-frame the wide encoding with 1-byte size and count
                count, st, sp = _compound_head(tmp[0], tmp, 1, len(tmp))
                inner = tmp[st:sp]
                if count > 255 or len(inner) + 1 > 255:
                    raise EncodeError(f"array element too large for constructor 0x{code:02x}")
                body.append(len(inner) + 1)
                body.append(count)
                body += inner
            else:
                body += tmp[1:]
            return
        if code == 0x40 or code in (0x41, 0x42, 0x43, 0x44, 0x45):
            return
        if code == 0x56:
            body.append(1 if x else 0)
            return
        fmt = _ELEMENT_FORMATS.get(code)
        if fmt is not None:
            try:
                body += fmt(x)
            except struct.error as e:
                raise EncodeError(f"array element {x!r} for constructor 0x{code:02x}: {e}") from None
        elif code == 0x73:
            body += _pI(ord(x))
        elif code in (0x74, 0x84, 0x94):
            raw = bytes(x)
            if len(raw) != {0x74: 4, 0x84: 8, 0x94: 16}[code]:
                raise EncodeError(f"array element {x!r} for constructor 0x{code:02x}: wrong size")
            body += raw
        elif code == 0x98:
            body += x.bytes if isinstance(x, _uuid.UUID) else bytes(x)
        else:
            raise EncodeError(f"unknown array element constructor 0x{code:02x}")


_ELEMENT_FORMATS = {c: struct.Struct(f).pack for c, f in (
    (0x50, ">B"), (0x51, ">b"), (0x52, ">B"), (0x53, ">B"), (0x54, ">b"), (0x55, ">b"), (0x60, ">H"),
    (0x61, ">h"), (0x70, ">I"), (0x71, ">i"), (0x72, ">f"), (0x80, ">Q"), (0x81, ">q"), (0x82, ">d"),
    (0x83, ">q"))}


def _array_code(x) -> int:
    """The element constructor an :class:`Array` of values like ``x`` gets (RabbitMQ's
    ``constructor/1``: the widest form of each type)."""
    t = type(x)
    return {str: 0xb1, bytes: 0xb0, Symbol: 0xb3, int: 0x81, bool: 0x56, float: 0x82, UByte: 0x50,
            UShort: 0x60, UInt: 0x70, ULong: 0x80, Byte: 0x51, Short: 0x61, Int: 0x71, Float: 0x72,
            Char: 0x73, Timestamp: 0x83, _uuid.UUID: 0x98, list: 0xd0, dict: 0xd1, Array: 0xf0,
            Boolean: 0x56, type(None): 0x40}.get(t, 0x40 if x is None else None) or _bad_array(x)


def _bad_array(x):
    raise EncodeError(f"no AMQP 1.0 array element type for {type(x).__name__}")


#: the encoder RabbitMQ 4.x's generator matches (also the default for anything we send)
RABBIT_4 = Encoder(255)
#: the encoder RabbitMQ 3.10's generator matches (1-byte lengths below 255 bytes only)
RABBIT_310 = Encoder(254, 255)


def encode_value(value: Any) -> bytes:
    """The AMQP 1.0 encoding of ``value`` (see the module docstring; :data:`RABBIT_4` rules)."""
    return RABBIT_4.encode(value)
