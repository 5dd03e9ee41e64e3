"""Helpers for the source's Spark tests: publish/inspect queues with pika (independent of our
client), a TCP proxy whose connections can be cut, and a subprocess query runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pika

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def pika_conn(url: str) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(url))


def declare(url: str, queue: str, durable: bool = True, arguments=None) -> None:
    """Declare ``queue`` (durable by default: RabbitMQ 4.3, the embedded broker's default mode,
    refuses a non-durable queue that is not exclusive)."""
    with pika_conn(url) as c:
        c.channel().queue_declare(queue, durable=durable, arguments=arguments)


def publish(url: str, queue: str, bodies, props=None, persistent: bool = False) -> None:
    """Publish ``bodies`` to ``queue`` via the default exchange, with publisher confirms."""
    with pika_conn(url) as c:
        ch = c.channel()
        ch.confirm_delivery()
        for i, b in enumerate(bodies):
            p = props(i) if callable(props) else props
            if p is None:
                p = pika.BasicProperties(delivery_mode=2 if persistent else None)
            ch.basic_publish("", queue, b, p)


def message_count(url: str, queue: str) -> int:
    """Ready messages (passive queue.declare message-count; unacked ones are not counted)."""
    with pika_conn(url) as c:
        return c.channel().queue_declare(queue, passive=True).method.message_count


def broker_view(url: str, queue: str) -> str:
    """The queue as the broker reports it (ready messages, consumers), for a failure message."""
    try:
        with pika_conn(url) as c:
            ok = c.channel().queue_declare(queue, passive=True).method
            return f"broker: queue {queue} ready={ok.message_count} consumers={ok.consumer_count}"
    except Exception as e:  # noqa: BLE001 - diagnostics only
        return f"broker: queue {queue}: {e!r}"


def consumer_count(url: str, queue: str) -> int:
    with pika_conn(url) as c:
        return c.channel().queue_declare(queue, passive=True).method.consumer_count


def delete(url: str, *queues: str) -> None:
    try:
        with pika_conn(url) as c:
            ch = c.channel()
            for q in queues:
                ch.queue_delete(q)
    except Exception:  # noqa: BLE001 - cleanup
        pass


def wait_until(pred, timeout: float = 30.0, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def start_runner(*args: str, log_path: Path, idle_markers: bool = False) -> subprocess.Popen:
    """Start tests/spark/source_query_runner.py in its own process group (``idle_markers``:
    its ``--idle-markers`` flag, see there)."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    logf = open(log_path, "ab")
    flags = ["--idle-markers"] if idle_markers else []
    return subprocess.Popen([sys.executable, str(HERE / "source_query_runner.py"), *flags, *args],
                            stdout=logf, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True, cwd=str(ROOT))


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it (by parent pid, so also the ones that left its
    process group: PySpark's daemon calls setpgid)."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(c for c, pp in parent.items() if pp == pid)
    return out


def dump_group_stacks(p: subprocess.Popen) -> str:
    """Stacks of the runner and every process below it, for a test that timed out: the
    Python ones with ``py-spy dump`` (all threads), the JVM with ``jstack``. Best effort: a tool
    that is missing or refused (ptrace) is reported in the text instead."""
    import shutil

    out = []
    pids = _descendants(p.pid)
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    for pid in sorted(pids):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
        except OSError:
            continue
        exe = cmd.split(" ", 1)[0]
        # the JVM's class path names site-packages/pyspark: look at the executable, not "python"
        is_java = exe.endswith("/java") or exe == "java"
        tool = (["jstack", str(pid)] if is_java
                else [pyspy, "dump", "--pid", str(pid)] if "python" in exe else None)
        if tool is None:
            continue
        try:
            r = subprocess.run(tool, capture_output=True, text=True, timeout=60)
            text = r.stdout + r.stderr
        except (OSError, subprocess.TimeoutExpired) as e:
            text = f"({tool[0]} failed: {e})"
        if is_java:   # keep the threads that matter: the stream execution and Python I/O
            blocks = text.split("\n\n")
            text = "\n\n".join(b for b in blocks if "stream execution" in b
                               or "python" in b.lower() or "MicroBatch" in b)
        out.append(f"===== pid {pid}: {cmd}\n{text}")
    return "\n".join(out)


def kill_group(p: subprocess.Popen) -> None:
    """SIGKILL the runner and everything it started (JVM, Python workers)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(timeout=30)


def fast_publish(url: str, queue: str, bodies, persistent: bool = False, chunk: int = 20000):
    """Publish many bodies quickly with the project's client (publish_batch + confirms)."""
    from spark_amqp.client import connect
    from spark_amqp.protocol import BasicProperties

    props = BasicProperties(delivery_mode=2) if persistent else None
    bodies = list(bodies)
    with connect(url) as conn:
        ch = conn.channel()
        ch.confirm_select()
        for i in range(0, len(bodies), chunk):
            ch.publish_batch([(b, "", queue, props) for b in bodies[i:i + chunk]])
            ch.wait_for_confirms(timeout=120)


def committed_sink_ids(out: Path) -> list[str]:
    """The ``id`` column of every row Spark's file sink at ``out`` has committed, read with
    pyarrow from the files its ``_spark_metadata`` log lists (no Spark job: a test that polls
    this while a runner process starts takes no CPU from it). The log (Spark's
    ``FileStreamSinkLog``): one file per batch, ``<id>`` or ``<id>.compact`` (every 10th
    batch: all files so far), each ``v1`` then one JSON line per file with ``path`` (a URI)
    and ``action`` (``add``/``delete``). Files written by a batch that did not commit are not
    listed. ``[]`` before the first commit."""
    import json
    from urllib.parse import unquote, urlparse

    import pyarrow.parquet as pq

    log = out / "_spark_metadata"
    if not log.is_dir():
        return []
    batches = []
    for f in log.iterdir():
        stem = f.name[:-len(".compact")] if f.name.endswith(".compact") else f.name
        if stem.isdigit():
            batches.append((int(stem), f.name.endswith(".compact"), f))
    batches.sort()
    compacts = [i for i, (_, compact, _) in enumerate(batches) if compact]
    files: dict[str, None] = {}
    for _, _, f in batches[compacts[-1] if compacts else 0:]:
        for line in f.read_text().splitlines()[1:]:
            entry = json.loads(line)
            path = unquote(urlparse(entry["path"]).path)
            if entry.get("action", "add") == "add":
                files[path] = None
            else:
                files.pop(path, None)
    ids: list[str] = []
    for path in files:
        ids.extend(pq.read_table(path, columns=["id"]).column("id").to_pylist())
    return ids


def broker_variants_at_once(request, test_name: str) -> dict:
    """The runs of ``test_name``'s scenario for the embedded broker and RabbitMQ, started at
    the same time when the session started (tests/conftest.py ``background_runs``, each a
    subprocess): ``{"embedded"|"rabbitmq": Future}``, for a module-scoped fixture; each variant
    of ``test_name`` (parametrized by the ``broker_url`` fixture) takes its own result. Only
    collected variants run; RabbitMQ's only when it is reachable (its test item then skips or
    fails through ``broker_url`` as any other). Why: a crash test's runner processes spend
    most of their time starting a JVM; the runs overlap the quiet tests instead of taking
    turns (CI time, docs/development.md)."""
    return request.getfixturevalue("background_runs").group(test_name)


class PhasedPublisher:
    """A publisher thread that writes to ``queue`` (default exchange, publisher confirms,
    the project's client) in phases, DURING a query (issue 26's live tests).

    ``phases``: ``[(name, rate)]`` or ``[(name, rate, cap)]``, rate in messages/s, None = as
    fast as the broker confirms (batches of 500); ``cap``: at most this many messages in the
    phase (then it waits for ``phase_done`` without publishing; a bound on a test's volume). Bodies are ``body(phase name, sequence number)``, by default
    ``b"<phase name>:<sequence number>"`` (one sequence over all phases, from ``first``). A
    phase lasts at least ``min_seconds`` and until ``phase_done(name)`` is true (say: the
    query's sink got rows of this phase in 2 batches), at most ``max_seconds[i]`` (then
    :attr:`failures` says so and the next phase starts). After the last phase (or
    :meth:`stop`) the thread ends; :attr:`sent` is then the number of messages published and
    confirmed (sequence numbers ``first`` to ``first + sent - 1``; the phase of each in
    :attr:`phase_of`), :attr:`error` the exception that ended it early, if any.
    ``span[name]``: (start, end) of each phase in ``time.monotonic()``."""

    def __init__(self, url: str, queue: str, phases, phase_done, min_seconds: float = 2.0,
                 max_seconds=(180.0, 90.0, 90.0), body=None, first: int = 0):
        self.url, self.queue, self.phases = url, queue, list(phases)
        self.body = body or (lambda phase, i: b"%s:%d" % (phase.encode(), i))
        self.first = first
        self.stopping = threading.Event()
        self.phase_done, self.min_seconds = phase_done, min_seconds
        self.max_seconds = list(max_seconds)
        self.sent = 0
        self.phase_of: list[str] = []
        self.span: dict[str, tuple[float, float]] = {}
        self.failures: list[str] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="phased-publisher", daemon=True)

    def start(self) -> "PhasedPublisher":
        self.thread.start()
        return self

    def stop(self, timeout: float = 600.0) -> None:
        """End the current phase now (the last publish is confirmed) and :meth:`join`."""
        self.stopping.set()
        self.join(timeout)

    def join(self, timeout: float = 600.0) -> None:
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError(f"the publisher did not finish in {timeout}s")
        if self.error is not None:
            raise AssertionError(f"the publisher failed: {self.error!r}") from self.error

    def _publish(self, ch, name: str, n: int) -> None:
        first = self.first + self.sent
        body = self.body
        ch.publish_batch([(body(name, i), "", self.queue) for i in range(first, first + n)])
        ch.wait_for_confirms(timeout=120)
        self.phase_of.extend([name] * n)
        self.sent += n

    def _run(self) -> None:
        from spark_amqp.client import connect

        try:
            with connect(self.url) as conn:
                ch = conn.channel()
                ch.confirm_select()
                for i, (name, rate, *cap) in enumerate(self.phases):
                    cap = cap[0] if cap else None
                    t0 = time.monotonic()
                    n0 = self.sent
                    limit = self.max_seconds[min(i, len(self.max_seconds) - 1)]
                    while not self.stopping.is_set():
                        now = time.monotonic()
                        if now - t0 >= self.min_seconds and self.phase_done(name):
                            break
                        if now - t0 > limit:
                            self.failures.append(f"phase {name!r} ({rate or 'max'} msg/s): "
                                                 f"not done after {limit:.0f}s of publishing")
                            break
                        if cap is not None and self.sent - n0 >= cap:
                            time.sleep(0.01)
                            continue
                        if rate is None:
                            self._publish(ch, name, 500)
                            continue
                        due = int((now - t0) * rate) + 1 - (self.sent - n0)
                        if cap is not None:
                            due = min(due, cap - (self.sent - n0))
                        if due > 0:
                            self._publish(ch, name, due)
                        time.sleep(min(0.01, 1.0 / rate))
                    self.span[name] = (t0, time.monotonic())
                    if self.stopping.is_set():
                        break
        except BaseException as e:  # noqa: BLE001 - reported by join()
            self.error = e
