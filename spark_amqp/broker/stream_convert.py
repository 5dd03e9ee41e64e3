"""A stream's messages in both protocols: 0-9-1 messages stored as AMQP 1.0, and read back.

A RabbitMQ stream stores AMQP 1.0 messages whichever protocol wrote them
(``rabbit_stream_queue:msg_to_iodata/1`` in 3.10, ``stream_message/1`` in 4.3): a message
published over 0-9-1 is converted when it is written, and each message is converted back for
a 0-9-1 consumer (headers, properties; the header ``x-stream-offset`` is added per delivery).
The conversions are the broker version's (``Behaviour.stream_conversion``;
``protocol/amqp10/convert.py``).

Both directions are cached, since a stream's messages mostly share their properties: on
write, the stored bytes before the data section by (exchange and routing key, properties
bytes); on read, the 0-9-1 properties by the stored bytes before the data section
(:func:`~spark_amqp.protocol.amqp10.chunk_view.chunk_to_091`, compiled when built). The
caches hold at most :data:`CACHE_MAX` entries each (cleared when full).

A message RabbitMQ fails to convert closes the client with 541 INTERNAL_ERROR, as RabbitMQ's
crashing channel does: :class:`~spark_amqp.protocol.errors.InternalError` is raised.
"""

from __future__ import annotations

import struct

from ..protocol.amqp10 import SPEEDUPS as _AMQP10_SPEEDUPS
from ..protocol.amqp10.chunk_view import chunk_to_091 as _py_chunk_to_091
from ..protocol.amqp10.convert import (ConversionError, data_entry, from_amqp091_v43, from_amqp091_v310,
                                       prefix_v43, prefix_v310, to_amqp091_v43, to_amqp091_v310)
from ..protocol.amqp10.types import RABBIT_4, RABBIT_310
from ..protocol.errors import InternalError
from .message import route_enc

__all__ = ["StreamConversions", "CACHE_MAX"]

#: entries per cache (write: by route and properties; read: by the bytes before the body)
CACHE_MAX = 4096
_U32 = struct.Struct(">I").pack
_SUB = struct.Struct(">BHII")       # sub-batch header: flags, records, uncompressed size, size

_chunk_to_091 = (_AMQP10_SPEEDUPS.chunk_to_091 if _AMQP10_SPEEDUPS is not None else _py_chunk_to_091)
_data_entry = (_AMQP10_SPEEDUPS.data_entry if _AMQP10_SPEEDUPS is not None else data_entry)


class StreamConversions:
    """The conversions of one stream (``queue_name``: the routing key a message without
    ``x-routing-key`` is delivered with) in the broker's version (``version``: "3.10" or
    "4.3")."""

    __slots__ = ("queue_name", "version", "_write", "_read", "_prefix", "_whole", "_back", "_short", "_gaps")

    def __init__(self, queue_name: str, version: str):
        self.queue_name = queue_name
        self.version = version
        v310 = version == "3.10"
        self._prefix = prefix_v310 if v310 else prefix_v43
        self._whole = from_amqp091_v310 if v310 else from_amqp091_v43
        self._back = to_amqp091_v310 if v310 else to_amqp091_v43
        self._short = (RABBIT_310 if v310 else RABBIT_4).short_max
        self._write: dict = {}
        self._read: dict = {}
        self._gaps = False

    # ------------------------------------------------------------------ 0-9-1 -> AMQP 1.0
    def entry(self, exchange: str, routing_key: str, enc: bytes, props_raw: bytes, body: bytes) -> bytes:
        """The osiris simple entry (size + AMQP 1.0 message) stored for a 0-9-1 message.
        Raises InternalError (541) where RabbitMQ's conversion crashes (a decimal header)."""
        key = (enc, props_raw)
        cache = self._write
        prefix = cache.get(key)
        if prefix is not None:
            return _data_entry(prefix, body, self._short)
        try:
            if prefix is None:
                prefix = self._prefix(exchange, routing_key, props_raw)
                if prefix is None:          # 4.3: a body of type amqp-1.0 or a footer
                    msg = self._whole(exchange, routing_key, props_raw, body)
                    return _U32(len(msg)) + msg
                if len(cache) >= CACHE_MAX:
                    cache.clear()
                cache[key] = prefix
        except ConversionError as e:
            raise InternalError(f"cannot store the message in stream '{self.queue_name}' as AMQP 1.0, as "
                                f"RabbitMQ {self.version} cannot: {e}", 60, 40) from None
        return _data_entry(prefix, body, self._short)

    def message(self, exchange: str, routing_key: str, props_raw: bytes, body: bytes) -> bytes:
        """The AMQP 1.0 message stored for a 0-9-1 message (:meth:`entry` without the size)."""
        return self.entry(exchange, routing_key, route_enc(exchange, routing_key), props_raw, body)[4:]

    # ------------------------------------------------------------------ AMQP 1.0 -> 0-9-1
    def view(self, data: bytes, chunk_id: int) -> list:
        """The 0-9-1 view of a user chunk's data: runs ``(first offset, [(enc, props_raw,
        body), ...])`` of consecutive offsets (a compressed sub-batch, which only stream-
        protocol clients can read, is a gap, as in RabbitMQ 4.3). Raises InternalError (541)
        for a message the version cannot convert (3.10: anything but annotations,
        properties, application properties and data)."""
        cache = self._read
        if len(cache) >= CACHE_MAX:
            cache.clear()
        self._gaps = False
        try:
            out = _chunk_to_091(data, 0, len(data), cache, self._convert_prefix, self._convert_whole)
        except ConversionError as e:
            raise InternalError(f"cannot deliver a message of stream '{self.queue_name}' over AMQP 0-9-1, as "
                                f"RabbitMQ {self.version} cannot: {e}", 60, 20) from None
        if not self._gaps:
            return [(chunk_id, out)] if out else []
        runs = []
        start = None
        for i, e in enumerate(out):
            if e is None:
                if start is not None:
                    runs.append((chunk_id + start, out[start:i]))
                    start = None
            elif start is None:
                start = i
        if start is not None:
            runs.append((chunk_id + start, out[start:]))
        return runs

    def _convert_prefix(self, prefix: bytes, message: bytes) -> tuple:
        ex, rk, props, _ = self._back(message, self.queue_name)
        return route_enc(ex, rk), props

    def _convert_whole(self, entry: bytes, sub_batch: bool) -> list:
        if not sub_batch:
            ex, rk, props, body = self._back(entry, self.queue_name)
            return [(route_enc(ex, rk), props, body)]
        flags, records, _, size = _SUB.unpack_from(entry, 0)
        if (flags >> 4) & 0x7:
            self._gaps = True
            return [None] * records          # compressed: stream-protocol clients only
        out = []
        p, end = _SUB.size, _SUB.size + size
        for _ in range(records):
            if p + 4 > end:
                raise ConversionError("a sub-batch holds fewer records than it says")
            n = struct.unpack_from(">I", entry, p)[0] & 0x7FFFFFFF
            ex, rk, props, body = self._back(entry[p + 4:p + 4 + n], self.queue_name)
            out.append((route_enc(ex, rk), props, body))
            p += 4 + n
        return out
