"""Benchmark of the ``amqp`` sink against pika, side by side in one run.

``python -m spark_amqp.bench.sink [--broker rabbitmq|embedded|both] [--rows 500000]
[--body-size 200] [--partitions 2] [--confirm-rows 20000]``

For each broker: a direct exchange with one bound queue (both non-durable, unique names,
deleted afterwards); every contender publishes ``--rows`` messages of ``--body-size`` bytes
with ``delivery_mode=2`` and a per-message ``message_id`` (what the sink sets by default) to
that exchange, and the queue is purged between contenders. Contenders:

1. **pika, no confirms** – a ``BlockingConnection`` loop of ``basic_publish``. Two figures:
   the rate of the publish loop itself, and the rate until the broker has enqueued them all
   (``queue.declare`` passive polling).
2. **pika, per-message confirms** – ``channel.confirm_delivery()`` then ``basic_publish``
   (each call waits for its ack); ``--confirm-rows`` messages (default 20,000) because it is
   slow; the rate is what matters.
3. **spark_amqp client, pipelined confirms** – one thread, ``publish_batch`` chunks of 1,000
   with ``max_in_flight`` 10,000, then ``wait_for_confirms`` (the sink's inner loop without
   Spark).
4. **Spark sink** – ``df.write.format("amqp").mode("append").save()`` of a cached DataFrame
   with ``--partitions`` partitions on ``local[2]``; every message confirmed when ``save()``
   returns. Timed from ``save()`` call to return, after an untimed 1,000-row warm-up write
   (Python worker start-up).

The target (issue 5) is the sink ≥ 2× pika's unconfirmed publish rate, with confirms on.
Figures depend on the machine: the broker, Spark's JVM, its Python workers and pika share the
cores (2 on the reference machine). Measured there (2026-11-21, quiet machine): RabbitMQ 3.10
itself ingests at most ~44k msg/s of these messages (200 B, persistent, message_id) *without*
confirms from our client's batched writes (~73k/s for 16 B transient ones), i.e. 2× pika's
~22k/s is RabbitMQ's own ceiling before Spark takes any CPU; with confirms a single client
connection gets ~24-34k/s. See the sink engineer's report for the runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

RABBITMQ_URL = os.environ.get("SPARK_AMQP_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")


def _body(i: int, size: int) -> bytes:
    b = str(i).encode()
    return b + b"x" * (size - len(b))


class Target:
    """One exchange + bound queue on one broker (created with pika, removed at the end)."""

    def __init__(self, url: str):
        import pika

        self.url = url
        self.exchange = f"spark-amqp-bench.sink.{uuid.uuid4().hex[:8]}"
        self.queue = self.exchange + ".q"
        self.routing_key = "bench"
        self._conn = pika.BlockingConnection(pika.URLParameters(url))
        ch = self._conn.channel()
        ch.exchange_declare(self.exchange, "direct", durable=False, auto_delete=False)
        ch.queue_declare(self.queue, durable=False)
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


def bench_pika_unconfirmed(t: Target, rows: int, size: int) -> dict:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(t.url))
    ch = conn.channel()
    bodies = [_body(i, size) for i in range(rows)]
    t0 = time.monotonic()
    for i, body in enumerate(bodies):
        ch.basic_publish(t.exchange, t.routing_key, body,
                         pika.BasicProperties(delivery_mode=2, message_id=f"pika:{i}"))
    t1 = time.monotonic()
    t2 = t.wait_depth(rows)
    conn.close()
    return {"loop": rows / (t1 - t0), "enqueued": rows / (t2 - t0), "seconds": t2 - t0}


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


def bench_client(t: Target, rows: int, size: int) -> dict:
    from spark_amqp.client import connect
    from spark_amqp.protocol import BasicProperties

    msgs = [(_body(i, size), t.exchange, t.routing_key,
             BasicProperties(delivery_mode=2, message_id=f"c:{i}"), False) for i in range(rows)]
    with connect(t.url) as conn:
        ch = conn.channel()
        ch.confirm_select()
        ch.max_in_flight = 10000
        t0 = time.monotonic()
        for i in range(0, rows, 1000):
            ch.publish_batch(msgs[i:i + 1000])
        ch.wait_for_confirms(timeout=600)
        t1 = time.monotonic()
    return {"rate": rows / (t1 - t0), "seconds": t1 - t0}


def make_spark(partitions: int):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_amqp

    spark = (SparkSession.builder.master("local[2]").appName("spark-amqp-bench-sink")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(partitions))
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_amqp.register(spark)
    return spark


def bench_sink(spark, t: Target, rows: int, size: int, partitions: int) -> dict:
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
    t0 = time.monotonic()
    (df.write.format("amqp").option("uri", t.url).option("exchange", t.exchange)
     .option("routingKey", t.routing_key).mode("append").save())
    t1 = time.monotonic()
    depth = t.depth()
    df.unpersist()
    if depth < rows:
        raise AssertionError(f"sink: save() returned but the queue holds {depth} of {rows}")
    return {"rate": rows / (t1 - t0), "seconds": t1 - t0}


def run_broker(name: str, url: str, args, spark) -> None:
    t = Target(url)
    rows, size = args.rows, args.body_size
    print(f"\n== {name} ({url.split('@')[-1]}): {rows:,} rows x {size} B, delivery_mode=2, "
          f"direct exchange -> 1 queue ==", flush=True)
    try:
        r = bench_pika_unconfirmed(t, rows, size)
        print(f"pika, no confirms:               {r['loop']:>9,.0f} msg/s publish loop, "
              f"{r['enqueued']:>9,.0f} msg/s until all enqueued", flush=True)
        base = r["loop"]
        t.purge()
        c = bench_pika_confirmed(t, min(args.confirm_rows, rows), size)
        print(f"pika, per-message confirms:      {c['rate']:>9,.0f} msg/s "
              f"({c['rows']:,} rows)", flush=True)
        t.purge()
        if not args.skip_client:
            cl = bench_client(t, rows, size)
            print(f"spark_amqp client, pipelined confirms (1 thread, no Spark): "
                  f"{cl['rate']:>9,.0f} msg/s", flush=True)
            t.purge()
        s = bench_sink(spark, t, rows, size, args.partitions)
        print(f"Spark amqp sink, confirms on ({args.partitions} partitions, local[2]): "
              f"{s['rate']:>9,.0f} msg/s ({s['seconds']:.1f} s)", flush=True)
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
                   help="skip the client-only (no Spark) figure")
    args = p.parse_args(argv)
    spark = make_spark(args.partitions)
    try:
        if args.broker in ("rabbitmq", "both"):
            run_broker("RabbitMQ", RABBITMQ_URL, args, spark)
        if args.broker in ("embedded", "both"):
            from spark_amqp import EmbeddedBroker

            with EmbeddedBroker() as broker:
                run_broker("embedded broker", broker.url, args, spark)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
