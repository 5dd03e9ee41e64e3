"""GET routes of the management API (RabbitMQ's ``rabbit_mgmt_dispatcher`` paths).

Each function takes the :class:`~.http.Ctx` and the decoded path parameters and returns the
JSON value (a list goes through :func:`.listing.apply_list_params` in the dispatcher), or
raises :class:`~.http.ApiError`. Everything runs on the broker's loop and only reads.
"""

from __future__ import annotations

import os
import platform
import time

from .._version import __version__ as _our_version
from ..broker.exchange import EXCHANGE_TYPES, Exchange
from .http import NOT_FOUND, Ctx
from .views import (rabbitmq_version, binding_views, channel_name, channel_view, connection_name,
                    connection_view, consumer_view, exchange_view, node_name, queue_view, user_view)

__all__ = ["GET_ROUTES"]

_START = time.time()

_EXCHANGE_TYPE_DESCRIPTIONS = {
    "direct": "AMQP direct exchange, as per the AMQP specification",
    "fanout": "AMQP fanout exchange, as per the AMQP specification",
    "topic": "AMQP topic exchange, as per the AMQP specification",
    "headers": "AMQP headers exchange, as per the AMQP specification",
}


def _live_conns(ctx: Ctx):
    return [c for c in ctx.broker.connections
            if c.state == "opened" and c.vhost is not None and ctx.user.can_see_vhost(c.vhost.name)
            and (ctx.user.is_monitor or c.user == ctx.user.name)]


def _details(stats: dict, rates: dict) -> dict:
    out = {}
    for k, v in stats.items():
        out[k] = v
        out[k + "_details"] = {"rate": rates.get(k, 0.0)}
    return out


def overview(ctx: Ctx) -> dict:
    b = ctx.broker
    s = ctx.sampler
    g = s.global_sample()
    r = s.global_rates()
    vhosts = ctx.visible_vhosts()
    queues = [q for v in vhosts for q in v.queues.values()]
    conns = _live_conns(ctx)
    listeners = []
    for srv in b.servers:
        for sock in srv.sockets or ():
            a = sock.getsockname()
            listeners.append({"node": node_name(), "protocol": "amqp/ssl" if getattr(srv, "_ssl_context", None) else "amqp",
                              "ip_address": a[0], "port": a[1]})
    if ctx.server.port:
        listeners.append({"node": node_name(), "protocol": "http", "ip_address": ctx.server.host,
                          "port": ctx.server.port})
    ms = {k: g[k] for k in ("publish", "deliver", "get", "deliver_get", "ack", "redeliver", "confirm",
                            "drop_unroutable")}
    ms["deliver_no_ack"] = 0
    ms["get_no_ack"] = 0
    ms["return_unroutable"] = 0
    # RabbitMQ's overview "publish" counts what publishers sent (channel stats)
    ms["publish"] = g["received"]
    return {
        "management_version": rabbitmq_version(b),
        "rates_mode": "basic",
        "exchange_types": [{"name": t, "description": _EXCHANGE_TYPE_DESCRIPTIONS[t], "enabled": True}
                           for t in EXCHANGE_TYPES],
        "product_version": _our_version,
        "product_name": "spark-amqp",
        "rabbitmq_version": rabbitmq_version(b),
        "cluster_name": node_name(),
        "erlang_version": f"none (Python {platform.python_version()})",
        "erlang_full_version": f"none (Python {platform.python_version()})",
        "disable_stats": False,
        "enable_queue_totals": False,
        "message_stats": _details(ms, {**r, "publish": r.get("received", 0.0)}),
        "queue_totals": _details({"messages": sum(len(q.ready) + q.unacked_count for q in queues),
                                  "messages_ready": sum(len(q.ready) for q in queues),
                                  "messages_unacknowledged": sum(q.unacked_count for q in queues)}, r),
        "object_totals": {
            "connections": len(conns),
            "channels": sum(len(c.channels) for c in conns),
            "exchanges": sum(len(v.exchanges) for v in vhosts),
            "queues": len(queues),
            "consumers": sum(len(q.consumers) for q in queues),
        },
        "statistics_db_event_queue": 0,
        "node": node_name(),
        "listeners": listeners,
        "contexts": [{"node": node_name(), "description": "RabbitMQ Management", "path": "/",
                      "port": str(ctx.server.port)}],
    }


