"""What a test session leaves behind, and its removal: the session's processes and its names on
the real RabbitMQ (issue 42: an interrupted ``make test`` left two query runners, two JVMs,
~15 ``pyspark.daemon`` processes and a queue of 79,693 messages behind).

**Processes.** ``tests/conftest.py`` gives every pytest session an id (:func:`new_session_id`:
its UTC start time and random hex) and puts it in the environment as :data:`ENV` before
anything starts, so every process the session starts carries it: the background runs
(``tests/background.py``), the broker subprocesses (``tests/broker_process.py``), the query
runners (``tests/spark/*runner*.py``, in process groups of their own), Spark's JVM (pyspark's
``launch_gateway`` starts it with the driver's environment and makes it ignore SIGINT) and the
``pyspark.daemon`` processes the JVM starts (they call ``setpgid``: a process-group kill misses
them), the standalone cluster's daemons, the RabbitMQ nodes, Chromium. A process's initial
environment is readable in ``/proc/<pid>/environ`` (psutil's ``Process.environ()``) for as long
as it lives, whatever process group or session it moved to; :func:`kill_session` finds them by
it, and also takes every descendant of the calling process (one that cleared its environment).

Who calls it: the session finalizer (``pytest_sessionfinish``), the SIGINT/SIGTERM handler
(``pytest_configure`` installs it: it kills at once, then raises KeyboardInterrupt so that
pytest's teardown runs against dead processes instead of waiting for them), and a watchdog
process (:func:`start_watchdog`, in a session of its own) that does both when pytest itself
dies, even of SIGKILL (it polls its parent pid).

**Names.** Every queue, exchange and stream the tests declare is named by :func:`unique_name`:
``spark-amqp-test.<session id>.<kind>.<10 hex>`` (the ``unique`` fixture of
``tests/conftest.py``). :func:`delete_session_objects` deletes this session's names from the
real RabbitMQ through its management API, and, at session start, the names of sessions older
than :data:`STALE_HOURS` (a session interrupted where nothing could clean up: the machine
went down).
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import datetime, timezone
from pathlib import Path

#: the environment variable that carries the session id into every process the session starts
ENV = "SPARK_AMQP_TEST_SESSION"
#: the first part of every name the tests declare on a broker
PREFIX = "spark-amqp-test."
#: names of sessions older than this (by the time in their id) are deleted at session start:
#: longer than any session runs (CI's limit is 45 minutes) and than two sessions overlap
STALE_HOURS = 6.0
#: RabbitMQ's management API (``SPARK_AMQP_RABBITMQ_MANAGEMENT_URL``, as tests/management)
MANAGEMENT_URL = os.environ.get("SPARK_AMQP_RABBITMQ_MANAGEMENT_URL", "http://127.0.0.1:15672/")

_NAME = re.compile(r"^" + re.escape(PREFIX) + r"(\d{8}T\d{6}Z-[0-9a-f]{6})\.")


def new_session_id(now: float | None = None) -> str:
    """A new session id: ``YYYYmmddTHHMMSSZ-<6 hex>`` (UTC start time, so that a later session
    can tell a leftover's age from its name)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(3)}"


def session_id() -> str:
    """This process's session id (:data:`ENV`); a process started outside a test session
    (a helper module run by hand) gets a new one, set in its environment."""
    sid = os.environ.get(ENV)
    if not sid:
        sid = os.environ[ENV] = new_session_id()
    return sid


def session_prefix(sid: str | None = None) -> str:
    """``spark-amqp-test.<session id>.``: the start of every name of session ``sid``."""
    return f"{PREFIX}{sid or session_id()}."


def unique_name(kind: str = "t") -> str:
    """A name for a queue, exchange or stream that no other test or session uses:
    ``spark-amqp-test.<session id>.<kind>.<10 hex>`` (``kind`` says what it is for: "orders",
    "crash"). The session finalizer deletes it from RabbitMQ if the test did not."""
    return f"{session_prefix()}{kind}.{uuid.uuid4().hex[:10]}"


def name_age_hours(name: str, now: float | None = None) -> float | None:
    """Hours since the session that made ``name`` started, or None for a name that
    :func:`unique_name` did not make."""
    m = _NAME.match(name)
    if m is None:
        return None
    start = datetime.strptime(m.group(1).split("-")[0], "%Y%m%dT%H%M%SZ")
    start = start.replace(tzinfo=timezone.utc)
    return ((time.time() if now is None else now) - start.timestamp()) / 3600


# --------------------------------------------------------------------------- processes

def session_processes(sid: str, exclude=(), descendants: bool = True) -> list:
    """The live processes (psutil) whose environment carries session ``sid``, and every
    descendant of this process (but the watchdog of another session: it cleans up after its own
    pytest; with ``descendants`` only), except the pids in ``exclude`` and this process."""
    import psutil

    skip = set(exclude) | {os.getpid()}
    found: dict[int, psutil.Process] = {}
    for p in psutil.process_iter():
        if p.pid in skip:
            continue
        try:
            if p.environ().get(ENV) == sid and p.status() != psutil.STATUS_ZOMBIE:
                found[p.pid] = p
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            pass
    if not descendants:
        return list(found.values())
    try:
        for p in psutil.Process().children(recursive=True):
            try:
                if p.pid in skip or p.pid in found or p.status() == psutil.STATUS_ZOMBIE:
                    continue
                cmd = p.cmdline()
                # the watchdog of a session this one started (tests/test_session_cleanup.py's
                # child pytest): it outlives its pytest to clean up after it
                if len(cmd) >= 5 and cmd[1].endswith("session_guard.py") and cmd[2] == "watch" \
                        and cmd[4] != sid:
                    continue
                found[p.pid] = p
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
    except psutil.NoSuchProcess:
        pass
    return list(found.values())


def kill_session(sid: str | None = None, exclude=(), grace: float = 3.0,
                 timeout: float = 30.0, descendants: bool = True) -> list[str]:
    """Stop every process of session ``sid`` (:func:`session_processes`): SIGTERM (a JVM runs
    its shutdown hooks and deletes its temporary folders), SIGKILL to what is left after
    ``grace`` seconds, again until none is found (a ``pyspark.daemon`` forks while it dies) or
    ``timeout`` seconds passed (``descendants=False``: only the processes carrying ``sid``,
    for another session than this process's). Returns ``"<pid> <command>"`` of each process
    signalled."""
    import psutil

    sid = sid or session_id()
    deadline = time.monotonic() + timeout
    done: list[str] = []
    sig = signal.SIGTERM
    while time.monotonic() < deadline:
        procs = session_processes(sid, exclude, descendants)
        if not procs:
            break
        for p in procs:
            try:
                if sig == signal.SIGTERM:
                    done.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
                p.send_signal(sig)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
        psutil.wait_procs(procs, timeout=grace if sig == signal.SIGTERM else 5)
        sig = signal.SIGKILL
    return done


# --------------------------------------------------------------------------- RabbitMQ names

def _api(method: str, path: str, url: str, user: str, password: str, timeout: float = 10.0,
         tries: int = 5):
    """One call of the management API: the JSON answer (None for an empty one). A 5xx answer
    is tried again (up to ``tries`` times, 0.5 s apart): RabbitMQ 3.10.8 answers a listing
    with 500 now and then while queues are deleted meanwhile. Raises urllib's errors."""
    req = urllib.request.Request(urllib.parse.urljoin(url, path), method=method)
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    req.add_header("Authorization", f"Basic {token}")
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                body = r.read()
            return json.loads(body) if body else None
        except urllib.error.HTTPError as e:
            if e.code < 500 or attempt == tries - 1:
                raise
            time.sleep(0.5)


def delete_session_objects(sid: str | None = None, stale_hours: float | None = None,
                           amqp_url: str | None = None, url: str = MANAGEMENT_URL) -> list[str]:
    """Delete from RabbitMQ (its management API at ``url``, with the credentials of
    ``amqp_url``) the queues, streams and exchanges named by :func:`unique_name` in session
    ``sid``, or, with ``stale_hours``, those of any session that started more than that many
    hours ago. Returns ``"queue <vhost>/<name>"`` / ``"exchange ..."`` of each one deleted;
    ``[]`` when the API is unreachable (no RabbitMQ: nothing to clean)."""
    amqp = urllib.parse.urlparse(amqp_url or os.environ.get(
        "SPARK_AMQP_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/%2F"))
    user = urllib.parse.unquote(amqp.username or "guest")
    password = urllib.parse.unquote(amqp.password or "guest")
    mine = session_prefix(sid) if stale_hours is None else None

    def wanted(name: str) -> bool:
        if mine is not None:
            return name.startswith(mine)
        age = name_age_hours(name)
        return age is not None and age > stale_hours

    deleted = []
    try:
        for kind in ("queues", "exchanges"):
            for obj in _api("GET", f"api/{kind}?columns=name,vhost", url, user, password) or []:
                if not wanted(obj["name"]):
                    continue
                path = (f"api/{kind}/{urllib.parse.quote(obj['vhost'], safe='')}/"
                        f"{urllib.parse.quote(obj['name'], safe='')}")
                try:
                    _api("DELETE", path, url, user, password)
                    deleted.append(f"{kind[:-1]} {obj['vhost']}/{obj['name']}")
                except urllib.error.HTTPError as e:
                    if e.code != 404:        # gone meanwhile: fine
                        raise
    except (OSError, ValueError):            # no management API here (URLError is an OSError)
        return deleted
    return deleted


# --------------------------------------------------------------------------- the watchdog

def start_watchdog(sid: str | None = None) -> subprocess.Popen:
    """Start the watchdog of this process (run as ``python session_guard.py watch``): in a
    session of its own (a Ctrl-C to the terminal's process group does not reach it), it
    polls every 0.5 s whether this process still lives and, once it does not (finished,
    interrupted, SIGKILLed), kills session ``sid``'s processes and deletes its names from
    RabbitMQ, then exits. The session finalizer cleans first and then kills the watchdog."""
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "watch",
                             str(os.getpid()), sid or session_id()],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def _watch(parent: int, sid: str) -> int:
    # a signal to the terminal's group or to the session's processes is not for the watchdog
    for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    while os.getppid() == parent:
        time.sleep(0.5)
    kill_session(sid)
    delete_session_objects(sid)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["watch"]:
        sys.exit(_watch(int(sys.argv[2]), sys.argv[3]))
    sys.exit("usage: session_guard.py watch PARENT_PID SESSION_ID")
