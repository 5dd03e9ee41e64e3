"""Fixtures of the fault-injection suite (``pytest -m faults``).

``small_fs(size)`` mounts a tmpfs of ``size`` (e.g. ``"3m"``) on a fresh directory and unmounts
it afterwards; it needs root and a kernel that allows the mount, and skips the test with the
reason otherwise (never a silent pass).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # faults_helpers


def _mount_tmpfs(path: str, size: str) -> str | None:
    """Mount; return None on success, else why not."""
    if os.geteuid() != 0:
        return "mounting a small tmpfs needs root (run the fault suite as root, as CI does)"
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}"
    return None


@pytest.fixture
def small_fs(tmp_path):
    """``small_fs(size="3m") -> path``: a directory on its own tmpfs of that size."""
    mounted: list[str] = []

    def make(size: str = "3m") -> str:
        path = str(tmp_path / f"fs-{uuid.uuid4().hex[:6]}")
        os.makedirs(path)
        why = _mount_tmpfs(path, size)
        if why is not None:
            pytest.skip(why)
        mounted.append(path)
        return path

    yield make
    for path in mounted:
        subprocess.run(["umount", "-l", path], capture_output=True)
