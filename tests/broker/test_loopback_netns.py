"""loopback_users over a real network (issue 18): two network namespaces joined by a veth pair,
the broker (``serve``) in one, pika in the other. Root and ``ip netns`` only; skipped otherwise.

What RabbitMQ 3.10.8 does (rabbit_reader:auth_phase, rabbit_access_control:check_user_loopback,
rabbit_net:is_loopback, read from the installed beam files): after a successful login, a user
listed in ``loopback_users`` is refused unless the connection's *local* address is loopback;
the client with ``authentication_failure_close`` gets 403 "ACCESS_REFUSED - Login was refused
using authentication mechanism PLAIN. For details see the broker logfile." and the log says
"PLAIN login refused: user 'guest' can only connect via localhost". (RabbitMQ here listens on
127.0.0.1 only, so the real broker cannot take part in this test.)

Takes ~7 s (two broker processes, three client processes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spark_amqp.broker.passwords import hash_password

ROOT = Path(__file__).resolve().parents[2]

CLIENT = r"""
import json, re, sys, pika

def login(host, port, user, password):
    try:
        c = pika.BlockingConnection(pika.ConnectionParameters(
            host, port, "/", pika.PlainCredentials(user, password), connection_attempts=1, socket_timeout=10))
        ch = c.channel()
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_publish("", q, b"hello")
        body = ch.basic_get(q, auto_ack=True)[2]
        c.close()
        return {"ok": True, "body": body.decode()}
    except pika.exceptions.AMQPConnectionError as exc:
        # pika wraps the broker's connection.close as "ConnectionClosedByBroker: (403) 'text'"
        m = re.search(r"\((\d+)\) '(.*)'", str(exc))
        return {"ok": False, "type": type(exc).__name__,
                "code": int(m.group(1)) if m else None, "text": m.group(2) if m else str(exc)}

print(json.dumps([login(*attempt) for attempt in json.loads(sys.argv[1])]))
"""


def _have_netns() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip` command"
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"`ip netns` does not work here: {r.stderr.strip()}"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


@pytest.fixture
def netns_pair():
    """(broker namespace, client namespace, broker address, client address), torn down after."""
    reason = _have_netns()
    if reason:
        pytest.skip(reason)
    tag = f"{os.getpid() % 100000}"
    nb, nc = f"sa18b{tag}", f"sa18c{tag}"
    vb, vc = f"sa18b{tag}", f"sa18c{tag}"  # interface names (at most 15 characters)
    octet = os.getpid() % 200 + 20
    addr_b, addr_c = f"10.218.{octet}.1", f"10.218.{octet}.2"
    try:
        _ip("netns", "add", nb)
        _ip("netns", "add", nc)
        _ip("link", "add", vb, "netns", nb, "type", "veth", "peer", "name", vc, "netns", nc)
        for ns, dev, addr in ((nb, vb, addr_b), (nc, vc, addr_c)):
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
    except subprocess.CalledProcessError as exc:
        for ns in (nb, nc):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        pytest.skip(f"cannot set up network namespaces: {exc.stderr.strip()}")
    yield nb, nc, addr_b, addr_c
    for ns in (nb, nc):  # deleting a namespace deletes its end of the veth pair
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT))


class _NsBroker:
    def __init__(self, ns: str, config: Path, port: int = 5672):
        code = ("import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stderr); "
                f"from spark_amqp.broker import serve; serve('0.0.0.0', {port}, None, {str(config)!r})")
        self.ns, self.port = ns, port
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", code],
                                     stderr=subprocess.PIPE, env=_env(), cwd=str(ROOT))
        wait = (f"import socket, time\nt = time.monotonic() + 30\nwhile True:\n    try:\n"
                f"        socket.create_connection(('127.0.0.1', {port}), 1).close(); break\n"
                f"    except OSError:\n        assert time.monotonic() < t; time.sleep(0.05)\n")
        r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", wait], capture_output=True)
        if r.returncode == 0:
            return
        self.stop()
        raise AssertionError(f"the broker did not start in {ns}: {self.log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        _, err = self.proc.communicate(timeout=30)
        self.log = err.decode(errors="replace")


def _logins(ns: str, *attempts: tuple) -> list[dict]:
    """Run pika logins ``(host, port, user, password)`` one after another in namespace ``ns``."""
    r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", CLIENT, json.dumps(attempts)],
                       capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_guest_refused_from_another_host_other_users_admitted(netns_pair, tmp_path):
    nb, nc, addr_b, _ = netns_pair
    conf = tmp_path / "broker.toml"
    conf.write_text(f"""
[[users]]
name = "guest"
password = "guest"
tags = ["administrator"]
[[users]]
name = "app"
password_hash = "{hash_password('app-s3cret')}"
[[permissions]]
user = "guest"
vhost = "/"
[[permissions]]
user = "app"
vhost = "/"
""")
    broker = _NsBroker(nb, conf)
    try:
        refused, admitted = _logins(nc, (addr_b, 5672, "guest", "guest"), (addr_b, 5672, "app", "app-s3cret"))
        # the same host, but the broker's non-loopback address: RabbitMQ looks at the local
        # address of the socket, so this is refused too
        local_guest, own_address = _logins(nb, ("127.0.0.1", 5672, "guest", "guest"),
                                           (addr_b, 5672, "guest", "guest"))
    finally:
        broker.stop()
    assert not refused["ok"], refused
    assert refused["code"] == 403, refused
    assert refused["text"] == ("ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. "
                               "For details see the broker logfile."), refused
    assert "PLAIN login refused: user 'guest' can only connect via localhost" in broker.log
    assert admitted == {"ok": True, "body": "hello"}
    assert local_guest == {"ok": True, "body": "hello"}
    assert not own_address["ok"] and own_address["code"] == 403, own_address
    # listening on all interfaces with guest/guest: the log says what to change
    assert "still has the default password 'guest'" in broker.log and "without TLS" in broker.log


def test_empty_loopback_users_lets_guest_in_from_anywhere(netns_pair, tmp_path):
    nb, nc, addr_b, _ = netns_pair
    conf = tmp_path / "broker.toml"
    conf.write_text("[broker]\nloopback_users = []\n")
    broker = _NsBroker(nb, conf)
    try:
        remote_guest, = _logins(nc, (addr_b, 5672, "guest", "guest"))
    finally:
        broker.stop()
    assert remote_guest == {"ok": True, "body": "hello"}
    assert "anyone who can reach this port can log in as 'guest'" in broker.log
