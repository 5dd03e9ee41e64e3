"""PUT / POST / DELETE routes of the management API.

They call the same broker-core operations an AMQP client's methods do (so the same checks,
errors and durable-store writes apply), on the broker's loop, then ``broker.kick()`` so that
consumers get what changed. Authorization is the AMQP channel's, from
:mod:`spark_amqp.broker.rules` (permissions incl. dead-letter / alternate exchange targets and
unbind, exclusive queues, ``user_id``, ``max_message_size``, resource alarms: 503 here, since
an HTTP request cannot be blocked like an AMQP publisher). Answers as RabbitMQ 3.10's plugin: 201 on creation, 204 on an
equivalent re-declare or a delete, 200 with JSON for publish / get; errors via
:func:`.http.amqp_to_api_error` (404 not_found, 401 not_authorised, 400 bad_request).
Source: RabbitMQ ``rabbit_mgmt_wm_exchange``, ``_queue``, ``_binding``, ``_queue_purge``,
``_exchange_publish``, ``_queue_get``, ``_connection``.
"""

from __future__ import annotations

import base64
from typing import Any

from ..broker.message import Message, route_enc
from ..broker.rules import (check_binding, check_exchange_declare, check_exclusive,
                            check_permission, check_publish, check_publish_alarm, check_queue_declare,
                            check_routing_key)
from ..protocol.errors import AMQPError
from ..protocol.properties import BasicProperties
from .http import (NOT_FOUND, ApiError, Created, Ctx, NoContent, amqp_to_api_error, channel_error,
                   parse_bool, parse_int)
from .read_routes import _binding_ends, _find_conn
from .views import binding_views, jsonable

__all__ = ["WRITE_ROUTES"]


def _call(fn, *args):
    try:
        return fn(*args)
    except AMQPError as exc:
        raise amqp_to_api_error(exc) from None


def _channel_call(fn, *args):
    """As :func:`_call` for the routes RabbitMQ's plugin runs over an AMQP channel (publish,
    get): every AMQP error is 400 ``bad_request`` "CODE NAME - text"."""
    try:
        return fn(*args)
    except AMQPError as exc:
        raise channel_error(exc) from None


def _args(body: dict) -> dict:
    a = body.get("arguments") or {}
    if not isinstance(a, dict):
        raise ApiError(400, "bad_request", "arguments must be a JSON object")
    return a


def put_exchange(ctx: Ctx, vhost: str, name: str):
    v = ctx.vhost(vhost)
    ctx.user.require(vhost)
    b = ctx.body
    _call(check_exchange_declare, ctx.user.permission(vhost), ctx.user.name, vhost, name, _args(b))
    if name == "" or name == "amq.default" or name.startswith("amq."):
        raise ApiError(401, "not_authorised", "Access refused.")
    existed = name in v.exchanges
    t = b.get("type") or "direct"
    if t not in ("direct", "fanout", "topic", "headers"):
        # RabbitMQ 3.10 (rabbit_exchange:check_type): "unknown exchange type" for a name that is
        # not an Erlang atom on the node (any name never seen), "invalid ..." for one that is
        raise ApiError(400, "bad_request", f"unknown exchange type '{t}'")
    _call(v.declare_exchange, name, t, False, parse_bool(b.get("durable"), "durable", True),
          parse_bool(b.get("auto_delete"), "auto_delete"), parse_bool(b.get("internal"), "internal"), _args(b))
    return NoContent() if existed else Created()


def delete_exchange(ctx: Ctx, vhost: str, name: str):
    v = ctx.vhost(vhost)
    if name == "" or name == "amq.default" or name.startswith("amq."):
        raise ApiError(401, "not_authorised", "Access refused.")
    if name not in v.exchanges:
        raise NOT_FOUND()
    ctx.user.require(vhost, "configure", name, "exchange")
    _call(v.delete_exchange, name, ctx.query.get("if-unused") == "true")
    ctx.broker.kick()
    return NoContent()


