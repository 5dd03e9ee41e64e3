"""Pieces shared by the benchmarks: the embedded broker in its own process and the local
SparkSession they run Spark contenders in."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

__all__ = ["BrokerProcess", "fill_queue", "local_spark"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProcess:
    """The embedded broker in its own process (``spark_amqp.broker.serve()``, in memory, an
    ephemeral port), as RabbitMQ runs in its own: in the benchmark's process it would share the
    GIL with the baselines. ``url`` is its AMQP URI; use as a context manager (SIGTERM on exit).
    ``pid``: the process id, to measure its CPU. ``data_dir``: a data directory (durable
    store and stream segment files) instead of memory only. ``management``: also serve the
    management HTTP API, on ``http_port`` (else None). ``rabbitmq_version``: the mode (3.10).
    ``stream``: also serve the stream protocol, on ``stream_port`` (``stream_url``)."""

    def __init__(self, start_timeout: float = 20.0, data_dir: str | None = None,
                 management: bool = False, rabbitmq_version: str = "3.10", stream: bool = True):
        # "3.10" by default: the benchmarks compare with the local RabbitMQ 3.10.8, so the
        # embedded broker behaves like it (e.g. 128 MiB max_message_size for the large-message
        # runs; docs/broker/rabbitmq-versions.md)
        self.port = _free_port()
        self.http_port = _free_port() if management else None
        self.stream_port = _free_port() if stream else None
        self.proc = subprocess.Popen([sys.executable, "-c",
                                      "import logging; logging.basicConfig(level=logging.WARNING); "
                                      f"from spark_amqp.broker import serve; "
                                      f"serve('127.0.0.1', {self.port}, {data_dir!r}, "
                                      f"management_port={self.http_port}, "
                                      f"rabbitmq_version={rabbitmq_version!r}, stream_port={self.stream_port})"])
        self.pid = self.proc.pid
        deadline = time.monotonic() + start_timeout
        for port in filter(None, (self.port, self.http_port, self.stream_port)):
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"
        self.stream_url = (f"rabbitmq-stream://guest:guest@127.0.0.1:{self.stream_port}/%2F"
                           if self.stream_port else None)

    def __enter__(self) -> "BrokerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """SIGTERM the broker and wait for it to exit."""
        self.proc.terminate()
        self.proc.wait(30)


def local_spark(app_name: str, **conf: str):
    """A ``local[2]`` SparkSession with the UI and progress bars off, ERROR logs, UTC session
    time zone, the ``amqp`` data source registered, and ``conf`` (Spark conf keys -> values)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_amqp

    builder = (SparkSession.builder.master("local[2]").appName(app_name)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark_amqp.register(spark)
    return spark


def publish_confirmed(url: str, queue: str, n: int, body: bytes) -> float:
    """Publish ``n`` copies of ``body`` to ``queue`` (default exchange) in batches of 20,000
    under publisher confirms; returns the seconds taken. RuntimeError if any is nacked."""
    from ..client import connect

    t0 = time.perf_counter()
    with connect(url) as c:
        ch = c.channel()
        ch.confirm_select()
        left = n
        while left:
            k = min(left, 20000)
            ch.publish_batch([(body,)] * k, routing_key=queue)
            res = ch.wait_for_confirms(timeout=300)
            if res.nacked:
                raise RuntimeError(f"{len(res.nacked)} publishes to {queue} nacked")
            left -= k
    return time.perf_counter() - t0


def fill_queue(url: str, queue: str, n: int, body: bytes) -> None:
    """Publish ``n`` copies of ``body`` to ``queue`` (default exchange) with confirms, then
    wait until the queue reports ``n`` ready messages (at most 120 s; TimeoutError)."""
    from ..client import connect

    publish_confirmed(url, queue, n, body)
    with connect(url) as c:
        ch = c.channel()
        deadline = time.monotonic() + 120
        while ch.queue_declare(queue, passive=True).message_count < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"queue {queue} did not reach {n} messages")
            time.sleep(0.01)
