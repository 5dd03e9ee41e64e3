"""JSON views of broker objects, shaped as RabbitMQ's management API sends them.

Each ``*_view`` function takes a live broker object (read on the broker's event loop, never
changed) and returns a dict of JSON values with RabbitMQ 3.10's keys (fields documented in
``rabbitmq_management/priv/www/api/index.html``; values checked against the real plugin by
``tests/management/test_differential.py``). Keys whose value is node-specific in RabbitMQ
(``node``, ``memory``, garbage collection, ...) are given where they mean something here.

Rates (``*_details: {"rate": msgs/s}``) come from :class:`.rates.Sampler` (RabbitMQ's
default 5 s statistics interval).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import socket
import weakref
from typing import Any
from urllib.parse import quote

from ..broker.config import User
from ..broker.exchange import Exchange
from ..broker.passwords import DEFAULT_HASHING_ALGORITHM, hash_password
from ..protocol.values import Typed

__all__ = ["jsonable", "queue_view", "exchange_view", "binding_views", "connection_view",
           "channel_view", "consumer_view", "properties_key", "connection_name", "node_name",
           "user_view", "MESSAGE_STAT_KEYS", "RABBITMQ_COMPAT_VERSION", "rabbitmq_version"]

#: the RabbitMQ release whose behaviour the broker and this API follow
RABBITMQ_COMPAT_VERSION = "3.10.8"  # the release whose API's JSON fields these views copy


def rabbitmq_version(broker) -> str:
    """The RabbitMQ release ``broker`` behaves like, as RabbitMQ reports its own version
    (``"4.3.5"`` by default, ``"3.10.8"`` with ``rabbitmq_version="3.10"``:
    :attr:`spark_amqp.broker.versions.Behaviour.release`): the overview's ``rabbitmq_version``
    and ``management_version``, the definitions' ``rabbit_version``, ``/metrics``'s
    ``rabbitmq_build``. The JSON fields stay RabbitMQ 3.10.8's
    (:data:`RABBITMQ_COMPAT_VERSION`)."""
    return broker.config.behaviour.release

#: counters of a queue's message_stats and the Queue attributes they come from
MESSAGE_STAT_KEYS = {"publish": "stat_publish", "deliver": "stat_deliver", "get": "stat_get",
                     "ack": "stat_ack", "redeliver": "stat_redeliver"}


@functools.lru_cache(maxsize=1)
def node_name() -> str:
    """``spark-amqp@<hostname>`` (RabbitMQ's ``rabbit@<hostname>``)."""
    return f"spark-amqp@{socket.gethostname()}"


def jsonable(v: Any) -> Any:
    """AMQP field values as JSON values: bytes → str (UTF-8, replacement characters),
    :class:`Typed` → its value, tables → objects, arrays → lists; timestamps stay ints."""
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, Typed):
        return jsonable(v.value)
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if hasattr(v, "timestamp"):
        return int(v.timestamp())
    return str(v)


_ZERO = {"rate": 0.0}
_NO_RATES: dict = {}
#: per queue object: the part of its view that does not change (built once, copied per request)
_STATIC: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _rate(rates: dict, k: str) -> dict:
    r = rates.get(k)
    return {"rate": r} if r else _ZERO


def queue_message_stats(q, rates: dict | None) -> dict:
    """``message_stats`` of a queue: publish, deliver, get, deliver_get, ack, redeliver, each
    with ``<name>_details: {"rate": msgs/s}``."""
    r = rates or _NO_RATES
    deliver, get = q.stat_deliver, q.stat_get
    return {"publish": q.stat_publish, "publish_details": _rate(r, "publish"),
            "deliver": deliver, "deliver_details": _rate(r, "deliver"),
            "get": get, "get_details": _rate(r, "get"),
            "deliver_get": deliver + get, "deliver_get_details": _rate(r, "deliver_get"),
            "ack": q.stat_ack, "ack_details": _rate(r, "ack"),
            "redeliver": q.stat_redeliver, "redeliver_details": _rate(r, "redeliver")}


def _queue_static(q) -> dict:
    d = _STATIC.get(q)
    if d is None:
        qtype = q.queue_type
        d = {"name": q.name, "vhost": q.vhost.name, "type": qtype, "durable": q.durable,
             "auto_delete": q.auto_delete, "exclusive": q.exclusive_owner is not None,
             "arguments": jsonable(q.arguments), "state": "running", "node": node_name(),
             "consumer_utilisation": None, "consumer_capacity": 0, "message_bytes_unacknowledged": 0,
             "messages_persistent": 0, "policy": None}
        if qtype in ("quorum", "stream"):
            d["leader"] = d["node"]
            d["members"] = [d["node"]]
            d["online"] = [d["node"]]
        _STATIC[q] = d
    return d


