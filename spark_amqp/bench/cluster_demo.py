"""The main job's demo on a two-worker standalone cluster vs ``local[2]``, on this machine.

``python -m spark_amqp.bench.cluster_demo [--runs 2] [--limit 20000] [--conf KEY=VALUE ...]
[--quick]``

Starts a Spark standalone cluster as ``spark-amqp cluster start`` does
(:class:`spark_amqp.tools.standalone.StandaloneCluster`: a master and two workers of one core
and 1 GiB, on free ports, in a temporary folder), then runs the docs' command (docs/cluster.md)
(``spark-submit --properties-file spark_amqp/conf/spark-defaults.conf
.../jobs/flight_delays.py --demo --limit N``) ``--runs`` times with ``--master local[2]`` and
with ``--master spark://...``, alternating (local first), each with ``--json-result``. Printed
per run and as means: the ``spark-submit`` wall time (broker start, publishing, job and summary)
and the query's time (the job's ``job: ... in N s``, from ``start()`` to the end of the last
batch), and the ratios cluster / ``local[2]``. Target (issue 14): the cluster at most 1.5x.

``--conf KEY=VALUE`` is passed to every ``spark-submit`` (both masters), to compare settings.
Every submission must exit 0 (the demo checks published = consumed).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def submit(master: str, limit: int, out: Path, conf: list[str],
           archive: tuple[Path, Path] | None = None) -> dict:
    """One ``spark-submit`` of the demo; returns ``{"wall", "query", "batches",
    "batch_seconds"}`` (seconds). ``archive``: ``(packed environment, folder where it is
    unpacked as env/)``: shipped with ``--archives PACK#env``, and ``./env/bin/python`` is the
    Python of the executors and of the driver (run from that folder, so the Python processes
    that Spark starts on the driver find ``./env`` too); else this Python for both.
    Raises ``RuntimeError`` with the end of its output when it exits non-zero."""
    from ..cli.conf import default_conf_dir
    from ..jobs import flight_delays

    log4j = default_conf_dir() / "log4j2.properties"
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", master,
           "--properties-file", str(default_conf_dir() / "spark-defaults.conf"),
           "--conf", f"spark.driver.extraJavaOptions=-Dlog4j.configurationFile=file:{log4j}",
           "--conf", f"spark.executor.extraJavaOptions=-Dlog4j.configurationFile=file:{log4j}"]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    cwd = None
    if archive is not None:
        pack, cwd = archive
        cmd += ["--archives", f"{pack}#env", "--conf", "spark.pyspark.python=./env/bin/python",
                "--conf", "spark.pyspark.driver.python=./env/bin/python"]
        env.pop("PYSPARK_PYTHON")
        env.pop("PYSPARK_DRIVER_PYTHON")
        # spark-submit finds SPARK_HOME with the Python of PYSPARK_DRIVER_PYTHON, else python3
        from pyspark.find_spark_home import _find_spark_home

        env.setdefault("SPARK_HOME", _find_spark_home())
    for kv in conf:
        cmd += ["--conf", kv]
    result = out / "result.json"
    cmd += [flight_delays.__file__, "--demo", "--limit", str(limit), "--no-progress",
            "--output", str(out / "run"), "--json-result", str(result)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{master}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-4000:]}")
    r = json.loads(result.read_text())
    return {"wall": wall, "query": r["seconds"], "batches": r["batches"],
            "batch_seconds": r.get("batch_seconds", [])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2, help="runs per master [%(default)s]")
    ap.add_argument("--limit", type=int, default=20_000, help="flights [%(default)s]")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for every spark-submit (repeatable)")
    ap.add_argument("--archive", type=Path, metavar="ENV.tar.gz",
                    help="also run on the cluster with this packed environment (venv-pack; the "
                         "spark-amqp wheel, pyarrow, pandas installed) as spark.archives")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 run of 2,000 flights")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.limit = 1, 2_000

    from ..tools.standalone import StandaloneCluster

    runs: dict[str, list[dict]] = {"local[2]": [], "cluster": []}
    modes = [("local[2]", "local[2]"), ("cluster", None)]
    if args.archive is not None:
        runs["cluster+archive"] = []
        modes.append(("cluster+archive", None))
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        archive = None
        if args.archive is not None:
            driver_dir = Path(tmp) / "driver"
            (driver_dir / "env").mkdir(parents=True)
            subprocess.run(["tar", "-xzf", str(args.archive.resolve()), "-C",
                            str(driver_dir / "env")], check=True)
            archive = (args.archive.resolve(), driver_dir)
        cluster = StandaloneCluster(work_dir=Path(tmp) / "cluster", port=_free_port(),
                                    webui_port=_free_port())
        t0 = time.perf_counter()
        cluster.start(timeout=240)
        print(f"cluster {cluster.master_url} started in {time.perf_counter() - t0:.1f} s",
              flush=True)
        try:
            for i in range(args.runs):
                for name, master in modes:
                    # no brackets in the path: Spark reads "local[2]" in a path as a glob
                    out = Path(tmp) / f"{name.replace('[', '').replace(']', '')}-{i}"
                    out.mkdir()
                    r = submit(master or cluster.master_url, args.limit, out, args.conf,
                               archive if name == "cluster+archive" else None)
                    runs[name].append(r)
                    print(f"run {i + 1} {name:<9} spark-submit {r['wall']:5.1f} s, query "
                          f"{r['query']:5.1f} s, {r['batches']} batches ("
                          + ", ".join(f"{x:.1f}" for x in r["batch_seconds"]) + " s), load average "
                          f"{os.getloadavg()[0]:.2f}", flush=True)
        finally:
            cluster.stop()
    print(f"\nflights={args.limit:,} runs={args.runs}"
          + "".join(f", {kv}" for kv in args.conf))
    print(f"{'master':<16}{'spark-submit (runs)':>28}{'mean':>8}{'query (runs)':>28}{'mean':>8}")
    means = {}
    for name, rs in runs.items():
        w = [r["wall"] for r in rs]
        q = [r["query"] for r in rs]
        means[name] = (statistics.mean(w), statistics.mean(q))
        print(f"{name:<16}{', '.join(f'{x:.1f}' for x in w):>28}{means[name][0]:>7.1f}s"
              f"{', '.join(f'{x:.1f}' for x in q):>28}{means[name][1]:>7.1f}s")
    for name in runs:
        if name == "local[2]":
            continue
        rw = means[name][0] / means["local[2]"][0]
        rq = means[name][1] / means["local[2]"][1]
        print(f"{name + '/local':<16}{'':>28}{rw:>7.2f}x{'':>28}{rq:>7.2f}x")
    print("target: cluster/local <= 1.50x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
