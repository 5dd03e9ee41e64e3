"""A virtual host: its exchanges, queues and bindings, routing and dead-lettering.

Vhosts are fully separated namespaces (RabbitMQ docs "Virtual Hosts"). Every vhost has the
nameless default exchange (direct; every queue is implicitly bound to it with its own name,
0-9-1 spec §3.1.3.1) and the pre-declared ``amq.direct``, ``amq.fanout``, ``amq.topic``,
``amq.headers`` and ``amq.match`` (spec §3.1.3, "MUST pre-declare").

Errors are raised as the typed AMQP errors of :mod:`spark_amqp.protocol.errors`, with reply
texts worded as RabbitMQ 3.10's (checked on the real broker), e.g. 406 "inequivalent arg
'durable' for queue 'q' in vhost '/': received 'true' but current is 'false'".
"""

from __future__ import annotations

import time
from typing import Any

from ..protocol.errors import (AccessRefused, CommandInvalid, InternalError, NotFound,
                               PreconditionFailed, ResourceLocked)
from ..protocol.properties import BasicProperties
from ..protocol.values import Typed
from .exchange import EXCHANGE_TYPES, Binding, Exchange, check_binding_arguments
from .message import Message, route_enc
from .queue import Queue
from .rules import check_arguments, check_exclusive, check_name, check_routing_key
from .stream_queue import STREAM_EQUIV_ARGS, StreamQueue, check_stream_declare
from .versions import transient_nonexcl_denied_text

__all__ = ["VHost"]

_QUEUE_EQUIV_ARGS = ("x-message-ttl", "x-expires", "x-max-length", "x-max-length-bytes",
                     "x-overflow", "x-dead-letter-exchange", "x-dead-letter-routing-key",
                     "x-max-priority", "x-queue-type", "x-delivery-limit", "x-single-active-consumer")


def _b(v: bool) -> str:
    return "true" if v else "false"


