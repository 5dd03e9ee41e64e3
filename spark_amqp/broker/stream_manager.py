"""Streams and super streams as the stream protocol manages them (RabbitMQ's
``rabbit_stream_manager.erl``, v3.10.8 and v4.3.5): create and delete streams from protocol
arguments, create and delete super streams, route a key, list partitions, a stream's
topology. Each function answers with the stream protocol's response code
(:class:`~spark_amqp.protocol.stream.Code`); the streams are the broker's stream queues, the
same objects AMQP 0-9-1 clients declare and read.

- ``create_stream``: the protocol arguments (strings) become queue arguments
  (``max-length-bytes`` -> ``x-max-length-bytes`` ...; ``stream_queue_arguments/2``); an
  existing stream with the same arguments is STREAM_ALREADY_EXISTS, with others
  PRECONDITION_FAILED; invalid values are PRECONDITION_FAILED (RabbitMQ 3.10.8's stream
  manager crashes on a non-integer size, ``binary_to_integer``: its client loses the
  connection; here the request gets the code);
- super streams (``create_super_stream/6``): a durable direct exchange with argument
  ``x-super-stream = true``, one stream per partition, bound with the routing keys and the
  binding argument ``x-stream-partition-order``; created over AMQP 0-9-1 the same way
  (RabbitMQ 3.10: ``rabbitmq-streams add_super_stream`` or declares), or with the protocol's
  create/delete super stream commands (3.13+, the 4.3 mode);
- ``route``: the streams the super stream's exchange routes the key to (RabbitMQ lets the
  exchange route: direct exchanges by binding key); ``partitions``: its streams in
  partition order.
"""

from __future__ import annotations

from ..protocol.errors import AMQPError
from ..protocol.stream import Code
from .exchange import Exchange

__all__ = ["create_stream", "delete_stream", "create_super_stream", "delete_super_stream", "route",
           "partitions", "lookup_stream", "stream_arguments", "PARTITION_ORDER"]

PARTITION_ORDER = "x-stream-partition-order"
_INT_ARGS = {"max-length-bytes": "x-max-length-bytes", "stream-max-segment-size-bytes": "x-stream-max-segment-size-bytes",
             "initial-cluster-size": "x-initial-cluster-size"}
_STR_ARGS = {"max-age": "x-max-age", "queue-leader-locator": "x-queue-leader-locator"}
_LOCATORS = ("client-local", "balanced", "random", "least-leaders")


def lookup_stream(vhost, name: str):
    """The stream queue ``name`` of ``vhost``, or None (absent or not a stream)."""
    q = vhost.queues.get(name)
    return q if q is not None and q.stream and not q.deleted else None


def stream_arguments(arguments: dict, filtering: bool = False) -> dict | None:
    """Queue arguments of protocol arguments (``rabbit_stream_manager:stream_queue_arguments``);
    None when a value is invalid (validation_failed). ``filtering``: the 4.3 mode also takes
    ``stream-filter-size-bytes``."""
    out: dict = {"x-queue-type": "stream"}
    ints = dict(_INT_ARGS)
    if filtering:
        ints["stream-filter-size-bytes"] = "x-stream-filter-size-bytes"
    for k, v in (arguments or {}).items():
        if k in ints:
            try:
                n = int(v)
            except (TypeError, ValueError):
                return None
            if k == "initial-cluster-size" and n <= 0:
                return None
            out[ints[k]] = n
        elif k in _STR_ARGS:
            if k == "queue-leader-locator" and v not in _LOCATORS:
                return None
            out[_STR_ARGS[k]] = v
    return out


def create_stream(broker, vhost, name: str, arguments: dict, user: str) -> int:
    """Create stream ``name``; returns the response code (OK, STREAM_ALREADY_EXISTS,
    PRECONDITION_FAILED)."""
    if not _valid_name(name):
        return Code.PRECONDITION_FAILED
    args = stream_arguments(arguments, broker.config.behaviour.stream_filtering)
    if args is None:
        return Code.PRECONDITION_FAILED
    existing = vhost.queues.get(name)
    try:
        q = vhost.declare_queue(None, name, False, True, False, False, args)
    except AMQPError:
        return Code.PRECONDITION_FAILED
    if existing is not None:
        return Code.STREAM_ALREADY_EXISTS if existing.stream else Code.PRECONDITION_FAILED
    return Code.OK if q.stream else Code.PRECONDITION_FAILED


