"""End-to-end latency of the ``amqp`` source on live data, beside the floor of Spark's
micro-batch loop measured in the same run (issue 26).

``python -m spark_amqp.bench latency`` or ``python -m spark_amqp.bench.latency
[--rates 100,1000,10000] [--seconds 10] [--warmup 2] [--broker embedded|rabbitmq|both]
[--mode queue|stream|both] [--url amqp://...] [--body-size 100] [--bound 2.0] [--find-max]
[--option KEY=VALUE ...] [--floor-each]``

**Latency** is publish time → the row seen in ``foreachBatch``: a publisher process sends
messages at a steady rate (``--rates``, msg/s) for ``--warmup`` + ``--seconds`` seconds; each
body starts with the wall-clock time it was handed to the socket (16 ASCII digits, µs since
the epoch, then filler up to ``--body-size``); the query's ``foreachBatch`` (on the driver,
this process) collects that column of its batch (``toArrow``) and takes the time right after:
one latency per row. Rows published during the first ``--warmup`` seconds are left out.
Figures: p50/p90/p99/max in milliseconds.

Contenders, one streaming query each, ``trigger(processingTime="0 seconds")`` (Spark's
default: the next micro-batch starts as soon as the last one ends; an idle query polls every
``spark.sql.streaming.pollingDelay`` = 10 ms), user schema ``body binary``, the same
``foreachBatch``:

- **floor**: a synthetic Python streaming data source (``pyspark.sql.datasource``, no broker)
  whose row *i* arrives at ``t0 + i / rate``: ``latestOffset`` reports every row arrived by
  then, and ``read`` (in the executors) builds the rows with their arrival time in the body.
  What Spark's micro-batch loop costs with a source that knows instantly what has arrived and
  reads nothing: no source can do better on this machine. Run once per rate (``--floor-each``:
  before each contender, for a floor measured next to it).
- **queue**: the source in queue mode on a fresh classic queue (default exchange).
- **stream**: the source in stream mode (``startingOffsets=earliest``) on a fresh stream queue.

Each for ``--broker`` (the embedded broker in its own process, and/or RabbitMQ at ``--url``).
``--option KEY=VALUE`` adds a source option to the queue and stream contenders (e.g.
``maxMessagesPerTrigger``, ``prefetch``; an option the mode does not know fails its row).

A query is started, then the publisher waits until the query's first trigger has passed
(status "Waiting for data to arrive": sources initialised, connections open), so start-up is
not measured. After the publisher stops, the query gets ``--drain`` seconds to show every
message it was sent.

**Sustained** (a rate the mode keeps up with): every message published is seen, p99 <=
``--bound`` seconds (default 2 s), and the publisher reached >= 95 % of the rate asked
(otherwise the machine, not the mode, set the rate: the row says ``pub<rate``). With
``--find-max`` each contender also runs at doubling rates above the top of ``--rates`` until
one is not sustained (at most 5 steps), and the summary gives the highest sustained rate.

Targets (issue 26) at 1,000 msg/s: p50 <= 1.3x the floor and p99 <= 1.5x the floor, in both
modes on both brokers; the stream mode sustains at least the queue mode's rate. The table
prints each contender beside the floor of the same rate, the ratios, and the mean seconds per
micro-batch of Spark's phases (``durationMs`` of the batches with rows) to show where the time
goes.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Sequence

from ..tools.pacing import due, paced_sends
from .common import BrokerProcess, local_spark

__all__ = ["percentiles", "stamp", "parse_stamp", "LatencyStats", "main"]

from ..client.uri import DEFAULT_URI as DEFAULT_URL  # noqa: E402
#: digits of the publish time at the start of each body (µs since the epoch)
STAMP_DIGITS = 16
#: the publisher must reach this share of the rate asked for the row to count as sustained
RATE_SHARE = 0.95
#: Spark's phases shown per contender (mean ms per micro-batch with rows)
PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets",
          "triggerExecution")


# --------------------------------------------------------------------------- pure parts

def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 90, 99)) -> list[float]:
    """The ``qs`` percentiles (0-100) of ``values`` by the nearest-rank method (the smallest
    value with at least q % of the values at or below it: always one of the values, so a p99
    over 100 values is the second largest). ValueError on no values or a q outside [0, 100]."""
    if not len(values):
        raise ValueError("percentiles of no values")
    s = sorted(values)
    out = []
    for q in qs:
        if not 0 <= q <= 100:
            raise ValueError(f"percentile {q} is outside [0, 100]")
        rank = max(1, math.ceil(q / 100 * len(s)))
        out.append(s[rank - 1])
    return out


def stamp(t: float, body_size: int = STAMP_DIGITS) -> bytes:
    """A body starting with wall-clock time ``t`` (seconds since the epoch) as
    :data:`STAMP_DIGITS` ASCII digits of µs, padded with ``.`` to ``body_size`` bytes."""
    head = b"%016d" % round(t * 1e6)
    return head + b"." * max(0, body_size - STAMP_DIGITS)


def parse_stamp(body: bytes) -> float:
    """The time (seconds since the epoch) at the start of a :func:`stamp` body."""
    return int(body[:STAMP_DIGITS]) / 1e6


@dataclass
class LatencyStats:
    """One contender at one rate: ``latencies`` (seconds, the measured rows), ``sent`` /
    ``seen`` (all messages, warm-up included), the publisher's achieved ``pub_rate`` (msg/s),
    the ``rate`` asked, and Spark's mean phase ms per batch with rows (``phases``)."""

    name: str
    rate: float
    latencies: list = field(default_factory=list)
    sent: int = 0
    seen: int = 0
    pub_rate: float = 0.0
    batches: int = 0
    phases: dict = field(default_factory=dict)
    error: str | None = None

    def figures(self) -> list[float] | None:
        """[p50, p90, p99, max] in seconds, or None without measured rows."""
        if not self.latencies:
            return None
        return [*percentiles(self.latencies), max(self.latencies)]

    def sustained(self, bound: float) -> bool:
        """Every message seen, p99 <= ``bound`` s, and the publisher kept the rate."""
        f = self.figures()
        return (self.error is None and f is not None and self.seen >= self.sent
                and f[2] <= bound and self.pub_rate >= RATE_SHARE * self.rate)

    def verdict(self, bound: float) -> str:
        if self.error:
            return "error"
        if self.seen < self.sent:
            return f"lost {self.sent - self.seen}"
        if self.pub_rate < RATE_SHARE * self.rate:
            return "pub<rate"
        return "yes" if self.sustained(bound) else "no"


