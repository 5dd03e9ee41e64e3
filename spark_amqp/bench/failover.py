"""Failover through a real three-node RabbitMQ cluster, and throughput beside a single node.

``python -m spark_amqp.bench.failover [--runs 3] [--messages 12000] [--rate 1500]
[--drain 100000]`` (as root: the nodes run as the rabbitmq user; see
:mod:`spark_amqp.tools.rabbitmq_cluster`). Starts the three nodes (ports 5622/5632/5642), then:

1. **failover, client**: a consumer of this package's client (the cluster URI, addresses in
   order, so node 2 first) reads a quorum queue led by node 2 while a publisher writes
   ``--rate`` messages/s through node 4; ``rabbitmqctl stop_app`` of node 2; the time until a
   message published after the stop arrives through the reconnected consumer (reconnect loop:
   ``connect`` over the addresses, ``basic.consume``). The floor of any reader's failover.
2. **failover, queue mode**: the same with a queue-mode query (``maxMessagesPerTrigger`` 1000,
   trigger 500 ms, ``connectionTimeout`` 3 s) instead of the consumer: stop_app -> the first
   micro-batch holding a message published after the stop.
3. **failover, stream mode**: a stream-mode query (``maxMessagesPerTrigger`` 1000, trigger
   500 ms, ``connectionTimeout`` 3 s, addresses in order) of a stream led by node 2 (declared
   there), the publisher on node 4: stop_app of node 2 -> the first micro-batch holding a
   message published after the stop (the driver's tail probe and the executors' range reads
   reconnect to node 3; RabbitMQ elects a new stream leader meanwhile).
4. **throughput**: a ``Trigger.AvailableNow`` query drains ``--drain`` messages of 200 B through
   the cluster URI and, in the same run, on the single system node
   (``amqp://guest:guest@127.0.0.1:5672/%2F``): a quorum queue in queue mode, a stream in
   stream mode; rows/s and the ratios.

Each failover row is the median of ``--runs`` runs (node 2 restarted between runs, and its
replicas back online).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid

from ..tools.rabbitmq_cluster import LocalRabbitMQCluster
from ..client import connect
from .common import fill_queue, local_spark, publish_confirmed

from ..client.uri import DEFAULT_URI as SINGLE_NODE  # noqa: E402
QUORUM = {"x-queue-type": "quorum"}
STREAM = {"x-queue-type": "stream"}


class _Publisher(threading.Thread):
    """Publish ids ``b"%08d"`` at ``rate``/s with confirms through ``url`` until stopped."""

    def __init__(self, url: str, queue: str, rate: float, chunk: int = 100):
        super().__init__(daemon=True)
        self.url, self.queue, self.rate, self.chunk = url, queue, rate, chunk
        self.confirmed = 0
        self.stop_flag = threading.Event()

    def _open(self):
        conn = connect(self.url, failover_timeout=60)
        ch = conn.channel()
        ch.confirm_select()
        return conn, ch

    def run(self) -> None:
        """Publish chunk after chunk; a chunk not confirmed within 10 s (RabbitMQ 3.10 may
        never confirm what a stream's lost leader had in flight) or whose connection is lost
        is published again on a new connection (at-least-once)."""
        conn, ch = self._open()
        t0 = time.monotonic()
        while not self.stop_flag.is_set():
            try:
                for i in range(self.confirmed, self.confirmed + self.chunk):
                    ch.basic_publish(b"%08d" % i, routing_key=self.queue)
                ch.wait_for_confirms(timeout=10)
            except Exception:  # noqa: BLE001 - publish the chunk again elsewhere
                try:
                    conn.abort("publishing again")
                except Exception:  # noqa: BLE001
                    pass
                conn, ch = self._open()
                continue
            self.confirmed += self.chunk
            ahead = t0 + self.confirmed / self.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        try:
            conn.close()
        except Exception:  # noqa: BLE001
            pass


def _declare(url: str, queue: str, arguments: dict = QUORUM) -> None:
    with connect(url) as conn:
        conn.channel().queue_declare(queue, durable=True, arguments=arguments)


def _delete(url: str, queue: str) -> None:
    try:
        with connect(url) as conn:
            conn.channel().queue_delete(queue)
    except Exception:  # noqa: BLE001 - cleanup
        pass


def client_failover(c: LocalRabbitMQCluster, rate: float) -> float:
    """Seconds from stop_app of node 2 to the first new message through the client."""
    n2, _, n4 = c.nodes
    q = f"bench-failover-{uuid.uuid4().hex[:8]}"
    _declare(c.node_url(n2), q)
    pub = _Publisher(c.node_url(n4), q, rate)
    pub.start()
    url = c.url(query="shuffle_addresses=false&connection_timeout=3000")
    try:
        conn = connect(url)
        ch = conn.channel()
        ch.basic_qos(1000)
        ch.basic_consume(q)
        t_end = time.monotonic() + 3
        while time.monotonic() < t_end:
            for d in ch.drain(timeout=0.2):
                ch.basic_ack(d.delivery_tag)
        after = pub.confirmed + 2 * pub.chunk
        t_stop = time.monotonic()
        c.stop_app(n2)
        want = b"%08d" % after
        while True:
            try:
                for d in ch.drain(timeout=0.2):
                    ch.basic_ack(d.delivery_tag)
                    if bytes(d.body) >= want:
                        return time.monotonic() - t_stop
                if not conn.is_open:
                    raise ConnectionError("lost")
            except Exception:  # noqa: BLE001 - reconnect through the next address
                conn.abort("failover") if conn.is_open else None
                while True:
                    try:
                        conn = connect(url)
                        ch = conn.channel()
                        ch.basic_qos(1000)
                        ch.basic_consume(q)
                        break
                    except Exception:  # noqa: BLE001
                        time.sleep(0.2)
            if time.monotonic() - t_stop > 120:
                raise TimeoutError("no message through another node within 120 s")
    finally:
        pub.stop_flag.set()
        pub.join(30)
        try:
            conn.close()
        except Exception:  # noqa: BLE001
            pass
        c.start_app(n2)
        _delete(c.url(), q)


def query_failover(spark, c: LocalRabbitMQCluster, rate: float, tmp: str,
                   stream: bool = False) -> float:
    """Seconds from stop_app of node 2 to the first micro-batch with a new message (queue
    mode on a quorum queue, or ``stream`` mode on a stream)."""
    n2, _, n4 = c.nodes
    q = f"bench-failover-{uuid.uuid4().hex[:8]}"
    _declare(c.node_url(n2), q, STREAM if stream else QUORUM)
    batches: list = []

    def collect(df, _):
        ids = [bytes(r.body) for r in df.select("body").collect()]
        batches.append((time.monotonic(), max(ids) if ids else None))

    pub = _Publisher(c.node_url(n4), q, rate)
    reader = spark.readStream.format("amqp").option("uri", c.url())
    reader = (reader.option("stream", q).option("startingOffsets", "earliest") if stream
              else reader.option("queue", q))
    query = (reader.option("maxMessagesPerTrigger", "1000").option("shuffleAddresses", "false")
             .option("connectionTimeout", "3").load()
             .writeStream.foreachBatch(collect).trigger(processingTime="500 milliseconds")
             .option("checkpointLocation", f"{tmp}/{q}").start())
    try:
        pub.start()
        deadline = time.monotonic() + 180
        while sum(1 for _, m in batches if m) < 2:
            if time.monotonic() > deadline or query.exception():
                raise RuntimeError(f"no batches: {query.exception()}")
            time.sleep(0.2)
        want = b"%08d" % (pub.confirmed + 2 * pub.chunk)
        t_stop = time.monotonic()
        c.stop_app(n2)
        while True:
            hit = next((t for t, m in list(batches) if t > t_stop and m and m >= want), None)
            if hit:
                return hit - t_stop
            if time.monotonic() - t_stop > 120 or query.exception():
                raise RuntimeError(f"no batch after the stop: {query.exception()}")
            time.sleep(0.1)
    finally:
        pub.stop_flag.set()
        query.stop()
        pub.join(30)
        c.start_app(n2)
        c.wait_online([q])
        _delete(c.url(), q)


def drain_rate(spark, url: str, declare_url: str, n: int, tmp: str) -> float:
    """Rows/s of a queue-mode AvailableNow query draining ``n`` messages of a quorum queue."""
    q = f"bench-drain-{uuid.uuid4().hex[:8]}"
    _declare(declare_url, q)
    try:
        fill_queue(declare_url, q, n, b"x" * 200)
        t0 = time.monotonic()
        query = (spark.readStream.format("amqp").option("uri", url).option("queue", q).load()
                 .writeStream.format("noop").trigger(availableNow=True)
                 .option("checkpointLocation", f"{tmp}/{q}").start())
        query.awaitTermination()
        took = time.monotonic() - t0
        with connect(declare_url) as conn:
            left = conn.channel().queue_declare(q, passive=True).message_count
        if left:
            raise RuntimeError(f"{left} messages left in {q}")
        return n / took
    finally:
        _delete(declare_url, q)


def stream_drain_rate(spark, url: str, declare_url: str, n: int, tmp: str) -> float:
    """Rows/s of a stream-mode AvailableNow query reading ``n`` messages of a stream."""
    s = f"bench-drain-{uuid.uuid4().hex[:8]}"
    _declare(declare_url, s, STREAM)
    try:
        publish_confirmed(declare_url, s, n, b"x" * 200)
        got = []
        t0 = time.monotonic()
        query = (spark.readStream.format("amqp").option("uri", url).option("stream", s)
                 .option("startingOffsets", "earliest").load()
                 .writeStream.foreachBatch(lambda df, _: got.append(df.count()))
                 .trigger(availableNow=True).option("checkpointLocation", f"{tmp}/{s}").start())
        query.awaitTermination()
        took = time.monotonic() - t0
        if sum(got) != n:
            raise RuntimeError(f"{sum(got)} rows read of the {n} in {s}")
        return n / took
    finally:
        _delete(declare_url, s)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m spark_amqp.bench.failover",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--rate", type=float, default=1500.0, help="publisher messages/s")
    p.add_argument("--drain", type=int, default=100000, help="messages of the throughput row")
    p.add_argument("--quick", action="store_true", help="one run, 20,000 messages drained")
    a = p.parse_args(argv)
    if a.quick:
        a.runs, a.drain = 1, 20000
    import tempfile

    c = LocalRabbitMQCluster()
    t0 = time.monotonic()
    c.start()
    print(f"cluster of {', '.join(c.nodes)} started in {time.monotonic() - t0:.1f} s", flush=True)
    try:
        spark = local_spark("bench-failover")
        with tempfile.TemporaryDirectory() as tmp:
            client = [client_failover(c, a.rate) for _ in range(a.runs)]
            print(f"client failover runs: {[round(x, 1) for x in client]}", flush=True)
            queue = [query_failover(spark, c, a.rate, tmp) for _ in range(a.runs)]
            print(f"queue-mode failover runs: {[round(x, 1) for x in queue]}", flush=True)
            stream = [query_failover(spark, c, a.rate, tmp, stream=True)
                      for _ in range(a.runs)]
            print(f"stream-mode failover runs: {[round(x, 1) for x in stream]}", flush=True)
            cluster_rate = drain_rate(spark, c.url(), c.node_url(c.nodes[0]), a.drain, tmp)
            single_rate = drain_rate(spark, SINGLE_NODE, SINGLE_NODE, a.drain, tmp)
            cluster_srate = stream_drain_rate(spark, c.url(), c.node_url(c.nodes[0]), a.drain,
                                              tmp)
            single_srate = stream_drain_rate(spark, SINGLE_NODE, SINGLE_NODE, a.drain, tmp)
        spark.stop()
    finally:
        c.stop()
    print()
    print(f"{'row':62} {'figure':>14}")
    for name, runs in (("failover, client: stop_app -> next new message", client),
                       ("failover, queue mode: stop_app -> next batch", queue),
                       ("failover, stream mode: stop_app -> next batch", stream)):
        print(f"{name + ' (median)':62} {statistics.median(runs):>12.1f} s")
    for what, cl, single in (("quorum queue, queue mode", cluster_rate, single_rate),
                             ("stream, stream mode", cluster_srate, single_srate)):
        print(f"{'drain ' + what + ', 3-node cluster':62} {cl:>10,.0f} rows/s")
        print(f"{'drain ' + what + ', single node (baseline)':62} {single:>10,.0f} rows/s")
        print(f"{'  cluster / single node':62} {cl / single:>13.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
