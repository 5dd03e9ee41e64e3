"""How far an ``amqp`` query is behind its queues or streams, from its progress (no I/O).

Spark's Kafka source reports ``minOffsetsBehindLatest`` / ``maxOffsetsBehindLatest`` /
``avgOffsetsBehindLatest`` as custom metrics of its progress (spark-sql-kafka,
``KafkaMicroBatchStream.metrics``); a Python data source has no custom-metrics hook, but its
``reportLatestOffset`` lands in each source's progress as ``latestOffset``, beside the batch's
``endOffset``. Both modes of the source report it: stream mode the streams' tails (offsets
``{"streams": {stream: next offset}}``), queue mode each queue's deliveries so far plus its
depth (``{"queues": {queue: n}, "session": id}``). :func:`offsets_behind_latest` turns a
progress into Kafka's three figures, per source.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["offsets_behind_latest"]


def _as_dict(x: Any) -> Any:
    if isinstance(x, (str, bytes)):
        try:
            return json.loads(x)
        except ValueError:
            return None
    return x


def _progress_dict(progress: Any) -> dict:
    """A progress as a dict: a ``pyspark.sql.streaming.listener.StreamingQueryProgress``
    (its ``json``), a JSON string, or a dict (``query.lastProgress`` on older PySpark)."""
    text = getattr(progress, "json", None)
    if isinstance(text, str):
        return json.loads(text)
    d = _as_dict(progress)
    if isinstance(d, dict):
        return d
    if hasattr(progress, "sources"):   # object with attributes only
        return {"sources": [{"endOffset": getattr(s, "endOffset", None),
                             "latestOffset": getattr(s, "latestOffset", None),
                             "description": getattr(s, "description", "")}
                            for s in progress.sources]}
    raise TypeError(f"not a StreamingQueryProgress, its JSON or a dict: {type(progress)!r}")


def _behind(end: Any, latest: Any) -> dict[str, int] | None:
    end, latest = _as_dict(end), _as_dict(latest)
    if not isinstance(end, dict) or not isinstance(latest, dict):
        return None
    for key in ("queues", "streams"):
        if isinstance(end.get(key), dict) and isinstance(latest.get(key), dict):
            break
    else:
        return None
    if key == "queues" and end.get("session") != latest.get("session"):
        return None   # counted in different sessions (a reconnect): not comparable
    e, l = end[key], latest[key]
    return {name: max(0, int(l[name]) - int(e.get(name, 0))) for name in sorted(l)}


def offsets_behind_latest(progress: Any) -> list[dict | None]:
    """Kafka's lag figures for each source of a streaming query progress.

    ``progress``: ``StreamingQueryProgress`` (``query.lastProgress``, or a
    ``StreamingQueryListener``'s ``event.progress``), its JSON string, or a dict.
    Returns a list parallel to ``progress["sources"]``: for an ``amqp`` source whose
    ``latestOffset`` and ``endOffset`` are both known, ``{"minOffsetsBehindLatest": int,
    "maxOffsetsBehindLatest": int, "avgOffsetsBehindLatest": float, "offsetsBehindLatest":
    {queue or stream: int}}`` (messages between the batch's end and the newest message, never
    below 0); else None (another source, no ``latestOffset`` reported yet, or a queue-mode
    offset of an earlier connection). Queue mode counts ready messages, not deliveries
    another consumer holds unacked. Raises ``TypeError`` for anything else.
    """
    out: list[dict | None] = []
    for src in _progress_dict(progress).get("sources") or []:
        per = _behind(src.get("endOffset"), src.get("latestOffset"))
        if not per:
            out.append(None)
            continue
        values = list(per.values())
        out.append({"minOffsetsBehindLatest": min(values),
                    "maxOffsetsBehindLatest": max(values),
                    "avgOffsetsBehindLatest": sum(values) / len(values),
                    "offsetsBehindLatest": per})
    return out