# --------------------------------------------------------------------------- publisher

def _publisher(url: str, queue: str, rate: float, seconds: float, body_size: int,
               go, result) -> None:
    """Publisher process: connect, wait for ``go``, send ``rate * seconds`` stamped messages
    to ``queue`` (default exchange) at a steady rate; put ``(sent, elapsed)`` on ``result``."""
    from spark_amqp.client import connect

    total = max(1, round(rate * seconds))
    try:
        with connect(url) as conn:
            ch = conn.channel()
            go.wait()

            def send(n: int) -> None:
                ch.publish_batch([(stamp(time.time(), body_size),)] * n, routing_key=queue)

            sent, elapsed = paced_sends(rate, total, send)
            # a round trip: everything before it has reached the broker
            ch.queue_declare(queue, passive=True)
        result.put((sent, elapsed))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        result.put((-1, repr(e)))


# --------------------------------------------------------------------------- the floor

def _floor_source_class():
    """The floor's data source ``latency_floor`` (defined lazily: imports pyspark).
    Options: ``control`` (a file; until it holds ``{"t0", "rate", "total"}`` nothing has
    arrived), ``bodysize``."""
    from dataclasses import dataclass as _dc

    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    @_dc
    class Part(InputPartition):
        start: int
        end: int
        t0: float
        rate: float
        body_size: int

    class Reader(DataSourceStreamReader):
        def __init__(self, o):
            self.control, self.body_size = o["control"], int(o["bodysize"])
            self.plan = None

        def _plan(self):
            if self.plan is None:
                try:
                    with open(self.control) as f:
                        self.plan = json.load(f)
                except (OSError, ValueError):
                    return None
            return self.plan

        def initialOffset(self):
            return {"n": 0}

        def latestOffset(self, start=None, limit=None):
            p = self._plan()
            if p is None:
                return {"n": 0}
            return {"n": due(p["rate"], time.time() - p["t0"], p["total"])}

        def partitions(self, start, end):
            p = self._plan()
            if end["n"] <= start["n"]:
                return []
            return [Part(start["n"], end["n"], p["t0"], p["rate"], self.body_size)]

        def read(self, part):
            import pyarrow as pa

            bodies = [stamp(part.t0 + i / part.rate, part.body_size)
                      for i in range(part.start, part.end)]
            yield pa.RecordBatch.from_arrays([pa.array(bodies, pa.binary())], ["body"])

        def commit(self, end):
            pass

    class Floor(DataSource):
        @classmethod
        def name(cls):
            return "latency_floor"

        def schema(self):
            return "body binary"

        def streamReader(self, schema):
            return Reader(self.options)

    return Floor


