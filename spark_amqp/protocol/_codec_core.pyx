# cython: language_level=3, boundscheck=False, wraparound=False, binding=True
"""The shared part of the codec's compiled twins (Cython; declared in ``_codec_core.pxd``).

Each compiled twin (``_properties``, ``_methods``, ``_frames``, ``_raw_deliveries``,
``_raw_publish``, ``_server_frames``) handles the common,
well-formed shapes of its pure-Python module and hands anything else to it, so results and
errors are those of the pure-Python code by construction (the differential tests in
``tests/protocol/test_codec_speedups.py`` and beside them check it). What they share is here:
:class:`Fallback` (raised inside a twin to hand over to the pure-Python path), filling
``__slots__`` objects, and the decoders of short strings, octets, field tables and a content
header with its body.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8

import types as _types

cdef object _decode_value = None  # values._decode_value (uncommon field-table tags)


class Fallback(Exception):
    """Inside a compiled twin: this input goes to the pure-Python path."""


cdef object _Fallback = Fallback


cdef void _set_decode_value(decode_value):
    """Give :func:`_table` the pure-Python value decoder (by ``_properties.bind_properties``)."""
    global _decode_value
    _decode_value = decode_value


# ------------------------------------------------------------ filling __slots__ objects
# The decoders build their results (method objects, BasicProperties, ContentMessage) the way
# the pure-Python decoders do, without calling ``__init__``: an instance is allocated by the
# class's ``tp_new`` and its slots are stored directly at the offsets of the classes' member
# descriptors (``__slots__``), found once per class. A class whose attributes are not plain
# object slots (``_Layout.ok`` false) is built by calling it instead.

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
        int flags

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member

cdef enum:
    T_OBJECT_EX = 16    # structmember.h: an object slot, AttributeError when unset
    MEMBER_READONLY = 1

cdef object _MEMBER_DESCR = _types.MemberDescriptorType


cdef class _Layout:
    """The slot offsets of ``names`` in instances of ``cls`` (``ok`` false: not plain slots;
    its fields are declared in ``_codec_core.pxd``)."""


cdef _Layout _layout(cls, tuple names):
    cdef _Layout lay = _Layout()
    cdef PyMemberDef* m
    cdef Py_ssize_t i
    lay.cls = cls
    lay.n = len(names)
    lay.ok = False
    if type(cls) is not type or lay.n > MAXF or cls.__new__ is not object.__new__:
        return lay
    for i in range(lay.n):
        d = getattr(cls, names[i], None)
        if type(d) is not _MEMBER_DESCR:
            return lay
        m = (<PyMemberDescrObject*><PyObject*>d).d_member
        if m.type != T_OBJECT_EX or m.flags & MEMBER_READONLY:
            return lay
        lay.off[i] = m.offset
    lay.ok = True
    return lay


cdef object _shortstr(const unsigned char* p, Py_ssize_t* pos, Py_ssize_t end):
    cdef Py_ssize_t i = pos[0]
    if i >= end:
        raise _Fallback
    cdef Py_ssize_t stop = i + 1 + p[i]
    if stop > end:
        raise _Fallback
    try:
        s = PyUnicode_DecodeUTF8(<const char*>p + i + 1, stop - i - 1, NULL)
    except UnicodeDecodeError:
        raise _Fallback
    pos[0] = stop
    return s


cdef object _octet(const unsigned char* p, Py_ssize_t* pos, Py_ssize_t end):
    cdef Py_ssize_t i = pos[0]
    if i >= end:
        raise _Fallback
    pos[0] = i + 1
    return p[i]


cdef dict _table(bytes buf, const unsigned char* p, Py_ssize_t* pos, Py_ssize_t end):
    cdef Py_ssize_t i = pos[0]
    cdef Py_ssize_t stop, kend, vend
    cdef unsigned char tag
    if i + 4 > end:
        raise _Fallback
    stop = i + 4 + <Py_ssize_t>_u32(p, i)
    if stop > end:
        raise _Fallback
    i += 4
    result = {}
    while i < stop:
        kend = i + 1 + p[i]
        if kend >= stop:
            raise _Fallback
        try:
            key = PyUnicode_DecodeUTF8(<const char*>p + i + 1, kend - i - 1, NULL)
        except UnicodeDecodeError:
            raise _Fallback
        tag = p[kend]
        if tag == 83:  # 'S'
            i = kend + 5
            if i > stop:
                raise _Fallback
            vend = i + <Py_ssize_t>_u32(p, kend + 1)
            if vend > stop:
                raise _Fallback
            try:
                result[key] = PyUnicode_DecodeUTF8(<const char*>p + i, vend - i, NULL)
            except UnicodeDecodeError:
                result[key] = PyBytes_FromStringAndSize(<const char*>p + i, vend - i)
            i = vend
        elif tag == 73:  # 'I'
            i = kend + 5
            if i > stop:
                raise _Fallback
            result[key] = <int>_u32(p, kend + 1)
        elif tag == 108 or tag == 76:  # 'l' / 'L': both signed int64 in RabbitMQ
            # (a stream delivery's x-stream-offset: one in every message of a stream read)
            i = kend + 9
            if i > stop:
                raise _Fallback
            result[key] = <long long>((<unsigned long long>_u32(p, kend + 1) << 32)
                                      | _u32(p, kend + 5))
        elif tag == 116:  # 't'
            i = kend + 2
            if i > stop:
                raise _Fallback
            result[key] = p[kend + 1] != 0
        else:  # the pure-Python value decoder (its errors: the fallback reports them)
            try:
                result[key], i = _decode_value(buf, kend, stop, 0)
            except Exception:
                raise _Fallback
    pos[0] = stop
    return result


cdef object _header_and_body(const unsigned char* p, Py_ssize_t h, Py_ssize_t n, int channel,
                             unsigned int class_id, Py_ssize_t fmax8, unsigned long long max_body,
                             Py_ssize_t* hend_out, Py_ssize_t* end_out):
    """The content header frame at ``p[h]`` and the single body frame after it (AMQP 0-9-1
    §4.2.6, §4.2.3): the body (bytes), with the header frame's frame-end offset in
    ``hend_out`` and the offset after both frames in ``end_out``. None unless both frames are
    complete in ``p[:n]`` and well-formed on ``channel`` (frame types, channel, class id,
    weight 0, header size 14..fmax8, body size <= max_body, one body frame <= fmax8,
    frame-end bytes): the callers' general paths then decide (and raise the typed errors).
    Shared by the decoder's content fast path and the broker's raw publish scan."""
    if n - h < 21:
        return None
    cdef Py_ssize_t hsize = <Py_ssize_t>_u32(p, h + 3)
    cdef Py_ssize_t hend = h + 7 + hsize
    cdef unsigned long long body_size = (<unsigned long long>_u32(p, h + 11) << 32) | _u32(p, h + 15)
    if (p[h] != 2 or ((<int>p[h + 1] << 8) | p[h + 2]) != channel or hend >= n
            or ((<unsigned int>p[h + 7] << 8) | p[h + 8]) != class_id
            or hsize < 14 or hsize > fmax8 or p[h + 9] or p[h + 10] or p[hend] != 206
            or body_size > max_body):
        return None
    cdef Py_ssize_t bend, blen = <Py_ssize_t>body_size
    if blen:
        bend = hend + 8 + blen
        if (bend >= n or blen > fmax8 or p[hend + 1] != 3
                or ((<int>p[hend + 2] << 8) | p[hend + 3]) != channel
                or <Py_ssize_t>_u32(p, hend + 4) != blen or p[bend] != 206):
            return None
        body = PyBytes_FromStringAndSize(<const char*>p + hend + 8, blen)
        end_out[0] = bend + 1
    else:
        body = b""
        end_out[0] = hend + 1
    hend_out[0] = hend
    return body

