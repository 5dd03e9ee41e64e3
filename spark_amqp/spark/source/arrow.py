"""Column packing of deliveries (driver) and Arrow record batches (executor) for the source.

The driver turns a slice of buffered deliveries into :class:`PackedColumns`: plain Python lists
per column, with constant columns (same exchange/routing key for every message, absent
properties) collapsed to one value, so the partition pickles small and fast. The executor
turns that into ``pyarrow.RecordBatch``es with exactly :func:`schema.arrow_schema` (Spark 4.2+
rejects any other schema, nullability included; SPARK-55583), column-wise with no per-row
Python objects beyond the lists themselves.

Header values (AMQP field-table values, spark_amqp.protocol.values) become strings: ``str`` as
is; ``bytes`` decoded as UTF-8 (base64 when not valid UTF-8); ``bool`` -> ``true``/``false``;
numbers, ``Decimal`` -> their decimal text; ``datetime`` -> ISO 8601; void -> null; nested
tables/arrays -> JSON (same rules inside).
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
from dataclasses import dataclass
from decimal import Decimal
from operator import attrgetter
from typing import Any, Iterator, Sequence

from .. import schema as S

__all__ = ["PackedColumns", "Const", "BinaryBuffers", "pack_deliveries", "pack_columns", "to_record_batches",
           "render_header_value", "ARROW_BATCH_ROWS"]

#: Rows per yielded RecordBatch (zero-copy slices of one partition's batch).
ARROW_BATCH_ROWS = 16384

_PROPS_NO_HEADERS = tuple(c for c in S.PROPERTY_COLUMNS if c != S.HEADERS)
_PROP_GETTERS = {c: attrgetter(c) for c in S.PROPERTY_COLUMNS}
_get_body = attrgetter("body")
_get_exchange = attrgetter("exchange")
_get_routing_key = attrgetter("routing_key")
_get_redelivered = attrgetter("redelivered")
_get_properties = attrgetter("properties")


@dataclass(frozen=True)
class Const:
    """A column whose every row holds ``value`` (None = all null)."""

    value: Any


@dataclass(frozen=True)
class BinaryBuffers:
    """A binary column given as Arrow's two buffers: ``offsets`` (n + 1 int32 little-endian)
    and ``values`` (the values concatenated); no Python object per value."""

    offsets: bytes
    values: bytes


@dataclass
class PackedColumns:
    """One partition's rows as columns. ``n`` rows; offsets are ``start .. start + n - 1``.

    Each entry of ``columns`` (keyed by schema column name, without ``queue``/``offset``) is a
    list of ``n`` Python values or a :class:`Const`. ``headers`` rows are dicts (AMQP tables) or
    None, rendered to strings on the executor.

    ``offsets``: the rows' ``offset`` column when they are not consecutive (stream mode: the
    messages' ``x-stream-offset``, which may have gaps), a sequence of ``n`` ints; None means
    ``start .. start + n - 1``.
    """

    queue: str
    start: int
    n: int
    columns: dict
    offsets: Any = None


def _compact(col: list) -> Any:
    """Collapse a column to :class:`Const` when all values are equal (C-speed check)."""
    if not col:
        return Const(None)
    first = col[0]
    if first is None:
        return Const(None) if col.count(None) == len(col) else col
    if col.count(first) == len(col):
        return Const(first)
    return col


def _body(b: Any) -> Any:
    return b if isinstance(b, bytes) else bytes(b)


def pack_deliveries(queue: str, start: int, deliveries: Sequence[Any],
                    include_headers: bool) -> PackedColumns:
    """Pack ``deliveries`` (objects with ``body``, ``exchange``, ``routing_key``,
    ``redelivered``, ``properties`` like ``spark_amqp.client.Delivery``) into columns.

    ``start`` is the offset of ``deliveries[0]``. Without ``include_headers`` the ``headers``
    column is all null, but ``delivery_count`` is still read from ``x-delivery-count``.
    """
    # column lists via C-level attrgetter/map (100k client Deliveries: 95 -> 79 ms with empty
    # properties, 173 -> 121 ms with varied ones, vs list comprehensions)
    bodies = list(map(_get_body, deliveries))
    if bodies and not isinstance(bodies[0], bytes):
        bodies = [_body(b) for b in bodies]
    return pack_columns(queue, start, bodies, list(map(_get_redelivered, deliveries)),
                        list(map(_get_exchange, deliveries)),
                        list(map(_get_routing_key, deliveries)),
                        list(map(_get_properties, deliveries)), include_headers)


def pack_columns(queue: str, start: int, bodies: list, redelivered: list, exchanges: list,
                 routing_keys: list, props: list, include_headers: bool) -> PackedColumns:
    """Pack per-message lists (``bodies`` bytes, or ``(offsets, values)`` Arrow buffers (see
    :class:`BinaryBuffers`); ``redelivered`` bools; ``exchanges`` and
    ``routing_keys`` str; ``props`` properties objects or None for none) into columns, the
    shape ``spark_amqp.protocol.raw_deliveries.deliver_columns`` returns.
    ``include_headers``: as in :func:`pack_deliveries`."""
    if isinstance(bodies, tuple):
        bodies = BinaryBuffers(*bodies)
        n = len(redelivered)
    else:
        n = len(bodies)
    cols: dict[str, Any] = {
        S.BODY: bodies,
        S.EXCHANGE: _compact(exchanges),
        S.ROUTING_KEY: _compact(routing_keys),
        S.REDELIVERED: _compact([bool(r) for r in redelivered]),
    }
    absent = sum(1 for p in props if p is None)  # not props.count(None): it calls __eq__
    if absent == n:
        for c in S.PROPERTY_COLUMNS:
            cols[c] = Const(None)
        cols[S.DELIVERY_COUNT] = Const(None)
        return PackedColumns(queue, start, n, cols)
    if absent:  # mixed: some deliveries without properties
        for c in _PROPS_NO_HEADERS:
            cols[c] = _compact([getattr(p, c, None) if p is not None else None for p in props])
    else:
        for c in _PROPS_NO_HEADERS:
            try:
                cols[c] = _compact(list(map(_PROP_GETTERS[c], props)))
            except AttributeError:  # a properties object without this attribute: null
                cols[c] = _compact([getattr(p, c, None) for p in props])
    headers = _compact([(getattr(p, "headers", None) or None) if p is not None else None
                        for p in props])
    if isinstance(headers, Const):
        dc = (headers.value or {}).get("x-delivery-count") if headers.value else None
        cols[S.DELIVERY_COUNT] = Const(dc if isinstance(dc, int) else None)
    else:
        cols[S.DELIVERY_COUNT] = _compact([
            (h.get("x-delivery-count") if h else None) for h in headers])
    cols[S.HEADERS] = headers if include_headers else Const(None)
    return PackedColumns(queue, start, n, cols)


# ---------------------------------------------------------------------------- executor side

def _json_default(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return _bytes_text(bytes(v))
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, _dt.datetime):
        return v.isoformat()
    return str(v)


def _bytes_text(b: bytes) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(b).decode("ascii")


def render_header_value(v: Any) -> str | None:
    """Render one AMQP field value as the string stored in the ``headers`` map (see module)."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, Decimal)):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return _bytes_text(bytes(v))
    if isinstance(v, _dt.datetime):
        return v.isoformat()
    return json.dumps(v, default=_json_default, separators=(",", ":"), sort_keys=False)


