"""Benchmark of the blocking client against pika's ``BlockingConnection``, same broker, same
queue, same run.

``python -m spark_amqp.bench.client [--url amqp://...] [--count 50000] [--body-size 200]
[--confirm-count 10000] [--rounds 3]``

One non-durable queue (unique name, deleted at the end) is used by every contender and purged
between them; bodies are ``--body-size`` bytes (default 200) without properties. Each round
runs every contender once, in turn (so load from other processes hits both clients alike);
the table shows the median and the best round of each; ratios and targets use the medians.
Rates are messages/second. On a machine shared with other busy processes the broker's share
of the CPU caps every contender (the client's own CPU per message is printed too:
spark-amqp spends ~2 µs per published and ~6 µs per consumed message, pika ~30 µs and
~17 µs here), so run it on a quiet machine for representative figures.

Publish (until the broker has enqueued all messages, measured by passive ``queue.declare``
polling for unconfirmed modes, by the last confirm otherwise):

- pika, no confirms: a ``basic_publish`` loop.
- pika, per-message confirms: ``confirm_delivery()`` then ``basic_publish`` (each call waits
  for its ack); ``--confirm-count`` messages because it is slow.
- spark-amqp ``basic_publish`` loop, no confirms.
- spark-amqp ``basic_publish`` loop, pipelined confirms (``max_in_flight`` 10,000), then
  ``wait_for_confirms``.
- spark-amqp ``publish_batch`` (chunks of 1,000), pipelined confirms (``max_in_flight``
  10,000): the Spark sink's inner loop.

Consume (queue pre-filled with ``--count`` messages; prefetch 1,000; manual acks):

- pika: ``basic_consume`` callback, ``basic_ack(multiple=True)`` every 100 messages, as in
  the throughput anchors of the reference notes.
- spark-amqp: ``drain(timeout=1)`` loop, ``basic_ack(multiple=True)`` of the last drained
  delivery once 100 or more are unacked (the same ack cadence as pika's).

Targets (issue 2 / team brief): spark-amqp consume ≥ 1.5× pika consume; spark-amqp confirmed
``publish_batch`` ≥ 2× pika's *unconfirmed* publish.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import uuid

from ..client import connect

from ..client.uri import DEFAULT_URI as DEFAULT_URL  # noqa: E402


def _wait_depth(ch, queue: str, n: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while ch.queue_declare(queue, passive=True).message_count < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"queue {queue} did not reach {n} messages")
        time.sleep(0.002)


# --------------------------------------------------------------------------- contenders

def ours_publish(url, queue, body, n, admin):
    with connect(url) as c:
        ch = c.channel()
        t = time.perf_counter()
        for _ in range(n):
            ch.basic_publish(body, "", queue)
        _wait_depth(admin, queue, n)
        return n / (time.perf_counter() - t)


def ours_publish_confirmed(url, queue, body, n, admin):
    with connect(url) as c:
        ch = c.channel()
        ch.confirm_select()
        ch.max_in_flight = 10000
        t = time.perf_counter()
        for _ in range(n):
            ch.basic_publish(body, "", queue)
        ch.wait_for_confirms(timeout=120)
        return n / (time.perf_counter() - t)


def ours_publish_batch_confirmed(url, queue, body, n, admin):
    with connect(url) as c:
        ch = c.channel()
        ch.confirm_select()
        ch.max_in_flight = 10000
        item = (body, "", queue, None, False)
        t = time.perf_counter()
        left = n
        while left:
            k = min(1000, left)
            ch.publish_batch([item] * k)
            left -= k
        ch.wait_for_confirms(timeout=120)
        return n / (time.perf_counter() - t)


def ours_consume(url, queue, body, n, admin):
    with connect(url) as c:
        ch = c.channel()
        ch.basic_qos(1000)
        got = 0
        t = time.perf_counter()
        ch.basic_consume(queue)
        drain, ack = ch.drain, ch.basic_ack
        unacked = 0
        while got < n:
            batch = drain(None, 1.0)
            if not batch:
                raise TimeoutError(f"consume stalled at {got}/{n}")
            got += len(batch)
            unacked += len(batch)
            if unacked >= 100 or got >= n:  # same ack cadence as the pika contender
                ack(batch[-1].delivery_tag, True)
                unacked = 0
        rate = n / (time.perf_counter() - t)
        return rate


def _pika_params(url):
    import pika
    return pika.URLParameters(url)


def pika_publish(url, queue, body, n, admin):
    import pika
    conn = pika.BlockingConnection(_pika_params(url))
    try:
        ch = conn.channel()
        t = time.perf_counter()
        for _ in range(n):
            ch.basic_publish("", queue, body)
        _wait_depth(admin, queue, n)
        return n / (time.perf_counter() - t)
    finally:
        conn.close()


def pika_publish_confirmed(url, queue, body, n, admin):
    import pika
    conn = pika.BlockingConnection(_pika_params(url))
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        t = time.perf_counter()
        for _ in range(n):
            ch.basic_publish("", queue, body)
        return n / (time.perf_counter() - t)
    finally:
        conn.close()


def pika_consume(url, queue, body, n, admin):
    import pika
    conn = pika.BlockingConnection(_pika_params(url))
    try:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=1000)
        count = [0]

        def on_message(c, method, props, b):
            count[0] += 1
            if count[0] % 100 == 0 or count[0] == n:
                c.basic_ack(method.delivery_tag, multiple=True)
            if count[0] >= n:
                c.stop_consuming()

        t = time.perf_counter()
        ch.basic_consume(queue, on_message)
        ch.start_consuming()
        return n / (time.perf_counter() - t)
    finally:
        conn.close()


def _fill(url, queue, body, n):
    with connect(url) as c:
        ch = c.channel()
        ch.confirm_select()
        ch.max_in_flight = 20000
        item = (body, "", queue, None, False)
        left = n
        while left:
            k = min(1000, left)
            ch.publish_batch([item] * k)
            left -= k
        ch.wait_for_confirms(timeout=120)


# --------------------------------------------------------------------------- main

def _cpu() -> float:
    """CPU seconds (user + system) of this process, all threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(url: str, count: int, body_size: int, confirm_count: int, rounds: int,
        out=sys.stdout) -> dict:
    """Run all contenders ``rounds`` times; returns ``{name: [msgs/s per round]}`` plus
    ``"_cpu": {name: [µs of CPU per message per round]}``."""
    body = b"x" * body_size
    queue = f"spark-amqp-bench.client.{uuid.uuid4().hex[:8]}"
    results: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    admin_conn = connect(url)
    admin = admin_conn.channel()
    admin.queue_declare(queue)
    plan = [
        ("pika publish, no confirms", pika_publish, count),
        ("pika publish, per-message confirms", pika_publish_confirmed, confirm_count),
        ("spark-amqp basic_publish, no confirms", ours_publish, count),
        ("spark-amqp basic_publish, pipelined confirms", ours_publish_confirmed, count),
        ("spark-amqp publish_batch, pipelined confirms", ours_publish_batch_confirmed, count),
        ("pika consume, manual acks", pika_consume, count),
        ("spark-amqp consume (drain), manual acks", ours_consume, count),
    ]
    try:
        for r in range(rounds):
            for name, fn, n in plan:
                admin.queue_purge(queue)
                if "consume" in name:
                    _fill(url, queue, body, n)
                cpu0 = _cpu()
                rate = fn(url, queue, body, n, admin)
                cpu_us = (_cpu() - cpu0) / n * 1e6
                results.setdefault(name, []).append(rate)
                cpu.setdefault(name, []).append(cpu_us)
                print(f"  round {r + 1}: {name:48s} {rate:>10,.0f} msgs/s  "
                      f"{cpu_us:6.1f} µs CPU/msg in this process", file=out, flush=True)
    finally:
        try:
            admin.queue_delete(queue)
        finally:
            admin_conn.close()
    results["_cpu"] = cpu  # type: ignore[assignment]
    return results


