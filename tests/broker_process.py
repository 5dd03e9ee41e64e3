"""The embedded broker in a subprocess, and the free ports the tests run things on.

Shared by tests/broker (kill -9 / SIGTERM of a broker), tests/faults (kill -9 during a
commit), tests/cluster and tests/app. Importable by name from any test: pytest puts ``tests/``
on ``sys.path`` for ``tests/conftest.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 90.0, host: str = "127.0.0.1",
              proc: subprocess.Popen | None = None) -> None:
    """Wait until something listens on ``host:port``. The deadline is generous: a broker
    subprocess on a cold machine (empty page cache: Python imports, then recovery of a data
    dir) can take tens of seconds; a fast start returns at once. With ``proc``, a process that
    exited is reported at once (with its stderr) instead of waited out.

    Raises TimeoutError after ``timeout`` seconds, RuntimeError if ``proc`` exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RuntimeError(f"broker process exited with {proc.returncode} before listening "
                                   f"on {host}:{port}; stderr:\n{err[-3000:]}") from None
            time.sleep(0.05)
    raise TimeoutError(f"broker did not listen on {host}:{port} within {timeout}s")


class BrokerProcess:
    """``spark_amqp.broker.serve()`` in a subprocess on ``port`` (default: a free one);
    ``kill()`` = SIGKILL, ``terminate()`` = SIGTERM (a clean stop). ``url`` is its AMQP URI.
    ``log_level``: the broker's logging level (its stderr is a pipe, read by ``terminate()``)."""

    def __init__(self, data_dir: str | None = None, port: int | None = None, host: str = "127.0.0.1",
                 config: str | None = None, log_level: str = "INFO"):
        self.port = port or free_port()
        self.host = host
        args = f"{host!r}, {self.port}, {data_dir!r}, {config!r}"
        code = (f"import logging, sys; logging.basicConfig(level=logging.{log_level}, stream=sys.stderr); "
                f"from spark_amqp.broker import serve; serve({args})")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, env=env, cwd=str(ROOT))
        try:
            wait_port(self.port, host="127.0.0.1" if host == "localhost" else host, proc=self.proc)
        except TimeoutError:
            self.proc.kill()
            raise
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL) unless the process has exited; wait for the exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(30)

    def terminate(self) -> tuple[int, str]:
        """SIGTERM, then wait: ``(exit code, stderr text)``."""
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err.decode(errors="replace")
