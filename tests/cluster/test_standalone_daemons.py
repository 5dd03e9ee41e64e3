"""How ``spark-amqp cluster`` tells a daemon that runs from one that exited, without a JVM.

CI once failed all the cluster tests with "Spark worker-2 exited while starting" and an empty
log: the worker was inside ``execve`` (``spark-class`` ends in ``exec java``), when the kernel
shows an empty ``/proc/<pid>/cmdline``. An exit is now read from ``waitpid`` for our children,
and an empty command line is read again instead of taken for an exit.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_amqp.tools import standalone
from spark_amqp.tools.standalone import _exit_status, _is_spark_daemon

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)", "org.apache.spark.deploy.worker.Worker"]


@pytest.fixture
def sleeper():
    p = subprocess.Popen(SLEEPER)
    yield p
    p.kill()
    p.wait()


def test_a_running_daemon_is_one_and_other_processes_are_not(sleeper):
    assert _is_spark_daemon(sleeper.pid)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not _is_spark_daemon(other.pid)  # a reused pid is not taken for the daemon
    finally:
        other.kill()
        other.wait()


def test_an_empty_command_line_mid_exec_is_read_again_not_taken_for_an_exit(sleeper, monkeypatch):
    real = Path.read_bytes
    empties = iter([b"", b"", b""])  # what the kernel shows inside execve

    def read_bytes(self):
        empty = next(empties, None) if self.name == "cmdline" else None
        return empty if empty is not None else real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    assert _is_spark_daemon(sleeper.pid)
    assert next(empties, "used") == "used"  # all three empty reads were made


def test_an_exited_unreaped_daemon_is_not_running_and_its_exit_code_is_read():
    p = subprocess.Popen([*SLEEPER[:2], "import sys; sys.exit(3)", SLEEPER[3]])
    deadline = time.monotonic() + 30
    while standalone._proc_state(p.pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert standalone._proc_state(p.pid) == "Z"  # a zombie: empty cmdline, not reaped yet
    assert not _is_spark_daemon(p.pid)
    assert _exit_status(p.pid) == 3
    assert _exit_status(p.pid) is None  # reaped: no longer our child


def test_a_running_child_has_no_exit_status(sleeper):
    assert _exit_status(sleeper.pid) is None
