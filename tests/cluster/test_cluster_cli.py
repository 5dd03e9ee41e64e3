"""``spark-amqp cluster``'s errors, without starting a JVM: nothing recorded, a port in use."""

from __future__ import annotations

import socket

from click.testing import CliRunner

from spark_amqp.cli.main import cli


def invoke(*args):
    return CliRunner().invoke(cli, ["cluster", *map(str, args)])


def test_status_and_stop_without_a_cluster_say_how_to_start_one(tmp_path):
    for cmd in ("status", "stop"):
        r = invoke(cmd, "--work-dir", tmp_path)
        assert r.exit_code == 1
        assert f"no cluster recorded in {tmp_path}" in r.output
        assert "spark-amqp cluster start" in r.output


def test_start_on_a_port_in_use_names_the_option(tmp_path):
    from spark_amqp.tools.standalone import ClusterError, find_java

    try:
        find_java()
    except ClusterError:
        import pytest
        pytest.skip("no Java")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = invoke("start", "--work-dir", tmp_path, "--port", port, "--webui-port", port)
    assert r.exit_code == 1
    assert f"127.0.0.1:{port} is already in use: choose another --port" in r.output
    assert not (tmp_path / "cluster.json").exists()


def test_readme_cluster_commands_are_the_tested_ones():
    """test_cluster.py runs the job with the README's spark-submit line (free ports, the
    package's own spark-defaults.conf, which `spark-amqp conf` copies): keep them the same."""
    from app.test_readme import code_blocks, commands, section

    lines = [c for b in code_blocks(section("Running on a cluster (spark-submit)"), "sh")
             for c in commands(b)]
    assert "spark-amqp cluster start" in lines and "spark-amqp cluster stop" in lines
    assert "spark-amqp conf" in lines
    submit = [c for c in lines if c.startswith("spark-submit --master spark://127.0.0.1:7077")]
    assert submit and "--properties-file conf/spark-defaults.conf" in submit[0]
    assert submit[0].endswith('"$JOB" --demo --limit 20000')


def test_the_default_work_dir_is_per_user_and_stop_removes_it(tmp_path, monkeypatch):
    """Two users of one machine get two folders; `stop` without --work-dir removes the default
    folder (a cluster recorded there with no daemon left running), --keep-work-dir keeps it."""
    import getpass
    import tempfile

    from spark_amqp.tools.standalone import StandaloneCluster, default_work_dir

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert default_work_dir() == tmp_path / f"spark-amqp-cluster-{getpass.getuser()}"
    monkeypatch.setattr(getpass, "getuser", lambda: "someone-else")
    other = default_work_dir()
    assert other == tmp_path / "spark-amqp-cluster-someone-else"
    for keep in (True, False):
        other.mkdir(exist_ok=True)
        (other / "logs").mkdir(exist_ok=True)
        StandaloneCluster(work_dir=other, pids={"master": 2 ** 22 + 12345})._save()  # no such pid
        r = invoke("stop", *(["--keep-work-dir"] if keep else []))
        assert r.exit_code == 0, r.output
        assert "stopped nothing" in r.output
        assert other.exists() == keep, r.output
        if not keep:
            assert f"removed {other}" in r.output
