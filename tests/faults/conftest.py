"""Fixtures of the fault-injection suite (``pytest -m faults``).

``small_fs(size)`` mounts a tmpfs of ``size`` (e.g. ``"3m"``) on a fresh directory and unmounts
it afterwards; it needs root and a kernel that allows the mount, and skips the test with the
reason otherwise (never a silent pass). ``ext4_fs(size)`` does the same with a loop-mounted
ext4 image whose writes can be made to fail (:class:`Ext4`). Helpers importable by name:
``faults_helpers`` (broker subprocess, tmpfs resize) and ``faults_proxy`` (the TCP fault proxy,
in tests/ beside the root conftest: the other folders use it too).
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


class Ext4:
    """An ext4 filesystem in a loop-mounted image: ``path``; ``fail()`` makes every later
    write on it fail with EIO (``EXT4_IOC_SHUTDOWN``, what an ext4 that hit an I/O error and
    went read-only does to writers); ``remount()`` mounts it again (journal replayed)."""

    EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
    NOLOGFLUSH = 2

    def __init__(self, image: str, path: str):
        self.image, self.path = image, path

    def fail(self) -> None:
        import fcntl
        import struct

        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, self.EXT4_IOC_SHUTDOWN, struct.pack("I", self.NOLOGFLUSH))
        finally:
            os.close(fd)

    def remount(self) -> None:
        subprocess.run(["umount", self.path], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "loop", self.image, self.path], check=True, capture_output=True)


@pytest.fixture
def ext4_fs(tmp_path):
    """``ext4_fs(size="16m") -> Ext4``; root, mkfs.ext4 and loop devices needed, else skip."""
    made: list[Ext4] = []

    def make(size: str = "16m") -> Ext4:
        if os.geteuid() != 0:
            pytest.skip("a loop-mounted ext4 needs root (run the fault suite as root, as CI does)")
        image = str(tmp_path / "ext4.img")
        path = str(tmp_path / "ext4")
        os.makedirs(path)
        subprocess.run(["truncate", "-s", size, image], check=True)
        r = subprocess.run(["mkfs.ext4", "-q", "-F", image], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot make an ext4 image (mkfs.ext4): {r.stderr.strip() or r.returncode}")
        r = subprocess.run(["mount", "-o", "loop", image, path], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot loop-mount an ext4 image here: {r.stderr.strip() or r.returncode}")
        fs = Ext4(image, path)
        made.append(fs)
        return fs

    yield make
    for fs in made:
        subprocess.run(["umount", "-l", fs.path], capture_output=True)