def _header_rows(col: list) -> list:
    r = render_header_value
    return [None if h is None else [(k, r(v)) for k, v in h.items()] for h in col]


def _array(value: Any, n: int, typ, convert=None):
    import pyarrow as pa

    if isinstance(value, BinaryBuffers):
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(value.offsets),
                                              pa.py_buffer(value.values)])
    if isinstance(value, Const):
        v = value.value
        if v is None:
            return pa.nulls(n, typ)
        if convert is not None:
            v = convert([v])[0]
        return pa.repeat(pa.scalar(v, typ), n)
    if convert is not None:
        value = convert(value)
    return pa.array(value, typ)


def _ts_micros(col: list) -> list:
    out = []
    for t in col:
        if t is None:
            out.append(None)
        elif isinstance(t, _dt.datetime):
            if t.tzinfo is None:
                t = t.replace(tzinfo=_dt.timezone.utc)
            out.append(int(t.timestamp()) * 1_000_000)
        else:
            out.append(int(t) * 1_000_000)
    return out


def to_record_batches(p: PackedColumns, max_rows: int = ARROW_BATCH_ROWS,
                      columns: tuple | None = None) -> Iterator:
    """Yield ``pyarrow.RecordBatch``es of ``p`` with exactly :func:`schema.arrow_schema`
    ``(columns)``: every column, or only the ``(name, nullable)`` pairs a user schema selected
    (:func:`schema.check_user_schema`; the others are not built)."""
    import pyarrow as pa

    schema = S.arrow_schema(columns)
    n = p.n
    if n == 0:
        return
    c = p.columns
    arrays = []
    for f in schema:
        name = f.name
        if name == S.QUEUE:
            arrays.append(pa.repeat(pa.scalar(p.queue, pa.string()), n))
        elif name == S.OFFSET:
            if p.offsets is not None:
                arrays.append(pa.array(p.offsets, pa.int64()))
            else:
                import numpy as np

                arrays.append(pa.array(np.arange(p.start, p.start + n, dtype=np.int64)))
        elif name == S.HEADERS:
            arrays.append(_array(c[name], n, f.type, _header_rows))
        elif name == S.TIMESTAMP:
            v = c[name]
            if isinstance(v, Const):
                arrays.append(_array(Const(None if v.value is None else _ts_micros([v.value])[0]),
                                     n, pa.int64()).cast(f.type))
            else:
                arrays.append(pa.array(_ts_micros(v), pa.int64()).cast(f.type))
        else:
            arrays.append(_array(c[name], n, f.type))
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    for off in range(0, n, max_rows):
        yield batch.slice(off, max_rows)
