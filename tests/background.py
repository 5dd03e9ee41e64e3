"""Slow, self-contained runs that start when the test session starts and run beside the tests,
and the session order that gives them the machine's quiet stretches.

Why (CI time, issue 32 point 8). A run of the whole suite on 2026-11-27 (2 cores, nothing else
running) kept both cores ~99% busy during ``tests/app`` (12 min, 7.7 of them waiting for the
four flight demos beside the four crash runs), but only 4-50% busy during ``tests/broker``,
``tests/client``, ``tests/management`` and ``tests/faults`` (~5.5 min of mostly timeouts and
waits). So the session runs those quiet folders first, the slow runs (the crash tests'
restarts, the flight demos) fill the idle core meanwhile, and the tests that check the slow
runs' results come last, when the results are there.

Each slow run is a subprocess (a demo's ``flight_delays.py``, or :func:`in_subprocess` for a
crash test's scenario), never a thread of this process: a scenario's publishers in this
process took the GIL from ``tests/client``'s timing tests (a heartbeat test measured its
dead-peer detection late, on 2026-11-26).
"""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

#: the session order by top folder of ``tests/`` (first to last; folders not named here go
#: after these, in their collected order): the folders that leave the cores idle (broker,
#: client, management, faults: timeouts, waits, one small process) first, while the slow runs
#: start; then the CPU-bound and JVM ones
QUIET_FIRST = ("broker", "client", "management", "faults", "protocol")

#: at most this many slow runs at once: each starts a JVM (a core for ~10 s) and Spark's Python
#: workers must connect back to it within a fixed 10 s (PythonWorkerFactory): four demos at once
#: beside the crash runs failed that on 2 cores (load average ~14)
SLOTS = 2

#: the open BackgroundRuns of this process (:func:`cancel_all`)
_OPEN: list = []
#: the subprocesses of the runs now running (:func:`in_subprocess`), killed by ``close()``
_RUNNING: set = set()


class BackgroundRuns:
    """The session's slow runs: at most :data:`SLOTS` at once, in the order submitted.

    ``submit(key, fn, *args)`` runs ``fn(*args)`` (which waits on a subprocess) in a thread of a
    pool and returns its Future, also kept as ``runs[key]``; ``close()`` cancels the runs not
    started and waits for the others."""

    def __init__(self, slots: int = SLOTS):
        self._pool = ThreadPoolExecutor(slots, thread_name_prefix="background-run")
        self.runs: dict[Any, Future] = {}
        _OPEN.append(self)

    def submit(self, key: Any, fn: Callable, *args: Any) -> Future:
        f = self._pool.submit(fn, *args)
        self.runs[key] = f
        return f

    def group(self, name: str) -> dict[Any, Future]:
        """The runs submitted with keys ``(name, part)``: ``{part: Future}``."""
        return {key[1]: f for key, f in self.runs.items()
                if isinstance(key, tuple) and key[0] == name}

    def cancel(self) -> None:
        """Cancel the runs not started yet (the session was interrupted)."""
        for f in list(self.runs.values()):
            f.cancel()

    def close(self) -> None:
        """Cancel the runs not started and kill the ones still running with every process
        below them (the session ends without having taken their results: interrupted, or
        stopped by ``-x``), then wait for the pool's threads."""
        self.cancel()
        for proc in list(_RUNNING):
            _kill_tree(proc.pid)
        self._pool.shutdown(wait=True)
        if self in _OPEN:
            _OPEN.remove(self)


def cancel_all() -> None:
    """Cancel the runs not started yet of every open :class:`BackgroundRuns` (the session's
    SIGINT/SIGTERM handler, before it kills the running ones: tests/session_guard.py)."""
    for runs in list(_OPEN):
        runs.cancel()


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process below it (psutil; the query runners are in sessions
    of their own, Spark's pyspark.daemon in process groups of their own)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def run_tracked(args: list, timeout: float, **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(args, capture_output=True, timeout=timeout, **kwargs)`` for a slow run
    (a flight demo): the process is known to ``BackgroundRuns.close()``, which kills it and
    everything below it when the session ends first; a timeout kills that tree too and
    raises ``subprocess.TimeoutExpired``."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)
    _RUNNING.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        proc.communicate()
        raise
    finally:
        _RUNNING.discard(proc)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def in_subprocess(module_file: str | Path, function: str, broker_url: str, tmp_path: Path,
                  timeout: float = 1700.0) -> Any:
    """Run ``function(broker_url, tmp_path)`` of the test module ``module_file`` in a Python
    subprocess of its own and return what it returned (JSON: a tuple comes back as a list).

    The child imports the module by file with its folder and ``tests/`` on ``sys.path`` (as
    pytest does); its output goes to ``tmp_path/scenario.log``. Raises AssertionError with the
    child's traceback when the function raised, or when it did not finish in ``timeout``
    seconds."""
    tmp_path = Path(tmp_path)
    tmp_path.mkdir(parents=True, exist_ok=True)
    result, log = tmp_path / "scenario-result.json", tmp_path / "scenario.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, __file__, str(module_file), function, broker_url, str(tmp_path),
             str(result)], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        _RUNNING.add(proc)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            proc.wait()
            raise AssertionError(f"{Path(module_file).name}::{function} did not finish in "
                                 f"{timeout:.0f} s; its log ends:\n{log.read_text()[-6000:]}")
        finally:
            _RUNNING.discard(proc)
    if rc != 0:
        raise AssertionError(f"{Path(module_file).name}::{function} failed (exit {rc}):\n"
                             f"{log.read_text()[-8000:]}")
    return json.loads(result.read_text())


def _child(module_file: str, function: str, broker_url: str, tmp_path: str, result: str) -> int:
    import importlib.util

    path = Path(module_file).resolve()
    for folder in (str(TESTS), str(path.parent)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    try:
        value = getattr(module, function)(broker_url, Path(tmp_path))
    except BaseException:  # noqa: BLE001 - reported to the parent through the exit code
        traceback.print_exc()
        return 1
    Path(result).write_text(json.dumps(value))
    return 0


def session_order(items: list, tests: Path = TESTS) -> list:
    """``items`` reordered for the session (stable within a group): the :data:`QUIET_FIRST`
    folders first, then the others, then the items that take a slow run's result (marked
    ``background_result``), so they find it ready."""
    def rank(item) -> tuple[int, int]:
        if item.get_closest_marker("background_result") is not None:
            return (2, 0)
        try:
            parts = Path(str(item.fspath)).resolve().relative_to(tests).parts
        except ValueError:
            return (1, 0)
        top = parts[0] if len(parts) > 1 else ""
        if top in QUIET_FIRST:
            return (0, QUIET_FIRST.index(top))
        return (1, 0)

    return sorted(items, key=rank)


if __name__ == "__main__":
    sys.exit(_child(*sys.argv[1:6]))
