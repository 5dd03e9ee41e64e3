"""The stream-protocol part of the management API, as RabbitMQ's ``rabbitmq_stream_management``
plugin serves it (``deps/rabbitmq_stream_management/src``, v3.10.8): stream connections,
publishers and consumers, overall, per vhost, per connection and (publishers) per stream; and
``DELETE /api/stream/connections/{vhost}/{name}`` closes a connection.

The JSON fields are RabbitMQ 3.10.8's (compared with its answers on port 15672 with the plugin
enabled; tests/management/test_stream_management.py): a connection lists ``name`` (``"peer ->
local"``), ``node``, ``protocol`` ``"stream"``, ``user``, ``vhost``, ``frame_max``,
``timeout`` (the heartbeat), ``channel_max`` 0, ``auth_mechanism``, ``client_properties``,
``connected_at`` (ms), the peer and local addresses, ``ssl`` and its (null) details,
``user_provided_name`` (the client's ``connection_name``); a publisher ``publisher_id``,
``reference``, ``queue``, ``published`` / ``confirmed`` / ``errored`` and
``connection_details``; a consumer ``subscription_id``, ``queue``, ``credits``, ``consumed``
(records sent), ``offset`` (the last one sent), ``offset_lag``, ``properties`` and
``connection_details``. A single connection (``GET .../{vhost}/{name}``) shows the ssl fields
as ``""``, as RabbitMQ does.
"""

from __future__ import annotations

from .http import NOT_FOUND, ApiError, Ctx, NoContent
from .views import jsonable, node_name

__all__ = ["STREAM_GET_ROUTES", "STREAM_WRITE_ROUTES", "stream_connection_name", "stream_connection_view"]


def stream_connection_name(conn) -> str:
    return f"{conn.peer_host}:{conn.peer_port} -> {conn.local_host}:{conn.local_port}"


def stream_connection_view(conn, single: bool = False) -> dict:
    """A stream connection as ``/api/stream/connections`` lists it (``single``: as
    ``/api/stream/connections/{vhost}/{name}`` shows it)."""
    t = conn.transport
    tls = t is not None and t.get_extra_info("sslcontext") is not None
    cipher = t.get_extra_info("cipher") if tls and t is not None else None
    blank = "" if single else None
    props = jsonable(conn.client_properties)
    t = conn.transport
    pend = t.get_write_buffer_size() if t is not None and not t.is_closing() else 0
    return {
        # the connection's figures (RabbitMQ adds them once its stats were emitted; the
        # Erlang process ones, reductions and garbage_collection, are zero here)
        "channels": 0, "state": "running" if not conn.closed else "closing",
        "recv_cnt": conn.reads, "recv_oct": conn.bytes_in, "recv_oct_details": {"rate": 0.0},
        "send_cnt": conn.writes, "send_oct": conn.bytes_out, "send_oct_details": {"rate": 0.0},
        "send_pend": pend, "reductions": 0, "reductions_details": {"rate": 0.0},
        "garbage_collection": {"fullsweep_after": 0, "max_heap_size": 0, "min_bin_vheap_size": 0,
                               "min_heap_size": 0, "minor_gcs": 0},
        "auth_mechanism": conn.sm.mechanism or "PLAIN",
        "channel_max": 0,
        "client_properties": props,
        "connected_at": conn.connected_at,
        "frame_max": conn.sm.frame_max,
        "host": conn.local_host,
        "name": stream_connection_name(conn),
        "node": node_name(),
        "peer_cert_issuer": blank,
        "peer_cert_subject": blank,
        "peer_cert_validity": blank,
        "peer_host": conn.peer_host,
        "peer_port": conn.peer_port,
        "port": conn.local_port,
        "protocol": "stream",
        "ssl": bool(tls),
        "ssl_cipher": cipher[0] if cipher else blank,
        "ssl_hash": blank,
        "ssl_key_exchange": blank,
        "ssl_protocol": cipher[1] if cipher else blank,
        "timeout": conn.sm.heartbeat,
        "user": conn.user,
        "user_provided_name": props.get("connection_name", "") if isinstance(props, dict) else "",
        "user_who_performed_action": conn.user,
        "vhost": conn.vhost.name if conn.vhost is not None else None,
    }


