"""PySpark version differences the source's readers meet, in one place.

PySpark 4.2 added admission control and ``Trigger.AvailableNow`` for Python sources
(``pyspark.sql.streaming.datasource``: ``ReadLimit``, ``ReadAllAvailable``, ``ReadMaxRows``,
``ReadMaxBytes``, ``ReadMinRows``, ``SupportsTriggerAvailableNow``). On PySpark 4.0/4.1 the
names below are None, and ``SupportsTriggerAvailableNow`` is an empty placeholder class so
that the readers' class hierarchy is the same on every version. ``ReadMinRows`` is looked up
on its own, so a build without it keeps the rest. Used by both modes (:mod:`.read_limits`, the
micro-batch streams).
"""

from __future__ import annotations

try:  # PySpark >= 4.2 (admission control, Trigger.AvailableNow)
    from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxBytes,
                                                  ReadMaxRows, SupportsTriggerAvailableNow)
except ImportError:  # pragma: no cover - PySpark 4.0/4.1
    ReadLimit = ReadAllAvailable = ReadMaxRows = ReadMaxBytes = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Placeholder so the class hierarchy is the same on PySpark < 4.2."""
try:  # PySpark >= 4.2 as well; looked up separately so a build without it keeps the rest
    from pyspark.sql.streaming.datasource import ReadMinRows
except ImportError:  # pragma: no cover
    ReadMinRows = None  # type: ignore[assignment,misc]

__all__ = ["ReadLimit", "ReadAllAvailable", "ReadMaxRows", "ReadMaxBytes", "ReadMinRows",
           "SupportsTriggerAvailableNow"]
