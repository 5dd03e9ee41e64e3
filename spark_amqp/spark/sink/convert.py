"""Input columns of the ``amqp`` sink: schema validation (driver) and Arrow → messages (executor).

Column names are the source's (:mod:`spark_amqp.spark.schema`), so a stream read with the
``amqp`` source can be written back unchanged:

================  ==========================================  ==================================
column            accepted Spark types                         becomes
================  ==========================================  ==================================
body (required)   binary, string (UTF-8 encoded)               message body; null fails the task
exchange          string                                       ``basic.publish`` exchange
routing_key       string                                       ``basic.publish`` routing-key
headers           map<string,string>, map<string,binary>       property headers (a table; values
                                                               as longstr, null value → void)
delivery_mode     tinyint, smallint, int, bigint               1 or 2; null → option/default 2
priority          tinyint, smallint, int, bigint               0-255
timestamp         timestamp, timestamp_ntz, bigint, int        POSIX seconds (sub-second part
                                                               truncated; AMQP §basic timestamp;
                                                               timestamp_ntz read as UTC;
                                                               integers are seconds)
content_type, content_encoding, correlation_id, reply_to, expiration, message_id, type,
user_id, app_id:  string                                       the property of the same name
partitionKey      string (only with ``superStream``)            the key that picks the super
                                                               stream's partition (not published)
publishing_id     tinyint, smallint, int, bigint (only with    the row's publishing id (not
                  ``producerName``)                            published; :mod:`.stream_publish`)
stream_filter_    string                                       the header ``x-stream-filter-value``
value                                                          (stream filtering, RabbitMQ 3.13+;
                                                               null: no filter value)
================  ==========================================  ==================================

``stream_filter_value``: the value a stream consumer's ``x-stream-filter`` (the source's
option ``streamFilter``) selects by; it is added to the row's ``headers`` (and wins over a
``x-stream-filter-value`` key there). RabbitMQ 3.13+ builds each chunk's Bloom filter from
it (docs "Stream Filtering"); older brokers store it as a plain header.

``partitionKey``: with ``superStream``, each row goes to the partition RabbitMQ's stream clients
pick for this key (:mod:`spark_amqp.spark.sink.super_stream`: MurmurHash3 x86 32-bit, seed 104729,
modulo the partition count); a null value, or no such column, uses the row's ``routing_key``
(``""`` if none). As the stream clients' routing-key extractor, it lets rows be partitioned by
an entity id while ``routing_key`` keeps its own meaning. Without ``superStream`` the column
is rejected (it would silently do nothing).

The source-only columns (``queue``, ``redelivered``, ``offset``, ``delivery_count``) are
accepted and ignored. **Any other column is rejected** at ``save()``/``start()`` (the error
lists it and the accepted names): a typo such as ``routingKey`` as a column would otherwise
silently publish with the default routing key. Select or drop columns before writing.
Nulls in optional columns mean "property absent" (``exchange``/``routing_key``: ``""``).
Short-string values over 255 UTF-8 bytes fail the task naming the column (AMQP shortstr).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Optional

from ...protocol.errors import AMQPSyntaxError
from ...protocol.properties import encode_delivery_mode_and_ids
from .. import schema as S
from ..errors import SinkDataError, SinkSchemaError

__all__ = ["SinkSchemaError", "SinkDataError", "SinkPlan", "plan_columns", "SINK_COLUMNS",
           "IGNORED_SOURCE_COLUMNS", "PARTITION_KEY", "PUBLISHING_ID", "STREAM_FILTER_VALUE", "batch_to_messages"]

log = logging.getLogger(__name__)


_STRING_PROPS = (S.CONTENT_TYPE, S.CONTENT_ENCODING, S.CORRELATION_ID, S.REPLY_TO,
                 S.EXPIRATION, S.MESSAGE_ID, S.TYPE, S.USER_ID, S.APP_ID)
_INT_TYPES = ("tinyint", "smallint", "int", "bigint")
#: accepted Spark simple type names per sink column
SINK_COLUMNS: dict[str, tuple[str, ...]] = {
    S.BODY: ("binary", "string"),
    S.EXCHANGE: ("string",),
    S.ROUTING_KEY: ("string",),
    S.HEADERS: ("map<string,string>", "map<string,binary>"),
    S.DELIVERY_MODE: _INT_TYPES,
    S.PRIORITY: _INT_TYPES,
    S.TIMESTAMP: ("timestamp", "timestamp_ntz", "bigint", "int"),
    **{c: ("string",) for c in _STRING_PROPS},
    "stream_filter_value": ("string",),
}
#: sink-only column: each message's header ``x-stream-filter-value`` (stream filtering)
STREAM_FILTER_VALUE = "stream_filter_value"
FILTER_VALUE_HEADER = "x-stream-filter-value"
#: source columns that have no meaning for a publish: accepted and ignored
IGNORED_SOURCE_COLUMNS = tuple(c for c in S.COLUMNS if c not in SINK_COLUMNS)
#: sink-only column: the super stream partition key (option ``superStream``)
PARTITION_KEY = "partitionKey"
#: sink-only column: the publishing id of each row (option ``producerName``, stream protocol)
PUBLISHING_ID = "publishing_id"

# BasicProperties positional order (spark_amqp.protocol.properties.PROPERTIES), minus cluster_id
_PROP_ORDER = (S.CONTENT_TYPE, S.CONTENT_ENCODING, S.HEADERS, S.DELIVERY_MODE, S.PRIORITY,
               S.CORRELATION_ID, S.REPLY_TO, S.EXPIRATION, S.MESSAGE_ID, S.TIMESTAMP, S.TYPE,
               S.USER_ID, S.APP_ID)


@dataclass(frozen=True)
class SinkPlan:
    """What to read from each Arrow batch; built on the driver, pickled to the executors.

    Attributes:
        columns: sink column names present in the input (subset of :data:`SINK_COLUMNS`).
        body_is_string: the body column is a string (encode as UTF-8).
        exchange / routing_key: constant from the options, or None to use the column
            (absent column → ``""``).
        delivery_mode: constant from the option (overrides the column), or None.
        mandatory: the ``mandatory`` publish flag.
        message_id: ``auto`` | ``column`` | ``deterministic`` | ``none``.
        partition_key: the input has a ``partitionKey`` column (``superStream`` only): its
            value, where not null, replaces the routing key in the tuples of
            :func:`batch_to_messages`, which the publisher hashes to pick the partition.
        publishing_id: the input has a ``publishing_id`` column (``producerName`` only): the
            rows' publishing ids (:mod:`.stream_publish`), not published as a property.
    """

    columns: tuple[str, ...]
    body_is_string: bool
    exchange: Optional[str]
    routing_key: Optional[str]
    delivery_mode: Optional[int]
    mandatory: bool
    message_id: str
    partition_key: bool = False
    publishing_id: bool = False


def plan_columns(schema, options) -> SinkPlan:
    """Validate the input ``schema`` (a ``StructType``) against the sink columns.

    Args:
        schema: the DataFrame's schema as Spark passes it to ``writer()``/``streamWriter()``.
        options: :class:`~spark_amqp.spark.sink.options.SinkOptions`.

    Raises:
        SinkSchemaError: no ``body`` column; a sink column of an unaccepted type (names the
            column, its type and the accepted ones); an unknown column; a duplicate column;
            ``messageId=column`` without a ``message_id`` column, or ``deterministic``/``none``
            with one; a ``partitionKey`` column that is not a string or comes without the
            option ``superStream``.
    """
    present: dict[str, str] = {}
    unknown = []
    for f in schema.fields:
        t = f.dataType.simpleString()
        if f.name in present:
            raise SinkSchemaError(f"column `{f.name}` appears twice in the input of the amqp sink")
        if f.name in SINK_COLUMNS:
            if t not in SINK_COLUMNS[f.name]:
                raise SinkSchemaError(
                    f"column `{f.name}` has type {t}; the amqp sink accepts "
                    + " or ".join(SINK_COLUMNS[f.name]) + f" (cast it, e.g. col('{f.name}')"
                    f".cast('{SINK_COLUMNS[f.name][0]}'))")
            present[f.name] = t
        elif f.name in IGNORED_SOURCE_COLUMNS:
            present[f.name] = t
        elif f.name == PUBLISHING_ID:
            if t not in _INT_TYPES:
                raise SinkSchemaError(
                    f"column `{PUBLISHING_ID}` has type {t}; the amqp sink accepts "
                    + " or ".join(_INT_TYPES) + f" (the publishing id, a uint64 >= 0: cast it, "
                    f"e.g. col('{PUBLISHING_ID}').cast('bigint'))")
            if getattr(options, "producer_name", None) is None:
                raise SinkSchemaError(
                    f"column `{PUBLISHING_ID}` gives the publishing ids of a deduplicating "
                    "producer and is only used with the option producerName (and a "
                    "rabbitmq-stream:// uri); set producerName=NAME or drop the column")
            present[f.name] = t
        elif f.name == PARTITION_KEY:
            if t != "string":
                raise SinkSchemaError(
                    f"column `{PARTITION_KEY}` has type {t}; the amqp sink accepts string "
                    f"(cast it, e.g. col('{PARTITION_KEY}').cast('string'))")
            if getattr(options, "super_stream", None) is None:
                raise SinkSchemaError(
                    f"column `{PARTITION_KEY}` picks the partition of a super stream and is "
                    "only used with the option superStream; set superStream=NAME or drop the "
                    "column")
            present[f.name] = t
        else:
            unknown.append(f"`{f.name}` {t}")
    if S.BODY not in present:
        raise SinkSchemaError(
            "the amqp sink needs a `body` column (binary or string); got columns "
            + ", ".join(f"`{f.name}`" for f in schema.fields)
            + " (e.g. df.select(to_json(struct('*')).alias('body')))")
    if unknown:
        raise SinkSchemaError(
            "the amqp sink does not know column(s) " + ", ".join(unknown)
            + "; accepted: " + ", ".join(SINK_COLUMNS) + f", {PARTITION_KEY} (with "
            f"superStream), {PUBLISHING_ID} (with producerName) (and the source's "
            + ", ".join(IGNORED_SOURCE_COLUMNS) + ", which are ignored). "
            "Drop or rename the other columns before writing.")
    mode = options.message_id
    has_id = S.MESSAGE_ID in present
    if mode == "column" and not has_id:
        raise SinkSchemaError("option messageId=column needs a `message_id` string column")
    if mode in ("deterministic", "none") and has_id:
        raise SinkSchemaError(
            f"option messageId={mode} conflicts with the `message_id` column; drop the column "
            "or use messageId=auto (column where not null, else deterministic) or column")
    if options.exchange is not None and S.EXCHANGE in present:
        log.info("amqp sink: option exchange=%r overrides the `exchange` column", options.exchange)
    if options.routing_key is not None and S.ROUTING_KEY in present:
        log.info("amqp sink: option routingKey=%r overrides the `routing_key` column",
                 options.routing_key)
    cols = tuple(c for c in SINK_COLUMNS if c in present)
    return SinkPlan(columns=cols, body_is_string=present[S.BODY] == "string",
                    exchange=options.exchange, routing_key=options.routing_key,
                    delivery_mode=options.delivery_mode, mandatory=options.mandatory,
                    message_id=mode, partition_key=PARTITION_KEY in present,
                    publishing_id=PUBLISHING_ID in present)


def _first_null(col) -> int:
    import pyarrow.compute as pc

    return pc.index(pc.is_null(col), True).as_py()


def _check_octet(name: str, col, lo: int, hi: int) -> None:
    import pyarrow.compute as pc

    mm = pc.min_max(col).as_py()
    if mm["min"] is not None and (mm["min"] < lo or mm["max"] > hi):
        bad = pc.index(pc.or_(pc.less(col, lo), pc.greater(col, hi)), True).as_py()
        raise SinkDataError(f"column `{name}` has value {col[bad].as_py()} at row {bad} of the "
                            f"batch; AMQP allows {lo}..{hi}")


def _check_shortstr(name: str, col) -> None:
    import pyarrow.compute as pc

    if col.null_count == len(col):
        return
    lengths = pc.binary_length(col.cast("binary") if not _is_binary(col.type) else col)
    mx = pc.max(lengths).as_py()
    if mx is not None and mx > 255:
        bad = pc.index(pc.greater(lengths, 255), True).as_py()
        raise SinkDataError(f"column `{name}` is {mx} UTF-8 bytes at row {bad} of the batch; "
                            "AMQP short strings allow at most 255")


def _is_binary(t) -> bool:
    import pyarrow as pa

    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _timestamps(col) -> list:
    """Arrow timestamp or integer column → list of POSIX seconds (int) or None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(col.type):
        per_s = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}[col.type.unit]
        ints = col.cast(pa.int64())
        if per_s != 1:
            ints = pc.divide(ints, per_s)  # integer division, truncates toward zero
    else:
        ints = col.cast(pa.int64())
    mn = pc.min(ints).as_py()
    if mn is not None and mn < 0:
        bad = pc.index(pc.less(ints, 0), True).as_py()
        raise SinkDataError(f"column `timestamp` is before 1970 at row {bad} of the batch; "
                            "the AMQP timestamp property is unsigned POSIX seconds")
    return ints.to_pylist()


