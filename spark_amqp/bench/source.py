"""Benchmark of the ``amqp`` streaming source, side by side with its two baselines, same run.

``python -m spark_amqp.bench.source [--broker embedded|rabbitmq|both] [--messages 500000]
[--body-size 200] [--max-per-trigger 100000] [--prefetch N] [--per-partition 50000] [--cpu]
[--queue-type classic|quorum] [--url amqp://...] [--max-bytes-per-trigger N]
[--max-buffered-bytes N] [--inline-bytes N]``

Large messages (issue 19): ``--body-size 262144`` (any body of 64 KiB or more) runs the source
with its *default* options (the byte limits ``maxBytesPerTrigger``/``maxBytesPerPartition``/
``maxBufferedBytes``; no ``maxMessagesPerTrigger`` unless given), fills 256 MiB by default
(``--messages``), and the summary adds MB/s (bodies) and the source runner's peak RSS and
the driver JVM heap (``bench/memory.py``). Target: the source >= 1.0x the pika loop in MB/s
with the runner's peak RSS <= 512 MiB.

For each broker a unique queue (``--queue-type``: a non-durable classic queue by default, or
a quorum queue) is filled with ``--messages`` bodies of ``--body-size`` bytes (no properties),
then drained by, in turn:

- **pika loop** (the raw client rate): ``basic_qos(1000)``, ``basic_consume`` with a callback,
  manual ``basic_ack(multiple=True)`` every 100 messages, until the queue is empty.
- **amqp source**: ``spark.readStream.format("amqp")`` with ``maxMessagesPerTrigger`` /
  ``prefetch`` / ``maxMessagesPerPartition`` as given (``prefetch`` left to the source's
  default for that trigger size unless ``--prefetch`` is given), ``trigger(availableNow=True)`` into the
  ``noop`` sink; timed from ``start()`` to termination (query start-up included), plus the rate
  over the micro-batches alone (sum of ``triggerExecution``).
- **client alone**: the source's driver consumer without Spark (same client, raw-mode
  channel, prefetch and consumers; ack every ``--max-per-trigger`` messages, as the source
  acks once per micro-batch): what the broker delivers to that setup, the source's bound.
- **ceiling**: a synthetic Python streaming data source with the same schema, the same batch
  and partition sizes and Arrow batches of the same rows, generated on the executors with no
  broker at all: what Spark itself can take on this machine.

With ``--streams 1,2`` each broker also gets the stream-mode rows (issue 13): ``--messages``
bodies spread over 1 (then 2) stream queues, read by

- **pika stream loop**: pika consuming each stream from ``x-stream-offset: first`` (prefetch
  1000, ack every 100), the streams one after the other;
- **stream source**: ``option("stream", ...)``, ``startingOffsets=earliest``,
  ``trigger(availableNow=True)`` into ``noop`` (executors read their ranges);
- **driver bytes**: the stream reader's driver calls replayed in this process (the same
  ``prepareForTriggerAvailableNow``/``latestOffset``/``partitions`` per trigger), counting
  the bytes its probe connection received: printed per trigger and as a share of the body
  bytes the executors read (target < 1%);

and compared with the classic-queue source of the same run (``--messages`` in one queue).
With ``--cpu`` the pika stream loop and the stream source get their CPU-seconds too.
Targets (issue 13): on the embedded broker the stream source >= 1.5x the pika stream loop
and >= 1.0x the classic-queue source; on RabbitMQ >= 1.0x the pika stream loop.

The queue is refilled before each contender. The embedded broker runs in a subprocess (its own
interpreter, like RabbitMQ). Rates are rows (messages) per second. Targets (issue 4): the
source >= 1.5x the pika loop and >= 0.5x the ceiling.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from dataclasses import dataclass

from .common import BrokerProcess, fill_queue, local_spark
from .cpu import CpuAccount
from .memory import QueryMemory

from ..client.uri import DEFAULT_URI as DEFAULT_URL  # noqa: E402


# --------------------------------------------------------------------------- brokers

# --------------------------------------------------------------------------- contenders

def pika_loop(url: str, queue: str, n: int) -> float:
    """Seconds for a pika manual-ack consume loop to take ``n`` messages."""
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=1000)
    state = {"n": 0}

    def on_msg(chan, method, props, body):
        state["n"] += 1
        if state["n"] % 100 == 0 or state["n"] == n:
            chan.basic_ack(method.delivery_tag, multiple=True)
        if state["n"] >= n:
            chan.stop_consuming()

    t0 = time.perf_counter()
    ch.basic_consume(queue, on_msg, auto_ack=False)
    ch.start_consuming()
    dt = time.perf_counter() - t0
    conn.close()
    return dt


def client_alone(url: str, queue: str, n: int, prefetch: int, ack_every: int) -> float:
    """Seconds for the source's own driver consumer, with no Spark, to take ``n`` messages:
    the source's :class:`DriverConsumer` (raw-mode channel, per-consumer prefetch and
    consumers from ``SourceOptions``) and its :class:`QueueBuffer` bookkeeping, acking
    ``multiple`` once per ``ack_every`` messages as the source acks once per micro-batch.
    What the broker delivers to that consumer setup: the source's upper bound there."""
    from ..spark.source.queues.options import parse_source_options
    from ..spark.source.queues.buffer import QueueBuffer
    from ..spark.source.queues.consumer import DriverConsumer

    consumer = DriverConsumer(parse_source_options(
        {"uri": url, "queue": queue, "prefetch": str(prefetch)}))
    buf = QueueBuffer(queue)
    t0 = time.perf_counter()
    consumer.open()
    try:
        while buf.acked < n:
            buf.add(consumer.drain(queue, 5.0))
            buf.plan(buf.unplanned)
            if buf.planned - buf.acked >= ack_every or buf.planned >= n:
                consumer.ack(queue, buf.ack_upto(buf.planned))
        return time.perf_counter() - t0
    finally:
        consumer.close()


