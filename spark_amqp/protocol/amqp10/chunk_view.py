"""The 0-9-1 view of a stream chunk's entries: split each AMQP 1.0 message at its data section.

A broker that stores AMQP 1.0 messages and serves 0-9-1 consumers (as RabbitMQ does for
streams) converts every message it delivers. The conversion depends only on the sections
before the body, and a stream's messages mostly share them (the same publisher, the same
properties): so each message whose last and only body section is one data section is split
into its *prefix* (the sections before the data section) and its body bytes, and the prefix's
conversion is looked up in a cache. :func:`chunk_to_091` is the pure-Python function, the
oracle of the compiled one in ``_speedups.pyx`` (same results, same errors).

Chunk data: osiris entries (``osiris_log.erl``), a simple entry ``0 | 31-bit size | bytes``
or a sub-batch ``1 | compression (3 bits) | reserved (4) | records (u16) | uncompressed size
(u32) | size (u32) | bytes``.
"""

from __future__ import annotations

import struct

from .types import skip_value

__all__ = ["chunk_to_091", "data_start"]

_u32 = struct.Struct(">I").unpack_from


def data_start(buf, p: int, end: int) -> tuple[int, int]:
    """(start of the message's data section, start of its bytes) when the message at
    ``buf[p:end]`` has sections with small-ulong descriptors and ends with its one and only
    body section, a data section; else ``(-1, -1)``."""
    while p < end:
        if p + 4 > end or buf[p] != 0x00 or buf[p + 1] != 0x53:
            return -1, -1
        code = buf[p + 2]
        if code >= 0x75 or code < 0x70:
            if code != 0x75:
                return -1, -1
            q = p + 3
            if buf[q] == 0xa0:
                if q + 2 > end:
                    return -1, -1
                n, bp = buf[q + 1], q + 2
            elif buf[q] == 0xb0:
                if q + 5 > end:
                    return -1, -1
                n, bp = _u32(buf, q + 1)[0], q + 5
            else:
                return -1, -1
            return (p, bp) if bp + n == end else (-1, -1)
        try:
            p = skip_value(buf, p + 3, end)
        except ValueError:
            return -1, -1
    return -1, -1


def chunk_to_091(data, pos: int, end: int, cache: dict, convert_prefix, convert_whole) -> list:
    """The 0-9-1 view of the entries at ``data[pos:end]``: a list of ``(enc, props_raw,
    body)``, one per record (``None`` for a record a reader does not get, as given by
    ``convert_whole``).

    A message split at its data section (:func:`data_start`): its prefix is looked up in
    ``cache`` (prefix -> ``(enc, props_raw)``); on a miss ``convert_prefix(prefix, message)``
    gives it and it is stored. Other messages and sub-batch entries go to
    ``convert_whole(entry bytes, is_sub_batch)`` (a list). Consecutive equal prefixes give
    the same ``enc`` / ``props_raw`` objects. Raises what the callbacks raise, and ValueError
    for an entry that runs past ``end``."""
    if end > len(data):
        end = len(data)
    out: list = []
    p = pos
    last_prefix = last_val = None
    while p < end:
        if p + 4 > end:
            raise ValueError("chunk entry header cut short")
        head = _u32(data, p)[0]
        if head & 0x80000000:
            if p + 11 > end:
                raise ValueError("sub-batch entry header cut short")
            n = _u32(data, p + 7)[0]
            if p + 11 + n > end:
                raise ValueError("sub-batch entry runs past the chunk")
            out.extend(convert_whole(bytes(data[p:p + 11 + n]), True))
            p += 11 + n
            continue
        n = head
        p += 4
        if p + n > end:
            raise ValueError("chunk entry runs past the chunk")
        ds, bp = data_start(data, p, p + n)
        if ds < 0:
            out.extend(convert_whole(bytes(data[p:p + n]), False))
            p += n
            continue
        prefix = bytes(data[p:ds])
        if last_prefix is not None and prefix == last_prefix:
            val = last_val
        else:
            val = cache.get(prefix)
            if val is None:
                val = convert_prefix(prefix, bytes(data[p:p + n]))
                cache[prefix] = val
            last_prefix, last_val = prefix, val
        out.append((val[0], val[1], bytes(data[bp:p + n])))
        p += n
    return out
