"""Benchmark of the ``amqp`` sink against pika, side by side in one run.

``python -m spark_amqp.bench.sink [--broker rabbitmq|embedded|both] [--rows 500000]
[--body-size 200] [--partitions 2] [--confirm-rows 20000] [--durable-queue] [--skip-client]
[--stream with|skip|only]``

For each broker: a direct exchange with one bound queue (unique names, deleted afterwards;
the queue is non-durable unless ``--durable-queue``); every contender publishes ``--rows``
messages of ``--body-size`` bytes with ``delivery_mode=2`` and a per-message ``message_id``
(what the sink sets by default) to that exchange, and the queue is purged between contenders.
Note that RabbitMQ writes a persistent message to disk only when its queue is durable, so
without ``--durable-queue`` "persistent" costs the broker little. Contenders:

1. **pika, no confirms** - a ``BlockingConnection`` loop of ``basic_publish``. Two figures:
   the rate of the publish loop itself (the target's baseline), and the rate until the broker
   has enqueued them all (``queue.declare`` passive polling).
2. **pika, per-message confirms** - ``channel.confirm_delivery()`` then ``basic_publish``
   (each call waits for its ack); ``--confirm-rows`` messages (default 20,000) because it is
   slow; the rate is what matters.
3. **client alone** (the broker's own limit for the sink's traffic, no Spark):
   ``--partitions`` processes, one connection each (as the sink's tasks), each publishing its
   share with the sink's publisher (:class:`~spark_amqp.spark.sink.publish.TaskPublisher`:
   ``publish_batch`` chunks of 1,000, the same ``maxInFlight`` window of 10,000, then every
   message confirmed) of messages built beforehand. Three rows: the sink's traffic
   (persistent, confirms on); the same with ``delivery_mode=1`` (transient); and persistent
   *without* confirms (``publish_batch`` loop, timed until the broker has enqueued all), the
   broker's ingest rate with no confirm work at all.
4. **Spark sink** - ``df.write.format("amqp").mode("append").save()`` of a cached DataFrame
   with ``--partitions`` partitions on ``local[2]``; every message confirmed when ``save()``
   returns. Timed from ``save()`` call to return, after an untimed 1,000-row warm-up write
   (Python worker start-up).

5. **Into a stream** (``--stream``, issue 39): a new stream, written by the 0-9-1 sink (option
   ``stream``: default exchange, routing key = the stream) and then by the sink over the
   stream protocol (``rabbitmq-stream://``, port 5552) with ``producerName`` (deduplication
   on), the same DataFrame each, each timed from ``save()`` to return after an untimed warm-up;
   the stream producers' stored sequences must account for every row.

CPU columns (Linux ``/proc``; "-" where not measurable): **broker CPU µs/msg** is the CPU
time of the broker process (the local RabbitMQ node's ``beam.smp``; the embedded broker runs
in its own process, ``spark_amqp.broker.serve``, like RabbitMQ) divided by the messages; **publisher CPU µs/msg**
is the CPU time of the publishing side: pika's process, the client processes, or for the sink
the whole benchmark process tree (Spark's JVM, its Python workers, the driver). On a 2-core
machine, rate × (broker + publisher CPU per message) cannot exceed 2 CPU-seconds per second.

The target (issue 5) is the sink >= 2x pika's unconfirmed publish loop, with confirms on.
Figures depend on the machine: the broker, Spark's JVM, its Python workers and pika share the
cores (2 on the reference machine); docs/performance.md has measured runs (history: CHANGELOG.md).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
import uuid

from .common import BrokerProcess, local_spark

from ..client.uri import DEFAULT_URI  # noqa: E402

RABBITMQ_URL = os.environ.get("SPARK_AMQP_RABBITMQ_URL", DEFAULT_URI)
RABBITMQ_STREAM_URL = os.environ.get("SPARK_AMQP_RABBITMQ_STREAM_URL",
                                     "rabbitmq-stream://guest:guest@127.0.0.1:5552/%2F")
#: the sink's default maxInFlight (spark_amqp.spark.sink.options)
SINK_WINDOW = 10000


def _body(i: int, size: int) -> bytes:
    b = str(i).encode()
    return b + b"x" * (size - len(b))


# ------------------------------------------------------------------ CPU accounting (/proc)

def _proc_cpu(pid: int, children: bool = True) -> float:
    """CPU seconds of ``pid`` (user + system, plus its reaped children's); 0.0 if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def _tree_cpu(root: int, exclude: int | None = None) -> float:
    """CPU seconds of ``root`` and all its descendants (alive or reaped by one of them),
    leaving out the subtree of ``exclude`` (the embedded broker's process)."""
    parents: dict[int, int] = {}
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                parents[pid] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    tree, todo = {root}, [root]
    while todo:
        p = todo.pop()
        for c, pp in parents.items():
            if pp == p and c not in tree and c != exclude:
                tree.add(c)
                todo.append(c)
    return sum(_proc_cpu(p) for p in tree)


def _rabbitmq_pid(url: str) -> int | None:
    """The local RabbitMQ node's ``beam.smp`` pid, if the URL is local and exactly one runs."""
    host = url.split("@")[-1].split("/")[0].rsplit(":", 1)[0].strip("[]")
    if host not in ("127.0.0.1", "localhost", "::1"):
        return None
    found = []
    for d in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if d.isdigit():
            try:
                with open(f"/proc/{d}/comm") as f:
                    if f.read().strip() == "beam.smp":
                        found.append(int(d))
            except OSError:
                continue
    return found[0] if len(found) == 1 else None


class CpuMeter:
    """Broker and publisher CPU over a timed section (seconds; None when not measurable)."""

    def __init__(self, broker_pid: int | None, publisher_pid: int | None):
        self.broker_pid, self.publisher_pid = broker_pid, publisher_pid
        self.broker = self.publisher = None

    def __enter__(self) -> "CpuMeter":
        self._b0 = _proc_cpu(self.broker_pid, False) if self.broker_pid else None
        self._p0 = _tree_cpu(self.publisher_pid, self.broker_pid) if self.publisher_pid else None
        return self

    def stop(self) -> None:
        if self._b0 is not None:
            self.broker = _proc_cpu(self.broker_pid, False) - self._b0  # type: ignore[arg-type]
        if self._p0 is not None:
            self.publisher = _tree_cpu(self.publisher_pid, self.broker_pid) - self._p0  # type: ignore[arg-type]

    def __exit__(self, *exc) -> None:
        pass


def _us(cpu: float | None, n: int) -> str:
    return "-" if cpu is None else f"{cpu / n * 1e6:.1f}"


class Target:
    """One exchange + bound queue on one broker (created with pika, removed at the end)."""

    def __init__(self, url: str, durable_queue: bool = False):
        import pika

        self.url = url
        self.exchange = f"spark-amqp-bench.sink.{uuid.uuid4().hex[:8]}"
        self.queue = self.exchange + ".q"
        self.routing_key = "bench"
        self._conn = pika.BlockingConnection(pika.URLParameters(url))
        ch = self._conn.channel()
        ch.exchange_declare(self.exchange, "direct", durable=False, auto_delete=False)
        ch.queue_declare(self.queue, durable=durable_queue)
        ch.queue_bind(self.queue, self.exchange, self.routing_key)
        self.ch = ch

    def depth(self) -> int:
        return self.ch.queue_declare(self.queue, passive=True).method.message_count

    def wait_depth(self, n: int, timeout: float = 600.0) -> float:
        """Poll until the queue holds ``n`` messages; return the monotonic time it did."""
        deadline = time.monotonic() + timeout
        while True:
            d = self.depth()
            if d >= n:
                return time.monotonic()
            if time.monotonic() > deadline:
                raise TimeoutError(f"queue holds {d} of {n} messages after {timeout} s")
            time.sleep(0.02)

    def purge(self) -> None:
        self.ch.queue_purge(self.queue)

    def close(self) -> None:
        try:
            self.ch.queue_delete(self.queue)
            self.ch.exchange_delete(self.exchange)
        finally:
            self._conn.close()


def bench_pika_unconfirmed(t: Target, rows: int, size: int, broker_pid) -> dict:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(t.url))
    ch = conn.channel()
    bodies = [_body(i, size) for i in range(rows)]
    with CpuMeter(broker_pid, None) as cpu:
        c0 = time.process_time()
        t0 = time.monotonic()
        for i, body in enumerate(bodies):
            ch.basic_publish(t.exchange, t.routing_key, body,
                             pika.BasicProperties(delivery_mode=2, message_id=f"pika:{i}"))
        t1 = time.monotonic()
        cpu.publisher = time.process_time() - c0
        t2 = t.wait_depth(rows)
        cpu.stop()
    conn.close()
    return {"loop": rows / (t1 - t0), "enqueued": rows / (t2 - t0), "seconds": t2 - t0,
            "broker_cpu": cpu.broker, "publisher_cpu": cpu.publisher}


