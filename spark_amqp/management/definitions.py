"""``GET``/``POST /api/definitions[/{vhost}]``: export and import of the broker's topology.

The export has RabbitMQ's shape (``rabbit_mgmt_wm_definitions``): ``rabbit_version``,
``users`` (the configured ``password_hash`` and ``hashing_algorithm``; for a user configured
with a clear-text password, base64(salt + SHA-256(salt + password)) and
``rabbit_password_hashing_sha256``, as RabbitMQ stores them), ``vhosts``, ``permissions``,
``parameters``, ``policies``, ``queues`` (not exclusive ones), ``exchanges`` (not the default
and ``amq.*`` ones) and ``bindings`` (not the default exchange's implicit ones). A
per-vhost export has no users, vhosts or permissions, and objects without ``vhost``.

Import (a file exported by RabbitMQ or by us) declares, in this order, vhosts,
permissions, exchanges, queues and bindings, with the same checks as AMQP declares (an
inequivalent existing object answers 400 naming it). Users, as RabbitMQ's import
(``rabbit_definitions:add_user``): a user is added, or an existing one's tags and password
replaced, from its ``password_hash`` and ``hashing_algorithm`` (RabbitMQ's default
``rabbit_password_hashing_sha256`` when absent), so a file exported by RabbitMQ or by this
broker brings its users with their passwords; ``password`` in clear is accepted too (an
extension). A hash that is not valid for its algorithm answers 400 naming the user, before
anything is imported.
"""

from __future__ import annotations

import json
import re

from ..broker.config import ConfigError, Permission, User
from ..broker.passwords import DEFAULT_HASHING_ALGORITHM
from ..broker.rules import check_name
from ..broker.exchange import Exchange
from ..broker.vhost import VHost
from ..protocol.errors import AMQPError
from .http import ApiError, Ctx, NoContent, parse_bool
from .views import rabbitmq_version, user_view

__all__ = ["export_definitions", "import_definitions", "DEFINITION_ROUTES"]

def _bad(reason: str) -> ApiError:
    return ApiError(400, "bad_request", f"definitions: {reason}")


def _entries(d: dict, key: str) -> list[dict]:
    """The objects of section ``key`` (absent or null: none); 400 when it is not a list of
    JSON objects (before: a 500 from the first ``.get`` on something else)."""
    v = d.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(o, dict) for o in v):
        raise _bad(f"{key} must be a list of objects")
    return v


def _field(o: dict, key: str, section: str, default=None, kind: type = str):
    """Field ``key`` of an entry of ``section``: ``default`` when absent or null (``None``:
    required), else it must be a ``kind`` (400 naming it)."""
    v = o.get(key)
    if v is None:
        if default is None:
            raise _bad(f"an entry of {section} lacks {key!r}")
        return default
    if not isinstance(v, kind) or isinstance(v, bool) and kind is not bool:
        raise _bad(f"{section}: {key} must be a {'string' if kind is str else 'JSON ' + kind.__name__}, "
                   f"got {json.dumps(v)[:60]}")
    return v


def _imported_user(u: dict) -> User:
    """The :class:`User` of a definitions entry; raises :class:`ApiError` 400 naming the user."""
    name, tags = _field(u, "name", "users"), _tags(u.get("tags"))
    try:
        if "password_hash" in u:
            return User(name, tags=tags, password_hash=str(u["password_hash"] or ""),
                        hashing_algorithm=str(u.get("hashing_algorithm") or DEFAULT_HASHING_ALGORITHM))
        if "password" in u:
            return User(name, str(u["password"]), tags)
    except (ConfigError, ValueError, TypeError) as exc:
        raise ApiError(400, "bad_request", f"definitions: {exc}") from None
    raise ApiError(400, "bad_request", f"definitions: user {name!r} has neither password_hash nor password")


def _objects(v: VHost, with_vhost: bool) -> tuple[list, list, list]:
    def tag(d: dict) -> dict:
        if with_vhost:
            d["vhost"] = v.name
        return d

    from .views import jsonable
    queues = [tag({"name": q.name, "durable": q.durable, "auto_delete": q.auto_delete,
                   "arguments": jsonable(q.arguments)})
              for q in v.queues.values() if q.exclusive_owner is None]
    exchanges = [tag({"name": x.name, "type": x.type, "durable": x.durable, "auto_delete": x.auto_delete,
                      "internal": x.internal, "arguments": jsonable(x.arguments)})
                 for x in v.exchanges.values() if x.name and not x.name.startswith("amq.")]
    bindings = []
    for x in v.exchanges.values():
        if x is v.default:
            continue
        for b in x.bindings:
            if getattr(b.destination, "exclusive_owner", None) is not None:
                continue
            bindings.append(tag({"source": x.name, "destination": b.destination.name,
                                 "destination_type": "exchange" if isinstance(b.destination, Exchange) else "queue",
                                 "routing_key": b.routing_key, "arguments": jsonable(b.arguments)}))
    return queues, exchanges, bindings


