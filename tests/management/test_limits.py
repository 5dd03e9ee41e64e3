"""Clients that misbehave on the management port (issue 41): slow, idle, huge and malformed
requests are refused or bounded, as RabbitMQ 3.10.8's plugin does (or more strictly), without
stalling the AMQP port. Where RabbitMQ's answer is the rule, the same assertion runs against
its plugin on 127.0.0.1:15672 (``api`` fixture / the ``rabbitmq`` parameter).

On the code before issue 41 (checked by running this file there): the idle and half-sent
sockets stayed open (no 408), bodies of 11 MB were taken (limit 64 MiB) and parsed on the loop
(the AMQP round trips of the stall test took seconds), two or non-ASCII Authorization headers
gave 200 / 500, a 300-byte queue or exchange name was created, a 300-byte routing key was
a 500 (publish) or stored (bind), arguments 70 or 900 deep were stored and then broke the lists
with 500 RecursionError, a foreign Host was served, API answers had no Cache-Control, and
nothing limited the number of sockets. ~40 s (two 5 s waits, the stall test ~10 s).
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import statistics
import threading
import time
import urllib.parse

import pytest

from .conftest import RABBITMQ_MGMT, require_rabbitmq_management
from spark_amqp.broker.config import BrokerConfig, ManagementLimits
from spark_amqp.broker.embedded import EmbeddedBroker

AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()


def _port(base: str) -> int:
    return urllib.parse.urlparse(base).port


def _request(port: int, method: str, path: str, headers=(), body: bytes = b"", host: str | None = None,
             timeout: float = 30) -> tuple[int, dict, bytes]:
    """One raw HTTP/1.1 request (``Connection: close``); ``(status, headers, body)``. Header
    values may be bytes (sent as they are)."""
    lines = [f"{method} {path} HTTP/1.1".encode(), f"Host: {host or f'127.0.0.1:{port}'}".encode()]
    for k, v in headers:
        lines.append(k.encode() + b": " + (v if isinstance(v, bytes) else v.encode()))
    if body or method in ("PUT", "POST"):
        lines.append(f"Content-Length: {len(body)}".encode())
    lines.append(b"Connection: close")
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        data = b""
        while True:
            try:
                d = s.recv(65536)
            except ConnectionResetError:
                break
            if not d:
                break
            data += d
    finally:
        s.close()
    return _parse(data)


def _parse(data: bytes) -> tuple[int, dict, bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else 0
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body


def _json(path_body) -> bytes:
    return json.dumps(path_body).encode()


J = ("Content-Type", "application/json")
A = ("Authorization", AUTH)


@pytest.fixture
def both(request, mgmt_broker):
    """{"embedded": port, "rabbitmq": port} of the two management listeners."""
    ports = {"embedded": _port(mgmt_broker.management_url)}
    require_rabbitmq_management(request)
    ports["rabbitmq"] = _port(RABBITMQ_MGMT)
    return ports


# --- slow and idle connections ----------------------------------------------------------------

def test_idle_and_half_sent_requests_end_after_request_timeout(both):
    """Both brokers at once (one 5 s wait): a socket that sends nothing is closed after ~5 s
    without an answer; one that sent half a request line and headers gets 408 after ~5 s."""
    results: dict = {}

    def run(name: str, port: int, send: bytes) -> None:
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        t0 = time.monotonic()
        if send:
            s.sendall(send)
        data = b""
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                data += d
        except (socket.timeout, ConnectionResetError):
            pass
        results[name] = (time.monotonic() - t0, data)
        s.close()

    half = b"GET /api/overview HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + AUTH.encode()
    threads = [threading.Thread(target=run, args=(f"{n} {kind}", p, send))
               for n, p in both.items() for kind, send in (("idle", b""), ("half", half))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for n in both:
        took, data = results[f"{n} idle"]
        assert 4.0 <= took <= 8.0 and data == b"", (n, took, data[:80])
        took, data = results[f"{n} half"]
        assert 4.0 <= took <= 8.0 and data.startswith(b"HTTP/1.1 408"), (n, took, data[:80])


def test_a_body_that_stops_arriving_gets_408_after_idle_timeout():
    cfg = BrokerConfig(management=ManagementLimits(idle_timeout=1000))
    with EmbeddedBroker(config=cfg, management=True) as b:
        port = _port(b.management_url)
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        t0 = time.monotonic()
        s.sendall(f"PUT /api/queues/%2F/h41-slow HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {AUTH}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{".encode())
        data = s.recv(65536)
        took = time.monotonic() - t0
        s.close()
        assert data.startswith(b"HTTP/1.1 408") and 0.8 <= took <= 3.0, (took, data[:100])


def test_connection_maximum_answers_503_then_the_oldest_idle_socket_makes_room(caplog):
    caplog.set_level(logging.WARNING, "spark_amqp.broker")
    cfg = BrokerConfig(management=ManagementLimits(max_connections=5))
    with EmbeddedBroker(config=cfg, management=True) as b:
        port = _port(b.management_url)
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(5)]
        time.sleep(0.2)
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        status, hdrs, _ = _parse(s.recv(65536))
        s.close()
        assert status == 503 and hdrs.get("retry-after") == "5", (status, hdrs)
        assert any("refused http connection" in r.message and "max_connections = 5" in r.message
                   for r in caplog.records)
        time.sleep(1.0)   # the idle sockets are older than EVICT_AFTER now
        status, _, _ = _request(port, "GET", "/api/overview", [A])
        assert status == 200
        for x in idle:
            x.close()


# --- bodies -------------------------------------------------------------------------------------

def test_body_size_limits_per_route(mgmt_broker):
    port = _port(mgmt_broker.management_url)
    # a Content-Length above the route's limit: 413 before the body is sent, connection closed
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(f"POST /api/exchanges/%2F/amq.default/publish HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              f"Authorization: {AUTH}\r\nContent-Type: application/json\r\nContent-Length: 11000000\r\n\r\n".encode())
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    status, _, body = _parse(data)
    assert status == 413 and b"10000000 bytes" in body, data[:300]
    # a declaration: 1 MiB
    big = _json({"durable": True, "arguments": {"x-pad": "x" * (1 << 20)}})
    status, _, body = _request(port, "PUT", "/api/queues/%2F/h41-big", [A, J], big)
    assert status == 413 and b"1048576 bytes" in body, body
    # chunked, over the limit: cut off at the limit
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(f"PUT /api/queues/%2F/h41-big HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {AUTH}\r\n"
              f"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
    try:
        for _ in range(20):
            s.sendall(b"10000\r\n" + b" " * 0x10000 + b"\r\n")
    except OSError:
        pass
    status, _, _ = _parse(s.recv(65536))
    s.close()
    assert status == 413
    # a publish of 9.5 MB is fine (under http.max_body_size)
    body = _json({"properties": {}, "routing_key": "h41-nowhere", "payload": "x" * 9_500_000,
                  "payload_encoding": "string"})
    status, _, body = _request(port, "POST", "/api/exchanges/%2F/amq.default/publish", [A, J], body)
    assert status == 200 and json.loads(body) == {"routed": False}


def test_configured_max_body_size():
    cfg = BrokerConfig(management=ManagementLimits(max_body_size=100_000))
    with EmbeddedBroker(config=cfg, management=True) as b:
        port = _port(b.management_url)
        body = _json({"properties": {}, "routing_key": "k", "payload": "x" * 200_000, "payload_encoding": "string"})
        status, _, text = _request(port, "POST", "/api/exchanges/%2F/amq.default/publish", [A, J], body)
        assert status == 413 and b"100000 bytes" in text and b"http.max_body_size" in text


def _amqp_round_trips(url: str, stop: threading.Event, out: list) -> None:
    """Publish to an exclusive queue and consume it back, one message at a time, until
    ``stop``: the round trip of each in seconds goes to ``out``."""
    import pika

    c = pika.BlockingConnection(pika.URLParameters(url))
    ch = c.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    try:
        while not stop.is_set():
            t0 = time.monotonic()
            ch.basic_publish("", q, b"ping")
            while True:
                m = ch.basic_get(q, auto_ack=True)
                if m[0] is not None:
                    break
            out.append(time.monotonic() - t0)
            time.sleep(0.01)
    finally:
        c.close()


def _stall_attack(port: int) -> list[int]:
    """8 concurrent ~9.5 MB malformed JSON bodies and 4 valid ones of 1.5M values, to the
    publish route; their statuses."""
    malformed = b'{"properties": {}, "routing_key": "k", "payload": "' + b"x" * 9_500_000
    many = b'{"properties": {"headers": {"h": [' + b",".join([b"0"] * 1_500_000) + \
        b']}}, "routing_key": "k", "payload": "", "payload_encoding": "string"}'
    statuses: list[int] = []

    def send(body: bytes) -> None:
        statuses.append(_request(port, "POST", "/api/exchanges/%2F/amq.default/publish", [A, J], body, timeout=60)[0])

    threads = [threading.Thread(target=send, args=(malformed,)) for _ in range(8)] + \
              [threading.Thread(target=send, args=(many,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    return statuses


@pytest.mark.parametrize("broker", ["embedded", "rabbitmq"])
def test_large_json_bodies_do_not_stall_amqp(request, mgmt_broker, broker):
    """While 12 large bodies are sent to the publish route, an AMQP client's round trips stay
    under 100 ms at the 99th percentile (before: 8 malformed 60 MB bodies stalled them 8.3 s).
    RabbitMQ's figures are printed beside ours; only ours are asserted."""
    if broker == "rabbitmq":
        amqp = require_rabbitmq_management(request)
        port = _port(RABBITMQ_MGMT)
    else:
        amqp, port = mgmt_broker.url, _port(mgmt_broker.management_url)
    rtts: list[float] = []
    stop = threading.Event()
    t = threading.Thread(target=_amqp_round_trips, args=(amqp, stop, rtts))
    t.start()
    try:
        time.sleep(0.5)
        t0 = time.monotonic()
        statuses = _stall_attack(port)
        took = time.monotonic() - t0
        time.sleep(0.3)
    finally:
        stop.set()
        t.join(30)
    rtts.sort()
    p99 = rtts[int(len(rtts) * 0.99) - 1] if rtts else None
    print(f"\n{broker}: 12 bodies answered in {took:.2f} s, statuses {sorted(statuses)}; AMQP round trips: "
          f"{len(rtts)}, median {statistics.median(rtts) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
          f"max {rtts[-1] * 1000:.1f} ms")
    if broker == "embedded":
        assert sorted(statuses) == [400] * 12, statuses
        assert p99 < 0.1, f"p99 round trip {p99 * 1000:.0f} ms"