def bench_pika_confirmed(t: Target, rows: int, size: int) -> dict:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(t.url))
    ch = conn.channel()
    ch.confirm_delivery()
    t0 = time.monotonic()
    for i in range(rows):
        ch.basic_publish(t.exchange, t.routing_key, _body(i, size),
                         pika.BasicProperties(delivery_mode=2, message_id=f"pika-c:{i}"))
    t1 = time.monotonic()
    conn.close()
    return {"rate": rows / (t1 - t0), "seconds": t1 - t0, "rows": rows}


def _client_worker(url: str, exchange: str, routing_key: str, start: int, n: int, size: int,
                   confirm: bool, delivery_mode: int, go, done, leave) -> None:
    """One 'client alone' publisher process: builds its messages, waits for ``go``, publishes
    them (with confirms: through the sink's TaskPublisher), reports (seconds, cpu seconds) on
    ``done`` and keeps the connection open until ``leave`` (so that unconfirmed publishes still
    in the socket buffers are not cut off by closing)."""
    from spark_amqp.client import connect
    from spark_amqp.protocol import BasicProperties
    from spark_amqp.spark.sink.options import parse_sink_options
    from spark_amqp.spark.sink.publish import TaskPublisher

    msgs = [(_body(i, size), exchange, routing_key,
             BasicProperties(delivery_mode=delivery_mode, message_id=f"c:{i}"), False)
            for i in range(start, start + n)]
    try:
        if confirm:
            opts = parse_sink_options({"uri": url, "exchange": exchange,
                                       "routingkey": routing_key,
                                       "maxinflight": str(SINK_WINDOW)})
            with TaskPublisher(opts, f"bench client {start}") as pub:
                pub.open()  # connect before the clock starts, as the other contenders do
                go.wait()
                c0, t0 = time.process_time(), time.monotonic()
                for i in range(0, n, 1000):
                    pub.publish(msgs[i:i + 1000])
                pub.finish()
                done.put((time.monotonic() - t0, time.process_time() - c0))
        else:
            with connect(url) as conn:
                ch = conn.channel()
                go.wait()
                c0, t0 = time.process_time(), time.monotonic()
                for i in range(0, n, 1000):
                    ch.publish_batch(msgs[i:i + 1000])
                done.put((time.monotonic() - t0, time.process_time() - c0))
                leave.wait(600)
    except BaseException as exc:  # report instead of hanging the parent
        done.put(exc)
        raise


