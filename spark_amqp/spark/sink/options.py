"""Options of the ``amqp`` sink (``df.write`` / ``df.writeStream``), parsed and validated.

Spark hands the data source a case-insensitive dict of string options whose keys are stored
lower-cased (``pyspark.sql.datasource.DataSource.__init__``; see
/work/shared/reference/spark-connector-lessons.md §1.4). :func:`parse_sink_options` turns it
into a frozen :class:`SinkOptions` and raises :class:`SinkOptionError` (a ``ValueError``)
naming the option and its allowed values for anything unknown or invalid. It runs on the
driver in ``DataSource.writer()`` / ``streamWriter()``, i.e. at ``save()`` / ``start()``,
so a typo fails the action before any task is scheduled.

=====================  ==========================  ================================================
option                 default                     meaning
=====================  ==========================  ================================================
``uri``                amqp://guest:guest@         ``amqp://`` / ``amqps://`` URI (RabbitMQ URI spec)
                       localhost:5672/%2F
``exchange``           column, else ``""``         exchange for every row; overrides the column
``routingKey``         column, else ``""``         routing key for every row; overrides the column
``mandatory``          ``false``                   publish with ``mandatory`` (unroutable → return)
``onReturn``           ``fail``                    ``fail`` | ``ignore`` a ``basic.return``
``deliveryMode``       column, else ``2``          ``1``/``transient`` or ``2``/``persistent``;
                                                   when set, overrides the column
``maxInFlight``        ``10000``                   unconfirmed publishes per task (≥ 1)
``maxMessageBytes``    the broker's limit          largest body published (≥ 1); a larger row
                                                   fails the task naming its size and the limit,
                                                   before the broker would close the channel
                                                   (406). Default: the broker's max_message_size
                                                   (advertised by the embedded broker; RabbitMQ
                                                   3.x 128 MiB; else 16 MiB, the 4.x default)
``confirmTimeoutMs``   ``60000``                   max wait (ms, > 0) for room in the maxInFlight
                                                   window and for the task's final confirms
``blockedTimeoutMs``   ``30000``                   max time (ms, > 0) the broker may keep the
                                                   task's connection blocked (connection.blocked:
                                                   memory/disk alarm) before the task fails
``declareExchange``    ``false``                   ``exchange.declare`` the ``exchange`` option
``exchangeType``       ``direct``                  ``direct``|``fanout``|``topic``|``headers``|``x-*``
``exchangeDurable``    ``true``                    durable flag of the declared exchange
``messageId``          ``auto``                    ``auto``|``column``|``deterministic``|``none``
``superStream``        (none)                      super stream NAME: each row goes to partition
                                                   stream ``NAME-i`` that RabbitMQ's stream
                                                   clients pick for its ``partitionKey``
                                                   column (where not null), else for its
                                                   routing key
                                                   (:mod:`spark_amqp.spark.sink.super_stream`),
                                                   through the default exchange; exclusive with
                                                   ``exchange``
``cacertfile`` …       (none)                      TLS: ``cacertfile``, ``certfile``, ``keyfile``,
                                                   ``verify`` (``verify_peer``|``verify_none``|
                                                   ``true``|``false``),
                                                   ``serverNameIndication``; passed to the client
``heartbeat``          client default              heartbeat seconds (``0`` disables)
``connectionTimeout``  client default              TCP + handshake timeout (seconds)
=====================  ==========================  ================================================

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
``uri``, TLS, ``heartbeat`` and ``connectionTimeout`` are parsed by
:mod:`spark_amqp.spark.connection_options` (shared with the source).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Mapping, Optional

from ..connection_options import (CONNECTION_OPTIONS, DEFAULT_URI, parse_connection_options,
                                 parse_uri_option)
from ..option_values import LENIENT_BOOLEANS, OptionErrors, parse_bool, parse_choice, parse_int

__all__ = ["SinkOptionError", "SinkOptions", "parse_sink_options", "SINK_OPTIONS",
           "MESSAGE_ID_MODES", "ON_RETURN_MODES"]


log = logging.getLogger(__name__)


class SinkOptionError(ValueError):
    """An unknown option or an invalid option value of the ``amqp`` sink.

    The message names the option (as the user spells it in the docs) and the allowed values.
    Raised on the driver at ``save()`` / ``start()``.
    """


MESSAGE_ID_MODES = ("auto", "column", "deterministic", "none")
ON_RETURN_MODES = ("fail", "ignore")
_BUILTIN_EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")

# documented spelling, keyed by the lower-cased key Spark hands us
SINK_OPTIONS = {**{k.lower(): k for k in (
    "exchange", "routingKey", "mandatory", "onReturn", "deliveryMode", "maxInFlight",
    "maxMessageBytes", "confirmTimeoutMs", "blockedTimeoutMs", "declareExchange", "exchangeType", "exchangeDurable",
    "messageId", "superStream",
)}, **CONNECTION_OPTIONS}

# keys Spark or the source side may put in the same dict; accepted and ignored by the sink
SPARK_INTERNAL_OPTIONS = frozenset({"path", "paths", "checkpointlocation", "queryname"})


def _source_only_options() -> frozenset:
    """Lower-cased option names of the ``amqp`` source that the sink does not use."""
    from ..source.options import KNOWN_OPTIONS

    return frozenset(KNOWN_OPTIONS) - frozenset(SINK_OPTIONS)


SOURCE_ONLY_OPTIONS = _source_only_options()

_ERRORS = OptionErrors(SinkOptionError)
#: deliveryMode spellings -> AMQP delivery-mode (the error lists all but non-persistent)
_DELIVERY_MODES = {"1": 1, "transient": 1, "non-persistent": 1, "2": 2, "persistent": 2}


@dataclass(frozen=True)
class SinkOptions:
    """Validated sink options (see the module docstring for meanings and defaults).

    ``exchange`` / ``routing_key`` / ``delivery_mode`` are ``None`` when not given as options
    (then the column or the default applies). Times are in seconds here.
    """

    uri: str = DEFAULT_URI
    exchange: Optional[str] = None
    routing_key: Optional[str] = None
    mandatory: bool = False
    on_return: str = "fail"
    delivery_mode: Optional[int] = None
    max_in_flight: int = 10000
    max_message_bytes: Optional[int] = None   # None: the broker's (client/broker_limits.py)
    confirm_timeout: float = 60.0
    blocked_timeout: float = 30.0
    declare_exchange: bool = False
    exchange_type: str = "direct"
    exchange_durable: bool = True
    message_id: str = "auto"
    super_stream: Optional[str] = None
    connect_kwargs: tuple = ()   # ((name, value), ...) for spark_amqp.client.connect

    def connect_args(self) -> dict:
        """Keyword arguments for :func:`spark_amqp.client.connect` beyond the URI."""
        return dict(self.connect_kwargs)


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the data source options for a write and return :class:`SinkOptions`.

    Args:
        options: Spark's case-insensitive options (keys lower-cased, values strings).

    Raises:
        SinkOptionError: ``uri`` not ``amqp://``/``amqps://``; an unknown key (the
            message lists the known ones); a value outside its allowed set or range;
            ``declareExchange=true`` without an ``exchange`` option; TLS options with a
            plain ``amqp://`` URI.
    """
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}
    unknown = sorted(k for k in opts
                     if k not in SINK_OPTIONS and k not in SPARK_INTERNAL_OPTIONS
                     and k not in SOURCE_ONLY_OPTIONS)
    if unknown:
        raise SinkOptionError(
            f"unknown option(s) for the amqp sink: {', '.join(unknown)}; known options: "
            + ", ".join(sorted(SINK_OPTIONS.values(), key=str.lower))
            + " (option names are case-insensitive)")

    ignored = sorted(k for k in opts if k in SOURCE_ONLY_OPTIONS)
    if ignored:
        log.warning("amqp sink: source-only option(s) %s have no effect on a write",
                    ", ".join(ignored))
    uri = parse_uri_option(opts, SinkOptionError)
    on_return = parse_choice(opts, "onReturn", _ERRORS, ON_RETURN_MODES, default="fail")
    mandatory = parse_bool(opts, "mandatory", _ERRORS, default=False, spellings=LENIENT_BOOLEANS)
    delivery_mode = parse_choice(opts, "deliveryMode", _ERRORS, _DELIVERY_MODES,
                                 shown=("1", "transient", "2", "persistent"))
    max_in_flight = parse_int(opts, "maxInFlight", _ERRORS, minimum=1, default=10000)
    max_message_bytes = parse_int(opts, "maxMessageBytes", _ERRORS, minimum=1)
    timeout_ms = parse_int(opts, "confirmTimeoutMs", _ERRORS, minimum=1, default=60000)
    blocked_ms = parse_int(opts, "blockedTimeoutMs", _ERRORS, minimum=1, default=30000)
    declare = parse_bool(opts, "declareExchange", _ERRORS, default=False,
                         spellings=LENIENT_BOOLEANS)
    ex_type = opts.get("exchangetype", "direct").strip().lower() or "direct"
    if ex_type not in _BUILTIN_EXCHANGE_TYPES and not ex_type.startswith("x-"):
        raise _ERRORS.invalid("exchangeType", opts["exchangetype"],
                              "direct | fanout | topic | headers | x-<plugin type>")
    durable = parse_bool(opts, "exchangeDurable", _ERRORS, default=True,
                         spellings=LENIENT_BOOLEANS)
    message_id = parse_choice(opts, "messageId", _ERRORS, MESSAGE_ID_MODES, default="auto")
    exchange = opts.get("exchange")
    routing_key = opts.get("routingkey")
    for name, val in (("exchange", exchange), ("routingKey", routing_key)):
        if val is not None and len(val.encode("utf-8")) > 255:
            raise SinkOptionError(f"option {name} is {len(val.encode('utf-8'))} UTF-8 bytes; "
                                  "AMQP short strings allow at most 255")
    if declare and not exchange:
        raise SinkOptionError("option declareExchange=true needs a non-empty exchange option "
                              "(the default exchange cannot be declared)")
    if "exchangetype" in opts and not declare:
        raise SinkOptionError("option exchangeType only applies with declareExchange=true")

    kw = parse_connection_options(opts, uri, SinkOptionError)
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

    return SinkOptions(
        uri=uri, exchange=exchange, routing_key=routing_key, mandatory=mandatory,
        on_return=on_return, delivery_mode=delivery_mode, max_in_flight=max_in_flight,
        max_message_bytes=max_message_bytes, confirm_timeout=timeout_ms / 1000.0, blocked_timeout=blocked_ms / 1000.0,
        declare_exchange=declare, exchange_type=ex_type,
        exchange_durable=durable, message_id=message_id, super_stream=super_stream,
        connect_kwargs=tuple(sorted(kw.items())),
    )
