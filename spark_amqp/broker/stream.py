"""Stream queues (``x-queue-type=stream``): an append-only, replayable log served over AMQP 0-9-1.

Semantics follow RabbitMQ 3.10.8 (``rabbit_stream_queue.erl``, osiris ``osiris_log.erl``, docs
"Streams"; facts and observations in /work/shared/reference/rabbitmq-streams-over-0-9-1.md):

- every stored message gets the next offset, from 0; offsets never change;
- messages are stored in *chunks* (here: what reached the stream during one event-loop tick,
  at most :data:`CHUNK_MAX_MESSAGES` messages / :data:`CHUNK_MAX_BYTES` bytes), chunks in
  *segments* of at most ``x-stream-max-segment-size-bytes`` bytes;
- retention (``x-max-length-bytes``, ``x-max-age``) drops whole old segments, checked when a
  new segment starts, and always keeps the segment being written;
- a consumer reads from its own position (consumer argument ``x-stream-offset``), gets the
  header ``x-stream-offset`` (AMQP long) on every delivery, and is limited by its prefetch;
  acks only return credit; nothing is ever requeued, nothing removed by consumers.

**Storage.** With a data directory, segment files live in
``DATA_DIR/streams/<vhost>/<stream>/<first offset, 20 digits>.segment`` (names URL-quoted). A
segment is a sequence of chunk records::

    crc32 (u32, of everything after it) | payload length (u32) | first offset (u64)
    | message count (u32) | timestamp in ms (u64) | payload

and the payload is, per message, ``enc length (u16) | props length (u32) | body length (u32)
| enc | props | body`` (``enc`` = exchange and routing key as two AMQP short strings,
``props`` = the publisher's raw content-header properties). Chunks are written with
``os.write`` in the event loop (page cache) and fsynced by the store's writer thread in the
batch whose ticket the publisher confirms wait for (see :mod:`.store`), so a confirmed message
survives ``kill -9`` and a power cut. At start the segments are scanned, CRCs checked, and a
torn tail (a chunk not completely written) is cut off; the in-memory index (one entry per
chunk) is rebuilt. Reads use ``os.pread``; the last decoded chunks are cached. Without a data
directory the segments are in-memory byte arrays with the same layout.

**Filtering** (RabbitMQ 3.13+, the 4.3 mode; :mod:`.stream_filter`): with ``filter_bytes``
set, each chunk's Bloom filter is built when the chunk is written and kept in the chunk
index (``c_filter``); it is derived data, rebuilt from the payload when the segments are
scanned at start, so the segment format is the same in both modes. :meth:`StreamLog.read_chunks_filtered`
skips a chunk whose filter cannot match without reading it.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import struct
import time
import zlib
from bisect import bisect_right
from collections import OrderedDict
from urllib.parse import quote

from ..protocol import compiled


__all__ = ["StreamLog", "parse_max_age", "add_offset_header", "offset_header_split", "CHUNK_MAX_MESSAGES",
           "CHUNK_MAX_BYTES", "DEFAULT_SEGMENT_BYTES", "MAX_SEGMENT_BYTES"]

log = logging.getLogger("spark_amqp.broker.stream")

#: RabbitMQ's default ``x-stream-max-segment-size-bytes`` (500 MB).
DEFAULT_SEGMENT_BYTES = 500_000_000
#: Above this ``x-stream-max-segment-size-bytes`` RabbitMQ 3.10 refuses the declare (406).
MAX_SEGMENT_BYTES = 3_000_000_000
#: A chunk holds at most this many messages / payload bytes (a tick's publishes may make several).
#: 128 KiB, not 1 MiB: a tail probe (``x-stream-offset: last``) receives the whole last chunk,
#: so the Spark source's driver received 1.21-1.35% of a stream's bytes with 1 MiB and
#: 0.35-0.39% with 128 KiB, the stream reads as fast (issue 31; bench source --streams 1 and
#: bench streams, 2026-11-26, in CHANGELOG.md).
CHUNK_MAX_MESSAGES = 4096
CHUNK_MAX_BYTES = 1 << 17

_HDR = struct.Struct(">IIQIQ")          # crc, payload length, first offset, count, timestamp ms
_HDR_TAIL = struct.Struct(">IQIQ")      # the part the crc covers before the payload
_ENT = struct.Struct(">HII")
_ENT_SIZE = _ENT.size
_HDR_SIZE = _HDR.size
_CACHE_CHUNKS = 16
_FILTER_HEADER = b"x-stream-filter-value"   # stream_filter.FILTER_VALUE_HEADER

# ``x-max-age`` units (RabbitMQ docs "Streams": Y, M, D, h, m, s; M = 30 days, Y = 365 days)
_AGE_UNITS = {"Y": 365 * 86400, "M": 30 * 86400, "D": 86400, "h": 3600, "m": 60, "s": 1}
_AGE_RE = re.compile(r"^([0-9]+)([YMDhms])$")


def parse_max_age(value) -> float | None:
    """Seconds of an interval string like ``"7D"`` / ``"1h"`` (``<int><unit>``, units
    Y M D h m s; M = 30 days, Y = 365 days), or None when it is not one. Source: RabbitMQ docs
    "Streams" (x-max-age) and ``rabbit_amqqueue:check_max_age/1``."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    m = _AGE_RE.match(value)
    if m is None:
        return None
    return int(m.group(1)) * _AGE_UNITS[m.group(2)]