def bench_client(t: Target, rows: int, size: int, processes: int, confirm: bool,
                 delivery_mode: int, broker_pid) -> dict:
    """``processes`` publisher processes (one connection each) share ``rows``; timed from the
    start signal until every message is confirmed (``confirm``) or enqueued."""
    ctx = multiprocessing.get_context("spawn")
    go, leave, done = ctx.Event(), ctx.Event(), ctx.Queue()
    per = [rows // processes + (k < rows % processes) for k in range(processes)]
    starts = [sum(per[:k]) for k in range(processes)]
    procs = [ctx.Process(target=_client_worker, daemon=True,
                         args=(t.url, t.exchange, t.routing_key, starts[k], per[k], size,
                               confirm, delivery_mode, go, done, leave))
             for k in range(processes)]
    for p in procs:
        p.start()
    try:
        time.sleep(0.5)  # let the workers build their messages and connect
        with CpuMeter(broker_pid, None) as cpu:
            t0 = time.monotonic()
            go.set()
            results = [done.get(timeout=600) for _ in procs]
            for r in results:
                if isinstance(r, BaseException):
                    raise RuntimeError(f"client worker failed: {r!r}") from r
            t1 = t.wait_depth(rows) if not confirm else time.monotonic()
            cpu.stop()
        cpu.publisher = sum(r[1] for r in results)
    finally:
        leave.set()
        for p in procs:
            p.join(30)
    if confirm and t.depth() < rows:
        raise AssertionError(f"client: all confirmed but the queue holds {t.depth()} of {rows}")
    return {"rate": rows / (t1 - t0), "seconds": t1 - t0, "broker_cpu": cpu.broker,
            "publisher_cpu": cpu.publisher}


def make_spark(partitions: int):
    return local_spark("spark-amqp-bench-sink", **{
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.sql.execution.arrow.maxRecordsPerBatch": "10000"})


def bench_sink(spark, t: Target, rows: int, size: int, partitions: int, broker_pid) -> dict:
    from pyspark.sql import functions as F

    df = (spark.range(rows, numPartitions=partitions)
          .select(F.rpad(F.col("id").cast("string"), size, "x").cast("binary").alias("body"))
          .cache())
    df.count()
    # warm-up (not timed): the first Python data source write of a session starts the Python
    # workers and imports pyspark/pyarrow in them, which takes seconds
    (df.limit(1000).write.format("amqp").option("uri", t.url).option("exchange", t.exchange)
     .option("routingKey", t.routing_key).mode("append").save())
    t.wait_depth(1000)
    t.purge()
    with CpuMeter(broker_pid, os.getpid()) as cpu:
        t0 = time.monotonic()
        (df.write.format("amqp").option("uri", t.url).option("exchange", t.exchange)
         .option("routingKey", t.routing_key).mode("append").save())
        t1 = time.monotonic()
        cpu.stop()
    depth = t.depth()
    df.unpersist()
    if depth < rows:
        raise AssertionError(f"sink: save() returned but the queue holds {depth} of {rows}")
    return {"rate": rows / (t1 - t0), "seconds": t1 - t0, "broker_cpu": cpu.broker,
            "publisher_cpu": cpu.publisher}


def bench_stream_sinks(spark, url: str, stream_url: str, rows: int, size: int, partitions: int,
                       broker_pid) -> tuple:
    """The 0-9-1 sink (option ``stream``: default exchange, routing key = the stream) and the
    stream-protocol sink with ``producerName`` (deduplication on) writing the same DataFrame
    into the same new stream, one after the other, each timed from ``save()`` to its return
    (every message confirmed), after an untimed warm-up write of each. Returns the two result
    dicts. Raises AssertionError when the stream-protocol producers' stored sequences do not
    account for every row."""
    from pyspark.sql import functions as F

    from ..client.stream import connect as stream_connect

    name = f"spark-amqp-bench.sink-stream.{uuid.uuid4().hex[:8]}"
    df = (spark.range(rows, numPartitions=partitions)
          .select(F.rpad(F.col("id").cast("string"), size, "x").cast("binary").alias("body"))
          .cache())
    df.count()
    out = []
    with stream_connect(stream_url) as client:
        client.create_stream(name)
        try:
            for label, opts in (("0-9-1", {"uri": url}),
                                ("stream", {"uri": stream_url, "producerName": "bench"})):
                warm = dict(opts, producerName="warm") if "producerName" in opts else opts
                w = df.limit(1000).write.format("amqp").option("stream", name).mode("append")
                for k, v in warm.items():
                    w = w.option(k, v)
                w.save()
                with CpuMeter(broker_pid, os.getpid()) as cpu:
                    t0 = time.monotonic()
                    w = df.write.format("amqp").option("stream", name).mode("append")
                    for k, v in opts.items():
                        w = w.option(k, v)
                    w.save()
                    t1 = time.monotonic()
                    cpu.stop()
                out.append({"rate": rows / (t1 - t0), "seconds": t1 - t0,
                            "broker_cpu": cpu.broker, "publisher_cpu": cpu.publisher})
            # batch 0: a partition's last id is its row count (row + 1)
            stored = sum(client.query_publisher_sequence(f"bench-{p}", name)
                         for p in range(partitions))
            if stored != rows:
                raise AssertionError(f"stream sink: the producers stored {stored} of {rows} rows")
        finally:
            client.delete_stream(name, missing_ok=True)
            df.unpersist()
    return tuple(out)


def run_stream_rows(name: str, url: str, stream_url: str, args, spark,
                    broker_pid: int | None = None) -> None:
    """The rows of the sink into a stream: over 0-9-1 and over the stream protocol with
    ``producerName`` (issue 39's target: the latter >= 2x the former)."""
    rows, size, parts = args.rows, args.body_size, args.partitions
    if broker_pid is None:
        broker_pid = _rabbitmq_pid(url)
    print(f"\n== {name} ({url.split('@')[-1]}, stream port {stream_url.split('@')[-1]}): "
          f"{rows:,} rows x {size} B into one stream ==", flush=True)
    a, b = bench_stream_sinks(spark, url, stream_url, rows, size, parts, broker_pid)
    _row(f"Spark amqp sink over 0-9-1 into a stream ({parts} partitions)", a["rate"], rows, a,
         f"   ({a['seconds']:.1f} s)")
    _row(f"Spark sink, stream protocol, producerName ({parts} partitions)", b["rate"], rows, b,
         f"   ({b['seconds']:.1f} s)")
    print(f"=> stream protocol with deduplication / 0-9-1 sink into the same stream = "
          f"{b['rate'] / a['rate']:.2f}x (target >= 2x)", flush=True)


def _row(label: str, rate: float, n: int, r: dict, extra: str = "") -> None:
    print(f"{label:<58} {rate:>9,.0f} msg/s   broker CPU {_us(r.get('broker_cpu'), n):>6} µs/msg"
          f"   publisher CPU {_us(r.get('publisher_cpu'), n):>6} µs/msg{extra}", flush=True)


def run_broker(name: str, url: str, args, spark, broker_pid: int | None = None) -> None:
    t = Target(url, durable_queue=args.durable_queue)
    rows, size, parts = args.rows, args.body_size, args.partitions
    if broker_pid is None:
        broker_pid = _rabbitmq_pid(url)
    print(f"\n== {name} ({url.split('@')[-1]}): {rows:,} rows x {size} B, message_id, "
          f"direct exchange -> 1 {'durable' if args.durable_queue else 'non-durable'} queue ==",
          flush=True)
    try:
        r = bench_pika_unconfirmed(t, rows, size, broker_pid)
        _row("pika, no confirms, persistent (publish loop)", r["loop"], rows, r,
             f"   ({r['enqueued']:,.0f} msg/s until all enqueued)")
        base = r["loop"]
        t.purge()
        c = bench_pika_confirmed(t, min(args.confirm_rows, rows), size)
        _row(f"pika, per-message confirms ({c['rows']:,} rows)", c["rate"], c["rows"], {})
        t.purge()
        if not args.skip_client:
            for label, confirm, dm in (
                    (f"client alone, confirms on, persistent ({parts} conn.)", True, 2),
                    (f"client alone, confirms on, transient ({parts} conn.)", True, 1),
                    (f"client alone, no confirms, persistent ({parts} conn.)", False, 2)):
                cl = bench_client(t, rows, size, parts, confirm, dm, broker_pid)
                _row(label, cl["rate"], rows, cl)
                t.purge()
        s = bench_sink(spark, t, rows, size, parts, broker_pid)
        _row(f"Spark amqp sink, confirms on, persistent ({parts} partitions)", s["rate"], rows, s,
             f"   ({s['seconds']:.1f} s)")
        print(f"=> sink / pika unconfirmed publish loop = {s['rate'] / base:.2f}x "
              f"(target >= 2x); sink / pika per-message confirms = {s['rate'] / c['rate']:.1f}x",
              flush=True)
        t.purge()
    finally:
        t.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m spark_amqp.bench.sink", description=__doc__.split("\n\n")[0])
    p.add_argument("--broker", choices=("rabbitmq", "embedded", "both"), default="both")
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--body-size", type=int, default=200)
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--confirm-rows", type=int, default=20_000,
                   help="rows for pika's per-message confirms (slow)")
    p.add_argument("--skip-client", action="store_true",
                   help="skip the client-alone (no Spark) rows")
    p.add_argument("--durable-queue", action="store_true",
                   help="declare the queue durable (RabbitMQ then writes persistent messages "
                        "to disk before confirming them)")
    p.add_argument("--stream", choices=("with", "skip", "only"), default="with",
                   help="the rows of the sink into a stream, over 0-9-1 and over the stream "
                        "protocol with producerName: with the others (default), skip, only")
    args = p.parse_args(argv)
    spark = make_spark(args.partitions)
    try:
        if args.broker in ("rabbitmq", "both"):
            if args.stream != "only":
                run_broker("RabbitMQ", RABBITMQ_URL, args, spark)
            if args.stream != "skip":
                run_stream_rows("RabbitMQ", RABBITMQ_URL, RABBITMQ_STREAM_URL, args, spark)
        if args.broker in ("embedded", "both"):
            # in its own process, as RabbitMQ runs in its own: in this process it would share
            # the GIL with the pika loop (halving pika's rate) but not with the sink's workers
            with BrokerProcess() as broker:
                if args.stream != "only":
                    run_broker("embedded broker", broker.url, args, spark, broker.pid)
                if args.stream != "skip":
                    run_stream_rows("embedded broker", broker.url, broker.stream_url, args,
                                    spark, broker.pid)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
