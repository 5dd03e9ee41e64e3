"""Helpers of the fault-injection tests (imported by name: tests/faults is on sys.path)."""

from __future__ import annotations

import subprocess


def resize_fs(path: str, size: str) -> None:
    """Grow (or shrink) a ``small_fs`` mount in place: ``mount -o remount,size=...``."""
    subprocess.run(["mount", "-o", f"remount,size={size}", path], check=True, capture_output=True)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30.0) -> None:
    import socket
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"broker did not listen on 127.0.0.1:{port} within {timeout}s")


class BrokerProcess:
    """``spark_amqp.broker.serve`` in a subprocess on a free port; ``kill()`` = SIGKILL."""

    def __init__(self, data_dir: str):
        import os
        import sys
        from pathlib import Path

        root = Path(__file__).resolve().parents[2]
        self.port = free_port()
        code = ("import logging, sys; logging.basicConfig(level=logging.WARNING, stream=sys.stderr); "
                f"from spark_amqp.broker import serve; serve('127.0.0.1', {self.port}, {data_dir!r})")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE,
                                     env=dict(os.environ, PYTHONPATH=str(root)), cwd=str(root))
        try:
            wait_port(self.port)
        except TimeoutError:
            self.proc.kill()
            raise
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def kill(self, sig: int = 9) -> None:
        """SIGKILL (default) or another signal (15: SIGTERM, a clean stop); waits for exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(30)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def wait_for(cond, timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``cond()`` every 10 ms until it is true; AssertionError after ``timeout`` s."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
