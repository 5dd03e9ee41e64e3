"""AMQP 0-9-1 content-header properties with their field-table tags kept, for conversions.

The 0-9-1 codec (:mod:`..properties`, :mod:`..values`) decodes header values to Python values
and forgets the wire tag (``b``, ``B``, ``s``, ``u``, ``I``, ``i``, ``l``...). Converting a
message to AMQP 1.0 as RabbitMQ does needs the tag (``rabbit_msg_record:from_091/2`` maps
``unsignedbyte`` to ``ubyte``, ``signedint`` to ``int``...), and converting back must write
the tag RabbitMQ writes. This module parses and writes properties as ``(key, tag, value)``
lists. Tags and widths as RabbitMQ's ``rabbit_binary_parser`` / ``rabbit_binary_generator``:
``t`` bool, ``b``/``B`` int8/uint8, ``s``/``u`` int16/uint16, ``I``/``i`` int32/uint32,
``l``/``L`` int64 (both signed; written as ``l``), ``f``/``d`` float32/64, ``D`` decimal
(scale, value), ``S`` long string (bytes), ``x`` bytes, ``T`` timestamp (seconds), ``V`` void,
``A`` array of ``(tag, value)``, ``F`` table of ``(key, tag, value)``.
"""

from __future__ import annotations

import struct

__all__ = ["FIELDS", "parse_properties", "encode_properties", "encode_table"]

#: the basic class's property names in flag order (bit 15 first), with their wire kinds
FIELDS = (("content_type", "s"), ("content_encoding", "s"), ("headers", "F"), ("delivery_mode", "o"),
          ("priority", "o"), ("correlation_id", "s"), ("reply_to", "s"), ("expiration", "s"),
          ("message_id", "s"), ("timestamp", "T"), ("type", "s"), ("user_id", "s"), ("app_id", "s"),
          ("cluster_id", "s"))

_u16 = struct.Struct(">H").unpack_from
_u32 = struct.Struct(">I").unpack_from
_FIXED = {"b": struct.Struct(">b"), "B": struct.Struct(">B"), "s": struct.Struct(">h"),
          "u": struct.Struct(">H"), "I": struct.Struct(">i"), "i": struct.Struct(">I"),
          "l": struct.Struct(">q"), "L": struct.Struct(">q"), "f": struct.Struct(">f"),
          "d": struct.Struct(">d"), "T": struct.Struct(">Q")}


def _value(buf, pos: int, tag: str, depth: int):
    if tag == "S" or tag == "x":
        n = _u32(buf, pos)[0]
        end = pos + 4 + n
        if end > len(buf):
            raise ValueError("field value cut short")
        return bytes(buf[pos + 4:end]), end
    if tag == "t":
        return buf[pos] != 0, pos + 1
    st = _FIXED.get(tag)
    if st is not None:
        return st.unpack_from(buf, pos)[0], pos + st.size
    if tag == "V":
        return None, pos
    if tag == "D":
        return (buf[pos], struct.unpack_from(">i", buf, pos + 1)[0]), pos + 5
    if tag == "F":
        n = _u32(buf, pos)[0]
        end = pos + 4 + n
        return _table(buf, pos + 4, end, depth + 1), end
    if tag == "A":
        n = _u32(buf, pos)[0]
        end = pos + 4 + n
        p = pos + 4
        out = []
        while p < end:
            t = chr(buf[p])
            v, p = _value(buf, p + 1, t, depth + 1)
            out.append((t, v))
        if p != end:
            raise ValueError("field array cut short")
        return out, end
    raise ValueError(f"unknown field-table tag {tag!r}")


def _table(buf, pos: int, end: int, depth: int = 0) -> list:
    if depth > 64:
        raise ValueError("field tables nested too deep")
    if end > len(buf):
        raise ValueError("field table cut short")
    out = []
    while pos < end:
        n = buf[pos]
        key = bytes(buf[pos + 1:pos + 1 + n])
        pos += 1 + n
        tag = chr(buf[pos])
        v, pos = _value(buf, pos + 1, tag, depth)
        out.append((key, tag, v))
    if pos != end:
        raise ValueError("field table cut short")
    return out


def parse_properties(raw) -> dict:
    """The properties in ``raw`` (flags + values, 0-9-1 §4.2.6.1) by name; short strings as
    bytes, ``headers`` as a ``(key bytes, tag, value)`` list, ``timestamp`` as int seconds.
    Raises ValueError (or struct.error) for malformed bytes."""
    if len(raw) < 2:
        return {}
    flags = []
    pos = 0
    while True:
        word = _u16(raw, pos)[0]
        pos += 2
        flags.append(word)
        if not word & 1:
            break
    out: dict = {}
    for i, (name, kind) in enumerate(FIELDS):
        word, bit = divmod(i, 15)
        if word >= len(flags) or not flags[word] & (1 << (15 - bit)):
            continue
        if kind == "s":
            n = raw[pos]
            out[name] = bytes(raw[pos + 1:pos + 1 + n])
            pos += 1 + n
        elif kind == "o":
            out[name] = raw[pos]
            pos += 1
        elif kind == "T":
            out[name] = struct.unpack_from(">Q", raw, pos)[0]
            pos += 8
        else:
            n = _u32(raw, pos)[0]
            out[name] = _table(raw, pos + 4, pos + 4 + n)
            pos += 4 + n
    if pos > len(raw):
        raise ValueError("basic properties cut short")
    return out


