"""An interrupted test session leaves no process and no queue behind (issue 42: a ``make
test`` stopped early left two query runners, two JVMs, ~15 ``pyspark.daemon`` processes and a
queue of 79,693 messages on RabbitMQ).

A child pytest runs two real tests against RabbitMQ: the live-publisher test (a Spark query
in the session's JVM while a publisher thread writes to a queue) and the queue-mode crash test
(its scenario starts in the background when the session starts: a subprocess that publishes
100,000 messages to a queue and starts a query runner, a JVM of its own). Once the session's
JVM, the runner, a ``pyspark.daemon`` and both queues are there (about a third into the
child's run), the child's process group gets the signal a terminal's Ctrl-C sends (SIGINT),
or the one ``kill`` sends (SIGTERM), or pytest gets SIGKILL (then its watchdog cleans up).
Then no process that was in the child's tree or carries its session id lives, and RabbitMQ
holds no queue or exchange with its session prefix (tests/session_guard.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import session_guard

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
#: the child's tests: a Spark query with a publisher writing, and a background crash run
CHILD_TESTS = [
    "tests/spark/test_live.py::test_live_publisher_three_rates[rabbitmq-queue]",
    "tests/spark/test_queues_crash.py::test_crash_restart_loses_nothing[rabbitmq]",
]


def _carrying(sid: str) -> list[psutil.Process]:
    """Live processes (not zombies) whose environment carries session ``sid``."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(session_guard.ENV) == sid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            pass
    return out


def _names(sid: str, amqp_url: str) -> list[str]:
    prefix = session_guard.session_prefix(sid)
    out = []
    for kind in ("queues", "exchanges"):
        out += [f"{kind[:-1]} {o['name']}" for o in session_guard._api(
            "GET", f"api/{kind}?columns=name", session_guard.MANAGEMENT_URL, "guest", "guest")
            if o["name"].startswith(prefix)]
    return out


def _up(child: psutil.Process, sid: str, amqp_url: str) -> str | None:
    """What is not up yet in the child's session ("" when everything is)."""
    procs = _carrying(sid)
    cmd = {p.pid: " ".join(p.cmdline()) for p in procs if p.is_running()}
    java = [c for c in cmd.values() if "org.apache.spark.deploy.SparkSubmit" in c]
    missing = []
    if not any("source_query_runner.py" in c for c in cmd.values()):
        missing.append("the background run's query runner")
    if len(java) < 2:
        missing.append(f"two JVMs (the session's and the runner's; {len(java)})")
    if not any("pyspark.daemon" in c for c in cmd.values()):
        missing.append("a pyspark.daemon")
    if len([n for n in _names(sid, amqp_url) if n.startswith("queue")]) < 2:
        missing.append("the two queues on RabbitMQ")
    return "; ".join(missing)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_interrupted_session_leaves_nothing(rabbitmq_url, tmp_path, how):
    sid = session_guard.new_session_id()
    log = open(tmp_path / "child.log", "wb")
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--session-id", sid,
         f"--basetemp={tmp_path / 'base'}", *CHILD_TESTS],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    child = psutil.Process(proc.pid)
    try:
        deadline = time.monotonic() + 240
        missing = "the child's session"
        while missing and proc.poll() is None and time.monotonic() < deadline:
            missing = _up(child, sid, rabbitmq_url)
            time.sleep(0.5)
        assert not missing, (f"not up after {time.monotonic() - started:.0f} s: {missing}\n"
                             f"{(tmp_path / 'child.log').read_text()[-3000:]}")
        up_at = time.monotonic() - started
        tree = {p.pid: p for p in [child, *child.children(recursive=True), *_carrying(sid)]}
        names = _names(sid, rabbitmq_url)
        if how == "SIGKILL":
            proc.kill()                       # pytest alone: its watchdog cleans up
        else:                                 # the terminal's foreground group, as Ctrl-C / kill
            os.killpg(proc.pid, getattr(signal, how))
        rc = proc.wait(timeout=120)
        gone_at = time.monotonic() - started

        def left():
            return ([f"{p.pid} {' '.join(p.cmdline())[:150]}" for p in tree.values()
                     if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
                    + [f"{p.pid} {' '.join(p.cmdline())[:150]}" for p in _carrying(sid)])

        # SIGKILL: the watchdog polls twice a second, then stops the processes (SIGTERM, 3 s,
        # SIGKILL); the other signals are handled before pytest exits
        deadline = time.monotonic() + (60 if how == "SIGKILL" else 5)
        while left() and time.monotonic() < deadline:
            time.sleep(0.5)
        print(f"\n[{how}] up after {up_at:.0f} s ({len(tree)} processes, {len(names)} names "
              f"on RabbitMQ), child exited {rc} after {gone_at:.0f} s")
        assert not left(), f"left behind after {how}:\n" + "\n".join(left())
        while _names(sid, rabbitmq_url) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _names(sid, rabbitmq_url) == []
        if how != "SIGKILL":
            assert rc == 2, (tmp_path / "child.log").read_text()[-3000:]   # "interrupted"
    finally:
        if proc.poll() is None:
            proc.kill()
        session_guard.kill_session(sid)
        session_guard.delete_session_objects(sid, amqp_url=rabbitmq_url)
        log.close()
