"""Cutting received bytes into stream-protocol frames, with the size limit checked first.

A frame is ``Size:uint32`` then ``Size`` bytes (PROTOCOL.adoc "Frame Structure").
:class:`FrameDecoder` takes bytes in pieces of any size and returns complete frames as
``(buffer, start, end)`` triples (the frame's content, after the size) without copying a frame
that arrived whole inside one piece. A frame announcing more than ``max_frame_size`` raises
:class:`~.errors.FrameTooLarge` from its 4-byte size alone, before any of its payload is
buffered (RabbitMQ 4.x's ``rabbit_stream_core:incoming_data`` does the same and then
ignores every later byte); the decoder stays failed. A frame of fewer than 4 bytes (no room
for key and version) raises :class:`~.errors.UnknownFrame`.
"""

from __future__ import annotations

import struct

from .errors import FrameTooLarge, UnknownFrame

__all__ = ["FrameDecoder"]

_SIZE = struct.Struct(">I").unpack_from


class FrameDecoder:
    """Incremental frame splitter (sans-IO).

    ``max_frame_size``: the largest frame accepted, in bytes, the 4-byte size excluded (0: no
    limit). RabbitMQ's ``frame_max`` counts the same bytes (``frame_size_ok(Size, FrameMax)``
    compares the announced ``Size``).
    """

    __slots__ = ("max_frame_size", "_partial", "_need", "_head", "failed")

    def __init__(self, max_frame_size: int = 0):
        self.max_frame_size = max_frame_size
        self._partial: bytearray | None = None  # a frame's content being filled
        self._need = 0  # bytes still missing from _partial
        self._head = b""  # up to 3 bytes of a size not yet complete
        self.failed: Exception | None = None

    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._head) + (len(self._partial) - self._need if self._partial is not None else 0)

    def _check(self, size: int) -> None:
        if self.max_frame_size and size > self.max_frame_size:
            self.failed = FrameTooLarge(f"a frame of {size:,} bytes was announced; the limit "
                                        f"is {self.max_frame_size:,} (frame_max)")
            raise self.failed
        if size < 4:
            self.failed = UnknownFrame(f"a frame of {size} byte(s) has no room for its key "
                                       "and version")
            raise self.failed

    def feed(self, data: bytes) -> list:
        """Frames completed by ``data``: a list of ``(buffer, start, end)`` (``buffer`` is
        ``bytes``). Raises FrameTooLarge / UnknownFrame as above; the frames completed before
        the bad one are attached to the exception as ``.frames``."""
        if self.failed is not None:
            raise self.failed
        out: list = []
        pos = 0
        n = len(data)
        try:
            if self._partial is not None:  # finish the frame in progress
                take = min(self._need, n)
                start = len(self._partial) - self._need
                self._partial[start:start + take] = data[:take]
                self._need -= take
                pos = take
                if self._need:
                    return out
                buf = bytes(self._partial)
                self._partial = None
                out.append((buf, 0, len(buf)))
            if self._head:
                k = 4 - len(self._head)
                if n - pos < k:
                    self._head += data[pos:]
                    return out
                head = self._head + data[pos:pos + k]
                self._head = b""
                pos += k
                size = _SIZE(head)[0]
                self._check(size)
                if n - pos >= size:
                    out.append((bytes(data[pos:pos + size]), 0, size))
                    pos += size
                else:
                    self._start_partial(data, pos, size)
                    return out
            check = self.max_frame_size
            while n - pos >= 4:
                size = _SIZE(data, pos)[0]
                if (check and size > check) or size < 4:
                    self._check(size)
                p = pos + 4
                if n - p >= size:
                    out.append((data, p, p + size))
                    pos = p + size
                else:
                    self._start_partial(data, p, size)
                    return out
            if pos < n:
                self._head = bytes(data[pos:])
            return out
        except (FrameTooLarge, UnknownFrame) as exc:
            exc.frames = out  # type: ignore[attr-defined]
            raise

    def _start_partial(self, data: bytes, pos: int, size: int) -> None:
        part = bytearray(size)
        have = len(data) - pos
        part[:have] = data[pos:]
        self._partial = part
        self._need = size - have