def _enc_value(out: bytearray, tag: str, v) -> None:
    out += tag.encode()
    if tag in ("S", "x"):
        out += struct.pack(">I", len(v))
        out += v
    elif tag == "t":
        out.append(1 if v else 0)
    elif tag in _FIXED:
        out += _FIXED["l" if tag == "L" else tag].pack(v)
    elif tag == "V":
        pass
    elif tag == "D":
        out += struct.pack(">Bi", v[0], v[1])
    elif tag == "F":
        t = encode_table(v)
        out += struct.pack(">I", len(t))
        out += t
    elif tag == "A":
        a = bytearray()
        for t, x in v:
            _enc_value(a, t, x)
        out += struct.pack(">I", len(a))
        out += a
    else:
        raise ValueError(f"unknown field-table tag {tag!r}")


def encode_table(items) -> bytes:
    """The field table of ``(key bytes, tag, value)`` items, without its length prefix."""
    out = bytearray()
    for k, tag, v in items:
        if len(k) > 255:
            raise ValueError(f"field name of {len(k)} bytes (at most 255)")
        out.append(len(k))
        out += k
        _enc_value(out, tag, v)
    return bytes(out)


def encode_properties(props: dict) -> bytes:
    """Flags + values of the properties in ``props`` (names as :data:`FIELDS`; short strings
    as bytes, ``headers`` as a ``(key, tag, value)`` list). Raises ValueError for a short
    string over 255 bytes or an octet out of range."""
    flags = 0
    body = bytearray()
    for i, (name, kind) in enumerate(FIELDS):
        v = props.get(name)
        if v is None:
            continue
        flags |= 1 << (15 - i)
        if kind == "s":
            if len(v) > 255:
                raise ValueError(f"basic property {name} of {len(v)} bytes (a short string: at most 255)")
            body.append(len(v))
            body += v
        elif kind == "o":
            if not 0 <= v <= 255:
                raise ValueError(f"basic property {name}={v} is not an octet")
            body.append(v)
        elif kind == "T":
            body += struct.pack(">Q", v)
        else:
            t = encode_table(v)
            body += struct.pack(">I", len(t))
            body += t
    return struct.pack(">H", flags) + bytes(body)


_OFFSET_NAME = b"x-stream-offset"
_OFFSET_KEY = bytes((len(_OFFSET_NAME),)) + _OFFSET_NAME + b"l"
_SIZES = {"t": 1, "b": 1, "B": 1, "s": 2, "u": 2, "I": 4, "i": 4, "f": 4, "l": 8, "L": 8, "d": 8,
          "T": 8, "D": 5, "V": 0}


def offset_header_split(props_raw: bytes) -> tuple[bytes, bytes]:
    """``(before, after)``: ``before + <offset, signed 64-bit big-endian> + after`` are the
    properties ``props_raw`` with the header ``x-stream-offset`` (tag ``l``) at its place in
    headers sorted by name (a table created when there is none), any ``x-stream-offset`` the
    headers had removed: what RabbitMQ delivers to a 0-9-1 consumer of a stream (3.10:
    ``rabbit_basic:add_header/4`` = ``rabbit_misc:set_table_value/4``, a key sort; 4.3:
    ``mc_amqpl:protocol_state/2``, a unique sort). Byte splicing: the other headers stay as
    they are (the stream's conversions give them sorted already). Raises ValueError for
    malformed properties."""
    if len(props_raw) < 2:
        props_raw = b"\x00\x00"
    flags = (props_raw[0] << 8) | props_raw[1]
    if flags & 1:
        p = parse_properties(props_raw)
        h = [x for x in p.get("headers") or () if x[0] != _OFFSET_NAME]
        p["headers"] = h + [(_OFFSET_NAME, "l", 0)]
        p["headers"].sort(key=lambda x: x[0])
        raw = encode_properties(p)
        return offset_header_split(raw)
    pos = 2
    if flags & 0x8000:
        pos += 1 + props_raw[pos]
    if flags & 0x4000:
        pos += 1 + props_raw[pos]
    grow = len(_OFFSET_KEY) + 8
    if not flags & 0x2000:
        flags |= 0x2000
        return (bytes(((flags >> 8) & 0xFF, flags & 0xFF)) + props_raw[2:pos] + struct.pack(">I", grow)
                + _OFFSET_KEY, props_raw[pos:])
    n = _u32(props_raw, pos)[0]
    start = pos + 4
    end = start + n
    if end > len(props_raw):
        raise ValueError("headers table cut short")
    kept = []                       # (start, stop) byte ranges of the entries kept
    insert_at = None
    p = start
    while p < end:
        e0 = p
        kl = props_raw[p]
        key = props_raw[p + 1:p + 1 + kl]
        p += 1 + kl
        tag = chr(props_raw[p])
        p += 1
        w = _SIZES.get(tag)
        if w is None:
            if tag in ("S", "x", "A", "F"):
                w = 4 + _u32(props_raw, p)[0]
            else:
                raise ValueError(f"unknown field-table tag {tag!r}")
        p += w
        if key == _OFFSET_NAME:
            continue
        if insert_at is None and key > _OFFSET_NAME:
            insert_at = len(kept)
        kept.append((e0, p))
    if p != end:
        raise ValueError("headers table cut short")
    if insert_at is None:
        insert_at = len(kept)
    head = b"".join(props_raw[a:b] for a, b in kept[:insert_at])
    tail = b"".join(props_raw[a:b] for a, b in kept[insert_at:])
    size = len(head) + len(tail) + grow
    return (props_raw[:pos] + struct.pack(">I", size) + head + _OFFSET_KEY,
            tail + props_raw[end:])
