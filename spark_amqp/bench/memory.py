"""Memory of a running streaming query: the driver JVM's heap and the source runner's RSS.

:class:`QueryMemory` samples, in a background thread, every ``interval`` seconds:

- the driver JVM heap (``java.lang.management.MemoryMXBean.getHeapMemoryUsage().getUsed()``
  through py4j): *used* includes garbage not yet collected, so its peak is an upper bound;
  also the largest heap in use right after a collection (``MemoryPoolMXBean.getCollectionUsage``
  summed over the heap pools), i.e. what was live;
- the peak resident set of Spark's Python source runner (``VmHWM`` in ``/proc/<pid>/status``,
  Linux; the process whose command line names ``python_streaming_source_runner``, found among
  the descendants of this process; psutil).

Used by ``spark_amqp.bench.source`` and the large-message tests.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

__all__ = ["QueryMemory", "MemoryFigures"]

_RUNNER = "python_streaming_source_runner"
MiB = 1024 * 1024


@dataclass
class MemoryFigures:
    """Peaks in bytes (0 when not measured)."""

    jvm_heap_max: int = 0          # -Xmx (Runtime.maxMemory)
    jvm_heap_used_peak: int = 0    # sampled heap used (garbage included)
    jvm_heap_live_peak: int = 0    # largest heap used after a GC
    runner_rss_peak: int = 0       # VmHWM of the source runner process(es), the largest

    def text(self) -> str:
        return (f"source runner peak RSS {self.runner_rss_peak / MiB:.0f} MiB; driver JVM heap "
                f"peak used {self.jvm_heap_used_peak / MiB:.0f} MiB (after GC "
                f"{self.jvm_heap_live_peak / MiB:.0f} MiB) of {self.jvm_heap_max / MiB:.0f} MiB")


def _hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class QueryMemory:
    """Context manager sampling the figures above; ``figures`` holds them afterwards."""

    def __init__(self, spark, interval: float = 0.2):
        self.spark = spark
        self.interval = interval
        self.figures = MemoryFigures()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._runner_pids: set[int] = set()

    def __enter__(self) -> "QueryMemory":
        jvm = self.spark.sparkContext._jvm
        self._mf = jvm.java.lang.management.ManagementFactory
        self.figures.jvm_heap_max = int(jvm.java.lang.Runtime.getRuntime().maxMemory())
        self._thread = threading.Thread(target=self._run, daemon=True, name="query-memory")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        f = self.figures
        try:
            used = int(self._mf.getMemoryMXBean().getHeapMemoryUsage().getUsed())
            f.jvm_heap_used_peak = max(f.jvm_heap_used_peak, used)
            live = 0
            for pool in self._mf.getMemoryPoolMXBeans():
                if str(pool.getType().toString()) == "Heap memory":
                    cu = pool.getCollectionUsage()
                    if cu is not None:
                        live += int(cu.getUsed())
            f.jvm_heap_live_peak = max(f.jvm_heap_live_peak, live)
        except Exception:  # noqa: BLE001 - the JVM is going away; keep what we have
            pass
        self._find_runners()
        for pid in list(self._runner_pids):
            f.runner_rss_peak = max(f.runner_rss_peak, _hwm(pid))

    def _find_runners(self) -> None:
        try:
            import psutil
        except ImportError:  # pragma: no cover
            return
        try:
            for p in psutil.Process(os.getpid()).children(recursive=True):
                if p.pid in self._runner_pids:
                    continue
                try:
                    if any(_RUNNER in a for a in p.cmdline()):
                        self._runner_pids.add(p.pid)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    pass
        except psutil.Error:
            pass
