"""The schema of the ``amqp`` source, shared with the sink (same column names).

A user schema (``readStream.schema(...)``) may select some of the columns
(:func:`check_user_schema`): the source then builds and sends only those.

One row per AMQP delivery (``basic.deliver``, AMQP 0-9-1 §1.8.3.9) with the basic content
properties (§1.8 class ``basic``, property list) as columns:

==================  ===================  ========  =============================================
column              Spark type           nullable  source
==================  ===================  ========  =============================================
body                binary               no        message body
queue               string               no        the queue it was consumed from
exchange            string               no        basic.deliver exchange ("" = default exchange)
routing_key         string               no        basic.deliver routing-key
redelivered         boolean              no        basic.deliver redelivered
offset              long                 no        position in that queue's stream for this
                                                   reader session (the number in the offsets);
                                                   stream mode: the message's stream offset
                                                   (header ``x-stream-offset``)
content_type        string               yes       property content-type
content_encoding    string               yes       property content-encoding
headers             map<string,string>   yes       property headers; scalar values as text,
                                                   nested values as JSON (null when the option
                                                   ``includeHeaders`` is false)
delivery_mode       int                  yes       1 transient, 2 persistent
priority            int                  yes       0-9 (RabbitMQ: up to 255 with x-max-priority)
correlation_id      string               yes
reply_to            string               yes
expiration          string               yes       per-message TTL in ms (RabbitMQ)
message_id          string               yes
timestamp           timestamp            yes       POSIX seconds -> timestamp (UTC)
type                string               yes
user_id             string               yes
app_id              string               yes
delivery_count      int                  yes       ``x-delivery-count`` header (quorum queues,
                                                   RabbitMQ docs/quorum-queues): returns so far
                                                   (3.x), failed deliveries so far (4.3: a
                                                   crash-restart counts, a nack does not);
                                                   null otherwise. Over the queue's delivery
                                                   limit (4.x default 20) the message is
                                                   dead-lettered: docs/broker/rabbitmq-versions.md
==================  ===================  ========  =============================================

:data:`ARROW_SCHEMA` is exactly ``pyspark.sql.pandas.types.to_arrow_schema(SOURCE_SCHEMA,
timezone="UTC")``, which Spark 4.2+ checks against every ``RecordBatch`` a reader yields
(SPARK-55583); a unit test keeps the two equal.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = [
    "BODY", "QUEUE", "EXCHANGE", "ROUTING_KEY", "REDELIVERED", "OFFSET", "CONTENT_TYPE",
    "CONTENT_ENCODING", "HEADERS", "DELIVERY_MODE", "PRIORITY", "CORRELATION_ID", "REPLY_TO",
    "EXPIRATION", "MESSAGE_ID", "TIMESTAMP", "TYPE", "USER_ID", "APP_ID", "DELIVERY_COUNT",
    "COLUMNS", "PROPERTY_COLUMNS", "STRING_PROPERTY_COLUMNS", "INT_PROPERTY_COLUMNS",
    "SOURCE_SCHEMA_DDL", "source_schema", "arrow_schema", "check_user_schema",
]

BODY = "body"
QUEUE = "queue"
EXCHANGE = "exchange"
ROUTING_KEY = "routing_key"
REDELIVERED = "redelivered"
OFFSET = "offset"
CONTENT_TYPE = "content_type"
CONTENT_ENCODING = "content_encoding"
HEADERS = "headers"
DELIVERY_MODE = "delivery_mode"
PRIORITY = "priority"
CORRELATION_ID = "correlation_id"
REPLY_TO = "reply_to"
EXPIRATION = "expiration"
MESSAGE_ID = "message_id"
TIMESTAMP = "timestamp"
TYPE = "type"
USER_ID = "user_id"
APP_ID = "app_id"
DELIVERY_COUNT = "delivery_count"

#: (name, spark simple type name, nullable) in column order.
_FIELDS: tuple[tuple[str, str, bool], ...] = (
    (BODY, "binary", False),
    (QUEUE, "string", False),
    (EXCHANGE, "string", False),
    (ROUTING_KEY, "string", False),
    (REDELIVERED, "boolean", False),
    (OFFSET, "long", False),
    (CONTENT_TYPE, "string", True),
    (CONTENT_ENCODING, "string", True),
    (HEADERS, "map<string,string>", True),
    (DELIVERY_MODE, "int", True),
    (PRIORITY, "int", True),
    (CORRELATION_ID, "string", True),
    (REPLY_TO, "string", True),
    (EXPIRATION, "string", True),
    (MESSAGE_ID, "string", True),
    (TIMESTAMP, "timestamp", True),
    (TYPE, "string", True),
    (USER_ID, "string", True),
    (APP_ID, "string", True),
    (DELIVERY_COUNT, "int", True),
)

#: All column names, in schema order.
COLUMNS: tuple[str, ...] = tuple(n for n, _, _ in _FIELDS)
#: Columns taken from the basic properties (``BasicProperties`` attribute names), in order.
PROPERTY_COLUMNS: tuple[str, ...] = (
    CONTENT_TYPE, CONTENT_ENCODING, HEADERS, DELIVERY_MODE, PRIORITY, CORRELATION_ID, REPLY_TO,
    EXPIRATION, MESSAGE_ID, TIMESTAMP, TYPE, USER_ID, APP_ID,
)
STRING_PROPERTY_COLUMNS: tuple[str, ...] = tuple(
    n for n, t, _ in _FIELDS if t == "string" and n in PROPERTY_COLUMNS)
INT_PROPERTY_COLUMNS: tuple[str, ...] = (DELIVERY_MODE, PRIORITY)

#: Spark simple type name of each column.
_TYPES: dict[str, str] = {n: t for n, t, _ in _FIELDS}
_NULLABLE: dict[str, bool] = {n: nl for n, _, nl in _FIELDS}

#: The schema as a DDL string (nullability is not expressible in DDL; see :func:`source_schema`).
SOURCE_SCHEMA_DDL = ", ".join(f"`{n}` {t}" for n, t, _ in _FIELDS)


@lru_cache(maxsize=None)
def source_schema():
    """The source schema as a ``pyspark.sql.types.StructType`` (nullability as in the table).

    The ``headers`` map has nullable values (``valueContainsNull=True``): a header whose value is
    the AMQP void ``V`` becomes a null map value.
    """
    from pyspark.sql.types import (BinaryType, BooleanType, IntegerType, LongType, MapType,
                                   StringType, StructField, StructType, TimestampType)

    types = {
        "binary": BinaryType(), "string": StringType(), "boolean": BooleanType(),
        "long": LongType(), "int": IntegerType(), "timestamp": TimestampType(),
        "map<string,string>": MapType(StringType(), StringType(), True),
    }
    return StructType([StructField(n, types[t], nullable) for n, t, nullable in _FIELDS])


@lru_cache(maxsize=None)
def arrow_schema(columns: tuple[tuple[str, bool], ...] | None = None):
    """The exact ``pyarrow.Schema`` Spark expects for :func:`source_schema` (timezone UTC), or
    for the user-selected ``columns`` (``(name, nullable)`` pairs in the user's order, from
    :func:`check_user_schema`; None = every column).

    Built with pyarrow directly so executors need no pyspark type machinery; equal to
    ``to_arrow_schema(source_schema(), timezone="UTC")`` (and to that of the user schema for
    ``columns``; checked by unit tests).
    """
    import pyarrow as pa

    types = {
        "binary": pa.binary(), "string": pa.string(), "boolean": pa.bool_(),
        "long": pa.int64(), "int": pa.int32(), "timestamp": pa.timestamp("us", tz="UTC"),
        "map<string,string>": pa.map_(pa.field("key", pa.string(), nullable=False),
                                      pa.field("value", pa.string(), nullable=True)),
    }
    fields = _FIELDS if columns is None else tuple((n, _TYPES[n], nl) for n, nl in columns)
    return pa.schema([pa.field(n, types[t], nullable=nullable) for n, t, nullable in fields])


def check_user_schema(schema) -> tuple[tuple[str, bool], ...] | None:
    """The columns a user-supplied schema selects: column pruning, like a ``select``.

    ``schema``: the ``StructType`` Spark passes to ``streamReader``/``reader`` (the user's
    ``.schema(...)``, else :func:`source_schema`) or None. Every field must be a source column
    with its type (``.schema("body binary, routing_key string")``); any subset, in any order.
    A field may be NOT NULL only where the source column is. Only the selected columns are
    built and sent to Spark, which then converts fewer Arrow columns to rows (the main job
    reads only ``body``; docs/performance.md and CHANGELOG.md give the gain).

    Returns None when the schema is the source's own (every column, in order, with its
    nullability), else the selected ``(name, nullable)`` pairs in the schema's order, for
    :func:`arrow_schema`. Raises ``ValueError`` naming the first bad column (unknown name,
    wrong type, repeated, NOT NULL where the source has nulls) and listing the source schema.
    Checked when the query starts: Spark 4.3 calls no source method with a user schema at
    ``load()``.
    """
    if schema is None:
        return None
    cols = tuple((f.name, bool(f.nullable)) for f in schema.fields)
    if cols == tuple((n, nl) for n, _, nl in _FIELDS):
        return None
    want = {f.name: f.dataType.simpleString() for f in source_schema().fields}
    seen: set[str] = set()
    for f in schema.fields:
        typ = f.dataType.simpleString()
        if f.name not in want:
            problem = f"`{f.name}` is not a column of the source"
        elif typ != want[f.name]:
            problem = f"`{f.name}` is {typ}, the source's `{f.name}` is {want[f.name]}"
        elif f.name in seen:
            problem = f"`{f.name}` is given twice"
        elif not f.nullable and _NULLABLE[f.name]:
            problem = (f"`{f.name}` is NOT NULL, but the source's `{f.name}` can be null "
                       "(declare it nullable)")
        else:
            seen.add(f.name)
            continue
        raise ValueError(
            f"The amqp source cannot read the user schema: {problem}. A user schema selects "
            f"columns of the source schema, with their types: {SOURCE_SCHEMA_DDL}. "
            "Parse the body with from_json/cast.")
    if not cols:
        raise ValueError("The amqp source cannot read an empty user schema: select at least "
                         f"one column of {SOURCE_SCHEMA_DDL}.")
    return cols
