# cython: language_level=3, boundscheck=False, wraparound=False, binding=True
"""The compiled twin of :mod:`.raw_deliveries`: the column-wise decoding of a run of
basic.deliver messages kept as frames (``deliver_columns``; Cython, see ``_codec_core.pyx``
for how every twin hands unusual input to its pure-Python module). :func:`bind_raw_deliveries`
gives it the pure-Python function (called once by ``raw_deliveries.py``)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memcpy

from ._codec_core cimport _skip_shortstr, _u32
from ._properties cimport decode_properties

from ._codec_core import Fallback as _Fallback

cdef object _py_columns = None  # the pure-Python deliver_columns


def bind_raw_deliveries(py_columns):
    """Give the twin the pure-Python ``deliver_columns`` (its fallback; called once by
    ``raw_deliveries.py``)."""
    global _py_columns
    _py_columns = py_columns


cdef inline object _same_or_new(const unsigned char* p, Py_ssize_t i, Py_ssize_t k,
                                Py_ssize_t* prev_i, Py_ssize_t* prev_k, object prev):
    """The shortstr at p[i:i+k] as str; the previous message's object when the bytes match
    (so equal exchange/routing-key columns share one object). Raises _Fallback on bad UTF-8."""
    cdef Py_ssize_t j
    if prev is not None and prev_k[0] == k:
        for j in range(k):
            if p[prev_i[0] + j] != p[i + j]:
                break
        else:
            prev_i[0] = i
            return prev
    try:
        s = PyUnicode_DecodeUTF8(<const char*>p + i, k, NULL)
    except UnicodeDecodeError:
        raise _Fallback
    prev_i[0] = i
    prev_k[0] = k
    return s


def deliver_columns(bytes data, expect=None, bint packed_bodies=False):
    """raw_deliveries.deliver_columns, compiled: the same columns (or the same error)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pos = 0, size, mend, i, k, h, hsize, hend, q, bsize, bend
    cdef Py_ssize_t ex_i = 0, ex_k = -1, rk_i = 0, rk_k = -1
    cdef int chan
    cdef unsigned long long body_size, got
    cdef unsigned int flags
    cdef list bodies = [], red = [], exchanges = [], keys = [], props = []
    cdef object ex = None, rk = None, parts
    try:
        while pos < n:
            if n - pos < 11 or p[pos] != 1 or _u32(p, pos + 7) != ((60 << 16) | 60):
                raise _Fallback
            size = <Py_ssize_t>_u32(p, pos + 3)
            mend = pos + 7 + size
            chan = (<int>p[pos + 1] << 8) | p[pos + 2]
            if mend >= n or p[mend] != 206 or chan == 0:
                raise _Fallback
            i = _skip_shortstr(p, pos + 11, mend)   # consumer tag (only checked: ASCII)
            if i < 0 or i + 9 >= mend:
                raise _Fallback
            red.append(True if p[i + 8] & 1 else False)
            i += 9
            k = p[i]
            if i + 1 + k >= mend:
                raise _Fallback
            ex = _same_or_new(p, i + 1, k, &ex_i, &ex_k, ex)
            i += 1 + k
            k = p[i]
            if i + 1 + k != mend:
                raise _Fallback
            rk = _same_or_new(p, i + 1, k, &rk_i, &rk_k, rk)
            exchanges.append(ex)
            keys.append(rk)
            h = mend + 1
            if n - h < 21 or p[h] != 2 or ((<int>p[h + 1] << 8) | p[h + 2]) != chan:
                raise _Fallback
            hsize = <Py_ssize_t>_u32(p, h + 3)
            hend = h + 7 + hsize
            body_size = (<unsigned long long>_u32(p, h + 11) << 32) | _u32(p, h + 15)
            if (hsize < 14 or hend >= n or p[hend] != 206
                    or ((<unsigned int>p[h + 7] << 8) | p[h + 8]) != 60 or p[h + 9] or p[h + 10]):
                raise _Fallback
            flags = (<unsigned int>p[h + 19] << 8) | p[h + 20]
            if flags == 0 and hsize == 14:
                props.append(None)
            else:
                pr = decode_properties(data, h + 19, hend)
                # no property bit in the first word (only continuation words): no properties,
                # None like the pure-Python twin (which compares with an empty BasicProperties)
                props.append(None if (flags & 0xFFFE) == 0 else pr)
            q = hend + 1
            if body_size == 0:
                bodies.append(b"")
            else:
                if n - q < 7 or p[q] != 3 or ((<int>p[q + 1] << 8) | p[q + 2]) != chan:
                    raise _Fallback
                bsize = <Py_ssize_t>_u32(p, q + 3)
                bend = q + 7 + bsize
                if <unsigned long long>bsize == body_size and bend < n and p[bend] == 206:
                    bodies.append(PyBytes_FromStringAndSize(<const char*>p + q + 7, bsize))
                    q = bend + 1
                else:
                    parts = []
                    got = 0
                    while got < body_size:
                        if n - q < 7 or p[q] != 3 or ((<int>p[q + 1] << 8) | p[q + 2]) != chan:
                            raise _Fallback
                        bsize = <Py_ssize_t>_u32(p, q + 3)
                        bend = q + 7 + bsize
                        if bend >= n or p[bend] != 206 or got + <unsigned long long>bsize > body_size:
                            raise _Fallback
                        parts.append(PyBytes_FromStringAndSize(<const char*>p + q + 7, bsize))
                        got += <unsigned long long>bsize
                        q = bend + 1
                    bodies.append(b"".join(parts))
            pos = q
        if expect is not None and len(bodies) != expect:
            raise _Fallback
    except _Fallback:
        return _py_columns(data, expect, packed_bodies)
    if packed_bodies:
        return _pack_bodies(bodies), red, exchanges, keys, props
    return bodies, red, exchanges, keys, props


cdef object _pack_bodies(list bodies):
    """``(offsets, values)``: int32 little-endian offsets (n + 1) and the concatenated bodies,
    an Arrow binary column's buffers; the list itself when the bodies exceed 2 GiB - 1."""
    cdef Py_ssize_t n = len(bodies), i, total = 0
    cdef object b
    for b in bodies:
        total += PyBytes_GET_SIZE(b)
    if total > 0x7FFFFFFF:
        return bodies
    offsets = PyBytes_FromStringAndSize(NULL, 4 * (n + 1))
    values = PyBytes_FromStringAndSize(NULL, total)
    cdef unsigned char* o = <unsigned char*>PyBytes_AS_STRING(offsets)
    cdef char* v = PyBytes_AS_STRING(values)
    cdef Py_ssize_t at = 0, k
    for i in range(n):
        o[4 * i] = at & 0xFF
        o[4 * i + 1] = (at >> 8) & 0xFF
        o[4 * i + 2] = (at >> 16) & 0xFF
        o[4 * i + 3] = (at >> 24) & 0xFF
        b = bodies[i]
        k = PyBytes_GET_SIZE(b)
        memcpy(v + at, PyBytes_AS_STRING(b), k)
        at += k
    o[4 * n] = at & 0xFF
    o[4 * n + 1] = (at >> 8) & 0xFF
    o[4 * n + 2] = (at >> 16) & 0xFF
    o[4 * n + 3] = (at >> 24) & 0xFF
    return offsets, values

