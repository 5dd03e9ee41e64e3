"""osiris chunks: the unit a stream stores and a ``deliver`` carries; read and build them.

The format is osiris's ``src/osiris_log.erl`` header comment (v1.8): a 48-byte header ::

    Mag:4=5 Ver:4=0 | ChunkType:8 | NumEntries:16 | NumRecords:32 | Timestamp:64 (signed, ms)
    Epoch:64 | ChunkId:64 (the first offset) | DataCrc:32 | DataLength:32 | TrailerLength:32
    BloomSize:8 | Reserved:24

(the comment says version 1; ``osiris.hrl`` defines ``?VERSION`` 0 in every release, and
RabbitMQ 3.10.8 sends ``0x50``), then (on disk) ``BloomSize`` bytes of Bloom filter, ``DataLength`` bytes of entries and
``TrailerLength`` bytes of tracking trailer. ``DataCrc`` is the CRC-32 (zlib's, as
``erlang:crc32``) of the entries only. A consumer of the stream protocol receives the header
and the entries: RabbitMQ's reader skips the Bloom filter (osiris
``select_amount_to_send(user_data, ...)``) and sends the trailer only with the ``all`` chunk
selector. :func:`parse_chunk` accepts all those layouts.

Entries (``NumEntries`` of them, ``NumRecords`` records in all, one offset per record):

* simple: ``0:1 Size:31`` then ``Size`` bytes: one record (a message);
* sub-batch: ``1:1 Compression:3 Reserved:4 NumRecords:16 UncompressedLength:32 Length:32``
  then ``Length`` bytes, which (decompressed) are ``NumRecords`` simple entries.

Chunk types: 0 user (messages), 1 tracking delta, 2 tracking snapshot (entries of producer
sequences and consumer offsets: ``Type:8 IdSize:8 Id`` then a 64-bit value, or for sequences
the chunk id and the sequence).

Bad chunks raise :class:`~.errors.CorruptChunk`: a wrong magic/version, a CRC that does not
match, entries that do not fill ``DataLength`` exactly, counts that disagree with the header,
a sub-batch whose records do not fill its uncompressed length.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from typing import Iterable

from .constants import CHUNK_HEADER_SIZE, CHUNK_MAGIC_VERSION, ChunkType, Compression
from .commands import SubBatch
from .errors import CorruptChunk

__all__ = ["Chunk", "parse_chunk", "encode_chunk", "make_sub_batch", "decompress",
           "py_split_entries", "split_entries", "py_join_entries", "join_entries",
           "TrackingEntry", "CHUNK_HEADER"]

CHUNK_HEADER = struct.Struct(">BBHIqQQIIIB3x")
_U32 = struct.Struct(">I").unpack_from
_SUB = struct.Struct(">BHII").unpack_from
_new = object.__new__


class TrackingEntry:
    """One entry of a tracking chunk: ``kind`` (0 sequence, 1 offset, 2 timestamp), ``id``
    (bytes: the producer or consumer reference) and ``values`` (a tuple of ints: (chunk id,
    sequence) for sequences, (offset,) for offsets, (timestamp,) for timestamps)."""

    __slots__ = ("kind", "id", "values")

    def __init__(self, kind: int, id: bytes, values: tuple):
        self.kind, self.id, self.values = kind, id, values

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrackingEntry) and (self.kind, self.id, self.values) == (
            other.kind, other.id, other.values)

    def __repr__(self) -> str:
        return f"TrackingEntry(kind={self.kind}, id={self.id!r}, values={self.values})"


class Chunk:
    """A parsed chunk: the header's fields and the entries, undecoded until asked.

    Attributes:
        chunk_type (int), num_entries, num_records (ints), timestamp (int, milliseconds since
        the epoch), epoch (int), chunk_id (int: the offset of its first record), crc (int),
        data_length, trailer_length, bloom_size (ints), data (bytes: the entries, exactly
        ``data_length`` bytes, copied when read; :meth:`entries_view` without a copy),
        trailer (bytes, usually empty), committed_chunk_id (int or
        None: from a version-2 deliver), subscription_id (int or None).

    :meth:`messages` gives the records' bytes; :meth:`offsets` their offsets
    (``chunk_id + i``).
    """

    __slots__ = ("chunk_type", "num_entries", "num_records", "timestamp", "epoch", "chunk_id",
                 "crc", "data_length", "trailer_length", "bloom_size", "trailer",
                 "committed_chunk_id", "subscription_id", "_records", "_buf", "_start")

    @property
    def data(self) -> bytes:
        """The entries' bytes (a copy of that part of the received frame)."""
        return bytes(self._buf[self._start:self._start + self.data_length])

    def entries_view(self) -> tuple:
        """``(buffer, start, end)``: where the entries lie in the received frame, without a
        copy (for code that splits them itself, e.g. into Arrow buffers)."""
        return self._buf, self._start, self._start + self.data_length

    def __repr__(self) -> str:
        return (f"Chunk(chunk_id={self.chunk_id}, type={self.chunk_type}, "
                f"entries={self.num_entries}, records={self.num_records}, "
                f"timestamp={self.timestamp}, data_length={self.data_length})")

    @property
    def next_offset(self) -> int:
        """The offset after this chunk's last record."""
        return self.chunk_id + self.num_records

    def messages(self, from_offset: int | None = None) -> list:
        """The records' bytes, in offset order (decompressing sub-batches; a user chunk only:
        a tracking chunk has no messages and gives ``[]``). ``from_offset``: leave out the
        records below that offset (a subscription from an offset inside a chunk receives the
        whole chunk). Raises :class:`~.errors.CorruptChunk` when the entries do not match the
        header, ``ValueError`` for a compression this installation cannot read."""
        if self.chunk_type != ChunkType.USER:
            return []
        recs = self._records
        if recs is None:
            recs = self._records = split_entries(self._buf, self._start,
                                                 self._start + self.data_length,
                                                 self.num_entries, self.num_records)
        if from_offset is not None and from_offset > self.chunk_id:
            return recs[from_offset - self.chunk_id:]
        return recs

    def offsets(self) -> range:
        """The offsets of the records, ``range(chunk_id, chunk_id + num_records)``."""
        return range(self.chunk_id, self.chunk_id + self.num_records)

    def tracking(self) -> list:
        """The entries of a tracking chunk (and of a user chunk's trailer) as
        :class:`TrackingEntry` objects."""
        src = self.data if self.chunk_type != ChunkType.USER else self.trailer
        if self.chunk_type != ChunkType.USER:
            out = []
            pos = 0
            for _ in range(self.num_entries):  # simple entries whose bodies are blocks
                if pos + 4 > len(src):
                    raise CorruptChunk("a tracking entry runs past the chunk's data")
                (head,) = _U32(src, pos)
                if head & 0x80000000:
                    raise CorruptChunk("a sub-batch entry in a tracking chunk")
                out.extend(_tracking_blocks(src, pos + 4, pos + 4 + head))
                pos += 4 + head
            return out
        return _tracking_blocks(src, 0, len(src))


