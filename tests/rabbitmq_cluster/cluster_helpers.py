"""Helpers of the cluster failover tests: a paced publisher with confirms on one node, queue-
and stream-mode queries recording every micro-batch (time, ids) through ``foreachBatch``, and
the fault-between-batches step the failover tests share."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from pathlib import Path

from spark_amqp.client import connect

QUORUM = {"x-queue-type": "quorum"}


def declare_quorum(url: str, queue: str) -> None:
    with connect(url) as conn:
        conn.channel().queue_declare(queue, durable=True, arguments=QUORUM)


def declare_stream(url: str, name: str) -> None:
    with connect(url) as conn:
        conn.channel().queue_declare(name, durable=True, arguments={"x-queue-type": "stream"})


def held_in_stream(url: str, stream: str) -> list[bytes]:
    """Every body ``stream`` holds, sorted, read with pika through ``url`` (an independent
    view: use it once nothing writes to the stream any more)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
    from stream_helpers import pika_read_all

    return sorted(b for _, b in pika_read_all(url, stream))


def delete_queue(url: str, queue: str) -> None:
    try:
        with connect(url, shuffle_addresses=True) as conn:
            conn.channel().queue_delete(queue)
    except Exception:  # noqa: BLE001 - cleanup only
        pass


class Publisher(threading.Thread):
    """Publish ids ``0..n-1`` (bodies ``b"%08d"``) to ``queue`` through ``url``, ``rate``
    messages per second, in confirmed chunks of ``chunk``; ``confirmed`` counts them.

    A chunk whose confirms do not come within ``confirm_timeout`` s (RabbitMQ 3.10 may never
    confirm what a stream's lost leader had in flight), that the broker nacks (seen in a
    rolling restart: a quorum queue or stream without a leader for a moment), or whose
    connection is lost (its node stopped: ``url`` may list several nodes), is published again
    on a new connection, at most
    ``retries`` times (at-least-once: ``republished`` counts the messages sent again; a test
    compares with what the queue or stream holds). :meth:`stop` ends the run after the chunk
    in flight is confirmed (then ``confirmed`` ids were published)."""

    def __init__(self, url: str, queue: str, n: int, rate: float = 1000.0, chunk: int = 100,
                 persistent: bool = False, retries: int = 3, confirm_timeout: float = 30.0):
        super().__init__(daemon=True, name="cluster-publisher")
        self.url, self.queue, self.n, self.rate, self.chunk = url, queue, n, rate, chunk
        self.persistent = persistent
        self.retries, self.confirm_timeout = retries, confirm_timeout
        self.confirmed = 0
        self.republished = 0
        self.reconnects: list[str] = []
        self.error: BaseException | None = None
        self._stop_flag = threading.Event()

    def stop(self, timeout: float = 120.0) -> None:
        """End after the chunk in flight; wait for the thread."""
        self._stop_flag.set()
        self.join(timeout)

    def _open(self):
        conn = connect(self.url, failover_timeout=60, connection_timeout=3)
        ch = conn.channel()
        ch.confirm_select()
        return conn, ch

    def run(self) -> None:
        from spark_amqp.client.errors import ConfirmTimeout, PublishNacked
        from spark_amqp.protocol import BasicProperties
        from spark_amqp.protocol.errors import AMQPError

        props = BasicProperties(delivery_mode=2) if self.persistent else None
        retries = 0
        conn = None
        try:
            conn, ch = self._open()
            t0 = time.monotonic()
            start = 0
            while start < self.n and not self._stop_flag.is_set():
                try:
                    for i in range(start, min(start + self.chunk, self.n)):
                        ch.basic_publish(b"%08d" % i, routing_key=self.queue, properties=props)
                    res = ch.wait_for_confirms(timeout=self.confirm_timeout)
                    if res.nacked:
                        raise ConfirmTimeout(len(res.nacked), 0)  # published again below
                except (ConfirmTimeout, PublishNacked, OSError, AMQPError) as exc:
                    retries += 1
                    if retries > self.retries:
                        raise
                    self.republished += self.chunk
                    self.reconnects.append(f"{type(exc).__name__}: {exc}")
                    try:
                        conn.abort("publishing again")
                    except Exception:  # noqa: BLE001 - it is gone already
                        pass
                    conn, ch = self._open()
                    continue
                start = min(start + self.chunk, self.n)
                self.confirmed = start
                ahead = t0 + self.confirmed / self.rate - time.monotonic()
                if ahead > 0:
                    self._stop_flag.wait(ahead)
            conn.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def drain(url: str, queue: str, idle: float = 3.0) -> list:
    """Consume (and ack) everything in ``queue``: ``[(message_id, body), ...]`` until nothing
    came for ``idle`` seconds."""
    out = []
    with connect(url) as conn:
        ch = conn.channel()
        ch.basic_qos(2000)
        ch.basic_consume(queue)
        while True:
            ds = ch.drain(timeout=idle)
            if not ds:
                return out
            for d in ds:
                out.append((getattr(d.properties, "message_id", None), bytes(d.body)))
            ch.basic_ack(ds[-1].delivery_tag, multiple=True)


