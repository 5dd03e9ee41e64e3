"""How fast RabbitMQ delivers one queue to consumers laid out over connections and channels.

``python -m spark_amqp.bench.consumer_layouts [--messages 300000] [--rounds 2]
[--queue-type classic|quorum] [--url amqp://...]``

The question behind it (issue 4): the source keeps a micro-batch unacked until Spark has
checkpointed it, and RabbitMQ 3.10 delivers a classic queue at ~35k msgs/s to the source's
consumer setup (one connection, one channel, four consumers of prefetch 50,000). Would spreading
the same window over several channels or connections (each one its own channel process in
RabbitMQ) deliver faster? For each layout a fresh queue is filled with ``--messages`` bodies of
200 B, then drained with the project's client in raw mode, one thread per channel, each channel
acking ``multiple`` its share of every 100,000 messages (as the source acks once per
micro-batch). Printed per layout: msgs/s (wall, from the first basic.consume) and RabbitMQ's
CPU as cores (``bench/cpu.py``). The last layout is pika-like (prefetch 1,000, an ack every
100) for comparison. RabbitMQ only: the embedded broker is not the limit there.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid

from .cpu import CpuAccount
from .common import fill_queue
from .source import DEFAULT_URL

#: (label, connections, channels per connection, consumers per channel, prefetch, ack every)
LAYOUTS = [
    ("1 conn x 1 chan x 4 consumers (the source)", 1, 1, 4, 50_000, 100_000),
    ("1 conn x 4 chan x 1 consumer", 1, 4, 1, 50_000, 100_000),
    ("4 conn x 1 chan x 1 consumer", 4, 1, 1, 50_000, 100_000),
    ("2 conn x 2 chan x 1 consumer", 2, 2, 1, 50_000, 100_000),
    ("1 conn x 1 chan x 1, prefetch 1000, ack 100", 1, 1, 1, 1_000, 100),
]


def drain(url: str, queue: str, n: int, conns: int, chans_per_conn: int, consumers: int,
          prefetch: int, ack_every: int) -> float:
    """Seconds from the first basic.consume until ``n`` messages were received (and acked)."""
    from ..client import connect
    from ..protocol.raw_deliveries import RawDeliveries

    cs = [connect(url) for _ in range(conns)]
    chans = []
    for c in cs:
        for _ in range(chans_per_conn):
            ch = c.channel()
            ch.set_raw_deliveries()
            ch.basic_qos(prefetch)
            chans.append(ch)
    per_channel = max(1, ack_every // len(chans))
    got = [0]
    lock = threading.Lock()
    done = threading.Event()

    def worker(ch) -> None:
        recv = acked = last_tag = 0
        while not done.is_set():
            items = ch.drain(None, 0.2)
            before = recv
            for it in items:
                if it.__class__ is RawDeliveries:
                    recv += it.count
                    last_tag = it.first_tag + it.count - 1
                else:
                    recv += 1
                    last_tag = it.delivery_tag
            with lock:
                got[0] += recv - before
                if got[0] >= n:
                    done.set()
            if recv - acked >= per_channel:
                ch.basic_ack(last_tag, multiple=True)
                acked = recv
        if recv > acked:
            ch.basic_ack(last_tag, multiple=True)

    try:
        t0 = time.perf_counter()
        for ch in chans:
            for _ in range(consumers):
                ch.basic_consume(queue, no_ack=False)
        threads = [threading.Thread(target=worker, args=(ch,)) for ch in chans]
        for t in threads:
            t.start()
        if not done.wait(600):
            raise TimeoutError(f"{n} messages not received in 600 s")
        dt = time.perf_counter() - t0
        for t in threads:
            t.join()
        return dt
    finally:
        done.set()
        for c in cs:
            c.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("SPARK_AMQP_RABBITMQ_URL", DEFAULT_URL))
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--queue-type", choices=["classic", "quorum"], default="classic")
    args = ap.parse_args(argv)

    from ..client import connect

    quorum = args.queue_type == "quorum"
    print(f"queue={args.queue_type} messages={args.messages} body=200B")
    for _ in range(args.rounds):
        for label, *layout in LAYOUTS:
            queue = f"bench-layouts-{uuid.uuid4().hex[:8]}"
            try:
                with connect(args.url) as c:
                    c.channel().queue_declare(
                        queue, durable=quorum,
                        arguments={"x-queue-type": "quorum"} if quorum else None)
                fill_queue(args.url, queue, args.messages, b"x" * 200)
                with CpuAccount() as acct:
                    dt = drain(args.url, queue, args.messages, *layout)
                cores = acct.cpu.get("RabbitMQ", 0.0) / acct.wall
                print(f"{label:<46} {args.messages / dt:>10,.0f} msgs/s   RabbitMQ "
                      f"{cores:.2f} cores", flush=True)
            finally:
                with connect(args.url) as c:
                    c.channel().queue_delete(queue)
    return 0


if __name__ == "__main__":
    sys.exit(main())
