"""File-descriptor exhaustion (issue 41): thousands of sockets that connect and say nothing,
on the AMQP port and on the management port, against a broker whose descriptor limit is
1024. The listener guard (spark_amqp/broker/listener_guard.py) keeps a reserve of descriptors
free, refuses early with a log line (rate-limited: a few lines, not thousands), and lets a
real client take the place of the oldest silent socket, so that during the flood a normal
AMQP connection opens, publishes and consumes, and the management API answers.

Before issue 41 (checked on main): the broker reached its descriptor limit (``accept``:
EMFILE), and the AMQP connection made during the flood failed at once. ~6 s.
"""

from __future__ import annotations

import base64
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pika
import pytest

from broker_process import ROOT, free_port, wait_port

BROKER_NOFILE = 1024
FLOOD = 3000   # sockets: half on each port


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture
def small_broker(tmp_path):
    """A broker subprocess (AMQP + management) whose RLIMIT_NOFILE is 1024; its log in a file."""
    port, mport = free_port(), free_port()
    log = tmp_path / "broker.log"
    code = (f"import resource, logging, sys; resource.setrlimit(resource.RLIMIT_NOFILE, ({BROKER_NOFILE}, "
            f"{BROKER_NOFILE})); logging.basicConfig(level=logging.WARNING, stream=sys.stderr); "
            f"from spark_amqp.broker import serve; serve('127.0.0.1', {port}, management_port={mport})")
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", code], stderr=err, cwd=str(ROOT),
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        wait_port(port, proc=proc)
        wait_port(mport, proc=proc)
        yield proc, port, mport, log
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_a_flood_of_silent_sockets_leaves_amqp_and_the_api_working(small_broker):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < FLOOD + 200:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, FLOOD + 500), hard))
        except (ValueError, OSError):
            pytest.skip(f"this process may open only {soft} descriptors; the flood needs {FLOOD + 200}")
    proc, port, mport, log = small_broker
    held: list[socket.socket] = []
    try:
        t0 = time.monotonic()
        for i in range(FLOOD):
            try:
                held.append(socket.create_connection(("127.0.0.1", port if i % 2 else mport), timeout=3))
            except OSError:
                pass
        flood_s = time.monotonic() - t0
        time.sleep(1.5)   # the flood's sockets are now older than EVICT_AFTER
        peak = _open_fds(proc.pid)
        assert peak < BROKER_NOFILE, f"the broker holds {peak} descriptors, its limit is {BROKER_NOFILE}"
        # a normal AMQP client during the flood (pika: its descriptor is above 1024 here, which
        # the project client's select() cannot wait on; noticed, issue 41's report)
        c = pika.BlockingConnection(pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{port}/%2F"))
        try:
            ch = c.channel()
            q = ch.queue_declare("", exclusive=True).method.queue
            ch.basic_publish("", q, b"still here")
            got = None
            for _ in range(50):
                got = ch.basic_get(q, auto_ack=True)
                if got[0] is not None:
                    break
                time.sleep(0.05)
            assert got[0] is not None and got[2] == b"still here"
        finally:
            c.close()
        # and the management API
        req = urllib.request.Request(f"http://127.0.0.1:{mport}/api/overview", headers={
            "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200
    finally:
        for s in held:
            s.close()
    text = Path(log).read_text(errors="replace")
    lines = [ln for ln in text.splitlines() if "connection" in ln and ("refused" in ln or "oldest" in ln)]
    assert lines, text[-2000:]
    assert len(lines) <= 40, f"{len(lines)} log lines for one flood: the refusals must be rate-limited"
    assert "EMFILE" not in text and "Too many open files" not in text, text[-2000:]
    print(f"\n{len(held)} sockets opened in {flood_s:.2f} s; the broker held {peak} descriptors "
          f"(limit {BROKER_NOFILE}); {len(lines)} log lines about them")