# ---------------------------------------------------------------------------------- properties

_F_HEADERS = 1 << 13
_F_CT = 1 << 15
_F_CE = 1 << 14
_OFFSET_KEY = b"\x0fx-stream-offset" + b"l"
_Q = struct.Struct(">q")
_U32 = struct.Struct(">I")


def offset_header_split(props_raw: bytes) -> tuple[bytes, bytes]:
    """``(before, after)``: ``before + <offset as 8-byte signed big-endian> + after`` is
    ``props_raw`` (content-header property flags + values, 0-9-1 §4.2.6.1) with the header
    ``x-stream-offset`` (AMQP ``l``) added at the end of its headers table (created when
    absent). Byte splicing only; a publisher's own ``x-stream-offset`` header stays before
    ours (decoders keep the last). The split depends only on ``props_raw``, so a run of
    messages with the same properties reuses it."""
    if len(props_raw) < 2:
        props_raw = b"\x00\x00"
    flags = (props_raw[0] << 8) | props_raw[1]
    if flags & 1:
        # a second flags word (never sent by real clients): re-encode
        from ..protocol.properties import decode_properties
        from ..protocol.values import Typed
        p = decode_properties(props_raw, 0, len(props_raw))
        h = {k: v for k, v in (p.headers or {}).items() if k != "x-stream-offset"}
        h["x-stream-offset"] = Typed("l", 0)
        p.headers = h
        raw = p.encode()
        i = raw.rindex(_OFFSET_KEY) + len(_OFFSET_KEY)
        return raw[:i], raw[i + 8:]
    pos = 2
    if flags & _F_CT:
        pos += 1 + props_raw[pos]
    if flags & _F_CE:
        pos += 1 + props_raw[pos]
    grow = len(_OFFSET_KEY) + 8
    if flags & _F_HEADERS:
        n = _U32.unpack_from(props_raw, pos)[0]
        end = pos + 4 + n
        return (b"".join((props_raw[:pos], _U32.pack(n + grow), props_raw[pos + 4:end], _OFFSET_KEY)),
                props_raw[end:])
    flags |= _F_HEADERS
    return (b"".join((bytes(((flags >> 8) & 0xFF, flags & 0xFF)), props_raw[2:pos], _U32.pack(grow),
                      _OFFSET_KEY)), props_raw[pos:])


def add_offset_header(props_raw: bytes, offset: int) -> bytes:
    """``props_raw`` with the header ``x-stream-offset`` = ``offset`` (AMQP ``l``, signed
    64-bit) added (see :func:`offset_header_split`)."""
    before, after = offset_header_split(props_raw)
    return before + _Q.pack(offset) + after