@dataclass
class SparkRun:
    wall: float          # start() .. termination, seconds
    batches_s: float     # sum of triggerExecution, seconds
    rows: int
    batches: int
    phases: dict        # durationMs summed per phase over the batches with rows

    def phase_text(self) -> str:
        keep = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")
        return ", ".join(f"{k} {self.phases.get(k, 0) / 1e3:.1f}s" for k in keep)


def _run_query(spark, df, tmpdir: str) -> SparkRun:
    ck = os.path.join(tmpdir, uuid.uuid4().hex)
    t0 = time.perf_counter()
    q = (df.writeStream.format("noop").trigger(availableNow=True)
         .option("checkpointLocation", ck).start())
    q.awaitTermination()
    wall = time.perf_counter() - t0
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    prog = [p for p in q.recentProgress if p["numInputRows"]]
    phases: dict = {}
    for p in prog:
        for k, v in p["durationMs"].items():
            phases[k] = phases.get(k, 0) + v
    return SparkRun(wall, sum(p["durationMs"].get("triggerExecution", 0) for p in prog) / 1e3,
                    sum(p["numInputRows"] for p in prog), len(prog), phases)


#: command-line argument -> the source option it sets (when given)
_SOURCE_OPTION_ARGS = (("max_per_trigger", "maxMessagesPerTrigger"),
                       ("per_partition", "maxMessagesPerPartition"), ("prefetch", "prefetch"),
                       ("inline_bytes", "maxInlineBytesPerTrigger"),
                       ("max_bytes_per_trigger", "maxBytesPerTrigger"),
                       ("max_buffered_bytes", "maxBufferedBytes"))


def source_run(spark, url, queue, args, tmpdir) -> SparkRun:
    r = spark.readStream.format("amqp").option("uri", url).option("queue", queue)
    for arg, option in _SOURCE_OPTION_ARGS:   # options left unset keep the source's defaults
        value = getattr(args, arg)
        if value is not None:
            r = r.option(option, value)
    df = r.load()
    return _run_query(spark, df, tmpdir)


