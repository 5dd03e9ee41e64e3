"""Fixtures of the cluster tests: one local Spark standalone cluster per test module (a master
and two workers of one core and 1 GiB, from ``spark-amqp cluster``'s
:class:`~spark_amqp.tools.standalone.StandaloneCluster`, on free ports in a temporary folder),
and ``spark_submit`` to run a script on it the way a user does.

The tests skip, naming what is missing, only where there is no Java; anything else that
keeps the cluster from starting is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from broker_process import free_port

ROOT = Path(__file__).resolve().parents[2]
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
LOG4J = ROOT / "spark_amqp" / "conf" / "log4j2.properties"


def require_java() -> None:
    from spark_amqp.tools.standalone import ClusterError, find_java

    try:
        find_java()
    except ClusterError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A running 2-worker standalone cluster for the module; stopped after it."""
    require_java()
    from spark_amqp.tools.standalone import StandaloneCluster

    c = StandaloneCluster(work_dir=tmp_path_factory.mktemp("spark-cluster"),
                          port=free_port(), webui_port=free_port())
    t0 = time.monotonic()
    c.start(timeout=240)
    c.start_seconds = time.monotonic() - t0
    try:
        yield c
    finally:
        c.stop()


def submitter_env() -> dict[str, str]:
    """This Python (where spark_amqp is installed) for the driver and Spark's Python workers."""
    return dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)


def spark_submit(master: str, *args: str, conf: dict[str, str] | None = None, timeout: float = 600,
                 cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``spark-submit --master MASTER [--conf k=v ...] ARGS`` with :func:`submitter_env`."""
    cmd = [str(SPARK_SUBMIT), "--master", master]
    for k, v in (conf or {}).items():
        cmd += ["--conf", f"{k}={v}"]
    return subprocess.run(cmd + [str(a) for a in args], cwd=cwd, env=submitter_env(),
                          capture_output=True, text=True, timeout=timeout)
