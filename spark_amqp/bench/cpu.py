"""CPU-seconds per kind of process during a benchmark step (Linux ``/proc``, no dependency).

``with CpuAccount() as acct: run()`` then ``acct.report()``: user+system CPU time used during the
block by every process on the machine, grouped by :func:`kind` (the Spark JVM, Spark's Python
source runner, Spark's Python workers, the embedded broker, RabbitMQ, this process). Processes
that exit during the block (e.g. the source runner at query stop) are counted up to their last
sample: ``/proc`` is sampled every ``interval`` seconds. Elsewhere than Linux it reports nothing.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["CpuAccount", "cpu_seconds", "kind"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def kind(cmdline: str, pid: int) -> str | None:
    """The group a process's command line belongs to, or None (not counted)."""
    if pid == os.getpid():
        return "benchmark process"
    if "beam.smp" in cmdline:
        return "RabbitMQ"
    if "spark_amqp.broker import serve" in cmdline:
        return "embedded broker"
    if "python_streaming_source_runner" in cmdline:
        return "Spark source runner (driver)"
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline or "pyspark/worker" in cmdline:
        return "Spark Python workers"
    if "java" in cmdline and "SparkSubmit" in cmdline:
        return "Spark JVM"
    return None


def _sample() -> dict[int, tuple[str, float]]:
    out: dict[int, tuple[str, float]] = {}
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return out
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            k = kind(cmd, pid)
            if k is None:
                continue
            out[pid] = (k, _stat_seconds(pid))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _stat_seconds(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (``/proc/<pid>/stat``); raises OSError,
    ValueError or IndexError when it cannot be read."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def cpu_seconds(pid: int | None) -> float:
    """User+system CPU-seconds process ``pid`` has used so far; 0.0 when ``pid`` is None or
    its ``/proc`` entry cannot be read (gone, not Linux)."""
    if not pid:
        return 0.0
    try:
        return _stat_seconds(pid)
    except (OSError, ValueError, IndexError):
        return 0.0


class CpuAccount:
    """Context manager accounting CPU-seconds per :func:`kind` over its block (module doc)."""

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        self.cpu: dict[str, float] = {}
        #: processes of each kind that started during the block (seen in a sample only)
        self.started: dict[str, int] = {}
        self.wall = 0.0

    def __enter__(self) -> "CpuAccount":
        self._start = _sample()
        self._last = dict(self._start)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._t0 = time.perf_counter()
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self._last.update(_sample())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._last.update(_sample())
        self.wall = time.perf_counter() - self._t0
        for pid, (k, c1) in self._last.items():
            c0 = self._start.get(pid, (k, 0.0))[1]
            self.cpu[k] = self.cpu.get(k, 0.0) + max(0.0, c1 - c0)
            if pid not in self._start:
                self.started[k] = self.started.get(k, 0) + 1

    def report(self, label: str) -> str:
        """One line per kind, busiest first: CPU-seconds and share of one core over the wall."""
        lines = [f"  CPU during {label} ({self.wall:.1f} s wall, {sum(self.cpu.values()):.1f} "
                 "CPU-s in all):"]
        for k, v in sorted(self.cpu.items(), key=lambda kv: -kv[1]):
            if v >= 0.05:
                lines.append(f"    {k:<30} {v:6.2f} CPU-s  ({v / self.wall:5.0%} of one core)")
        return "\n".join(lines)