def queue_view(q, sampler=None) -> dict:
    """A queue as ``GET /api/queues/{vhost}/{name}`` shows it (about 45 keys; the fixed ones
    are built once per queue, the counts on every call: O(1) per queue)."""
    ready = len(q.ready)
    unacked = q.unacked_count
    rates = sampler.queue_rates(q) if sampler is not None else _NO_RATES
    d = dict(_queue_static(q))
    nbytes = q.ready_bytes
    consumers = q.consumers
    d["messages"] = ready + unacked
    d["messages_ready"] = ready
    d["messages_unacknowledged"] = unacked
    d["messages_details"] = _rate(rates, "messages")
    d["messages_ready_details"] = _rate(rates, "messages_ready")
    d["messages_unacknowledged_details"] = _rate(rates, "messages_unacknowledged")
    d["consumers"] = len(consumers)
    d["message_bytes"] = d["message_bytes_ready"] = d["memory"] = nbytes
    d["exclusive_consumer_tag"] = d["single_active_consumer_tag"] = None
    if consumers:
        ex = q.exclusive_consumer()
        d["exclusive_consumer_tag"] = ex.tag if ex is not None else None
        if q.single_active:
            d["single_active_consumer_tag"] = consumers[0].tag
    owner = q.exclusive_owner
    if owner is not None:
        d["owner_pid_details"] = {"name": connection_name(owner)}
    if q.stat_publish or q.stat_deliver or q.stat_get or q.stat_ack or q.stat_redeliver:
        # RabbitMQ shows message_stats once messages flowed
        d["message_stats"] = queue_message_stats(q, rates)
    for attr in ("committed_offset", "segments"):   # stream queues, once the broker has them
        v = getattr(q, attr, None)
        if v is not None:
            d[attr] = v
    return d


def exchange_view(x: Exchange) -> dict:
    """An exchange as ``GET /api/exchanges/{vhost}/{name}`` shows it (the default exchange
    is named ``""``)."""
    return {
        "name": x.name,
        "vhost": x.vhost.name,
        "type": x.type,
        "durable": x.durable,
        "auto_delete": x.auto_delete,
        "internal": x.internal,
        "arguments": jsonable(x.arguments),
        "user_who_performed_action": "rmq-internal" if x.name == "" or x.name.startswith("amq.") else "",
    }


def _quote_key(s: str) -> str:
    # rabbit_mgmt_format:quote_binding - percent-encode, '~' is the separator
    return quote(s, safe="").replace("~", "%7E")


def properties_key(routing_key: str, arguments: dict | None) -> str:
    """The ``properties_key`` naming a binding in ``/api/bindings/.../{props}`` URIs:
    ``~`` for an empty key without arguments, the percent-encoded key, and ``key~hash`` with
    arguments (the hash is our own: a short digest of the arguments; RabbitMQ's differs, so
    take properties_key from a listing, as rabbitmqadmin does)."""
    if not arguments:
        return _quote_key(routing_key) if routing_key else "~"
    blob = json.dumps(jsonable(arguments), sort_keys=True).encode()
    h = base64.urlsafe_b64encode(hashlib.md5(blob).digest()[:6]).decode().rstrip("=")
    return f"{_quote_key(routing_key)}~{h}"


def _binding(vhost: str, source: str, dest: str, dtype: str, rk: str, args: dict) -> dict:
    return {"source": source, "vhost": vhost, "destination": dest, "destination_type": dtype,
            "routing_key": rk, "arguments": jsonable(args), "properties_key": properties_key(rk, args)}


def binding_views(vhost, *, source=None, destination=None, dtype: str | None = None) -> list[dict]:
    """The bindings of ``vhost`` (a VHost) as ``GET /api/bindings/{vhost}`` lists them: the
    default exchange's implicit binding to every queue first, then each exchange's, in
    declaration order; optionally only those from exchange ``source`` and/or to
    ``destination`` (a Queue or Exchange; ``dtype`` "queue"/"exchange")."""
    out: list[dict] = []
    v = vhost.name
    if source is None or source is vhost.default:
        for q in vhost.queues.values():
            if destination is None or destination is q:
                out.append(_binding(v, "", q.name, "queue", q.name, {}))
    for x in vhost.exchanges.values():
        if x is vhost.default or (source is not None and x is not source):
            continue
        for b in x.bindings:
            d = b.destination
            if destination is not None and d is not destination:
                continue
            kind = "exchange" if isinstance(d, Exchange) else "queue"
            if dtype is not None and kind != dtype:
                continue
            out.append(_binding(v, x.name, d.name, kind, b.routing_key, b.arguments))
    return out