def _trigger_rows(args) -> int:
    """Messages per batch the source takes: --max-per-trigger, else what the default
    maxBytesPerTrigger holds (frames ~ body + 60 B)."""
    from ..spark.source.queues.options import DEFAULT_MAX_BYTES_PER_TRIGGER

    cap = args.max_bytes_per_trigger or DEFAULT_MAX_BYTES_PER_TRIGGER
    by_bytes = max(1, cap // (args.body_size + 60))
    if args.max_per_trigger is None:
        return by_bytes
    return min(args.max_per_trigger, by_bytes)


def _partition_rows(args) -> int:
    from ..spark.source.queues.options import DEFAULT_MAX_BYTES_PER_PARTITION, DEFAULT_MAX_PER_PARTITION

    by_bytes = max(1, DEFAULT_MAX_BYTES_PER_PARTITION // (args.body_size + 60))
    return min(args.per_partition or DEFAULT_MAX_PER_PARTITION, by_bytes)


def pika_stream_loop(url: str, streams: list, per_stream: int) -> float:
    """Seconds for pika to read ``per_stream`` messages from each stream, from ``first``."""
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    t0 = time.perf_counter()
    for s in streams:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=1000)
        state = {"n": 0}

        def on_msg(chan, method, props, body, state=state):
            state["n"] += 1
            if state["n"] % 100 == 0 or state["n"] == per_stream:
                chan.basic_ack(method.delivery_tag, multiple=True)
            if state["n"] >= per_stream:
                chan.stop_consuming()

        ch.basic_consume(s, on_msg, arguments={"x-stream-offset": "first"})
        ch.start_consuming()
        ch.close()
    dt = time.perf_counter() - t0
    conn.close()
    return dt


def driver_bytes(url: str, streams: list, args) -> tuple[int, int]:
    """(bytes, triggers): what the stream reader's driver receives over a Trigger.AvailableNow
    run over ``streams`` (its calls replayed here, no Spark: ``initialOffset``,
    ``prepareForTriggerAvailableNow``, then ``latestOffset`` + ``partitions`` per trigger
    until the end stops moving, as Spark calls them), and the number of triggers with data."""
    from ..spark.source.streams.options import parse_stream_options
    from ..spark.source.streams.micro_batch_stream import AmqpStreamMicroBatchStream

    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    opts = {"uri": url, "stream": ",".join(streams), "startingOffsets": "earliest"}
    if args.max_per_trigger:
        opts["maxMessagesPerTrigger"] = str(args.max_per_trigger)
    r = AmqpStreamMicroBatchStream(parse_stream_options(opts))
    limit = ReadMaxRows(args.max_per_trigger) if args.max_per_trigger else ReadAllAvailable()
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    triggers = 0
    while True:
        end = r.latestOffset(start, limit)
        if end == start:
            break
        r.partitions(start, end)
        triggers += 1
        start = end
    got = r.offsets.current_probe.bytes_received
    r.stop()
    return got, triggers


def stream_contenders(spark, url, b: str, k: int, n: int, body: bytes, args, tmpdir):
    """(pika rate, stream source SparkRun, driver bytes, triggers, body bytes read) for ``n``
    messages over ``k`` new streams (deleted afterwards); ``b`` names the broker."""
    from ..client import connect

    streams = [f"bench-stream-{uuid.uuid4().hex[:8]}" for _ in range(k)]
    try:
        with connect(url) as c:
            for s in streams:
                c.channel().queue_declare(s, durable=True,
                                          arguments={"x-queue-type": "stream"})
        per = n // k
        for s in streams:
            fill_queue(url, s, per, body)
        with CpuAccount() as acct:
            t_pika = pika_stream_loop(url, streams, per)
        print(f"[{b}] pika stream loop ({k} streams): {per * k / t_pika:,.0f} msg/s", flush=True)
        if args.cpu:
            print(acct.report(f"the pika stream loop ({b}, {k} streams)"), flush=True)
        r = (spark.readStream.format("amqp").option("uri", url)
             .option("stream", ",".join(streams)).option("startingOffsets", "earliest"))
        if args.max_per_trigger:
            r = r.option("maxMessagesPerTrigger", args.max_per_trigger)
        if args.per_partition:
            r = r.option("maxMessagesPerPartition", args.per_partition)
        if args.prefetch:
            r = r.option("prefetch", args.prefetch)
        with CpuAccount() as acct:
            st = _run_query(spark, r.load(), tmpdir)
        if st.rows != per * k:
            print(f"[{b}] WARNING: stream source read {st.rows} rows, expected {per * k}")
        print(f"[{b}] stream source ({k} streams): {st.rows / st.wall:,.0f} "
              f"rows/s wall ({st.batches} batches; {st.phase_text()})", flush=True)
        if args.cpu:
            print(acct.report(f"the stream source ({b}, {k} streams)"), flush=True)
        drv, triggers = driver_bytes(url, streams, args)
        print(f"[{b}] driver received {drv:,} bytes in {triggers} trigger(s) for "
              f"{per * k * len(body):,} body bytes read", flush=True)
        return per * k / t_pika, st, drv, triggers, per * k * len(body)
    finally:
        try:
            with connect(url) as c:
                for s in streams:
                    c.channel().queue_delete(s)
        except Exception:  # noqa: BLE001
            pass


def ceiling_run(spark, args, tmpdir) -> SparkRun:
    spark.dataSource.register(_synthetic_source_class())
    df = (spark.readStream.format("amqp_synthetic").option("rows", args.messages)
          .option("bodysize", args.body_size).option("pertrigger", _trigger_rows(args))
          .option("perpartition", _partition_rows(args)).load())
    return _run_query(spark, df, tmpdir)


def _synthetic_source_class():
    """A broker-less streaming source with the amqp schema (defined lazily: imports pyspark)."""
    from dataclasses import dataclass as _dc

    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadMaxRows, SupportsTriggerAvailableNow

    from ..spark import schema as S

    @_dc
    class Part(InputPartition):
        start: int
        n: int
        body_size: int

    class Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, o):
            self.rows, self.per_trigger = int(o["rows"]), int(o["pertrigger"])
            self.per_part, self.body_size = int(o["perpartition"]), int(o["bodysize"])

        def initialOffset(self):
            return {"n": 0}

        def getDefaultReadLimit(self):
            return ReadMaxRows(self.per_trigger)

        def prepareForTriggerAvailableNow(self):
            pass

        def latestOffset(self, start=None, limit=None):
            cur = start["n"]
            cap = limit.max_rows if isinstance(limit, ReadMaxRows) else self.rows
            return {"n": min(self.rows, cur + cap)}

        def partitions(self, start, end):
            s, e = start["n"], end["n"]
            return [Part(i, min(self.per_part, e - i), self.body_size)
                    for i in range(s, e, self.per_part)]

        def read(self, p):
            from spark_amqp.spark.source.arrow import Const, PackedColumns, to_record_batches

            cols = {S.BODY: [b"x" * p.body_size] * p.n, S.EXCHANGE: Const(""),
                    S.ROUTING_KEY: Const("q"), S.REDELIVERED: Const(False),
                    S.DELIVERY_COUNT: Const(None)}
            for c in S.PROPERTY_COLUMNS:
                cols[c] = Const(None)
            return to_record_batches(PackedColumns("q", p.start, p.n, cols))

    class Synthetic(DataSource):
        @classmethod
        def name(cls):
            return "amqp_synthetic"

        def schema(self):
            return S.source_schema()

        def streamReader(self, schema):
            return Reader(self.options)

    return Synthetic