def export_definitions(ctx: Ctx, vhost: str | None = None) -> dict:
    """The definitions of the broker (or of ``vhost``); administrators only."""
    ctx.user.require_admin()
    cfg = ctx.broker.config
    if vhost is not None:
        v = ctx.vhost(vhost)
        q, x, b = _objects(v, False)
        release = rabbitmq_version(ctx.broker)
        return {"rabbit_version": release, "rabbitmq_version": release,
                "parameters": [], "policies": [], "queues": q, "exchanges": x, "bindings": b}
    qs, xs, bs = [], [], []
    for v in ctx.broker.vhosts.values():
        q, x, b = _objects(v, True)
        qs += q
        xs += x
        bs += b
    from .._version import __version__
    from .views import node_name
    return {
        "rabbit_version": rabbitmq_version(ctx.broker), "rabbitmq_version": rabbitmq_version(ctx.broker),
        "product_name": "spark-amqp", "product_version": __version__,
        "users": [user_view(u) for u in cfg.users.values()],
        "vhosts": [{"name": n, "limits": [], "metadata": {"description": "", "tags": []}}
                   for n in ctx.broker.vhosts],
        "permissions": [{"user": u, "vhost": vn, "configure": p.configure, "write": p.write, "read": p.read}
                        for (u, vn), p in cfg.permissions.items()],
        "topic_permissions": [], "parameters": [], "global_parameters": [
            {"name": "cluster_name", "value": node_name()}],
        "policies": [], "queues": qs, "exchanges": xs, "bindings": bs,
    }


def _tags(t) -> list[str]:
    if isinstance(t, str):
        return [s.strip() for s in t.split(",") if s.strip()]
    if t is not None and not isinstance(t, list):
        raise _bad(f"tags must be a string or a list, got {json.dumps(t)[:60]}")
    return [str(s) for s in (t or [])]


def import_definitions(ctx: Ctx, vhost: str | None = None):
    """Apply an uploaded definitions file (see the module docstring); administrators only."""

    ctx.user.require_admin()
    d = ctx.body
    broker = ctx.broker
    cfg = broker.config
    if vhost is not None:
        ctx.vhost(vhost)
    # every section's shape is checked before anything is applied
    sections = {k: _entries(d, k) for k in ("users", "vhosts", "permissions", "exchanges", "queues", "bindings")}
    if vhost is None:
        users = [_imported_user(u) for u in sections["users"] if u.get("name")]  # all checked first
        vhost_names = [_field(vd, "name", "vhosts") for vd in sections["vhosts"] if vd.get("name")]
        for n in vhost_names:
            try:
                check_name("vhost", n)
            except AMQPError as exc:
                raise _bad(exc.reply_text) from None
        perms = []
        for p in sections["permissions"]:
            if p.get("user") and p.get("vhost"):
                pu, pv = _field(p, "user", "permissions"), _field(p, "vhost", "permissions")
                kinds = [_field(p, k, "permissions", ".*") for k in ("configure", "write", "read")]
                for k, rx in zip(("configure", "write", "read"), kinds):
                    try:
                        re.compile(rx)
                    except re.error as exc:
                        raise _bad(f"permission {k} regex of {pu}@{pv} is invalid: {exc}") from None
                perms.append((pu, pv, kinds))
        for u in users:
            cfg.users[u.name] = u
        for n in vhost_names:
            if n not in broker.vhosts:
                broker.vhosts[n] = VHost(broker, n)
                cfg.vhosts.append(n)
        for pu, pv, kinds in perms:
            if pv in broker.vhosts:
                cfg.permissions[(pu, pv)] = Permission(*kinds)

    def target(o: dict, section: str) -> VHost:
        n = vhost if vhost is not None else _field(o, "vhost", section, "/")
        v = broker.vhosts.get(n)
        if v is None:
            raise ApiError(400, "bad_request", f"vhost '{n}' of {json.dumps(o.get('name', o))[:100]} does not "
                                              f"exist; add it to the file's vhosts")
        return v

    def args(o: dict, section: str) -> dict:
        return _field(o, "arguments", section, {}, dict)

    try:
        for x in sections["exchanges"]:
            v = target(x, "exchanges")
            v.declare_exchange(_field(x, "name", "exchanges"), _field(x, "type", "exchanges", "direct"), False,
                               parse_bool(x.get("durable"), "durable", True),
                               parse_bool(x.get("auto_delete"), "auto_delete"),
                               parse_bool(x.get("internal"), "internal"), args(x, "exchanges"))
        for q in sections["queues"]:
            v = target(q, "queues")
            v.declare_queue(None, _field(q, "name", "queues"), False, parse_bool(q.get("durable"), "durable", True),
                            False, parse_bool(q.get("auto_delete"), "auto_delete"), args(q, "queues"))
        for b in sections["bindings"]:
            v = target(b, "bindings")
            source, dest = _field(b, "source", "bindings"), _field(b, "destination", "bindings")
            dtype = _field(b, "destination_type", "bindings", "queue")
            src = v.exchanges.get(source)
            dst = (v.exchanges if dtype == "exchange" else v.queues).get(dest)
            if src is None or dst is None:
                raise ApiError(400, "bad_request", f"binding {source!r} -> {dest!r}: "
                                                   f"no such {'exchange' if src is None else dtype}")
            v.bind(src, dst, _field(b, "routing_key", "bindings", ""), args(b, "bindings"))
    except AMQPError as exc:
        raise ApiError(400, "bad_request", exc.reply_text) from None
    broker.kick()
    return NoContent()


DEFINITION_ROUTES = [
    ("GET", "definitions", export_definitions), ("GET", "definitions/{vhost}", export_definitions),
    ("POST", "definitions", import_definitions), ("POST", "definitions/{vhost}", import_definitions),
]