def _node(ctx: Ctx) -> dict:
    b = ctx.broker
    try:
        fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        fds = 0
    try:
        import resource
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    except Exception:  # pragma: no cover - not on POSIX
        rss = 0
    wm = b.config.memory_high_watermark
    return {
        "name": node_name(), "type": "disc", "running": True, "being_drained": False,
        "mem_used": b.mem_used, "mem_limit": wm, "mem_alarm": b.blocked,
        "mem_calculation_strategy": "message_bytes", "process_max_rss": rss,
        "fd_used": fds, "sockets_used": len(b.connections), "proc_used": 1,
        "disk_free_alarm": False, "uptime": int((time.time() - _START) * 1000),
        "os_pid": str(os.getpid()), "partitions": [], "applications": [],
        "rates_mode": "basic", "net_ticktime": 60,
    }


def nodes(ctx: Ctx):
    ctx.user.require_monitor()
    return [_node(ctx)]


def node(ctx: Ctx, name: str):
    ctx.user.require_monitor()
    if name != node_name():
        raise NOT_FOUND()
    return _node(ctx)


def _vhost_view(ctx: Ctx, v) -> dict:
    qs = list(v.queues.values())
    ready = sum(len(q.ready) for q in qs)
    unacked = sum(q.unacked_count for q in qs)
    return {"name": v.name, "description": "Default virtual host" if v.name == "/" else "", "tags": [],
            "metadata": {"description": "Default virtual host" if v.name == "/" else "", "tags": []},
            "default_queue_type": "undefined", "tracing": False,
            "cluster_state": {node_name(): "running"},
            "messages": ready + unacked, "messages_ready": ready, "messages_unacknowledged": unacked}


def vhosts(ctx: Ctx):
    return [_vhost_view(ctx, v) for v in ctx.visible_vhosts()]


def vhost(ctx: Ctx, vhost: str):
    return _vhost_view(ctx, ctx.vhost(vhost))




def users(ctx: Ctx):
    ctx.user.require_admin()
    return [user_view(u) for u in ctx.broker.config.users.values()]


def user(ctx: Ctx, name: str):
    ctx.user.require_admin()
    u = ctx.broker.config.users.get(name)
    if u is None:
        raise NOT_FOUND()
    return user_view(u)


def whoami(ctx: Ctx):
    return {"name": ctx.user.name, "tags": ctx.user.tags}


def permissions(ctx: Ctx):
    ctx.user.require_admin()
    return [{"user": u, "vhost": v, "configure": p.configure, "write": p.write, "read": p.read}
            for (u, v), p in ctx.broker.config.permissions.items()]


def connections(ctx: Ctx):
    return [connection_view(c) for c in _live_conns(ctx)]


def _find_conn(ctx: Ctx, name: str):
    for c in _live_conns(ctx):
        if connection_name(c) == name:
            return c
    raise NOT_FOUND()


def connection(ctx: Ctx, name: str):
    return connection_view(_find_conn(ctx, name))


def connection_channels(ctx: Ctx, name: str):
    return [channel_view(ch) for ch in _find_conn(ctx, name).channels.values() if not ch.closing]


def channels(ctx: Ctx):
    return [channel_view(ch) for c in _live_conns(ctx) for ch in c.channels.values() if not ch.closing]


def channel(ctx: Ctx, name: str):
    for c in _live_conns(ctx):
        for ch in c.channels.values():
            if channel_name(ch) == name and not ch.closing:
                return channel_view(ch)
    raise NOT_FOUND()


def consumers(ctx: Ctx, vhost: str | None = None):
    """Consumers of the visible vhosts; a ``management`` / ``policymaker`` user sees only those
    on its own connections, as connections and channels (RabbitMQ
    ``rabbit_mgmt_wm_consumers`` filters with ``rabbit_mgmt_util:filter_conn_ch_list``)."""
    vs = [ctx.vhost(vhost)] if vhost is not None else ctx.visible_vhosts()
    everyone = ctx.user.is_monitor
    return [consumer_view(c) for v in vs for q in v.queues.values() for c in q.consumers
            if everyone or getattr(c.channel.conn, "user", None) == ctx.user.name]


def exchanges(ctx: Ctx, vhost: str | None = None):
    vs = [ctx.vhost(vhost)] if vhost is not None else ctx.visible_vhosts()
    return [exchange_view(x) for v in vs for x in v.exchanges.values()]


def _exchange(ctx: Ctx, vhost: str, name: str) -> Exchange:
    v = ctx.vhost(vhost)
    x = v.exchanges.get("" if name == "amq.default" else name)
    if x is None:
        raise NOT_FOUND()
    return x


