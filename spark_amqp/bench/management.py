"""Does polling the management API slow the embedded broker down? (issue 15)

``python -m spark_amqp.bench.management [--messages 100000] [--rounds 3]
[--interval 0.1] [--path /api/queues]``

The embedded broker runs in its own process (``serve()`` with ``management_port``) and the
broker benchmark's pika figures (:mod:`spark_amqp.bench.broker`: publish, consume,
end-to-end; plus the project client's end-to-end) are measured in alternating rounds:

- **baseline**: management API on, nobody polling it;
- **polled**: a separate process ``GET``s ``--path`` (``/api/queues``, what monitoring agents
  and the web page poll) every ``--interval`` seconds (100 ms) for the whole round;
- **management off** (once, a broker process without the HTTP server) for reference.

Throughput on a shared machine is noisy, so the cost is also measured directly: the broker
process's CPU time (``/proc/<pid>/stat``) while the poller runs for ``--cpu-seconds`` against
``--queues`` queues, minus the same idle span, per request and as a share of one core (what
polling can take from the AMQP side at most).

Printed: the median of each figure per mode, the polled / baseline ratio (target: within
5 %, i.e. ≥ 0.95x) and the baseline rounds' spread around their median (the noise floor of
the run: a ratio inside it is not told apart from noise). Both cores are shared by the clients, the broker and the poller, and by
whatever else runs on the machine: rounds alternate so that drift hits both modes alike.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from .broker import run_suite
from .common import BrokerProcess

_POLLER = """
import base64, sys, time, urllib.request
url, interval = sys.argv[1], float(sys.argv[2])
req = urllib.request.Request(url, headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
n, t_next = 0, time.monotonic()
while True:
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
    n += 1
    t_next += interval
    time.sleep(max(0.0, t_next - time.monotonic()))
"""


def _cpu_seconds(pid: int) -> float:
    import os

    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def polling_cpu(args, queues: int) -> tuple[float, float, int]:
    """(broker CPU ms per request, share of one core, requests) of polling ``args.path``
    every ``args.interval`` s for ``args.cpu_seconds`` with ``queues`` queues declared."""
    import pika

    with BrokerProcess(start_timeout=30.0, management=True) as broker:
        conn = pika.BlockingConnection(pika.URLParameters(broker.url))
        ch = conn.channel()
        for i in range(queues):
            ch.queue_declare(f"bench-mgmt-{i}")
            ch.basic_publish("", f"bench-mgmt-{i}", b"x" * args.size)
        conn.process_data_events(0.5)
        time.sleep(1.0)
        pid = broker.proc.pid
        c0 = _cpu_seconds(pid)
        time.sleep(args.cpu_seconds)
        idle = _cpu_seconds(pid) - c0
        poller = subprocess.Popen([sys.executable, "-c", _POLLER,
                                   f"http://127.0.0.1:{broker.http_port}{args.path}", str(args.interval)])
        time.sleep(1.0)   # the poller's interpreter start-up
        c0 = _cpu_seconds(pid)
        time.sleep(args.cpu_seconds)
        polled = _cpu_seconds(pid) - c0
        poller.terminate()
        poller.wait(30)
        conn.close()
    n = int(args.cpu_seconds / args.interval)
    extra = max(0.0, polled - idle)
    return extra / n * 1000, extra / args.cpu_seconds, n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m spark_amqp.bench.management",
                                description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=100_000, help="messages per pika figure")
    p.add_argument("--client-messages", type=int, default=200_000, help="messages for the client figure")
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--prefetch", type=int, default=1000)
    p.add_argument("--ack-every", type=int, default=100)
    p.add_argument("--rounds", type=int, default=5, help="rounds of each mode (alternating)")
    p.add_argument("--interval", type=float, default=0.1, help="seconds between polls")
    p.add_argument("--path", default="/api/queues", help="the API path polled")
    p.add_argument("--queues", type=int, nargs="+", default=[1, 100],
                   help="queue counts of the CPU measure (the throughput figures use one queue)")
    p.add_argument("--cpu-seconds", type=float, default=10.0, help="span of the CPU measure")
    args = p.parse_args(argv)

    cpu = {}
    for nq in args.queues:
        ms, share, n = cpu[nq] = polling_cpu(args, nq)
        print(f"broker CPU for GET {args.path} with {nq} queue(s): {ms:.2f} ms per request "
              f"({n} requests in {args.cpu_seconds:.0f} s) = {share * 100:.1f}% of one core at one request "
              f"every {args.interval * 1000:.0f} ms", flush=True)

    modes: dict[str, list[dict[str, float]]] = {"baseline": [], "polled": []}
    polls = 0
    with BrokerProcess(start_timeout=30.0, management=True) as broker:
        for r in range(args.rounds):
            for mode in ("baseline", "polled") if r % 2 == 0 else ("polled", "baseline"):
                poller = None
                if mode == "polled":
                    poller = subprocess.Popen([sys.executable, "-c", _POLLER,
                                               f"http://127.0.0.1:{broker.http_port}{args.path}", str(args.interval)])
                t0 = time.monotonic()
                try:
                    modes[mode].append(run_suite(f"mgmt-{mode}", broker.url, args, True))
                finally:
                    if poller is not None:
                        polls += int((time.monotonic() - t0) / args.interval)
                        poller.terminate()
                        poller.wait(30)
                print(f"round {r + 1} {mode}: " + ", ".join(f"{k} {v:,.0f}" for k, v in modes[mode][-1].items()),
                      flush=True)
    with BrokerProcess(start_timeout=30.0) as broker:
        off = run_suite("mgmt-off", broker.url, args, True)

    print(f"\n{args.messages:,} messages of {args.size} B (client figure: {args.client_messages:,}), "
          f"{args.rounds} rounds per mode, medians; polled = GET {args.path} every {args.interval * 1000:.0f} ms "
          f"(~{polls:,} requests) from another process")
    print(f"{'figure':32} {'mgmt off':>10} {'baseline':>10} {'polled':>10} {'polled/baseline':>16} "
          f"{'baseline spread':>16}")
    worst = None
    for k in modes["baseline"][0]:
        bs = [x[k] for x in modes["baseline"]]
        b = statistics.median(bs)
        pl = statistics.median(x[k] for x in modes["polled"])
        ratio = pl / b
        worst = ratio if worst is None else min(worst, ratio)
        # the noise floor: how far the rounds without polling lie from their own median
        spread = f"{min(bs) / b:.2f}-{max(bs) / b:.2f}x"
        print(f"{k:32} {off[k]:10,.0f} {b:10,.0f} {pl:10,.0f} {ratio:15.2f}x {spread:>16}")
    print(f"lowest polled/baseline ratio: {worst:.2f}x (target >= 0.95x); a ratio inside the baseline "
          f"spread is not told apart from noise by this run")
    for nq, (ms, share, _) in cpu.items():
        print(f"polling's broker CPU with {nq} queue(s): {share * 100:.1f}% of one core ({ms:.2f} ms per request)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