def split_entries(data: bytes, pos: int, count: int) -> list:
    """The ``count`` entries of a chunk record's payload from ``data[pos:]``: a list of
    ``(enc, props_raw, body)`` bytes (each entry: ``_ENT`` = u16 + u32 + u32 lengths, then the
    three values). ``struct.error`` when an entry header runs past the end. The compiled twin
    (``split_records`` of ``broker/_stream_records.pyx``, used when built) gives equal values
    and makes equal consecutive ``enc`` / ``props_raw`` one object, so the delivery writer's
    comparisons are identity checks."""
    out = []
    unpack = _ENT.unpack_from
    add = out.append
    for _ in range(count):
        el, pl, bl = unpack(data, pos)
        pos += _ENT_SIZE
        a = pos + el
        b = a + pl
        c = b + bl
        add((data[pos:a], data[a:b], data[b:c]))
        pos = c
    return out


_STREAM_RECORDS = compiled.twin("spark_amqp.broker._stream_records")
#: the compiled :func:`split_entries` (None: pure Python), see ``_stream_records.pyx``
_split_records = _STREAM_RECORDS.split_records if _STREAM_RECORDS is not None else None


# ---------------------------------------------------------------------------------- segments

class _Segment:
    """One segment: a file (``path`` set) or an in-memory byte array; ``size`` bytes used."""

    __slots__ = ("first", "path", "fd", "buf", "size", "last_ts")

    def __init__(self, first: int, path: str | None):
        self.first = first
        self.path = path
        self.fd = -1
        self.buf = None
        self.size = 0
        self.last_ts = 0
        if path is None:
            self.buf = bytearray()
        else:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            self.size = os.fstat(self.fd).st_size

    def append(self, data: bytes) -> int:
        pos = self.size
        if self.buf is not None:
            self.buf += data
        else:
            view = memoryview(data)
            while view:
                n = os.pwrite(self.fd, view, pos + len(data) - len(view))
                view = view[n:]
        self.size += len(data)
        return pos

    def read(self, pos: int, n: int) -> bytes:
        if self.buf is not None:
            return bytes(self.buf[pos:pos + n])
        return os.pread(self.fd, n, pos)

    def truncate(self, size: int) -> None:
        if self.buf is not None:
            del self.buf[size:]
        else:
            os.ftruncate(self.fd, size)
        self.size = size

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1
        self.buf = None

    def remove(self) -> None:
        self.close()
        if self.path is not None:
            try:
                os.unlink(self.path)
            except OSError:
                pass


