"""Crash test of the amqp source (issue 4): a query in a subprocess streams 100,000 messages
with unique ids from a durable queue into a parquet sink, is SIGKILLed at several random points
and restarted from the same checkpoint each time. Every id arrives at least once, the queue ends
empty, and duplicates are counted and reported (expected: at most one batch per crash)."""

from __future__ import annotations

import random
import subprocess
import time

import pytest

from spark_amqp.spark.source.compat import ReadLimit

from source_helpers import (broker_variants_at_once, broker_view, committed_sink_ids, declare,
                            delete, dump_group_stacks, fast_publish, kill_group, message_count,
                            start_runner, wait_until)
from session_guard import unique_name

pytestmark = [pytest.mark.slow, pytest.mark.spark]

N = 100_000
BATCH = 10_000
CRASHES = 3


def sink_complete(out) -> bool:
    """Every id is in the parquet sink (the files its _spark_metadata log lists: committed
    batches only; read with pyarrow, so polling takes no CPU from the runner's Spark). A sink
    without a committed file yet is "not complete" (a cold machine needs ~30 s before the
    first batch commits one)."""
    return len(set(committed_sink_ids(out))) == N


def progress(p, markers, out):
    """Predicate for one run: "batch" once it completed a batch with rows (or the process died,
    reported by the caller), "idle" when the query runs and the sink already holds every id
    (looked at every second once the runner reports the query started)."""
    next_look = 0.0

    def pred():
        nonlocal next_look
        if p.poll() is not None or any(markers.glob("batch-*")):
            return "batch"
        if time.monotonic() >= next_look and (markers / "started").exists():
            next_look = time.monotonic() + 1
            if sink_complete(out):
                return "idle"
        return None

    return pred


def crash_scenario(broker_url: str, tmp_path) -> tuple[str, int]:
    """The runs of one broker (a thread of :func:`crash_runs`): publish, crash CRASHES times,
    finish with AvailableNow, wait for the queue to be empty; returns (sink path, crashes
    that hit a running batch). Raises AssertionError with the runner's log on a failure."""
    q = unique_name("crash")
    declare(broker_url, q, durable=True)
    try:
        fast_publish(broker_url, q, [b"%06d" % i for i in range(N)], persistent=True)
        assert message_count(broker_url, q) == N
        ck, out = tmp_path / "ck", tmp_path / "out"
        rnd = random.Random()
        opts = [f"maxMessagesPerTrigger={BATCH}", f"prefetch={2 * BATCH}"]
        mid_stream = 0
        for run in range(CRASHES):
            markers = tmp_path / f"m{run}"
            p = start_runner(broker_url, q, str(ck), str(out), str(markers), "0 seconds", *opts,
                             log_path=tmp_path / "runner.log")
            try:
                try:
                    # A run makes a batch, unless the earlier runs already streamed every id into
                    # the sink (the source drains 100,000 in a few seconds; then this crash hits
                    # an idle query, which is a valid crash point too).
                    done = wait_until(progress(p, markers, out), 300,
                                      what=f"a batch in run {run}")
                except AssertionError as e:
                    raise AssertionError(f"{e}\n{broker_view(broker_url, q)}\n"
                                         f"{dump_group_stacks(p)}\n----- runner.log tail\n"
                                         f"{(tmp_path / 'runner.log').read_text()[-3000:]}") from e
                assert p.poll() is None, (tmp_path / "runner.log").read_text()[-3000:]
                mid_stream += done == "batch"
                time.sleep(rnd.uniform(0.0, 1.5))      # a random point: mid-batch or between
            finally:
                kill_group(p)
        # PySpark 4.0/4.1: an AvailableNow run is one batch (docs/getting-started.md): run
        # it again until the queue is empty (a few runs: at most the unacked windows remain)
        for final in range(1 if ReadLimit is not None else 12):
            markers = tmp_path / f"final{final}"
            p = start_runner(broker_url, q, str(ck), str(out), str(markers), "availableNow",
                             *opts, log_path=tmp_path / "runner.log")
            try:
                try:
                    rc = p.wait(timeout=400)
                except subprocess.TimeoutExpired as e:
                    raise AssertionError(f"the AvailableNow run did not finish in 400 s\n"
                                         f"{dump_group_stacks(p)}") from e
                assert rc == 0, (tmp_path / "runner.log").read_text()[-3000:]
            finally:
                kill_group(p)
            assert (markers / "done").exists()
            if ReadLimit is None and message_count(broker_url, q) == 0:
                break
        wait_until(lambda: message_count(broker_url, q) == 0, 30, what="queue empty")
        return str(out), mid_stream
    finally:
        delete(broker_url, q)


@pytest.fixture(scope="module")
def crash_runs(request):
    """Both brokers' crash runs at the same time (source_helpers.broker_variants_at_once)."""
    return broker_variants_at_once(request, "test_crash_restart_loses_nothing")


@pytest.mark.timeout(1800)   # both brokers' runs overlap: ~3 min on a quiet machine
def test_crash_restart_loses_nothing(spark, broker_url, crash_runs, request):
    kind = request.node.callspec.params["broker_url"]
    out, mid_stream = crash_runs[kind].result()
    ids = [r.id for r in spark.read.parquet(out).select("id").collect()]
    distinct = set(ids)
    dups = len(ids) - len(distinct)
    print(f"\n[crash test {broker_url.split('@')[-1]}] rows={len(ids)} distinct={len(distinct)} "
          f"duplicates={dups} crashes={CRASHES} (mid-stream {mid_stream}) batch={BATCH}")
    assert distinct == {"%06d" % i for i in range(N)}
    assert dups <= CRASHES * BATCH