class BatchLog:
    """``foreachBatch`` target: ``batches`` is a list of ``(monotonic time, [ids])``."""

    def __init__(self):
        self.batches: list[tuple[float, list[bytes]]] = []
        self.lock = threading.Lock()

    def __call__(self, df, batch_id) -> None:
        ids = [bytes(r.body) for r in df.select("body").collect()]
        with self.lock:
            self.batches.append((time.monotonic(), ids))

    def ids(self) -> list[bytes]:
        with self.lock:
            return [i for _, b in self.batches for i in b]

    def distinct(self) -> int:
        return len(set(self.ids()))

    def with_rows_after(self, t: float) -> float | None:
        """Time of the first batch with rows that ended after ``t``, or None."""
        with self.lock:
            return next((bt for bt, ids in self.batches if bt > t and ids), None)

    def with_id_after(self, t: float, first_id: int) -> float | None:
        """Time of the first batch ending after ``t`` holding an id >= ``first_id`` (ids
        published after a fault: only a working connection can have delivered them), or
        None."""
        want = b"%08d" % first_id
        with self.lock:
            return next((bt for bt, ids in self.batches if bt > t and ids and max(ids) >= want),
                        None)

    def duplicates(self) -> int:
        return sum(c - 1 for c in Counter(self.ids()).values() if c > 1)


def start_query(spark, url: str, queue: str, log: BatchLog, checkpoint: str, **options):
    """A queue-mode query of ``queue`` through ``url`` into ``log`` (processingTime 500 ms)."""
    reader = (spark.readStream.format("amqp").option("uri", url).option("queue", queue))
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return (reader.load().writeStream.foreachBatch(log).trigger(processingTime="500 milliseconds")
            .option("checkpointLocation", checkpoint).start())


def stream_query(spark, url: str, stream: str, log: BatchLog, checkpoint: str,
                 per_trigger: int = 1000, **options):
    """A stream-mode query of ``stream`` from its first offset through ``url`` into ``log``
    (``maxMessagesPerTrigger`` ``per_trigger``, processingTime 500 ms)."""
    reader = (spark.readStream.format("amqp").option("uri", url).option("stream", stream)
              .option("startingOffsets", "earliest")
              .option("maxMessagesPerTrigger", str(per_trigger)))
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return (reader.load().writeStream.foreachBatch(log)
            .trigger(processingTime="500 milliseconds")
            .option("checkpointLocation", checkpoint).start())


def fault_between_batches(pub: Publisher, log: BatchLog, query, fault, what: str,
                          timeout: float = 120.0) -> tuple[float, float]:
    """Start ``pub``, wait for two batches with rows, run ``fault()``, then wait for the first
    batch holding an id published after it (two chunks past what was confirmed at the fault:
    only a working connection can have delivered those). Returns ``(t_fault, t_next)``
    (monotonic seconds); fails naming ``what`` and the query's error on a timeout."""
    pub.start()
    wait_until(lambda: sum(1 for _, b in log.batches if b) >= 2, timeout, "two batches", query)
    assert pub.is_alive() and pub.error is None, (
        f"the publisher is not writing at the fault (error: {pub.error}): the test needs one "
        "that runs until stopped")
    after = pub.confirmed + 2 * pub.chunk
    t_fault = time.monotonic()
    fault()
    t_next = wait_until(lambda: log.with_id_after(t_fault, after), timeout,
                        f"a batch with messages published after the {what}", query)
    return t_fault, t_next


def wait_until(pred, timeout: float, what: str, query=None, interval: float = 0.2):
    """Wait for ``pred()`` (truthy); fail naming ``what`` (and the query's error) on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if query is not None and query.exception() is not None:
            raise AssertionError(f"the query failed while waiting for {what}: "
                                 f"{query.exception()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