def put_queue(ctx: Ctx, vhost: str, name: str):
    v = ctx.vhost(vhost)
    ctx.user.require(vhost)
    b = ctx.body
    _call(check_queue_declare, ctx.user.permission(vhost), ctx.user.name, vhost, name, _args(b))
    if name.startswith("amq."):
        raise ApiError(401, "not_authorised", "Access refused.")
    q = v.queues.get(name)
    if q is not None:
        _call(check_exclusive, q, None)
    existed = q is not None
    _call(v.declare_queue, None, name, False, parse_bool(b.get("durable"), "durable", True), False,
          parse_bool(b.get("auto_delete"), "auto_delete"), _args(b))
    return NoContent() if existed else Created()


def _queue_for(ctx: Ctx, vhost: str, name: str, kind: str, via_channel: bool = False):
    """The queue ``name``: 404 when missing, 401 without the ``kind`` permission, 400
    RESOURCE_LOCKED when it is exclusive to a connection (the API owns none; RabbitMQ's
    get, which runs over an AMQP channel, says "405 RESOURCE_LOCKED - ...")."""
    v = ctx.vhost(vhost)
    q = v.queues.get(name)
    if q is None:
        raise NOT_FOUND()
    ctx.user.require(vhost, kind, name)
    (_channel_call if via_channel else _call)(check_exclusive, q, None)
    return v, q


def delete_queue(ctx: Ctx, vhost: str, name: str):
    v, q = _queue_for(ctx, vhost, name, "configure")
    if ctx.query.get("if-unused") == "true" and q.consumers:
        raise ApiError(400, "bad_request", f"queue '{name}' in vhost '{vhost}' in use")
    if ctx.query.get("if-empty") == "true" and (len(q.ready) or q.unacked_count):
        raise ApiError(400, "bad_request", f"queue '{name}' in vhost '{vhost}' not empty")
    v.delete_queue(q)
    ctx.broker.kick()
    return NoContent()


def purge_queue(ctx: Ctx, vhost: str, name: str):
    _, q = _queue_for(ctx, vhost, name, "read")
    q.purge()
    ctx.broker.kick()
    return NoContent()


def post_binding(ctx: Ctx, vhost: str, source: str, dkind: str, dest: str):
    v = ctx.vhost(vhost)
    if dkind not in ("q", "e"):
        raise NOT_FOUND()
    src = v.exchanges.get(source)
    dst = v.queues.get(dest) if dkind == "q" else v.exchanges.get(dest)
    if src is None:
        raise ApiError(404, "not_found", f"no exchange '{source}' in vhost '{vhost}'")
    if dst is None:
        raise ApiError(404, "not_found", f"no {'queue' if dkind == 'q' else 'exchange'} '{dest}' in vhost '{vhost}'")
    ctx.user.require(vhost)
    _call(check_binding, ctx.user.permission(vhost), ctx.user.name, vhost, source,
          "queue" if dkind == "q" else "exchange", dest, 40, 30)
    if dkind == "q":
        _call(check_exclusive, dst, None)
    b = ctx.body
    rk = b.get("routing_key") or ""
    if not isinstance(rk, str):
        raise ApiError(400, "bad_request", "routing_key must be a string")
    args = _args(b)
    _call(v.bind, src, dst, rk, args)
    from urllib.parse import quote

    from .views import properties_key
    # RabbitMQ's Location: the destination, then the properties key percent-encoded once more
    return Created(location=f"{dest}/{quote(properties_key(rk, args), safe='')}")


