"""Benchmark of the embedded broker against RabbitMQ, side by side in one run.

``python -m spark_amqp.bench.broker [--messages 100000] [--size 200] [--prefetch 1000]
[--ack-every 100] [--no-rabbitmq] [--in-process]``

The embedded broker runs in its own process (``serve()``, as RabbitMQ runs in its own);
``--in-process`` runs it as an ``EmbeddedBroker`` thread of the benchmark process instead (the
broker then shares the GIL with pika and the client). Each broker gets a fresh non-durable queue (unique name, deleted afterwards); messages are
``--size`` bytes (200) and transient. Figures (messages/second):

1. **pika publish** - one ``BlockingConnection`` publishing ``--messages`` to the queue through
   the default exchange, no confirms; timed until the broker has enqueued them all (passive
   ``queue.declare`` polling).
2. **pika consume** - a pika consumer with ``basic_qos(prefetch_count=--prefetch)`` draining
   the queue filled in (1), acking with ``multiple=True`` every ``--ack-every`` deliveries.
3. **pika end-to-end** - a publisher thread and a consumer on separate connections at the same
   time; timed from the first publish to the last delivery.
4. **spark_amqp client end-to-end** (embedded broker, and RabbitMQ for reference) - the
   project's own client: ``publish_batch`` of 1,000 messages per call on one connection, a
   buffered consumer (``drain``) with the same prefetch and multiple acks on another.

Targets (issue 3): embedded ≥ 1.0× RabbitMQ through pika; ≥ 60k msg/s end-to-end with the
project's client against the embedded broker. The clients, the broker and (for RabbitMQ)
Erlang share the machine's cores; the figures are for this machine only.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid

from .common import BrokerProcess

from ..client.uri import DEFAULT_URI  # noqa: E402

RABBITMQ_URL = os.environ.get("SPARK_AMQP_RABBITMQ_URL", DEFAULT_URI)


def _queue_name(tag: str) -> str:
    return f"spark-amqp-bench.broker.{tag}.{uuid.uuid4().hex[:8]}"


def _pika_conn(url: str):
    import pika

    return pika.BlockingConnection(pika.URLParameters(url))


def _wait_count(ch, q: str, n: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ch.queue_declare(q, passive=True).method.message_count >= n:
            return
        time.sleep(0.002)
    raise TimeoutError(f"queue {q} did not reach {n} messages")


def pika_publish(url: str, q: str, n: int, body: bytes) -> float:
    conn = _pika_conn(url)
    ch = conn.channel()
    t0 = time.perf_counter()
    pub = ch.basic_publish
    for _ in range(n):
        pub("", q, body)
    _wait_count(ch, q, n)
    dt = time.perf_counter() - t0
    conn.close()
    return n / dt


def _acking_callback(n: int, ack_every: int):
    """A pika on_message that acks every ``ack_every`` deliveries (multiple) and stops after ``n``."""
    state = {"n": 0}

    def on_message(chan, method, props, body):
        state["n"] += 1
        if state["n"] % ack_every == 0 or state["n"] == n:
            chan.basic_ack(method.delivery_tag, multiple=True)
        if state["n"] >= n:
            chan.stop_consuming()
    return on_message


def pika_consume(url: str, q: str, n: int, prefetch: int, ack_every: int) -> float:
    conn = _pika_conn(url)
    ch = conn.channel()
    ch.basic_qos(prefetch_count=prefetch)
    ch.basic_consume(q, _acking_callback(n, ack_every))
    t0 = time.perf_counter()
    ch.start_consuming()
    dt = time.perf_counter() - t0
    conn.close()
    return n / dt


def pika_end_to_end(url: str, q: str, n: int, body: bytes, prefetch: int, ack_every: int) -> float:
    conn = _pika_conn(url)
    ch = conn.channel()
    ch.basic_qos(prefetch_count=prefetch)
    ch.basic_consume(q, _acking_callback(n, ack_every))

    def publisher():
        pc = _pika_conn(url)
        pch = pc.channel()
        for _ in range(n):
            pch.basic_publish("", q, body)
        pc.process_data_events(0)
        pc.close()

    t0 = time.perf_counter()
    th = threading.Thread(target=publisher)
    th.start()
    ch.start_consuming()
    dt = time.perf_counter() - t0
    th.join()
    conn.close()
    return n / dt


def client_end_to_end(url: str, q: str, n: int, body: bytes, prefetch: int, ack_every: int) -> float:
    from spark_amqp.client import connect

    with connect(url) as cconn, connect(url) as pconn:
        ch = cconn.channel()
        ch.basic_qos(prefetch)
        ch.basic_consume(q)
        pch = pconn.channel()
        batch = [(body,)] * 1000

        def publisher():
            left = n
            while left > 0:
                k = min(1000, left)
                pch.publish_batch(batch[:k], exchange="", routing_key=q)
                left -= k

        t0 = time.perf_counter()
        th = threading.Thread(target=publisher)
        th.start()
        got = 0
        since_ack = 0
        while got < n:
            ds = ch.drain(timeout=10.0)
            if not ds:
                raise TimeoutError(f"client consumer got {got} of {n}")
            got += len(ds)
            since_ack += len(ds)
            if since_ack >= ack_every or got >= n:
                ch.basic_ack(ds[-1].delivery_tag, multiple=True)
                since_ack = 0
        dt = time.perf_counter() - t0
        th.join()
    return n / dt


def run_suite(name: str, url: str, args, with_client: bool) -> dict[str, float]:
    body = b"x" * args.size
    res: dict[str, float] = {}
    admin = _pika_conn(url)
    ach = admin.channel()
    q = _queue_name(name)
    ach.queue_declare(q)
    try:
        res["pika publish"] = pika_publish(url, q, args.messages, body)
        res["pika consume"] = pika_consume(url, q, args.messages, args.prefetch, args.ack_every)
        ach.queue_purge(q)
        res["pika end-to-end"] = pika_end_to_end(url, q, args.messages, body, args.prefetch, args.ack_every)
        ach.queue_purge(q)
        if with_client:
            res["spark_amqp client end-to-end"] = client_end_to_end(url, q, args.client_messages, body,
                                                                    args.prefetch, args.ack_every)
    finally:
        try:
            ach.queue_delete(q)
            admin.close()
        except Exception:
            pass
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m spark_amqp.bench.broker", description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=100_000, help="messages per pika figure")
    p.add_argument("--client-messages", type=int, default=300_000, help="messages for the client figure")
    p.add_argument("--size", type=int, default=200, help="body size in bytes")
    p.add_argument("--prefetch", type=int, default=1000)
    p.add_argument("--ack-every", type=int, default=100)
    p.add_argument("--no-rabbitmq", action="store_true", help="skip RabbitMQ")
    p.add_argument("--rabbitmq-url", default=RABBITMQ_URL)
    p.add_argument("--in-process", action="store_true",
                   help="run the embedded broker as EmbeddedBroker in this process (it then shares "
                        "the GIL with the clients) instead of in its own process via serve()")
    args = p.parse_args(argv)

    from spark_amqp import EmbeddedBroker

    results: dict[str, dict[str, float]] = {}
    with (EmbeddedBroker(rabbitmq_version="3.10") if args.in_process else BrokerProcess()) as broker:
        results["embedded"] = run_suite("embedded", broker.url, args, True)
    if not args.no_rabbitmq:
        try:
            results["rabbitmq"] = run_suite("rabbitmq", args.rabbitmq_url, args, True)
        except Exception as exc:  # noqa: BLE001
            print(f"RabbitMQ at {args.rabbitmq_url} not usable ({exc}); embedded figures only")
    rows = list(results["embedded"])
    print(f"\n{args.messages:,} messages of {args.size} B (client figure: {args.client_messages:,}), "
          f"prefetch {args.prefetch}, multiple ack every {args.ack_every}")
    print(f"{'figure':32} {'embedded msg/s':>15} {'RabbitMQ msg/s':>15} {'ratio':>7}")
    for r in rows:
        e = results["embedded"][r]
        rb = results.get("rabbitmq", {}).get(r)
        ratio = f"{e / rb:6.2f}x" if rb else "-"
        rbs = "-" if rb is None else format(rb, ",.0f")
        print(f"{r:32} {e:15,.0f} {rbs:>15} {ratio:>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