def _tracking_blocks(buf: bytes, pos: int, end: int) -> list:
    out = []
    while pos < end:
        if pos + 2 > end:
            raise CorruptChunk("a tracking block runs past its entry")
        kind, size = buf[pos], buf[pos + 1]
        pos += 2
        id_ = bytes(buf[pos:pos + size])
        pos += size
        n = 2 if kind == 0 else 1
        if pos + 8 * n > end or len(id_) != size:
            raise CorruptChunk("a tracking block runs past its entry")
        vals = struct.unpack_from(">" + "Q" * n, buf, pos)
        pos += 8 * n
        out.append(TrackingEntry(kind, id_, vals))
    return out


def parse_chunk(buf: bytes, pos: int = 0, end: int | None = None, verify_crc: bool = True,
                committed_chunk_id: int | None = None, subscription_id: int | None = None) -> Chunk:
    """Parse the chunk in ``buf[pos:end]`` (a deliver's chunk bytes, or a chunk as stored).

    ``buf`` must be bytes (the chunk keeps a reference and splits its records from it lazily,
    :meth:`Chunk.messages`); ``verify_crc`` checks the CRC-32 of the entries now. Raises :class:`~.errors.CorruptChunk` (a short header, a wrong
    magic/version, sizes that do not add up, a CRC mismatch)."""
    if end is None:
        end = len(buf)
    if end - pos < CHUNK_HEADER_SIZE:
        raise CorruptChunk(f"a chunk of {end - pos} byte(s) is shorter than its 48-byte header")
    (magic, ctype, n_entries, n_records, ts, epoch, chunk_id, crc, dlen, tlen,
     bloom) = CHUNK_HEADER.unpack_from(buf, pos)
    if magic != CHUNK_MAGIC_VERSION:
        raise CorruptChunk(f"chunk magic/version byte {magic:#04x}, expected "
                           f"{CHUNK_MAGIC_VERSION:#04x} (osiris magic 5, version 0)")
    if ctype > ChunkType.TRACKING_SNAPSHOT:
        raise CorruptChunk(f"chunk {chunk_id}: unknown chunk type {ctype} (0 user, 1 tracking "
                           "delta, 2 tracking snapshot)")
    body = end - pos - CHUNK_HEADER_SIZE
    start = pos + CHUNK_HEADER_SIZE
    if body == dlen:
        trailer_at = None
    elif body == dlen + tlen:
        trailer_at = start + dlen
    elif body == bloom + dlen or body == bloom + dlen + tlen:
        start += bloom
        trailer_at = start + dlen if body == bloom + dlen + tlen and tlen else None
    else:
        raise CorruptChunk(f"chunk {chunk_id}: {body} byte(s) after the header, but it "
                           f"announces {dlen} byte(s) of entries (trailer {tlen}, Bloom "
                           f"filter {bloom})")
    if verify_crc:
        got = zlib.crc32(memoryview(buf)[start:start + dlen])
        if got != crc:
            raise CorruptChunk(f"chunk {chunk_id}: CRC-32 of its {dlen} byte(s) of entries is "
                               f"{got:#010x}, the header says {crc:#010x}")
    c = _new(Chunk)
    c.chunk_type, c.num_entries, c.num_records = ctype, n_entries, n_records
    c.timestamp, c.epoch, c.chunk_id, c.crc = ts, epoch, chunk_id, crc
    c.data_length, c.trailer_length, c.bloom_size = dlen, tlen, bloom
    c._buf, c._start = buf, start
    c.trailer = bytes(buf[trailer_at:trailer_at + tlen]) if trailer_at is not None else b""
    c.committed_chunk_id = committed_chunk_id
    c.subscription_id = subscription_id
    c._records = None
    return c


