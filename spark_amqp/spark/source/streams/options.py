"""Options of the ``amqp`` source in *stream mode* (RabbitMQ stream queues): parsing, no I/O.

Stream mode is chosen by the option ``stream`` (or ``superStream``); without it the source
reads classic/quorum queues (``queue``/``queues``, :mod:`..queues.options`). Option names
follow Spark's Kafka source (``spark-sql-kafka``). Keys arrive lower-cased from Spark
(``CaseInsensitiveDict``); every error is a ``ValueError`` naming the option, the value given
and what is allowed, raised at ``load()``.

Every option is one entry of :data:`STREAM_TABLE` (name, kind, default, bounds, doc), which
gives the known options, their parsing and defaults, and the option tables of docs/source.md
"Stream mode options" and docs/reading-patterns.md (``tests/spark/test_option_tables.py``
checks them); the connection options are :mod:`...connection_options`'s and the pacing options
both modes' (:data:`..pacing.PACING_OPTIONS`). Rules between options are in
:func:`parse_stream_options`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from ...connection_options import (CONNECTION, ConnectionFields, ConnectionOptions,
                                   parse_connection)
from ...option_values import OptionErrors
from ...options_table import Option, OptionTable, unknown_options_error
from ..pacing import PACING_OPTIONS, parse_pacing

__all__ = ["StreamOptions", "parse_stream_options", "is_stream_mode", "EARLIEST", "LATEST",
           "STREAM_OPTIONS", "STREAM_TABLE"]

#: JSON offsets meaning "the first retained offset" / "the tail" (as Kafka's -2 / -1)
EARLIEST = -2
LATEST = -1
DEFAULT_PREFETCH = 2000
DEFAULT_MAX_PER_PARTITION = 50_000
DEFAULT_READ_TIMEOUT = 60.0

_TS, _FILTER = "timestamps", "filter"
#: Every option of the stream mode, in the order of the docs' tables (docs/source.md "Stream
#: mode options": section main; docs/reading-patterns.md: timestamps and filter; the pacing
#: options are the queue mode's entries, documented once).
_STREAM_ENTRIES = (
    Option("stream", "names", None, "one stream or comma-separated streams",
           "this or `superStream`", noun="stream", field="streams"),
    Option("superStream", "custom", None, "a super stream's name: its partitions `NAME-0, "
           "NAME-1, ...` (found with passive declares) become the streams. Partitions named by "
           "explicit binding keys cannot be listed over AMQP 0-9-1: give them in `stream`",
           "this or `stream`"),
    Option("startingOffsets", "custom", None, '`earliest` | `latest` | JSON `{"stream": '
           "offset}` (-2 earliest, -1 latest; every stream named). A new query only: a "
           "restarted query resumes from its checkpoint. `latest` is refused for batch reads",
           "streaming `latest`, batch `earliest`", field="starting"),
    Option("startingTimestamp", "int", None, "ms since the epoch: start at the first chunk "
           "RabbitMQ picks for that time (AMQP timestamps are whole seconds, and RabbitMQ "
           "positions by chunk, so a few earlier messages of the same chunk may come too); "
           "exclusive with `startingOffsets`. Tested through Spark: two chunks published more "
           "than a second apart, `startingTimestamp` between them: a streaming query and a "
           "batch read return the later chunk only", note="milliseconds since the epoch",
           field="starting_timestamp_ms"),
    Option("endingOffsets", "custom", None, "batch reads only: `latest` | JSON "
           "(`earliest`/-2 refused); never past the tail", "`latest`", field="ending"),
    Option("failOnDataLoss", "bool", True, "offsets the query still needs were removed by "
           "retention: fail, naming the stream, the wanted and the first retained offset; "
           "`false`: skip them with a warning and a count in the executor log. Gaps in offsets "
           "(filtered or non-AMQP entries) are not loss"),
    Option("maxMessagesPerTrigger", "int", None, "cap of offsets per micro-batch "
           "(`ReadMaxRows`), split fairly across streams", "unset (all up to the tails)",
           minimum=1),
    Option("maxMessagesPerPartition", "int", DEFAULT_MAX_PER_PARTITION, "split a stream's "
           "range into input partitions of at most this many offsets (as in the queue mode: a "
           "batch of 100,000 from one stream is read by two executors side by side)", "50,000",
           minimum=1),
    Option("minPartitions", "int", None, "at least this many input partitions per batch (long "
           "ranges halved); a split never loses or repeats a message", minimum=1),
    Option("prefetch", "int", DEFAULT_PREFETCH, "`basic.qos` of each executor's consumer (the "
           "credit; RabbitMQ sends whole chunks while credit remains), 1..65535", "2,000",
           minimum=1, maximum=65535, note="basic.qos prefetch-count"),
    Option("includeHeaders", "bool", True, "fill the `headers` column (it includes "
           "`x-stream-offset`)"),
    Option("readTimeout", "duration", DEFAULT_READ_TIMEOUT, "seconds an executor waits for the "
           "next delivery of its range before failing the task (or a duration: `2m`)", "60",
           plain="seconds"),
    CONNECTION["uri"], CONNECTION["heartbeat"], CONNECTION["connectionTimeout"],
    CONNECTION["cacertfile"], CONNECTION["certfile"], CONNECTION["keyfile"],
    CONNECTION["verify"], CONNECTION["serverNameIndication"],
    Option("startingOffsetsByTimestamp", "custom", None, 'JSON `{"stream": ms}` naming every '
           "stream of the source (a super stream's partitions `NAME-0`, ...): each stream "
           "starts at its first chunk at or after its time. Exclusive with `startingOffsets` "
           "and `startingTimestamp`; a new query only (a restarted one resumes from its "
           "checkpoint)", section=_TS, field="starting_by_timestamp"),
    Option("startingOffsetsByTimestampStrategy", "choice", None, "a stream has no chunk at or "
           "after its time (its last message is older, or it is empty): `error` fails the "
           "query naming the stream, `latest` starts it at its tail. With `startingTimestamp` "
           "only when given: without it `startingTimestamp` starts at the tail, as it did "
           "before this option existed", "`error`", section=_TS, choices=("error", "latest"),
           field="starting_timestamp_strategy"),
    Option("endingTimestamp", "int", None, "batch reads only: every stream ends before its "
           "first chunk at or after this time (exclusive); no such chunk: the stream's tail",
           section=_TS, note="milliseconds since the epoch", field="ending_timestamp_ms"),
    Option("endingOffsetsByTimestamp", "custom", None, 'batch reads only: JSON `{"stream": '
           "ms}` naming every stream, as `endingTimestamp` per stream. Exclusive with "
           "`endingOffsets` and `endingTimestamp`", section=_TS, field="ending_by_timestamp"),
    Option("streamFilter", "custom", None, "only the rows whose `x-stream-filter-value` header "
           "is one of these values: comma-separated (`emea,apac`, each stripped) or a JSON list "
           'of strings (`["a,b", "c"]`, for values with commas). Each value non-empty and given '
           "once", "unset (every row)", section=_FILTER),
    Option("streamMatchUnfiltered", "bool", False, "with `streamFilter`: also the rows without "
           "a filter value (no header, an empty one, or one that is not a string)",
           section=_FILTER),
    *PACING_OPTIONS,
    CONNECTION["addresses"], CONNECTION["shuffleAddresses"], CONNECTION["failoverTimeout"],
)

_ERRORS = OptionErrors(ValueError, subject="the amqp source (stream mode)")
_QUEUE_MODE = ("queue", "queues", "declare", "durable", "queuearguments",
               "availablenowidletimeout")


def _queue_hint(keys: list[str]) -> str:
    return (" Options of the queue mode (queue, queues, declare, ...) cannot be combined "
            "with 'stream'/'superStream'." if any(u in _QUEUE_MODE for u in keys) else "")


#: the stream mode's option table
STREAM_TABLE = OptionTable(_STREAM_ENTRIES, _ERRORS, unknown_options_error(
    "the amqp source in stream mode", _queue_hint))
#: every option of the stream mode (lower-cased) -> its spelling in the docs
STREAM_OPTIONS = STREAM_TABLE.known


def is_stream_mode(opts: Mapping[str, str]) -> bool:
    """True when the options ask for stream mode (``stream`` or ``superStream`` given)."""
    keys = {str(k).lower() for k in opts}
    return "stream" in keys or "superstream" in keys


def parse_offsets_spec(key: str, raw: str | None, streams: tuple[str, ...] | None):
    """Parse ``startingOffsets``/``endingOffsets``: None (absent), ``"earliest"``,
    ``"latest"`` or a dict ``{stream: int}`` (ints >= 0, or -2 earliest / -1 latest).

    ``streams``: the source's streams (None for a super stream, whose partitions are only
    known on the broker: then the JSON's names are checked when the query starts).
    Raises ``ValueError`` naming the option for anything else, for a JSON that names a stream
    the source does not read, or one that leaves a stream out.
    """
    if raw is None:
        return None
    s = str(raw).strip()
    if s.lower() in ("earliest", "latest"):
        return s.lower()
    allowed = ('earliest, latest, or a JSON object {"stream": offset} with offsets >= 0, '
               "-2 (earliest) or -1 (latest)")
    try:
        spec = json.loads(s)
    except ValueError:
        raise _ERRORS.invalid(key, raw, allowed) from None
    if not isinstance(spec, dict) or not spec:
        raise _ERRORS.invalid(key, raw, allowed)
    out = {}
    for name, off in spec.items():
        if isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST:
            raise _ERRORS.invalid(key, raw, allowed)
        out[str(name)] = off
    if streams is not None:
        check_spec_streams(key, out, streams)
    return out


def parse_timestamps_spec(key: str, raw: str | None, streams: tuple[str, ...] | None):
    """Parse ``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp``: None (absent) or a
    dict ``{stream: ms}`` (ms since the epoch, integers >= 0) naming every stream of the source
    (``streams``; None for a super stream: checked when the query starts). Raises
    ``ValueError`` naming the option otherwise."""
    if raw is None:
        return None
    allowed = 'a JSON object {"stream": ms since the epoch} (integers >= 0)'
    try:
        spec = json.loads(str(raw))
    except ValueError:
        raise _ERRORS.invalid(key, raw, allowed) from None
    if not isinstance(spec, dict) or not spec or any(
            isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in spec.values()):
        raise _ERRORS.invalid(key, raw, allowed)
    out = {str(k): v for k, v in spec.items()}
    if streams is not None:
        check_spec_streams(key, out, streams, hint="")
    return out


def parse_stream_filter(raw) -> tuple[str, ...] | None:
    """Option ``streamFilter``: None (absent) or the filter values, from comma-separated
    values (``"emea, apac"``, each stripped) or a JSON list of strings (``'["a,b", "c"]'``,
    for values with commas). Raises ``ValueError`` naming the option for an empty value, a
    value given twice, or a JSON that is not a non-empty list of non-empty strings."""
    if raw is None:
        return None
    s = str(raw).strip()
    allowed = ('one or more non-empty filter values separated by commas, or a JSON list of '
               'non-empty strings like ["emea", "apac"]')
    if s.startswith("["):
        try:
            values = json.loads(s)
        except ValueError:
            raise _ERRORS.invalid("streamFilter", raw, allowed) from None
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise _ERRORS.invalid("streamFilter", raw, allowed)
    else:
        values = [v.strip() for v in s.split(",")]
    if not values or any(not v for v in values) or len(set(values)) != len(values):
        raise _ERRORS.invalid("streamFilter", raw, allowed + ", each value once")
    return tuple(values)


def check_spec_streams(key: str, spec: dict, streams,
                       hint: str = " (use -2 for earliest, -1 for latest)") -> None:
    """Raise ``ValueError`` when the JSON offsets of option ``key`` do not name exactly the
    source's ``streams``."""
    extra = sorted(set(spec) - set(streams))
    missing = sorted(set(streams) - set(spec))
    if extra or missing:
        raise ValueError(
            f"Option '{key}' of the amqp source must give an offset for each stream the source "
            f"reads ({', '.join(streams)}): "
            + (f"unknown stream(s) {', '.join(extra)}" if extra else "")
            + ("; " if extra and missing else "")
            + (f"missing stream(s) {', '.join(missing)}" if missing else "")
            + hint + ".")


