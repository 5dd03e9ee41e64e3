"""Spark's read limits for one trigger, for both modes: what ``latestOffset(start, limit)``'s
``limit`` and the options mean, and the default limit each mode hands Spark.

PySpark 4.2+ passes a ``ReadLimit`` (:mod:`.compat`: ``ReadMaxRows``, ``ReadMaxBytes``,
``ReadMinRows``, ``ReadAllAvailable``); PySpark 4.0/4.1 pass none (the ``latestOffset()``
signature without ``start``), and the source enforces its own options. A Python source gives
Spark one built-in limit, not Kafka's composite (``KafkaMicroBatchStream.getDefaultReadLimit``):
the row cap when ``maxMessagesPerTrigger`` is set, else the queue mode's byte cap
(``maxBytesPerTrigger``, which it applies with every limit: it bounds the driver's memory), else
all available (the stream mode). The minimum (``minMessagesPerTrigger``) is enforced by the
source itself (:mod:`.pacing`). Pure, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .compat import ReadAllAvailable, ReadMaxBytes, ReadMaxRows, ReadMinRows

__all__ = ["Limits", "read_limits", "default_read_limit"]


@dataclass(frozen=True)
class Limits:
    """One trigger's limits: ``max_rows`` (None = no row cap), ``max_bytes`` (bytes of bodies;
    None = no byte cap: the stream mode) and ``min_rows`` (a ``ReadMinRows`` from Spark, else
    None)."""

    max_rows: int | None
    max_bytes: int | None = None
    min_rows: int | None = None


def read_limits(limit: Any, has_start: bool, max_messages_per_trigger: int | None,
                max_bytes_per_trigger: int | None = None) -> Limits:
    """The limits of a ``latestOffset(start, limit)`` call.

    ``ReadMaxRows`` caps rows; ``ReadMaxBytes`` caps bytes (the smaller of it and
    ``max_bytes_per_trigger``); ``ReadMinRows`` sets the minimum and keeps the option
    ``maxMessagesPerTrigger`` as the row cap; on the PySpark 4.0/4.1 signature (no ``start``,
    no ``limit``: ``has_start`` False) the option is the cap. Anything else
    (``ReadAllAvailable``) caps only bytes. ``max_bytes_per_trigger`` (the queue mode's
    ``maxBytesPerTrigger``) applies with every limit; None: no byte cap (the stream mode)."""
    max_bytes = max_bytes_per_trigger
    if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
        return Limits(int(limit.max_rows), max_bytes)
    if ReadMaxBytes is not None and isinstance(limit, ReadMaxBytes):
        cap = int(limit.max_bytes)
        return Limits(None, cap if max_bytes is None else min(max_bytes, cap))
    if ReadMinRows is not None and isinstance(limit, ReadMinRows):
        return Limits(max_messages_per_trigger, max_bytes, int(limit.min_rows))
    if limit is None and not has_start:
        return Limits(max_messages_per_trigger, max_bytes)  # 4.0/4.1: self-enforced cap
    return Limits(None, max_bytes)


def default_read_limit(max_messages_per_trigger: int | None,
                       max_bytes_per_trigger: int | None = None):
    """``getDefaultReadLimit``: ``ReadMaxRows(maxMessagesPerTrigger)`` when that option is set,
    else ``ReadMaxBytes(maxBytesPerTrigger)`` when the mode has a byte cap (the queue mode),
    else ``ReadAllAvailable()`` (PySpark 4.2+)."""
    if max_messages_per_trigger is not None:
        return ReadMaxRows(max_messages_per_trigger)
    if max_bytes_per_trigger is not None:
        return ReadMaxBytes(max_bytes_per_trigger)
    return ReadAllAvailable()