# --- malformed headers --------------------------------------------------------------------------

def test_malformed_authorization_is_400(api):
    port = _port(api.base)
    for headers in ([A, ("Authorization", "Basic Zm9vOmJhcg==")], [A, A],
                    [("Authorization", b"Basic \xff\xfe")], [("Authorization", b"Basic " + "é".encode())]):
        status, _, body = _request(port, "GET", "/api/overview", headers)
        assert status == 400, (api.kind, headers, status, body)


def test_bad_authorization_is_logged_once_not_500_tracebacks(caplog):
    caplog.set_level(logging.INFO, "spark_amqp.management")
    with EmbeddedBroker(management=True) as b:
        port = _port(b.management_url)
        for _ in range(100):
            assert _request(port, "GET", "/api/overview", [("Authorization", b"Basic \xff")])[0] == 400
    lines = [r for r in caplog.records if r.name == "spark_amqp.management" and "refused" in r.getMessage()]
    assert 1 <= len(lines) <= 2 and not any(r.exc_info for r in lines), [r.getMessage() for r in lines]


def test_foreign_host_is_403_but_metrics_and_local_names_pass(mgmt_broker):
    port = _port(mgmt_broker.management_url)
    for host in ("evil.example", "evil.example:15672", "10.9.8.7"):
        for path in ("/api/overview", "/", "/metrics/per-object"):
            status, _, body = _request(port, "GET", path, [A], host=host)
            assert status == 403 and b"allowed_hosts" in body, (host, path, status)
    assert _request(port, "GET", "/metrics", [], host="evil.example")[0] == 200
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}", socket.gethostname(), None):
        status = _request(port, "GET", "/api/overview", [A], host=host or "")[0]
        assert status == 200, (host, status)


