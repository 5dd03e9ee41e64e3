"""Run the benchmarks: ``python -m spark_amqp.bench [all | NAME ...] [--quick] [-- ARGS]``.

Each benchmark runs in its own Python process (``python -m spark_amqp.bench.NAME``; each one
starts its own brokers and SparkSession, and one crashing does not stop the others), its output
streams through as it runs, and one summary table at the end lists, per benchmark, whether it
ran, how long it took, and the lines where it compared itself with its baseline (lines holding a
ratio such as ``1.90x``). The exit status is 0 only when every chosen benchmark exited 0.

``--quick`` passes each benchmark small sizes (a smoke run of a few seconds to a minute each:
the figures are then not meaningful); arguments after ``--`` go to every chosen benchmark
unchanged, e.g. ``python -m spark_amqp.bench source -- --broker embedded``.

The benchmarks need the ``test`` extra (pika is the baseline of most) and, for the RabbitMQ
columns, the RabbitMQ at ``amqp://guest:guest@127.0.0.1:5672/%2F``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass, field

import click

#: name → (what it measures, arguments of a ``--quick`` smoke run). The order is the run order
#: of ``all``: cheap and Spark-free first.
BENCHMARKS: dict[str, tuple[str, list[str]]] = {
    "codec": ("codec encode/decode vs pika's codec", ["--seconds", "0.05", "--repeat", "2"]),
    "client": ("client publish/consume vs pika, RabbitMQ",
               ["--count", "5000", "--confirm-count", "500", "--rounds", "1"]),
    "broker": ("embedded broker vs RabbitMQ, pika as the client",
               ["--messages", "10000", "--client-messages", "20000"]),
    "management": ("embedded broker with its management API polled every 100 ms vs not",
                           ["--messages", "5000", "--client-messages", "10000", "--rounds", "1",
                            "--cpu-seconds", "2"]),
    "consumer_layouts": ("RabbitMQ delivery rate by consumer layout",
                         ["--messages", "20000"]),
    "streams": ("stream queues vs classic queues, embedded broker vs RabbitMQ",
                ["--messages", "20000", "--consumers", "1"]),
    "sink": ("amqp sink vs pika publishing loop", ["--rows", "20000", "--confirm-rows", "2000"]),
    "source": ("amqp source vs pika consuming loop",
               ["--messages", "20000", "--max-per-trigger", "10000", "--per-partition", "5000"]),
    "job": ("the main job's query fed by the amqp source vs Spark's file source", ["--quick"]),
    "failover": ("failover and throughput through a three-node RabbitMQ cluster (as root)",
                 ["--quick"]),
    "latency": ("publish -> foreachBatch latency on live data vs a broker-less floor",
                ["--rates", "100", "--seconds", "2", "--warmup", "1", "--drain", "10"]),
}

# A figure compared with its baseline: "1.90x", "0.65×", "1.05-1.15x".
_RATIO = re.compile(r"\d\.?\d*\s?[x×](?![\w])")


@dataclass
class Outcome:
    """One benchmark's run: ``rc`` its exit status (None: not started), ``seconds`` its wall
    time, ``ratios`` its output lines holding a ratio to a baseline."""

    name: str
    rc: int | None = None
    seconds: float = 0.0
    ratios: list[str] = field(default_factory=list)


def run_one(name: str, args: list[str]) -> Outcome:
    """Run ``python -m spark_amqp.bench.<name> <args>``, echoing its output; return its
    :class:`Outcome`."""
    out = Outcome(name)
    t0 = time.monotonic()
    cmd = [sys.executable, "-u", "-m", f"spark_amqp.bench.{name}", *args]
    click.secho(f"\n=== {name}: {' '.join(cmd[2:])}", bold=True)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          bufsize=1) as p:
        assert p.stdout is not None
        for line in p.stdout:
            sys.stdout.write(line)
            if _RATIO.search(line):
                out.ratios.append(" ".join(line.split()))
        out.rc = p.wait()
    out.seconds = time.monotonic() - t0
    return out


def summary(outcomes: list[Outcome], max_lines: int = 8) -> str:
    """The summary table: one block per benchmark (status, wall time, its ratio lines)."""
    lines = ["", "=== summary", f"{'benchmark':<18}{'status':<10}{'wall':>8}  figures vs baseline"]
    for o in outcomes:
        status = "ok" if o.rc == 0 else f"failed ({o.rc})"
        first, *rest = o.ratios[:max_lines] or ["(no ratio printed)"]
        lines.append(f"{o.name:<18}{status:<10}{o.seconds:>7.0f}s  {first}")
        lines.extend(f"{'':<38}{r}" for r in rest)
        if len(o.ratios) > max_lines:
            lines.append(f"{'':<38}... {len(o.ratios) - max_lines} more above")
    return "\n".join(lines)


@click.command(context_settings={"help_option_names": ["-h", "--help"]},
               help=__doc__.split("\n\n")[0] + "\n\nNAMES: all (default) or any of: "
               + ", ".join(BENCHMARKS) + ".")
@click.argument("names", nargs=-1)
@click.option("--quick", is_flag=True, help="Small sizes: a smoke run, figures not meaningful.")
@click.option("--list", "list_only", is_flag=True, help="List the benchmarks and exit.")
def main(names: tuple[str, ...], quick: bool, list_only: bool) -> None:
    if list_only:
        for name, (what, _) in BENCHMARKS.items():
            click.echo(f"{name:<18}{what}")
        return
    extra: list[str] = []
    if "--" in sys.argv:          # click strips "--"; everything after it goes to the benchmarks
        extra = sys.argv[sys.argv.index("--") + 1:]
        names = names[:len(names) - len(extra)]
    chosen = list(BENCHMARKS) if not names or "all" in names else list(dict.fromkeys(names))
    unknown = [n for n in chosen if n not in BENCHMARKS]
    if unknown:
        raise click.BadParameter(f"unknown benchmark(s) {', '.join(unknown)}; choose from "
                                 f"all, {', '.join(BENCHMARKS)}", param_hint="NAMES")
    outcomes = [run_one(n, (BENCHMARKS[n][1] if quick else []) + extra) for n in chosen]
    click.echo(summary(outcomes))
    sys.exit(0 if all(o.rc == 0 for o in outcomes) else 1)


if __name__ == "__main__":
    main(prog_name="python -m spark_amqp.bench")
