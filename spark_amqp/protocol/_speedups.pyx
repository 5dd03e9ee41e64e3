# cython: language_level=3, boundscheck=False, wraparound=False, binding=True
"""Optional compiled fast paths of the basic content properties codec (Cython).

Built by ``setup.py`` when Cython and a C compiler are available; ``properties.py`` uses it
unless ``SPARK_AMQP_PURE_PYTHON=1``. The pure-Python code in ``properties.py`` stays the
reference: every function here handles the common, well-formed shapes and hands anything
else (a bound that does not hold, invalid UTF-8, an uncommon type, any exception) to the
pure-Python function, which decodes it or raises the typed error with its reply code. So the
results and errors are those of the pure-Python code by construction; the differential tests
in ``tests/protocol/test_codec_speedups.py`` check it.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_AsUTF8String, PyUnicode_DecodeUTF8
from libc.string cimport memcmp, memcpy

cdef object _BP = None            # BasicProperties
cdef object _py_decode = None     # the pure-Python decode_properties (general)
cdef object _py_encode = None     # the pure-Python BasicProperties.encode
cdef object _decode_value = None  # values._decode_value (uncommon field-table tags)
cdef object _encode_value = None  # values._encode_value (uncommon field-table values)
cdef object _new = object.__new__
cdef tuple _BYTE = tuple([bytes((i,)) for i in range(256)])


# ------------------------------------------------------------ filling __slots__ objects
# The decoders build their results (method objects, BasicProperties, ContentMessage) the way
# the pure-Python decoders do, without calling ``__init__``: an instance is allocated by the
# class's ``tp_new`` and its slots are stored directly at the offsets of the classes' member
# descriptors (``__slots__``), found once per class. A class whose attributes are not plain
# object slots (``_Layout.ok`` false) is built by calling it instead.

from cpython.object cimport PyTypeObject
from cpython.ref cimport PyObject, Py_INCREF
import types as _types

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
    MAXF = 16           # the most fields a layout holds (AMQP methods have at most 8)
    T_OBJECT_EX = 16    # structmember.h: an object slot, AttributeError when unset
    MEMBER_READONLY = 1

cdef tuple _EMPTY = ()
cdef object _MEMBER_DESCR = _types.MemberDescriptorType


cdef class _Layout:
    """The slot offsets of ``names`` in instances of ``cls`` (``ok`` false: not plain slots)."""
    cdef object cls
    cdef Py_ssize_t n
    cdef Py_ssize_t off[MAXF]
    cdef bint ok


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


cdef inline object _alloc(_Layout lay):
    """A new instance of ``lay.cls`` with its slots unset (``object.__new__(cls)``)."""
    return (<PyTypeObject*>lay.cls).tp_new(<type>lay.cls, <PyObject*>_EMPTY, NULL)


cdef inline void _set_slot(object o, Py_ssize_t off, object v) noexcept:
    """Store ``v`` in the (unset) slot at ``off`` of the new object ``o``."""
    Py_INCREF(v)
    (<PyObject**>((<char*><PyObject*>o) + off))[0] = <PyObject*>v


cdef tuple _PROPERTY_NAMES = ("content_type", "content_encoding", "headers", "delivery_mode",
                              "priority", "correlation_id", "reply_to", "expiration",
                              "message_id", "timestamp", "type", "user_id", "app_id",
                              "cluster_id")
cdef _Layout _BP_LAYOUT = None
cdef _Layout _CM_LAYOUT = None


def setup(basic_properties, py_decode, py_encode, decode_value, encode_value):
    """Give the module the pure-Python class and fallbacks (called once by properties.py)."""
    global _BP, _py_decode, _py_encode, _decode_value, _encode_value, _BP_LAYOUT
    _BP, _py_decode, _py_encode = basic_properties, py_decode, py_encode
    _BP_LAYOUT = _layout(basic_properties, _PROPERTY_NAMES)
    _decode_value, _encode_value = decode_value, encode_value


class _Fallback(Exception):
    pass


cdef inline unsigned int _u32(const unsigned char* p, Py_ssize_t i) noexcept:
    return (<unsigned int>p[i] << 24) | (<unsigned int>p[i + 1] << 16) | (<unsigned int>p[i + 2] << 8) | p[i + 3]


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


cpdef object decode_properties(buf, Py_ssize_t off, Py_ssize_t end):
    """``properties.decode_properties`` (same arguments, result and errors), compiled."""
    if type(buf) is not bytes or off < 0 or end > PyBytes_GET_SIZE(buf) or off + 2 > end:
        return _py_decode(buf, off, end)
    return _decode_props(<bytes>buf, <const unsigned char*>PyBytes_AS_STRING(buf), off, end)


cdef object _decode_props(bytes buf, const unsigned char* p, Py_ssize_t off, Py_ssize_t end):
    """decode_properties once its arguments are checked (``p``: the bytes of ``buf``;
    ``0 <= off``, ``off + 2 <= end <= len(buf)``)."""
    cdef unsigned int flags = (<unsigned int>p[off] << 8) | p[off + 1]
    if flags & 3:
        return _py_decode(buf, off, end)
    cdef Py_ssize_t pos = off + 2
    content_type = content_encoding = headers = delivery_mode = priority = None
    correlation_id = reply_to = expiration = message_id = timestamp = type_ = None
    user_id = app_id = cluster_id = None
    try:
        if flags & 0x8000:
            content_type = _shortstr(p, &pos, end)
        if flags & 0x4000:
            content_encoding = _shortstr(p, &pos, end)
        if flags & 0x2000:
            headers = _table(<bytes>buf, p, &pos, end)
        if flags & 0x1000:
            delivery_mode = _octet(p, &pos, end)
        if flags & 0x0800:
            priority = _octet(p, &pos, end)
        if flags & 0x0400:
            correlation_id = _shortstr(p, &pos, end)
        if flags & 0x0200:
            reply_to = _shortstr(p, &pos, end)
        if flags & 0x0100:
            expiration = _shortstr(p, &pos, end)
        if flags & 0x0080:
            message_id = _shortstr(p, &pos, end)
        if flags & 0x0040:
            if pos + 8 > end:
                raise _Fallback
            timestamp = (<unsigned long long>_u32(p, pos) << 32) | _u32(p, pos + 4)
            pos += 8
        if flags & 0x0020:
            type_ = _shortstr(p, &pos, end)
        if flags & 0x0010:
            user_id = _shortstr(p, &pos, end)
        if flags & 0x0008:
            app_id = _shortstr(p, &pos, end)
        if flags & 0x0004:
            cluster_id = _shortstr(p, &pos, end)
    except _Fallback:
        return _py_decode(buf, off, end)
    if pos != end:
        return _py_decode(buf, off, end)
    cdef _Layout lay = _BP_LAYOUT
    cdef Py_ssize_t* o
    if lay is not None and lay.ok:
        pr = _alloc(lay)
        o = lay.off
        _set_slot(pr, o[0], content_type)
        _set_slot(pr, o[1], content_encoding)
        _set_slot(pr, o[2], headers)
        _set_slot(pr, o[3], delivery_mode)
        _set_slot(pr, o[4], priority)
        _set_slot(pr, o[5], correlation_id)
        _set_slot(pr, o[6], reply_to)
        _set_slot(pr, o[7], expiration)
        _set_slot(pr, o[8], message_id)
        _set_slot(pr, o[9], timestamp)
        _set_slot(pr, o[10], type_)
        _set_slot(pr, o[11], user_id)
        _set_slot(pr, o[12], app_id)
        _set_slot(pr, o[13], cluster_id)
        return pr
    return _BP(content_type, content_encoding, headers, delivery_mode, priority, correlation_id,
               reply_to, expiration, message_id, timestamp, type_, user_id, app_id, cluster_id)


cdef int _put_shortstr(list parts, v) except -1:
    if type(v) is not str:
        raise _Fallback
    b = PyUnicode_AsUTF8String(v)
    if PyBytes_GET_SIZE(b) > 255:
        raise _Fallback
    parts.append(_BYTE[PyBytes_GET_SIZE(b)])
    parts.append(b)
    return 0


cdef int _put_octet(list parts, v) except -1:
    if type(v) is not int or not 0 <= v <= 255:
        raise _Fallback
    parts.append(_BYTE[v])
    return 0


cdef bytes _pack_u32(unsigned int v):
    cdef unsigned char b[4]
    b[0] = v >> 24
    b[1] = (v >> 16) & 0xFF
    b[2] = (v >> 8) & 0xFF
    b[3] = v & 0xFF
    return PyBytes_FromStringAndSize(<char*>b, 4)


cdef bytes _pack_tag_u32(unsigned char tag, unsigned int v):
    cdef unsigned char b[5]
    b[0] = tag
    b[1] = v >> 24
    b[2] = (v >> 16) & 0xFF
    b[3] = (v >> 8) & 0xFF
    b[4] = v & 0xFF
    return PyBytes_FromStringAndSize(<char*>b, 5)


cdef int _put_table(list parts, table) except -1:
    cdef Py_ssize_t size = 0, ti
    cdef long long iv
    if type(table) is not dict:
        raise _Fallback
    if not table:
        parts.append(b"\x00\x00\x00\x00")
        return 0
    ti = len(parts)
    parts.append(b"")
    for key, value in (<dict>table).items():
        if type(key) is not str:
            raise _Fallback
        k = PyUnicode_AsUTF8String(key)
        if PyBytes_GET_SIZE(k) > 255:
            raise _Fallback
        parts.append(_BYTE[PyBytes_GET_SIZE(k)])
        parts.append(k)
        t = type(value)
        if t is str:
            b = PyUnicode_AsUTF8String(value)
            if PyBytes_GET_SIZE(b) > 0xFFFFFFFF:
                raise _Fallback
            parts.append(_pack_tag_u32(83, <unsigned int>PyBytes_GET_SIZE(b)))
            parts.append(b)
            size += 6 + PyBytes_GET_SIZE(k) + PyBytes_GET_SIZE(b)
        elif t is int and -2147483648 <= value <= 2147483647:
            iv = value
            parts.append(_pack_tag_u32(73, <unsigned int>(<int>iv)))
            size += 6 + PyBytes_GET_SIZE(k)
        else:  # the pure-Python value encoder (its errors: the fallback reports them)
            b = _encode_value(value, 0)
            parts.append(b)
            size += 1 + PyBytes_GET_SIZE(k) + PyBytes_GET_SIZE(b)
    if size > 0xFFFFFFFF:
        raise _Fallback
    parts[ti] = _pack_u32(<unsigned int>size)
    return 0


cdef inline object _get_slot(object o, Py_ssize_t off):
    """The object in the slot at ``off`` of ``o``, or None when the slot is unset."""
    cdef PyObject* v = (<PyObject**>((<char*><PyObject*>o) + off))[0]
    return None if v == NULL else <object>v


def encode_properties(self):
    """``BasicProperties.encode`` (same result and errors), compiled."""
    cdef _Layout lay = _BP_LAYOUT
    if type(self) is _BP and lay is not None and lay.ok:
        try:
            r = _encode_props_slots(self, lay.off)
        except Exception:  # e.g. a str with lone surrogates: the general path reports it
            r = None
        if r is not None:
            return r
    return _encode_props_attrs(self)


cdef enum:
    PROPS_BUF = 2048  # the largest property list the slot path encodes on the stack


cdef inline Py_ssize_t _buf_shortstr(unsigned char* d, Py_ssize_t a, object v) except -2:
    """Append the short string ``v`` (exact str) at ``d[a]``; the new end, or -1 when it
    does not fit (or is not a str of at most 255 UTF-8 bytes)."""
    cdef Py_ssize_t k
    cdef const char* s
    if type(v) is not str:
        return -1
    s = PyUnicode_AsUTF8AndSize(v, &k)
    if k > 255 or a + 1 + k > PROPS_BUF:
        return -1
    d[a] = <unsigned char>k
    memcpy(d + a + 1, s, k)
    return a + 1 + k


cdef object _encode_props_slots(self, Py_ssize_t* o):
    """encode_properties of a BasicProperties, its slots read directly and the list written
    into one buffer; None for anything but str short strings, octets and timestamps in
    range, and header tables of str keys with str or int32 values (then the general path
    encodes it, or raises its error), or when a slot is unset or the list is long."""
    cdef unsigned char d[PROPS_BUF]
    cdef Py_ssize_t a = 2, k, i, t0
    cdef unsigned int flags = 0, bit
    cdef PyObject* ptr
    cdef const char* s
    cdef long long iv
    cdef unsigned long long u
    for i in range(14):
        ptr = (<PyObject**>((<char*><PyObject*>self) + o[i]))[0]
        if ptr == NULL:
            return None
        if ptr == <PyObject*>None:
            continue
        v = <object>ptr
        bit = 0x8000 >> i
        flags |= bit
        if i == 2:  # headers: a field table (0-9-1 §4.2.5.5)
            if type(v) is not dict:
                return None
            if a + 4 > PROPS_BUF:
                return None
            t0 = a
            a += 4
            for key, value in (<dict>v).items():
                a = _buf_shortstr(d, a, key)
                if a < 0:
                    return None
                if type(value) is str:
                    s = PyUnicode_AsUTF8AndSize(value, &k)
                    if a + 5 + k > PROPS_BUF:
                        return None
                    d[a] = 83  # 'S'
                    _put_u32(d + a + 1, <unsigned long>k)
                    memcpy(d + a + 5, s, k)
                    a += 5 + k
                elif type(value) is int and -2147483648 <= value <= 2147483647:
                    if a + 5 > PROPS_BUF:
                        return None
                    iv = value
                    d[a] = 73  # 'I'
                    _put_u32(d + a + 1, <unsigned long>(<unsigned int>(<int>iv)))
                    a += 5
                else:
                    return None
            _put_u32(d + t0, <unsigned long>(a - t0 - 4))
        elif i == 3 or i == 4:  # delivery-mode, priority: octets
            if type(v) is not int or not 0 <= v <= 255 or a + 1 > PROPS_BUF:
                return None
            d[a] = <unsigned char>(<long>v)
            a += 1
        elif i == 9:  # timestamp: a long-long
            if type(v) is not int or not 0 <= v <= 0xFFFFFFFFFFFFFFFF or a + 8 > PROPS_BUF:
                return None
            u = v
            _put_u64(d + a, u)
            a += 8
        else:
            a = _buf_shortstr(d, a, v)
            if a < 0:
                return None
    d[0] = flags >> 8
    d[1] = flags & 0xFF
    return PyBytes_FromStringAndSize(<char*>d, a)


cdef object _encode_props_attrs(self):
    """encode_properties reading the properties as attributes (a subclass, say)."""
    cdef unsigned int flags = 0
    cdef list parts = [b""]
    try:
        v = self.content_type
        if v is not None:
            flags |= 0x8000
            _put_shortstr(parts, v)
        v = self.content_encoding
        if v is not None:
            flags |= 0x4000
            _put_shortstr(parts, v)
        v = self.headers
        if v is not None:
            flags |= 0x2000
            _put_table(parts, v)
        v = self.delivery_mode
        if v is not None:
            flags |= 0x1000
            _put_octet(parts, v)
        v = self.priority
        if v is not None:
            flags |= 0x0800
            _put_octet(parts, v)
        v = self.correlation_id
        if v is not None:
            flags |= 0x0400
            _put_shortstr(parts, v)
        v = self.reply_to
        if v is not None:
            flags |= 0x0200
            _put_shortstr(parts, v)
        v = self.expiration
        if v is not None:
            flags |= 0x0100
            _put_shortstr(parts, v)
        v = self.message_id
        if v is not None:
            flags |= 0x0080
            _put_shortstr(parts, v)
        v = self.timestamp
        if v is not None:
            flags |= 0x0040
            if type(v) is not int or not 0 <= v <= 0xFFFFFFFFFFFFFFFF:
                raise _Fallback
            parts.append(_pack_u32(<unsigned int>(v >> 32)) + _pack_u32(<unsigned int>(v & 0xFFFFFFFF)))
        v = self.type
        if v is not None:
            flags |= 0x0020
            _put_shortstr(parts, v)
        v = self.user_id
        if v is not None:
            flags |= 0x0010
            _put_shortstr(parts, v)
        v = self.app_id
        if v is not None:
            flags |= 0x0008
            _put_shortstr(parts, v)
        v = self.cluster_id
        if v is not None:
            flags |= 0x0004
            _put_shortstr(parts, v)
    except Exception:
        return _py_encode(self)
    parts[0] = _BYTE[flags >> 8] + _BYTE[flags & 0xFF]
    return b"".join(parts)


# ------------------------------------------------------------------------------ methods
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

cdef object _decode_table = None  # values._decode_table_at


def setup_methods(decode_table):
    """Give the module the pure-Python field-table decoder (called once by spec.py)."""
    global _decode_table
    _decode_table = decode_table


cdef class _MethodInfo:
    """What the compiled decoders need of a generated method class, read once."""
    cdef object cls
    cdef unsigned int class_id
    cdef bint has_content
    cdef Py_ssize_t nw
    cdef unsigned char wire[MAXF]
    cdef _Layout lay


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


# ------------------------------------------------------------------------------ frames
cdef object _CM = None  # frames.ContentMessage


def setup_frames(content_message):
    """Give the module the ContentMessage class (called once by frames.py)."""
    global _CM, _CM_LAYOUT
    _CM = content_message
    _CM_LAYOUT = _layout(content_message, ("channel", "method", "properties", "body"))


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


def content_after_method(bytes buf, Py_ssize_t pos, Py_ssize_t n, int channel, method,
                         unsigned int class_id, fmax8_limit, max_body_limit):
    """The decoder's fast path for a content method's header and body, compiled.

    ``buf[pos:n]`` follows the method frame of ``method`` (class ``class_id``) on
    ``channel``. When a well-formed content header frame and, unless the body is empty, a
    single body frame carrying the whole body are there, returns ``(ContentMessage, offset
    after them)``; otherwise ``None`` and the pure-Python path decides (the same checks as
    ``Decoder._parse``'s fast path; the properties decoder raises its typed errors).
    """
    cdef Py_ssize_t fmax8, max_body
    if n - pos < 21 or pos < 0 or n > PyBytes_GET_SIZE(buf):
        return None
    try:  # limits beyond a C integer (or not integers): the pure-Python path decides
        fmax8 = fmax8_limit
        max_body = max_body_limit
    except (OverflowError, TypeError):
        return None
    if max_body < 0:
        return None
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t hend, end
    body = _header_and_body(p, pos, n, channel, class_id, fmax8, <unsigned long long>max_body,
                            &hend, &end)
    if body is None:
        return None
    props = decode_properties(buf, pos + 19, hend)
    return _CM(channel, method, props, body), end


# ------------------------------------------------------------------ raw delivery runs

from cpython cimport array
from libc.string cimport memcpy
from cpython.mem cimport PyMem_Free, PyMem_Realloc
import array as _pyarray

cdef object _RAW = None  # raw_deliveries.RawDeliveries
cdef array.array _ENDS_TEMPLATE = _pyarray.array("I")


def setup_raw(raw_deliveries):
    """Give the module the RawDeliveries class (called once by frames.py)."""
    global _RAW
    _RAW = raw_deliveries


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


cdef Py_ssize_t _one_deliver(const unsigned char* p, Py_ssize_t pos, Py_ssize_t n, int channel,
                             Py_ssize_t fmax8, unsigned long long max_body,
                             unsigned long long* tag) noexcept:
    """End offset of one complete, well-formed basic.deliver message at ``p[pos:n]`` on
    ``channel`` (its tag in ``tag``), or -1: the checks of raw_deliveries._one."""
    if n - pos < 11:
        return -1
    cdef Py_ssize_t size = <Py_ssize_t>_u32(p, pos + 3)
    if (p[pos] != 1 or ((<int>p[pos + 1] << 8) | p[pos + 2]) != channel or size > fmax8
            or _u32(p, pos + 7) != ((60 << 16) | 60)):
        return -1
    cdef Py_ssize_t mend = pos + 7 + size
    if mend >= n or p[mend] != 206:
        return -1
    cdef Py_ssize_t i = _skip_shortstr(p, pos + 11, mend)   # consumer tag
    if i < 0 or i + 9 >= mend:
        return -1
    tag[0] = (<unsigned long long>_u32(p, i) << 32) | _u32(p, i + 4)
    i = _skip_shortstr(p, i + 9, mend)                     # exchange
    if i >= 0:
        i = _skip_shortstr(p, i, mend)                     # routing key
    if i != mend:
        return -1
    cdef Py_ssize_t h = mend + 1
    if n - h < 21:
        return -1
    cdef Py_ssize_t hsize = <Py_ssize_t>_u32(p, h + 3)
    cdef Py_ssize_t hend = h + 7 + hsize
    cdef unsigned long long body_size = (<unsigned long long>_u32(p, h + 11) << 32) | _u32(p, h + 15)
    if (p[h] != 2 or ((<int>p[h + 1] << 8) | p[h + 2]) != channel or hsize < 14
            or hsize > fmax8 or ((<unsigned int>p[h + 7] << 8) | p[h + 8]) != 60
            or p[h + 9] or p[h + 10] or body_size > max_body or hend >= n or p[hend] != 206):
        return -1
    cdef Py_ssize_t q = hend + 1
    cdef unsigned long long got = 0
    cdef Py_ssize_t bsize, bend
    while got < body_size:
        if n - q < 7:
            return -1
        bsize = <Py_ssize_t>_u32(p, q + 3)
        bend = q + 7 + bsize
        if (p[q] != 3 or ((<int>p[q + 1] << 8) | p[q + 2]) != channel or bsize > fmax8
                or got + <unsigned long long>bsize > body_size or bend >= n or p[bend] != 206):
            return -1
        got += <unsigned long long>bsize
        q = bend + 1
    return q


def scan_deliveries(bytes buf, Py_ssize_t pos, Py_ssize_t n, int channel, fmax8_limit,
                    max_body_limit):
    """raw_deliveries.scan_deliveries, compiled: the same run, or None, for the same input."""
    cdef Py_ssize_t fmax8
    cdef unsigned long long max_body
    if pos < 0 or n > PyBytes_GET_SIZE(buf) or pos > n:
        return None
    try:
        fmax8 = fmax8_limit
        if max_body_limit < 0:
            return None
        max_body = max_body_limit
    except (OverflowError, TypeError):
        return _py_scan(buf, pos, n, channel, fmax8_limit, max_body_limit)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t cap = 256, count = 0, q, at = pos
    cdef Py_ssize_t* ends = <Py_ssize_t*>PyMem_Realloc(NULL, cap * sizeof(Py_ssize_t))
    cdef Py_ssize_t* grown
    cdef unsigned long long tag = 0, first = 0, expect = 0
    cdef bint wrapped = False
    cdef array.array out
    if ends == NULL:
        raise MemoryError()
    try:
        while True:
            q = _one_deliver(p, at, n, channel, fmax8, max_body, &tag)
            if q < 0:
                break
            if count:
                if wrapped or tag != expect:
                    break
            else:
                first = tag
            wrapped = tag == 0xFFFFFFFFFFFFFFFF  # no tag follows 2**64-1 in a run
            expect = tag + 1
            if q - pos > 0xFFFFFFFF:
                break
            if count == cap:
                grown = <Py_ssize_t*>PyMem_Realloc(ends, 2 * cap * sizeof(Py_ssize_t))
                if grown == NULL:
                    raise MemoryError()
                ends = grown
                cap *= 2
            ends[count] = q - pos
            count += 1
            at = q
        if not count:
            return None
        out = array.clone(_ENDS_TEMPLATE, count, False)
        for q in range(count):
            out.data.as_uints[q] = <unsigned int>ends[q]
    finally:
        PyMem_Free(ends)
    return _RAW(channel, buf[pos:at], first, count, out), at


cdef object _py_scan = None  # the pure-Python scan_deliveries (limits beyond C integers)


def setup_raw_fallback(py_scan):
    """Give the module the pure-Python scanner (called once by frames.py)."""
    global _py_scan
    _py_scan = py_scan


cdef object _py_columns = None  # the pure-Python deliver_columns


def setup_columns(py_columns):
    """Give the module the pure-Python deliver_columns (called once by raw_deliveries.py)."""
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


# ------------------------------------------------------------------------ raw publishes

cdef object _RP = None  # raw_publish.RawPublish


def setup_publish(raw_publish):
    """Give the module the RawPublish class (called once by frames.py)."""
    global _RP
    _RP = raw_publish


def scan_publish(bytes buf, Py_ssize_t args, Py_ssize_t mend, Py_ssize_t n, int channel,
                 fmax8_limit, max_body_limit):
    """raw_publish.scan_publish, compiled: the same event, or None, for the same input."""
    cdef Py_ssize_t fmax8
    cdef unsigned long long max_body
    if args < 0 or mend < args or n > PyBytes_GET_SIZE(buf) or mend >= n:
        return None
    try:
        fmax8 = fmax8_limit
        if max_body_limit < 0:
            return None
        max_body = max_body_limit
    except (OverflowError, TypeError):
        return None  # limits beyond C integers: the general path decides
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t o = args + 2, o2, o3
    if o >= mend:
        return None
    o2 = o + 1 + p[o]
    if o2 >= mend:
        return None
    o3 = o2 + 1 + p[o2]
    if o3 + 1 != mend:
        return None
    cdef Py_ssize_t h = mend + 1, hend, end
    body = _header_and_body(p, h, n, channel, 60, fmax8, max_body, &hend, &end)
    if body is None:
        return None
    try:
        exchange = PyUnicode_DecodeUTF8(<const char*>p + o + 1, o2 - o - 1, NULL)
        routing_key = PyUnicode_DecodeUTF8(<const char*>p + o2 + 1, o3 - o2 - 1, NULL)
    except UnicodeDecodeError:
        return None
    cdef unsigned char bits = p[o3]
    ev = _new(_RP)
    ev.channel = channel
    ev.exchange = exchange
    ev.routing_key = routing_key
    ev.mandatory = True if bits & 1 else False
    ev.immediate = True if bits & 2 else False
    ev.enc = PyBytes_FromStringAndSize(<const char*>p + o, o3 - o)
    ev.properties = PyBytes_FromStringAndSize(<const char*>p + h + 19, hend - h - 19)
    ev.body = body
    return ev, end


# ------------------------------------------------------------------ the broker's deliveries

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize


cdef inline void _put_u64(unsigned char* d, unsigned long long v) noexcept:
    cdef int i
    for i in range(7, -1, -1):
        d[i] = v & 0xFF
        v >>= 8


cdef inline unsigned char* _grow(bytearray out, Py_ssize_t k) except NULL:
    """Room for ``k`` more bytes at the end of ``out`` (amortised growth); where they start."""
    cdef Py_ssize_t n = PyByteArray_GET_SIZE(out)
    if PyByteArray_Resize(out, n + k) < 0:
        return NULL
    return <unsigned char*>PyByteArray_AS_STRING(out) + n


cdef inline unsigned char* _put(unsigned char* d, bytes b) noexcept:
    cdef Py_ssize_t k = PyBytes_GET_SIZE(b)
    memcpy(d, PyBytes_AS_STRING(b), k)
    return d + k


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


# ------------------------------------------------------------- a whole content message

cdef dict _INFOS = {}  # method index -> _MethodInfo of the content methods


def setup_message(methods):
    """Give the module the method classes by index (called once by frames.py)."""
    global _INFOS
    infos = {}
    for index, cls in methods.items():
        if cls.has_content:
            info = _method_info(cls)
            if info is not None:
                infos[index] = info
    _INFOS = infos


cdef bint _message_limits(bytes buf, Py_ssize_t pos, Py_ssize_t n, fmax8_limit, max_body_limit,
                         Py_ssize_t* fmax8, Py_ssize_t* max_body):
    """The limits as C integers in ``fmax8``/``max_body``; False when the arguments are out of
    range or the limits beyond C integers (the pure-Python path then decides)."""
    if pos < 0 or n > PyBytes_GET_SIZE(buf):
        return False
    try:
        fmax8[0] = fmax8_limit
        max_body[0] = max_body_limit
    except (OverflowError, TypeError):
        return False
    return max_body[0] >= 0


def content_messages(bytes buf, Py_ssize_t pos, Py_ssize_t n, fmax8_limit, max_body_limit,
                     append):
    """``Decoder._parse``'s steps for whole content messages from ``buf[pos:n]`` on, compiled:
    each ``(ContentMessage, offset after it)`` of :func:`content_message_at` is passed to
    ``append(message)``, until one is not there; returns the offset after the last (``pos``
    if none). Exceptions from ``append`` propagate."""
    cdef Py_ssize_t fmax8 = 0, max_body = 0, nxt = 0
    if not _message_limits(buf, pos, n, fmax8_limit, max_body_limit, &fmax8, &max_body):
        return pos
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(buf)
    while True:
        ev = _message_at(buf, p, pos, n, fmax8, max_body, &nxt)
        if ev is None:
            return pos
        append(ev)
        pos = nxt


cpdef object content_message_at(bytes buf, Py_ssize_t pos, Py_ssize_t n, fmax8_limit,
                                max_body_limit):
    """``Decoder._parse``'s step for a whole content message at ``buf[pos:n]``, compiled: a
    method frame of a content method (basic.deliver, get-ok, return, publish) on a channel
    other than 0, its content header frame and a single body frame carrying the whole body
    (or none for an empty body), all complete and well formed. Returns ``(ContentMessage,
    offset after them)``; ``None`` for anything else, or on any error (the pure-Python loop
    then decodes the same bytes and raises its typed error)."""
    cdef Py_ssize_t fmax8 = 0, max_body = 0, nxt = 0
    if not _message_limits(buf, pos, n, fmax8_limit, max_body_limit, &fmax8, &max_body):
        return None
    ev = _message_at(buf, <const unsigned char*>PyBytes_AS_STRING(buf), pos, n, fmax8,
                     max_body, &nxt)
    return None if ev is None else (ev, nxt)


cdef object _message_at(bytes buf, const unsigned char* p, Py_ssize_t pos, Py_ssize_t n,
                        Py_ssize_t fmax8, Py_ssize_t max_body, Py_ssize_t* nxt):
    """content_message_at once its arguments are checked: the ContentMessage, the offset
    after it in ``nxt``; None when there is none (or on any error)."""
    if n - pos < 33 or p[pos] != 1:
        return None
    cdef int channel = (<int>p[pos + 1] << 8) | p[pos + 2]
    cdef Py_ssize_t size = <Py_ssize_t>_u32(p, pos + 3)
    if not channel or size < 4 or size > fmax8:
        return None
    cdef Py_ssize_t end = pos + 7 + size
    if end >= n or p[end] != 206:
        return None
    cdef _MethodInfo info = _INFOS.get(_u32(p, pos + 7))
    if info is None:  # not a content method (or an unknown one)
        return None
    cdef Py_ssize_t hend, bend
    cdef _Layout lay = _CM_LAYOUT
    try:
        body = _header_and_body(p, end + 1, n, channel, info.class_id, fmax8,
                                <unsigned long long>max_body, &hend, &bend)
        if body is None:
            return None
        method = _decode_args(info, buf, p, pos + 11, end)  # cls.decode, compiled (spec.py)
        props = _decode_props(buf, p, end + 20, hend)
    except Exception:
        return None
    if lay is not None and lay.ok:
        ev = _alloc(lay)
        _set_slot(ev, lay.off[0], channel)
        _set_slot(ev, lay.off[1], method)
        _set_slot(ev, lay.off[2], props)
        _set_slot(ev, lay.off[3], body)
    else:
        ev = _CM(channel, method, props, body)
    nxt[0] = bend
    return ev


# ------------------------------------------------------------- encoding a content message

from cpython.unicode cimport PyUnicode_AsUTF8AndSize


cdef inline void _put_u32(unsigned char* d, unsigned long v) noexcept:
    d[0] = (v >> 24) & 0xFF
    d[1] = (v >> 16) & 0xFF
    d[2] = (v >> 8) & 0xFF
    d[3] = v & 0xFF


def encode_content(int channel, method, bytes props, body, frame_max):
    """``frames.encode_message``'s common case, compiled: the method frame of ``method`` (its
    arguments bits, octets, shorts, longs, long-longs and short strings of exact types within
    range), the content header with ``props`` (encoded flags and list) and the body in one
    body frame (none when empty). Returns the bytes, or ``None`` for anything else (a body
    split over frames, a table or long string argument, a value out of range or of another
    type): the pure-Python encoder then encodes it or raises its typed error."""
    if type(body) is not bytes or channel < 0 or channel > 65535:
        return None
    cdef Py_ssize_t blen = PyBytes_GET_SIZE(<bytes>body), fmax
    try:
        fmax = frame_max
    except (OverflowError, TypeError):
        return None
    if fmax and blen > fmax - 8:
        return None
    cls = type(method)
    wire_attr = getattr(cls, "_wire", None)
    names_attr = getattr(cls, "__slots__", None)
    if type(wire_attr) is not tuple or type(names_attr) is not tuple:
        return None
    cdef tuple wire = wire_attr
    cdef tuple names = names_attr
    cdef unsigned char args[2048]
    cdef Py_ssize_t a = 0, k, i, nw = len(wire)
    cdef int code, bit = 8
    cdef const char* s
    cdef unsigned long long u
    if len(names) != nw:
        return None
    for i in range(nw):
        code = <int>wire[i]
        v = getattr(method, <str>names[i], None)
        if code == W_BIT:
            if v is not True and v is not False:
                return None
            if bit == 8:
                args[a] = 0
                a += 1
                bit = 0
            if v is True:
                args[a - 1] |= (1 << bit)
            bit += 1
            continue
        bit = 8
        if code == W_SHORTSTR:
            if type(v) is not str:
                return None
            s = PyUnicode_AsUTF8AndSize(v, &k)
            if k > 255:
                return None
            args[a] = <unsigned char>k
            memcpy(args + a + 1, s, k)
            a += 1 + k
            continue
        if type(v) is not int:
            return None
        try:
            u = v
        except OverflowError:
            return None
        if code == W_OCTET and u <= 0xFF:
            args[a] = <unsigned char>u
            a += 1
        elif code == W_SHORT and u <= 0xFFFF:
            args[a] = (u >> 8) & 0xFF
            args[a + 1] = u & 0xFF
            a += 2
        elif code == W_LONG and u <= 0xFFFFFFFF:
            _put_u32(args + a, <unsigned long>u)
            a += 4
        elif code == W_LONGLONG:
            _put_u64(args + a, u)
            a += 8
        else:
            return None
    cdef Py_ssize_t plen = PyBytes_GET_SIZE(props)
    cdef Py_ssize_t total = 12 + a + 19 + plen + 1 + (8 + blen if blen else 0)
    cdef unsigned int class_id = cls.CLASS_ID, method_id = cls.METHOD_ID
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef unsigned char* d = <unsigned char*>PyBytes_AS_STRING(out)
    d[0] = 1
    d[1] = (channel >> 8) & 0xFF
    d[2] = channel & 0xFF
    _put_u32(d + 3, <unsigned long>(4 + a))
    d[7] = (class_id >> 8) & 0xFF
    d[8] = class_id & 0xFF
    d[9] = (method_id >> 8) & 0xFF
    d[10] = method_id & 0xFF
    memcpy(d + 11, args, a)
    d += 11 + a
    d[0] = 0xCE
    d[1] = 2
    d[2] = (channel >> 8) & 0xFF
    d[3] = channel & 0xFF
    _put_u32(d + 4, <unsigned long>(12 + plen))
    d[8] = (class_id >> 8) & 0xFF
    d[9] = class_id & 0xFF
    d[10] = 0
    d[11] = 0
    _put_u64(d + 12, <unsigned long long>blen)
    d = _put(d + 20, props)
    if blen:
        d[0] = 0xCE
        d[1] = 3
        d[2] = (channel >> 8) & 0xFF
        d[3] = channel & 0xFF
        _put_u32(d + 4, <unsigned long>blen)
        d = _put(d + 8, <bytes>body)
    d[0] = 0xCE
    return out
