"""Options of the ``amqp`` streaming source: parsing and validation (no I/O).

Spark hands options over as a case-insensitive dict of strings whose keys are lower-cased
(``pyspark.sql.datasource.CaseInsensitiveDict``), so every key below is matched lower-cased and
case-sensitive things (queue arguments) go in values (JSON). Validation happens in
``AmqpDataSource.schema()``/``streamReader()``, i.e. at ``load()``/``start()``, and every error
is a ``ValueError`` that names the option, the value given and the allowed values.

=========================  ===========================================  ========================
option                     meaning                                      default
=========================  ===========================================  ========================
uri                        amqp:// or amqps:// URI (RabbitMQ URI spec)  amqp://guest:guest@
                                                                        localhost:5672/%2F
queue / queues             one queue, or comma-separated queues         (required)
prefetch                   basic.qos prefetch-count per queue; 0 =      see "Default prefetch"
                           unlimited. Above 65535 (the field is a       below
                           short) the source opens several consumers
                           on the queue's channel, each with a share.
                           Caps the rows one trigger can take from the
                           queue (unacked deliveries fill the window)
maxMessagesPerTrigger      cap of rows per micro-batch (ReadMaxRows),   unset (ReadAllAvailable)
                           split fairly across queues
minMessagesPerTrigger      pacing (Kafka's minOffsetsPerTrigger): no    unset (no pacing)
                           batch until this many messages are
                           buffered, or maxTriggerDelay has passed
                           since the last batch, or the batch is full
                           (a cap or the prefetch windows); never
                           with Trigger.AvailableNow. At most
                           maxMessagesPerTrigger and the prefetch
                           windows of all queues
maxTriggerDelay            with minMessagesPerTrigger only: the         15m
                           longest wait between batches when rows
                           are there (Spark's duration syntax: 500ms,
                           30s, 15m, 1h; a bare integer is ms)
maxMessagesPerPartition    split per-queue batches into partitions of   50000
                           at most this many messages
maxBytesPerTrigger         cap of message bytes per micro-batch         16777216 (16 MiB)
                           (ReadMaxBytes when maxMessagesPerTrigger is
                           unset), split fairly across queues; never
                           below one message per queue
maxBytesPerPartition       split per-queue batches into partitions of   4194304 (4 MiB)
                           at most this many bytes (at least one
                           message each)
maxBufferedBytes           the driver stops reading its socket (TCP     33554432 (32 MiB)
                           back-pressure) while it holds more message
                           bytes than this not yet planned into a batch
maxMessageBytes            largest message body accepted: a larger one  the broker's
                           fails the query naming the queue, the size   max_message_size:
                           and this option (nothing acked; the message  advertised by the
                           stays in the queue; on a quorum queue each   embedded broker,
                           failed attempt counts toward its delivery    128 MiB for
                           limit, docs/broker/rabbitmq-versions.md)     RabbitMQ 3.x, else
                                                                        16 MiB (the 4.x
                                                                        default)
maxInlineBytesPerTrigger   bytes of a batch shipped inside its          524288 (512 KiB)
                           partitions (Spark's tasks); the rest
                           is served to the executors by the driver's
                           source runner over a socket until the batch
                           is committed. 0: always served; at least
                           maxBytesPerTrigger: never (executors that
                           cannot reach the driver host)
includeHeaders             fill the ``headers`` column                  true
declare                    queue.declare the queues (else a passive     false
                           declare that fails with 404 if missing)
durable                    durable flag for ``declare``                 true
queueArguments             JSON object of queue arguments for declare   {}
                           (e.g. {"x-queue-type": "quorum"})
addresses                  host[:port],... of the cluster's nodes,      the uri's host(s)
                           replacing the uri's hosts (also written in
                           the uri: amqp://u:p@h1,h2:5673,h3/%2F)
shuffleAddresses           try the addresses in a new random order      true
                           per connection (false: in the order given)
failoverTimeout            seconds of failed reconnects (each one       300
                           trying every address, back-off 0.5 s
                           doubling to 5 s, 30 s with one address)
                           after a lost connection before the query
                           fails with one error listing every address
exchange                   subscribe to this exchange: the source       unset
                           declares ``queue`` (one queue; durable;
                           quorum unless queueArguments says
                           otherwise) and binds it with every
                           bindingKeys key (see "Exchange
                           subscription" below)
exchangeDeclare            with exchange: exchange.declare it           false (passive: it must
                           (exchangeType, exchangeDurable) instead of   exist)
                           checking that it exists
exchangeType               with exchangeDeclare=true: direct |          topic
                           fanout | topic | headers
exchangeDurable            with exchangeDeclare=true: the exchange's    true
                           durable flag
bindingKeys                with exchange: comma-separated binding       one binding, key ""
                           (routing) keys, one queue.bind each          (fanout, headers)
bindingArguments           with exchange: JSON object of arguments of   {}
                           every binding (a headers exchange's
                           {"x-match": "all", "k": "v"})
heartbeat                  heartbeat seconds asked of the broker        client default
                           (a stalled node is found after 2 intervals)
connectionTimeout          socket connect timeout, seconds              client default
cacertfile, certfile,      TLS for amqps:// (passed to the client;      unset
keyfile, verify,           rejected with an amqp:// uri, where they
serverNameIndication       would be silently unused)
failOnDataLoss             fail the query when a queue disappears       true
                           (404 on reconnect) instead of retrying
availableNowIdleTimeout    Trigger.AvailableNow: seconds to wait for    5
                           the snapshotted messages (or a reconnect)
                           before finishing
=========================  ===========================================  ========================

Exchange subscription. Publishers write to exchanges; with ``exchange`` the source owns a
*subscription queue*: at every (re)connect it declares ``queue`` (``durable=true``, ``queue.
declare`` is idempotent) and binds it to the exchange with each of ``bindingKeys``
(``queue.bind`` is idempotent too). The queue is never deleted by the source: messages
published while the query is stopped wait in it and are read after a restart from the
checkpoint (deleting it, when the subscription is over, is the user's call). Its name is the
user's (``queue``, required): a generated name would change with every run and lose what was
published in between. Its type is ``quorum`` unless ``queueArguments`` gives ``x-queue-type``:
a queue that outlives the query is state that must survive a broker restart or a node loss
(quorum queues are replicated and always durable, RabbitMQ docs/quorum-queues.md) and a
quorum queue counts redeliveries (the ``delivery_count`` column, ``x-delivery-limit`` for
poison messages). Its cost is a disk write per message; ``queueArguments={"x-queue-type":
"classic"}`` picks a classic queue. A queue declared before with other arguments is refused by
the broker (406 PRECONDITION_FAILED), which fails the query naming the queue.

Default prefetch (per queue), from the per-queue trigger share ``share = ceil(
maxMessagesPerTrigger / len(queues))``:

* no ``maxMessagesPerTrigger``: 20000, or ``ceil(minMessagesPerTrigger / len(queues))`` when
  that is larger (a minimum the windows cannot hold would always wait the whole delay);
* ``2 * share`` (at least 1000) when that fits one consumer (<= 65535): while Spark runs a
  batch (its deliveries still unacked), the broker can deliver the next batch;
* else 65535 when ``share`` itself fits one consumer: one consumer per queue rather than
  several (RabbitMQ 3.10 on the 2-core development machine, spark-amqp's client draining 200k
  messages of 200 B: one consumer with prefetch 65535 took 15.5k-15.8k msgs/s, four consumers
  with 50000 each 13.4k-14.8k, interleaved, busy machine), at the price of less overlap (the
  window holds ``65535 - share`` deliveries beyond the batch);
* else ``2 * share`` with several consumers.

A ``prefetch`` smaller than the share is allowed: it only caps the batch at the window. It
cannot stall the source (FLINK-23183) because ``latestOffset(start, limit)`` (PySpark 4.2+, the
only versions this package supports) acks the previous batch before planning the next one,
which reopens the window; ``commit(end)`` is not needed for progress.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

from ..connection_options import (CONNECTION_OPTIONS, DEFAULT_URI, parse_connection_options,
                                 parse_uri_option)
from ..option_values import (OptionErrors, parse_bool, parse_choice, parse_duration,
                             parse_float, parse_int, parse_names)

__all__ = ["SourceOptions", "parse_source_options", "parse_pacing", "default_prefetch",
           "DEFAULT_URI",
           "MAX_PREFETCH_PER_CONSUMER"]

#: basic.qos prefetch-count is a short (AMQP 0-9-1 §1.8.3.1), so one consumer gets at most this.
MAX_PREFETCH_PER_CONSUMER = 65535
DEFAULT_PREFETCH = 20000
DEFAULT_MAX_PER_PARTITION = 50000
#: Kafka source's maxTriggerDelay default (spark-sql-kafka: "15m"), in seconds
DEFAULT_MAX_TRIGGER_DELAY = 15 * 60.0
#: Byte limits (bytes are the messages' frames: body + ~60 B framing + properties). A batch
#: travels from the driver's source runner through the driver JVM (which holds a few copies of
#: it while it plans and ships the tasks): 16 MiB keeps that far inside a default 1 GiB heap.
DEFAULT_MAX_BYTES_PER_TRIGGER = 16 * 1024 * 1024
DEFAULT_MAX_BYTES_PER_PARTITION = 4 * 1024 * 1024
DEFAULT_MAX_BUFFERED_BYTES = 32 * 1024 * 1024
#: maxMessageBytes when not set: None = the broker's max_message_size, learnt from its
#: server-properties (spark_amqp.client.broker_limits: 16 MiB, RabbitMQ 4.x's default, when
#: the broker does not tell)
DEFAULT_MAX_MESSAGE_BYTES = None
#: below Spark's 1000 KiB "task of very large size" warning (see docs/source.md "Large messages")
DEFAULT_MAX_INLINE_BYTES_PER_TRIGGER = 512 * 1024

#: Every option the source accepts (lower-cased) -> its spelling in the docs.
KNOWN_OPTIONS = {**{
    k.lower(): k for k in (
        "queue", "queues", "prefetch", "maxMessagesPerTrigger", "maxMessagesPerPartition",
        "maxBytesPerTrigger", "maxBytesPerPartition", "minMessagesPerTrigger", "maxTriggerDelay", "maxBufferedBytes",
        "maxInlineBytesPerTrigger", "maxMessageBytes",
        "includeHeaders", "declare", "durable", "queueArguments", "failOnDataLoss",
        "exchange", "exchangeDeclare", "exchangeType", "exchangeDurable", "bindingKeys",
        "bindingArguments",
        "availableNowIdleTimeout",
    )
}, **CONNECTION_OPTIONS}
#: Options the sink understands and the source ignores are not accepted here: the source fails on
#: any option not in KNOWN_OPTIONS, so typos surface at load()/start().

_ERRORS = OptionErrors(ValueError, subject="the amqp source")
#: stream-mode options a queue-mode read may be given by mistake (stream_options.STREAM_OPTIONS
#: has them all; not imported: stream_options imports this module)
_STREAM_ONLY = {k.lower(): k for k in ("streamFilter", "streamMatchUnfiltered")}


@dataclass(frozen=True)
class SourceOptions:
    """Validated source options (see the module table). Picklable, immutable.

    ``prefetch`` is the per-queue prefetch (0 = unlimited); ``consumers_per_queue`` and
    ``prefetch_per_consumer`` say how it is realised with per-consumer ``basic.qos`` (a short).
    """

    uri: str = DEFAULT_URI
    queues: tuple[str, ...] = ()
    prefetch: int = DEFAULT_PREFETCH
    max_messages_per_trigger: int | None = None
    #: pacing (:mod:`.pacing`): None = no minimum; the delay in seconds
    min_messages_per_trigger: int | None = None
    max_trigger_delay: float = DEFAULT_MAX_TRIGGER_DELAY
    max_messages_per_partition: int = DEFAULT_MAX_PER_PARTITION
    max_bytes_per_trigger: int = DEFAULT_MAX_BYTES_PER_TRIGGER
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES
    max_inline_bytes_per_trigger: int = DEFAULT_MAX_INLINE_BYTES_PER_TRIGGER
    max_message_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES
    include_headers: bool = True
    declare: bool = False
    durable: bool = True
    queue_arguments: dict = field(default_factory=dict)
    #: client keywords from the TLS, heartbeat and connectionTimeout options
    #: (:func:`.connection_options.parse_connection_options`)
    connection: dict = field(default_factory=dict)
    fail_on_data_loss: bool = True
    available_now_idle_timeout: float = 5.0
    #: exchange subscription: None, or the exchange the source's one queue is bound to
    exchange: str | None = None
    exchange_declare: bool = False
    exchange_type: str = "topic"
    exchange_durable: bool = True
    binding_keys: tuple[str, ...] = ("",)
    binding_arguments: dict = field(default_factory=dict)
    #: not an option: the ``(name, nullable)`` columns a user schema selects, None = all
    #: (:func:`.schema.check_user_schema`; set by ``AmqpDataSource.streamReader``)
    columns: tuple | None = None

    @property
    def per_queue_trigger_share(self) -> int | None:
        """``ceil(maxMessagesPerTrigger / len(queues))``, or None without a trigger cap."""
        if self.max_messages_per_trigger is None:
            return None
        return -(-self.max_messages_per_trigger // len(self.queues))

    @property
    def consumers_per_queue(self) -> int:
        """How many consumers per queue channel realise ``prefetch`` (1 when unlimited)."""
        if self.prefetch == 0:
            return 1
        return -(-self.prefetch // MAX_PREFETCH_PER_CONSUMER)

    @property
    def prefetch_per_consumer(self) -> int:
        """The ``basic.qos`` prefetch-count of each consumer (0 = unlimited)."""
        if self.prefetch == 0:
            return 0
        return -(-self.prefetch // self.consumers_per_queue)

    def client_kwargs(self) -> dict:
        """Keyword arguments for ``spark_amqp.client.connect`` besides the URI."""
        return dict(self.connection)


def default_prefetch(share: int | None, min_share: int | None = None) -> int:
    """The default per-queue prefetch for a per-queue trigger share (None = no trigger cap)
    and a per-queue share of ``minMessagesPerTrigger`` (None = unset); see "Default prefetch"
    in the module doc."""
    if share is None:
        return max(DEFAULT_PREFETCH, min_share or 0)
    overlap = max(2 * share, 1000)
    if overlap <= MAX_PREFETCH_PER_CONSUMER or share > MAX_PREFETCH_PER_CONSUMER:
        return overlap
    return MAX_PREFETCH_PER_CONSUMER


def parse_source_options(opts: Mapping[str, str]) -> SourceOptions:
    """Validate Spark's option dict for the source and return :class:`SourceOptions`.

    ``opts``: Spark's ``CaseInsensitiveDict`` (or any mapping; keys are lower-cased here).
    Raises ``ValueError`` naming the option and its allowed values on: an unknown option, a
    missing or empty ``queue``/``queues``, both given, a non-amqp(s) ``uri``, a non-integer or
    out-of-range number, a non-boolean flag, or ``queueArguments`` that is not a JSON object.
    """
    o = {str(k).lower(): v for k, v in opts.items()}
    unknown = sorted(set(o) - set(KNOWN_OPTIONS))
    if unknown:
        streamy = [_STREAM_ONLY[u] for u in unknown if u in _STREAM_ONLY]
        hint = (f" {', '.join(streamy)} {'is an option' if len(streamy) == 1 else 'are options'}"
                " of the stream mode: read a stream with 'stream' or 'superStream'."
                if streamy else "")
        raise ValueError(
            f"Unknown option(s) {', '.join(repr(u) for u in unknown)} for the amqp source; "
            f"known options: {', '.join(sorted(KNOWN_OPTIONS.values()))}.{hint}")

    uri = parse_uri_option(o, ValueError)
    connection = parse_connection_options(o, uri, ValueError)

    if "queue" in o and "queues" in o:
        raise ValueError("Options 'queue' and 'queues' of the amqp source are exclusive: "
                         "give one queue in 'queue' or a comma-separated list in 'queues'.")
    queues = parse_names(o, "queues" if "queues" in o else "queue", _ERRORS, noun="queue")
    if queues is None:
        raise ValueError("The amqp source needs option 'queue' (one queue name) or 'queues' "
                         "(comma-separated queue names).")

    max_trigger = parse_int(o, "maxMessagesPerTrigger", _ERRORS, minimum=1, default=None)
    max_part = parse_int(o, "maxMessagesPerPartition", _ERRORS, minimum=1,
                         default=DEFAULT_MAX_PER_PARTITION)
    share = None if max_trigger is None else -(-max_trigger // len(queues))
    min_trigger, max_delay = parse_pacing(o, _ERRORS, max_trigger)
    min_share = None if min_trigger is None else -(-min_trigger // len(queues))
    prefetch = parse_int(o, "prefetch", _ERRORS, minimum=0,
                         default=default_prefetch(share, min_share))
    if min_trigger is not None and prefetch and min_trigger > prefetch * len(queues):
        raise ValueError(
            f"Option 'minMessagesPerTrigger' of the amqp source ({min_trigger}) is more than "
            f"the prefetch windows can hold ({prefetch} per queue x {len(queues)} queue(s)): "
            "the broker would never deliver that many before a batch, so every batch would "
            "wait maxTriggerDelay. Lower minMessagesPerTrigger or raise 'prefetch' (0 = "
            "unlimited).")

    queue_arguments = _json_object(o, "queueArguments", '{"x-queue-type": "quorum"}')
    sub = _parse_subscription(o, queues, queue_arguments)

    return SourceOptions(
        uri=uri,
        queues=queues,
        prefetch=prefetch,
        max_messages_per_trigger=max_trigger,
        min_messages_per_trigger=min_trigger,
        max_trigger_delay=max_delay,
        max_messages_per_partition=max_part,
        max_bytes_per_trigger=parse_int(o, "maxBytesPerTrigger", _ERRORS, minimum=1,
                                        default=DEFAULT_MAX_BYTES_PER_TRIGGER),
        max_bytes_per_partition=parse_int(o, "maxBytesPerPartition", _ERRORS, minimum=1,
                                          default=DEFAULT_MAX_BYTES_PER_PARTITION),
        max_buffered_bytes=parse_int(o, "maxBufferedBytes", _ERRORS, minimum=1,
                                     default=DEFAULT_MAX_BUFFERED_BYTES),
        max_inline_bytes_per_trigger=parse_int(o, "maxInlineBytesPerTrigger", _ERRORS,
                                               minimum=0,
                                               default=DEFAULT_MAX_INLINE_BYTES_PER_TRIGGER),
        max_message_bytes=parse_int(o, "maxMessageBytes", _ERRORS, minimum=1,
                                    default=DEFAULT_MAX_MESSAGE_BYTES),
        include_headers=parse_bool(o, "includeHeaders", _ERRORS, default=True),
        declare=parse_bool(o, "declare", _ERRORS, default=False) or "exchange" in sub,
        durable=parse_bool(o, "durable", _ERRORS, default=True),
        queue_arguments=sub.pop("queue_arguments", queue_arguments),
        **sub,
        connection=connection,
        fail_on_data_loss=parse_bool(o, "failOnDataLoss", _ERRORS, default=True),
        available_now_idle_timeout=parse_float(o, "availableNowIdleTimeout", _ERRORS,
                                               default=5.0),
    )


def _json_object(o: Mapping[str, str], key: str, example: str) -> dict:
    """Option ``key`` as a JSON object ({} when absent); ``ValueError`` naming it otherwise."""
    raw = o.get(key.lower())
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        value = None
    if not isinstance(value, dict):
        raise _ERRORS.invalid(key, raw, f"a JSON object, e.g. {example}")
    return value


#: exchange.declare types (AMQP 0-9-1 §3.1.3: direct, fanout, topic, headers)
EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")
_SUBSCRIPTION_ONLY = ("exchangeDeclare", "exchangeType", "exchangeDurable", "bindingKeys",
                      "bindingArguments")


def _parse_subscription(o: Mapping[str, str], queues: tuple[str, ...],
                        queue_arguments: dict) -> dict:
    """The exchange-subscription fields of :class:`SourceOptions` ({} without ``exchange``).

    Raises ``ValueError`` naming the option for: a subscription option without ``exchange``,
    ``exchange`` with ``queues`` or several queues or ``declare=false``, ``exchangeType``/
    ``exchangeDurable`` without ``exchangeDeclare=true`` (they would be unused), a type not in
    :data:`EXCHANGE_TYPES`, empty binding keys, a non-object ``bindingArguments``, or an
    ``x-match`` other than all/any/all-with-x/any-with-x (RabbitMQ docs/exchanges.md)."""
    if "exchange" not in o:
        given = [k for k in _SUBSCRIPTION_ONLY if k.lower() in o]
        if given:
            raise ValueError(f"Option(s) {', '.join(given)} of the amqp source only apply with "
                             "option 'exchange' (the exchange the source subscribes to).")
        return {}
    exchange = str(o["exchange"]).strip()
    if not exchange or len(exchange.encode()) > 255:
        raise _ERRORS.invalid("exchange", o["exchange"],
                              "a non-empty exchange name of at most 255 bytes (not the "
                              "default exchange: it needs no binding)")
    if "queues" in o or len(queues) != 1:
        raise ValueError("Option 'exchange' of the amqp source needs exactly one subscription "
                         "queue, named in option 'queue' (a stable name: the queue keeps what is "
                         "published while the query is stopped), not 'queues'.")
    if not parse_bool(o, "declare", _ERRORS, default=True):
        raise ValueError("Option 'exchange' of the amqp source declares and binds the queue: "
                         "it cannot be combined with declare=false.")
    declare = parse_bool(o, "exchangeDeclare", _ERRORS, default=False)
    if not declare:
        unused = [k for k in ("exchangeType", "exchangeDurable") if k.lower() in o]
        if unused:
            raise ValueError(f"Option(s) {', '.join(unused)} of the amqp source only apply with "
                             "exchangeDeclare=true (without it the exchange must exist and is "
                             "only checked).")
    keys = parse_names(o, "bindingKeys", _ERRORS, noun="binding key", default=("",))
    args = _json_object(o, "bindingArguments", '{"x-match": "all", "format": "pdf"}')
    match = args.get("x-match")
    if match is not None and match not in ("all", "any", "all-with-x", "any-with-x"):
        raise _ERRORS.invalid("bindingArguments", o.get("bindingarguments"),
                              'a JSON object whose "x-match" is all | any | all-with-x | '
                              "any-with-x")
    qargs = dict(queue_arguments)
    qargs.setdefault("x-queue-type", "quorum")
    return {
        "exchange": exchange, "exchange_declare": declare,
        "exchange_type": parse_choice(o, "exchangeType", _ERRORS, EXCHANGE_TYPES,
                                      default="topic"),
        "exchange_durable": parse_bool(o, "exchangeDurable", _ERRORS, default=True),
        "binding_keys": keys, "binding_arguments": args, "queue_arguments": qargs,
    }


def parse_pacing(o: Mapping[str, str], errors: OptionErrors,
                 max_trigger: int | None) -> tuple[int | None, float]:
    """``minMessagesPerTrigger`` and ``maxTriggerDelay`` (seconds) of either mode.

    ``o``: the lower-cased options; ``max_trigger``: the parsed ``maxMessagesPerTrigger``.
    Raises ``ValueError`` naming the option for a non-integer or < 1 minimum, a bad duration,
    a minimum above ``maxMessagesPerTrigger`` (no batch could reach it), or ``maxTriggerDelay``
    without ``minMessagesPerTrigger`` (Kafka ignores it there; here it would be silently
    unused).
    """
    min_trigger = parse_int(o, "minMessagesPerTrigger", errors, minimum=1, default=None)
    max_delay = parse_duration(o, "maxTriggerDelay", errors, default=DEFAULT_MAX_TRIGGER_DELAY)
    if min_trigger is None and "maxtriggerdelay" in o:
        raise ValueError(f"Option 'maxTriggerDelay' of {errors.subject} only applies with "
                         "'minMessagesPerTrigger' (the delay bounds the wait for that "
                         "minimum): set minMessagesPerTrigger too, or remove maxTriggerDelay.")
    if min_trigger is not None and max_trigger is not None and min_trigger > max_trigger:
        raise ValueError(f"Option 'minMessagesPerTrigger' of {errors.subject} ({min_trigger}) "
                         f"is above 'maxMessagesPerTrigger' ({max_trigger}): no batch could "
                         "reach the minimum. Allowed: 1 .. maxMessagesPerTrigger.")
    return min_trigger, max_delay
