# The compiled twin of properties.py (see _properties.pyx), for the twins that decode a
# content header inside a frame (_frames, _raw_deliveries).

cpdef object decode_properties(buf, Py_ssize_t off, Py_ssize_t end)
cdef object _decode_props(bytes buf, const unsigned char* p, Py_ssize_t off, Py_ssize_t end)
