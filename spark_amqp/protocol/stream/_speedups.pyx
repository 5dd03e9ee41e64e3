# cython: language_level=3, boundscheck=False, wraparound=False
"""Optional compiled fast paths of the stream-protocol codec (Cython): splitting a chunk's
entries into messages, encoding a publish frame, splitting a received publish frame, and
joining messages into chunk entries.

Built by ``setup.py`` when Cython and a C compiler are available; ``speedups.py`` installs
them unless ``SPARK_AMQP_PURE_PYTHON=1``. The pure-Python functions stay the reference: each
function here handles the common, well-formed shapes (simple entries, version-1 publishes)
and hands anything else (a sub-batch, a bound that does not hold, a value out of range) to
the pure-Python function, which decodes it or raises the same typed error. The differential
tests in ``tests/protocol/stream/test_stream_speedups.py`` check it.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from libc.string cimport memcpy

cdef object _py_split = None          # chunk.py_split_entries
cdef object _py_encode_publish = None  # commands.py_encode_publish
cdef object _py_encode_ids = None      # commands.py_encode_publish_ids
cdef object _py_split_publish = None   # commands.py_split_publish
cdef object _py_join = None            # chunk.py_join_entries


def setup(py_split, py_encode_publish, py_encode_ids, py_split_publish, py_join):
    global _py_split, _py_encode_publish, _py_encode_ids, _py_split_publish, _py_join
    _py_split = py_split
    _py_encode_publish = py_encode_publish
    _py_encode_ids = py_encode_ids
    _py_split_publish = py_split_publish
    _py_join = py_join


cdef inline unsigned int _u32(const unsigned char* p) noexcept:
    return (<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16) | (<unsigned int>p[2] << 8) | p[3]


cdef inline unsigned long long _u64(const unsigned char* p) noexcept:
    return (<unsigned long long>_u32(p) << 32) | _u32(p + 4)


cdef inline void _put_u32(unsigned char* d, unsigned int v) noexcept:
    d[0] = v >> 24
    d[1] = (v >> 16) & 0xFF
    d[2] = (v >> 8) & 0xFF
    d[3] = v & 0xFF


cdef inline void _put_u64(unsigned char* d, unsigned long long v) noexcept:
    _put_u32(d, <unsigned int>(v >> 32))
    _put_u32(d + 4, <unsigned int>(v & 0xFFFFFFFF))


def split_entries(data, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t num_entries,
                  Py_ssize_t num_records):
    """``chunk.py_split_entries`` for chunks of simple entries only."""
    if type(data) is not bytes or pos < 0 or end > PyBytes_GET_SIZE(data) or pos > end \
            or num_entries != num_records or num_entries < 0:
        return _py_split(data, pos, end, num_entries, num_records)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t i = pos, k
    cdef unsigned int head
    # first pass: check every entry is simple and the sizes fill [pos, end) exactly
    for k in range(num_entries):
        if i + 4 > end:
            return _py_split(data, pos, end, num_entries, num_records)
        head = _u32(p + i)
        if head & 0x80000000u or <Py_ssize_t>head > end - i - 4:
            return _py_split(data, pos, end, num_entries, num_records)
        i += 4 + head
    if i != end:
        return _py_split(data, pos, end, num_entries, num_records)
    cdef list out = PyList_New(num_entries)
    cdef object m
    i = pos
    for k in range(num_entries):
        head = _u32(p + i)
        m = PyBytes_FromStringAndSize(<const char*>p + i + 4, head)
        Py_INCREF(m)
        PyList_SET_ITEM(out, k, m)
        i += 4 + head
    return out


def encode_publish(int publisher_id, unsigned long long first_id, list messages):
    """``commands.py_encode_publish``: a version-1 publish frame of ``messages`` (bytes) with
    the consecutive publishing ids from ``first_id``."""
    cdef Py_ssize_t n = len(messages), k, size = 9, ln
    if publisher_id < 0 or publisher_id > 255 or n > 0xFFFFFFFF:
        return _py_encode_publish(publisher_id, first_id, messages)
    for k in range(n):
        m = messages[k]
        if type(m) is not bytes:
            return _py_encode_publish(publisher_id, first_id, messages)
        ln = PyBytes_GET_SIZE(m)
        if ln > 0x7FFFFFFF:
            return _py_encode_publish(publisher_id, first_id, messages)
        size += 12 + ln
    if size > 0xFFFFFFFF:
        return _py_encode_publish(publisher_id, first_id, messages)
    out = PyBytes_FromStringAndSize(NULL, size + 4)
    cdef unsigned char* d = <unsigned char*>PyBytes_AS_STRING(out)
    _put_u32(d, <unsigned int>size)
    d[4] = 0
    d[5] = 2
    d[6] = 0
    d[7] = 1
    d[8] = <unsigned char>publisher_id
    _put_u32(d + 9, <unsigned int>n)
    d += 13
    cdef unsigned long long pid = first_id
    for k in range(n):
        m = messages[k]
        ln = PyBytes_GET_SIZE(m)
        _put_u64(d, pid)
        _put_u32(d + 8, <unsigned int>ln)
        d += 12
        memcpy(d, PyBytes_AS_STRING(m), ln)
        d += ln
        pid += 1
    return out


def encode_publish_ids(int publisher_id, ids, list messages):
    """``commands.py_encode_publish_ids``: a version-1 publish frame with one publishing id
    per message from ``ids``."""
    cdef Py_ssize_t n = len(messages), k, size = 9, ln
    if publisher_id < 0 or publisher_id > 255 or len(ids) != n or n > 0xFFFFFFFF:
        return _py_encode_ids(publisher_id, ids, messages)
    cdef list idl = list(ids)
    for k in range(n):
        m = messages[k]
        v = idl[k]
        if type(m) is not bytes or type(v) is not int or v < 0 or v > 0xFFFFFFFFFFFFFFFF:
            return _py_encode_ids(publisher_id, ids, messages)
        ln = PyBytes_GET_SIZE(m)
        if ln > 0x7FFFFFFF:
            return _py_encode_ids(publisher_id, ids, messages)
        size += 12 + ln
    if size > 0xFFFFFFFF:
        return _py_encode_ids(publisher_id, ids, messages)
    out = PyBytes_FromStringAndSize(NULL, size + 4)
    cdef unsigned char* d = <unsigned char*>PyBytes_AS_STRING(out)
    _put_u32(d, <unsigned int>size)
    d[4] = 0
    d[5] = 2
    d[6] = 0
    d[7] = 1
    d[8] = <unsigned char>publisher_id
    _put_u32(d + 9, <unsigned int>n)
    d += 13
    for k in range(n):
        m = messages[k]
        ln = PyBytes_GET_SIZE(m)
        _put_u64(d, <unsigned long long>idl[k])
        _put_u32(d + 8, <unsigned int>ln)
        d += 12
        memcpy(d, PyBytes_AS_STRING(m), ln)
        d += ln
    return out


def split_publish(buf, Py_ssize_t pos, Py_ssize_t end):
    """``commands.py_split_publish`` for version-1 publishes of simple entries:
    ``(publisher_id, publishing_ids, messages, None)``; ``pos`` at the key."""
    if type(buf) is not bytes or pos < 0 or end > PyBytes_GET_SIZE(buf) or end - pos < 9:
        return _py_split_publish(buf, pos, end)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(buf)
    if p[pos] != 0 or p[pos + 1] != 2 or p[pos + 2] != 0 or p[pos + 3] != 1:
        return _py_split_publish(buf, pos, end)
    cdef int publisher_id = p[pos + 4]
    cdef unsigned int n = _u32(p + pos + 5)
    cdef Py_ssize_t i = pos + 9, k
    cdef unsigned int head
    if <Py_ssize_t>n * 12 > end - i:
        return _py_split_publish(buf, pos, end)
    for k in range(n):
        if i + 12 > end:
            return _py_split_publish(buf, pos, end)
        head = _u32(p + i + 8)
        if head & 0x80000000u or <Py_ssize_t>head > end - i - 12:
            return _py_split_publish(buf, pos, end)
        i += 12 + head
    if i != end:
        return _py_split_publish(buf, pos, end)
    cdef list ids = PyList_New(n)
    cdef list msgs = PyList_New(n)
    cdef object v, m
    i = pos + 9
    for k in range(n):
        v = _u64(p + i)
        Py_INCREF(v)
        PyList_SET_ITEM(ids, k, v)
        head = _u32(p + i + 8)
        m = PyBytes_FromStringAndSize(<const char*>p + i + 12, head)
        Py_INCREF(m)
        PyList_SET_ITEM(msgs, k, m)
        i += 12 + head
    return publisher_id, ids, msgs, None


def join_entries(list messages):
    """``chunk.py_join_entries``: ``messages`` (bytes) as consecutive simple entries."""
    cdef Py_ssize_t n = len(messages), k, size = 0, ln
    for k in range(n):
        m = messages[k]
        if type(m) is not bytes:
            return _py_join(messages)
        ln = PyBytes_GET_SIZE(m)
        if ln > 0x7FFFFFFF:
            return _py_join(messages)
        size += 4 + ln
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef unsigned char* d = <unsigned char*>PyBytes_AS_STRING(out)
    for k in range(n):
        m = messages[k]
        ln = PyBytes_GET_SIZE(m)
        _put_u32(d, <unsigned int>ln)
        d += 4
        memcpy(d, PyBytes_AS_STRING(m), ln)
        d += ln
    return out
