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

#: ``python -c DEFAULT_SIGINT ARGS``: ``python ARGS`` with SIGINT at its default action
DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


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


def _objects(sid: str, columns: str = "name") -> list[dict]:
    """The queues and exchanges on RabbitMQ whose names start with session ``sid``'s prefix
    (``kind`` "queue" or "exchange", and ``columns`` of the management API)."""
    prefix = session_guard.session_prefix(sid)
    out = []
    for kind in ("queues", "exchanges"):
        for o in session_guard._api("GET", f"api/{kind}?columns={columns}",
                                    session_guard.MANAGEMENT_URL, "guest", "guest"):
            if o["name"].startswith(prefix):
                out.append(dict(o, kind=kind[:-1]))
    return out


def _names(sid: str) -> list[str]:
    return [f"{o['kind']} {o['name']}" for o in _objects(sid)]


def _up(sid: str) -> str:
    """What is not up yet in the child's session ("" when everything is): the live test's
    query consuming its queue (so its publisher writes), the background crash run's queue
    and query runner, the two JVMs (the session's, the runner's) and a pyspark.daemon."""
    cmd = []
    for p in _carrying(sid):
        try:
            cmd.append(" ".join(p.cmdline()))
        except psutil.Error:
            pass
    queues = [o for o in _objects(sid, "name,consumers") if o["kind"] == "queue"]
    java = [c for c in cmd if "org.apache.spark.deploy.SparkSubmit" in c]
    missing = []
    if not any(".live-queue." in q["name"] and q.get("consumers") for q in queues):
        missing.append("the live test's query on its queue")
    if not any(".crash." in q["name"] for q in queues):
        missing.append("the crash run's queue")
    if not any("source_query_runner.py" in c for c in cmd):
        missing.append("the crash run's query runner")
    if len(java) < 2:
        missing.append(f"two JVMs (the session's and the runner's; {len(java)})")
    if not any("pyspark.daemon" in c for c in cmd):
        missing.append("a pyspark.daemon")
    return "; ".join(missing)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_interrupted_session_leaves_nothing(rabbitmq_url, tmp_path, how):
    sid = session_guard.new_session_id()
    log = open(tmp_path / "child.log", "wb")
    started = time.monotonic()
    # SIGINT as a terminal's foreground job has it (this pytest may run where it is ignored,
    # as in a background job of a script, and the child would inherit that)
    proc = subprocess.Popen(
        [sys.executable, "-c", DEFAULT_SIGINT, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--session-id", sid, f"--basetemp={tmp_path / 'base'}", *CHILD_TESTS],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    child = psutil.Process(proc.pid)
    try:
        deadline = time.monotonic() + 240
        missing = "the child's session"
        while missing and proc.poll() is None and time.monotonic() < deadline:
            missing = _up(sid)
            time.sleep(0.5)
        assert not missing, (f"not up after {time.monotonic() - started:.0f} s: {missing}\n"
                             f"{(tmp_path / 'child.log').read_text()[-3000:]}")
        up_at = time.monotonic() - started
        tree = {p.pid: p for p in [child, *child.children(recursive=True), *_carrying(sid)]}
        names = _names(sid)
        if how == "SIGKILL":
            proc.kill()                       # pytest alone: its watchdog cleans up
        else:                                 # the terminal's foreground group, as Ctrl-C / kill
            os.killpg(proc.pid, getattr(signal, how))
        signalled = time.monotonic()
        rc = proc.wait(timeout=120)
        gone_in = time.monotonic() - signalled

        def left():
            out = []
            for p in [*tree.values(), *_carrying(sid)]:
                try:
                    if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                        out.append(f"{p.pid} {' '.join(p.cmdline())[:150]}")
                except psutil.Error:
                    pass
            return out

        # SIGKILL: the watchdog polls twice a second, then stops the processes (SIGTERM, 3 s,
        # SIGKILL); the other signals are handled before pytest exits
        deadline = time.monotonic() + (60 if how == "SIGKILL" else 5)
        while left() and time.monotonic() < deadline:
            time.sleep(0.5)
        print(f"\n[{how}] up after {up_at:.0f} s ({len(tree)} processes, {len(names)} names "
              f"on RabbitMQ), child exited {rc} {gone_in:.1f} s after the signal, nothing left "
              f"{time.monotonic() - signalled:.1f} s after it")
        assert not left(), f"left behind after {how}:\n" + "\n".join(left())
        while _names(sid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _names(sid) == []
        if how != "SIGKILL":
            assert rc == 2, (tmp_path / "child.log").read_text()[-3000:]   # "interrupted"
    finally:
        if proc.poll() is None:
            proc.kill()
        session_guard.kill_session(sid, descendants=False)
        session_guard.delete_session_objects(sid, amqp_url=rabbitmq_url)
        log.close()
