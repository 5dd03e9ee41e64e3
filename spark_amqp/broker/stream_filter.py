"""Stream filtering (RabbitMQ 3.13+): a Bloom filter per chunk, and the consumers' matchers.

Semantics from RabbitMQ's docs "Stream Filtering" and blog "Stream Filtering Internals", and
its source: osiris ``src/osiris_bloom.erl`` (the filter and the matcher), ``osiris_log.erl``
(``process_entry``: each entry's filter value goes into the chunk's filter, an entry without
one inserts ``<<>>``; ``read_header0``: a chunk whose filter cannot match is skipped whole,
without reading its data), rabbitmq-server ``rabbit_stream_queue.erl`` (``filter_spec/1``:
the consumer arguments; ``stream_message/2``: the header ``x-stream-filter-value``;
``check_filter_size/1``: ``x-stream-filter-size-bytes`` in 16..255):

- a publisher sets the header ``x-stream-filter-value`` (a string) on a message; a message
  without it, or with an empty or non-string value, is *unfiltered*;
- each chunk gets a filter of ``x-stream-filter-size-bytes`` bytes (default 16): every
  distinct value sets two bits (two hashes in ``1 .. bits-1``), an unfiltered message sets
  bit 0 (reserved for "has unfiltered messages"); a chunk with no value at all has the empty
  filter (here: the int 0);
- a consumer passes ``x-stream-filter`` (a string, or an array whose string elements count)
  and optionally ``x-stream-match-unfiltered`` (a boolean; anything else means false); a chunk
  matches when any wanted value's two bits are set, or (match-unfiltered) bit 0 is set or the
  filter is empty. Matching chunks are delivered whole, so a consumer also gets other values
  (and false positives): clients must filter each message again.

The hashes here are MurmurHash3 x86 32-bit with seeds 0 and 1 (osiris uses ``erlang:phash2``):
the filter is this broker's own storage, only its behaviour has to match (no false negatives,
a small false-positive rate: two bits per value in 128 bits by default). An array of filter
values without a string (RabbitMQ's reader crashes on ``filters => []``) is taken as no filter;
an empty string among the values means match-unfiltered (osiris hashes ``<<>>`` to bit 0).
"""

from __future__ import annotations

import datetime as _dt

__all__ = ["FILTER_VALUE_HEADER", "DEFAULT_FILTER_BYTES", "MIN_FILTER_BYTES", "MAX_FILTER_BYTES",
           "ChunkFilterBuilder", "StreamMatcher", "value_mask", "matcher_from_arguments",
           "filter_value_of"]

FILTER_VALUE_HEADER = "x-stream-filter-value"
_HEADER_BYTES = FILTER_VALUE_HEADER.encode()
DEFAULT_FILTER_BYTES = 16
MIN_FILTER_BYTES, MAX_FILTER_BYTES = 16, 255


def value_mask(value: bytes, bits: int) -> int:
    """The two bits (as an int mask) ``value`` (non-empty bytes) sets in a filter of ``bits``
    bits: positions ``1 + h mod (bits - 1)`` for two MurmurHash3 hashes (bit 0 is reserved)."""
    import mmh3

    m = bits - 1
    return (1 << (1 + mmh3.hash(value, 0, signed=False) % m)) | \
        (1 << (1 + mmh3.hash(value, 1, signed=False) % m))


def filter_value_of(props_raw: bytes) -> bytes | None:
    """The ``x-stream-filter-value`` header of a message's raw content-header properties as
    bytes (UTF-8), or None when it has none (absent, empty, or not a string). Cheap for
    messages without the header (a substring test before any decoding)."""
    if _HEADER_BYTES not in props_raw:
        return None
    from ..protocol.properties import decode_properties

    try:
        p = decode_properties(props_raw, 0, len(props_raw))
    except Exception:  # noqa: BLE001 - undecodable properties: no filter value
        return None
    v = (p.headers or {}).get(FILTER_VALUE_HEADER)
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v)
    elif isinstance(v, str):
        v = v.encode("utf-8")
    else:
        return None
    return v or None


class ChunkFilterBuilder:
    """Builds one chunk's filter while its messages are added (``add(props_raw)`` or
    ``add_value(filter value)``), then
    ``value()``: the filter as an int (bit i = position i; 0 = the empty filter)."""

    __slots__ = ("bits", "values", "unfiltered")

    def __init__(self, size_bytes: int):
        self.bits = size_bytes * 8
        self.values: set = set()
        self.unfiltered = False

    def add(self, props_raw: bytes) -> None:
        """Add a 0-9-1 message by its properties (its ``x-stream-filter-value`` header)."""
        self.add_value(filter_value_of(props_raw))

    def add_value(self, v: bytes | None) -> None:
        """Add a message by its filter value (None: an unfiltered message)."""
        if v is None:
            self.unfiltered = True
        else:
            self.values.add(v)

    def value(self) -> int:
        if not self.values:
            return 0
        f = 1 if self.unfiltered else 0
        for v in self.values:
            f |= value_mask(v, self.bits)
        return f


class StreamMatcher:
    """A consumer's filter: ``matches(chunk_filter)`` is osiris_bloom's ``is_match``.

    ``values``: the wanted filter values (bytes); ``match_unfiltered``: also chunks with
    unfiltered messages; ``size_bytes``: the stream's filter size."""

    __slots__ = ("values", "match_unfiltered", "masks")

    def __init__(self, values, match_unfiltered: bool, size_bytes: int):
        self.values = tuple(values)
        self.match_unfiltered = bool(match_unfiltered)
        bits = size_bytes * 8
        self.masks = tuple(value_mask(v, bits) for v in self.values)

    def matches(self, chunk_filter: int) -> bool:
        if not chunk_filter:
            return self.match_unfiltered
        if self.match_unfiltered and chunk_filter & 1:
            return True
        for m in self.masks:
            if chunk_filter & m == m:
                return True
        return False


def _text(v) -> bytes | None:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    return None


def matcher_from_arguments(arguments: dict, size_bytes: int) -> StreamMatcher | None:
    """The :class:`StreamMatcher` of basic.consume ``arguments`` (``x-stream-filter``,
    ``x-stream-match-unfiltered``) on a stream with ``size_bytes`` filters, or None (no
    filter: every chunk). As ``rabbit_stream_queue:filter_spec/1``: a string or an array of
    strings (other elements ignored; other types: no filter); match-unfiltered only when a
    boolean true."""
    raw = arguments.get("x-stream-filter")
    if isinstance(raw, (list, tuple)):
        values = [t for t in (_text(x) for x in raw if not isinstance(x, (_dt.datetime, bool)))
                  if t is not None]
    else:
        t = _text(raw)
        values = [t] if t is not None else []
    if not values:
        return None
    mu = arguments.get("x-stream-match-unfiltered") is True
    if b"" in values:   # osiris: the empty value hashes to bit 0, the unfiltered bit
        mu = True
        values = [v for v in values if v]
    return StreamMatcher(values, mu, size_bytes)
