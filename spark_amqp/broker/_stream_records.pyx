# cython: language_level=3, boundscheck=False, wraparound=False, binding=True
"""The compiled twin of the stream store's record reader (:func:`.stream.split_entries`): the
entries of a chunk record split into ``(enc, props_raw, body)`` tuples, equal consecutive
values shared as one object (Cython; built by ``setup.py`` with the codec's twins and used
unless ``SPARK_AMQP_PURE_PYTHON=1``; the same values as the pure-Python reader, checked by
tests/broker/test_stream_records.py)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcmp

from spark_amqp.protocol._codec_core cimport _u32


cdef inline bint _same(bytes prev, const unsigned char* p, Py_ssize_t n) noexcept:
    return (prev is not None and PyBytes_GET_SIZE(prev) == n
            and memcmp(PyBytes_AS_STRING(prev), p, n) == 0)


def split_records(bytes data, Py_ssize_t pos, Py_ssize_t count):
    """``count`` records from ``data[pos:]``, each a header of three big-endian lengths
    (u16 ``a``, u32 ``b``, u32 ``c``) and then ``a``, ``b`` and ``c`` bytes: the list of
    ``(a_bytes, b_bytes, c_bytes)`` tuples (the embedded broker's stream entries, ``(enc,
    props_raw, body)``: ``broker/stream.py``). A value equal to the previous record's is that
    same bytes object. None when a record runs past the end of ``data`` (the caller's
    pure-Python reader then reports it)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t el, pl, bl, a, b, c, k
    cdef list out = []
    cdef bytes x = None, y = None, z
    if pos < 0 or count < 0:
        return None
    for k in range(count):
        if pos + 10 > end:
            return None
        el = (<Py_ssize_t>p[pos] << 8) | p[pos + 1]
        pl = <Py_ssize_t>_u32(p, pos + 2)
        bl = <Py_ssize_t>_u32(p, pos + 6)
        a = pos + 10
        b = a + el
        c = b + pl
        pos = c + bl
        if pos > end:
            return None
        if not _same(x, p + a, el):
            x = PyBytes_FromStringAndSize(<const char*>p + a, el)
        if not _same(y, p + b, pl):
            y = PyBytes_FromStringAndSize(<const char*>p + b, pl)
        z = PyBytes_FromStringAndSize(<const char*>p + c, bl)
        out.append((x, y, z))
    return out