def decompress(compression: int, data: bytes, uncompressed_size: int) -> bytes:
    """The records of a sub-batch: ``data`` decompressed (gzip with the standard library, zstd
    with the ``zstandard`` package, snappy with ``cramjam`` or ``python-snappy``, lz4 with
    ``lz4``, each when installed). Raises ``ValueError`` naming the compression and the
    package to install, :class:`~.errors.CorruptChunk` when the result has the wrong size."""
    if compression == Compression.NONE:
        out = data
    elif compression == Compression.GZIP:
        try:
            out = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise CorruptChunk(f"a gzip sub-batch does not decompress: {exc}") from None
    elif compression == Compression.ZSTD:
        out = _optional("zstandard", "zstd", lambda m: m.ZstdDecompressor().decompress(
            data, max_output_size=uncompressed_size))
    elif compression == Compression.SNAPPY:
        out = _optional("snappy", "snappy", lambda m: m.decompress(data))
    elif compression == Compression.LZ4:
        out = _optional("lz4.frame", "lz4", lambda m: m.decompress(data))
    else:
        raise CorruptChunk(f"a sub-batch with unknown compression type {compression}")
    if len(out) != uncompressed_size:
        raise CorruptChunk(f"a sub-batch decompressed to {len(out)} byte(s), its header says "
                           f"{uncompressed_size}")
    return bytes(out)


def _optional(module: str, name: str, fn):
    import importlib

    try:
        m = importlib.import_module(module)
    except ImportError:
        raise ValueError(f"a sub-batch compressed with {name}: install the Python package "
                         f"{module.split('.')[0]!r} to read it") from None
    try:
        return fn(m)
    except Exception as exc:  # the library's own error type
        raise CorruptChunk(f"a {name} sub-batch does not decompress: {exc}") from None


