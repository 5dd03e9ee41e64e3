"""The log of a stream queue: AMQP 1.0 messages in osiris chunks, whichever protocol wrote them.

Semantics follow RabbitMQ (osiris ``osiris_log.erl``, ``osiris_writer.erl``;
``rabbit_stream_queue.erl``; facts in /work/shared/reference/rabbitmq-streams-over-0-9-1.md):

- every record gets the next offset, from 0; offsets never change. A chunk's first offset is
  its *chunk id*; a chunk holds *entries* (a simple entry is one AMQP 1.0 message, a
  sub-batch entry from a stream-protocol publisher holds several records, maybe compressed);
- chunks have a type: *user* (messages; a trailer carries the dedup sequences of the
  publishers that wrote into it), *tracking delta* (offsets stored by consumers, written when
  a write batch has no messages: it takes an offset, as on RabbitMQ, where two
  ``StoreOffset`` between publishes make the next message's offset jump by two) and
  *tracking snapshot* (the whole tracking state, first in each new segment so retention
  cannot lose it; it takes an offset too). Readers see user chunks only;
- what reached the stream during one event-loop tick is one write batch: at most
  :data:`CHUNK_MAX_MESSAGES` records / :data:`CHUNK_MAX_BYTES` bytes per chunk;
- chunks live in *segments* of at most ``x-stream-max-segment-size-bytes`` bytes; retention
  (``x-max-length-bytes``, ``x-max-age``) drops whole old segments when a new one starts,
  always keeping the one being written;
- deduplication (osiris ``is_duplicate/4``): a record written with a publisher reference and
  a sequence not above the last one stored for that reference is dropped (:meth:`StreamLog.is_duplicate`).

**Storage** (version 2; :data:`SEGMENT_MAGIC`). With a data directory, segment files are
``DATA_DIR/streams/<vhost>/<stream>/<first offset, 20 digits>.segment`` (names URL-quoted),
each ``OSIL`` + version 1 (u32) and then chunks exactly in osiris's format::

    magic 5 / version 0 (u8) | type (u8) | entries (u16) | records (u32) | timestamp ms (i64)
    | epoch (u64) | chunk id (u64) | data CRC-32 (u32) | data length (u32) | trailer length (u32)
    | bloom size (u8) | reserved (3) | bloom | data (entries) | trailer (tracking entries)

so a stream-protocol subscriber is sent the stored header and data as they are. A chunk is
written with ``os.pwrite`` in the event loop and fsynced by the store's writer thread in the
batch the publisher confirms wait for (:mod:`.store`). At start the segments are scanned: a
chunk whose id is not the expected next offset, whose size runs past the file or whose data
CRC is wrong is a torn or corrupt tail and is cut off; the chunk index and the tracking state
(publisher sequences, stored offsets) are rebuilt. Segments of version 1 (before issue 38:
chunks of 0-9-1 messages, no file magic) are converted at start with the broker's 0-9-1 to
AMQP 1.0 conversion, same offsets and chunk boundaries (:meth:`StreamLog._migrate_v1`).
Without a data directory, segments are in-memory byte arrays with the same layout.

**Filtering** (RabbitMQ 3.13+, the 4.3 mode; :mod:`.stream_filter`): with ``filter_bytes``
set, each user chunk with filter values gets a Bloom filter of that many bytes, stored in
its bloom field and kept in the chunk index (``c_filter``); :meth:`StreamLog.read_chunks`
with a matcher skips a chunk whose filter cannot match without reading it.

**0-9-1 readers** read a *view* of a chunk (:meth:`StreamLog.read_chunks`' ``view``): the
queue converts the AMQP 1.0 entries to 0-9-1 (``stream_queue.py``) once per chunk read; the
last views are cached.
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

__all__ = ["StreamLog", "parse_max_age", "CHUNK_MAX_MESSAGES", "CHUNK_MAX_BYTES", "DEFAULT_SEGMENT_BYTES",
           "MAX_SEGMENT_BYTES", "CHUNK_USER", "CHUNK_TRK_DELTA", "CHUNK_TRK_SNAPSHOT", "SEGMENT_MAGIC",
           "CHUNK_HEADER_SIZE", "simple_entry", "records_view"]

log = logging.getLogger("spark_amqp.broker.stream")

#: RabbitMQ's default ``x-stream-max-segment-size-bytes`` (500 MB).
DEFAULT_SEGMENT_BYTES = 500_000_000
#: Above this ``x-stream-max-segment-size-bytes`` RabbitMQ 3.10 refuses the declare (406).
MAX_SEGMENT_BYTES = 3_000_000_000
#: osiris's other segment limit: at most this many chunks per segment.
MAX_SEGMENT_CHUNKS = 256_000
#: A chunk holds at most this many records / entry bytes (a tick's writes may make several).
#: 128 KiB, not 1 MiB: a tail probe (``x-stream-offset: last``) receives the whole last chunk,
#: so the Spark source's driver received 1.21-1.35% of a stream's bytes with 1 MiB and
#: 0.35-0.39% with 128 KiB, the stream reads as fast (issue 31; bench source --streams 1 and
#: bench streams, 2026-11-26, in CHANGELOG.md).
CHUNK_MAX_MESSAGES = 4096
CHUNK_MAX_BYTES = 1 << 17

CHUNK_USER, CHUNK_TRK_DELTA, CHUNK_TRK_SNAPSHOT = 0, 1, 2
#: the first bytes of a segment file of this format: osiris's log magic and version 1
SEGMENT_MAGIC = b"OSIL\x00\x00\x00\x01"
_MAGIC_VERSION = 0x50                    # chunk magic 5, chunk format version 0 (osiris.hrl)
_CHUNK = struct.Struct(">BBHIqQQIIIB3x")  # the 48-byte chunk header (osiris_log.erl)
CHUNK_HEADER_SIZE = _CHUNK.size
_EPOCH = 1
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_SEQ = struct.Struct(">QQ")
_CACHE_CHUNKS = 16
_TRK_SEQUENCE, _TRK_OFFSET = 0, 1

# version 1 (before issue 38): chunk records of 0-9-1 messages
_V1_HDR = struct.Struct(">IIQIQ")
_V1_ENT = struct.Struct(">HII")

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


def simple_entry(message: bytes) -> bytes:
    """The osiris simple entry of one record: ``0`` + 31-bit size, then the bytes."""
    return _U32.pack(len(message)) + message


def records_view(data: bytes, chunk_id: int) -> list:
    """The plainest view of a user chunk's data (:meth:`StreamLog.view`): one run of the
    records' bytes (a sub-batch's records split when uncompressed, else the whole entry)."""
    out = []
    p, end = 0, len(data)
    while p < end:
        head = _U32.unpack_from(data, p)[0]
        if head & 0x80000000:
            flags, records, _, size = struct.unpack_from(">BHII", data, p)
            q, stop = p + 11, p + 11 + size
            if (flags >> 4) & 7:
                out.extend([bytes(data[p:stop])] * records)
            else:
                for _ in range(records):
                    n = _U32.unpack_from(data, q)[0] & 0x7FFFFFFF
                    out.append(bytes(data[q + 4:q + 4 + n]))
                    q += 4 + n
            p = stop
            continue
        out.append(bytes(data[p + 4:p + 4 + head]))
        p += 4 + head
    return [(chunk_id, out)]


def _tracking_bytes(writers: dict, offsets: dict) -> bytes:
    """Tracking entries (osiris_log.erl "Tracking format"): per publisher reference
    ``0 | id size | id | chunk id (u64) | sequence (u64)``, per consumer reference
    ``1 | id size | id | offset (u64)``."""
    out = bytearray()
    for ref, (chunk_id, seq) in writers.items():
        out += bytes((_TRK_SEQUENCE, len(ref))) + ref + _SEQ.pack(chunk_id, seq)
    for ref, off in offsets.items():
        out += bytes((_TRK_OFFSET, len(ref))) + ref + _U64.pack(off)
    return bytes(out)


def _parse_tracking(data, pos: int, end: int, writers: dict, offsets: dict) -> None:
    while pos + 2 <= end:
        kind, n = data[pos], data[pos + 1]
        ref = bytes(data[pos + 2:pos + 2 + n])
        pos += 2 + n
        if kind == _TRK_SEQUENCE:
            writers[ref] = _SEQ.unpack_from(data, pos)
            pos += 16
        elif kind == _TRK_OFFSET:
            offsets[ref] = _U64.unpack_from(data, pos)[0]
            pos += 8
        else:
            pos += 8            # a timestamp tracking entry (osiris 1.8+): not used here


# ---------------------------------------------------------------------------------- segments

class _Segment:
    """One segment: a file (``path`` set) or an in-memory byte array; ``size`` bytes used."""

    __slots__ = ("first", "path", "fd", "buf", "size", "last_ts", "chunks")

    def __init__(self, first: int, path: str | None):
        self.first = first
        self.path = path
        self.fd = -1
        self.buf = None
        self.size = 0
        self.last_ts = 0
        self.chunks = 0
        if path is None:
            self.buf = bytearray(SEGMENT_MAGIC)
            self.size = len(SEGMENT_MAGIC)
        else:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            self.size = os.fstat(self.fd).st_size
            if self.size == 0:
                self.append(SEGMENT_MAGIC)

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
    """The log of one stream: segments of osiris chunks, an index of chunks, tracking, retention.

    Args:
        directory: where the segment files go, or None for an in-memory log.
        max_segment_bytes: a new segment starts when the current one would grow past this.
        max_bytes: ``x-max-length-bytes`` (None = unlimited).
        max_age: ``x-max-age`` in seconds (None = unlimited).
        filter_bytes: ``x-stream-filter-size-bytes`` (16..255): a Bloom filter per chunk
            (:mod:`.stream_filter`); None = no filters (RabbitMQ 3.10 has none).
        convert_v1: ``(exchange, routing key, properties bytes, body) -> AMQP 1.0 bytes``, to
            convert the segments of storage version 1 found in ``directory`` (None: refuse them).

    Offsets: ``first`` (first retained offset), ``next`` (offset the next record gets);
    ``next - first`` offsets are retained (tracking chunks take offsets too). Raises OSError
    when the directory is unusable, ValueError for version-1 segments without ``convert_v1``.
    """

    def __init__(self, directory: str | None, max_segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 max_bytes: int | None = None, max_age: float | None = None,
                 filter_bytes: int | None = None, convert_v1=None):
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
        self.c_pos: list[int] = []      # the chunk's header in its segment
        self.c_len: list[int] = []      # header + bloom + data + trailer
        self.c_data: list[int] = []     # data length
        self.c_count: list[int] = []    # records
        self.c_ts: list[int] = []
        self.c_type: list[int] = []
        self.c_filter: list[int] = []   # Bloom filter per chunk (0: empty / no filtering)
        self.head = 0
        self.next = 0
        self.bytes = 0               # retained bytes (segment sizes)
        #: entries waiting for the next chunk: (entry bytes, records, filter value or None)
        self.pending: list = []
        self.pending_records = 0
        #: tracking not yet written: publisher sequences (ref -> seq), stored offsets (ref -> offset)
        self.pending_writers: dict = {}
        self.pending_offsets: dict = {}
        #: tracking state: publisher reference -> (chunk id, sequence); consumer reference -> offset
        self.writers: dict = {}
        self.offsets: dict = {}
        self.unsynced: set = set()   # segments written since the last fsync
        self._fresh = None           # a segment just started: the next chunk goes in it
        self._cache: OrderedDict = OrderedDict()
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
            self._migrate_v1(convert_v1)
            self._load()

    # ------------------------------------------------------------------ paths / recovery
    @staticmethod
    def directory_for(data_dir: str, vhost: str, name: str) -> str:
        """``DATA_DIR/streams/<vhost>/<stream>`` (URL-quoted names, so any name is a file name)."""
        return os.path.join(data_dir, "streams", quote(vhost, safe="") or "%2F", quote(name, safe=""))

    def _seg_path(self, first: int) -> str:
        return os.path.join(self.directory, f"{first:020d}.segment")

    def _segment_names(self) -> list[str]:
        return sorted(n for n in os.listdir(self.directory) if n.endswith(".segment"))

    def _load(self) -> None:
        names = self._segment_names()
        expected = None
        for i, n in enumerate(names):
            try:
                first = int(n.split(".")[0])
            except ValueError:
                continue
            seg = _Segment(first, os.path.join(self.directory, n))
            pos = len(SEGMENT_MAGIC)
            good = pos if seg.read(0, len(SEGMENT_MAGIC)) == SEGMENT_MAGIC else 0
            if expected is None:
                expected = first
            while good and pos + CHUNK_HEADER_SIZE <= seg.size:
                hdr = seg.read(pos, CHUNK_HEADER_SIZE)
                (mv, ctype, entries, records, ts, _epoch, chunk_id, crc, dlen, tlen,
                 blen) = _CHUNK.unpack(hdr)
                total = CHUNK_HEADER_SIZE + blen + dlen + tlen
                if mv != _MAGIC_VERSION or ctype > 2 or chunk_id != expected or pos + total > seg.size:
                    break
                body = seg.read(pos + CHUNK_HEADER_SIZE, blen + dlen + tlen)
                if zlib.crc32(body[blen:blen + dlen]) != crc:
                    break
                self._index(chunk_id, seg, pos, total, dlen, records, ts, ctype,
                            int.from_bytes(body[:blen], "big") if blen else 0)
                self._track(ctype, body, blen, dlen, tlen)
                pos += total
                good = pos
                expected = chunk_id + records
            if good < seg.size:
                log.warning("stream segment %s: cutting %d bytes of a torn or corrupt tail at byte %d",
                            seg.path, seg.size - max(good, len(SEGMENT_MAGIC)), good)
                if good == 0:
                    seg.truncate(0)
                    seg.append(SEGMENT_MAGIC)
                else:
                    seg.truncate(good)
            if seg.chunks == 0 and i < len(names) - 1:
                seg.remove()
                continue
            self.segments.append(seg)
            self.bytes += seg.size
        if self.c_first:
            self.next = self.c_first[-1] + self.c_count[-1]
        elif self.segments:
            self.next = self.segments[-1].first

    def _track(self, ctype: int, body: bytes, blen: int, dlen: int, tlen: int) -> None:
        """Rebuild the tracking state from a chunk read at start."""
        if ctype == CHUNK_USER:
            if tlen:
                _parse_tracking(body, blen + dlen, blen + dlen + tlen, self.writers, self.offsets)
            return
        if ctype == CHUNK_TRK_SNAPSHOT:
            self.writers.clear()
            self.offsets.clear()
        # one simple entry holding tracking entries
        p = blen
        n = _U32.unpack_from(body, p)[0] & 0x7FFFFFFF
        _parse_tracking(body, p + 4, p + 4 + n, self.writers, self.offsets)

    def _migrate_v1(self, convert_v1) -> None:
        """Convert the segments of storage version 1 (no file magic; chunk records
        ``crc | length | first | count | ts`` of 0-9-1 entries ``(enc, props, body)``) to this
        format, with the same offsets and chunk boundaries, then replace them."""
        names = self._segment_names()
        old = []
        for n in names:
            with open(os.path.join(self.directory, n), "rb") as f:
                head = f.read(len(SEGMENT_MAGIC))
            if head and head != SEGMENT_MAGIC:
                old.append(n)
        if not old:
            return
        if convert_v1 is None:
            raise ValueError(f"stream {self.directory}: segments of storage version 1 and no conversion "
                             f"to convert them with")
        log.warning("stream %s: converting %d segment(s) of storage version 1 to AMQP 1.0 messages",
                    self.directory, len(old))
        tmp = self.directory + ".v2-conversion"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        conv = StreamLog.__new__(StreamLog)
        StreamLog.__init__(conv, None, self.max_segment_bytes)
        conv.directory = tmp
        for n in old:
            with open(os.path.join(self.directory, n), "rb") as f:
                data = f.read()
            pos = 0
            seg = _Segment(int(n.split(".")[0]), os.path.join(tmp, n))
            while pos + _V1_HDR.size <= len(data):
                crc, plen, first, count, ts = _V1_HDR.unpack_from(data, pos)
                end = pos + _V1_HDR.size + plen
                if end > len(data) or zlib.crc32(data[pos + _V1_HDR.size:end], zlib.crc32(data[pos + 4:pos + _V1_HDR.size])) != crc:
                    break
                p = pos + _V1_HDR.size
                entries = []
                for _ in range(count):
                    el, pl, bl = _V1_ENT.unpack_from(data, p)
                    p += _V1_ENT.size
                    enc = data[p:p + el]
                    props = data[p + el:p + el + pl]
                    body = data[p + el + pl:p + el + pl + bl]
                    p += el + pl + bl
                    x = enc[1:1 + enc[0]].decode("utf-8", "replace")
                    rk = enc[2 + enc[0]:].decode("utf-8", "replace")
                    entries.append((simple_entry(convert_v1(x, rk, props, body)), 1, None))
                seg.append(_chunk_bytes(CHUNK_USER, entries, first, ts, b"", 0))
                pos = end
            seg.close()
        for n in old:
            os.replace(os.path.join(tmp, n), os.path.join(self.directory, n))
        shutil.rmtree(tmp, ignore_errors=True)

    def _index(self, first: int, seg: _Segment, pos: int, length: int, dlen: int, count: int, ts: int,
               ctype: int, bloom: int = 0) -> None:
        self.c_filter.append(bloom)
        self.c_first.append(first)
        self.c_seg.append(seg)
        self.c_pos.append(pos)
        self.c_len.append(length)
        self.c_data.append(dlen)
        self.c_count.append(count)
        self.c_ts.append(ts)
        self.c_type.append(ctype)
        seg.last_ts = ts
        seg.chunks += 1

    # ------------------------------------------------------------------ offsets
    @property
    def first(self) -> int:
        """The first retained offset (= ``next`` when nothing is retained)."""
        return self.c_first[self.head] if self.head < len(self.c_first) else self.next

    @property
    def end(self) -> int:
        """The offset the next appended record gets, pending records included."""
        return self.next + self.pending_records

    @property
    def message_count(self) -> int:
        return self.end - self.first

    def last_chunk_start(self) -> int:
        """Id of the last user chunk (``next`` when there is none): offset spec ``last``."""
        types = self.c_type
        for i in range(len(types) - 1, self.head - 1, -1):
            if types[i] == CHUNK_USER:
                return self.c_first[i]
        return self.next

    def offset_for_timestamp(self, ts_ms: int) -> int:
        """Id of the first chunk with a timestamp ≥ ``ts_ms`` (``next`` when none)."""
        ts = self.c_ts
        for i in range(self.head, len(ts)):
            if ts[i] >= ts_ms:
                return self.c_first[i]
        return self.next

    def first_timestamp(self) -> int:
        """The timestamp (ms) of the first retained chunk, 0 when empty."""
        return self.c_ts[self.head] if self.head < len(self.c_ts) else 0

    def last_user_chunk_id(self) -> int:
        """Id of the last user chunk, -1 when there is none (committed chunk id)."""
        types = self.c_type
        for i in range(len(types) - 1, self.head - 1, -1):
            if types[i] == CHUNK_USER:
                return self.c_first[i]
        return -1

    # ------------------------------------------------------------------ writing
    def append(self, message: bytes, filter_value: bytes | None = None) -> int:
        """Queue one record (an AMQP 1.0 message) for the next chunk; returns its offset."""
        off = self.next + self.pending_records
        self.pending.append((simple_entry(message), 1, filter_value))
        self.pending_records += 1
        return off

    def append_entry(self, entry: bytes, records: int, filter_value: bytes | None = None) -> int:
        """Queue one osiris entry as given (a simple entry, or a sub-batch of ``records``
        records; its header included); returns the offset of its first record."""
        n = self.pending_records
        self.pending.append((entry, records, filter_value))
        self.pending_records = n + records
        return self.next + n

    def is_duplicate(self, ref: bytes, seq: int) -> bool:
        """Whether publisher ``ref``'s record ``seq`` is one already stored or queued
        (osiris_writer ``is_duplicate/4``: ``seq`` not above the last tracked sequence)."""
        last = self.writer_sequence(ref)
        return last is not None and seq <= last

    def track_writer(self, ref: bytes, seq: int) -> None:
        """Record ``seq`` as publisher ``ref``'s last sequence (written in the next chunk's
        trailer)."""
        self.pending_writers[ref] = seq

    def writer_sequence(self, ref: bytes) -> int | None:
        """Publisher ``ref``'s last sequence (QueryPublisherSequence), None when unknown."""
        s = self.pending_writers.get(ref)
        if s is not None:
            return s
        w = self.writers.get(ref)
        return None if w is None else w[1]

    def store_offset(self, ref: bytes, offset: int) -> None:
        """Store consumer ``ref``'s offset (written with the next write batch: in a user
        chunk's trailer, or alone as a tracking delta chunk that takes an offset)."""
        self.pending_offsets[ref] = offset

    def query_offset(self, ref: bytes) -> int | None:
        """Consumer ``ref``'s stored offset, None when none was stored."""
        o = self.pending_offsets.get(ref)
        return o if o is not None else self.offsets.get(ref)

    @property
    def has_pending(self) -> bool:
        return bool(self.pending or self.pending_offsets or self.pending_writers)

    def seal(self) -> bool:
        """Write the pending records (and tracking) as chunks; True when anything was written.
        As osiris_writer's batch: records in user chunks whose trailers carry the tracking;
        tracking alone in a tracking delta chunk."""
        if not self.has_pending:
            return False
        pend = self.pending
        self.pending = []
        self.pending_records = 0
        ts = int(time.time() * 1000)
        writers, offsets = self.pending_writers, self.pending_offsets
        self.pending_writers, self.pending_offsets = {}, {}
        if not pend:
            for ref, off in offsets.items():
                self.offsets[ref] = off
            entry = simple_entry(_tracking_bytes({}, offsets))
            self._write_chunk(CHUNK_TRK_DELTA, [(entry, 1, None)], ts, b"")
            return True
        i, n = 0, len(pend)
        while i < n:
            j = i
            size = records = 0
            while j < n and records < CHUNK_MAX_MESSAGES and (size < CHUNK_MAX_BYTES or j == i):
                e = pend[j]
                size += len(e[0])
                records += e[1]
                j += 1
            trailer = b""
            if j == n and (writers or offsets):
                chunk_id = self._next_chunk_id_after_roll(size)
                w = {ref: (chunk_id, seq) for ref, seq in writers.items()}
                self.writers.update(w)
                self.offsets.update(offsets)
                trailer = _tracking_bytes(w, offsets)
            self._write_chunk(CHUNK_USER, pend[i:j], ts, trailer, size, records)
            i = j
        return True

    def _next_chunk_id_after_roll(self, size: int) -> int:
        """The id the next chunk will get (a segment roll may write a snapshot before it)."""
        self._segment_for(size)
        return self.next

    def _write_chunk(self, ctype: int, entries: list, ts: int, trailer: bytes, data_len: int = -1,
                     count: int = -1) -> None:
        bloom = 0
        if ctype == CHUNK_USER and self.filter_bytes is not None:
            from .stream_filter import ChunkFilterBuilder

            builder = ChunkFilterBuilder(self.filter_bytes)
            for _, _, fv in entries:
                if fv is None:
                    builder.unfiltered = True
                else:
                    builder.add_value(fv)
            bloom = builder.value()
        if data_len < 0:
            data_len = sum(len(e[0]) for e in entries)
            count = sum(e[1] for e in entries)
        seg = self._segment_for(CHUNK_HEADER_SIZE + data_len + len(trailer))
        blen = self.filter_bytes if bloom else 0
        record = _chunk_bytes(ctype, entries, self.next, ts, trailer, blen, bloom, count)
        pos = seg.append(record)
        self._fresh = None
        self.bytes += len(record)
        self._index(self.next, seg, pos, len(record), data_len, count, ts, ctype, bloom)
        self.next += count
        if seg.path is not None:
            self.unsynced.add(seg)

    def _segment_for(self, n: int) -> _Segment:
        segs = self.segments
        if segs and (segs[-1].chunks == 0 or segs[-1] is self._fresh
                     or (segs[-1].size + n <= self.max_segment_bytes and segs[-1].chunks < MAX_SEGMENT_CHUNKS)):
            return segs[-1]
        seg = _Segment(self.next, self._seg_path(self.next) if self.directory is not None else None)
        segs.append(seg)
        self.bytes += seg.size
        self.apply_retention()
        if self.writers or self.offsets:
            # osiris_log:evaluate_tracking_snapshot/2: the tracking state first in a new segment
            entry = simple_entry(_tracking_bytes(self.writers, self.offsets))
            record = _chunk_bytes(CHUNK_TRK_SNAPSHOT, [(entry, 1, None)], self.next, int(time.time() * 1000), b"", 0)
            pos = seg.append(record)
            self.bytes += len(record)
            self._index(self.next, seg, pos, len(record), len(entry), 1, int(time.time() * 1000), CHUNK_TRK_SNAPSHOT)
            self.next += 1
            if seg.path is not None:
                self.unsynced.add(seg)
        self._fresh = seg
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
            for name in ("c_first", "c_seg", "c_pos", "c_len", "c_data", "c_count", "c_ts", "c_type", "c_filter"):
                setattr(self, name, getattr(self, name)[h:])
            self.head = 0

    # ------------------------------------------------------------------ reading
    def chunk_index(self, offset: int) -> int:
        """Index (in the chunk lists) of the chunk holding ``offset`` (≥ ``first``, < ``next``)."""
        return bisect_right(self.c_first, offset, self.head) - 1

    def chunk_header_and_data(self, i: int) -> tuple[bytes, bytes]:
        """The stored 48-byte header and the data (entries) of chunk ``i``: what the stream
        protocol delivers (osiris ``send_file``: header, then data without bloom or trailer)."""
        seg = self.c_seg[i]
        pos = self.c_pos[i]
        raw = seg.read(pos, self.c_len[i])
        blen = raw[44]
        return raw[:CHUNK_HEADER_SIZE], raw[CHUNK_HEADER_SIZE + blen:CHUNK_HEADER_SIZE + blen + self.c_data[i]]

    def chunk_data(self, i: int) -> bytes:
        """The data (entries) of chunk ``i``."""
        return self.chunk_header_and_data(i)[1]

    def view(self, i: int, convert) -> list:
        """``convert(chunk data, chunk id)`` of user chunk ``i`` (a list of runs
        ``(first offset, [entry, ...])``); the last :data:`_CACHE_CHUNKS` views are kept."""
        key = (self.c_first[i], convert)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        out = convert(self.chunk_data(i), key[0])
        self._cache[key] = out
        if len(self._cache) > _CACHE_CHUNKS:
            self._cache.popitem(last=False)
        return out

    def next_user_chunk(self, offset: int) -> int:
        """Index of the first user chunk holding ``offset`` or after it (``len(c_first)``
        when none)."""
        if offset < self.first:
            offset = self.first
        if offset >= self.next:
            return len(self.c_first)
        i = self.chunk_index(offset)
        types = self.c_type
        n = len(types)
        while i < n and types[i] != CHUNK_USER:
            i += 1
        return i

    def read_chunks(self, offset: int, credit: int, convert, matcher=None) -> tuple[int, list]:
        """Whole user chunks from the one holding ``offset`` (its records below ``offset``
        dropped) while fewer than ``credit`` records were taken; tracking chunks are skipped.
        ``convert``: the view of a chunk (:meth:`view`). ``matcher`` (a
        :class:`~.stream_filter.StreamMatcher`, or None): chunks whose Bloom filter cannot match
        are skipped unread and take no credit. Returns (the offset after the last chunk
        examined, [(offset of a run's first record, [entry, ...]), ...]). Source: RabbitMQ
        3.10.8 ``rabbit_stream_queue:stream_entries/4`` (a chunk at a time while credit is
        above 0), osiris ``read_header0`` (filter, chunk selector ``user_data``)."""
        if offset < self.first:
            offset = self.first
        if offset >= self.next or credit <= 0:
            return offset, []
        runs: list = []
        taken = 0
        i = self.chunk_index(offset)
        n = len(self.c_first)
        types = self.c_type
        while i < n and taken < credit:
            cfirst = self.c_first[i]
            nxt = cfirst + self.c_count[i]
            if types[i] != CHUNK_USER:
                offset = nxt
                i += 1
                continue
            if matcher is not None:
                if not matcher.matches(self.c_filter[i]):
                    self.filter_stats["chunks_skipped"] += 1
                    self.filter_stats["bytes_skipped"] += self.c_len[i]
                    offset = nxt
                    i += 1
                    continue
                self.filter_stats["chunks_read"] += 1
            for start, entries in self.view(i, convert):
                end = start + len(entries)
                if end <= offset:
                    continue
                if start < offset:
                    entries = entries[offset - start:]
                    start = offset
                runs.append((start, entries))
                taken += len(entries)
            offset = nxt
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
        self.pending_records = 0
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


def _chunk_bytes(ctype: int, entries: list, chunk_id: int, ts: int, trailer: bytes, blen: int,
                 bloom: int = 0, records: int = -1) -> bytes:
    """An osiris chunk: header, bloom (``blen`` bytes of ``bloom``), data, trailer."""
    data = b"".join([e[0] for e in entries])
    if records < 0:
        records = sum(e[1] for e in entries)
    head = _CHUNK.pack(_MAGIC_VERSION, ctype, len(entries), records, ts, _EPOCH, chunk_id,
                       zlib.crc32(data), len(data), len(trailer), blen)
    if blen:
        return head + bloom.to_bytes(blen, "big") + data + trailer
    return head + data + trailer