def _details(conn) -> dict:
    return {"name": stream_connection_name(conn), "node": node_name(), "peer_host": conn.peer_host,
            "peer_port": conn.peer_port, "user": conn.user}


def publisher_view(conn, p) -> dict:
    return {"confirmed": p.confirmed, "connection_details": _details(conn), "errored": p.errored,
            "published": p.published, "publisher_id": p.id,
            "queue": {"name": p.stream, "vhost": conn.vhost.name},
            "reference": p.reference.decode("utf-8", "replace") if p.reference else ""}


def consumer_view(conn, sub) -> dict:
    """``offset``: the first offset of the last chunk sent; ``offset_lag``: the last chunk's id
    minus it; ``consumed``: entries sent (``rabbit_stream_reader``: ``send_file_callback``,
    ``consumer_i(offset_lag)``)."""
    log = sub.queue.log
    last = log.c_first[-1] if len(log.c_first) > log.head else 0
    lag = last - sub.offset
    return {"connection_details": _details(conn), "consumed": sub.consumed, "credits": sub.credit,
            "offset": sub.offset, "offset_lag": lag, "properties": dict(sub.properties),
            "queue": {"name": sub.queue.name, "vhost": conn.vhost.name}, "subscription_id": sub.id}


def _conns(ctx: Ctx, vhost: str | None = None):
    """Open stream connections the user may see (its own, unless monitoring / administrator:
    ``rabbit_mgmt_util:filter_conn_ch_list``)."""
    if vhost is not None:
        ctx.vhost(vhost)
    out = []
    for c in ctx.broker.stream_connections:
        if c.closed or c.vhost is None or not ctx.user.can_see_vhost(c.vhost.name):
            continue
        if vhost is not None and c.vhost.name != vhost:
            continue
        if ctx.user.is_monitor or c.user == ctx.user.name:
            out.append(c)
    out.sort(key=lambda c: c.connected_at)
    return out


def _find(ctx: Ctx, vhost: str, name: str):
    for c in _conns(ctx, vhost):
        if stream_connection_name(c) == name:
            return c
    raise NOT_FOUND()


def connections(ctx: Ctx, vhost: str | None = None):
    return [stream_connection_view(c) for c in _conns(ctx, vhost)]


def connection(ctx: Ctx, vhost: str, name: str):
    return stream_connection_view(_find(ctx, vhost, name), single=True)


def connection_publishers(ctx: Ctx, vhost: str, name: str):
    c = _find(ctx, vhost, name)
    return [publisher_view(c, p) for p in c.publishers.values()]


def connection_consumers(ctx: Ctx, vhost: str, name: str):
    c = _find(ctx, vhost, name)
    return [consumer_view(c, s) for s in c.subscriptions.values()]


def publishers(ctx: Ctx, vhost: str | None = None, queue: str | None = None):
    return [publisher_view(c, p) for c in _conns(ctx, vhost) for p in c.publishers.values()
            if queue is None or p.stream == queue]


def consumers(ctx: Ctx, vhost: str | None = None):
    return [consumer_view(c, s) for c in _conns(ctx, vhost) for s in c.subscriptions.values()]


def delete_connection(ctx: Ctx, vhost: str, name: str):
    c = _find(ctx, vhost, name)
    if not (ctx.user.is_admin or c.user == ctx.user.name):
        raise ApiError(401, "not_authorised", "Access refused.")
    c.close_by_server(reason="Closed via management plugin")
    return NoContent()


#: (path pattern, handler) of GET, as read_routes.GET_ROUTES
STREAM_GET_ROUTES = [
    ("stream/connections", connections), ("stream/connections/{vhost}", connections),
    ("stream/connections/{vhost}/{name}", connection),
    ("stream/connections/{vhost}/{name}/publishers", connection_publishers),
    ("stream/connections/{vhost}/{name}/consumers", connection_consumers),
    ("stream/publishers", publishers), ("stream/publishers/{vhost}", publishers),
    ("stream/publishers/{vhost}/{queue}", publishers),
    ("stream/consumers", consumers), ("stream/consumers/{vhost}", consumers),
]
#: (method, path pattern, handler), as write_routes.WRITE_ROUTES
STREAM_WRITE_ROUTES = [("DELETE", "stream/connections/{vhost}/{name}", delete_connection)]
