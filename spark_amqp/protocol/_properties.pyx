# cython: language_level=3, boundscheck=False, wraparound=False, binding=True
"""The compiled twin of :mod:`.properties`: the basic content properties' decoder and encoder
(Cython; see ``_codec_core.pyx`` for how every twin hands unusual input to its pure-Python
module, which stays the reference). :func:`bind_properties` gives it the pure-Python class and
fallbacks (called once by ``properties.py``)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_AsUTF8String
from libc.string cimport memcpy

from ._codec_core cimport (_Layout, _alloc, _layout, _octet, _put_u32, _put_u64, _set_decode_value,
                           _set_slot, _shortstr, _table, _u32)

from ._codec_core import Fallback as _Fallback

cdef object _BP = None            # BasicProperties
cdef object _py_decode = None     # the pure-Python decode_properties (general)
cdef object _py_encode = None     # the pure-Python BasicProperties.encode
cdef object _encode_value = None  # values._encode_value (uncommon field-table values)
cdef tuple _BYTE = tuple([bytes((i,)) for i in range(256)])
cdef tuple _PROPERTY_NAMES = ("content_type", "content_encoding", "headers", "delivery_mode",
                              "priority", "correlation_id", "reply_to", "expiration",
                              "message_id", "timestamp", "type", "user_id", "app_id",
                              "cluster_id")
cdef _Layout _BP_LAYOUT = None


def bind_properties(basic_properties, py_decode, py_encode, decode_value, encode_value):
    """Give the twin the pure-Python class, its decoder and encoder (the fallbacks) and the
    field-value codec of ``values.py`` (uncommon tags; called once by ``properties.py``)."""
    global _BP, _py_decode, _py_encode, _encode_value, _BP_LAYOUT
    _BP, _py_decode, _py_encode = basic_properties, py_decode, py_encode
    _BP_LAYOUT = _layout(basic_properties, _PROPERTY_NAMES)
    _set_decode_value(decode_value)
    _encode_value = encode_value


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

