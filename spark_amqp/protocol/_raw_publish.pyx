# cython: language_level=3, boundscheck=False, wraparound=False, binding=True
"""The compiled twin of :mod:`.raw_publish`: the broker's scan of a basic.publish with its
content header and body, kept undecoded (Cython; see ``_codec_core.pyx`` for how every twin
hands unusual input to its pure-Python module). :func:`bind_raw_publish` gives it the
RawPublish class (called once by ``frames.py``)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8

from ._codec_core cimport _header_and_body

cdef object _RP = None  # raw_publish.RawPublish
cdef object _new = object.__new__


def bind_raw_publish(raw_publish):
    """Give the twin the RawPublish class (called once by frames.py)."""
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

