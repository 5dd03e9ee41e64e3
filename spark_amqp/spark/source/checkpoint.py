"""What a query's checkpoint says is committed: the source's end offsets of the newest batch in
the commit log (read-only, local file systems only).

Why: on PySpark 4.0/4.1 the Python source runner learns of a batch's commit only through
``commit(end)``, which Spark's ``MicroBatchExecution`` calls for batch N when it constructs
batch N+1 (after writing offset log N+1). The last batch of a run has no batch N+1, and
``Trigger.AvailableNow`` on those versions is one batch: the Python source does not implement
``SupportsTriggerAvailableNow``, so ``MicroBatchExecution`` falls back to single-batch
execution (or, with ``spark.sql.streaming.triggerAvailableNowWrapper.enabled``, wraps it in
``AvailableNowDataStreamWrapper``, which calls ``latestOffset()`` once, in
``prepareForTriggerAvailableNow``). After the last batch's commit log the only
callback the source gets is ``stop()`` (``pyspark/sql/streaming/
python_streaming_source_runner.py``: ``finally: reader.stop()``). So ``stop()`` reads the
checkpoint, when the user gives its location to the source too, and acks what its newest
commit covers (PySpark 4.2+ acks it in the ``latestOffset(start, ...)`` that follows the batch).

Layout (Spark's ``OffsetSeqLog``/``CommitLog``, one file per batch id): ``<ckpt>/commits/<N>``
exists once batch N is committed; ``<ckpt>/offsets/<N>`` is ``v<version>``, a metadata JSON
line, then one line per source of the query (its end offset as JSON, or ``-``).
"""

from __future__ import annotations

import json
import logging
import os
from urllib.parse import urlparse

__all__ = ["local_checkpoint_dir", "last_committed_offsets"]

log = logging.getLogger(__name__)


def local_checkpoint_dir(location: str) -> str | None:
    """The local directory of a checkpoint location (a path or a ``file:`` URI); None for any
    other scheme (``s3a://``, ``hdfs://``, ``dbfs:/``: not readable without Hadoop)."""
    u = urlparse(location)
    if u.scheme in ("", "file"):
        return u.path if u.scheme else location
    if len(u.scheme) == 1:  # a Windows drive letter
        return location
    return None


def _batch_ids(folder: str) -> list[int]:
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(int(n) for n in names if n.isdigit())


def last_committed_offsets(location: str) -> list[dict]:
    """The JSON objects among the source offsets of the newest committed batch of the
    checkpoint at ``location`` (one per source of the query that wrote one; ``[]`` when no
    batch is committed or the location is not local). Raises ``OSError`` when a file cannot
    be read."""
    root = local_checkpoint_dir(location)
    if root is None:
        log.warning("amqp source: checkpointLocation %r is not a local path: the last batch of "
                    "the run is not acked (it is redelivered to the next run)", location)
        return []
    committed = _batch_ids(os.path.join(root, "commits"))
    if not committed:
        return []
    with open(os.path.join(root, "offsets", str(committed[-1])), encoding="utf-8") as f:
        lines = f.read().splitlines()
    out = []
    for line in lines[2:]:  # version, metadata, then one line per source
        try:
            value = json.loads(line)
        except ValueError:
            continue  # "-": a source with no offset
        if isinstance(value, str):  # an offset Spark stored as a JSON string
            try:
                value = json.loads(value)
            except ValueError:
                continue
        if isinstance(value, dict):
            out.append(value)
    return out
