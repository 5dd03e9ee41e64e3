"""The connector and the main job on a Spark standalone cluster: a master and two one-core
workers on this machine (``spark-amqp cluster``), the driver in ``spark-submit``'s JVM and the
executors in the workers' JVMs, so every task, partition and data source object crosses
processes as on a real cluster. The package is installed in this test's Python, which is
``PYSPARK_PYTHON`` of the driver and the executors (the README's "installed wheel" way).

One cluster for the module and two submissions: the main job (``jobs/flight_delays.py --demo
--limit 20000`` with the README's ``--properties-file``, checked as in local[2] by
``tests/app/test_flight_job.py``), and ``cluster_scenarios.py`` (sink, queue mode, stream
mode, on the embedded broker and on RabbitMQ when it runs).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from app.test_flight_job import check_demo_run

from .conftest import LOG4J, ROOT, spark_submit

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

LIMIT = 20_000
N = 3_000  # messages per scenario
QUIET = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
         "spark.sql.shuffle.partitions": "2",
         "spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile=file:{LOG4J}",
         # the executors as every test JVM (tests/conftest.py SPARK_SUBMIT_OPTS, which the
         # driver inherits): C1 only, the serial collector
         "spark.executor.extraJavaOptions": f"-Dlog4j.configurationFile=file:{LOG4J} "
                                            "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}


def test_cluster_command_status(cluster):
    """``spark-amqp cluster status`` sees the fixture's cluster: up, both workers ALIVE."""
    from click.testing import CliRunner

    from spark_amqp.cli.main import cli

    r = CliRunner().invoke(cli, ["cluster", "status", "--work-dir", str(cluster.work_dir), "--json"])
    assert r.exit_code == 0, r.output
    st = json.loads(r.output)
    assert st["up"] and st["alive_workers"] == 2, st
    assert st["master_url"] == cluster.master_url
    print(f"cluster started in {cluster.start_seconds:.1f} s")


# -- the main job ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def job_run(cluster, tmp_path_factory):
    """The README's command: spark-submit --master spark://... --properties-file
    spark_amqp/conf/spark-defaults.conf jobs/flight_delays.py --demo --limit 20000."""
    out = tmp_path_factory.mktemp("flight-delays-cluster")
    t0 = time.monotonic()
    proc = spark_submit(
        cluster.master_url, "--properties-file", ROOT / "spark_amqp" / "conf" / "spark-defaults.conf",
        ROOT / "jobs" / "flight_delays.py", "--demo", "--limit", LIMIT, "--output", out / "run",
        "--no-progress", "--max-per-trigger", "12000", "--json-result", out / "result.json",
        timeout=600)
    print(f"flight job on the cluster: {time.monotonic() - t0:.1f} s (spark-submit wall)")
    return proc, out


def test_flight_job_on_cluster_counts(job_run):
    proc, out = job_run
    result = check_demo_run(proc, out)
    assert "[ok] messages left in the queue: 0" in proc.stdout
    print(f"flight job on the cluster: query {result['seconds']:.1f} s, {result['batches']} batches")


def test_flight_job_on_cluster_equals_batch_aggregates(job_run, spark):
    """The cluster's parquet output = batch Spark's aggregates (local session), as in local[2]."""
    from chispa import assert_approx_df_equality
    from pyspark.sql import functions as F

    from app.test_flight_job import reference_aggregates

    proc, out = job_run
    assert proc.returncode == 0, proc.stderr[-5000:]
    expected = reference_aggregates(spark, LIMIT)
    actual = spark.read.parquet(str(out / "run" / "windows")).drop("batch_id")
    assert actual.count() == actual.select("origin", "carrier", "window_start").distinct().count()
    assert_approx_df_equality(
        actual.select(*expected.columns), expected, precision=1e-9,
        ignore_nullable=True, ignore_row_order=True, allow_nan_equality=True)
    assert actual.agg(F.sum("flights")).first()[0] == LIMIT
    over = expected.where(F.col("mean_dep_delay") > 60).count()
    assert json.loads((out / "result.json").read_text())["alerts"] == over > 0


# -- sink and source, both modes ---------------------------------------------------------------

@pytest.fixture(scope="module")
def managed_broker():
    """An embedded broker with its management API (live unacked counts) for the module."""
    from spark_amqp import EmbeddedBroker

    with EmbeddedBroker(management=True) as b:
        yield b


@pytest.fixture(scope="module")
def scenarios(cluster, managed_broker, tmp_path_factory, request):
    """One submission of cluster_scenarios.py for every broker; returns (result, brokers)."""
    brokers = [{"name": "embedded", "uri": managed_broker.url,
                "management": managed_broker.management_url}]
    try:
        brokers.append({"name": "rabbitmq", "uri": request.getfixturevalue("rabbitmq_url"),
                        "management": None})  # its statistics lag by seconds: ends checked only
    except pytest.skip.Exception:
        pass
    tmp = tmp_path_factory.mktemp("cluster-scenarios")
    (tmp / "config.json").write_text(json.dumps({"brokers": brokers, "out": str(tmp / "out"),
                                                 "n": N}))
    t0 = time.monotonic()
    proc = spark_submit(cluster.master_url, Path(__file__).parent / "cluster_scenarios.py",
                        tmp / "config.json", tmp / "result.json", conf=QUIET, timeout=800)
    print(f"scenarios on the cluster ({', '.join(b['name'] for b in brokers)}): "
          f"{time.monotonic() - t0:.1f} s")
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-8000:]}"
    return json.loads((tmp / "result.json").read_text()), [b["name"] for b in brokers]


def _parquet_rows(path: str) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def test_scenarios_ran_on_two_executors(scenarios, cluster):
    result, _ = scenarios
    assert result["master"] == cluster.master_url
    assert result["executors"] == 2


def test_sink_then_queue_mode_every_message_once_acked_after_commit(scenarios):
    result, brokers = scenarios
    expected = {f"m-{i}" for i in range(N)}
    for name in brokers:
        r = result[name]["queue"]
        assert r["depth_after_sink"] == N, (name, r)  # the sink: each row published once
        rows = _parquet_rows(r["path"])
        ids = [row["message_id"] for row in rows]
        assert len(ids) == N and set(ids) == expected, (name, len(ids), len(set(ids)))
        assert not any(row["redelivered"] for row in rows)
        data = [b for b in r["batches"] if b["rows"]]
        assert len(data) >= 3 and sum(b["rows"] for b in data) == N, (name, r["batches"])
        if r["unacked_after"] is not None or name == "embedded":
            # inside each batch, before its commit, none of its messages was acked yet
            assert all(b["unacked"] >= b["rows"] for b in data), (name, r["batches"])
            assert r["unacked_after"] == 0
        assert r["after"] == [0, 0], (name, r["after"])  # no message ready, no consumer left


def test_stream_mode_exactly_once_and_batch_range(scenarios):
    result, brokers = scenarios
    for name in brokers:
        r = result[name]["stream"]
        rows = _parquet_rows(r["path"])
        offsets = sorted(row["offset"] for row in rows)
        assert offsets == list(range(N)), (name, len(offsets), offsets[:5], offsets[-5:])
        assert {row["message_id"] for row in rows} == {f"m-{i}" for i in range(N)}
        assert sum(r["batches"]) == N and len([b for b in r["batches"] if b]) >= 3, r["batches"]
        assert r["batch_partitions"] >= 2
        assert r["batch_offsets"] == [10, N - 11, N - 20, N - 20], (name, r["batch_offsets"])
