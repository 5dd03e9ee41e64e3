"""Options of the ``amqp`` source in *stream mode* (RabbitMQ stream queues): parsing, no I/O.

Stream mode is chosen by the option ``stream`` (or ``superStream``); without it the source
reads classic/quorum queues (``queue``/``queues``, :mod:`.options`, unchanged). Option names
follow Spark's Kafka source (``spark-sql-kafka``). Keys arrive lower-cased from Spark
(``CaseInsensitiveDict``); every error is a ``ValueError`` naming the option, the value given
and what is allowed, raised at ``load()``.

=========================  ===========================================  ========================
option                     meaning                                      default
=========================  ===========================================  ========================
stream                     one stream queue, or comma-separated ones    (this or superStream)
superStream                a super stream NAME: its partitions          (this or stream)
                           NAME-0, NAME-1, ... (found on the broker)
                           become the source's streams
startingOffsets            ``earliest`` | ``latest`` | JSON             streaming: latest;
                           ``{"stream": offset}`` (-2 earliest,         batch: earliest
                           -1 latest); a new query only (a restarted
                           query resumes from its checkpoint)
startingTimestamp          ms since the epoch: start at the first       unset
                           chunk whose timestamp is at or after it
                           (RabbitMQ's granularity: a chunk, and one
                           second); exclusive with startingOffsets
startingOffsetsByTimestamp JSON ``{"stream": ms}`` for every stream:     unset
                           start each at the first chunk at or after
                           its time; exclusive with startingOffsets
                           and startingTimestamp
startingOffsetsByTimestampStrategy                                      error
                           no chunk at or after the time: ``error``
                           fails the query (naming the stream) or
                           ``latest`` starts at the tail. For
                           startingTimestamp only when given (it
                           started at the tail before, and still does)
endingOffsets              batch reads only: ``latest`` | JSON          latest
endingTimestamp            batch reads only: ms; each stream ends       unset
                           before its first chunk at or after it
                           (exclusive; no such chunk: the tail)
endingOffsetsByTimestamp   batch reads only: JSON ``{"stream": ms}``    unset
                           for every stream, as endingTimestamp
failOnDataLoss             offsets the query still needs were removed   true
                           by retention: fail (naming the stream, the
                           wanted and the first retained offset);
                           false: skip them with a warning
maxMessagesPerTrigger      cap of offsets per micro-batch, split        unset
                           fairly across streams (ReadMaxRows)
minMessagesPerTrigger      pacing (Kafka's minOffsetsPerTrigger): no    unset (no pacing)
                           batch until the tails are this many
                           offsets ahead, or maxTriggerDelay has
                           passed since the last batch, or
                           maxMessagesPerTrigger is reached; never
                           with Trigger.AvailableNow
maxTriggerDelay            with minMessagesPerTrigger only: the         15m
                           longest wait between batches when offsets
                           are there (500ms, 30s, 15m, 1h; bare
                           integer: ms)
minPartitions              at least this many input partitions per      unset
                           batch (long ranges are split)
maxMessagesPerPartition    at most this many offsets per input          50000
                           partition (as the queue mode: a trigger
                           of 100,000 on one stream is read by two
                           executors side by side)
streamFilter               stream filtering (RabbitMQ 3.13+): only the   unset (every row)
                           rows whose ``x-stream-filter-value`` header
                           is one of these values (comma-separated, or
                           a JSON list of strings); the broker skips
                           the chunks that cannot match, the source
                           filters each row exactly (so rows are the
                           same on brokers without filtering)
streamMatchUnfiltered      with streamFilter: also the rows without a   false
                           filter value
prefetch                   basic.qos of each executor's consumer        2000
                           (credit; RabbitMQ sends whole chunks)
includeHeaders             fill the ``headers`` column                  true
readTimeout                seconds an executor waits for the next       60
                           delivery of its range before failing
uri, TLS, heartbeat,       as the queue mode (:mod:`.connection_options`)
connectionTimeout
=========================  ===========================================  ========================
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..connection_options import CONNECTION_OPTIONS, DEFAULT_URI, parse_connection_options, \
    parse_uri_option
from ..option_values import OptionErrors, parse_bool, parse_choice, parse_float, parse_int, \
    parse_names

__all__ = ["StreamOptions", "parse_stream_options", "is_stream_mode", "EARLIEST", "LATEST",
           "STREAM_OPTIONS"]

#: JSON offsets meaning "the first retained offset" / "the tail" (as Kafka's -2 / -1)
EARLIEST = -2
LATEST = -1
DEFAULT_PREFETCH = 2000
DEFAULT_MAX_PER_PARTITION = 50_000
DEFAULT_READ_TIMEOUT = 60.0

STREAM_OPTIONS = {**{k.lower(): k for k in (
    "stream", "superStream", "startingOffsets", "startingTimestamp", "endingOffsets",
    "startingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy", "endingTimestamp",
    "endingOffsetsByTimestamp",
    "failOnDataLoss", "maxMessagesPerTrigger", "minMessagesPerTrigger", "maxTriggerDelay",
    "minPartitions", "maxMessagesPerPartition",
    "prefetch", "includeHeaders", "readTimeout", "streamFilter", "streamMatchUnfiltered",
)}, **CONNECTION_OPTIONS}

_ERRORS = OptionErrors(ValueError, subject="the amqp source (stream mode)")


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
class StreamOptions:
    """Validated stream-mode options (see the module table). Picklable, immutable.

    ``streams``: the stream names (empty with ``super_stream``, whose partitions the driver
    finds on the broker). ``starting``/``ending``: None, ``"earliest"``, ``"latest"`` or
    ``{stream: int}``. ``starting_timestamp_ms``: int or None.
    """

    uri: str = DEFAULT_URI
    streams: tuple[str, ...] = ()
    super_stream: str | None = None
    starting: Any = None
    starting_timestamp_ms: int | None = None
    ending: Any = None
    #: {stream: ms} or None (startingOffsetsByTimestamp / endingOffsetsByTimestamp)
    starting_by_timestamp: dict | None = None
    #: "error" | "latest": no chunk at or after a starting time; None: not given
    #: (startingTimestamp then starts at the tail, startingOffsetsByTimestamp fails)
    starting_timestamp_strategy: str | None = None
    ending_timestamp_ms: int | None = None
    ending_by_timestamp: dict | None = None
    fail_on_data_loss: bool = True
    max_messages_per_trigger: int | None = None
    #: pacing (:mod:`.pacing`): None = no minimum; the delay in seconds
    min_messages_per_trigger: int | None = None
    max_trigger_delay: float = 15 * 60.0
    min_partitions: int | None = None
    max_messages_per_partition: int = DEFAULT_MAX_PER_PARTITION
    prefetch: int = DEFAULT_PREFETCH
    include_headers: bool = True
    read_timeout: float = DEFAULT_READ_TIMEOUT
    #: streamFilter values (None: no filter) and streamMatchUnfiltered
    stream_filter: tuple[str, ...] | None = None
    stream_match_unfiltered: bool = False
    connection: dict = field(default_factory=dict)
    #: not an option: the ``(name, nullable)`` columns a user schema selects, None = all
    #: (:func:`.schema.check_user_schema`; set by ``AmqpDataSource.streamReader``/``reader``)
    columns: tuple | None = None

    def client_kwargs(self) -> dict:
        """Keyword arguments for ``spark_amqp.client.connect`` besides the URI."""
        return dict(self.connection)


def parse_stream_options(opts: Mapping[str, str]) -> StreamOptions:
    """Validate Spark's option dict for stream mode and return :class:`StreamOptions`.

    Raises ``ValueError`` naming the option on: an unknown option (e.g. a queue-mode option
    such as ``queue``), both or neither of ``stream``/``superStream``, an empty or repeated
    stream name, a bad ``startingOffsets``/``endingOffsets``/``startingTimestamp``, both
    ``startingOffsets`` and ``startingTimestamp``, a non-integer or out-of-range number, a
    non-boolean flag, a ``prefetch`` outside 1..65535 (RabbitMQ refuses stream consumers
    without a prefetch).
    """
    o = {str(k).lower(): v for k, v in opts.items()}
    unknown = sorted(set(o) - set(STREAM_OPTIONS))
    if unknown:
        queue_mode = [u for u in unknown if u in ("queue", "queues", "declare", "durable",
                                                 "queuearguments", "availablenowidletimeout")]
        hint = (" Options of the queue mode (queue, queues, declare, ...) cannot be combined "
                "with 'stream'/'superStream'." if queue_mode else "")
        raise ValueError(
            f"Unknown option(s) {', '.join(repr(u) for u in unknown)} for the amqp source in "
            f"stream mode; known options: {', '.join(sorted(STREAM_OPTIONS.values()))}.{hint}")
    uri = parse_uri_option(o, ValueError)
    connection = parse_connection_options(o, uri, ValueError)

    if "stream" in o and "superstream" in o:
        raise ValueError("Options 'stream' and 'superStream' of the amqp source are exclusive: "
                         "give the streams in 'stream' or a super stream's name in "
                         "'superStream'.")
    streams: tuple[str, ...] = ()
    super_stream = None
    if "stream" in o:
        streams = parse_names(o, "stream", _ERRORS, noun="stream")
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
    ts = parse_int(o, "startingTimestamp", _ERRORS, minimum=0,
                   note="milliseconds since the epoch")
    by_ts = parse_timestamps_spec("startingOffsetsByTimestamp", o.get("startingoffsetsbytimestamp"),
                                  known)
    starts = [k for k, v in (("startingOffsets", starting), ("startingTimestamp", ts),
                             ("startingOffsetsByTimestamp", by_ts)) if v is not None]
    if len(starts) > 1:
        raise ValueError(f"Options {' and '.join(repr(k) for k in starts)} of the amqp "
                         "source are exclusive: give one of them.")
    strategy = parse_choice(o, "startingOffsetsByTimestampStrategy", _ERRORS,
                            ("error", "latest"))
    if strategy is not None and ts is None and by_ts is None:
        raise ValueError("Option 'startingOffsetsByTimestampStrategy' of the amqp source only "
                         "applies with 'startingOffsetsByTimestamp' or 'startingTimestamp'.")
    end_ts = parse_int(o, "endingTimestamp", _ERRORS, minimum=0,
                       note="milliseconds since the epoch")
    end_by_ts = parse_timestamps_spec("endingOffsetsByTimestamp",
                                      o.get("endingoffsetsbytimestamp"), known)
    ends = [k for k, v in (("endingOffsets", ending), ("endingTimestamp", end_ts),
                           ("endingOffsetsByTimestamp", end_by_ts)) if v is not None]
    if len(ends) > 1:
        raise ValueError(f"Options {' and '.join(repr(k) for k in ends)} of the amqp "
                         "source are exclusive: give one of them.")
    prefetch = parse_int(o, "prefetch", _ERRORS, minimum=1, maximum=65535,
                         default=DEFAULT_PREFETCH, note="basic.qos prefetch-count")
    read_timeout = parse_float(o, "readTimeout", _ERRORS, default=DEFAULT_READ_TIMEOUT)
    max_trigger = parse_int(o, "maxMessagesPerTrigger", _ERRORS, minimum=1)
    from .options import parse_pacing

    min_trigger, max_delay = parse_pacing(o, _ERRORS, max_trigger)
    stream_filter = parse_stream_filter(o.get("streamfilter"))
    match_unfiltered = parse_bool(o, "streamMatchUnfiltered", _ERRORS, default=False)
    if "streammatchunfiltered" in o and stream_filter is None:
        raise ValueError("Option 'streamMatchUnfiltered' of the amqp source only applies with "
                         "'streamFilter' (without a filter every row is read).")
    return StreamOptions(
        uri=uri, streams=streams, super_stream=super_stream, starting=starting,
        starting_timestamp_ms=ts, ending=ending, starting_by_timestamp=by_ts,
        starting_timestamp_strategy=strategy, ending_timestamp_ms=end_ts,
        ending_by_timestamp=end_by_ts,
        fail_on_data_loss=parse_bool(o, "failOnDataLoss", _ERRORS, default=True),
        max_messages_per_trigger=max_trigger, min_messages_per_trigger=min_trigger,
        max_trigger_delay=max_delay,
        min_partitions=parse_int(o, "minPartitions", _ERRORS, minimum=1),
        max_messages_per_partition=parse_int(o, "maxMessagesPerPartition", _ERRORS, minimum=1,
                                             default=DEFAULT_MAX_PER_PARTITION),
        prefetch=prefetch, include_headers=parse_bool(o, "includeHeaders", _ERRORS, default=True),
        read_timeout=read_timeout, stream_filter=stream_filter,
        stream_match_unfiltered=match_unfiltered, connection=connection)
