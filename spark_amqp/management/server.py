"""The management HTTP server: aiohttp on the broker's own event loop.

:class:`ManagementServer` serves, on its own TCP port:

- ``/api/...``: RabbitMQ's management HTTP API (the subset tools use; routes in
  :mod:`.read_routes`, :mod:`.write_routes`, :mod:`.definitions`), HTTP basic auth with
  the broker's users (:mod:`.auth`, the AMQP port's password and ``loopback_users`` rules);
  writes must be JSON and not cross-origin (:mod:`.csrf`);
- ``/metrics``: Prometheus text format, aggregated (:mod:`.metrics`; no auth, as RabbitMQ's
  rabbitmq_prometheus); ``/metrics/per-object``: per queue, for monitoring users only;
- ``/``: a small web page (``static/index.html``) that uses the API;
- ``/cli/rabbitmqadmin``: RabbitMQ's rabbitmqadmin script when one is installed on this
  machine (``/usr/bin/rabbitmqadmin``, ``/usr/sbin/rabbitmqadmin``), as the plugin serves it.

Handlers run on the broker's loop, so they read broker state without locks and never run
at the same time as AMQP processing; each does O(objects listed) work and returns, so
polling the API costs the AMQP side only the time of the requests themselves (measured by
``spark_amqp/bench/management.py``). Paths are matched on the raw (still
percent-encoded) path so that the vhost ``/`` is ``%2F`` as in RabbitMQ.

Source: RabbitMQ management plugin (``rabbit_mgmt_dispatcher``, ``rabbit_mgmt_util``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from pathlib import Path
from urllib.parse import parse_qsl, unquote

from aiohttp import web
from prometheus_client import CollectorRegistry

from ..broker.exposure import is_exposed
from ..broker.log_limit import RateLimitedLog
from .auth import AuthError, authenticate_header
from .bodies import BodyReader, route_limits
from .csrf import check_write_request
from .definitions import DEFINITION_ROUTES
from .http import ApiError, Created, Ctx, NoContent, auth_error
from .listener import GuardedSite, handler_args, http_guard
from .listing import REGEX_TIME_LIMIT, ListError, apply_list_params, prune_columns, uses_regex
from .metrics import CONTENT_TYPE, BrokerCollector, render_metrics
from .rates import DEFAULT_INTERVAL, Sampler
from .read_routes import GET_ROUTES
from .request_checks import HostCheck, check_authorization_header
from .stream_routes import STREAM_GET_ROUTES, STREAM_WRITE_ROUTES
from .write_routes import WRITE_ROUTES

__all__ = ["ManagementServer"]

log = logging.getLogger("spark_amqp.management")

STATIC = Path(__file__).parent / "static"
_RABBITMQADMIN = ("/usr/bin/rabbitmqadmin", "/usr/sbin/rabbitmqadmin", "/usr/lib/rabbitmq/bin/rabbitmqadmin")


def _compile(routes):
    out = []
    for method, pattern, fn in routes:
        out.append((method, tuple(pattern.split("/")), fn, pattern))
    return out


_ROUTES = _compile([("GET", p, f) for p, f in GET_ROUTES + STREAM_GET_ROUTES] + WRITE_ROUTES
                   + STREAM_WRITE_ROUTES + DEFINITION_ROUTES)


def _match(segments: list[str]):
    """{method: (handler, params, pattern)} of the routes matching ``segments``."""
    found: dict[str, tuple] = {}
    for method, pat, fn, pattern in _ROUTES:
        if len(pat) != len(segments):
            continue
        params = {}
        for p, s in zip(pat, segments):
            if p.startswith("{"):
                params[p[1:-1]] = s
            elif p != s:
                break
        else:
            found.setdefault(method, (fn, params, pattern))
    return found


def _local_address(request: web.Request) -> str | None:
    sock = request.transport.get_extra_info("sockname") if request.transport is not None else None
    return sock[0] if isinstance(sock, tuple) and sock else None


def _filename(name: str) -> str:
    """``?download=NAME`` as a quoted-string filename: printable ASCII but quote and
    backslash, at most 200 characters (a control character in it was a header injection that
    aiohttp refused by dropping the connection; found by tests/management/test_fuzz.py)."""
    safe = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in name[:200])
    return safe or "definitions.json"


def _json(value, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(body=json.dumps(value).encode(), status=status, headers=headers,
                        content_type="application/json")


def _error(e: ApiError) -> web.Response:
    return _json({"error": e.error, "reason": e.reason}, e.status, e.headers)


class ManagementServer:
    """The HTTP server of one :class:`~spark_amqp.broker.server.Broker`.

    Args:
        broker: the broker; the server runs on ``broker.loop``.
        host: interface to listen on (default 127.0.0.1).
        port: TCP port; 0 picks a free one (RabbitMQ's is 15672).
        stats_interval: seconds between rate samples (RabbitMQ's default 5).

    ``await start()`` listens and returns the bound port; ``await stop()`` closes it.
    Raises :class:`~spark_amqp.broker.server.PortInUseError` when the port is taken.
    """

    def __init__(self, broker, host: str = "127.0.0.1", port: int = 0, stats_interval: float = DEFAULT_INTERVAL):
        self.broker = broker
        self.host = host
        self.port = port
        self.sampler = Sampler(broker, stats_interval)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker, self.sampler))
        self.per_object_registry = CollectorRegistry(auto_describe=False)
        self.per_object_registry.register(BrokerCollector(broker, self.sampler, per_object=True))
        self._runner: web.AppRunner | None = None
        #: the listener's accept policy (connection limits, request_timeout): listener.py
        self.guard = None
        self.bodies = BodyReader(broker.config.management)
        self.hosts = HostCheck(host, broker.config.management.allowed_hosts)
        #: one log line per kind of refused request every 10 s
        self.refusals = RateLimitedLog(log, 10.0, broker.loop)

    @property
    def url(self) -> str:
        h = "127.0.0.1" if self.host in ("0.0.0.0", "", "localhost") else self.host
        return f"http://{h}:{self.port}/"

    def _app(self) -> web.Application:
        # bodies are read by BodyReader with limits per route (client_max_size is unused)
        app = web.Application(middlewares=[self._check_request])
        app.router.add_route("*", "/api/{tail:.*}", self.handle_api)
        app.router.add_route("*", "/api", self.handle_api)
        app.router.add_get("/metrics", self.handle_metrics)
        app.router.add_get("/metrics/per-object", self.handle_metrics_per_object)
        app.router.add_get("/cli/rabbitmqadmin", self.handle_rabbitmqadmin)
        app.router.add_get("/", self.handle_index)
        app.router.add_static("/static/", STATIC)
        return app

    async def start(self) -> int:
        from ..broker.errors import BrokerError, PortInUseError

        self._runner = web.AppRunner(self._app(), access_log=None, handle_signals=False,
                                     **handler_args(self.broker))
        await self._runner.setup()
        self.guard = http_guard(self.broker)
        site = GuardedSite(self._runner, self.host, self.port, self.guard, reuse_address=True, backlog=1024)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            self._runner = None
            if exc.errno == 98 or "in use" in str(exc):
                raise PortInUseError(f"cannot start the management API: port {self.port} on {self.host} is "
                                     f"already in use (RabbitMQ's management plugin?); choose another "
                                     f"--management-port") from None
            raise BrokerError(f"cannot start the management API on {self.host}:{self.port}: {exc}") from None
        if self.port == 0:
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.sampler.start()
        log.info("management API and web page on %s", self.url)
        if is_exposed(self.host):
            log.warning("management API on %s:%d, a non-loopback address, over plain HTTP: basic-auth "
                        "passwords cross the network in clear text and /metrics answers anyone (aggregated "
                        "figures only). Keep the API on loopback behind a TLS reverse proxy, or firewall the "
                        "port; users in loopback_users (guest) are refused here (docs/broker/security.md)",
                        self.host, self.port)
        return self.port

    async def stop(self) -> None:
        self.sampler.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.bodies.close()

    # ------------------------------------------------------------------ request checks
    def _refused(self, request: web.Request, exc: ApiError) -> web.Response:
        """The answer to a request refused for its form (bad header, body too large or not
        JSON, ...), logged in one line at most every 10 s per kind."""
        peer = request.transport.get_extra_info("peername") if request.transport is not None else None
        self.refusals.warning(("refused", exc.status, exc.error), "management API: %s %s from %s refused: %d %s",
                              request.method, request.raw_path[:120], peer[0] if peer else "?", exc.status,
                              exc.reason[:200])
        resp = _error(exc)
        if request.path.startswith("/api"):
            resp.headers["Cache-Control"] = "no-cache"
        if exc.status in (408, 413):   # the rest of the body is not read: close the connection
            resp.force_close()
        return resp

    @web.middleware
    async def _check_request(self, request: web.Request, handler):
        """Every request: the first one ends the listener's handshake deadline; malformed
        ``Authorization`` and foreign ``Host`` headers are refused (:mod:`.request_checks`);
        API answers are not to be cached (``Cache-Control: no-cache``, as RabbitMQ's)."""
        if self.guard is not None:
            self.guard.admission(request.transport).handshake_done()
        try:
            check_authorization_header(request.headers.getall("Authorization", []))
            if request.path != "/metrics":
                self.hosts.check(request.headers.get("Host"), _local_address(request))
        except ApiError as exc:
            return self._refused(request, exc)
        resp = await handler(request)
        if request.path.startswith("/api"):
            resp.headers.setdefault("Cache-Control", "no-cache")
        return resp

    # ------------------------------------------------------------------ handlers
    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html")

    async def _filter_off_loop(self, items: list, query) -> object:
        """:func:`.listing.apply_list_params` with a user's regex, in a worker thread (the
        items are this request's own copies): RE2 is linear-time, but over thousands of long
        names it still takes a while, and the loop must keep serving AMQP meanwhile. More
        than ``REGEX_TIME_LIMIT`` seconds: 400 (the thread finishes on its own; RE2 always
        ends)."""
        fut = asyncio.get_running_loop().run_in_executor(None, apply_list_params, items, query)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), REGEX_TIME_LIMIT)
        except asyncio.TimeoutError:
            raise ListError("bad_request", f"the name regex took longer than {REGEX_TIME_LIMIT:g} s over "
                                           f"{len(items)} objects; use a simpler pattern") from None

    def _authenticate(self, request: web.Request):
        """The request's :class:`~.auth.Principal` (basic auth, ``loopback_users`` checked
        against the local address the request came in on, as the AMQP port does)."""
        return authenticate_header(self.broker.config, request.headers.get("Authorization"),
                                   _local_address(request))

    async def handle_metrics(self, request: web.Request) -> web.Response:
        """Aggregated metrics: no login, no vhost or queue names (:mod:`.metrics`)."""
        body = render_metrics(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    async def handle_metrics_per_object(self, request: web.Request) -> web.Response:
        """One sample per queue; needs a ``monitoring`` or ``administrator`` user (stricter
        than rabbitmq_prometheus, see :mod:`.metrics`)."""
        try:
            self._authenticate(request).require_monitor()
        except AuthError as exc:
            return _error(auth_error(exc))
        body = render_metrics(self.per_object_registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    async def handle_rabbitmqadmin(self, request: web.Request) -> web.StreamResponse:
        for p in _RABBITMQADMIN:
            if Path(p).is_file():
                return web.FileResponse(p, headers={"Content-Type": "text/plain"})
        w = shutil.which("rabbitmqadmin")
        if w:
            return web.FileResponse(w, headers={"Content-Type": "text/plain"})
        return _error(ApiError(404, "Object Not Found",
                               "rabbitmqadmin is not installed on this machine (it ships with RabbitMQ)"))

    async def handle_api(self, request: web.Request) -> web.StreamResponse:
        raw = request.raw_path.split("?", 1)[0]
        parts = raw.split("/")[2:]          # "", "api", ...
        if parts and parts[-1] == "":
            parts = parts[:-1]
        segments = [unquote(p) for p in parts]
        try:
            principal = self._authenticate(request)
        except AuthError as exc:
            return _error(auth_error(exc))
        found = _match(segments)
        if not found:
            return _error(ApiError(404, "Object Not Found", "Not Found"))
        method = "GET" if request.method == "HEAD" else request.method
        if method not in found:
            allow = sorted(set(found) | {"OPTIONS"} | ({"HEAD"} if "GET" in found else set()))
            if method == "OPTIONS":
                return web.Response(status=200, headers={"Allow": ", ".join(allow)})
            return web.Response(status=405, headers={"Allow": ", ".join(allow)})
        fn, params, pattern = found[method]
        parsed = None
        body = b""
        try:
            if request.method not in ("GET", "HEAD", "OPTIONS") and request.can_read_body:
                limit, max_values = route_limits(method, pattern, self.broker.config.management.max_body_size)
                body = await self.bodies.read(request, limit)
                check_write_request(method, request.headers, body, request.scheme, request.host)
                if body.strip():
                    parsed = await self.bodies.parse(body, max_values)
            else:
                check_write_request(method, request.headers, body, request.scheme, request.host)
        except ApiError as exc:
            return self._refused(request, exc)
        query = dict(parse_qsl(request.query_string, keep_blank_values=True))
        ctx = Ctx(self, principal, query, body, method, parsed)
        try:
            result = fn(ctx, **params)
            if method == "GET" and isinstance(result, list) and uses_regex(query):
                result = await self._filter_off_loop(result, query)
            elif method == "GET" and isinstance(result, list):
                result = apply_list_params(result, query)
            elif method == "GET" and isinstance(result, dict) and query.get("columns"):
                result = prune_columns(result, [c for c in query["columns"].split(",") if c])
        except ApiError as exc:
            return _error(exc)
        except AuthError as exc:
            return _error(auth_error(exc))
        except ListError as exc:
            return _error(ApiError(400, exc.error, exc.reason))
        except Exception as exc:  # a bug: answer 500 with the reason, keep serving
            log.exception("management API %s %s failed", request.method, raw)
            return _error(ApiError(500, "internal_server_error", f"{type(exc).__name__}: {exc}"))
        if isinstance(result, Created):
            return web.Response(status=201, headers={"Location": result.location} if result.location else None)
        if isinstance(result, NoContent):
            return web.Response(status=204)
        if method == "GET" and request.method == "GET" and segments[:1] == ["definitions"] and \
                query.get("download"):
            return _json(result, headers={"Content-Disposition": f'attachment; filename="{_filename(query["download"])}"'})
        return _json(result)
