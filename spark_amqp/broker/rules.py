"""Authorization and admission rules shared by every way into the broker.

The AMQP channel (:mod:`.channel`) and the management HTTP API (``spark_amqp.management``)
call these functions for the same operation, so a rule is written once (issue 33: the API
had its own copies, and they drifted). Each raises the AMQP error RabbitMQ 3.10 raises for
the operation; the API maps it to RabbitMQ's HTTP answer (``management/http.py``).

- :func:`check_permission`: configure / write / read on a resource (``Permission.allows``:
  unanchored search as RabbitMQ's ``re:run``, the default exchange checked as
  ``amq.default``); 403 ACCESS_REFUSED.
- :func:`check_queue_declare`, :func:`check_exchange_declare`: configure on the object, and
  for ``x-dead-letter-exchange`` read on the queue and write on the dead-letter exchange, for
  ``alternate-exchange`` read on the exchange and write on the alternate exchange
  (``rabbit_channel:handle_method`` of queue.declare / exchange.declare).
- :func:`check_binding`: bind and unbind alike need write on the destination and read on the
  source (``rabbit_channel:binding_action``), never the default exchange.
- :func:`check_exclusive`: a queue exclusive to another connection (or to any connection, for
  the API, which has none) is 405 RESOURCE_LOCKED (``rabbit_amqqueue:check_exclusive_access``).
- :func:`check_publish`: ``user_id`` must be the authenticated user, the body at most
  ``max_message_size`` bytes (406 PRECONDITION_FAILED, ``rabbit_channel:check_user_id_header``
  and ``check_msg_size``).
- :func:`alarm_reason`: whether a resource alarm (memory, disk) stops publishers now; AMQP
  publishers are blocked (connection.blocked), the API refuses the publish.
- :func:`check_consumer_max`: ``consumer_max_per_channel`` (RabbitMQ 4.x; 530 NOT_ALLOWED).
- :func:`check_name`, :func:`check_routing_key`, :func:`check_arguments` (issue 41): names
  and routing keys are AMQP short strings, at most 255 bytes (0-9-1 §4.2.5.3; RabbitMQ's HTTP
  answer "queue should be less than 255 bytes, actually was 300"), and arguments nest at most
  ``protocol.values.MAX_DEPTH`` (64) levels, the codec's limit. The AMQP codec enforces all
  three on the wire; the management API (declares, bindings, publish, definitions) reaches the
  broker core without it, so the core checks them (before: a 300-byte queue name was taken, a
  long routing key was a 500, and arguments 900 deep broke every list with a RecursionError).

Source: RabbitMQ 3.10 ``rabbit_channel.erl``, ``rabbit_access_control.erl``,
https://www.rabbitmq.com/docs/access-control.
"""

from __future__ import annotations

from typing import Any

from ..protocol.errors import AccessRefused, NotAllowed, PreconditionFailed, ResourceError, ResourceLocked
from ..protocol.values import MAX_DEPTH

__all__ = ["alarm_reason", "check_arguments", "check_binding", "check_consumer_max", "check_name",
           "check_routing_key", "check_exchange_declare", "check_exclusive",
           "check_permission", "check_publish", "check_publish_alarm", "check_queue_declare",
           "DEFAULT_EXCHANGE_RESOURCE"]

#: the name permissions see for the default exchange "" (rabbit_channel:check_resource_access)
DEFAULT_EXCHANGE_RESOURCE = "amq.default"


def check_permission(perm, user: str, vhost: str, kind: str, what: str, name: str,
                     cid: int = 0, mid: int = 0) -> None:
    """``kind`` ("configure" / "write" / "read") on resource ``what`` ("queue" / "exchange")
    ``name`` in ``vhost`` for ``user`` whose permission entry is ``perm`` (``None``: no access).

    Raises :class:`AccessRefused` (403) with RabbitMQ's text "access to exchange 'amq.default'
    in vhost '/' refused for user 'u'".
    """
    if perm is not None and perm.allows(kind, name):
        return
    shown = DEFAULT_EXCHANGE_RESOURCE if name == "" and what == "exchange" else name
    raise AccessRefused(f"access to {what} '{shown}' in vhost '{vhost}' refused for user '{user}'", cid, mid)


def _arg_name(args: dict, key: str, cid: int, mid: int) -> str | None:
    v = (args or {}).get(key)
    if v is None:
        return None
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    # a value of the wrong type is refused by the declare itself (406, vhost.py)
    return v if isinstance(v, str) else None


def check_queue_declare(perm, user: str, vhost: str, name: str, args: dict,
                        cid: int = 50, mid: int = 10) -> None:
    """A (non-passive) queue.declare of ``name`` with ``args``: configure on the queue; with
    ``x-dead-letter-exchange`` also read on the queue and write on that exchange. Raises
    :class:`AccessRefused`."""
    check_permission(perm, user, vhost, "configure", "queue", name, cid, mid)
    dlx = _arg_name(args, "x-dead-letter-exchange", cid, mid)
    if dlx is not None:
        check_permission(perm, user, vhost, "read", "queue", name, cid, mid)
        check_permission(perm, user, vhost, "write", "exchange", dlx, cid, mid)


def check_exchange_declare(perm, user: str, vhost: str, name: str, args: dict,
                           cid: int = 40, mid: int = 10) -> None:
    """A (non-passive) exchange.declare of ``name`` with ``args``: configure on the exchange;
    with ``alternate-exchange`` also read on the exchange and write on the alternate one."""
    check_permission(perm, user, vhost, "configure", "exchange", name, cid, mid)
    ae = _arg_name(args, "alternate-exchange", cid, mid)
    if ae is not None:
        check_permission(perm, user, vhost, "read", "exchange", name, cid, mid)
        check_permission(perm, user, vhost, "write", "exchange", ae, cid, mid)


