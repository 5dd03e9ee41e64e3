"""The job and the configuration files work from any folder; the job's alerts queue exists in
every mode (not only ``--demo``). No Spark here: the job's Spark part is stubbed out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from spark_amqp.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def test_conf_writes_the_defaults_and_keeps_edits(tmp_path):
    from spark_amqp.broker.config import load_config

    runner = CliRunner()
    folder = tmp_path / "conf"
    r = runner.invoke(cli, ["conf", str(folder)])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in folder.iterdir()) == [
        "broker.toml", "log4j2.properties", "spark-defaults.conf"]
    # the shipped broker.toml says what `spark-amqp broker` without --config does
    assert load_config(folder / "broker.toml") == load_config(None)
    log4j = f"-Dlog4j.configurationFile={folder.resolve() / 'log4j2.properties'}"
    assert log4j in (folder / "spark-defaults.conf").read_text()
    (folder / "broker.toml").write_text("# mine\n")
    r = runner.invoke(cli, ["conf", str(folder)])
    assert r.exit_code == 1 and "exist" in r.stderr and "--force" in r.stderr
    assert (folder / "broker.toml").read_text() == "# mine\n"
    assert runner.invoke(cli, ["conf", str(folder), "--force"]).exit_code == 0
    assert load_config(folder / "broker.toml") == load_config(None)


def _conf_in_a_terminal(folder, answer: bytes) -> tuple[int, str]:
    """``spark-amqp conf FOLDER`` with a pseudo-terminal as stdin and stdout (a person at a
    shell), answering ``answer`` to its prompt: (exit code, what it printed)."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time

    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "spark_amqp", "conf", str(folder)],
                            stdin=follower, stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    out, answered = b"", False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            if not answered and b"overwrite with the defaults? [y/N]" in out:
                os.write(leader, answer + b"\n")
                answered = True
            if proc.poll() is not None and not ready:
                break
        return proc.wait(30), out.decode(errors="replace")
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_conf_run_twice_in_a_terminal_asks_before_overwriting(tmp_path):
    folder = tmp_path / "conf"
    assert CliRunner().invoke(cli, ["conf", str(folder)]).exit_code == 0
    (folder / "broker.toml").write_text("# mine\n")
    code, out = _conf_in_a_terminal(folder, b"n")
    assert code == 1 and "broker.toml" in out and "nothing written" in out, out
    assert (folder / "broker.toml").read_text() == "# mine\n"
    code, out = _conf_in_a_terminal(folder, b"y")
    assert code == 0 and "broker.toml  (embedded broker" in out, out
    assert (folder / "broker.toml").read_text() != "# mine\n"


def test_repository_conf_is_the_package_conf():
    from spark_amqp.cli.conf import CONF_FILES, default_conf_dir

    for name in CONF_FILES:
        assert (ROOT / "conf" / name).read_bytes() == (default_conf_dir() / name).read_bytes()


@pytest.mark.parametrize("how", ["module", "checkout-script"])
def test_job_runs_from_another_folder(tmp_path, how):
    cmd = ([sys.executable, "-m", "spark_amqp.jobs.flight_delays", "--help"] if how == "module"
           else [sys.executable, str(ROOT / "jobs" / "flight_delays.py"), "--help"])
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "--alerts-queue" in r.stdout


def test_job_declares_and_binds_its_alerts_queue_outside_demo(broker_url, unique, monkeypatch):
    """Without --demo the job declares the alerts exchange and queue before Spark starts, so
    an alert is routed to the queue, not dropped (312 NO_ROUTE)."""
    from spark_amqp.client import connect
    from spark_amqp.jobs import flight_delays as job
    from spark_amqp.jobs.delays import session

    class SparkNotNeeded(Exception):
        pass

    def no_spark(*a, **k):
        raise SparkNotNeeded

    monkeypatch.setattr(session, "build_spark", no_spark)
    import logging

    for name in ("spark_amqp", "py4j"):  # main() sets their levels: restore them afterwards
        monkeypatch.setattr(logging.getLogger(name), "level", logging.getLogger(name).level)
    ex, q = unique("alerts-ex"), unique("alerts")
    try:
        with pytest.raises(SparkNotNeeded):
            job.main(["--uri", broker_url, "--alerts-exchange", ex, "--alerts-queue", q])
        with connect(broker_url) as conn:
            ch = conn.channel()
            ch.confirm_select()
            ch.basic_publish(b"{}", ex, "delay.JFK.AA", mandatory=True)
            result = ch.wait_for_confirms()
            assert not list(getattr(result, "returned", None) or [])
            assert job.queue_depth(broker_url, q) == 1
            # a second run declares again without purging
            with pytest.raises(SparkNotNeeded):
                job.main(["--uri", broker_url, "--alerts-exchange", ex, "--alerts-queue", q])
            assert job.queue_depth(broker_url, q) == 1
    finally:
        with connect(broker_url) as conn:
            ch = conn.channel()
            ch.queue_delete(q)
            ch.exchange_delete(ex)


def test_publish_flights_job_declares_publishes_and_checks_its_options(embedded_broker, unique,
                                                                      capsys):
    """``python -m spark_amqp.jobs.publish_flights`` (click, as ``spark-amqp``): the queue is
    declared and bound, the first N flights and the marker arrive, exit 0; a bad option
    exits 2 naming it; an unroutable run (no queue bound) exits 1."""
    from spark_amqp.client import connect
    from spark_amqp.jobs.delays.topology import queue_depth
    from spark_amqp.jobs.publish_flights import main

    ex, q = unique("pf-ex"), unique("pf")
    url = embedded_broker.url
    try:
        assert main(["--uri", url, "--exchange", ex, "--queue", q, "--limit", "30",
                     "--no-progress"]) == 0
        assert queue_depth(url, q) == 31  # 30 flights + the end-of-stream marker
        assert "published 30 flights" in capsys.readouterr().err
        assert main(["--uri", url, "--exchange", ex, "--queue", "", "--limit", "5",
                     "--no-progress", "--no-end-marker"]) == 0  # q still bound: routed
        assert queue_depth(url, q) == 36
        assert main(["--uri", url, "--limit", "-1"]) == 2
        assert "--limit" in capsys.readouterr().err
    finally:
        with connect(url) as conn:
            ch = conn.channel()
            ch.queue_delete(q)
            ch.exchange_delete(ex)
    unbound = unique("pf-none")
    try:
        assert main(["--uri", url, "--exchange", unbound, "--queue", "", "--limit", "3",
                     "--no-progress"]) == 1
    finally:
        with connect(url) as conn:
            conn.channel().exchange_delete(unbound)
