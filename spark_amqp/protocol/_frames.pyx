# cython: language_level=3, boundscheck=False, wraparound=False, binding=True
"""The compiled twin of :mod:`.frames`: the decoder's fast paths for a content method's header
and body, for whole content messages and for runs of basic.deliver messages kept as frames
(``scan_deliveries``), and the common case of ``encode_message`` (Cython;
see ``_codec_core.pyx`` for how every twin hands unusual input to its pure-Python module).
:func:`bind_frames` gives it the ContentMessage class and the method classes (called once by
``frames.py``)."""

from cpython cimport array
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.string cimport memcpy

from ._codec_core cimport (_Layout, _alloc, _header_and_body, _layout, _put, _put_u32, _put_u64,
                           _set_slot, _skip_shortstr, _u32)
from ._methods cimport (W_BIT, W_LONG, W_LONGLONG, W_OCTET, W_SHORT, W_SHORTSTR, _decode_args,
                        _method_info, _MethodInfo)
from ._properties cimport _decode_props, decode_properties

import array as _pyarray

cdef object _CM = None  # frames.ContentMessage
cdef _Layout _CM_LAYOUT = None
cdef dict _INFOS = {}  # method index -> _MethodInfo of the content methods
cdef object _RAW = None  # frames.RawDeliveries
cdef object _py_scan = None  # the pure-Python scan_deliveries (limits beyond C integers)
cdef array.array _ENDS_TEMPLATE = _pyarray.array("I")


def bind_frames(content_message, methods, raw_deliveries, py_scan):
    """Give the twin the ContentMessage class, the method classes by index (``spec.METHODS``),
    the RawDeliveries class and the pure-Python ``scan_deliveries`` (its fallback for limits
    beyond C integers; called once by ``frames.py``)."""
    global _CM, _CM_LAYOUT, _INFOS, _RAW, _py_scan
    _RAW, _py_scan = raw_deliveries, py_scan
    _CM = content_message
    _CM_LAYOUT = _layout(content_message, ("channel", "method", "properties", "body"))
    infos = {}
    for index, cls in methods.items():
        if cls.has_content:
            info = _method_info(cls)
            if info is not None:
                infos[index] = info
    _INFOS = infos


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


# ------------------------------------------------------------------ raw delivery runs

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