def check_binding(perm, user: str, vhost: str, source: str, dest_kind: str, dest: str,
                  cid: int, mid: int) -> None:
    """queue/exchange bind *and* unbind: write on the destination (``dest_kind`` "queue" or
    "exchange"), read on the source exchange; the default exchange "" as either end is 403
    "operation not permitted on the default exchange"."""
    if source == "" or (dest_kind == "exchange" and dest == ""):
        raise AccessRefused("operation not permitted on the default exchange", cid, mid)
    check_permission(perm, user, vhost, "write", dest_kind, dest, cid, mid)
    check_permission(perm, user, vhost, "read", "exchange", source, cid, mid)


def check_exclusive(queue, conn, cid: int = 0, mid: int = 0) -> None:
    """Raise 405 :class:`ResourceLocked` when ``queue`` is exclusive to a connection other than
    ``conn`` (``None`` for the management API, which owns no queue)."""
    owner = queue.exclusive_owner
    if owner is not None and owner is not conn:
        raise ResourceLocked(f"cannot obtain exclusive access to locked queue '{queue.name}' in vhost "
                             f"'{queue.vhost.name}'. It could be originally declared on another connection or "
                             f"the exclusive property value does not match that of the original declaration.",
                             cid, mid)


def check_publish(config, user: str, user_id: Any, body_size: int, cid: int = 60, mid: int = 40) -> None:
    """A publish by ``user`` whose ``user_id`` property is ``user_id`` (``None`` = unset) and
    whose body is ``body_size`` bytes. Raises 406 :class:`PreconditionFailed` when ``user_id``
    names someone else or the body exceeds ``config.max_message_size``."""
    if user_id is not None and user_id != user:
        raise PreconditionFailed(f"user_id property set to '{user_id}' but authenticated user was '{user}'",
                                 cid, mid)
    if body_size > config.max_message_size:
        raise PreconditionFailed(f"message size {body_size} is larger than configured max size "
                                 f"{config.max_message_size}", cid, mid)


def alarm_reason(broker) -> str | None:
    """The reason publishers are stopped now ("low on memory", "low on disk"), or ``None``.
    AMQP connections that publish stop being read (``Connection.block``)."""
    if not broker.blocked:
        return None
    return ", ".join(sorted(set(broker.alarms.values()))) or "resource alarm"


def check_publish_alarm(broker, cid: int = 60, mid: int = 40) -> None:
    """Raise 506 :class:`ResourceError` while a resource alarm is on (for publishers that
    cannot be made to wait, such as an HTTP request)."""
    reason = alarm_reason(broker)
    if reason is not None:
        raise ResourceError(f"publishing is blocked by a resource alarm ({reason}); retry when it clears",
                            cid, mid)


#: bytes of an AMQP short string: names of queues, exchanges and vhosts, routing keys
MAX_SHORTSTR = 255


def check_name(what: str, name: str, cid: int = 0, mid: int = 0) -> None:
    """``name`` of a ``what`` ("queue", "exchange", "vhost") must be a string of at most 255
    bytes in UTF-8. Raises 406 :class:`PreconditionFailed` with RabbitMQ's text
    (``rabbit_parameter_validation``): "queue should be less than 255 bytes, actually was 300"."""
    if not isinstance(name, str):
        raise PreconditionFailed(f"{what} name must be a string, got {type(name).__name__}", cid, mid)
    n = len(name.encode("utf-8", "surrogatepass"))
    if n > MAX_SHORTSTR:
        raise PreconditionFailed(f"{what} should be less than {MAX_SHORTSTR} bytes, actually was {n}", cid, mid)


def check_routing_key(routing_key: str, cid: int = 0, mid: int = 0) -> None:
    """A routing key is a string of at most 255 bytes (an AMQP short string). Raises 406
    :class:`PreconditionFailed` ("routing key should be less than 255 bytes, actually was 300")."""
    check_name("routing key", routing_key, cid, mid)


def _depth(value, limit: int) -> bool:
    """True when ``value`` nests tables/arrays (dicts, lists, tuples) deeper than ``limit``."""
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            if d >= limit:
                return True
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, (list, tuple)):
            if d >= limit:
                return True
            stack.extend((x, d + 1) for x in v)
    return False


def check_arguments(arguments, what: str = "arguments", cid: int = 0, mid: int = 0) -> None:
    """``arguments`` (a field table) must nest at most ``MAX_DEPTH`` (64) tables and arrays,
    the AMQP codec's limit. Raises 406 :class:`PreconditionFailed`."""
    if arguments and _depth(arguments, MAX_DEPTH):
        raise PreconditionFailed(f"{what} nested deeper than {MAX_DEPTH} levels (the limit of AMQP field tables)",
                                 cid, mid)


def check_consumer_max(config, consumers: int, cid: int = 60, mid: int = 20) -> None:
    """basic.consume on a channel that has ``consumers`` consumers already: beyond
    ``config.consumer_max_per_channel`` (0 = no limit, RabbitMQ's default ``infinity``) a
    connection error 530 NOT_ALLOWED "reached maximum (N) of consumers per channel", as
    RabbitMQ 4.x (``rabbit_channel`` handle_method basic.consume, ``protocol_error(not_allowed,
    ...)``)."""
    limit = config.consumer_max_per_channel
    if limit and consumers >= limit:
        raise NotAllowed(f"reached maximum ({limit}) of consumers per channel", cid, mid)