def connection_name(conn) -> str:
    """RabbitMQ's connection name: ``"<peer host>:<port> -> <our host>:<port>"``."""
    name = getattr(conn, "_mgmt_name", None)
    if name is None:
        t = conn.transport
        sock = t.get_extra_info("sockname") if t is not None else None
        local = f"{sock[0]}:{sock[1]}" if sock else "?"
        name = f"{conn.peer} -> {local}"
        try:
            conn._mgmt_name = name
        except AttributeError:  # pragma: no cover - slotted subclass
            pass
    return name


def _host_port(s: str) -> tuple[str, int | None]:
    host, _, port = s.rpartition(":")
    try:
        return host, int(port)
    except ValueError:
        return s, None


def connection_view(conn) -> dict:
    """A client connection as ``GET /api/connections/{name}`` shows it."""
    name = connection_name(conn)
    peer, _, local = name.partition(" -> ")
    ph, pp = _host_port(peer)
    lh, lp = _host_port(local)
    t = conn.transport
    tls = t is not None and t.get_extra_info("sslcontext") is not None
    return {
        "name": name,
        "node": node_name(),
        "type": "network",
        "state": "running" if conn.state == "opened" else ("closing" if conn.state in ("closing", "closed") else "starting"),
        "user": conn.user,
        "user_who_performed_action": conn.user,
        "vhost": conn.vhost.name if conn.vhost is not None else None,
        "channels": len(conn.channels),
        "channel_max": conn.channel_max,
        "frame_max": conn.frame_max,
        "timeout": conn.heartbeat,
        "protocol": "AMQP 0-9-1",
        "auth_mechanism": getattr(conn, "mechanism", None) or "PLAIN",
        "ssl": bool(tls),
        "peer_host": ph, "peer_port": pp, "host": lh, "port": lp,
        "client_properties": jsonable(conn.client_properties),
        "connected_at": getattr(conn, "connected_at", None),
    }


def channel_name(ch) -> str:
    return f"{connection_name(ch.conn)} ({ch.number})"


def channel_view(ch) -> dict:
    """A channel as ``GET /api/channels/{name}`` shows it."""
    conn = ch.conn
    cname = connection_name(conn)
    peer = cname.partition(" -> ")[0]
    ph, pp = _host_port(peer)
    return {
        "name": channel_name(ch),
        "number": ch.number,
        "node": node_name(),
        "user": conn.user,
        "vhost": ch.vhost.name if ch.vhost is not None else None,
        "connection_details": {"name": cname, "peer_host": ph, "peer_port": pp},
        "state": "running",
        "confirm": ch.confirms.enabled,
        "transactional": ch.tx,
        "consumer_count": len(ch.consumers),
        "messages_unacknowledged": len(ch.unacked),
        "messages_unconfirmed": ch.confirms.unconfirmed,
        "prefetch_count": ch.prefetch_consumer,
        "global_prefetch_count": ch.prefetch_global,
    }


def consumer_view(c) -> dict:
    """A consumer as ``GET /api/consumers`` lists it."""
    ch = c.channel
    conn = ch.conn
    cname = connection_name(conn)
    ph, pp = _host_port(cname.partition(" -> ")[0])
    q = c.queue
    return {
        "consumer_tag": c.tag,
        "queue": {"name": q.name, "vhost": q.vhost.name},
        "channel_details": {"name": channel_name(ch), "number": ch.number, "connection_name": cname,
                            "peer_host": ph, "peer_port": pp, "user": conn.user, "node": node_name()},
        "ack_required": not c.no_ack,
        "exclusive": c.exclusive,
        "prefetch_count": c.prefetch,
        "arguments": jsonable(c.arguments),
        "active": not q.single_active or (bool(q.consumers) and q.consumers[0] is c),
        "activity_status": ("up" if not q.single_active else
                            ("single_active" if q.consumers and q.consumers[0] is c else "waiting")),
    }


_SALTS: dict[str, bytes] = {}


def user_view(u: User) -> dict:
    """A user as RabbitMQ's API and definitions show it: ``name``, ``password_hash``,
    ``hashing_algorithm``, ``tags``, ``limits``. A configured hash is shown as configured; a
    clear-text password as RabbitMQ's default SHA-256 form, with a salt drawn once per user
    and password for the broker's lifetime (so repeated exports are equal)."""
    if u.password_hash is not None:
        h, algorithm = u.password_hash, u.hashing_algorithm
    else:
        salt = _SALTS.setdefault(f"{u.name}\0{u.password}", os.urandom(4))
        h, algorithm = hash_password(u.password, DEFAULT_HASHING_ALGORITHM, salt), DEFAULT_HASHING_ALGORITHM
    return {"name": u.name, "password_hash": h, "hashing_algorithm": algorithm, "tags": list(u.tags),
            "limits": {}}
