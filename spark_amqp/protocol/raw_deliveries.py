"""Raw delivery runs: consecutive ``basic.deliver`` messages kept as their wire frames.

A consumer that only stores messages and hands them on (the Spark source's driver ships them
to the executors) does not need them decoded where they are received. For a channel marked
raw (:attr:`.frames.Decoder.raw_channels`), the decoder cuts runs of complete, well-formed
``basic.deliver`` messages out of the received bytes with :func:`scan_deliveries` and returns
each run as one :class:`RawDeliveries` event: the frames' bytes, the count, the first delivery
tag and where each message ends. No per-message Python object is made; the messages are
decoded later, wherever they end up, by :meth:`RawDeliveries.decode` (or :func:`decode_frames`
on a slice of the bytes).

What the scan checks is the framing (AMQP 0-9-1 §4.2.3 and §4.2.6): frame types, channel,
sizes against frame-max, frame-end octets, the method index and argument layout of
basic.deliver (§1.8.3.9), the content header's class id (60), weight (0) and body size (at most
``max_body_size``), and body frames adding up to exactly that size. Delivery tags in a run are
consecutive (tag, tag + 1, ...): RabbitMQ and the embedded broker number a channel's
deliveries that way (RabbitMQ docs/confirms.md, "Delivery Identifiers"); a gap ends the run.
Anything the scan does not take - a message not complete in the buffer, a shortstr that is not
ASCII, any frame out of the expected shape - is left to the decoder's general path, which
decodes it or raises the typed error with the reply code, so the scan never changes which
errors a stream produces. The property flags and values are *not* checked here: a malformed
property list surfaces when the run is decoded (as :class:`~.errors.AMQPError`), not as a
connection error.

``scan_deliveries`` has a compiled twin (``_frames.scan_deliveries``), used when built; the
differential tests in ``tests/protocol/test_raw_deliveries.py`` check they agree.

Where the code is: :class:`RawDeliveries`, :func:`scan_deliveries` and :func:`decode_frames`
are defined in :mod:`.frames` (the decoder cuts runs and decodes them again, so they sit with
it) and re-exported here; this module adds the column decode (:func:`deliver_columns`) and
imports only downwards (frames, properties), never the other way.
"""

from __future__ import annotations

import sys
from array import array
from itertools import accumulate
from typing import Any

from .frames import DELIVER_INDEX, RawDeliveries, decode_frames, scan_deliveries
from .properties import SPEEDUPS, BasicProperties

__all__ = ["RawDeliveries", "scan_deliveries", "decode_frames", "deliver_columns",
           "DELIVER_INDEX"]

def deliver_columns(data: bytes, expect: int | None = None,
                    packed_bodies: bool = False) -> tuple[Any, list, list, list, list]:
    """Decode the frames of complete basic.deliver messages into columns, in order:
    ``(bodies, redelivered, exchanges, routing_keys, properties)``, each a list with one entry
    per message (bytes, bool, str, str, and a ``BasicProperties`` or None when the message has
    no properties at all).

    ``packed_bodies``: bodies come as ``(offsets, values)`` instead, the two buffers of an
    Arrow binary column (``offsets``: n + 1 int32 little-endian; ``values``: the bodies
    concatenated), unless they add up to more than 2 GiB - 1 (then the list).

    The executors' decode of what the driver shipped (a pure function of the bytes; the
    compiled twin ``_raw_deliveries.deliver_columns`` is used when built and gives the same
    result). ``expect`` and errors as :func:`decode_frames`; a content method other than
    basic.deliver raises ``ValueError``.
    """
    bodies, red, exchanges, keys, props = [], [], [], [], []
    for ev in decode_frames(data, expect):
        m = ev.method
        if m.INDEX != DELIVER_INDEX:
            raise ValueError(f"the frames hold {m.NAME}, expected basic.deliver")
        bodies.append(ev.body)
        red.append(m.redelivered)
        exchanges.append(m.exchange)
        keys.append(m.routing_key)
        p = ev.properties
        props.append(None if p == _EMPTY else p)
    if packed_bodies:
        return _pack_bodies(bodies), red, exchanges, keys, props
    return bodies, red, exchanges, keys, props


def _pack_bodies(bodies: list) -> Any:
    lengths = [0]
    lengths.extend(map(len, bodies))
    offsets = list(accumulate(lengths))
    if offsets[-1] > 0x7FFFFFFF:
        return bodies
    a = array("i", offsets)
    if a.itemsize != 4:  # pragma: no cover - every CPython platform has a 4-byte C int
        raise RuntimeError("array('i') is not 32-bit here")
    if sys.byteorder != "little":  # pragma: no cover - big-endian hosts
        a.byteswap()
    return a.tobytes(), b"".join(bodies)


_EMPTY = BasicProperties()


def _columns_fast():
    """The compiled :func:`deliver_columns` (``_raw_deliveries.deliver_columns``), or the
    pure-Python one."""
    if SPEEDUPS is None:
        return deliver_columns
    SPEEDUPS.bind_raw_deliveries(deliver_columns)
    return SPEEDUPS.deliver_columns


#: :func:`deliver_columns`, compiled when the speedups are built
deliver_columns_fast = _columns_fast()