def py_split_entries(data: bytes, pos: int, end: int, num_entries: int, num_records: int) -> list:
    """The records of ``num_entries`` entries in ``data[pos:end]`` as a list of bytes
    (sub-batches decompressed and split). Raises :class:`~.errors.CorruptChunk` when they do
    not fill ``end - pos`` exactly or hold another number of records than ``num_records``."""
    out: list = []
    append = out.append
    for _ in range(num_entries):
        if pos + 4 > end:
            raise CorruptChunk(f"entry {len(out)} runs past the chunk's {end} byte(s) of data")
        (head,) = _U32(data, pos)
        if head & 0x80000000 == 0:
            nxt = pos + 4 + head
            if nxt > end:
                raise CorruptChunk(f"a simple entry of {head} byte(s) runs past the chunk's data")
            append(data[pos + 4:nxt])
            pos = nxt
            continue
        if pos + 11 > end:
            raise CorruptChunk("a sub-batch header runs past the chunk's data")
        b0, count, usize, size = _SUB(data, pos)
        nxt = pos + 11 + size
        if nxt > end:
            raise CorruptChunk(f"a sub-batch of {size} byte(s) runs past the chunk's data")
        raw = decompress((b0 >> 4) & 7, bytes(data[pos + 11:nxt]), usize)
        recs = py_split_entries(raw, 0, len(raw), count, count)
        out.extend(recs)
        pos = nxt
    if pos != end:
        raise CorruptChunk(f"{end - pos} byte(s) of the chunk's data are left after its "
                           f"{num_entries} entries")
    if len(out) != num_records:
        raise CorruptChunk(f"the chunk's entries hold {len(out)} record(s), its header says "
                           f"{num_records}")
    return out


def py_join_entries(messages) -> bytes:
    """``messages`` (bytes) as consecutive simple entries (a chunk's data, before the CRC)."""
    out = bytearray()
    for m in messages:
        if len(m) > 0x7FFFFFFF:
            raise ValueError(f"a message of {len(m)} bytes: an entry holds at most 2 GiB - 1")
        out += struct.pack(">I", len(m))
        out += m
    return bytes(out)


# the compiled versions when built (installed by speedups.py)
split_entries = py_split_entries
join_entries = py_join_entries


def make_sub_batch(messages: Iterable[bytes], compression: int = Compression.NONE,
                   level: int = 6) -> SubBatch:
    """A :class:`~.commands.SubBatch` of ``messages`` (each a simple entry inside), compressed
    with ``compression`` (NONE or GZIP here; ZSTD with the ``zstandard`` package). Raises
    ``ValueError`` for more than 65,535 messages (a 16-bit count) or another compression."""
    msgs = list(messages)
    if len(msgs) > 0xFFFF:
        raise ValueError(f"a sub-batch holds at most 65,535 messages (16-bit count), got {len(msgs)}")
    raw = b"".join(struct.pack(">I", len(m)) + bytes(m) for m in msgs)
    if compression == Compression.NONE:
        data = raw
    elif compression == Compression.GZIP:
        data = gzip.compress(raw, compresslevel=level, mtime=0)
    elif compression == Compression.ZSTD:
        data = _optional("zstandard", "zstd", lambda m: m.ZstdCompressor().compress(raw))
    else:
        raise ValueError(f"this client writes sub-batches uncompressed, gzip or zstd; "
                         f"got compression {compression}")
    return SubBatch(int(compression), len(msgs), len(raw), data)


def encode_chunk(entries: Iterable, chunk_id: int, timestamp: int, epoch: int = 1,
                 chunk_type: int = ChunkType.USER, trailer: bytes = b"",
                 bloom: bytes = b"") -> bytes:
    """A chunk as osiris writes it (``make_chunk``): header, ``bloom``, the entries (bytes: a
    simple entry; :class:`~.commands.SubBatch`: a sub-batch entry), ``trailer``; the CRC-32
    over the entries. For a ``deliver`` leave ``bloom`` empty (RabbitMQ does not send it)."""
    parts = []
    n_entries = n_records = 0
    for e in entries:
        if isinstance(e, SubBatch):
            parts.append(e.header())
            parts.append(e.data)
            n_records += e.count
        else:
            parts.append(struct.pack(">I", len(e)))
            parts.append(bytes(e))
            n_records += 1
        n_entries += 1
    data = b"".join(parts)
    if n_entries > 0xFFFF:
        raise ValueError(f"a chunk holds at most 65,535 entries, got {n_entries}")
    head = CHUNK_HEADER.pack(CHUNK_MAGIC_VERSION, int(chunk_type), n_entries, n_records,
                             timestamp, epoch, chunk_id, zlib.crc32(data), len(data),
                             len(trailer), len(bloom))
    return head + bloom + data + trailer
