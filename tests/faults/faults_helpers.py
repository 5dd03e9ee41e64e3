"""Helpers of the fault-injection tests (imported by name: tests/faults is on sys.path)."""

from __future__ import annotations

import subprocess


def resize_fs(path: str, size: str) -> None:
    """Grow (or shrink) a ``small_fs`` mount in place: ``mount -o remount,size=...``."""
    subprocess.run(["mount", "-o", f"remount,size={size}", path], check=True, capture_output=True)


def wait_for(cond, timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``cond()`` every 10 ms until it is true; AssertionError after ``timeout`` s."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