# --------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", choices=["embedded", "rabbitmq", "both"], default="both")
    ap.add_argument("--url", default=os.environ.get("SPARK_AMQP_RABBITMQ_URL", DEFAULT_URL))
    ap.add_argument("--messages", type=int, default=None,
                    help="default 500,000; 256 MiB worth with --body-size >= 64 KiB")
    ap.add_argument("--body-size", type=int, default=200)
    ap.add_argument("--max-per-trigger", type=int, default=None,
                    help="maxMessagesPerTrigger (default 100,000; unset, i.e. the byte "
                         "limits, with --body-size >= 64 KiB)")
    ap.add_argument("--prefetch", type=int, default=None,
                    help="source prefetch per queue (default: the source's default for "
                         "--max-per-trigger)")
    ap.add_argument("--per-partition", type=int, default=None,
                    help="maxMessagesPerPartition (default: the source's, 50,000)")
    ap.add_argument("--max-bytes-per-trigger", type=int, default=None,
                    help="the source's maxBytesPerTrigger (default 16 MiB)")
    ap.add_argument("--max-buffered-bytes", type=int, default=None,
                    help="the source's maxBufferedBytes (default 32 MiB)")
    ap.add_argument("--inline-bytes", type=int, default=None,
                    help="the source's maxInlineBytesPerTrigger (default 512 KiB; 1 GiB ships "
                         "every partition inside its task, as before issue 19's route)")
    ap.add_argument("--queue-type", choices=["classic", "quorum"], default="classic",
                    help="the benchmark queue's x-queue-type (quorum: durable, RabbitMQ docs/"
                         "quorum-queues.md); every contender drains the same kind of queue")
    ap.add_argument("--streams", default="",
                    help="comma-separated stream counts for the stream-mode rows, e.g. 1,2 "
                         "(default: none)")
    ap.add_argument("--cpu", action="store_true",
                    help="also print the CPU-seconds of each kind of process (Spark JVM, source "
                         "runner, Python workers, broker, this process) during each contender "
                         "(Linux /proc; bench/cpu.py)")
    args = ap.parse_args(argv)
    large = args.body_size >= 64 * 1024
    if args.messages is None:
        args.messages = max(1, (256 << 20) // args.body_size) if large else 500_000
    if args.max_per_trigger is None and not large:
        args.max_per_trigger = 100_000
    if args.prefetch is None:
        from ..spark.source.queues.options import default_prefetch

        prefetch = default_prefetch(args.max_per_trigger)
        prefetch_text = f"{prefetch} (source default)"
    else:
        prefetch = args.prefetch
        prefetch_text = str(args.prefetch)

    import tempfile

    spark = local_spark("bench-source")
    body = b"x" * args.body_size
    n = args.messages
    brokers = ["embedded", "rabbitmq"] if args.broker == "both" else [args.broker]
    results = []
    stream_rows: list = []
    with tempfile.TemporaryDirectory() as tmp:
        # warm up Spark and the Python workers once (first query pays JVM/worker start-up);
        # two partitions so that both local[2] Python workers are started: with one, the
        # measured ceiling paid the second worker's start-up (~1 s) and the source did not
        warm = min(n, 2 * _partition_rows(args))
        ceiling_run(spark, argparse.Namespace(**{**vars(args), "messages": warm,
                                                 "max_per_trigger": warm}), tmp)
        with CpuAccount() as acct:
            ceiling = ceiling_run(spark, args, tmp)
        print(f"ceiling (synthetic source, no broker): {n / ceiling.wall:,.0f} rows/s wall, "
              f"{n / ceiling.batches_s:,.0f} rows/s in batches ({ceiling.batches} batches; "
              f"{ceiling.phase_text()})",
              flush=True)
        if args.cpu:
            print(acct.report("the ceiling"), flush=True)
        for b in brokers:
            proc = BrokerProcess() if b == "embedded" else None
            url = proc.url if proc is not None else args.url
            queue = f"bench-source-{uuid.uuid4().hex[:8]}"
            try:
                from ..client import connect

                with connect(url) as c:
                    quorum = args.queue_type == "quorum"
                    c.channel().queue_declare(
                        queue, durable=quorum,
                        arguments={"x-queue-type": "quorum"} if quorum else None)
                fill_queue(url, queue, n, body)
                with CpuAccount() as acct:
                    t_pika = pika_loop(url, queue, n)
                print(f"[{b}] pika loop: {n / t_pika:,.0f} msg/s", flush=True)
                if args.cpu:
                    print(acct.report(f"the pika loop ({b})"), flush=True)
                fill_queue(url, queue, n, body)
                with CpuAccount() as acct:
                    t_alone = client_alone(url, queue, n, prefetch, _trigger_rows(args))
                print(f"[{b}] client alone (the source's consumer, no Spark): "
                      f"{n / t_alone:,.0f} msg/s", flush=True)
                if args.cpu:
                    print(acct.report(f"the client alone ({b})"), flush=True)
                fill_queue(url, queue, n, body)
                with CpuAccount() as acct, QueryMemory(spark) as mem:
                    src = source_run(spark, url, queue, args, tmp)
                if src.rows != n:
                    print(f"[{b}] WARNING: source read {src.rows} rows, expected {n}")
                print(f"[{b}] amqp source: {n / src.wall:,.0f} rows/s wall, "
                      f"{n / src.batches_s:,.0f} rows/s in batches ({src.batches} batches; "
                      f"{src.phase_text()})",
                      flush=True)
                print(f"[{b}] amqp source memory: {mem.figures.text()}", flush=True)
                if args.cpu:
                    print(acct.report(f"the amqp source ({b})"), flush=True)
                results.append((b, n / t_pika, n / t_alone, src, ceiling, mem.figures))
                for k in [int(x) for x in args.streams.split(",") if x.strip()]:
                    stream_rows.append((b, k, *stream_contenders(spark, url, b, k, n, body,
                                                                 args, tmp)))
            finally:
                try:
                    with connect(url) as c:
                        c.channel().queue_delete(queue)
                except Exception:  # noqa: BLE001
                    pass
                if proc is not None:
                    proc.stop()
    spark.stop()

    print(f"\nqueue={args.queue_type} messages={n} body={args.body_size}B "
          f"maxMessagesPerTrigger={args.max_per_trigger or 'unset (maxBytesPerTrigger)'} "
          f"prefetch={prefetch_text} maxMessagesPerPartition={args.per_partition or 'default'}")
    print(f"{'broker':<10}{'pika loop':>12}{'client alone':>14}{'amqp source':>13}{'ceiling':>11}"
          f"{'src/pika':>10}{'src/ceil':>10}{'src/alone':>11}   (rows/s, wall incl. query start)")
    for b, pika_rate, alone_rate, src, ceil, _ in results:
        s, c = n / src.wall, n / ceil.wall
        print(f"{b:<10}{pika_rate:>12,.0f}{alone_rate:>14,.0f}{s:>13,.0f}{c:>11,.0f}"
              f"{s / pika_rate:>9.2f}x{s / c:>9.2f}x{s / alone_rate:>10.2f}x")
    mb = args.body_size / (1 << 20)
    print(f"{'broker':<10}{'pika loop':>12}{'client alone':>14}{'amqp source':>13}{'ceiling':>11}"
          f"{'src/pika':>10}{'runner RSS':>12}{'JVM heap':>10}   (MB/s of bodies; peak MiB)")
    for b, pika_rate, alone_rate, src, ceil, mem in results:
        s, c = n / src.wall, n / ceil.wall
        print(f"{b:<10}{pika_rate * mb:>12,.1f}{alone_rate * mb:>14,.1f}{s * mb:>13,.1f}"
              f"{c * mb:>11,.1f}{s / pika_rate:>9.2f}x{mem.runner_rss_peak / (1 << 20):>12,.0f}"
              f"{mem.jvm_heap_used_peak / (1 << 20):>10,.0f}")
    if large:
        print("targets: src/pika >= 1.00x in MB/s with the runner's peak RSS <= 512 MiB")
    else:
        print("targets: src/pika >= 1.50x, src/ceil >= 0.50x")
    if stream_rows:
        queue_rate = {b: n / src.wall for b, _, _, src, _, _ in results}
        print(f"\nstream mode: messages={n} body={args.body_size}B "
              f"maxMessagesPerTrigger={args.max_per_trigger} "
              f"maxMessagesPerPartition={args.per_partition}")
        print(f"{'broker':<10}{'streams':>8}{'pika loop':>12}{'stream src':>12}"
              f"{'queue src':>11}{'st/pika':>9}{'st/queue':>10}{'driver B/trigger':>18}"
              f"{'of read':>9}   (rows/s, wall incl. query start)")
        for b, k, pika_rate, st, drv, triggers, read_bytes in stream_rows:
            r = st.rows / st.wall
            print(f"{b:<10}{k:>8}{pika_rate:>12,.0f}{r:>12,.0f}{queue_rate[b]:>11,.0f}"
                  f"{r / pika_rate:>8.2f}x{r / queue_rate[b]:>9.2f}x"
                  f"{drv / max(triggers, 1):>18,.0f}{100 * drv / read_bytes:>8.2f}%")
        print("targets: embedded st/pika >= 1.50x and st/queue >= 1.00x; RabbitMQ st/pika >= "
              "1.00x; driver bytes < 1% of the bytes read ('of read': the driver's bytes over "
              "all triggers / the body bytes the executors read)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
