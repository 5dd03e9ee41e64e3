"""The stream protocol's wire types: read and write them, with bounds checks.

PROTOCOL.adoc "Types": ``int8/16/32/64`` and ``uint8/16/32/64`` big-endian; ``string`` =
int16 length + UTF-8 bytes (-1 = null); ``bytes`` = int32 length + bytes (-1 = null); arrays
= int32 count + the elements. RabbitMQ parses lengths as *unsigned* (``Size:16``) in
``rabbit_stream_core``, except the ``bytes`` of ``sasl_authenticate`` (``-1:32/signed`` =
empty); :class:`Reader` reads -1 as null for both, which RabbitMQ would not accept as a string
(it would read 65535 bytes), so this codec writes null strings only where a caller asks.

A :class:`Reader` that runs past the end of its frame, or meets invalid UTF-8, raises
:class:`~.errors.UnknownFrame` (RabbitMQ's parser finds no clause and yields
``{unknown, Bin}``: the reader closes with ``UNKNOWN_FRAME``).
"""

from __future__ import annotations

import struct

from .errors import UnknownFrame

__all__ = ["Reader", "put_str", "put_bytes", "put_str_map", "put_str_list", "U8", "U16",
           "U32", "U64", "I16", "I32", "I64", "str_bytes"]

U8 = struct.Struct(">B")
U16 = struct.Struct(">H")
I16 = struct.Struct(">h")
U32 = struct.Struct(">I")
I32 = struct.Struct(">i")
U64 = struct.Struct(">Q")
I64 = struct.Struct(">q")


def str_bytes(value: str | bytes, what: str = "string") -> bytes:
    """UTF-8 of ``value`` (bytes are taken as they are); ``ValueError`` above 32,767 bytes
    (an int16 length)."""
    b = value if isinstance(value, (bytes, bytearray)) else str(value).encode("utf-8")
    if len(b) > 0x7FFF:
        raise ValueError(f"{what} of {len(b)} bytes is longer than a stream-protocol string "
                         "(int16 length: at most 32,767 bytes)")
    return bytes(b)


def put_str(out: bytearray, value: str | bytes | None, what: str = "string") -> None:
    """Append a ``string`` (None: the null string, length -1)."""
    if value is None:
        out += b"\xff\xff"
        return
    b = str_bytes(value, what)
    out += U16.pack(len(b))
    out += b


def put_bytes(out: bytearray, value: bytes | None) -> None:
    """Append ``bytes`` (None: null, length -1)."""
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += U32.pack(len(value))
    out += value


def put_str_map(out: bytearray, m: dict, what: str = "property") -> None:
    """Append ``[Key Value]`` of strings (int32 count first)."""
    out += U32.pack(len(m))
    for k, v in m.items():
        put_str(out, k, f"{what} name")
        put_str(out, v if isinstance(v, (str, bytes)) else str(v), f"{what} {k!r}")


def put_str_list(out: bytearray, items, what: str = "string") -> None:
    """Append ``[string]`` (int32 count first)."""
    items = list(items)
    out += U32.pack(len(items))
    for s in items:
        put_str(out, s, what)


class Reader:
    """Reads wire types from ``buf[pos:end]``; every read past ``end`` raises
    :class:`~.errors.UnknownFrame` naming ``what`` (the command being decoded)."""

    __slots__ = ("buf", "pos", "end", "what")

    def __init__(self, buf: bytes, pos: int, end: int, what: str):
        self.buf = buf
        self.pos = pos
        self.end = end
        self.what = what

    def short(self, need: int) -> UnknownFrame:
        return UnknownFrame(f"{self.what}: the frame ends {need - (self.end - self.pos)} "
                            f"byte(s) too early (at byte {self.pos} of {self.end})")

    def left(self) -> int:
        return self.end - self.pos

    def done(self) -> None:
        """Raise UnknownFrame when bytes are left over."""
        if self.pos != self.end:
            raise UnknownFrame(f"{self.what}: {self.end - self.pos} byte(s) left over after "
                               "the last field")

    def _take(self, s: struct.Struct) -> int:
        p = self.pos
        if p + s.size > self.end:
            raise self.short(s.size)
        self.pos = p + s.size
        return s.unpack_from(self.buf, p)[0]

    def u8(self) -> int:
        return self._take(U8)

    def u16(self) -> int:
        return self._take(U16)

    def i16(self) -> int:
        return self._take(I16)

    def u32(self) -> int:
        return self._take(U32)

    def i32(self) -> int:
        return self._take(I32)

    def u64(self) -> int:
        return self._take(U64)

    def i64(self) -> int:
        return self._take(I64)

    def raw(self, n: int) -> bytes:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise self.short(n)
        self.pos = p + n
        return bytes(self.buf[p:p + n])

    def rest(self) -> bytes:
        b = bytes(self.buf[self.pos:self.end])
        self.pos = self.end
        return b

    def string(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        if n < 0:
            raise UnknownFrame(f"{self.what}: negative string length {n}")
        b = self.raw(n)
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnknownFrame(f"{self.what}: a string is not valid UTF-8 ({exc})") from None

    def bytes_(self) -> bytes | None:
        n = self.i32()
        if n == -1:
            return None
        if n < 0:
            raise UnknownFrame(f"{self.what}: negative bytes length {n}")
        return self.raw(n)

    def count(self, min_size: int) -> int:
        """An array's int32 count, checked against the bytes left (each element takes at
        least ``min_size`` bytes), so a forged count cannot make a huge loop."""
        n = self.i32()
        if n < 0 or n * min_size > self.end - self.pos:
            raise UnknownFrame(f"{self.what}: array count {n} does not fit the "
                               f"{self.end - self.pos} byte(s) left")
        return n

    def str_map(self) -> dict:
        return {self.string(): self.string() for _ in range(self.count(4))}

    def str_list(self) -> list:
        return [self.string() for _ in range(self.count(2))]