class VHost:
    """One virtual host. ``broker`` is the owning :class:`~spark_amqp.broker.server.Broker`."""

    def __init__(self, broker, name: str):
        self.broker = broker
        self.name = name
        self.exchanges: dict[str, Exchange] = {}
        self.queues: dict[str, Queue] = {}
        self.reply_queues: dict[str, Queue] = {}  # direct reply-to pseudo-queues by name
        self.default = Exchange(self, "", "direct", durable=True)
        self.exchanges[""] = self.default
        for n, t in (("amq.direct", "direct"), ("amq.fanout", "fanout"), ("amq.topic", "topic"),
                     ("amq.headers", "headers"), ("amq.match", "headers")):
            self.exchanges[n] = Exchange(self, n, t, durable=True)

    # ------------------------------------------------------------------ lookup
    def get_exchange(self, name: str, cid: int = 0, mid: int = 0) -> Exchange:
        x = self.exchanges.get(name)
        if x is None:
            raise NotFound(f"no exchange '{name}' in vhost '{self.name}'", cid, mid)
        return x

    def get_queue(self, name: str, conn, cid: int = 0, mid: int = 0) -> Queue:
        """The queue ``name`` (404 if missing, 405 if exclusive to another connection than
        ``conn``; ``None``, the management API, owns none: :func:`.rules.check_exclusive`)."""
        q = self.queues.get(name)
        if q is None:
            raise NotFound(f"no queue '{name}' in vhost '{self.name}'", cid, mid)
        check_exclusive(q, conn, cid, mid)
        return q

    # ------------------------------------------------------------------ exchanges
    def declare_exchange(self, name: str, type_: str, passive: bool, durable: bool, auto_delete: bool,
                         internal: bool, arguments: dict) -> Exchange:
        """exchange.declare; raises 404 (passive, missing), 403 (``amq.`` prefix), 406
        (inequivalent), 503 (unknown type, a connection error in RabbitMQ 3.10)."""
        cid, mid = 40, 10
        check_name("exchange", name, cid, mid)
        x = self.exchanges.get(name)
        if name == "":
            # RabbitMQ 3.10: every declare of the default exchange, even passive, is refused
            raise AccessRefused("operation not permitted on the default exchange", cid, mid)
        if passive:
            if x is None:
                raise NotFound(f"no exchange '{name}' in vhost '{self.name}'", cid, mid)
            return x
        if name == "":
            raise AccessRefused(f"operation not permitted on the default exchange", cid, mid)
        if type_ not in EXCHANGE_TYPES:
            # RabbitMQ 3.10 (rabbit_exchange:check_type): "unknown exchange type" for a name
            # that is not an Erlang atom on the node (any name never seen), "invalid" otherwise
            raise CommandInvalid(f"unknown exchange type '{type_}'", cid, mid)
        if x is not None:
            for what, have, got in (("type", x.type, type_), ("durable", x.durable, durable),
                                    ("auto_delete", x.auto_delete, auto_delete), ("internal", x.internal, internal)):
                if have != got:
                    h = have if isinstance(have, str) else _b(have)
                    g = got if isinstance(got, str) else _b(got)
                    raise PreconditionFailed(f"inequivalent arg '{what}' for exchange '{name}' in vhost '{self.name}': "
                                             f"received '{g}' but current is '{h}'", cid, mid)
            # RabbitMQ 3.10 compares only alternate-exchange among the arguments
            have_ae, got_ae = _norm(x.arguments.get("alternate-exchange")), _norm((arguments or {}).get("alternate-exchange"))
            if have_ae != got_ae:
                raise PreconditionFailed(f"inequivalent arg 'alternate-exchange' for exchange '{name}' in vhost "
                                         f"'{self.name}': received {_describe(got_ae)} but current is {_describe(have_ae)}",
                                         cid, mid)
            return x
        if name.startswith("amq."):
            raise AccessRefused(f"exchange name '{name}' contains reserved prefix 'amq.*'", cid, mid)
        check_arguments(arguments, "exchange arguments", cid, mid)
        x = Exchange(self, name, type_, durable, auto_delete, internal, arguments)
        self.exchanges[name] = x
        if durable:
            self.broker.store.save_exchange(self.name, x)
        return x

    def delete_exchange(self, name: str, if_unused: bool) -> None:
        """exchange.delete; missing → ok (RabbitMQ), ``amq.*`` → 403, if-unused with bindings → 406."""
        cid, mid = 40, 20
        if name == "":
            raise AccessRefused("operation not permitted on the default exchange", cid, mid)
        if name.startswith("amq."):
            raise AccessRefused(f"deletion of system exchange '{name}' in vhost '{self.name}'"
                                if name in ("amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match")
                                else f"exchange name '{name}' contains reserved prefix 'amq.*'", cid, mid)
        x = self.exchanges.get(name)
        if x is None:
            return
        if if_unused and x.bindings:
            raise PreconditionFailed(f"exchange '{name}' in vhost '{self.name}' in use", cid, mid)
        self._remove_exchange(x)

    def _remove_exchange(self, x: Exchange) -> None:
        self.exchanges.pop(x.name, None)
        for b in list(x.bindings):
            if isinstance(b.destination, Exchange):
                try:
                    b.destination.incoming.remove(b)
                except ValueError:
                    pass
        for b in list(x.incoming):
            b.source.remove_binding(b)
            self._maybe_autodelete_exchange(b.source)
        x.bindings = []
        x.incoming = []
        if x.durable:
            self.broker.store.delete_exchange(self.name, x.name)

    def _maybe_autodelete_exchange(self, x: Exchange) -> None:
        if x.auto_delete and x.had_bindings and not x.bindings and x.name in self.exchanges:
            self._remove_exchange(x)

    # ------------------------------------------------------------------ queues
    def declare_queue(self, conn, name: str, passive: bool, durable: bool, exclusive: bool,
                      auto_delete: bool, arguments: dict, server_named: bool = False) -> Queue:
        """queue.declare; returns the queue (new or existing). Raises 404/403/405/406."""
        cid, mid = 50, 10
        check_name("queue", name, cid, mid)
        if passive:
            q = self.get_queue(name, conn, cid, mid)
            q.touch()
            return q
        if name.startswith("amq.") and not server_named:
            # RabbitMQ 3.10 refuses a non-passive declare of any amq.* name, even an existing one
            raise AccessRefused(f"queue name '{name}' contains reserved prefix 'amq.*'", cid, mid)
        bhv = self.broker.config.behaviour
        if not bhv.classic_queue_v1:
            _check_queue_version_4(name, self.name, arguments or {}, cid, mid)
        if not bhv.transient_nonexcl_queues and not durable and not exclusive:
            # RabbitMQ 4.3 (rabbit_amqqueue:declare at v4.3.0, is_queue_args_combination_permitted):
            # the deprecated feature transient_nonexcl_queues is denied_by_default, and the
            # refusal is {protocol_error, internal_error, ...}: connection.close 541
            raise InternalError(transient_nonexcl_denied_text(), cid, mid)
        q = self.queues.get(name)
        if q is not None:
            if q.exclusive_owner is not None and q.exclusive_owner is not conn:
                self.get_queue(name, conn, cid, mid)  # raises 405
            for what, have, got in (("durable", q.durable, durable), ("exclusive", q.exclusive_owner is not None, exclusive),
                                    ("auto_delete", q.auto_delete, auto_delete)):
                if have != got:
                    if what == "exclusive":
                        # RabbitMQ 3.10 answers 405 RESOURCE_LOCKED, even on the declaring connection
                        raise ResourceLocked(f"cannot obtain exclusive access to locked queue '{name}' in vhost "
                                             f"'{self.name}'. It could be originally declared on another connection "
                                             f"or the exclusive property value does not match that of the original "
                                             f"declaration.", cid, mid)
                    raise PreconditionFailed(f"inequivalent arg '{what}' for queue '{name}' in vhost '{self.name}': "
                                             f"received '{_b(got)}' but current is '{_b(have)}'", cid, mid)
            for a in (_QUEUE_EQUIV_ARGS + STREAM_EQUIV_ARGS if q.stream else _QUEUE_EQUIV_ARGS):
                have, got = q.arguments.get(a), (arguments or {}).get(a)
                if a == "x-queue-type":
                    differ = _norm(have or "classic") != _norm(got or "classic")
                else:
                    differ = _norm(have) != _norm(got)
                if differ:
                    raise PreconditionFailed(f"inequivalent arg '{a}' for queue '{name}' in vhost '{self.name}': "
                                             f"received {_describe(got)} but current is {_describe(have)}", cid, mid)
            q.touch()
            return q
        args = arguments or {}
        check_arguments(args, "queue arguments", cid, mid)
        qt = args.get("x-queue-type")
        if isinstance(qt, bytes):
            qt = qt.decode()
        if qt is not None and qt not in ("classic", "quorum", "stream"):
            raise PreconditionFailed(f"invalid arg 'x-queue-type' for queue '{name}' in vhost '{self.name}': "
                                     f"'{qt}' is not one of classic, quorum, stream", cid, mid)
        if qt == "stream":
            check_stream_declare(name, self.name, durable, exclusive, auto_delete, args)
        if qt == "quorum":
            if not durable:
                raise PreconditionFailed(f"invalid property 'non-durable' for queue '{name}' in vhost '{self.name}'", cid, mid)
            if exclusive:
                raise PreconditionFailed(f"invalid property 'exclusive-owner' for queue '{name}' in vhost '{self.name}'", cid, mid)
            if auto_delete:
                raise PreconditionFailed(f"invalid property 'auto-delete' for queue '{name}' in vhost '{self.name}'", cid, mid)
            if "x-max-priority" in args:
                raise PreconditionFailed(f"invalid arg 'x-max-priority' for queue '{name}' in vhost '{self.name}' "
                                         f"of queue type rabbit_quorum_queue", cid, mid)
        q = new_queue(self.broker, self, name, durable, conn if exclusive else None, auto_delete, args)
        self.queues[name] = q
        if exclusive and conn is not None:
            conn.exclusive_queues.append(q)
        if durable and not exclusive:
            self.broker.store.save_queue(self.name, q)
        return q

    def delete_queue(self, q: Queue, reason: str = "deleted") -> int:
        """Remove ``q``: cancel its consumers (basic.cancel to capable clients), drop its
        bindings and messages. Returns the ready-message count (queue.delete-ok)."""
        if q.deleted:
            return 0
        n = 0 if q.stream else q.message_count   # RabbitMQ 3.10.8: delete-ok of a stream says 0
        q.deleted = True
        self.broker.stats.retire(q)
        q.cancel_timers()
        self.queues.pop(q.name, None)
        for c in list(q.consumers):
            c.channel.consumer_cancelled_by_server(c)
        q.consumers = []
        for x in list(self.exchanges.values()):
            if x.remove_destination(q):
                self._maybe_autodelete_exchange(x)
        q.purge()
        if q.durable and q.exclusive_owner is None:
            self.broker.store.delete_queue(self.name, q.name)
        if q.exclusive_owner is not None:
            try:
                q.exclusive_owner.exclusive_queues.remove(q)
            except (ValueError, AttributeError):
                pass
        return n

    # ------------------------------------------------------------------ bindings
    def bind(self, source: Exchange, destination: Any, routing_key: str, arguments: dict) -> None:
        """Add a binding (duplicates are ignored); 406 for invalid headers arguments, a
        routing key over 255 bytes or arguments nested too deep (:mod:`.rules`)."""
        check_routing_key(routing_key)
        check_arguments(arguments, "binding arguments")
        check_binding_arguments(source.type, arguments)
        b = Binding(source, destination, routing_key, arguments or {})
        if source.add_binding(b):
            if isinstance(destination, Exchange):
                destination.incoming.append(b)
            if source.durable and destination.durable and not getattr(destination, "exclusive_owner", None):
                self.broker.store.save_binding(self.name, source.name, destination.name,
                                               "exchange" if isinstance(destination, Exchange) else "queue",
                                               routing_key, arguments)

    def unbind(self, source: Exchange, destination: Any, routing_key: str, arguments: dict) -> None:
        b = source.find_binding(destination, routing_key, arguments or {})
        if b is None:
            return
        source.remove_binding(b)
        if isinstance(destination, Exchange):
            try:
                destination.incoming.remove(b)
            except ValueError:
                pass
        if source.durable and destination.durable:
            self.broker.store.delete_binding(self.name, source.name, destination.name,
                                             "exchange" if isinstance(destination, Exchange) else "queue",
                                             routing_key, arguments)
        self._maybe_autodelete_exchange(source)

    # ------------------------------------------------------------------ routing
    def route(self, x: Exchange, routing_key: str, msg: Message) -> list[Queue]:
        """Queues a message published to ``x`` with ``routing_key`` goes to (each at most
        once), following exchange-to-exchange bindings and alternate exchanges
        (RabbitMQ: an exchange whose own bindings give no destination uses its AE)."""
        if x is self.default:
            q = self.queues.get(routing_key)
            if q is None and self.reply_queues and routing_key.startswith("amq.rabbitmq.reply-to."):
                q = self.reply_queues.get(routing_key)
            return [q] if q is not None else []
        return self._route(x, routing_key, msg)

    def route_with_cc(self, x: Exchange, routing_key: str, msg: Message) -> list[Queue]:
        """:meth:`route`, plus RabbitMQ's sender-selected distribution: the ``CC`` and ``BCC``
        headers (arrays of strings) add routing keys; ``BCC`` is removed from the message
        (rabbitmq.com/sender-selected.html)."""
        headers = msg.props.headers or {}
        extra = []
        for h in ("CC", "BCC"):
            v = headers.get(h)
            if isinstance(v, list):
                extra.extend(_s(k) for k in v if isinstance(k, (str, bytes)))
        queues = self.route(x, routing_key, msg)
        for k in extra:
            for q in self.route(x, k, msg):
                if q not in queues:
                    queues.append(q)
        if "BCC" in headers:
            props = BasicProperties(**msg.props.as_dict())
            h = dict(headers)
            del h["BCC"]
            props.headers = h
            msg.set_props(props)
        return queues

    def _route(self, x: Exchange, routing_key: str, msg: Message) -> list[Queue]:
        headers_fn = lambda: msg.props.headers  # noqa: E731
        dests = x.route(routing_key, headers_fn)
        if not dests and x.alternate is not None:
            ae = self.exchanges.get(x.alternate)
            dests = (ae,) if ae is not None else ()
        if len(dests) == 1 and type(dests[0]) in _QUEUE_TYPES:
            return [dests[0]]
        queues: list[Queue] = []
        seen_x = {id(x)}
        work = list(dests)
        while work:
            d = work.pop(0)
            if type(d) in _QUEUE_TYPES:
                if d not in queues:
                    queues.append(d)
                continue
            if id(d) in seen_x:
                continue
            seen_x.add(id(d))
            if d is self.default:
                q = self.queues.get(routing_key)
                if q is not None and q not in queues:
                    queues.append(q)
                continue
            sub = d.route(routing_key, headers_fn)
            if not sub and d.alternate is not None:
                ae = self.exchanges.get(d.alternate)
                sub = (ae,) if ae is not None else ()
            work.extend(sub)
        return queues

    def dead_letter(self, q: Queue, msg: Message, reason: str) -> None:
        """Republish ``msg`` to the queue's dead-letter exchange with an ``x-death`` header
        like RabbitMQ's (count, reason, queue, time, exchange, routing-keys; plus
        x-first-death-* headers). Per-message expiration is removed (kept in x-death as
        original-expiration). A missing DLX drops the message (RabbitMQ does the same)."""
        dlx = self.exchanges.get(q.dlx or "")
        if dlx is None or q.dlx is None:
            return
        p = msg.props
        props = BasicProperties(**p.as_dict())
        headers = dict(props.headers or {})
        rks = [msg.routing_key]
        v4 = not self.broker.config.behaviour.interpret_published_x_death
        if v4 and not msg.dead_lettered:
            # RabbitMQ 4.x keeps deaths as message annotations and does not interpret an
            # x-death header a client (re-)published: the broker's own deaths replace it
            # (mc_amqpl is_internal_header / deaths_to_headers at v4.3.0; release-notes/4.0.1.md)
            for k in ("x-death", "x-first-death-reason", "x-first-death-queue", "x-first-death-exchange",
                      "x-last-death-reason", "x-last-death-queue", "x-last-death-exchange"):
                headers.pop(k, None)
        deaths = list(headers.get("x-death") or [])
        entry = None
        for i, d in enumerate(deaths):
            if isinstance(d, dict) and _s(d.get("queue")) == q.name and _s(d.get("reason")) == reason:
                entry = deaths.pop(i)
                break
        if entry is None:
            entry = {"count": 0, "reason": reason, "queue": q.name, "time": Typed("T", int(time.time())),
                     "exchange": msg.exchange, "routing-keys": rks}
            if reason == "expired" and props.expiration is not None:
                entry["original-expiration"] = props.expiration
        entry = dict(entry)
        c = entry.get("count", 0)
        entry["count"] = Typed("l", int(c.value if isinstance(c, Typed) else c) + 1)
        deaths.insert(0, entry)
        headers["x-death"] = deaths
        if "x-first-death-reason" not in headers:
            headers["x-first-death-reason"] = reason
            headers["x-first-death-queue"] = q.name
            headers["x-first-death-exchange"] = msg.exchange
        if v4:   # 3.13+ (mc.erl record_death at v4.3.0)
            headers["x-last-death-reason"] = reason
            headers["x-last-death-queue"] = q.name
            headers["x-last-death-exchange"] = msg.exchange
        headers.pop("x-delivery-count", None)
        headers.pop("x-acquired-count", None)
        props.headers = headers
        if reason == "expired":
            props.expiration = None
        rk = q.dlrk if q.dlrk is not None else msg.routing_key
        new = Message(q.dlx, rk, b"", msg.body, props)
        new.dead_lettered = True
        new.set_props(props)
        new.enc = route_enc(q.dlx, rk)
        new.ttl_ms = None if reason == "expired" else new.ttl_ms
        targets = self.route(dlx, rk, new)
        # RabbitMQ drops a message that would cycle back to the same queue for a non-rejected reason
        if reason != "rejected" and q in targets and q.dlx is not None:
            targets = [t for t in targets if t is not q]
        self.broker.enqueue(targets, new)


