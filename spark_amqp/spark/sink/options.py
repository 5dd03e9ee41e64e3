"""Options of the ``amqp`` sink (``df.write`` / ``df.writeStream``), parsed and validated.

Spark hands the data source a case-insensitive dict of string options whose keys are stored
lower-cased (``pyspark.sql.datasource.DataSource.__init__``; see
/work/shared/reference/spark-connector-lessons.md §1.4). :func:`parse_sink_options` turns it
into a frozen :class:`SinkOptions` and raises :class:`SinkOptionError` (a ``ValueError``)
naming the option and its allowed values for anything unknown or invalid. It runs on the
driver in ``DataSource.writer()`` / ``streamWriter()``, i.e. at ``save()`` / ``start()``,
so a typo fails the action before any task is scheduled.

Every option is one entry of :data:`SINK_TABLE` (name, kind, default, bounds, doc), which gives
the known options, their parsing and defaults, and the option table of docs/sink.md
(``tests/spark/test_option_tables.py`` checks it); ``uri``, TLS, ``heartbeat``,
``connectionTimeout`` and the address options are :mod:`spark_amqp.spark.connection_options`'s
(shared with the source). Rules between options are in :func:`parse_sink_options`.

``messageId``:
  ``auto`` (default): the ``message_id`` column's value where the column exists and the value
  is not null, else a deterministic id. ``column``: only the column (required; nulls publish
  no id). ``deterministic``: always the deterministic id (a ``message_id`` column is rejected,
  drop it). ``none``: no message id (a ``message_id`` column is rejected).
  The deterministic id is ``"{queryId}:{batchId}:{partitionId}:{row}"`` for streaming writes
  and ``"{writeId}:{partitionId}:{row}"`` for batch writes (``writeId``: a uuid made once per
  ``save()``), where ``row`` counts the rows of the task from 0. A retried task or batch
  republishes the same ids, so consumers can drop duplicates (lessons §0.5, §6 "Sink").

Spark itself adds some keys to the options of a write (``path`` for ``save(path)``;
``checkpointLocation`` / ``queryName`` style keys for streams); those are accepted and ignored,
as are the source-only options of the ``amqp`` data source (``SOURCE_ONLY_OPTIONS``, from
:data:`spark_amqp.spark.source.options.KNOWN_OPTIONS`), so one options dict can serve both
directions.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Mapping, Optional

from ..connection_options import (CONNECTION, CONNECTION_OPTIONS, ConnectionFields,
                                  ConnectionOptions, parse_connection, parse_connection_options,
                                  redact_uri)
from ..option_values import LENIENT_BOOLEANS, OptionErrors
from ..options_table import Option, OptionTable, did_you_mean
from ..errors import SinkOptionError

__all__ = ["SinkOptionError", "SinkOptions", "parse_sink_options", "SINK_OPTIONS", "SINK_TABLE",
           "MESSAGE_ID_MODES", "ON_RETURN_MODES"]


log = logging.getLogger(__name__)


MESSAGE_ID_MODES = ("auto", "column", "deterministic", "none")
ON_RETURN_MODES = ("fail", "ignore")
_BUILTIN_EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")
#: deliveryMode spellings -> AMQP delivery-mode (the error lists all but non-persistent)
_DELIVERY_MODES = {"1": 1, "transient": 1, "non-persistent": 1, "2": 2, "persistent": 2}

_ERRORS = OptionErrors(SinkOptionError)
_LENIENT = LENIENT_BOOLEANS
#: Every option of the sink, in the order of docs/sink.md's table.
_SINK_ENTRIES = (
    CONNECTION["uri"],
    Option("exchange", "text", None, "exchange for every row; overrides the `exchange` column",
           'column, else `""` (default exchange)'),
    Option("routingKey", "text", None, "routing key for every row; overrides the "
           "`routing_key` column", 'column, else `""`'),
    Option("mandatory", "bool", False, "publish with `mandatory` (unroutable → "
           "`basic.return`)", spellings=_LENIENT),
    Option("onReturn", "choice", "fail", "`fail` (the task fails, Spark retries) or `ignore` a "
           "`basic.return`", choices=ON_RETURN_MODES),
    Option("deliveryMode", "choice", None, "`1`/`transient` or `2`/`persistent`; overrides the "
           "column", "column, else `2`", choices=_DELIVERY_MODES,
           shown=("1", "transient", "2", "persistent")),
    Option("maxInFlight", "int", 10000, "unconfirmed publishes per task", minimum=1),
    Option("maxMessageBytes", "int", None, "largest body published: a larger row fails the "
           "task naming its size and the limit, before the broker would close the channel "
           "(406)", "the broker's `max_message_size` (RabbitMQ 3.x: 128 MiB; else 16 MiB, the "
           "4.x default)", minimum=1),
    Option("confirmTimeoutMs", "duration", 60000, "longest wait (ms) for window room and for "
           "the task's final confirms (or a duration: `2m`)", minimum=1, plain="ms",
           field="confirm_timeout"),
    Option("blockedTimeoutMs", "duration", 30000, "longest time (ms) the broker may keep the "
           "task's connection blocked (`connection.blocked`: memory or disk alarm) before the "
           "task fails naming the reason (Spark retries it; or a duration: `1m`)", minimum=1,
           plain="ms", field="blocked_timeout"),
    Option("declareExchange", "bool", False, "`exchange.declare` the `exchange` option's "
           "exchange", spellings=_LENIENT),
    Option("exchangeType", "custom", "direct", "with `declareExchange=true`: `direct` | "
           "`fanout` | `topic` | `headers` | `x-...` (a plugin's type)"),
    Option("exchangeDurable", "bool", True, "durable flag of the declared exchange",
           spellings=_LENIENT),
    Option("messageId", "choice", "auto", "`auto` (column, else deterministic), `column`, "
           "`deterministic`, `none` (see below)", choices=MESSAGE_ID_MODES),
    Option("stream", "custom", None, "stream `NAME` to write into: over the stream protocol "
           "with a `rabbitmq-stream://` uri; over AMQP 0-9-1 the default exchange with routing "
           "key `NAME` (exclusive with `exchange`, `routingKey`, `superStream`)"),
    Option("producerName", "custom", None, "with a `rabbitmq-stream://` uri: deduplicated "
           "(exactly-once) writes; task `p` publishes as producer `NAME-p` with publishing "
           "ids from the `publishing_id` column or derived from the batch id and the row "
           "(see [Exactly-once writes into a stream](#exactly-once-writes-into-a-stream))"),
    Option("superStream", "custom", None, "super stream `NAME`: each row goes to the partition "
           "stream `NAME-i` that RabbitMQ's stream clients pick for its `partitionKey` column "
           "(where not null), else its `routing_key` (see [Super streams]"
           "(streams.md#super-streams)); exclusive with `exchange`"),
    CONNECTION["heartbeat"], CONNECTION["connectionTimeout"], CONNECTION["cacertfile"],
    CONNECTION["certfile"], CONNECTION["keyfile"], CONNECTION["verify"],
    CONNECTION["serverNameIndication"],
    CONNECTION["addresses"], CONNECTION["shuffleAddresses"], CONNECTION["failoverTimeout"],
)


def _unknown(keys: list[str], table: OptionTable) -> SinkOptionError:
    return SinkOptionError(
        f"unknown option(s) for the amqp sink: {', '.join(keys)}"
        f"{did_you_mean(keys, table.known)}; known options: "
        + ", ".join(sorted(table.known.values(), key=str.lower))
        + " (option names are case-insensitive)")


#: the sink's option table
SINK_TABLE = OptionTable(_SINK_ENTRIES, _ERRORS, _unknown)
# documented spelling, keyed by the lower-cased key Spark hands us
SINK_OPTIONS = SINK_TABLE.known

# keys Spark or the source side may put in the same dict; accepted and ignored by the sink
SPARK_INTERNAL_OPTIONS = frozenset({"path", "paths", "checkpointlocation", "queryname"})


def _source_only_options() -> frozenset:
    """Lower-cased option names of the ``amqp`` source that the sink does not use."""
    from ..source.options import KNOWN_OPTIONS

    return frozenset(KNOWN_OPTIONS) - frozenset(SINK_OPTIONS)


SOURCE_ONLY_OPTIONS = _source_only_options()


@dataclass(frozen=True)
@SINK_TABLE.field_defaults
class SinkOptions(ConnectionFields):
    """Validated sink options (see :data:`SINK_TABLE`: each entry names its field here and
    gives its default).

    ``exchange`` / ``routing_key`` / ``delivery_mode`` are ``None`` when not given as options
    (then the column or the default applies). Times are in seconds here. ``uri``,
    ``connect_kwargs`` and :meth:`connect_args` read :attr:`conn`.
    """

    #: uri and client keywords (:func:`..connection_options.parse_connection`)
    conn: ConnectionOptions = ConnectionOptions()
    exchange: Optional[str]
    routing_key: Optional[str]
    mandatory: bool
    on_return: str
    delivery_mode: Optional[int]
    max_in_flight: int
    max_message_bytes: Optional[int]  # None: the broker's
    confirm_timeout: float
    blocked_timeout: float
    declare_exchange: bool
    exchange_type: str
    exchange_durable: bool
    message_id: str
    super_stream: Optional[str]
    stream: Optional[str]
    producer_name: Optional[str]

    @property
    def stream_protocol(self) -> bool:
        """True for a ``rabbitmq-stream://`` / ``rabbitmq-stream+tls://`` uri: the writer
        publishes over the stream protocol (:mod:`.stream_publish`)."""
        return is_stream_uri(self.conn.uri)

    @property
    def connect_kwargs(self) -> tuple:
        """``((name, value), ...)`` for :func:`spark_amqp.client.connect`."""
        return self.conn.kwargs

    def connect_args(self) -> dict:
        """Keyword arguments for :func:`spark_amqp.client.connect` beyond the URI."""
        return self.conn.client_kwargs()


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the data source options for a write and return :class:`SinkOptions`.

    Args:
        options: Spark's case-insensitive options (keys lower-cased, values strings).

    Raises:
        SinkOptionError: ``uri`` not ``amqp://``/``amqps://``/``rabbitmq-stream://``/
            ``rabbitmq-stream+tls://``; a stream uri without ``stream``/``superStream`` or
            with an option that has no meaning there (``exchange``, ``mandatory``...);
            ``producerName`` without a stream uri; ``stream`` with ``superStream`` (or, over
            0-9-1, with ``exchange``/``routingKey``); an unknown key (the
            message lists the known ones); a value outside its allowed set or range;
            ``declareExchange=true`` without an ``exchange`` option; TLS options with a
            plain ``amqp://`` URI.
    """
    t = SINK_TABLE
    opts = {k: ("" if v is None else str(v)) for k, v in t.lower_checked(
        options, accepted=SPARK_INTERNAL_OPTIONS | SOURCE_ONLY_OPTIONS).items()}
    ignored = sorted(k for k in opts if k in SOURCE_ONLY_OPTIONS)
    if ignored:
        log.warning("amqp sink: source-only option(s) %s have no effect on a write",
                    ", ".join(ignored))
    conn = (_parse_stream_connection(opts) if is_stream_uri(opts.get("uri", ""))
            else parse_connection(opts, SinkOptionError))
    values = t.parse_fields(opts)
    declare = values["declare_exchange"]
    default_type = t.default("exchangeType")
    ex_type = opts.get("exchangetype", default_type).strip().lower() or default_type
    if ex_type not in _BUILTIN_EXCHANGE_TYPES and not ex_type.startswith("x-"):
        raise _ERRORS.invalid("exchangeType", opts["exchangetype"],
                              "direct | fanout | topic | headers | x-<plugin type>")
    exchange, routing_key = values["exchange"], values["routing_key"]
    for name, val in (("exchange", exchange), ("routingKey", routing_key)):
        if val is not None and len(val.encode("utf-8")) > 255:
            raise SinkOptionError(f"option {name} is {len(val.encode('utf-8'))} UTF-8 bytes; "
                                  "AMQP short strings allow at most 255")
    if declare and not exchange:
        raise SinkOptionError("option declareExchange=true needs a non-empty exchange option "
                              "(the default exchange cannot be declared)")
    if "exchangetype" in opts and not declare:
        raise SinkOptionError("option exchangeType only applies with declareExchange=true")

    super_stream = opts.get("superstream")
    if super_stream is not None:
        super_stream = super_stream.strip()
        if not super_stream or len(super_stream.encode("utf-8")) > 250:
            raise _ERRORS.invalid("superStream", opts["superstream"],
                                  "a super stream name of 1..250 UTF-8 bytes")
        if exchange is not None or declare:
            raise SinkOptionError("option superStream publishes to the partition streams "
                                  "through the default exchange: remove the option exchange "
                                  "(and declareExchange)")

    stream = _name_option(opts, "stream", "a stream name of 1..255 UTF-8 bytes", 255)
    producer = _name_option(opts, "producerName", "a producer name of 1..240 UTF-8 bytes "
                            "(the task's partition id is appended)", 240)
    if stream is not None and super_stream is not None:
        raise SinkOptionError("options stream and superStream exclude each other: give one")
    if stream is not None and not is_stream_uri(conn.uri):
        if exchange is not None or declare or routing_key is not None:
            raise SinkOptionError("option stream publishes through the default exchange with "
                                  "routing key NAME over AMQP 0-9-1: remove the options "
                                  "exchange, routingKey and declareExchange")
        exchange, routing_key = "", stream
    if is_stream_uri(conn.uri):
        if stream is None and super_stream is None:
            raise SinkOptionError("a rabbitmq-stream:// uri writes into a stream: give the option "
                                  "stream=NAME (or superStream=NAME)")
        bad = [SINK_OPTIONS.get(k, k) for k in ("exchange", "declareexchange", "mandatory",
                                              "onreturn", "maxmessagebytes", "blockedtimeoutms")
               if k in opts]
        if bad:
            raise SinkOptionError(
                f"option(s) {', '.join(bad)} have no meaning over the stream protocol (a "
                "rabbitmq-stream:// uri writes straight into the stream): remove them, or use "
                "an amqp:// uri")
    elif producer is not None:
        raise SinkOptionError(
            f"option producerName (deduplicated writes) needs the stream protocol: a "
            f"rabbitmq-stream:// uri and the option stream or superStream, got uri "
            f"{redact_uri(conn.uri)!r} (RabbitMQ deduplicates by producer name only on its "
            "stream port, 5552)")
    return SinkOptions(conn=conn, **{**values, "exchange": exchange, "routing_key": routing_key,
                                     "exchange_type": ex_type, "super_stream": super_stream,
                                     "stream": stream, "producer_name": producer})


