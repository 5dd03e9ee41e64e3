"""Fixtures of the broker tests: a broker in a subprocess (for kill -9 / SIGTERM tests)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 90.0, host: str = "127.0.0.1",
              proc: subprocess.Popen | None = None) -> None:
    """Wait until something listens on ``host:port``. The deadline is generous: a broker
    subprocess on a cold machine (empty page cache: Python imports, then recovery of a data
    dir) can take tens of seconds; a fast start returns at once. With ``proc``, a process that
    exited is reported at once (with its stderr) instead of waited out."""
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
    """``serve()`` in a subprocess; ``kill()`` = SIGKILL, ``terminate()`` = SIGTERM."""

    def __init__(self, data_dir: str | None = None, port: int | None = None, host: str = "127.0.0.1",
                 config: str | None = None):
        self.port = port or free_port()
        self.host = host
        args = f"{host!r}, {self.port}, {data_dir!r}, {config!r}"
        code = ("import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stderr); "
                f"from spark_amqp.broker import serve; serve({args})")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, env=env, cwd=str(ROOT))
        wait_port(self.port, host="127.0.0.1" if host == "localhost" else host, proc=self.proc)
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def terminate(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err.decode(errors="replace")


@pytest.fixture
def broker_process():
    procs: list[BrokerProcess] = []

    def start(**kw) -> BrokerProcess:
        p = BrokerProcess(**kw)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait(30)
