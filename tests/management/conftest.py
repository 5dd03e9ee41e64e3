"""Fixtures of the management API tests.

``api`` runs a test twice: against the embedded broker's management API and against
RabbitMQ's own management plugin at 127.0.0.1:15672 (``rabbitmq-plugins enable
rabbitmq_management``; .ci/run enables it). The RabbitMQ run skips with a reason when the
plugin is unreachable, and fails instead under SPARK_AMQP_REQUIRE_RABBITMQ=1.

An :class:`Api` knows its broker's HTTP base URL and AMQP URL, sends requests with HTTP basic
auth (guest/guest unless told), and deletes at teardown the queues, exchanges and users it
was told about. RabbitMQ's statistics lag by up to its 5 s collection interval:
``Api.wait_for`` polls until a value is there.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from spark_amqp.broker.config import BrokerConfig, Permission, User

RABBITMQ_MGMT = os.environ.get("SPARK_AMQP_RABBITMQ_MANAGEMENT_URL", "http://127.0.0.1:15672/")
REQUIRE_RABBITMQ = os.environ.get("SPARK_AMQP_REQUIRE_RABBITMQ") == "1"

#: users the embedded broker is configured with (created through the API on RabbitMQ)
TEST_USERS = {"mgmt-test-none": [], "mgmt-test-mon": ["monitoring"], "mgmt-test-mgmt": ["management"]}


class Response:
    def __init__(self, status: int, body: bytes, headers):
        self.status = status
        self.raw = body
        self.headers = headers

    @property
    def json(self):
        return json.loads(self.raw) if self.raw else None

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.raw[:300]!r}>"


class Api:
    """HTTP access to one broker's management API (``kind`` "embedded" or "rabbitmq")."""

    def __init__(self, kind: str, base: str, amqp_url: str):
        self.kind = kind
        self.base = base if base.endswith("/") else base + "/"
        self.amqp_url = amqp_url
        self.cleanup_paths: list[str] = []

    def request(self, method: str, path: str, body=None, auth: str | None = "guest:guest",
                raw: bytes | None = None) -> Response:
        url = self.base + "api/" + path.lstrip("/")
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        r = urllib.request.Request(url, method=method, data=data)
        if data is not None:
            r.add_header("Content-Type", "application/json")
        if auth is not None:
            r.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
        try:
            with urllib.request.urlopen(r, timeout=30) as resp:
                return Response(resp.status, resp.read(), resp.headers)
        except urllib.error.HTTPError as e:
            return Response(e.code, e.read(), e.headers)

    def get(self, path: str, **kw) -> Response:
        return self.request("GET", path, **kw)

    def put(self, path: str, body=None, **kw) -> Response:
        return self.request("PUT", path, body if body is not None else {}, **kw)

    def post(self, path: str, body=None, **kw) -> Response:
        return self.request("POST", path, body if body is not None else {}, **kw)

    def delete(self, path: str, **kw) -> Response:
        return self.request("DELETE", path, **kw)

    def wait_for(self, fn, what: str, timeout: float = 20.0):
        """Poll ``fn()`` until it returns a truthy value (RabbitMQ's stats lag up to 5 s)."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = fn()
            if last:
                return last
            time.sleep(0.2)
        raise AssertionError(f"{self.kind}: {what} not seen within {timeout}s (last: {last!r})")

    def queue(self, name: str, **body) -> str:
        """PUT a queue (non-durable unless told) and delete it at teardown; returns its path."""
        path = f"queues/%2F/{urllib.parse.quote(name, safe='')}"
        r = self.put(path, {"durable": False, "auto_delete": False, "arguments": {}, **body})
        assert r.status in (201, 204), r
        self.cleanup_paths.append(path)
        return path

    def exchange(self, name: str, type_: str = "direct", **body) -> str:
        path = f"exchanges/%2F/{urllib.parse.quote(name, safe='')}"
        r = self.put(path, {"type": type_, "durable": False, "auto_delete": False, "internal": False,
                            "arguments": {}, **body})
        assert r.status in (201, 204), r
        self.cleanup_paths.append(path)
        return path

    def cleanup(self) -> None:
        for p in reversed(self.cleanup_paths):
            try:
                self.delete(p)
            except OSError:
                pass


def _mgmt_reachable() -> bool:
    u = urllib.parse.urlparse(RABBITMQ_MGMT)
    try:
        socket.create_connection((u.hostname, u.port or 15672), timeout=2).close()
        return True
    except OSError:
        return False


def require_rabbitmq_management(request) -> str:
    """RabbitMQ's AMQP URL once both it and its management plugin answer; else skip (fail
    under SPARK_AMQP_REQUIRE_RABBITMQ=1)."""
    amqp = request.getfixturevalue("rabbitmq_url")  # tests/conftest.py: skips/fails likewise
    if not _mgmt_reachable():
        reason = (f"RabbitMQ's management plugin is not reachable at {RABBITMQ_MGMT}: run "
                  f"`rabbitmq-plugins enable rabbitmq_management` (or set SPARK_AMQP_RABBITMQ_MANAGEMENT_URL)")
        if REQUIRE_RABBITMQ:
            pytest.fail(reason + " (SPARK_AMQP_REQUIRE_RABBITMQ=1 makes this a failure)")
        pytest.skip(reason)
    return amqp


def management_config() -> BrokerConfig:
    cfg = BrokerConfig()
    for name, tags in TEST_USERS.items():
        cfg.users[name] = User(name, "pw", list(tags))
        cfg.permissions[(name, "/")] = Permission()
    return cfg


@pytest.fixture(scope="session")
def mgmt_broker():
    """An embedded broker with the management API, a stream listener (``stream_port``) and the
    TEST_USERS (session-wide), in RabbitMQ 3.10 mode: the differential tests compare it with
    the local RabbitMQ 3.10.8."""
    from spark_amqp import EmbeddedBroker

    with EmbeddedBroker(config=management_config(), management=True, rabbitmq_version="3.10",
                        stream_port=0) as b:
        yield b


@pytest.fixture(scope="session")
def rabbitmq_users(request):
    """TEST_USERS on RabbitMQ (created once through its API, deleted at the end)."""
    amqp = require_rabbitmq_management(request)
    api = Api("rabbitmq", RABBITMQ_MGMT, amqp)
    for name, tags in TEST_USERS.items():
        assert api.put(f"users/{name}", {"password": "pw", "tags": ",".join(tags)}).status in (201, 204)
        assert api.put(f"permissions/%2F/{name}", {"configure": ".*", "write": ".*", "read": ".*"}).status in (201, 204)
    yield
    for name in TEST_USERS:
        api.delete(f"users/{name}")


@pytest.fixture(params=["embedded", "rabbitmq"])
def api(request):
    """The same test against the embedded broker's API and RabbitMQ's management plugin."""
    if request.param == "rabbitmq":
        amqp = require_rabbitmq_management(request)
        request.getfixturevalue("rabbitmq_users")
        a = Api("rabbitmq", RABBITMQ_MGMT, amqp)
    else:
        b = request.getfixturevalue("mgmt_broker")
        a = Api("embedded", b.management_url, b.url)
    yield a
    a.cleanup()


@pytest.fixture
def embedded_api(mgmt_broker):
    a = Api("embedded", mgmt_broker.management_url, mgmt_broker.url)
    yield a
    a.cleanup()