@dataclass(frozen=True)
@STREAM_TABLE.field_defaults
class StreamOptions(ConnectionFields):
    """Validated stream-mode options (see :data:`STREAM_TABLE`: each entry names its field here
    and gives its default). Picklable, immutable.

    ``streams``: the stream names (empty with ``super_stream``, whose partitions the driver
    finds on the broker). ``starting``/``ending``: None, ``"earliest"``, ``"latest"`` or
    ``{stream: int}``. ``starting_timestamp_ms``: int or None. Durations are seconds. ``uri``,
    ``connection`` and :meth:`client_kwargs` read :attr:`conn`.
    """

    #: uri and client keywords (:func:`.connection_options.parse_connection`)
    conn: ConnectionOptions = ConnectionOptions()
    streams: tuple[str, ...] = ()
    super_stream: str | None
    starting: Any
    starting_timestamp_ms: int | None
    ending: Any
    #: {stream: ms} or None (startingOffsetsByTimestamp / endingOffsetsByTimestamp)
    starting_by_timestamp: dict | None
    #: "error" | "latest": no chunk at or after a starting time; None: not given
    #: (startingTimestamp then starts at the tail, startingOffsetsByTimestamp fails)
    starting_timestamp_strategy: str | None
    ending_timestamp_ms: int | None
    ending_by_timestamp: dict | None
    fail_on_data_loss: bool
    max_messages_per_trigger: int | None
    #: pacing (:mod:`..pacing`): None = no minimum; the delay in seconds
    min_messages_per_trigger: int | None
    max_trigger_delay: float
    min_partitions: int | None
    max_messages_per_partition: int
    prefetch: int
    include_headers: bool
    read_timeout: float
    #: streamFilter values (None: no filter) and streamMatchUnfiltered
    stream_filter: tuple[str, ...] | None
    stream_match_unfiltered: bool
    #: not an option: the ``(name, nullable)`` columns a user schema selects, None = all
    #: (:func:`.schema.check_user_schema`; set by ``AmqpDataSource.streamReader``/``reader``)
    columns: tuple | None = None