def test_allowed_hosts_admits_a_proxy_name():
    cfg = BrokerConfig(management=ManagementLimits(allowed_hosts=["rabbit.example.com"]))
    with EmbeddedBroker(config=cfg, management=True) as b:
        port = _port(b.management_url)
        assert _request(port, "GET", "/api/overview", [A], host="rabbit.example.com")[0] == 200
        assert _request(port, "GET", "/api/overview", [A], host="other.example.com")[0] == 403


def test_api_answers_are_not_cached(api):
    r = api.get("overview")
    assert r.status == 200 and r.headers.get("Cache-Control") == "no-cache", (api.kind, dict(r.headers))


# --- names, routing keys, nesting ----------------------------------------------------------------

def test_names_over_255_bytes(api, unique):
    long = unique("h41") + "-" + "x" * 260
    r = api.put(f"queues/%2F/{long}", {"durable": True})
    if r.status in (201, 204):
        api.cleanup_paths.append(f"queues/%2F/{long}")
    assert r.status == 400 and r.json["reason"].startswith("queue should be less than 255 bytes"), r
    r = api.put(f"exchanges/%2F/{long}", {"type": "direct"})
    if r.status in (201, 204):
        api.cleanup_paths.append(f"exchanges/%2F/{long}")
    if api.kind == "embedded":   # RabbitMQ 3.10.8 creates it (unusable over AMQP, whose names are short strings)
        assert r.status == 400 and r.json["reason"].startswith("exchange should be less than 255 bytes"), r
    else:
        assert r.status in (201, 204), r


