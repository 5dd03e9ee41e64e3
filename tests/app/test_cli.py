"""The ``spark-amqp`` command: publish / consume against both brokers, and its error paths."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest


def test_publish_lines_then_consume(run, broker_url, unique, cleanup):
    q = unique("cli-lines")
    cleanup["queues"].append(q)
    r = run("publish", "--uri", broker_url, "--queue", q, "-k", q, "-q", input="a\nb\n\nc\n")
    assert r.exit_code == 0, r.output
    assert "3 confirmed, 0 unroutable" in r.stderr
    r = run("consume", q, "--uri", broker_url, "--format", "json", "--timeout", "1")
    assert r.exit_code == 0, r.output
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert [d["body"] for d in records] == ["a", "b", "c"]
    assert {d["routing_key"] for d in records} == {q}
    assert not any(d["redelivered"] for d in records)
    # acknowledged: the queue is empty now
    r = run("consume", q, "--uri", broker_url, "--format", "count", "--timeout", "0.5")
    assert r.stdout.strip() == "0"


def test_publish_json_with_routing_key_template(run, broker_url, unique, cleanup):
    ex, q = unique("cli-ex"), unique("cli-orders")
    cleanup["queues"].append(q)
    cleanup["exchanges"].append(ex)
    lines = "\n".join(json.dumps({"country": c, "n": i}) for i, c in enumerate("de fr de".split()))
    r = run("publish", "--uri", broker_url, "--json", "-e", ex, "--declare", "topic",
            "-k", "orders.{country}", "--queue", q, "--binding-key", "orders.de", "-q",
            input=lines + "\n")
    # the 'fr' order has no matching binding: published mandatory, returned, so the command fails
    assert r.exit_code == 1
    assert "1 message(s) were unroutable" in r.stderr and "orders.fr" in r.stderr
    r = run("consume", q, "--uri", broker_url, "--format", "json", "--timeout", "1", "-n", "5")
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert [d["routing_key"] for d in records] == ["orders.de", "orders.de"]
    assert [json.loads(d["body"])["n"] for d in records] == [0, 2]
    assert all(d["properties"]["content_type"] == "application/json" for d in records)


def test_consume_count_and_no_ack_peek(run, broker_url, unique, cleanup):
    q = unique("cli-peek")
    cleanup["queues"].append(q)
    run("publish", "--uri", broker_url, "--queue", q, "-k", q, "-q",
        input="".join(f"m{i}\n" for i in range(10)))
    r = run("consume", q, "--uri", broker_url, "-n", "4", "--no-ack", "--timeout", "1")
    assert r.exit_code == 0
    assert r.stdout.splitlines() == ["m0", "m1", "m2", "m3"]
    assert "requeued" in r.stderr
    # not acknowledged: all ten are still there (the first four come back redelivered)
    r = run("consume", q, "--uri", broker_url, "--format", "json", "--timeout", "1")
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert sorted(d["body"] for d in records) == sorted(f"m{i}" for i in range(10))
    assert sum(d["redelivered"] for d in records) == 4


def test_publish_flights(run, broker_url, unique, cleanup):
    ex, q = unique("cli-flights"), unique("cli-flights")
    cleanup["queues"].append(q)
    cleanup["exchanges"].append(ex)
    r = run("publish", "--uri", broker_url, "--flights", "--limit", "50", "-e", ex,
            "--queue", q, "-q")
    assert r.exit_code == 0, r.output
    assert "published 50 flights + end-of-stream marker" in r.stderr
    r = run("consume", q, "--uri", broker_url, "--format", "json", "--timeout", "1")
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(records) == 51
    first = json.loads(records[0]["body"])
    assert records[0]["routing_key"] == f"flights.{first['origin']}.{first['carrier']}"
    times = [json.loads(d["body"])["sched_dep"] for d in records]
    assert times == sorted(times)  # event-time order, marker last
    assert records[-1]["properties"]["type"] == "end-of-stream"
    assert records[0]["properties"]["message_id"].startswith("nycflights13-")


def test_bad_json_line_names_the_line(run, broker_url, unique):
    r = run("publish", "--uri", broker_url, "--json", "-k", unique("nowhere"), "-q",
            input='{"a": 1}\nnot json\n')
    assert r.exit_code == 1
    assert "line 2 is not JSON" in r.stderr


def test_template_without_json_is_a_usage_error(run):
    r = run("publish", "-k", "orders.{country}", input="x\n")
    assert r.exit_code == 2
    assert "add --json" in r.stderr


def test_consume_missing_queue_is_404(run, broker_url, unique):
    r = run("consume", unique("missing"), "--uri", broker_url, "--timeout", "0.5")
    assert r.exit_code == 1
    assert "(404)" in r.stderr and "NOT_FOUND" in r.stderr
    assert "Traceback" not in r.output


def test_unreachable_broker_is_one_line(run):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run("consume", "q", "--uri", f"amqp://guest:guest@127.0.0.1:{port}/%2F", "--timeout", "0.5")
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: cannot talk to the broker at amqp://guest:***@127.0.0.1")
    assert len(r.stderr.strip().splitlines()) == 1


def test_broker_port_in_use(run):
    pytest.importorskip("spark_amqp.broker.server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run("broker", "--port", port)
    assert r.exit_code == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    assert str(port) in lines[0] and "in use" in lines[0]


def test_broker_missing_config_file(run, tmp_path):
    r = run("broker", "--port", 0, "--config", tmp_path / "nope.toml")
    assert r.exit_code == 2
    assert "no such file" in r.stderr


def test_python_dash_m_help():
    out = subprocess.run([sys.executable, "-m", "spark_amqp", "--help"], capture_output=True,
                         text=True, check=True).stdout
    for sub in ("broker", "publish", "consume"):
        assert sub in out


def test_publish_one_message_is_singular(run, broker_url, unique, cleanup):
    q = unique("cli-one")
    cleanup["queues"].append(q)
    r = run("publish", "--uri", broker_url, "--queue", q, "-q", input="only\n")
    assert r.exit_code == 0, r.output
    assert r.stderr.startswith("published 1 message to the default exchange")


def test_consume_help_names_the_alerts_queue(run):
    out = run("consume", "--help").stdout
    assert "flight-delay-alerts" in out and "flight-alerts " not in out


@pytest.mark.parametrize("show", [False, True])
def test_broker_terminal_shows_connections_only_when_asked(tmp_path, show):
    """Each connection's open/login/close (INFO, as RabbitMQ) goes to --log-file but not to
    the terminal, where it mixed with the walk-through's command output; --log-connections
    shows it there too. Startup lines show either way."""
    import time

    pytest.importorskip("spark_amqp.broker.server")
    from broker_process import free_port, wait_port

    from spark_amqp.client import connect

    port, log = free_port(), tmp_path / "broker.log"
    proc = subprocess.Popen([sys.executable, "-m", "spark_amqp", "broker", "--port", str(port),
                             "--log-file", str(log), *(["--log-connections"] if show else [])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_port(port, timeout=60, proc=proc)
        with connect(f"amqp://guest:guest@127.0.0.1:{port}/%2F") as conn:
            conn.channel().queue_declare("", exclusive=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "closed AMQP connection" not in log.read_text():
            time.sleep(0.1)
    finally:
        proc.terminate()
        terminal = proc.communicate(timeout=30)[1]
    text = log.read_text()
    assert "accepting AMQP connection" in text and "closed AMQP connection" in text, text
    assert "ready on" in terminal, terminal
    assert ("accepting AMQP connection" in terminal) is show, terminal
    assert ("authenticated and granted access" in terminal) is show, terminal


def test_broker_log_file_and_new_data_dir_are_logged(tmp_path):
    """``broker --data-dir`` says when it creates the folder; ``--log-file`` gets the log."""
    import time

    pytest.importorskip("spark_amqp.broker.server")
    data, log = tmp_path / "data" / "broker", tmp_path / "logs" / "broker.log"
    proc = subprocess.Popen([sys.executable, "-m", "spark_amqp", "broker", "--port", "0",
                             "--data-dir", str(data), "--log-file", str(log)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if log.is_file() and "ready on" in log.read_text():
                break
            time.sleep(0.1)
        text = log.read_text() if log.is_file() else ""
        assert "ready on" in text, text
        assert f"data directory {data} does not exist: creating it" in text
        assert data.is_dir()
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_command_pointed_at_the_management_port_says_so(run):
    """The management port answers HTTP: one line naming it and AMQP's usual port, no "is it
    running?" (it is) and no traceback (ProtocolMismatch was not caught)."""
    from spark_amqp import EmbeddedBroker

    with EmbeddedBroker(management=True) as b:
        r = run("depth", "q", "--uri", f"amqp://guest:guest@127.0.0.1:{b.management_port}/%2F")
    assert r.exit_code == 1
    assert "answered in HTTP ('HTTP/1.0 400 Bad Request'), not AMQP 0-9-1: is this the " \
        "management port? AMQP 0-9-1 is usually on port 5672" in r.stderr, r.stderr
    assert "is it running" not in r.stderr and "Traceback" not in r.stderr