def report(results: dict[str, list[float]], out=sys.stdout) -> None:
    """Print the table: median and best per contender; ratios use medians (robust to one
    lucky or unlucky round on a shared machine)."""
    results = dict(results)
    cpu = results.pop("_cpu", {})
    best = {k: max(v) for k, v in results.items()}
    med = {k: statistics.median(v) for k, v in results.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    pika_pub = med["pika publish, no confirms"]
    pika_con = med["pika consume, manual acks"]
    print(f"\n{'mode':50s} {'median msgs/s':>14s} {'best':>9s} {'µs CPU/msg':>11s}  "
          "ratio (medians)", file=out)
    for k in results:
        if k in ("pika publish, no confirms", "pika consume, manual acks"):
            ratio = "(baseline)"
        elif "consume" in k:
            ratio = f"{med[k] / pika_con:5.2f}x pika consume"
        else:
            ratio = f"{med[k] / pika_pub:5.2f}x pika unconfirmed publish"
        print(f"{k:50s} {med[k]:>14,.0f} {best[k]:>9,.0f} {cpu_med.get(k, 0):>11.1f}  {ratio}",
              file=out)
    batch = med["spark-amqp publish_batch, pipelined confirms"] / pika_pub
    cons = med["spark-amqp consume (drain), manual acks"] / pika_con
    print(f"\ntarget consume >= 1.5x pika consume: {cons:.2f}x {'OK' if cons >= 1.5 else 'MISSED'}; "
          f"target confirmed publish_batch >= 2x pika unconfirmed publish: {batch:.2f}x "
          f"{'OK' if batch >= 2 else 'MISSED'}", file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spark_amqp.bench.client",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=DEFAULT_URL, help="AMQP URI of the broker (default: local RabbitMQ)")
    ap.add_argument("--count", type=int, default=50000, help="messages per contender (default 50000)")
    ap.add_argument("--confirm-count", type=int, default=5000,
                    help="messages for pika's per-message confirms (default 5000)")
    ap.add_argument("--body-size", type=int, default=200, help="body bytes (default 200)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; the best is reported (default 3)")
    a = ap.parse_args(argv)
    print(f"spark-amqp client vs pika BlockingConnection: {a.url.split('@')[-1]}, "
          f"{a.count} msgs x {a.body_size} B, {a.rounds} rounds", flush=True)
    report(run(a.url, a.count, a.body_size, a.confirm_count, a.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