def exchange(ctx: Ctx, vhost: str, name: str):
    x = _exchange(ctx, vhost, name)
    d = exchange_view(x)
    d["incoming"] = []
    d["outgoing"] = []
    return d


def exchange_bindings(ctx: Ctx, vhost: str, name: str, direction: str):
    x = _exchange(ctx, vhost, name)
    v = x.vhost
    if direction == "source":
        return binding_views(v, source=x)
    if direction == "destination":
        return binding_views(v, destination=x)
    raise NOT_FOUND()


def queues(ctx: Ctx, vhost: str | None = None):
    vs = [ctx.vhost(vhost)] if vhost is not None else ctx.visible_vhosts()
    return [queue_view(q, ctx.sampler) for v in vs for q in v.queues.values()]


def _queue(ctx: Ctx, vhost: str, name: str):
    q = ctx.vhost(vhost).queues.get(name)
    if q is None:
        raise NOT_FOUND()
    return q


def queue(ctx: Ctx, vhost: str, name: str):
    q = _queue(ctx, vhost, name)
    d = queue_view(q, ctx.sampler)
    d["consumer_details"] = [consumer_view(c) for c in q.consumers]
    d["incoming"] = []
    d["deliveries"] = []
    return d


def queue_bindings(ctx: Ctx, vhost: str, name: str):
    q = _queue(ctx, vhost, name)
    return binding_views(q.vhost, destination=q)


def bindings(ctx: Ctx, vhost: str | None = None):
    vs = [ctx.vhost(vhost)] if vhost is not None else ctx.visible_vhosts()
    return [b for v in vs for b in binding_views(v)]


def _binding_ends(ctx: Ctx, vhost: str, source: str, dkind: str, dest: str):
    v = ctx.vhost(vhost)
    src = v.exchanges.get(source)
    if dkind == "q":
        dst = v.queues.get(dest)
    elif dkind == "e":
        dst = v.exchanges.get(dest)
    else:
        raise NOT_FOUND()
    if src is None or dst is None:
        raise NOT_FOUND()
    return v, src, dst


def bindings_between(ctx: Ctx, vhost: str, source: str, dkind: str, dest: str):
    v, src, dst = _binding_ends(ctx, vhost, source, dkind, dest)
    return binding_views(v, source=src, destination=dst)


def binding(ctx: Ctx, vhost: str, source: str, dkind: str, dest: str, props: str):
    v, src, dst = _binding_ends(ctx, vhost, source, dkind, dest)
    for b in binding_views(v, source=src, destination=dst):
        if b["properties_key"] == props:
            return b
    raise NOT_FOUND()


def empty_list(ctx: Ctx, *args, **kw):
    """Parameters, policies, ...: the broker has none."""
    return []


def extensions(ctx: Ctx):
    return []


def aliveness(ctx: Ctx, vhost: str):
    ctx.vhost(vhost)
    return {"status": "ok"}


#: (path pattern, handler); "{x}" segments are parameters, others literal
GET_ROUTES = [
    ("overview", overview),
    ("nodes", nodes), ("nodes/{name}", node),
    ("vhosts", vhosts), ("vhosts/{vhost}", vhost),
    ("users", users), ("users/{name}", user), ("whoami", whoami),
    ("permissions", permissions),
    ("connections", connections), ("connections/{name}", connection),
    ("connections/{name}/channels", connection_channels),
    ("channels", channels), ("channels/{name}", channel),
    ("consumers", consumers), ("consumers/{vhost}", consumers),
    ("exchanges", exchanges), ("exchanges/{vhost}", exchanges), ("exchanges/{vhost}/{name}", exchange),
    ("exchanges/{vhost}/{name}/bindings/{direction}", exchange_bindings),
    ("queues", queues), ("queues/{vhost}", queues), ("queues/{vhost}/{name}", queue),
    ("queues/{vhost}/{name}/bindings", queue_bindings),
    ("bindings", bindings), ("bindings/{vhost}", bindings),
    ("bindings/{vhost}/e/{source}/{dkind}/{dest}", bindings_between),
    ("bindings/{vhost}/e/{source}/{dkind}/{dest}/{props}", binding),
    ("parameters", empty_list), ("parameters/{component}", empty_list),
    ("parameters/{component}/{vhost}", empty_list), ("policies", empty_list),
    ("policies/{vhost}", empty_list), ("operator-policies", empty_list),
    ("global-parameters", empty_list), ("vhost-limits", empty_list), ("feature-flags", empty_list),
    ("extensions", extensions), ("aliveness-test/{vhost}", aliveness),
]
