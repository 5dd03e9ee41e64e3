# The compiled twin of the generated method classes' decode (see _methods.pyx), for _frames.

from ._codec_core cimport MAXF, _Layout

# wire type codes of Method._wire (set by spec.py): the arguments in order
cdef enum:
    W_BIT = 0
    W_OCTET = 1
    W_SHORT = 2
    W_LONG = 3
    W_LONGLONG = 4
    W_SHORTSTR = 5
    W_LONGSTR = 6
    W_TABLE = 7


cdef class _MethodInfo:
    cdef object cls
    cdef unsigned int class_id
    cdef bint has_content
    cdef Py_ssize_t nw
    cdef unsigned char wire[MAXF]
    cdef _Layout lay


cdef _MethodInfo _method_info(cls)
cdef object _decode_args(_MethodInfo info, bytes buf, const unsigned char* p, Py_ssize_t off,
                         Py_ssize_t end)