def _headers(col) -> list:
    out = col.to_pylist()  # map rows come back as lists of (key, value) tuples, or None
    return [None if m is None else dict(m) for m in out]


def batch_to_messages(plan: SinkPlan, batch, id_prefix: Optional[str], row_start: int) -> list:
    """Convert one Arrow ``RecordBatch`` into ``publish_batch`` tuples, column by column.

    Args:
        plan: the driver's :class:`SinkPlan`.
        batch: a ``pyarrow.RecordBatch`` with (at least) the plan's columns.
        id_prefix: deterministic message-id prefix (``"{queryId}:{batchId}:{partitionId}"``
            or ``"{writeId}:{partitionId}"``), or None when ids are not generated.
        row_start: index of this batch's first row within the task (for the id suffix).

    Returns:
        list of ``(body: bytes, exchange: str, routing_key: str, properties, mandatory: bool)``,
        one per row, in row order; ``properties`` is a ``BasicProperties`` or, on the fast path
        (no property column besides ``message_id``), an
        :class:`~spark_amqp.protocol.properties.EncodedProperties` with the same encoding.

    Raises:
        SinkDataError: a null body, an out-of-range octet, a short string over 255 bytes, a
            negative timestamp (message names the column and the row in the batch).
    """
    import pyarrow as pa

    from ...protocol import BasicProperties

    n = batch.num_rows
    if n == 0:
        return []
    names = batch.schema.names

    def column(name):
        return batch.column(names.index(name))

    body = column(S.BODY)
    if body.null_count:
        raise SinkDataError(f"column `body` is null at row {_first_null(body)} of the batch; "
                            "AMQP messages need a body (use an empty string/binary instead)")
    if not _is_binary(body.type):
        body = body.cast(pa.binary())
    bodies = body.to_pylist()

    def routing(name, const):
        if const is not None:
            return repeat(const, n)
        if name not in plan.columns:
            return repeat("", n)
        col = column(name)
        _check_shortstr(name, col)
        vals = col.to_pylist()
        if col.null_count:
            vals = ["" if v is None else v for v in vals]
        return vals

    exchanges = routing(S.EXCHANGE, plan.exchange)
    keys = routing(S.ROUTING_KEY, plan.routing_key)
    if plan.partition_key:
        # superStream: the publisher hashes the tuple's routing key to pick the partition and
        # publishes to the partition stream itself, so the key takes the routing key's place
        pk = column(PARTITION_KEY).to_pylist()
        keys = [k if p is None else p for p, k in zip(pk, keys)]

    props: dict[str, Any] = {}
    filter_values = None
    for name in plan.columns:
        if name in (S.BODY, S.EXCHANGE, S.ROUTING_KEY):
            continue
        col = column(name)
        if col.null_count == n:
            continue
        if name == STREAM_FILTER_VALUE:
            filter_values = col.to_pylist()
        elif name == S.HEADERS:
            props[name] = _headers(col)
        elif name == S.TIMESTAMP:
            props[name] = _timestamps(col)
        elif name in (S.DELIVERY_MODE, S.PRIORITY):
            if name == S.DELIVERY_MODE and plan.delivery_mode is not None:
                continue
            _check_octet(name, col, 1 if name == S.DELIVERY_MODE else 0,
                         2 if name == S.DELIVERY_MODE else 255)
            props[name] = col.to_pylist()
        else:
            _check_shortstr(name, col)
            props[name] = col.to_pylist()

    if filter_values is not None:
        headers = props.get(S.HEADERS) or [None] * n
        props[S.HEADERS] = [h if v is None else {**(h or {}), FILTER_VALUE_HEADER: v}
                            for h, v in zip(headers, filter_values)]

    default_dm = plan.delivery_mode if plan.delivery_mode is not None else 2
    ids = None        # list of str (or None entries) for the general path
    ids_bytes = None  # list of bytes for the fast path
    generate = plan.message_id in ("auto", "deterministic") and id_prefix is not None
    given = props.pop(S.MESSAGE_ID, None) if plan.message_id in ("auto", "column") else None
    props.pop(S.MESSAGE_ID, None)
    if generate and given is None:
        pre = id_prefix.encode("utf-8") + b":"
        ids_bytes = [b"%b%d" % (pre, i) for i in range(row_start, row_start + n)]
    elif generate:
        ids = [f"{id_prefix}:{i}" if v is None else v
               for v, i in zip(given, range(row_start, row_start + n))]
    else:
        ids = given

    if not props and (ids is None or None not in ids):
        # fast path (the common case, e.g. the benchmark): no per-row property except the
        # message id, so the content-header property list is a constant head + shortstr(id);
        # no BasicProperties object per row
        if ids is not None:
            ids_bytes = [v.encode("utf-8") for v in ids]
        properties = _fast_properties(default_dm, ids_bytes, n)
    else:
        if S.DELIVERY_MODE in props:
            props[S.DELIVERY_MODE] = [default_dm if v is None else v
                                      for v in props[S.DELIVERY_MODE]]
        else:
            props[S.DELIVERY_MODE] = repeat(default_dm, n)
        if ids_bytes is not None:
            ids = [b.decode("utf-8") for b in ids_bytes]
        if ids is not None:
            props[S.MESSAGE_ID] = ids
        prop_iters = [props[name] if name in props else repeat(None, n) for name in _PROP_ORDER]
        properties = map(BasicProperties, *prop_iters)
    return list(zip(bodies, exchanges, keys, properties, repeat(plan.mandatory, n)))


def _fast_properties(delivery_mode: int, ids: Optional[list], n: int):
    """Properties ``delivery_mode`` (+ ``message_id`` per row when ``ids``, a list of UTF-8
    bytes), pre-encoded (:func:`~spark_amqp.protocol.properties.encode_delivery_mode_and_ids`).
    Raises SinkDataError, naming the row, for an id over 255 bytes (AMQP shortstr): the
    codec checks the lengths, the row is looked for only then."""
    try:
        return encode_delivery_mode_and_ids(delivery_mode, ids, n)
    except AMQPSyntaxError:
        bad = next((i for i, b in enumerate(ids or ()) if len(b) > 255), None)
        if bad is None:
            raise
        raise SinkDataError(f"column `message_id` is {len(ids[bad])} UTF-8 bytes at row {bad} "
                            "of the batch; AMQP short strings allow at most 255") from None
