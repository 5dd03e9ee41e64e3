# The C helpers the codec's compiled twins share (implemented in _codec_core.pyx; the inline
# ones are compiled into each module that cimports them).

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.object cimport PyTypeObject
from cpython.ref cimport PyObject, Py_INCREF
from libc.string cimport memcpy

cdef enum:
    MAXF = 16           # the most fields a layout holds (AMQP methods have at most 8)


cdef class _Layout:
    cdef object cls
    cdef Py_ssize_t n
    cdef Py_ssize_t off[MAXF]
    cdef bint ok


cdef _Layout _layout(cls, tuple names)
cdef void _set_decode_value(decode_value)
cdef object _shortstr(const unsigned char* p, Py_ssize_t* pos, Py_ssize_t end)
cdef object _octet(const unsigned char* p, Py_ssize_t* pos, Py_ssize_t end)
cdef dict _table(bytes buf, const unsigned char* p, Py_ssize_t* pos, Py_ssize_t end)
cdef object _header_and_body(const unsigned char* p, Py_ssize_t h, Py_ssize_t n, int channel,
                             unsigned int class_id, Py_ssize_t fmax8, unsigned long long max_body,
                             Py_ssize_t* hend_out, Py_ssize_t* end_out)


cdef inline object _alloc(_Layout lay):
    """A new instance of ``lay.cls`` with its slots unset (``object.__new__(cls)``)."""
    return (<PyTypeObject*>lay.cls).tp_new(<type>lay.cls, <PyObject*>(), NULL)


cdef inline void _set_slot(object o, Py_ssize_t off, object v) noexcept:
    """Store ``v`` in the (unset) slot at ``off`` of the new object ``o``."""
    Py_INCREF(v)
    (<PyObject**>((<char*><PyObject*>o) + off))[0] = <PyObject*>v


cdef inline unsigned int _u32(const unsigned char* p, Py_ssize_t i) noexcept:
    return (<unsigned int>p[i] << 24) | (<unsigned int>p[i + 1] << 16) | (<unsigned int>p[i + 2] << 8) | p[i + 3]


cdef inline void _put_u32(unsigned char* d, unsigned long v) noexcept:
    d[0] = (v >> 24) & 0xFF
    d[1] = (v >> 16) & 0xFF
    d[2] = (v >> 8) & 0xFF
    d[3] = v & 0xFF


cdef inline void _put_u64(unsigned char* d, unsigned long long v) noexcept:
    cdef int i
    for i in range(7, -1, -1):
        d[i] = v & 0xFF
        v >>= 8


cdef inline unsigned char* _put(unsigned char* d, bytes b) noexcept:
    cdef Py_ssize_t k = PyBytes_GET_SIZE(b)
    memcpy(d, PyBytes_AS_STRING(b), k)
    return d + k


cdef inline bint _ascii(const unsigned char* p, Py_ssize_t i, Py_ssize_t k) noexcept:
    cdef Py_ssize_t j
    for j in range(i, i + k):
        if p[j] & 0x80:
            return False
    return True


cdef inline Py_ssize_t _skip_shortstr(const unsigned char* p, Py_ssize_t i,
                                      Py_ssize_t mend) noexcept:
    """Offset after the ASCII shortstr at ``p[i]`` inside a method payload ending at ``mend``,
    or -1 when it does not fit or is not ASCII."""
    if i >= mend:
        return -1
    cdef Py_ssize_t k = p[i]
    if i + 1 + k > mend or not _ascii(p, i + 1, k):
        return -1
    return i + 1 + k