_QUEUE_TYPES = (Queue, StreamQueue)


def new_queue(broker, vhost: VHost, name: str, durable: bool, exclusive_owner, auto_delete: bool,
              arguments: dict) -> Queue:
    """A :class:`Queue`, or a :class:`StreamQueue` when ``x-queue-type`` is ``stream``
    (declare and recovery). Raises PreconditionFailed (406) for invalid arguments."""
    qt = _norm((arguments or {}).get("x-queue-type"))
    cls = StreamQueue if qt == "stream" else Queue
    return cls(broker, vhost, name, durable, exclusive_owner, auto_delete, arguments)


def _check_queue_version_4(name: str, vhost: str, args: dict, cid: int, mid: int) -> None:
    """RabbitMQ 4.3 removed classic queues v1 (release-notes/4.3.0.md; commit a67de22527):
    ``x-queue-version`` other than 2 on a classic queue is 406 "invalid arg 'x-queue-version'
    for queue 'q' in vhost '/': \"unsupported queue version '1'\"" (rabbit_amqqueue
    ``check_queue_version``, the error printed with ``~255p``). ``x-queue-mode`` is still
    accepted at tag v4.3.0 (it stays in rabbit_classic_queue's queue_arguments and has no
    validator left), whatever the release notes say."""
    v = args.get("x-queue-version")
    qt = _norm(args.get("x-queue-type") or "classic")
    if v is None or qt != "classic" or isinstance(v, bool) or not isinstance(v, int) or v == 2:
        return
    what = f"{{value_negative,{v}}}" if v < 0 else f'"unsupported queue version \'{v}\'"'
    raise PreconditionFailed(f"invalid arg 'x-queue-version' for queue '{name}' in vhost '{vhost}': {what}",
                             cid, mid)


def _s(v: Any) -> Any:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def _norm(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


def _norm_args(d: dict | None) -> dict:
    return {k: _norm(v) for k, v in (d or {}).items()}


def _describe(v: Any) -> str:
    if v is None:
        return "none"
    v = _norm(v)
    if isinstance(v, str):
        return f"the value '{v}' of type 'longstr'"
    if isinstance(v, bool):
        return f"the value '{_b(v)}' of type 'bool'"
    return f"the value '{v}' of type 'long'"
