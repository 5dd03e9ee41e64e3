# cython: language_level=3, boundscheck=False, wraparound=False, binding=True
"""The compiled twin of :mod:`.server_frames`: the broker's delivery writers, appending
basic.deliver messages (one, a stream's, a run of a stream chunk's) to an output buffer
(Cython; the same bytes as the pure-Python writers, checked by tests/protocol/
test_server_frames.py). Nothing to bind."""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_GET_SIZE

from ._codec_core cimport _put, _put_u64


cdef inline unsigned char* _grow(bytearray out, Py_ssize_t k) except NULL:
    """Room for ``k`` more bytes at the end of ``out`` (amortised growth); where they start."""
    cdef Py_ssize_t n = PyByteArray_GET_SIZE(out)
    if PyByteArray_Resize(out, n + k) < 0:
        return NULL
    return <unsigned char*>PyByteArray_AS_STRING(out) + n



def append_deliver(bytearray out, bytes pre, unsigned long long tag, bint redelivered,
                   bytes post, body):
    """server_frames._append_deliver, compiled: the same bytes appended to ``out``."""
    if type(body) is not bytes:
        out += pre
        out += _pack_qb(tag, redelivered)
        out += post
        out += body
        out += b"\xce"
        return
    cdef Py_ssize_t k = (PyBytes_GET_SIZE(pre) + 9 + PyBytes_GET_SIZE(post)
                         + PyBytes_GET_SIZE(<bytes>body) + 1)
    cdef unsigned char* d = _grow(out, k)
    d = _put(d, pre)
    _put_u64(d, tag)
    d[8] = 1 if redelivered else 0
    d = _put(d + 9, post)
    d = _put(d, <bytes>body)
    d[0] = 0xCE


def append_stream_deliver(bytearray out, bytes pre, unsigned long long tag, bytes mid,
                          long long offset, bytes post, body):
    """server_frames._append_stream_deliver, compiled: the same bytes appended to ``out``."""
    if type(body) is not bytes:
        out += pre
        out += _pack_qb(tag, False)
        out += mid
        out += _pack_u64(<unsigned long long>offset)
        out += post
        out += body
        out += b"\xce"
        return
    cdef Py_ssize_t k = (PyBytes_GET_SIZE(pre) + 9 + PyBytes_GET_SIZE(mid) + 8
                         + PyBytes_GET_SIZE(post) + PyBytes_GET_SIZE(<bytes>body) + 1)
    cdef unsigned char* d = _grow(out, k)
    d = _put(d, pre)
    _put_u64(d, tag)
    d[8] = 0
    d = _put(d + 9, mid)
    _put_u64(d, <unsigned long long>offset)
    d = _put(d + 8, post)
    d = _put(d, <bytes>body)
    d[0] = 0xCE


def append_stream_run(bytearray out, bytes pre, unsigned long long tag, bytes mid,
                      long long offset, bytes post, list entries, Py_ssize_t i, enc,
                      props_raw, Py_ssize_t blen):
    """server_frames._append_stream_run, compiled: the same bytes appended to ``out``, the
    same index returned (an entry that is not a 3-tuple with a bytes body stops the run
    there, as a mismatch; the caller's general path takes it)."""
    cdef Py_ssize_t n = len(entries)
    cdef Py_ssize_t j = i
    cdef Py_ssize_t fixed = (PyBytes_GET_SIZE(pre) + 9 + PyBytes_GET_SIZE(mid) + 8
                             + PyBytes_GET_SIZE(post) + 1)
    cdef unsigned char* d
    cdef unsigned long long k
    cdef object e, body, v
    cdef tuple t
    while j < n:
        e = entries[j]
        if type(e) is not tuple or len(<tuple>e) != 3:
            break
        t = <tuple>e
        body = t[2]
        if type(body) is not bytes or PyBytes_GET_SIZE(<bytes>body) != blen:
            break
        v = t[1]
        if v is not props_raw and v != props_raw:
            break
        v = t[0]
        if v is not enc and v != enc:
            break
        k = <unsigned long long>(j - i)
        d = _grow(out, fixed + blen)
        d = _put(d, pre)
        _put_u64(d, tag + k)
        d[8] = 0
        d = _put(d + 9, mid)
        _put_u64(d, <unsigned long long>offset + k)
        d = _put(d + 8, post)
        d = _put(d, <bytes>body)
        d[0] = 0xCE
        j += 1
    return j
cdef bytes _pack_qb(unsigned long long tag, bint redelivered):
    cdef unsigned char b[9]
    _put_u64(b, tag)
    b[8] = 1 if redelivered else 0
    return PyBytes_FromStringAndSize(<char*>b, 9)


cdef bytes _pack_u64(unsigned long long v):
    cdef unsigned char b[8]
    _put_u64(b, v)
    return PyBytes_FromStringAndSize(<char*>b, 8)

