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

from ..broker.config import ConfigError, Permission, User
from ..broker.passwords import DEFAULT_HASHING_ALGORITHM
from ..broker.exchange import Exchange
from ..broker.vhost import VHost
from ..protocol.errors import AMQPError
from .http import ApiError, Ctx, NoContent, parse_bool
from .views import RABBITMQ_COMPAT_VERSION, user_view

__all__ = ["export_definitions", "import_definitions", "DEFINITION_ROUTES"]

def _imported_user(u: dict) -> User:
    """The :class:`User` of a definitions entry; raises :class:`ApiError` 400 naming the user."""
    name, tags = str(u["name"]), _tags(u.get("tags"))
    try:
        if "password_hash" in u:
            return User(name, tags=tags, password_hash=str(u["password_hash"] or ""),
                        hashing_algorithm=str(u.get("hashing_algorithm") or DEFAULT_HASHING_ALGORITHM))
        if "password" in u:
            return User(name, str(u["password"]), tags)
    except (ConfigError, ValueError) as exc:
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
        return {"rabbit_version": RABBITMQ_COMPAT_VERSION, "rabbitmq_version": RABBITMQ_COMPAT_VERSION,
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
        "rabbit_version": RABBITMQ_COMPAT_VERSION, "rabbitmq_version": RABBITMQ_COMPAT_VERSION,
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
    return [str(s) for s in (t or [])]


def import_definitions(ctx: Ctx, vhost: str | None = None):
    """Apply an uploaded definitions file (see the module docstring); administrators only."""

    ctx.user.require_admin()
    d = ctx.body
    broker = ctx.broker
    cfg = broker.config
    if vhost is not None:
        ctx.vhost(vhost)
    if vhost is None:
        users = [_imported_user(u) for u in d.get("users") or [] if u.get("name")]  # all checked first
        for u in users:
            cfg.users[u.name] = u
        for vd in d.get("vhosts") or []:
            n = vd.get("name")
            if n and n not in broker.vhosts:
                broker.vhosts[n] = VHost(broker, n)
                cfg.vhosts.append(n)
        for p in d.get("permissions") or []:
            if p.get("user") and p.get("vhost") in broker.vhosts:
                cfg.permissions[(p["user"], p["vhost"])] = Permission(
                    p.get("configure", ".*"), p.get("write", ".*"), p.get("read", ".*"))

    def target(o: dict) -> VHost:
        n = vhost if vhost is not None else o.get("vhost", "/")
        v = broker.vhosts.get(n)
        if v is None:
            raise ApiError(400, "bad_request", f"vhost '{n}' of {o.get('name', o)!r} does not exist; "
                                              f"add it to the file's vhosts")
        return v

    try:
        for x in d.get("exchanges") or []:
            v = target(x)
            v.declare_exchange(x["name"], x.get("type", "direct"), False, parse_bool(x.get("durable"), "durable", True),
                               parse_bool(x.get("auto_delete"), "auto_delete"),
                               parse_bool(x.get("internal"), "internal"), x.get("arguments") or {})
        for q in d.get("queues") or []:
            v = target(q)
            v.declare_queue(None, q["name"], False, parse_bool(q.get("durable"), "durable", True), False,
                            parse_bool(q.get("auto_delete"), "auto_delete"), q.get("arguments") or {})
        for b in d.get("bindings") or []:
            v = target(b)
            src = v.exchanges.get(b["source"])
            dst = (v.exchanges if b.get("destination_type") == "exchange" else v.queues).get(b["destination"])
            if src is None or dst is None:
                raise ApiError(400, "bad_request", f"binding {b['source']!r} -> {b['destination']!r}: "
                                                   f"no such {'exchange' if src is None else b.get('destination_type', 'queue')}")
            v.bind(src, dst, b.get("routing_key", ""), b.get("arguments") or {})
    except KeyError as exc:
        raise ApiError(400, "bad_request", f"definitions: an object lacks {exc.args[0]!r}") from None
    except AMQPError as exc:
        raise ApiError(400, "bad_request", exc.reply_text) from None
    broker.kick()
    return NoContent()


DEFINITION_ROUTES = [
    ("GET", "definitions", export_definitions), ("GET", "definitions/{vhost}", export_definitions),
    ("POST", "definitions", import_definitions), ("POST", "definitions/{vhost}", import_definitions),
]
