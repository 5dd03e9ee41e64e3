"""What partition data inside Spark's tasks costs: two broker-less synthetic streaming sources.

``python -m spark_amqp.bench.task_binary [--batches 16] [--partitions 4] [--per-partition 16]
[--body-size 262144] [--rounds 2]``

Before issue 19's served partitions (``maxInlineBytesPerTrigger``,
``spark/source/queues/partition_server.py``)
the ``amqp`` source in queue mode shipped each micro-batch's messages inside its
``InputPartition``s (the driver owns the consuming channel and acks after the commit, so the
data must come from the driver). The driver JVM holds the partitions and serialises each
into its task (Spark 4.3's ``DataSourceRDD`` keeps them in a transient field, so they are not
in the broadcast task binary; Spark warns "Stage N contains a task of very large size" above
1000 KiB). This benchmark runs, interleaved, ``Trigger.AvailableNow``
into ``noop`` (``local[2]``):

- **in partitions**: each partition carries its ``--per-partition`` bodies of ``--body-size``
  bytes as one ``bytes`` field (like the amqp source's frames); ``read`` slices them;
- **generated**: the same rows made on the executor, the partition carries nothing (the
  baseline: Spark's own cost for such batches);
- **served by the runner**: each partition carries a reference and ``read`` fetches the
  bytes from the source runner's
  :class:`spark_amqp.spark.source.queues.partition_server.PartitionServer`, as
  the amqp source does beyond ``maxInlineBytesPerTrigger`` (the route issue 19 added);
- **in partitions, half as many**: the same batch in ``--partitions // 2`` partitions.

Prints seconds and MB/s (bodies) per contender.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass

from .common import local_spark


def _source_class():
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadMaxRows, SupportsTriggerAvailableNow

    @dataclass
    class Part(InputPartition):
        n: int
        size: int
        data: object  # bytes, or a spark.source.queues.partition_server.FramesRef

    class Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, o):
            self.batches, self.parts = int(o["batches"]), int(o["parts"])
            self.n, self.size, self.carry = int(o["n"]), int(o["size"]), o["carry"]
            self.server = None

        def initialOffset(self):
            return {"b": 0}

        def getDefaultReadLimit(self):
            return ReadMaxRows(1)

        def prepareForTriggerAvailableNow(self):
            pass

        def latestOffset(self, start=None, limit=None):
            if self.server is not None:  # batches before start are committed
                self.server.release("s", {"q": start["b"] * self.parts}, "s")
            return {"b": min(self.batches, start["b"] + 1)}

        def partitions(self, start, end):
            data = b"x" * (self.n * self.size) if self.carry != "0" else b""
            if self.carry != "serve":
                return [Part(self.n, self.size, data) for _ in range(self.parts)]
            from spark_amqp.spark.source.queues.partition_server import PartitionServer

            if self.server is None:
                self.server = PartitionServer()
            b = start["b"] * self.parts
            return [Part(self.n, self.size, self.server.hold("s", "q", b + i, 1, [data]))
                    for i in range(self.parts)]

        def read(self, p):
            import pyarrow as pa

            if not isinstance(p.data, bytes):
                from spark_amqp.spark.source.queues.partition_server import fetch

                p.data = fetch(p.data)
            if p.data:
                mv = memoryview(p.data)
                bodies = [bytes(mv[k * p.size:(k + 1) * p.size]) for k in range(p.n)]
            else:
                bodies = [b"x" * p.size] * p.n
            yield pa.RecordBatch.from_arrays([pa.array(bodies, pa.binary())], names=["body"])

    class TaskBinarySource(DataSource):
        @classmethod
        def name(cls):
            return "amqp_bench_task_binary"

        def schema(self):
            return "body binary"

        def streamReader(self, schema):
            return Reader(self.options)

    return TaskBinarySource


def _run(spark, carry: str, parts: int, n: int, size: int, batches: int) -> float:
    df = (spark.readStream.format("amqp_bench_task_binary").option("batches", batches)
          .option("parts", parts).option("n", n).option("size", size)
          .option("carry", carry).load())
    t0 = time.perf_counter()
    q = (df.writeStream.format("noop").trigger(availableNow=True)
         .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-tb-")).start())
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=16)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--per-partition", type=int, default=16, help="bodies per partition")
    ap.add_argument("--body-size", type=int, default=256 * 1024)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args(argv)
    spark = local_spark("bench-task-binary")
    spark.dataSource.register(_source_class())
    _run(spark, "0", 2, 2, a.body_size, 2)  # warm-up: JVM, both Python workers
    mib = a.batches * a.partitions * a.per_partition * a.body_size / (1 << 20)
    half = max(1, a.partitions // 2)
    rows = [("in partitions", "1", a.partitions, a.per_partition),
            ("served by the runner", "serve", a.partitions, a.per_partition),
            ("generated", "0", a.partitions, a.per_partition),
            (f"in {half} partitions", "1", half, a.per_partition * a.partitions // half)]
    print(f"{a.batches} batches of {a.partitions} x {a.per_partition} x {a.body_size} B "
          f"({mib:.0f} MiB), noop sink, local[2]")
    for r in range(a.rounds):
        for name, carry, parts, n in rows:
            t = _run(spark, carry, parts, n, a.body_size, a.batches)
            print(f"round {r + 1}  {name:<22}{t:>8.1f} s{mib / t:>8.1f} MB/s", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
