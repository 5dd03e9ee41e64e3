"""A classic or quorum queue's declare arguments, parsed once: :func:`parse_queue_arguments`
turns the ``queue.declare`` argument table into a :class:`QueueArguments` (the queue's limits,
dead-lettering, type and consumer options) or refuses it with RabbitMQ 3.10's texts. Pure, no
I/O. (A stream queue's arguments are :mod:`.stream_queue`'s.)

Errors are 406 PRECONDITION_FAILED without method ids: the connection's dispatcher fills in
those of the method being handled (``queue.declare``, or whatever declared the queue).
Sources: RabbitMQ 3.10.8 ``rabbit_amqqueue.erl`` (``check_*_arg``), ``rabbit_quorum_queue.erl``,
docs "Queues" / "Quorum Queues" / "Priority Queues"; RabbitMQ 4.3's quorum delivery limit
(``rabbit_fifo``: 20 when not set, a negative limit disables it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..protocol.errors import PreconditionFailed

__all__ = ["QueueArguments", "parse_queue_arguments", "OVERFLOW_MODES"]

#: x-overflow values (RabbitMQ docs "Queue Length Limit")
OVERFLOW_MODES = ("drop-head", "reject-publish", "reject-publish-dlx")


@dataclass(frozen=True)
class QueueArguments:
    """What a queue's arguments mean (times in ms, lengths in messages / bytes; None: unset)."""

    ttl_ms: int | None = None
    expires_ms: int | None = None
    max_length: int | None = None
    max_length_bytes: int | None = None
    overflow: str = "drop-head"
    dead_letter_exchange: str | None = None
    dead_letter_routing_key: str | None = None
    queue_type: str = "classic"
    #: a quorum queue's delivery limit (None: none)
    delivery_limit: int | None = None
    single_active_consumer: bool = False
    #: x-max-priority of a classic queue (None: not a priority queue)
    max_priority: int | None = None

    @property
    def quorum(self) -> bool:
        return self.queue_type == "quorum"


def _int(args: dict, name: str) -> int | None:
    v = args.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise PreconditionFailed(f"invalid arg '{name}' for queue: {v!r} is not an integer")
    return v


def _str(args: dict, name: str) -> str | None:
    v = args.get(name)
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return v


def parse_queue_arguments(args: dict[str, Any], name: str, vhost: str,
                          behaviour: Any) -> QueueArguments:
    """The :class:`QueueArguments` of queue ``name`` in ``vhost`` declared with ``args``;
    ``behaviour``: the broker's RabbitMQ version behaviour (``quorum_delivery_limit``, the
    default delivery limit of quorum queues, None for RabbitMQ 3.x). Raises
    ``PreconditionFailed`` (406) naming the argument: not an integer, negative, an unknown
    ``x-overflow``, ``x-dead-letter-routing-key`` without ``x-dead-letter-exchange``,
    ``x-delivery-limit`` on a non-quorum queue, a non-boolean ``x-single-active-consumer``,
    ``x-max-priority`` outside 0..255."""
    where = f"queue '{name}' in vhost '{vhost}'"
    ttl, expires = _int(args, "x-message-ttl"), _int(args, "x-expires")
    max_length, max_length_bytes = _int(args, "x-max-length"), _int(args, "x-max-length-bytes")
    overflow = _str(args, "x-overflow") or "drop-head"
    if overflow not in OVERFLOW_MODES:
        raise PreconditionFailed(f"invalid arg 'x-overflow' for {where}: "
                                 f"'{overflow}' is not one of {', '.join(OVERFLOW_MODES)}")
    if ttl is not None and ttl < 0:
        raise PreconditionFailed(f"invalid arg 'x-message-ttl' for {where}: must be >= 0")
    if expires is not None and expires <= 0:
        raise PreconditionFailed(f"invalid arg 'x-expires' for {where}: must be > 0")
    for a in ("x-max-length", "x-max-length-bytes") + (
            ("x-delivery-limit",) if behaviour.quorum_delivery_limit is None else ()):
        v = args.get(a)
        if isinstance(v, int) and not isinstance(v, bool) and v < 0:
            raise PreconditionFailed(f"invalid arg '{a}' for {where}: {{value_negative,{v}}}")
    dlx = _str(args, "x-dead-letter-exchange")
    dlrk = _str(args, "x-dead-letter-routing-key")
    if dlrk is not None and dlx is None:
        raise PreconditionFailed(f"invalid arg 'x-dead-letter-routing-key' for {where}: "
                                 "routing_key_but_no_dlx_defined")
    queue_type = _str(args, "x-queue-type") or "classic"
    quorum = queue_type == "quorum"
    if "x-delivery-limit" in args and not quorum:
        raise PreconditionFailed(f"invalid arg 'x-delivery-limit' for {where}: "
                                 "only quorum queues support it")
    limit = _int(args, "x-delivery-limit") if quorum else None
    if quorum and behaviour.quorum_delivery_limit is not None:
        if limit is None:
            limit = behaviour.quorum_delivery_limit
        elif limit < 0:
            limit = None
    sac = args.get("x-single-active-consumer")
    if sac is not None and not isinstance(sac, bool):
        raise PreconditionFailed(f"invalid arg 'x-single-active-consumer' for {where}: "
                                 f"{{unacceptable_type,{type(sac).__name__}}}")
    mp = _int(args, "x-max-priority")
    if mp is not None and (mp < 0 or mp > 255):
        raise PreconditionFailed(f"invalid arg 'x-max-priority' for {where}: {mp} is not in 0..255")
    return QueueArguments(ttl, expires, max_length, max_length_bytes, overflow, dlx, dlrk,
                          queue_type, limit, bool(sac) if sac is not None else False,
                          mp if not quorum else None)