class StreamLog:
    """The log of one stream: segments of chunks, an index of chunks, retention.

    Args:
        directory: where the segment files go, or None for an in-memory log.
        max_segment_bytes: a new segment starts when the current one would grow past this.
        max_bytes: ``x-max-length-bytes`` (None = unlimited).
        max_age: ``x-max-age`` in seconds (None = unlimited).
        filter_bytes: ``x-stream-filter-size-bytes`` (16..255): build a Bloom filter per
            chunk (:mod:`.stream_filter`); None = no filters (RabbitMQ 3.10 has none).

    Offsets: ``first`` (first retained offset), ``next`` (offset the next message gets);
    ``next - first`` messages are retained. Raises OSError when the directory is unusable.
    """

    def __init__(self, directory: str | None, max_segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 max_bytes: int | None = None, max_age: float | None = None,
                 filter_bytes: int | None = None):
        self.directory = directory
        self.max_segment_bytes = max(1, max_segment_bytes)
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.filter_bytes = filter_bytes
        #: chunks skipped / delivered by filtered reads, and the bytes of the skipped ones
        self.filter_stats = {"chunks_skipped": 0, "bytes_skipped": 0, "chunks_read": 0}
        self.segments: list[_Segment] = []
        # the chunk index: parallel lists from ``head`` on (retention advances head)
        self.c_first: list[int] = []
        self.c_seg: list[_Segment] = []
        self.c_pos: list[int] = []
        self.c_len: list[int] = []
        self.c_count: list[int] = []
        self.c_ts: list[int] = []
        self.c_filter: list[int] = []   # Bloom filter per chunk (0: empty / no filtering)
        self.head = 0
        self.next = 0
        self.bytes = 0               # retained bytes (segment sizes)
        self.pending: list = []      # (enc, props_raw, body) not yet in a chunk
        self.unsynced: set = set()   # segments written since the last fsync
        self._cache: OrderedDict = OrderedDict()
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
            self._load()

    # ------------------------------------------------------------------ paths / recovery
    @staticmethod
    def directory_for(data_dir: str, vhost: str, name: str) -> str:
        """``DATA_DIR/streams/<vhost>/<stream>`` (URL-quoted names, so any name is a file name)."""
        return os.path.join(data_dir, "streams", quote(vhost, safe="") or "%2F", quote(name, safe=""))

    def _seg_path(self, first: int) -> str:
        return os.path.join(self.directory, f"{first:020d}.segment")

    def _load(self) -> None:
        names = sorted(n for n in os.listdir(self.directory) if n.endswith(".segment"))
        for i, n in enumerate(names):
            try:
                first = int(n.split(".")[0])
            except ValueError:
                continue
            seg = _Segment(first, os.path.join(self.directory, n))
            pos = 0
            good = 0
            while pos + _HDR_SIZE <= seg.size:
                hdr = seg.read(pos, _HDR_SIZE)
                crc, plen, cfirst, count, ts = _HDR.unpack(hdr)
                if pos + _HDR_SIZE + plen > seg.size:
                    break
                payload = seg.read(pos + _HDR_SIZE, plen)
                if zlib.crc32(payload, zlib.crc32(hdr[4:])) != crc:
                    break
                self._index(cfirst, seg, pos, _HDR_SIZE + plen, count, ts,
                            self._payload_filter(payload, count))
                pos += _HDR_SIZE + plen
                good = pos
            if good < seg.size:
                log.warning("stream segment %s: cutting %d bytes of a torn or corrupt tail at byte %d",
                            seg.path, seg.size - good, good)
                seg.truncate(good)
            if good == 0 and i < len(names) - 1:
                seg.remove()
                continue
            self.segments.append(seg)
            self.bytes += seg.size
        if self.c_first:
            self.next = self.c_first[-1] + self.c_count[-1]
        elif self.segments:
            self.next = self.segments[-1].first

    def _payload_filter(self, payload: bytes, count: int) -> int:
        """The Bloom filter of a chunk's payload (0 without filtering)."""
        if self.filter_bytes is None:
            return 0
        from .stream_filter import ChunkFilterBuilder

        b = ChunkFilterBuilder(self.filter_bytes)
        pos = 0
        for _ in range(count):
            el, pl, bl = _ENT.unpack_from(payload, pos)
            a = pos + _ENT_SIZE + el
            b.add(payload[a:a + pl])
            pos = a + pl + bl
        return b.value()

    def _index(self, first: int, seg: _Segment, pos: int, length: int, count: int, ts: int,
               bloom: int = 0) -> None:
        self.c_filter.append(bloom)
        self.c_first.append(first)
        self.c_seg.append(seg)
        self.c_pos.append(pos)
        self.c_len.append(length)
        self.c_count.append(count)
        self.c_ts.append(ts)
        seg.last_ts = ts

    # ------------------------------------------------------------------ offsets
    @property
    def first(self) -> int:
        """The first retained offset (= ``next`` when nothing is retained)."""
        return self.c_first[self.head] if self.head < len(self.c_first) else self.next

    @property
    def end(self) -> int:
        """The offset the next appended message gets, pending messages included."""
        return self.next + len(self.pending)

    @property
    def message_count(self) -> int:
        return self.end - self.first

    def last_chunk_start(self) -> int:
        """First offset of the last chunk (``next`` when the log is empty)."""
        return self.c_first[-1] if len(self.c_first) > self.head else self.next

    def offset_for_timestamp(self, ts_ms: int) -> int:
        """First offset of the first chunk with a timestamp ≥ ``ts_ms`` (``next`` when none)."""
        ts = self.c_ts
        for i in range(self.head, len(ts)):
            if ts[i] >= ts_ms:
                return self.c_first[i]
        return self.next

    # ------------------------------------------------------------------ writing
    def append(self, enc: bytes, props_raw: bytes, body: bytes) -> int:
        """Queue one message for the next chunk; returns its offset."""
        off = self.next + len(self.pending)
        self.pending.append((enc, props_raw, body))
        return off

    def seal(self) -> bool:
        """Write the pending messages as chunks; True when anything was written."""
        if not self.pending:
            return False
        pend = self.pending
        self.pending = []
        ts = int(time.time() * 1000)
        i = 0
        n = len(pend)
        pack = _ENT.pack
        builder = None
        if self.filter_bytes is not None:
            from .stream_filter import ChunkFilterBuilder
        while i < n:
            parts = []
            size = 0
            j = i
            if self.filter_bytes is not None:
                builder = ChunkFilterBuilder(self.filter_bytes)
            while j < n and j - i < CHUNK_MAX_MESSAGES and (size < CHUNK_MAX_BYTES or j == i):
                enc, props, body = pend[j]
                if builder is not None:
                    if _FILTER_HEADER in props:
                        builder.add(props)
                    else:
                        builder.unfiltered = True
                parts.append(pack(len(enc), len(props), len(body)))
                parts.append(enc)
                parts.append(props)
                parts.append(body)
                size += _ENT_SIZE + len(enc) + len(props) + len(body)
                j += 1
            payload = b"".join(parts)
            first = self.next
            tail = _HDR_TAIL.pack(len(payload), first, j - i, ts)
            crc = zlib.crc32(payload, zlib.crc32(tail))
            record = _U32.pack(crc) + tail + payload
            seg = self._segment_for(len(record))
            pos = seg.append(record)
            self.bytes += len(record)
            self._index(first, seg, pos, len(record), j - i, ts,
                        builder.value() if builder is not None else 0)
            self.next = first + (j - i)
            if seg.path is not None:
                self.unsynced.add(seg)
            i = j
        return True

    def _segment_for(self, n: int) -> _Segment:
        segs = self.segments
        if segs and (segs[-1].size == 0 or segs[-1].size + n <= self.max_segment_bytes):
            return segs[-1]
        seg = _Segment(self.next, self._seg_path(self.next) if self.directory is not None else None)
        segs.append(seg)
        self.apply_retention()
        return seg

    def take_unsynced(self) -> list:
        """The file descriptors to fsync for what was written since the last call."""
        segs, self.unsynced = self.unsynced, set()
        return [s.fd for s in segs if s.fd >= 0]

    # ------------------------------------------------------------------ retention
    def apply_retention(self, now: float | None = None) -> int:
        """Drop whole old segments beyond ``max_bytes`` / older than ``max_age`` (by the
        timestamp of their last chunk), always keeping the last segment. Returns how many
        segments were dropped. Source: RabbitMQ docs "Streams", retention (segment-wise)."""
        if self.max_bytes is None and self.max_age is None:
            return 0
        now = time.time() if now is None else now
        dropped = 0
        segs = self.segments
        while len(segs) > 1:
            s = segs[0]
            too_big = self.max_bytes is not None and self.bytes > self.max_bytes
            too_old = (self.max_age is not None and s.last_ts and s.last_ts / 1000.0 < now - self.max_age)
            if not (too_big or too_old):
                break
            segs.pop(0)
            self.bytes -= s.size
            while self.head < len(self.c_seg) and self.c_seg[self.head] is s:
                self.head += 1
            s.remove()
            dropped += 1
        if dropped:
            self._compact()
            self._cache.clear()
        return dropped

    def _compact(self) -> None:
        h = self.head
        if h > 1024 and h * 2 > len(self.c_first):
            for name in ("c_first", "c_seg", "c_pos", "c_len", "c_count", "c_ts", "c_filter"):
                setattr(self, name, getattr(self, name)[h:])
            self.head = 0

    # ------------------------------------------------------------------ reading
    def chunk_index(self, offset: int) -> int:
        """Index (in the chunk lists) of the chunk holding ``offset`` (≥ ``first``, < ``next``)."""
        return bisect_right(self.c_first, offset, self.head) - 1

    def read_chunk(self, i: int) -> tuple[int, list]:
        """(first offset, [(enc, props_raw, body), ...]) of chunk ``i``."""
        first = self.c_first[i]
        cached = self._cache.get(first)
        if cached is not None:
            self._cache.move_to_end(first)
            return first, cached
        seg = self.c_seg[i]
        data = seg.read(self.c_pos[i], self.c_len[i])
        out = _split_records(data, _HDR_SIZE, self.c_count[i])  # compiled, when built
        if out is None:
            out = split_entries(data, _HDR_SIZE, self.c_count[i])
        self._cache[first] = out
        if len(self._cache) > _CACHE_CHUNKS:
            self._cache.popitem(last=False)
        return first, out

    def read(self, offset: int, limit: int) -> tuple[int, list]:
        """Up to ``limit`` messages from ``offset`` on (sealed chunks only): (offset of the
        first returned message, [(enc, props_raw, body), ...]). An offset below ``first``
        reads from ``first``."""
        if offset < self.first:
            offset = self.first
        if offset >= self.next or limit <= 0:
            return offset, []
        out: list = []
        start = offset
        i = self.chunk_index(offset)
        n = len(self.c_first)
        while i < n and len(out) < limit:
            cfirst, entries = self.read_chunk(i)
            skip = offset - cfirst if offset > cfirst else 0
            want = limit - len(out)
            out.extend(entries[skip:skip + want])
            offset = cfirst + len(entries)
            i += 1
        return start, out

    def read_chunks(self, offset: int, credit: int) -> tuple[int, list]:
        """Whole chunks from the one holding ``offset`` (its messages below ``offset``
        dropped) while fewer than ``credit`` messages were taken: (offset of the first
        returned message, [(enc, props_raw, body), ...]). At least ``credit`` messages when
        the log has them, possibly more (the rest of the last chunk taken): RabbitMQ 3.10.8
        delivers a stream to an AMQP 0-9-1 consumer a chunk at a time while its credit is
        above 0 (``rabbit_stream_queue:stream_entries/4``). An offset below ``first`` reads
        from ``first``; nothing (``[]``) at or after ``next`` or when ``credit`` <= 0."""
        if offset < self.first:
            offset = self.first
        if offset >= self.next or credit <= 0:
            return offset, []
        out: list = []
        start = offset
        i = self.chunk_index(offset)
        n = len(self.c_first)
        while i < n and len(out) < credit:
            cfirst, entries = self.read_chunk(i)
            out.extend(entries[offset - cfirst:] if offset > cfirst else entries)
            offset = cfirst + len(entries)
            i += 1
        return start, out

    def read_chunks_filtered(self, offset: int, credit: int, matcher) -> tuple[int, list]:
        """:meth:`read_chunks` for a consumer with a stream filter (``matcher``, a
        :class:`~.stream_filter.StreamMatcher`): chunks whose Bloom filter cannot match are
        skipped unread (they take no credit), matching ones are read whole (the messages
        below ``offset`` dropped) while fewer than ``credit`` messages were taken. Returns
        (the offset after the last chunk examined, [(offset of a run's first message,
        [(enc, props_raw, body), ...]), ...]): runs of consecutive offsets, one per chunk.
        Source: osiris ``osiris_log:read_header0`` (skips a non-matching chunk and reads the
        next header), ``rabbit_stream_queue:stream_entries/4``."""
        if offset < self.first:
            offset = self.first
        if offset >= self.next or credit <= 0:
            return offset, []
        runs: list = []
        taken = 0
        i = self.chunk_index(offset)
        n = len(self.c_first)
        filters = self.c_filter
        stats = self.filter_stats
        match = matcher.matches
        while i < n and taken < credit:
            if not match(filters[i]):
                stats["chunks_skipped"] += 1
                stats["bytes_skipped"] += self.c_len[i]
                offset = self.c_first[i] + self.c_count[i]
                i += 1
                continue
            cfirst, entries = self.read_chunk(i)
            stats["chunks_read"] += 1
            if offset > cfirst:
                entries = entries[offset - cfirst:]
                runs.append((offset, entries))
            else:
                runs.append((cfirst, entries))
            taken += len(entries)
            offset = cfirst + self.c_count[i]
            i += 1
        return offset, runs

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        for s in self.segments:
            s.close()

    def destroy(self) -> None:
        """Close and delete every segment (the stream was deleted)."""
        self.close()
        self.segments = []
        self.pending = []
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