def delete_binding(ctx: Ctx, vhost: str, source: str, dkind: str, dest: str, props: str):
    v, src, dst = _binding_ends(ctx, vhost, source, dkind, dest)
    ctx.user.require(vhost)
    # unbind needs what bind needs (RabbitMQ rabbit_channel:binding_action)
    _call(check_binding, ctx.user.permission(vhost), ctx.user.name, vhost, source,
          "queue" if dkind == "q" else "exchange", dest, 40, 40)
    if dkind == "q":
        _call(check_exclusive, dst, None)
    for bv in binding_views(v, source=src, destination=dst):
        if bv["properties_key"] == props:
            if src is v.default:
                raise ApiError(401, "not_authorised", "Access refused.")
            for bd in list(src.bindings):
                if bd.destination is dst and bd.routing_key == bv["routing_key"] and jsonable(bd.arguments) == bv["arguments"]:
                    _call(v.unbind, src, dst, bd.routing_key, bd.arguments)
                    return NoContent()
    raise NOT_FOUND()


_PROP_TYPES = {"content_type": str, "content_encoding": str, "headers": dict, "delivery_mode": int,
               "priority": int, "correlation_id": str, "reply_to": str, "expiration": str,
               "message_id": str, "timestamp": int, "type": str, "user_id": str, "app_id": str,
               "cluster_id": str}


def _properties(p: Any) -> BasicProperties:
    if p in ([], None):
        p = {}
    if not isinstance(p, dict):
        raise ApiError(400, "bad_request", "properties must be a JSON object")
    kw = {}
    for k, val in p.items():
        t = _PROP_TYPES.get(k)
        if t is None:
            raise ApiError(400, "bad_request", f"unknown property '{k}'; known: {', '.join(_PROP_TYPES)}")
        if t is int and isinstance(val, str):
            try:
                val = int(val)
            except ValueError:
                raise ApiError(400, "bad_request", f"property {k} must be an integer") from None
        if not isinstance(val, t) or isinstance(val, bool) and t is int:
            raise ApiError(400, "bad_request", f"property {k} must be of type {t.__name__}")
        kw[k] = val
    return BasicProperties(**kw)


def publish(ctx: Ctx, vhost: str, name: str):
    v = ctx.vhost(vhost)
    b = ctx.body
    missing = [k for k in ("properties", "routing_key", "payload", "payload_encoding") if k not in b]
    if missing:
        raise ApiError(400, "bad_request", "[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]")
    xname = "" if name == "amq.default" else name
    x = v.exchanges.get(xname)
    if x is None:
        raise ApiError(400, "bad_request", f"404 NOT_FOUND - no exchange '{name}' in vhost '{vhost}'")
    ctx.user.require(vhost)
    _channel_call(check_permission, ctx.user.permission(vhost), ctx.user.name, vhost, "write", "exchange", xname)
    enc = b["payload_encoding"]
    payload = b["payload"]
    if not isinstance(payload, str):
        raise ApiError(400, "bad_request", "payload must be a string")
    if enc == "string":
        body = payload.encode("utf-8")
    elif enc == "base64":
        try:
            body = base64.b64decode(payload, validate=True)
        except ValueError:
            raise ApiError(400, "bad_request", "payload is not valid base64") from None
    else:
        raise ApiError(400, "bad_request", f"payload_encoding must be string or base64, got {enc!r}")
    rk = b["routing_key"]
    if not isinstance(rk, str):
        raise ApiError(400, "bad_request", "routing_key must be a string")
    _call(check_routing_key, rk)
    if x.internal:
        raise ApiError(400, "bad_request",
                       f"403 ACCESS_REFUSED - cannot publish to internal exchange '{name}' in vhost '{vhost}'")
    props = _properties(b["properties"])
    # the AMQP port's publish rules (user_id, max_message_size), then the resource alarms:
    # an AMQP publisher is blocked until they clear, an HTTP request cannot wait that long
    _channel_call(check_publish, ctx.broker.config, ctx.user.name, props.user_id, len(body))
    try:
        check_publish_alarm(ctx.broker)
    except AMQPError as exc:
        raise ApiError(503, "resource_alarm", exc.reply_text, {"Retry-After": "5"}) from None
    try:
        props_raw = props.encode()
        m = Message(xname, rk, props_raw, body, props)
    except AMQPError as exc:
        raise ApiError(400, "bad_request", exc.reply_text) from None
    m.enc = route_enc(xname, rk)
    broker = ctx.broker
    broker.stats.received += 1
    p = props
    queues = v.route_with_cc(x, rk, m) if p.headers and ("CC" in p.headers or "BCC" in p.headers) else v.route(x, rk, m)
    if not queues:
        broker.stats.unroutable += 1
        return {"routed": False}
    broker.enqueue(queues, m)
    broker.kick()
    return {"routed": True}