def delete_stream(vhost, name: str) -> int:
    """Delete stream ``name``: OK or STREAM_DOES_NOT_EXIST."""
    q = lookup_stream(vhost, name)
    if q is None:
        return Code.STREAM_DOES_NOT_EXIST
    vhost.delete_queue(q)
    return Code.OK


def _valid_name(name: str) -> bool:
    """``rabbit_stream_utils:enforce_correct_name/1``: no control characters (the name is
    otherwise the queue's, at most 255 bytes)."""
    return bool(name) and len(name.encode()) <= 255 and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)


def super_stream_exchange(vhost, name: str) -> Exchange | None:
    return vhost.exchanges.get(name)


def partitions(vhost, name: str) -> tuple[int, list[str]]:
    """(code, the super stream's streams in partition order): the bindings of exchange
    ``name`` to streams, sorted by their ``x-stream-partition-order`` argument (those without
    it after, in binding order; ``rabbit_stream_utils:sort_partitions/1``)."""
    x = super_stream_exchange(vhost, name)
    if x is None:
        return Code.STREAM_DOES_NOT_EXIST, []
    binds = [b for b in x.bindings if not isinstance(b.destination, Exchange) and b.destination.stream]

    def order(ib):
        i, b = ib
        v = (b.arguments or {}).get(PARTITION_ORDER)
        return (0, v, i) if isinstance(v, int) and not isinstance(v, bool) else (1, 0, i)
    out: list[str] = []
    for _, b in sorted(enumerate(binds), key=order):
        if b.destination.name not in out:
            out.append(b.destination.name)
    return Code.OK, out


def route(vhost, routing_key: str, name: str) -> tuple[int, list[str]]:
    """(code, the streams super stream ``name`` routes ``routing_key`` to)."""
    x = super_stream_exchange(vhost, name)
    if x is None:
        return Code.STREAM_DOES_NOT_EXIST, []
    from .message import Message
    m = Message(name, routing_key, b"\x00\x00", b"")
    out: list[str] = []
    for q in vhost.route(x, routing_key, m):
        if q.stream and q.name not in out:
            out.append(q.name)
    return Code.OK, out


def create_super_stream(broker, vhost, name: str, partition_names: list, binding_keys: list, arguments: dict,
                        user: str) -> int:
    """``rabbit_stream_manager:create_super_stream``: validation (a name, as many binding
    keys as partitions, no exchange ``name`` and no partition queue yet), the exchange, the
    streams, the bindings; rolled back on failure. Returns the code."""
    if (not _valid_name(name) or not partition_names or len(partition_names) != len(binding_keys)
            or not all(_valid_name(p) for p in partition_names) or len(set(partition_names)) != len(partition_names)):
        return Code.PRECONDITION_FAILED
    if name in vhost.exchanges:
        return Code.STREAM_ALREADY_EXISTS
    if any(p in vhost.queues for p in partition_names):
        return Code.STREAM_ALREADY_EXISTS
    if stream_arguments(arguments, broker.config.behaviour.stream_filtering) is None:
        return Code.PRECONDITION_FAILED
    try:
        x = vhost.declare_exchange(name, "direct", False, True, False, False, {"x-super-stream": True})
    except AMQPError:
        return Code.PRECONDITION_FAILED
    made = []
    for p in partition_names:
        code = create_stream(broker, vhost, p, arguments, user)
        if code != Code.OK:
            for q in made:
                delete_stream(vhost, q)
            vhost._remove_exchange(x)
            return code
        made.append(p)
    for order, (p, key) in enumerate(zip(partition_names, binding_keys)):
        vhost.bind(x, vhost.queues[p], key, {PARTITION_ORDER: order})   # durable: stored
    return Code.OK


def delete_super_stream(vhost, name: str) -> int:
    """Delete the super stream's exchange and its partition streams: OK, or
    STREAM_DOES_NOT_EXIST when there is no such exchange."""
    code, streams = partitions(vhost, name)
    if code != Code.OK:
        return code
    x = vhost.exchanges.get(name)
    if x is not None:
        vhost._remove_exchange(x)
    for s in streams:
        delete_stream(vhost, s)
    return Code.OK