# --------------------------------------------------------------------------- one run

class Recorder:
    """The ``foreachBatch`` function: collects the batch's publish times (``toArrow``), then
    takes the time; keeps one latency (seconds) per row published at or after ``since``."""

    def __init__(self):
        self.lock = threading.Lock()
        self.since = float("inf")
        self.latencies: list[float] = []
        self.seen = 0

    def __call__(self, df, batch_id: int) -> None:
        pub = df.toArrow().column(0).to_pylist()
        now = time.time()
        with self.lock:
            self.seen += len(pub)
            since = self.since
            self.latencies.extend(now - p / 1e6 for p in pub if p / 1e6 >= since)


def _wait_ready(q, timeout: float = 180.0) -> None:
    """Until the query's first trigger has run (status "Waiting for data to arrive"), it
    failed (its exception raised) or ``timeout`` s passed (TimeoutError)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not q.isActive:
            raise RuntimeError(f"query ended before it was ready: {q.exception()}")
        if q.status.get("message") == "Waiting for data to arrive":
            return
        time.sleep(0.05)
    raise TimeoutError(f"query not ready after {timeout:.0f} s (status {q.status})")


def _phases(q) -> tuple[int, dict]:
    prog = [p for p in q.recentProgress if p["numInputRows"]]
    out = {}
    for k in PHASES:
        vals = [p["durationMs"].get(k, 0) for p in prog]
        out[k] = sum(vals) / len(vals) if vals else 0.0
    return len(prog), out


def run_contender(spark, name: str, df, rate: float, args, tmp: str, start_arrivals,
                  publisher=None) -> LatencyStats:
    """Run one query over ``df`` (a streaming DataFrame with a ``body`` column) while
    ``start_arrivals(t0_wall)`` starts the arrivals (a publisher process, or the floor's
    control file); ``publisher``: the (process, go, result) to wait for, None for the floor."""
    from pyspark.sql import functions as F

    stats = LatencyStats(name, rate)
    rec = Recorder()
    pub_col = F.substring("body", 1, STAMP_DIGITS).cast("string").cast("long").alias("pub")
    q = (df.select(pub_col).writeStream.foreachBatch(rec)
         .trigger(processingTime="0 seconds")
         .option("checkpointLocation", os.path.join(tmp, uuid.uuid4().hex)).start())
    total = max(1, round(rate * (args.warmup + args.seconds)))
    try:
        _wait_ready(q)
        t0 = time.time()
        with rec.lock:
            rec.since = t0 + args.warmup
        start_arrivals(t0)
        if publisher is not None:
            proc, _, result = publisher
            sent, elapsed = result.get(timeout=args.warmup + args.seconds + 600)
            proc.join(30)
            if sent < 0:
                raise RuntimeError(f"publisher failed: {elapsed}")
        else:
            sent, elapsed = total, args.warmup + args.seconds
            while time.time() < t0 + elapsed and q.isActive:
                time.sleep(0.05)
        stats.sent = sent
        stats.pub_rate = sent / elapsed if elapsed else 0.0
        deadline = time.monotonic() + args.drain
        while rec.seen < sent and time.monotonic() < deadline and q.isActive:
            time.sleep(0.02)
        if not q.isActive and q.exception() is not None:
            raise RuntimeError(str(q.exception()))
    except Exception as e:  # noqa: BLE001 - one failing contender does not stop the run
        stats.error = str(e).splitlines()[0][:200]
    finally:
        q.stop()
    stats.seen = rec.seen
    stats.latencies = rec.latencies
    stats.batches, stats.phases = _phases(q)
    return stats


def floor_run(spark, rate: float, args, tmp: str) -> LatencyStats:
    control = os.path.join(tmp, f"floor-{uuid.uuid4().hex}.json")
    df = (spark.readStream.format("latency_floor").option("control", control)
          .option("bodysize", args.body_size).load())
    total = max(1, round(rate * (args.warmup + args.seconds)))

    def start(t0: float) -> None:
        with open(control + ".tmp", "w") as f:
            json.dump({"t0": t0, "rate": rate, "total": total}, f)
        os.replace(control + ".tmp", control)

    return run_contender(spark, "floor", df, rate, args, tmp, start)


def broker_run(spark, broker: str, url: str, mode: str, rate: float, args,
               tmp: str) -> LatencyStats:
    """The source in ``mode`` (queue|stream) on a fresh queue/stream of ``url``, deleted
    afterwards."""
    from ..client import connect

    name = f"bench-latency-{mode}-{uuid.uuid4().hex[:8]}"
    with connect(url) as c:
        if mode == "stream":
            c.channel().queue_declare(name, durable=True, arguments={"x-queue-type": "stream"})
        else:
            c.channel().queue_declare(name, durable=False)
    ctx = mp.get_context("spawn")
    go, result = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=_publisher, daemon=True,
                       args=(url, name, rate, args.warmup + args.seconds, args.body_size, go,
                             result))
    proc.start()
    try:
        r = spark.readStream.format("amqp").schema("body binary").option("uri", url)
        if mode == "stream":
            r = r.option("stream", name).option("startingOffsets", "earliest")
        else:
            r = r.option("queue", name)
        for kv in args.option:
            k, _, v = kv.partition("=")
            r = r.option(k, v)
        return run_contender(spark, f"{mode}/{broker}", r.load(), rate, args, tmp,
                             lambda t0: go.set(), (proc, go, result))
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join(10)
        try:
            with connect(url) as c:
                c.channel().queue_delete(name)
        except Exception:  # noqa: BLE001
            pass


# --------------------------------------------------------------------------- report

def _ms(v: float) -> str:
    return f"{v * 1e3:,.0f}"


def row_text(s: LatencyStats, floor: LatencyStats | None, bound: float) -> str:
    """One table line: the contender's p50/p90/p99/max (ms), the floor's, the ratios."""
    f = s.figures()
    fl = floor.figures() if floor is not None else None
    cells = [f"{s.rate:>8,.0f}", f"{s.name:<18}"]
    cells += [f"{_ms(v):>7}" for v in f] if f else [f"{'-':>7}"] * 4
    cells += [f"{_ms(v):>7}" for v in fl] if fl else [f"{'-':>7}"] * 4
    if f and fl and s.name != "floor":
        cells += [f"{f[0] / fl[0]:>6.2f}x", f"{f[2] / fl[2]:>6.2f}x"]
    else:
        cells += [f"{'':>7}", f"{'':>7}"]
    cells.append(f"{s.pub_rate:>9,.0f}")
    cells.append(f"  {s.verdict(bound)}")
    if s.error:
        cells.append(f"  ({s.error})")
    return " ".join(cells)


HEADER = (f"{'msg/s':>8} {'contender':<18} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7} "
          f"{'fl.p50':>7} {'fl.p90':>7} {'fl.p99':>7} {'fl.max':>7} {'p50/fl':>7} {'p99/fl':>7} "
          f"{'pub/s':>9}   sustained")


def phase_text(s: LatencyStats) -> str:
    return (f"{s.rate:>8,.0f} {s.name:<18} {s.batches:>5} batches; mean ms/batch: "
            + ", ".join(f"{k} {s.phases.get(k, 0):,.0f}" for k in PHASES))


# --------------------------------------------------------------------------- main

def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m spark_amqp.bench.latency",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="100,1000,10000",
                    help="comma-separated publish rates, msg/s [%(default)s]")
    ap.add_argument("--seconds", type=float, default=10.0,
                    help="measured seconds of publishing per run [%(default)s]")
    ap.add_argument("--warmup", type=float, default=2.0,
                    help="seconds of publishing before the measured ones [%(default)s]")
    ap.add_argument("--drain", type=float, default=20.0,
                    help="seconds the query gets after the publisher stops [%(default)s]")
    ap.add_argument("--broker", choices=["embedded", "rabbitmq", "both"], default="both")
    ap.add_argument("--mode", choices=["queue", "stream", "both"], default="both")
    ap.add_argument("--url", default=os.environ.get("SPARK_AMQP_RABBITMQ_URL", DEFAULT_URL),
                    help="RabbitMQ's AMQP URI [%(default)s]")
    ap.add_argument("--body-size", type=int, default=100,
                    help=f"bytes per body (at least {STAMP_DIGITS}) [%(default)s]")
    ap.add_argument("--bound", type=float, default=2.0,
                    help="p99 bound (seconds) of a sustained rate [%(default)s]")
    ap.add_argument("--find-max", action="store_true",
                    help="also double the rate above the top of --rates until a contender "
                         "stops sustaining it (at most 5 steps)")
    ap.add_argument("--floor-each", action="store_true",
                    help="run the floor before every contender (default: once per rate)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="an amqp source option for the queue and stream contenders")
    args = ap.parse_args(argv)
    try:
        args.rates = [float(r) for r in args.rates.split(",") if r.strip()]
    except ValueError:
        ap.error(f"--rates must be comma-separated numbers, got {args.rates!r}")
    if not args.rates or min(args.rates) <= 0:
        ap.error("--rates must hold at least one rate > 0")
    if args.body_size < STAMP_DIGITS:
        ap.error(f"--body-size must be >= {STAMP_DIGITS}")
    for kv in args.option:
        if "=" not in kv:
            ap.error(f"--option takes KEY=VALUE, got {kv!r}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    brokers = ["embedded", "rabbitmq"] if args.broker == "both" else [args.broker]
    modes = ["queue", "stream"] if args.mode == "both" else [args.mode]
    spark = local_spark("bench-latency")
    spark.dataSource.register(_floor_source_class())
    results: list[tuple[LatencyStats, LatencyStats | None]] = []
    procs = {b: BrokerProcess() for b in brokers if b == "embedded"}
    urls = {b: (procs[b].url if b in procs else args.url) for b in brokers}
    t_start = time.time()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            # warm-up: JVM, the Python workers, the source runner's imports
            warm = argparse.Namespace(**{**vars(args), "seconds": 1.0, "warmup": 0.5})
            floor_run(spark, 100, warm, tmp)

            def one_rate(rate: float, contenders) -> list:
                rows = []
                floor = floor_run(spark, rate, args, tmp)
                print(row_text(floor, floor, args.bound), flush=True)
                rows.append((floor, floor))
                for b, m in contenders:
                    if args.floor_each and rows[-1][0] is not floor:
                        floor = floor_run(spark, rate, args, tmp)
                        print(row_text(floor, floor, args.bound), flush=True)
                        rows.append((floor, floor))
                    s = broker_run(spark, b, urls[b], m, rate, args, tmp)
                    print(row_text(s, floor, args.bound), flush=True)
                    rows.append((s, floor))
                return rows

            everyone = [(b, m) for b in brokers for m in modes]
            print(HEADER, flush=True)
            for rate in args.rates:
                results += one_rate(rate, everyone)
            if args.find_max:
                rate = max(args.rates)
                going = [c for c in everyone
                         if any(s.name == f"{c[1]}/{c[0]}" and s.rate == rate
                                and s.sustained(args.bound) for s, _ in results)]
                for _ in range(5):
                    if not going:
                        break
                    rate *= 2
                    rows = one_rate(rate, going)
                    results += rows
                    going = [c for c in going
                             if any(s.name == f"{c[1]}/{c[0]}" and s.sustained(args.bound)
                                    for s, _ in rows)]
    finally:
        spark.stop()
        for p in procs.values():
            p.stop()

    print(f"\nlatency publish -> row in foreachBatch, ms (fl.*: the floor, a synthetic source "
          f"with no broker, same run and rate); {args.seconds:g} s measured after "
          f"{args.warmup:g} s warm-up; body {args.body_size} B; trigger processingTime 0; "
          f"options {args.option or 'default'}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(t_start))}")
    print(HEADER)
    for s, floor in results:
        print(row_text(s, floor, args.bound))
    print("\nSpark's phases (batches with rows):")
    for s, _ in results:
        print(phase_text(s))
    print(f"\nhighest sustained rate (every message seen, p99 <= {args.bound:g} s, publisher at "
          f">= {RATE_SHARE:.0%} of the rate):")
    names = list(dict.fromkeys(s.name for s, _ in results))
    for n in names:
        ok = [s.rate for s, _ in results if s.name == n and s.sustained(args.bound)]
        tried = max(s.rate for s, _ in results if s.name == n)
        top = max(ok) if ok else None
        more = " (the highest tried)" if top == tried else ""
        print(f"  {n:<18} {f'{top:,.0f} msg/s' if top else 'none of the rates tried'}{more}")
    print("targets at 1,000 msg/s: p50/fl <= 1.30x and p99/fl <= 1.50x (both modes, both "
          "brokers); stream sustains >= the queue mode's rate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