def test_routing_keys_over_255_bytes(api, unique):
    q = api.queue(unique("h41-rk"), durable=True)
    qname = q.rsplit("/", 1)[1]
    rk = "k" * 300
    r = api.post(f"bindings/%2F/e/amq.direct/q/{qname}", {"routing_key": rk})
    r2 = api.post("exchanges/%2F/amq.default/publish", {"properties": {}, "routing_key": rk, "payload": "x",
                                                      "payload_encoding": "string"})
    if api.kind == "embedded":   # RabbitMQ 3.10.8 takes both (its publish runs over its own channel)
        assert r.status == 400 and "routing key should be less than 255 bytes" in r.json["reason"], r
        assert r2.status == 400 and "routing key should be less than 255 bytes" in r2.json["reason"], r2
    else:
        assert r.status == 201 and r2.status == 200, (r, r2)


@pytest.mark.parametrize("depth", [70, 900])
def test_deeply_nested_arguments_never_break_the_lists(api, unique, depth):
    args: dict = {"x": 1}
    for _ in range(depth):
        args = {"a": args}
    name = unique(f"h41-deep-{depth}")
    r = api.put(f"queues/%2F/{name}", {"durable": True, "arguments": args})
    if r.status in (201, 204):
        api.cleanup_paths.append(f"queues/%2F/{name}")
    if api.kind == "embedded":   # RabbitMQ 3.10.8 stores it (and its lists cope)
        assert r.status == 400 and "nested deeper than" in r.json["reason"], r
    else:
        assert r.status == 201, r
    for path in ("queues", "exchanges", "definitions", f"queues/%2F/{name}" if r.status == 201 else "overview"):
        assert api.get(path).status == 200, (api.kind, path)
    xname = unique(f"h41-deepx-{depth}")
    r = api.put(f"exchanges/%2F/{xname}", {"type": "direct", "arguments": args})
    if r.status in (201, 204):
        api.cleanup_paths.append(f"exchanges/%2F/{xname}")
    assert (r.status == 400) if api.kind == "embedded" else (r.status == 201), r



@pytest.mark.parametrize("definitions", [
    {"users": {"durable": None}}, {"queues": [1, 2]}, {"queues": [{"name": 5}]},
    {"exchanges": [{"name": "x", "arguments": [1]}]}, {"bindings": [{"source": [], "destination": "q"}]},
    {"vhosts": [{"name": {"a": 1}}]}, {"permissions": [{"user": "u", "vhost": "/", "read": "("}]},
    {"users": [{"name": "u", "password": "p", "tags": 5}]},
], ids=lambda d: json.dumps(d)[:40])
def test_malformed_definitions_are_400(mgmt_broker, definitions):
    """Found by tests/management/test_fuzz.py: a definitions file whose sections or fields
    had the wrong JSON type was a 500 (and an invalid permission regex was stored)."""
    port = _port(mgmt_broker.management_url)
    status, _, body = _request(port, "POST", "/api/definitions", [A, J], _json(definitions))
    assert status == 400 and json.loads(body)["reason"].startswith("definitions: "), (status, body)


def test_download_name_cannot_inject_headers(mgmt_broker):
    """Found by the fuzz: ``?download=`` with a control character dropped the connection."""
    port = _port(mgmt_broker.management_url)
    status, hdrs, _ = _request(port, "GET", "/api/definitions?download=a%0D%0AX-Evil:%201%1F%22.json", [A])
    assert status == 200 and "x-evil" not in hdrs, hdrs
    assert hdrs["content-disposition"] == 'attachment; filename="a__X-Evil: 1__.json"', hdrs
