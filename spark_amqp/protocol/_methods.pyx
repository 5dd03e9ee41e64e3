# cython: language_level=3, boundscheck=False, wraparound=False, binding=True
"""The compiled twin of the generated method classes' ``decode`` (:mod:`.methods`, installed by
:mod:`.spec`): one decoder for every method class, driven by the class's wire codes (Cython;
see ``_codec_core.pyx`` for how every twin hands unusual input to its pure-Python code, here
the class's generated ``_py_decode``). :func:`bind_methods` gives it the field-table decoder
(called once by ``spec.py``)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE

from ._codec_core cimport MAXF, _alloc, _layout, _octet, _set_slot, _shortstr, _u32

from ._codec_core import Fallback as _Fallback

cdef object _decode_table = None  # values._decode_table_at


def bind_methods(decode_table):
    """Give the twin the pure-Python field-table decoder (called once by spec.py)."""
    global _decode_table
    _decode_table = decode_table


cdef class _MethodInfo:
    """What the compiled decoders need of a generated method class, read once (its fields
    are declared in ``_methods.pxd``)."""


cdef dict _INFO_BY_CLASS = {}  # generated method class -> _MethodInfo


cdef _MethodInfo _method_info(cls):
    """The _MethodInfo of ``cls`` (built on first use); None when it has more than MAXF
    fields or field types other than the wire codes above."""
    cdef _MethodInfo info = _INFO_BY_CLASS.get(cls)
    cdef Py_ssize_t i
    if info is not None:
        return info
    wire = cls._wire
    if type(wire) is not tuple or len(<tuple>wire) > MAXF:
        return None
    info = _MethodInfo()
    info.cls = cls
    info.class_id = cls.CLASS_ID
    info.has_content = bool(cls.has_content)
    info.nw = len(<tuple>wire)
    for i in range(info.nw):
        if not 0 <= wire[i] <= W_TABLE:
            return None
        info.wire[i] = wire[i]
    info.lay = _layout(cls, tuple(cls.fields))
    if info.lay.n != info.nw:
        return None
    _INFO_BY_CLASS[cls] = info
    return info


cpdef object decode_method(cls, buf, Py_ssize_t off, Py_ssize_t end):
    """``cls.decode`` of a generated method class (same arguments, result and errors),
    compiled; anything unusual goes to the pure-Python ``cls._py_decode``."""
    if type(buf) is not bytes or off < 0 or end > PyBytes_GET_SIZE(buf) or off > end:
        return cls._py_decode(buf, off, end)
    cdef _MethodInfo info = _method_info(cls)
    if info is None:
        return cls._py_decode(buf, off, end)
    return _decode_args(info, <bytes>buf, <const unsigned char*>PyBytes_AS_STRING(buf), off, end)


cdef object _decode_args(_MethodInfo info, bytes buf, const unsigned char* p, Py_ssize_t off,
                         Py_ssize_t end):
    """decode_method once its arguments are checked (``p``: the bytes of ``buf``,
    ``0 <= off <= end <= len(buf)``)."""
    cdef Py_ssize_t pos = off, stop, i
    cdef int code, bit = 8
    cdef unsigned char octet = 0
    cdef _Layout lay = info.lay
    cdef bint direct = lay.ok
    cdef list values = None if direct else []
    cdef object o = _alloc(lay) if direct else None
    try:
        for i in range(info.nw):
            code = info.wire[i]
            if code == W_BIT:  # bits share octets from the low bit up (0-9-1 §4.2.5.2)
                if bit == 8:
                    if pos >= end:
                        raise _Fallback
                    octet = p[pos]
                    pos += 1
                    bit = 0
                v = True if (octet >> bit) & 1 else False
                bit += 1
            else:
                bit = 8
                if code == W_SHORTSTR:
                    v = _shortstr(p, &pos, end)
                elif code == W_LONGLONG:
                    if pos + 8 > end:
                        raise _Fallback
                    v = (<unsigned long long>_u32(p, pos) << 32) | _u32(p, pos + 4)
                    pos += 8
                elif code == W_SHORT:
                    if pos + 2 > end:
                        raise _Fallback
                    v = (<unsigned int>p[pos] << 8) | p[pos + 1]
                    pos += 2
                elif code == W_LONG:
                    if pos + 4 > end:
                        raise _Fallback
                    v = _u32(p, pos)
                    pos += 4
                elif code == W_OCTET:
                    v = _octet(p, &pos, end)
                elif code == W_LONGSTR:
                    if pos + 4 > end:
                        raise _Fallback
                    stop = pos + 4 + <Py_ssize_t>_u32(p, pos)
                    if stop > end:
                        raise _Fallback
                    v = PyBytes_FromStringAndSize(<const char*>p + pos + 4, stop - pos - 4)
                    pos = stop
                else:  # W_TABLE: the pure-Python table decoder
                    v, pos = _decode_table(buf, pos, end, 0)
            if direct:
                _set_slot(o, lay.off[i], v)
            else:
                values.append(v)
    except Exception:
        return info.cls._py_decode(buf, off, end)
    if pos != end:
        return info.cls._py_decode(buf, off, end)
    return o if direct else info.cls(*values)
