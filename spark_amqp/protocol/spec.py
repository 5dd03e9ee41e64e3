"""AMQP 0-9-1 method classes, generated from one machine-readable table.

The table is ``amqp0-9-1.tsv`` beside this file: one row per method with class/method ids,
synchronous flag, response methods, fields with wire types, and whether the method carries
content (see :mod:`.codegen`, which generates the classes into the checked-in module
:mod:`.methods`; importing them compiles nothing). This module is their index.

Every class has ``__slots__`` for its fields, a typed ``__init__``, an ``encode()`` returning
the method payload (class id, method id, arguments), ``frame_parts(channel)`` returning the
whole method frame but its frame-end octet as a tuple of bytes, ``message_bytes(...)`` and a
``decode(buf, off, end)`` classmethod (the compiled one of ``_methods.pyx`` when built, see
:func:`_install_decoders`). Bit packing follows the 0-9-1 spec §4.2.5.2.

Access the classes as ``spec.Basic.Publish``, ``spec.Connection.Tune`` or by index through
:data:`METHODS` (``(class_id << 16) | method_id``).
"""

from __future__ import annotations

import os

from . import values as _values
from .method_base import AmqpClass, Method
from .methods import (ALL_CLASSES, ALL_METHODS, Access, Basic, Channel, Confirm, Connection,
                      Exchange, Queue, Tx)
from .properties import SPEEDUPS

__all__ = ["Method", "AmqpClass", "METHODS", "METHODS_BY_NAME", "CLASSES", "CLASS_IDS",
           "method_class", "SPEC_TABLE_PATH", "Connection", "Channel", "Access", "Exchange",
           "Queue", "Basic", "Confirm", "Tx"]

SPEC_TABLE_PATH = os.path.join(os.path.dirname(__file__), "amqp0-9-1.tsv")

#: method class by ``(class_id << 16) | method_id``
METHODS: dict[int, type[Method]] = {cls.INDEX: cls for cls in ALL_METHODS}
#: method class by ``"class.method"`` name, e.g. ``"basic.publish"``
METHODS_BY_NAME: dict[str, type[Method]] = {cls.NAME: cls for cls in ALL_METHODS}
#: AMQP class (the namespace of its methods) by name, e.g. ``"basic"``
CLASSES: dict[str, type[AmqpClass]] = {ns.NAME: ns for ns in ALL_CLASSES}
_CLASSES = CLASSES
#: AMQP class name by class id
CLASS_IDS: dict[int, str] = {ns.CLASS_ID: ns.NAME for ns in ALL_CLASSES}


_WIRE_CODES = {"bit": 0, "octet": 1, "short": 2, "long": 3, "longlong": 4, "timestamp": 4,
               "shortstr": 5, "longstr": 6, "table": 7}


def _install_decoders(speedups) -> None:
    """Make every method class's ``decode`` the compiled one of ``speedups`` (the same
    results and errors, see ``_methods.pyx``), or the generated pure-Python one when it is
    ``None``. The pure-Python one stays as ``_py_decode``, the compiled one's fallback."""
    for cls in METHODS.values():
        if "_py_decode" not in cls.__dict__:
            cls._py_decode = cls.__dict__["decode"]
            cls._wire = tuple(_WIRE_CODES[t] for t in cls.field_types)
        cls.decode = cls._py_decode if speedups is None else classmethod(speedups.decode_method)
    if speedups is not None:
        speedups.bind_methods(_values._decode_table_at)


_install_decoders(SPEEDUPS)


def method_class(class_id: int, method_id: int) -> type[Method]:
    """Look up a method class by ids; raises KeyError when unknown.

    The frame decoder turns an unknown id into the right typed error.
    """
    return METHODS[(class_id << 16) | method_id]