def _at_most_one(*given: tuple[str, Any]) -> None:
    """Raise ``ValueError`` naming the options when more than one of the ``(option, parsed
    value)`` pairs is given (a value that is not None): they are exclusive."""
    names = [k for k, v in given if v is not None]
    if len(names) > 1:
        raise ValueError(f"Options {' and '.join(repr(k) for k in names)} of the amqp "
                         "source are exclusive: give one of them.")


def parse_stream_options(opts: Mapping[str, str]) -> StreamOptions:
    """Validate Spark's option dict for stream mode and return :class:`StreamOptions`.

    Raises ``ValueError`` naming the option on: an unknown option (e.g. a queue-mode option
    such as ``queue``), both or neither of ``stream``/``superStream``, an empty or repeated
    stream name, a bad ``startingOffsets``/``endingOffsets``/``startingTimestamp``, both
    ``startingOffsets`` and ``startingTimestamp``, a non-integer or out-of-range number, a
    non-boolean flag, a ``prefetch`` outside 1..65535 (RabbitMQ refuses stream consumers
    without a prefetch).
    """
    t = STREAM_TABLE
    o = t.lower_checked(opts)
    conn = parse_connection(o, ValueError)

    if "stream" in o and "superstream" in o:
        raise ValueError("Options 'stream' and 'superStream' of the amqp source are exclusive: "
                         "give the streams in 'stream' or a super stream's name in "
                         "'superStream'.")
    streams: tuple[str, ...] = ()
    super_stream = None
    if "stream" in o:
        streams = t.parse(o, "stream")
        if streams is None:   # a None value: from a Python caller only (Spark gives strings)
            raise _ERRORS.invalid("stream", None,
                                  "one or more non-empty stream names separated by commas")
    else:
        super_stream = str(o["superstream"]).strip()
        if not super_stream or len(super_stream.encode()) > 250:
            raise _ERRORS.invalid("superStream", o["superstream"],
                                  "a non-empty super stream name of at most 250 bytes")

    known = streams if streams else None
    starting = parse_offsets_spec("startingOffsets", o.get("startingoffsets"), known)
    ending = parse_offsets_spec("endingOffsets", o.get("endingoffsets"), known)
    ts = t.parse(o, "startingTimestamp")
    by_ts = parse_timestamps_spec("startingOffsetsByTimestamp", o.get("startingoffsetsbytimestamp"),
                                  known)
    _at_most_one(("startingOffsets", starting), ("startingTimestamp", ts),
                 ("startingOffsetsByTimestamp", by_ts))
    strategy = t.parse(o, "startingOffsetsByTimestampStrategy")
    if strategy is not None and ts is None and by_ts is None:
        raise ValueError("Option 'startingOffsetsByTimestampStrategy' of the amqp source only "
                         "applies with 'startingOffsetsByTimestamp' or 'startingTimestamp'.")
    end_ts = t.parse(o, "endingTimestamp")
    end_by_ts = parse_timestamps_spec("endingOffsetsByTimestamp",
                                      o.get("endingoffsetsbytimestamp"), known)
    _at_most_one(("endingOffsets", ending), ("endingTimestamp", end_ts),
                 ("endingOffsetsByTimestamp", end_by_ts))
    max_trigger = t.parse(o, "maxMessagesPerTrigger")
    min_trigger, max_delay = parse_pacing(o, _ERRORS, max_trigger)
    stream_filter = parse_stream_filter(o.get("streamfilter"))
    if "streammatchunfiltered" in o and stream_filter is None:
        raise ValueError("Option 'streamMatchUnfiltered' of the amqp source only applies with "
                         "'streamFilter' (without a filter every row is read).")
    derived = {"streams": streams, "super_stream": super_stream, "starting": starting,
               "starting_timestamp_ms": ts, "ending": ending, "starting_by_timestamp": by_ts,
               "starting_timestamp_strategy": strategy, "ending_timestamp_ms": end_ts,
               "ending_by_timestamp": end_by_ts, "min_messages_per_trigger": min_trigger,
               "max_trigger_delay": max_delay, "stream_filter": stream_filter}
    return StreamOptions(conn=conn, **t.parse_fields(o, skip=derived), **derived)
