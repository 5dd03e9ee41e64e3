"""``python -m spark_amqp.bench`` (``make bench``): the runner of every benchmark (issue 11 §2)."""

from __future__ import annotations

import subprocess
import sys

from spark_amqp.bench.__main__ import BENCHMARKS, Outcome, summary


def bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spark_amqp.bench", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_help_lists_every_benchmark():
    r = bench("--help")
    assert r.returncode == 0, r.stderr
    assert "Usage: python -m spark_amqp.bench" in r.stdout
    for name in BENCHMARKS:
        assert name in r.stdout


def test_every_listed_benchmark_is_a_module_with_main():
    import importlib
    r = bench("--list")
    assert r.returncode == 0, r.stderr
    assert [line.split()[0] for line in r.stdout.splitlines()] == list(BENCHMARKS)
    for name in BENCHMARKS:
        assert callable(importlib.import_module(f"spark_amqp.bench.{name}").main)


def test_unknown_benchmark_is_refused_with_the_choices():
    r = bench("codecs")
    assert r.returncode == 2
    assert "unknown benchmark(s) codecs" in r.stderr and "codec" in r.stderr


def test_quick_codec_run_ends_with_the_summary_table():
    r = bench("codec", "--quick")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    table = r.stdout[r.stdout.index("=== summary"):]
    row = next(line for line in table.splitlines() if line.startswith("codec"))
    assert " ok " in row and "x" in row           # a ratio line against pika's codec


def test_summary_reports_failures():
    text = summary([Outcome("source", rc=1, seconds=3.0), Outcome("codec", 0, 1.0, ["a 2.0x"])])
    assert "failed (1)" in text and "(no ratio printed)" in text and "a 2.0x" in text
