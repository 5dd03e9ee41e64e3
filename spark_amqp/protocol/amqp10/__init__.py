"""The AMQP 1.0 message format: the type system (:mod:`.types`), message sections
(:mod:`.message`) and RabbitMQ's conversions to and from 0-9-1 (:mod:`.convert`).

It is what a RabbitMQ stream stores and what the stream protocol carries (port 5552): the
client decodes delivered messages with :func:`decode_message`, the broker stores 0-9-1
messages converted with :mod:`.convert`. :func:`decode_message` / :func:`decode_value` are
the compiled ones of ``_speedups.pyx`` when built (the same results and errors: the
pure-Python ones are ``types.decode_value`` / ``message.decode_message``), unless
``SPARK_AMQP_PURE_PYTHON=1``.
"""

import os as _os

from . import message as _message
from . import types as _types
from .message import (BODY_DATA, BODY_SEQUENCE, BODY_VALUE, Header, Message, Properties,  # noqa: F401
                      encode_message, scan_sections)
from .types import (RABBIT_4, RABBIT_310, Array, Boolean, Byte, Char, Decimal32, Decimal64,  # noqa: F401
                    Decimal128, DecodeError, Described, EncodeError, Encoder, Float, Int, Short, Symbol,
                    Timestamp, UByte, UInt, ULong, UShort, encode_value)

__all__ = ["Message", "Header", "Properties", "encode_message", "decode_message", "decode_value",
           "encode_value", "scan_sections", "DecodeError", "EncodeError", "SPEEDUPS",
           "BODY_DATA", "BODY_VALUE", "BODY_SEQUENCE", "Symbol", "Timestamp", "UByte", "UShort",
           "UInt", "ULong", "Byte", "Short", "Int", "Float", "Char", "Array", "Described", "Boolean",
           "Decimal32", "Decimal64", "Decimal128", "Encoder", "RABBIT_4", "RABBIT_310"]


def _load_speedups(pure):
    """The compiled module bound to the pure-Python classes, or None (not built, or
    ``SPARK_AMQP_PURE_PYTHON=1``)."""
    if pure == "1":
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    _speedups.setup(_types, _message)
    return _speedups


SPEEDUPS = _load_speedups(_os.environ.get("SPARK_AMQP_PURE_PYTHON"))

if SPEEDUPS is not None:
    decode_message = SPEEDUPS.decode_message
    decode_value = SPEEDUPS.decode_value
else:
    decode_message = _message.decode_message
    decode_value = _types.decode_value
