"""Options of the ``amqp`` streaming source: parsing and validation (no I/O).

Spark hands options over as a case-insensitive dict of strings whose keys are lower-cased
(``pyspark.sql.datasource.CaseInsensitiveDict``), so every key below is matched lower-cased and
case-sensitive things (queue arguments) go in values (JSON). Validation happens in
``AmqpDataSource.schema()``/``streamReader()``, i.e. at ``load()``/``start()``, and every error
is a ``ValueError`` that names the option, the value given and the allowed values.

Every option is one entry of :data:`QUEUE_OPTIONS` (name, kind, default, bounds, doc), which
gives the known options, their parsing and defaults, and the option tables of docs/source.md
and docs/reading-patterns.md (``tests/spark/test_option_tables.py`` checks them); the
connection options (``uri``, TLS, ...) are :mod:`..connection_options`'s, shared with the
stream mode and the sink. Rules between options are in :func:`parse_source_options`.

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
cannot stall the source (FLINK-23183) because ``latestOffset`` acks the previous batch before
planning the next one, which reopens the window (``start`` on PySpark 4.2+; on 4.0/4.1 the end
it returned before, :meth:`.offset_reader.QueueOffsetReader.previous_end`); ``commit(end)`` is
not needed for progress.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

from ...connection_options import (CONNECTION, DEFAULT_URI, ConnectionFields,
                                  ConnectionOptions, parse_connection)
from ...option_values import OptionErrors
from ...options_table import Option, OptionTable, unknown_options_error
from ..pacing import PACING_OPTIONS, parse_pacing

__all__ = ["SourceOptions", "parse_source_options", "default_prefetch",
           "DEFAULT_URI", "QUEUE_OPTIONS", "KNOWN_OPTIONS", "MAX_PREFETCH_PER_CONSUMER"]

#: basic.qos prefetch-count is a short (AMQP 0-9-1 §1.8.3.1), so one consumer gets at most this.
MAX_PREFETCH_PER_CONSUMER = 65535
DEFAULT_PREFETCH = 20000
DEFAULT_MAX_PER_PARTITION = 50000
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
#: exchange.declare types (AMQP 0-9-1 §3.1.3: direct, fanout, topic, headers)
EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")

_ERRORS = OptionErrors(ValueError, subject="the amqp source")

_SUB = "subscription"
#: Every option of the queue mode, in the order of the docs' tables (docs/source.md "Queue mode
#: options": section main; docs/reading-patterns.md: pacing and subscription).
_QUEUE_ENTRIES = (
    CONNECTION["uri"],
    Option("queue", "names", None, "one queue (exclusive with `queues`)",
           "`queue` or `queues` required", noun="queue", field="queues"),
    Option("queues", "names", None, "comma-separated queues; each queue is consumed on its "
           "own channel", "`queue` or `queues` required", noun="queue"),
    Option("maxMessagesPerTrigger", "int", None, "cap of rows per micro-batch (`ReadMaxRows`), "
           "split fairly across queues; `Trigger.AvailableNow` and `ReadAllAvailable` are "
           "honoured", "unset: all buffered", minimum=1),
    Option("prefetch", "int", None, "`basic.qos` prefetch-count per queue (per consumer); "
           "above 65,535 several consumers share the queue's channel; `0`: unlimited. It caps "
           "what one trigger can take from a queue; a value below the per-queue trigger share "
           "is allowed (the previous batch is acked in the next `latestOffset`, which reopens "
           "the window, so it never stalls)",
           "2 × the per-queue trigger share (min 1,000) when that is ≤ 65,535; else 65,535 "
           "when the share is ≤ 65,535 (one consumer per queue); else 2 × the share; 20,000 "
           "without `maxMessagesPerTrigger` (or `minMessagesPerTrigger` per queue when larger)",
           minimum=0),
    Option("maxMessagesPerPartition", "int", DEFAULT_MAX_PER_PARTITION, "split a queue's batch "
           "into partitions of at most this many messages", "50,000", minimum=1),
    Option("maxBytesPerTrigger", "int", DEFAULT_MAX_BYTES_PER_TRIGGER, "cap of message bytes "
           "per micro-batch (the default read limit, `ReadMaxBytes`, when "
           "`maxMessagesPerTrigger` is unset; applied with every limit), split fairly across "
           "queues; never below one message per queue, so a larger message goes alone. Counted "
           "as the messages' frames (bodies + properties + framing, with 1/1024 of the limit "
           "allowed for the framing); see [Large messages](#large-messages)",
           "16 MiB (16777216)", minimum=1),
    Option("maxBytesPerPartition", "int", DEFAULT_MAX_BYTES_PER_PARTITION, "split a queue's "
           "batch into partitions of at most this many bytes (at least one message each)",
           "4 MiB (4194304)", minimum=1),
    Option("maxBufferedBytes", "int", DEFAULT_MAX_BUFFERED_BYTES, "the driver stops reading "
           "its socket (TCP back-pressure; heartbeats go on) while it holds more bytes of "
           "received, not yet planned messages than this", "32 MiB (33554432)", minimum=1),
    Option("maxInlineBytesPerTrigger", "int", DEFAULT_MAX_INLINE_BYTES_PER_TRIGGER, "bytes of "
           "a batch shipped inside its partitions (so inside Spark's tasks); the rest is served "
           "to the executors by the driver's source runner over a socket until the batch is "
           "committed (see [Large messages](#large-messages)). `0`: always served; "
           "`maxBytesPerTrigger` or more: never (when executors cannot reach the driver host)",
           "512 KiB (524288)", minimum=0),
    Option("maxMessageBytes", "int", DEFAULT_MAX_MESSAGE_BYTES, "largest message body the "
           "source accepts: a larger one fails the query with a message naming the queue, the "
           "size and this option; nothing is acked and the message stays in the queue. Raise "
           "it with `spark.driver.memory`/`spark.executor.memory` (a big message goes alone in "
           "its own batch)", "the broker's `max_message_size`: what the embedded broker "
           "advertises, 128 MiB for RabbitMQ 3.x, else 16 MiB (RabbitMQ 4.x's default; see "
           "[RabbitMQ 4.x](broker/rabbitmq-versions.md))", minimum=1),
    Option("includeHeaders", "bool", True, "fill the `headers` column"),
    Option("declare", "bool", False, "`queue.declare` the queues (else a passive declare that "
           "fails with 404 if missing)"),
    Option("durable", "bool", True, "durable flag for `declare`"),
    Option("queueArguments", "custom", None, "JSON object of queue arguments for `declare`, "
           'e.g. `{"x-queue-type": "quorum"}`', "`{}`"),
    CONNECTION["heartbeat"], CONNECTION["connectionTimeout"], CONNECTION["cacertfile"],
    CONNECTION["certfile"], CONNECTION["keyfile"], CONNECTION["verify"],
    CONNECTION["serverNameIndication"],
    Option("failOnDataLoss", "bool", True, "fail the query when a queue disappears (404 on "
           "reconnect) instead of retrying"),
    Option("availableNowIdleTimeout", "duration", 5.0, "`Trigger.AvailableNow`: seconds to wait "
           "for the messages counted at the start, or for a reconnect after a connection loss, "
           "before finishing (or a duration: `500ms`)", plain="seconds"),
    Option("checkpointLocation", "text", None, "PySpark 4.0/4.1: the query's "
           "`checkpointLocation` (a local path), so that the source acks the run's last batch "
           "at stop once the checkpoint has committed it (4.2+ does not need it)"),
    *PACING_OPTIONS,
    Option("exchange", "custom", None, "the exchange to subscribe to: at every (re)connect the "
           "source declares `queue` (durable) and binds it once per binding key (both "
           "idempotent). Needs exactly one `queue`; not with `queues` or `declare=false`",
           section=_SUB),
    Option("exchangeDeclare", "bool", False, "`true`: `exchange.declare` the exchange with "
           "`exchangeType`/`exchangeDurable`; `false`: only check it exists (passive declare; "
           "a missing exchange fails the query naming the option)", section=_SUB),
    Option("exchangeType", "choice", "topic", "with `exchangeDeclare=true`: `direct` | "
           "`fanout` | `topic` | `headers`", section=_SUB, choices=EXCHANGE_TYPES),
    Option("exchangeDurable", "bool", True, "with `exchangeDeclare=true`: the exchange's "
           "durable flag", section=_SUB),
    Option("bindingKeys", "names", ("",), "comma-separated binding keys, one `queue.bind` each "
           "(topic patterns `*`/`#` allowed; a key cannot contain a comma)",
           'one binding with key `""` (what fanout and headers exchanges use)', section=_SUB,
           noun="binding key"),
    Option("bindingArguments", "custom", None, "JSON object, the arguments of every binding; a "
           "headers exchange's `x-match` must be `all`, `any`, `all-with-x` or `any-with-x`",
           "`{}`", section=_SUB),
    CONNECTION["addresses"], CONNECTION["shuffleAddresses"], CONNECTION["failoverTimeout"],
)

#: stream-mode options a queue-mode read may be given by mistake (streams/options.py
#: STREAM_OPTIONS has them all; not imported: the modes' folders do not import each other)
_STREAM_ONLY = {k.lower(): k for k in ("streamFilter", "streamMatchUnfiltered")}


def _stream_hint(keys: list[str]) -> str:
    streamy = [_STREAM_ONLY[u] for u in keys if u in _STREAM_ONLY]
    return (f" {', '.join(streamy)} {'is an option' if len(streamy) == 1 else 'are options'}"
            " of the stream mode: read a stream with 'stream' or 'superStream'."
            if streamy else "")


#: the queue mode's option table
QUEUE_OPTIONS = OptionTable(_QUEUE_ENTRIES, _ERRORS,
                            unknown_options_error("the amqp source", _stream_hint))
#: Every option the source accepts (lower-cased) -> its spelling in the docs. Options the sink
#: understands and the source ignores are not accepted here: the source fails on any option
#: not in KNOWN_OPTIONS, so typos surface at load()/start().
KNOWN_OPTIONS = QUEUE_OPTIONS.known


@dataclass(frozen=True)
@QUEUE_OPTIONS.field_defaults
class SourceOptions(ConnectionFields):
    """Validated source options (see :data:`QUEUE_OPTIONS`: each entry names its field here
    and gives its default). Picklable, immutable.

    ``prefetch`` is the per-queue prefetch (0 = unlimited); ``consumers_per_queue`` and
    ``prefetch_per_consumer`` say how it is realised with per-consumer ``basic.qos`` (a short).
    Durations are seconds. ``uri``, ``connection`` and :meth:`client_kwargs` read :attr:`conn`.
    """

    #: uri and client keywords (:func:`.connection_options.parse_connection`)
    conn: ConnectionOptions = ConnectionOptions()
    queues: tuple[str, ...] = ()
    prefetch: int = DEFAULT_PREFETCH
    max_messages_per_trigger: int | None
    #: pacing (:mod:`..pacing`): None = no minimum; the delay in seconds
    min_messages_per_trigger: int | None
    max_trigger_delay: float
    max_messages_per_partition: int
    max_bytes_per_trigger: int
    max_bytes_per_partition: int
    max_buffered_bytes: int
    max_inline_bytes_per_trigger: int
    max_message_bytes: int | None
    include_headers: bool
    declare: bool
    durable: bool
    queue_arguments: dict = field(default_factory=dict)
    fail_on_data_loss: bool
    available_now_idle_timeout: float
    #: PySpark 4.0/4.1: the query's checkpoint, read at stop (:mod:`..checkpoint`); None = unset
    checkpoint_location: str | None = None
    #: exchange subscription: None, or the exchange the source's one queue is bound to
    exchange: str | None = None
    exchange_declare: bool
    exchange_type: str
    exchange_durable: bool
    binding_keys: tuple[str, ...]
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
    t = QUEUE_OPTIONS
    o = t.lower_checked(opts)
    conn = parse_connection(o, ValueError)

    if "queue" in o and "queues" in o:
        raise ValueError("Options 'queue' and 'queues' of the amqp source are exclusive: "
                         "give one queue in 'queue' or a comma-separated list in 'queues'.")
    queues = t.parse(o, "queues" if "queues" in o else "queue")
    if queues is None:
        raise ValueError("The amqp source needs option 'queue' (one queue name) or 'queues' "
                         "(comma-separated queue names).")

    max_trigger = t.parse(o, "maxMessagesPerTrigger")
    share = None if max_trigger is None else -(-max_trigger // len(queues))
    min_trigger, max_delay = parse_pacing(o, _ERRORS, max_trigger)
    min_share = None if min_trigger is None else -(-min_trigger // len(queues))
    prefetch = t.parse(o, "prefetch", default=default_prefetch(share, min_share))
    if min_trigger is not None and prefetch and min_trigger > prefetch * len(queues):
        raise ValueError(
            f"Option 'minMessagesPerTrigger' of the amqp source ({min_trigger}) is more than "
            f"the prefetch windows can hold ({prefetch} per queue x {len(queues)} queue(s)): "
            "the broker would never deliver that many before a batch, so every batch would "
            "wait maxTriggerDelay. Lower minMessagesPerTrigger or raise 'prefetch' (0 = "
            "unlimited).")

    queue_arguments = _json_object(o, "queueArguments", '{"x-queue-type": "quorum"}')
    sub = _parse_subscription(o, queues, queue_arguments)
    declare = t.parse(o, "declare") or "exchange" in sub
    derived = {"queues": queues, "prefetch": prefetch, "min_messages_per_trigger": min_trigger,
               "max_trigger_delay": max_delay, "declare": declare,
               "queue_arguments": sub.pop("queue_arguments", queue_arguments), **sub}
    return SourceOptions(conn=conn, **t.parse_fields(o, skip=derived), **derived)


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
    t = QUEUE_OPTIONS
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
    if not t.parse(o, "declare", default=True):
        raise ValueError("Option 'exchange' of the amqp source declares and binds the queue: "
                         "it cannot be combined with declare=false.")
    declare = t.parse(o, "exchangeDeclare")
    if not declare:
        unused = [k for k in ("exchangeType", "exchangeDurable") if k.lower() in o]
        if unused:
            raise ValueError(f"Option(s) {', '.join(unused)} of the amqp source only apply with "
                             "exchangeDeclare=true (without it the exchange must exist and is "
                             "only checked).")
    keys = t.parse(o, "bindingKeys")
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
        "exchange_type": t.parse(o, "exchangeType"),
        "exchange_durable": t.parse(o, "exchangeDurable"),
        "binding_keys": keys, "binding_arguments": args, "queue_arguments": qargs,
    }
