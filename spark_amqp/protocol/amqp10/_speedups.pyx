# cython: language_level=3, boundscheck=False, wraparound=False, binding=True
"""Optional compiled fast paths of the AMQP 1.0 message codec (Cython).

Built by ``setup.py`` beside ``protocol/_speedups.pyx``; ``amqp10/__init__.py`` uses it unless
``SPARK_AMQP_PURE_PYTHON=1``. The pure-Python code (``types.py``, ``message.py``) stays the
reference: the functions here decode the well-formed shapes and hand anything else (a bound
that does not hold, an unknown constructor, a map key that is not hashable, any exception) to
the pure-Python function, which decodes it or raises its :class:`DecodeError`. So results and
errors are those of the pure-Python code by construction; tests/protocol/test_amqp10_speedups.py
checks it with hypothesis.

- :func:`decode_value`, :func:`decode_message`: as ``types.decode_value`` and
  ``message.decode_message`` (the stream client decodes delivered messages with them);
- :func:`chunk_to_091`: the broker's 0-9-1 view of a stream chunk's AMQP 1.0 entries, with
  the converted properties cached by the bytes before the data section.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, uint64_t, int64_t
from libc.string cimport memcmp, memcpy

cdef object _types = None
cdef object _py_decode_value = None
cdef object _py_decode_message = None
cdef object Described = None
cdef object Symbol = None
cdef object Array = None
cdef object UByte = None
cdef object UShort = None
cdef object UInt = None
cdef object ULong = None
cdef object Byte = None
cdef object Short = None
cdef object Int = None
cdef object Float = None
cdef object Char = None
cdef object Timestamp = None
cdef object Decimal32 = None
cdef object Decimal64 = None
cdef object Decimal128 = None
cdef object UUID = None
cdef object Message = None
cdef object Header = None
cdef object Properties = None
cdef object _int_new = int.__new__
cdef object _float_new = float.__new__
cdef object _str_new = str.__new__
cdef object _obj_new = object.__new__
cdef object _UINT0 = None
cdef object _ULONG0 = None
cdef tuple _UINT_SMALL = ()
cdef tuple _ULONG_SMALL = ()
cdef tuple _UBYTE_SMALL = ()
cdef dict _SECTION_NAMES = {}


class _Fallback(Exception):
    pass


def setup(types_module, message_module):
    """Bind the classes of ``types_module`` / ``message_module`` (called once at import)."""
    global _types, _py_decode_value, _py_decode_message, Described, Symbol, Array, UByte, UShort
    global UInt, ULong, Byte, Short, Int, Float, Char, Timestamp, Decimal32, Decimal64, Decimal128
    global UUID, Message, Header, Properties, _UINT0, _ULONG0, _UINT_SMALL, _ULONG_SMALL
    global _UBYTE_SMALL, _SECTION_NAMES
    import uuid
    _types = types_module
    _py_decode_value = types_module.decode_value
    _py_decode_message = message_module.decode_message
    Described = types_module.Described
    Symbol = types_module.Symbol
    Array = types_module.Array
    UByte = types_module.UByte
    UShort = types_module.UShort
    UInt = types_module.UInt
    ULong = types_module.ULong
    Byte = types_module.Byte
    Short = types_module.Short
    Int = types_module.Int
    Float = types_module.Float
    Char = types_module.Char
    Timestamp = types_module.Timestamp
    Decimal32 = types_module.Decimal32
    Decimal64 = types_module.Decimal64
    Decimal128 = types_module.Decimal128
    UUID = uuid.UUID
    Message = message_module.Message
    Header = message_module.Header
    Properties = message_module.Properties
    _SECTION_NAMES = dict(message_module.SECTION_NAMES)
    # small unsigned values are immutable: share them (UInt(7) is UInt(7))
    _UINT_SMALL = tuple([_int_new(UInt, i) for i in range(256)])
    _ULONG_SMALL = tuple([_int_new(ULong, i) for i in range(256)])
    _UBYTE_SMALL = tuple([_int_new(UByte, i) for i in range(256)])
    _UINT0 = _UINT_SMALL[0]
    _ULONG0 = _ULONG_SMALL[0]


cdef inline uint32_t _u32(const uint8_t* p) nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline uint64_t _u64(const uint8_t* p) nogil:
    return (<uint64_t>_u32(p) << 32) | _u32(p + 4)


cdef inline object _utf8(const uint8_t* p, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char*>p, n, "surrogateescape")


cdef object _fixed(uint8_t code, const uint8_t* b, Py_ssize_t* pos, Py_ssize_t end):
    cdef Py_ssize_t p = pos[0]
    cdef uint32_t u32
    cdef uint64_t u64
    cdef float f32
    cdef double f64
    if code == 0x40:
        return None
    if code == 0x41:
        return True
    if code == 0x42:
        return False
    if code == 0x43:
        return _UINT0
    if code == 0x44:
        return _ULONG0
    if code == 0x45:
        return []
    if code >= 0x50 and code <= 0x56:
        if p + 1 > end:
            raise _Fallback()
        pos[0] = p + 1
        if code == 0x50:
            return _UBYTE_SMALL[b[p]]
        if code == 0x51:
            return _int_new(Byte, <int8_t>b[p])
        if code == 0x52:
            return _UINT_SMALL[b[p]]
        if code == 0x53:
            return _ULONG_SMALL[b[p]]
        if code == 0x54:
            return _int_new(Int, <int8_t>b[p])
        if code == 0x55:
            return <int8_t>b[p]
        if b[p] > 1:
            raise _Fallback()
        return b[p] == 1
    if code == 0x60 or code == 0x61:
        if p + 2 > end:
            raise _Fallback()
        pos[0] = p + 2
        u32 = (<uint32_t>b[p] << 8) | b[p + 1]
        if code == 0x60:
            return _int_new(UShort, u32)
        return _int_new(Short, <int16_t>u32)
    if code >= 0x70 and code <= 0x73:
        if p + 4 > end:
            raise _Fallback()
        pos[0] = p + 4
        u32 = _u32(b + p)
        if code == 0x70:
            return _int_new(UInt, u32)
        if code == 0x71:
            return _int_new(Int, <int32_t>u32)
        if code == 0x72:
            memcpy(&f32, &u32, 4)
            return _float_new(Float, f32)
        if u32 > 0x10FFFF:
            raise _Fallback()
        return _str_new(Char, chr(u32))
    if code >= 0x80 and code <= 0x83:
        if p + 8 > end:
            raise _Fallback()
        pos[0] = p + 8
        u64 = _u64(b + p)
        if code == 0x80:
            return _int_new(ULong, u64)
        if code == 0x81:
            return <int64_t>u64
        if code == 0x82:
            memcpy(&f64, &u64, 8)
            return f64
        return _int_new(Timestamp, <int64_t>u64)
    if code == 0x98:
        if p + 16 > end:
            raise _Fallback()
        pos[0] = p + 16
        return UUID(bytes=PyBytes_FromStringAndSize(<const char*>(b + p), 16))
    raise _Fallback()        # decimals, unknown constructors: the pure-Python decoder


cdef object _value(const uint8_t* b, Py_ssize_t* pos, Py_ssize_t end, int depth):
    cdef Py_ssize_t p = pos[0]
    if p >= end or depth > 64:
        raise _Fallback()
    cdef uint8_t code = b[p]
    pos[0] = p + 1
    return _after(code, b, pos, end, depth)


cdef object _after(uint8_t code, const uint8_t* b, Py_ssize_t* pos, Py_ssize_t end, int depth):
    cdef Py_ssize_t p = pos[0]
    cdef Py_ssize_t n, stop, i
    cdef uint32_t count
    cdef uint8_t hi = code & 0xF0
    cdef list lst
    cdef dict dct
    if code == 0x00:
        d = _value(b, pos, end, depth + 1)
        v = _value(b, pos, end, depth + 1)
        o = _obj_new(Described)
        o.descriptor = d
        o.value = v
        return o
    if hi == 0xa0 or hi == 0xb0:
        if hi == 0xa0:
            if p + 1 > end:
                raise _Fallback()
            n = b[p]
            p += 1
        else:
            if p + 4 > end:
                raise _Fallback()
            n = _u32(b + p)
            p += 4
        if p + n > end:
            raise _Fallback()
        pos[0] = p + n
        if code == 0xa0 or code == 0xb0:
            return PyBytes_FromStringAndSize(<const char*>(b + p), n)
        if code == 0xa1 or code == 0xb1:
            return _utf8(b + p, n)
        if code == 0xa3 or code == 0xb3:
            return _str_new(Symbol, _utf8(b + p, n))
        raise _Fallback()
    if hi == 0xc0 or hi == 0xd0 or hi == 0xe0 or hi == 0xf0:
        if code & 0x0F > 1 or ((hi == 0xe0 or hi == 0xf0) and code & 0x0F != 0):
            raise _Fallback()
        if hi == 0xc0 or hi == 0xe0:
            if p + 2 > end or b[p] < 1:
                raise _Fallback()
            stop = p + 1 + b[p]
            count = b[p + 1]
            p += 2
        else:
            if p + 8 > end:
                raise _Fallback()
            n = _u32(b + p)
            if n < 4:
                raise _Fallback()
            stop = p + 4 + n
            count = _u32(b + p + 4)
            p += 8
        if stop > end:
            raise _Fallback()
        if hi == 0xe0 or hi == 0xf0:
            raise _Fallback()            # arrays: the pure-Python decoder
        if count > stop - p:
            raise _Fallback()
        pos[0] = p
        if code & 1 == 0:
            lst = []
            for i in range(count):
                lst.append(_value(b, pos, stop, depth + 1))
        else:
            if count & 1:
                raise _Fallback()
            dct = {}
            for i in range(count // 2):
                k = _value(b, pos, stop, depth + 1)
                v = _value(b, pos, stop, depth + 1)
                dct[k] = v              # an unhashable key raises TypeError: fallback
            lst = None
        if pos[0] != stop:
            raise _Fallback()
        return lst if lst is not None else dct
    return _fixed(code, b, pos, end)


def decode_value(buf, Py_ssize_t pos=0, end=None):
    """As ``types.decode_value``: (value, position after it)."""
    cdef Py_buffer view
    cdef Py_ssize_t e, p = pos
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        e = view.len if end is None else min(<Py_ssize_t>end, view.len)
        if p < 0 or p > e:
            raise _Fallback()
        v = _value(<const uint8_t*>view.buf, &p, e, 0)
        return v, p
    except Exception:
        return _py_decode_value(buf, pos, end)
    finally:
        PyBuffer_Release(&view)


cdef int _section(object descriptor) except -2:
    cdef int code
    if type(descriptor) is ULong:
        code = descriptor
        if 0x70 <= code <= 0x78:
            return code
        return -1
    if type(descriptor) is Symbol:
        c = _SECTION_NAMES.get(descriptor)
        return -1 if c is None else c
    return -1


cdef object _composite(cls, object val):
    cdef list fields
    cdef Py_ssize_t i, n
    if val is None:
        fields = []
    elif type(val) is list:
        fields = <list>val
    else:
        raise _Fallback()
    names = cls.FIELDS
    n = len(names)
    if len(fields) > n:
        raise _Fallback()
    o = _obj_new(cls)
    for i in range(n):
        setattr(o, names[i], fields[i] if i < len(fields) else None)
    return o


def decode_message(buf, Py_ssize_t start=0, end=None):
    """As ``message.decode_message``: the :class:`Message` at ``buf[start:end]``."""
    cdef Py_buffer view
    cdef Py_ssize_t e, p = start
    cdef const uint8_t* b
    cdef int code
    cdef list body = []
    cdef int body_kind = 0        # 0 none, 1 data, 2 sequence, 3 value
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        e = view.len if end is None else min(<Py_ssize_t>end, view.len)
        if p < 0 or p > e:
            raise _Fallback()
        b = <const uint8_t*>view.buf
        m = _obj_new(Message)
        m.header = None
        m.delivery_annotations = None
        m.message_annotations = None
        m.properties = None
        m.application_properties = None
        m.footer = None
        while p < e:
            if b[p] != 0x00:
                raise _Fallback()
            if p + 3 <= e and b[p + 1] == 0x53:
                code = b[p + 2]
                if code < 0x70 or code > 0x78:
                    raise _Fallback()
                p += 3
            else:
                p += 1
                code = _section(_value(b, &p, e, 1))
                if code < 0:
                    raise _Fallback()
            val = _value(b, &p, e, 1)
            if code == 0x75:
                if type(val) is not bytes or body_kind > 1:
                    raise _Fallback()
                body_kind = 1
                body.append(val)
            elif code == 0x76:
                if type(val) is not list or (body_kind != 0 and body_kind != 2):
                    raise _Fallback()
                body_kind = 2
                body.append(val)
            elif code == 0x77:
                if body_kind != 0:
                    raise _Fallback()
                body_kind = 3
                body.append(val)
            elif code == 0x70:
                m.header = _composite(Header, val)
            elif code == 0x73:
                m.properties = _composite(Properties, val)
            else:
                if val is None:
                    val = {}
                if type(val) is not dict:
                    raise _Fallback()
                if code == 0x71:
                    m.delivery_annotations = val
                elif code == 0x72:
                    m.message_annotations = val
                elif code == 0x74:
                    m.application_properties = val
                else:
                    m.footer = val
        if body_kind == 0:
            raise _Fallback()
        if body_kind == 1:
            m.body_type = "data"
            m.body = body[0] if len(body) == 1 else body
        elif body_kind == 2:
            m.body_type = "sequence"
            m.body = body
        else:
            m.body_type = "value"
            m.body = body[0]
        return m
    except Exception:
        return _py_decode_message(buf, start, end)
    finally:
        PyBuffer_Release(&view)


# ------------------------------------------------------------------ the broker's 0-9-1 view

cdef Py_ssize_t _skip(const uint8_t* b, Py_ssize_t p, Py_ssize_t end) except -2:
    """Position after the value at ``p``, or -1 when it does not fit / is unknown."""
    cdef uint8_t code, hi
    cdef Py_ssize_t n
    if p >= end:
        return -1
    code = b[p]
    p += 1
    if code == 0x00:
        p = _skip(b, p, end)
        if p < 0:
            return -1
        return _skip(b, p, end)
    hi = code & 0xF0
    if hi == 0xa0 or hi == 0xc0 or hi == 0xe0:
        if p + 1 > end:
            return -1
        n = p + 1 + b[p]
    elif hi == 0xb0 or hi == 0xd0 or hi == 0xf0:
        if p + 4 > end:
            return -1
        n = p + 4 + <Py_ssize_t>_u32(b + p)
    elif hi == 0x40:
        if code > 0x45:
            return -1
        n = p
    elif hi == 0x50:
        n = p + 1
    elif hi == 0x60:
        n = p + 2
    elif hi == 0x70:
        n = p + 4
    elif hi == 0x80:
        n = p + 8
    elif hi == 0x90:
        n = p + 16
    else:
        return -1
    return n if n <= end else -1


cdef Py_ssize_t _data_start(const uint8_t* b, Py_ssize_t p, Py_ssize_t end, Py_ssize_t* body_pos) except -2:
    """Start of the message's one data section when it is the last section and the only body
    section (``body_pos``: where its bytes start), else -1."""
    cdef Py_ssize_t s, q, n
    cdef uint8_t code
    while p < end:
        if p + 4 > end or b[p] != 0x00 or b[p + 1] != 0x53:
            return -1
        code = b[p + 2]
        if code >= 0x75 or code < 0x70:
            if code != 0x75:
                return -1
            q = p + 3
            if b[q] == 0xa0:
                if q + 2 > end:
                    return -1
                n = b[q + 1]
                body_pos[0] = q + 2
            elif b[q] == 0xb0:
                if q + 5 > end:
                    return -1
                n = _u32(b + q + 1)
                body_pos[0] = q + 5
            else:
                return -1
            if body_pos[0] + n != end:
                return -1               # something after it (footer, another data section)
            return p
        s = _skip(b, p + 3, end)
        if s < 0:
            return -1
        p = s
    return -1


def chunk_to_091(data, Py_ssize_t pos, Py_ssize_t end, dict cache, convert_prefix, convert_whole):
    """As ``chunk_view.chunk_to_091`` (its pure-Python oracle): the 0-9-1 view of the
    entries of a stream chunk's data ``data[pos:end]`` (osiris entries: ``0 | 31-bit size |
    AMQP 1.0 message``, or a sub-batch ``1 | ...``): a list of ``(enc, props_raw, body)``,
    one per record.

    A message whose last and only body section is one data section is split there: the bytes
    before it (the prefix) are looked up in ``cache`` (prefix -> ``(enc, props_raw)``), and on
    a miss ``convert_prefix(prefix, message)`` gives them (stored in ``cache``). Other
    messages, and sub-batch entries, go to ``convert_whole(entry bytes, is_sub_batch)``,
    which returns a list of ``(enc, props_raw, body)``. Consecutive equal prefixes give the
    same ``enc`` / ``props_raw`` objects. Raises what the callbacks raise, and ValueError for
    an entry that runs past ``end``."""
    cdef Py_buffer view
    cdef const uint8_t* b
    cdef Py_ssize_t p = pos, n, ds, bp
    cdef uint32_t head
    cdef list out = []
    cdef bytes last_prefix = None
    cdef object last_val = None
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        b = <const uint8_t*>view.buf
        if end > view.len:
            end = view.len
        while p < end:
            if p + 4 > end:
                raise ValueError("chunk entry header cut short")
            head = _u32(b + p)
            if head & 0x80000000:
                # sub-batch: 1 | compression (3) | reserved (4) | records (16) | uncompressed
                # length (32) | length (32) | data
                if p + 11 > end:
                    raise ValueError("sub-batch entry header cut short")
                n = _u32(b + p + 7)
                if p + 11 + n > end:
                    raise ValueError("sub-batch entry runs past the chunk")
                out.extend(convert_whole(PyBytes_FromStringAndSize(<const char*>(b + p), 11 + n), True))
                p += 11 + n
                continue
            n = head
            p += 4
            if p + n > end:
                raise ValueError("chunk entry runs past the chunk")
            ds = _data_start(b, p, p + n, &bp)
            if ds < 0:
                out.extend(convert_whole(PyBytes_FromStringAndSize(<const char*>(b + p), n), False))
                p += n
                continue
            if (last_prefix is not None and PyBytes_GET_SIZE(last_prefix) == ds - p
                    and memcmp(PyBytes_AS_STRING(last_prefix), b + p, ds - p) == 0):
                # the run's prefix again: no bytes object made, no lookup
                out.append((last_val[0], last_val[1],
                            PyBytes_FromStringAndSize(<const char*>(b + bp), p + n - bp)))
                p += n
                continue
            prefix = PyBytes_FromStringAndSize(<const char*>(b + p), ds - p)
            if True:
                val = cache.get(prefix)
                if val is None:
                    val = convert_prefix(prefix, PyBytes_FromStringAndSize(<const char*>(b + p), n))
                    cache[prefix] = val
                last_prefix = prefix
                last_val = val
            out.append((val[0], val[1], PyBytes_FromStringAndSize(<const char*>(b + bp), p + n - bp)))
            p += n
        return out
    finally:
        PyBuffer_Release(&view)


def data_entry(bytes prefix, body, Py_ssize_t short_max):
    """As ``convert.data_entry``: ``size (u32) | prefix | data section of body`` in one
    allocation (the osiris simple entry of a 0-9-1 message stored in a stream)."""
    cdef Py_buffer view
    cdef Py_ssize_t n, hl, total, pl = len(prefix)
    cdef bytes out
    cdef unsigned char* d
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    try:
        n = view.len
        hl = 5 if n <= short_max else 8
        total = pl + hl + n
        out = PyBytes_FromStringAndSize(NULL, 4 + total)
        d = <unsigned char*>PyBytes_AS_STRING(out)
        d[0] = (total >> 24) & 0xFF
        d[1] = (total >> 16) & 0xFF
        d[2] = (total >> 8) & 0xFF
        d[3] = total & 0xFF
        memcpy(d + 4, PyBytes_AS_STRING(prefix), pl)
        d += 4 + pl
        d[0] = 0x00
        d[1] = 0x53
        d[2] = 0x75
        if hl == 5:
            d[3] = 0xa0
            d[4] = n
        else:
            d[3] = 0xb0
            d[4] = (n >> 24) & 0xFF
            d[5] = (n >> 16) & 0xFF
            d[6] = (n >> 8) & 0xFF
            d[7] = n & 0xFF
        memcpy(d + hl, view.buf, n)
        return out
    finally:
        PyBuffer_Release(&view)
