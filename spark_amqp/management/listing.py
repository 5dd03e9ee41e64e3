"""List query parameters as RabbitMQ's management API applies them (``rabbit_mgmt_util``).

- ``name`` (case-insensitive substring, or a regex with ``use_regex=true``, matched by RE2 in
  linear time: :func:`compile_name_regex`) filters by the ``name`` key - only paginated
  requests, as RabbitMQ (a plain list ignores it);
- ``sort=<key>`` (dotted path into nested objects, e.g. ``message_stats.publish``) with
  ``sort_reverse=true``; without ``sort`` lists are sorted by ``vhost`` then ``name``;
- ``page`` / ``page_size`` (default 100, at most 500) return
  ``{"filtered_count", "item_count", "items", "page", "page_count", "page_size",
  "total_count"}`` instead of a bare list;
- ``columns=a,b.c`` keeps only those (dotted) keys of each item.

Bad values raise :class:`ListError` with RabbitMQ's error and reason strings (status 400).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import re2

__all__ = ["ListError", "REGEX_TIME_LIMIT", "apply_list_params", "compile_name_regex", "prune_columns", "uses_regex"]

MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 100
#: longest ``name`` regex accepted (characters)
MAX_REGEX_LENGTH = 1000
#: RE2's memory budget for one compiled ``name`` regex (bytes); more is refused
REGEX_MAX_MEM = 1 << 20
#: seconds a regex-filtered list may take (it runs in a worker thread, see server.py)
REGEX_TIME_LIMIT = 10.0


def uses_regex(query: Mapping[str, str]) -> bool:
    """True when :func:`apply_list_params` would evaluate a user's regex for ``query``."""
    return bool(query.get("name")) and query.get("use_regex") == "true" and ("page" in query or "page_size" in query)


class ListError(ValueError):
    """A bad list parameter: ``error`` and ``reason`` as RabbitMQ's 400 answer."""

    def __init__(self, error: str, reason: str):
        super().__init__(reason)
        self.error = error
        self.reason = reason


def compile_name_regex(pattern: str):
    """The ``name`` filter's regex (``use_regex=true``), case-insensitive as RabbitMQ's.

    Compiled with RE2 (package ``google-re2``), whose matching time is linear in the length
    of the name, so no pattern can stall the broker's event loop, where the API runs (issue
    33: ``(?:.*){19}!`` took 11 s with Python's backtracking :mod:`re` and froze every AMQP
    connection meanwhile). RE2 has no backreferences or lookaround: such a pattern, a pattern
    longer than :data:`MAX_REGEX_LENGTH` characters or one that needs more than RE2's memory
    budget (:data:`REGEX_MAX_MEM` bytes) is refused like an invalid one, with RabbitMQ's 400
    "Pagination parameters are invalid" (its answer to a regex it cannot compile).

    Raises :class:`ListError`.
    """
    if len(pattern) > MAX_REGEX_LENGTH:
        raise ListError("bad_request", "Pagination parameters are invalid")
    opts = re2.Options()
    opts.case_sensitive = False
    opts.log_errors = False
    opts.max_mem = REGEX_MAX_MEM
    try:
        return re2.compile(pattern, opts)
    except re2.error:
        raise ListError("bad_request", "Pagination parameters are invalid") from None


def _get_path(item: Any, path: list[str]) -> Any:
    for p in path:
        if not isinstance(item, dict):
            return None
        item = item.get(p)
    return item


def _sort_key(v: Any) -> tuple:
    # None sorts first; numbers before strings; mixed types do not raise
    if v is None:
        return (0, 0, "")
    if isinstance(v, bool):
        return (1, int(v), "")
    if isinstance(v, (int, float)):
        return (1, v, "")
    return (2, 0, str(v))


def prune_columns(item: dict, columns: list[str]) -> dict:
    """Keep only ``columns`` (dotted paths) of ``item``, nested as in the original."""
    out: dict = {}
    for col in columns:
        path = col.split(".")
        src: Any = item
        dst = out
        # as RabbitMQ: the parents that exist are kept (as {}) even when the leaf is missing
        for i, p in enumerate(path):
            if not isinstance(src, dict) or p not in src:
                break
            src = src[p]
            if i == len(path) - 1:
                dst[p] = src
            elif isinstance(src, dict):
                dst = dst.setdefault(p, {})
            else:
                break
    return out


def _int_param(query: Mapping[str, str], key: str, default: int) -> int:
    raw = query.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ListError("bad_request", "Pagination parameters are invalid") from None


def apply_list_params(items: list[dict], query: Mapping[str, str]) -> Any:
    """Filter, sort, paginate and prune ``items`` by the request's ``query`` parameters;
    returns the JSON value to send (a list, or a page object). Raises :class:`ListError`."""
    total = len(items)
    paged = "page" in query or "page_size" in query
    name = query.get("name")
    if name and paged:
        if query.get("use_regex") == "true":
            rx = compile_name_regex(name)
            items = [i for i in items if rx.search(str(i.get("name", "")))]
        else:
            low = name.lower()
            items = [i for i in items if low in str(i.get("name", "")).lower()]
    sort = query.get("sort")
    reverse = query.get("sort_reverse") == "true"
    if sort:
        path = sort.split(".")
        items = sorted(items, key=lambda i: _sort_key(_get_path(i, path)), reverse=reverse)
    else:
        items = sorted(items, key=lambda i: (str(i.get("vhost", "")), str(i.get("name", ""))), reverse=reverse)
    columns = [c for c in (query.get("columns") or "").split(",") if c]
    if not paged:
        return [prune_columns(i, columns) for i in items] if columns else items
    page = _int_param(query, "page", 1)
    size = _int_param(query, "page_size", DEFAULT_PAGE_SIZE)
    if page < 1 or size < 1 or size > MAX_PAGE_SIZE:
        raise ListError("invalid_pagination_parameters",
                        f"Invalid pagination parameters: page number {page}, page size {size}")
    filtered = len(items)
    page_count = math.ceil(filtered / size)
    if page > 1 and page > page_count:
        raise ListError("page_out_of_range",
                        f"Page out of range, page: {page} page size: {size}, len: {filtered}")
    chunk = items[(page - 1) * size: page * size]
    if columns:
        chunk = [prune_columns(i, columns) for i in chunk]
    return {"filtered_count": filtered, "item_count": len(chunk), "items": chunk, "page": page,
            "page_count": page_count, "page_size": size, "total_count": total}
