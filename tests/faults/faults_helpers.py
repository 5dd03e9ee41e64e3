"""Helpers of the fault-injection tests (imported by name: tests/faults is on sys.path)."""

from __future__ import annotations

import subprocess


def resize_fs(path: str, size: str) -> None:
    """Grow (or shrink) a ``small_fs`` mount in place: ``mount -o remount,size=...``."""
    subprocess.run(["mount", "-o", f"remount,size={size}", path], check=True, capture_output=True)