def is_stream_uri(uri: str) -> bool:
    """Whether ``uri`` has a stream-protocol scheme (``rabbitmq-stream://``,
    ``rabbitmq-stream+tls://``)."""
    return bool(re.match(r"^\s*rabbitmq-stream(\+tls)?://", str(uri or ""), re.IGNORECASE))


def _name_option(opts: Mapping[str, str], name: str, allowed: str, limit: int) -> Optional[str]:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    value = raw.strip()
    if not value or len(value.encode("utf-8")) > limit:
        raise _ERRORS.invalid(name, raw, allowed)
    return value


def _parse_stream_connection(opts: Mapping[str, str]) -> ConnectionOptions:
    """The connection options of a ``rabbitmq-stream[+tls]://`` uri: the same keywords as for
    ``amqp://`` (TLS options need ``rabbitmq-stream+tls://``; ``addresses`` default to port
    5552, 5551 with TLS), checked by the stream client's URI parser
    (:func:`spark_amqp.client.stream.parse_stream_uri`). Raises SinkOptionError naming the
    option."""
    from ...client.stream.params import parse_stream_uri
    from ...client.uri import parse_addresses

    uri = str(opts.get("uri")).strip()
    try:
        parse_stream_uri(uri)
    except ValueError as exc:
        raise SinkOptionError(f"option uri: {redact_uri(str(exc))}") from None
    tls = uri.lower().startswith("rabbitmq-stream+tls://")
    # the shared parser checks TLS options against an AMQP scheme of the same security
    try:
        kw = parse_connection_options({k: v for k, v in opts.items() if k != "addresses"},
                                      "amqps://" if tls else "amqp://", SinkOptionError)
    except SinkOptionError as exc:
        raise SinkOptionError(str(exc).replace("an amqps:// uri",
                                               "a rabbitmq-stream+tls:// uri")) from None
    if "addresses" in opts:
        try:
            kw["addresses"] = parse_addresses(str(opts["addresses"]), 5551 if tls else 5552)
        except ValueError as exc:
            raise SinkOptionError(f"option addresses: {exc}") from None
    return ConnectionOptions(uri, tuple(sorted(kw.items())))