_ACKMODES = ("ack_requeue_true", "ack_requeue_false", "reject_requeue_true", "reject_requeue_false")


def _payload(body: bytes, encoding: str, truncate: int | None) -> tuple[str, str]:
    data = body if truncate is None else body[:truncate]
    if encoding == "auto":
        try:
            return data.decode("utf-8"), "string"
        except UnicodeDecodeError:
            pass
    return base64.b64encode(data).decode(), "base64"


def get_messages(ctx: Ctx, vhost: str, name: str):
    _, q = _queue_for(ctx, vhost, name, "read", via_channel=True)
    b = ctx.body
    missing = [k for k in ("count", "ackmode", "encoding") if k not in b]
    if missing:
        raise ApiError(400, "bad_request", "[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]")
    count = parse_int(b["count"], "count")
    mode = b["ackmode"]
    if mode not in _ACKMODES:
        raise ApiError(400, "bad_request", f"ackmode must be one of {', '.join(_ACKMODES)}, got {mode!r}")
    encoding = b["encoding"]
    if encoding not in ("auto", "base64"):
        raise ApiError(400, "bad_request", f"encoding must be auto or base64, got {encoding!r}")
    truncate = parse_int(b["truncate"], "truncate") if b.get("truncate") not in (None, "") else None
    out, taken = [], []
    for _ in range(max(count, 0)):
        m = q.get()
        if m is None:
            break
        q.stat_get += 1
        taken.append(m)
        props = jsonable(m.props.as_dict())
        payload, penc = _payload(m.body, encoding, truncate)
        out.append({"payload_bytes": len(m.body), "redelivered": m.redelivered, "exchange": m.exchange,
                    "routing_key": m.routing_key, "message_count": len(q.ready),
                    "properties": props or [], "payload": payload, "payload_encoding": penc})
    if taken:
        if mode.endswith("requeue_true"):
            q.requeue(taken)   # back at the head, redelivered=true
        elif mode == "ack_requeue_false":
            q.unacked_count += len(taken)
            q.settle_many(taken)
        else:
            for m in taken:
                q.discard(m, "rejected")
        ctx.broker.kick()
    return out


def delete_connection(ctx: Ctx, name: str):
    c = _find_conn(ctx, name)
    if not (ctx.user.is_admin or c.user == ctx.user.name):
        raise ApiError(401, "not_authorised", "Access refused.")
    reason = "Closed via management plugin"
    c.close_by_server(320, f"CONNECTION_FORCED - {reason}")
    return NoContent()


#: (method, path pattern, handler)
WRITE_ROUTES = [
    ("PUT", "exchanges/{vhost}/{name}", put_exchange),
    ("DELETE", "exchanges/{vhost}/{name}", delete_exchange),
    ("POST", "exchanges/{vhost}/{name}/publish", publish),
    ("PUT", "queues/{vhost}/{name}", put_queue),
    ("DELETE", "queues/{vhost}/{name}", delete_queue),
    ("DELETE", "queues/{vhost}/{name}/contents", purge_queue),
    ("POST", "queues/{vhost}/{name}/get", get_messages),
    ("POST", "bindings/{vhost}/e/{source}/{dkind}/{dest}", post_binding),
    ("DELETE", "bindings/{vhost}/e/{source}/{dkind}/{dest}/{props}", delete_binding),
    ("DELETE", "connections/{name}", delete_connection),
]
