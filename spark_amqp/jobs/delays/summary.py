"""The summary the demos print: totals, the worst windows and the consistency checks."""

from __future__ import annotations

import sys

from .data import ALERTS_EXCHANGE, DEFAULT_ALERTS_QUEUE
from .job import JobResult, read_results


def print_summary(spark, result: JobResult, published: int, flights: int, alerts_depth: int,
                  left_in_queue: int, threshold: float, alerts_exchange: str = ALERTS_EXCHANGE,
                  alerts_queue: str = DEFAULT_ALERTS_QUEUE, out=sys.stdout,
                  left_label: str = "messages left in the queue", output_note: str = "") -> bool:
    """Print totals, the worst windows and the consistency checks; True if all checks hold.
    ``output_note`` follows the results folder (e.g. that a temporary one is removed at exit)."""
    from pyspark.sql import functions as F

    res = read_results(spark, result.output)
    tot = res.agg(F.count(F.lit(1)).alias("windows"), F.sum("flights").alias("flights"),
                  F.sum("cancelled").alias("cancelled"),
                  (F.sum(F.col("mean_dep_delay") * (F.col("flights") - F.col("cancelled")))
                   / F.sum(F.col("flights") - F.col("cancelled"))).alias("mean")).first()
    in_windows = int(tot["flights"] or 0)
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p()
    p("=" * 78)
    p(f"flight delays: {in_windows:,} flights in {tot['windows']:,} windows "
      f"(origin x carrier x hour), {int(tot['cancelled'] or 0):,} cancelled, "
      f"mean departure delay {tot['mean'] or 0:.1f} min")
    p(f"job: {result.batches} micro-batches, {result.consumed:,} messages in "
      f"{result.seconds:.1f} s ({result.consumed / max(result.seconds, 1e-9):,.0f} msg/s); "
      f"results in {result.output}/windows{output_note}")
    p(f"alerts (mean delay > {threshold:g} min): {result.alerts:,} published to exchange "
      f"'{alerts_exchange}', {alerts_depth:,} waiting in queue '{alerts_queue}'")
    p()
    p("worst windows (at least 5 flights):")
    worst = (res.where(F.col("flights") >= 5).orderBy(F.desc("mean_dep_delay")).limit(10)
             .toPandas())
    if len(worst):
        worst["window_start"] = worst["window_start"].dt.strftime("%Y-%m-%d %H:%M")
        worst = worst.drop(columns=["window_end"]).rename(
            columns={"window_start": "hour (UTC)", "mean_dep_delay": "mean delay",
                     "p90_dep_delay": "p90 delay"})
        p(worst.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    p()
    checks = [
        (f"messages published = consumed: {published:,} = {result.consumed:,}",
         published == result.consumed),
        (f"flights published = flights in the windows: {flights:,} = {in_windows:,}",
         flights == in_windows),
        (f"{left_label}: {left_in_queue:,}", left_in_queue == 0),
    ]
    for text, ok in checks:
        p(f"  [{'ok' if ok else 'FAIL'}] {text}")
    p("=" * 78)
    return all(ok for _, ok in checks)
