"""Exactly-once crash test of the amqp source in stream mode (issues 13 and 26), on a live
stream: 50,000 messages in a stream, then a publisher thread keeps writing (~250 msg/s) while
a query in a subprocess (stream_query_runner.py) writes the stream into a parquet sink, is
SIGKILLed at random points 5 times and restarted from the same checkpoint each time; the
publisher stops, and a last Trigger.AvailableNow run finishes. The sink then holds every
message published, each id once and each offset once: a replayed batch re-reads the same
offset range, the file sink commits a batch id once, and a tail probed while the stream grows
is never past what was stored. Sibling of test_source_crash.py (the queue mode's
at-least-once test)."""

from __future__ import annotations

import random
import subprocess
import time

import pytest

from spark_amqp.spark.source.compat import ReadLimit

from source_helpers import (PhasedPublisher, broker_variants_at_once, committed_sink_ids, delete,
                            dump_group_stacks, fast_publish, kill_group, wait_until)
from stream_helpers import declare_stream, start_stream_runner
from session_guard import unique_name

pytestmark = [pytest.mark.slow, pytest.mark.spark]

PRE = 50_000        # messages in the stream before the first run
LIVE_RATE = 250     # messages/s published during the runs (~40,000 more over 5 runs)
BATCH = 10_000
CRASHES = 5


def _progress(p, markers, out, published):
    """Predicate of one run: a batch with rows completed (or the process died, which the
    caller reports), or the query runs and the sink already holds every row published so far
    (``published()``; looked at every second once the runner reports the query started, with
    pyarrow: no Spark job competing with the runner for the CPU)."""
    next_look = 0.0

    def pred():
        nonlocal next_look
        if p.poll() is not None or any(markers.glob("batch-*")):
            return True
        if time.monotonic() >= next_look and (markers / "started").exists():
            next_look = time.monotonic() + 1
            return len(committed_sink_ids(out)) >= published()
        return False

    return pred


def crash_scenario(broker_url: str, tmp_path) -> tuple[str, int, int, float]:
    """The runs of one broker (a thread of :func:`crash_runs`): publish into a new stream,
    start the live publisher, crash CRASHES times, stop the publisher, finish with
    AvailableNow; returns (sink path, messages published, crashes that hit a running batch,
    seconds). Raises AssertionError with the runner's log on a failure."""
    s = unique_name("crash-stream")
    declare_stream(broker_url, s)
    pub = None
    try:
        fast_publish(broker_url, s, [b"%06d" % i for i in range(PRE)])
        pub = PhasedPublisher(broker_url, s, [("live", LIVE_RATE)], lambda _: False,
                              min_seconds=0, max_seconds=[3600], first=PRE,
                              body=lambda _, i: b"%06d" % i).start()
        ck, out = tmp_path / "ck", tmp_path / "out"
        rnd = random.Random()
        opts = ["startingOffsets=earliest", f"maxMessagesPerTrigger={BATCH}",
                "maxMessagesPerPartition=5000"]
        log = tmp_path / "runner.log"
        mid_stream = 0
        t0 = time.monotonic()
        for run in range(CRASHES):
            markers = tmp_path / f"m{run}"
            p = start_stream_runner(broker_url, s, str(ck), str(out), str(markers), "0 seconds",
                                    *opts, log_path=log)
            try:
                try:
                    # a batch with rows completed, or (rarely) the earlier runs already wrote
                    # everything: then this crash hits an idle query, a valid crash point too
                    wait_until(_progress(p, markers, out, lambda: PRE + pub.sent), 420,
                               interval=0.5,
                               what=f"a batch in run {run}")
                except AssertionError as e:
                    raise AssertionError(f"{e}\n{dump_group_stacks(p)}\n----- runner.log tail\n"
                                         f"{log.read_text()[-3000:]}") from e
                assert p.poll() is None, log.read_text()[-3000:]
                mid_stream += any(markers.glob("batch-*"))
                time.sleep(rnd.uniform(0.0, 2.0))      # mid-batch or between batches
            finally:
                kill_group(p)
        pub.stop()          # the last run reads up to the tail it finds when it starts
        assert pub.sent > 0 and not pub.failures, pub.failures
        # PySpark 4.0/4.1: an AvailableNow run is one batch (docs/getting-started.md): run it
        # again until the sink holds every message published
        for final in range(1 if ReadLimit is not None else 30):
            markers = tmp_path / f"final{final}"
            p = start_stream_runner(broker_url, s, str(ck), str(out), str(markers),
                                    "availableNow", *opts, log_path=log)
            try:
                try:
                    rc = p.wait(timeout=400)
                except subprocess.TimeoutExpired as e:
                    raise AssertionError(f"the AvailableNow run did not finish in 400 s\n"
                                         f"{dump_group_stacks(p)}") from e
                assert rc == 0, log.read_text()[-3000:]
            finally:
                kill_group(p)
            assert (markers / "done").exists()
            if ReadLimit is None and len(set(committed_sink_ids(out))) >= PRE + pub.sent:
                break
        return str(out), PRE + pub.sent, mid_stream, time.monotonic() - t0
    finally:
        if pub is not None and pub.thread.is_alive():
            pub.stopping.set()
            pub.thread.join(60)
        delete(broker_url, s)


@pytest.fixture(scope="module")
def crash_runs(request):
    """Both brokers' crash runs at the same time (source_helpers.broker_variants_at_once)."""
    return broker_variants_at_once(request, "test_crash_restart_exactly_once")


@pytest.mark.timeout(1800)   # both brokers' runs overlap: ~3-4 min on a quiet machine
def test_crash_restart_exactly_once(spark, broker_url, crash_runs, request):
    kind = request.node.callspec.params["broker_url"]
    out, n, mid_stream, took = crash_runs[kind].result()
    rows = spark.read.parquet(out).select("id", "offset").collect()
    ids = [r.id for r in rows]
    offsets = {r.offset for r in rows}
    dups = len(ids) - len(set(ids))
    print(f"\n[stream crash test {broker_url.split('@')[-1]}] rows={len(ids)} "
          f"published={n} ({PRE} before, {n - PRE} during the runs) duplicates={dups} "
          f"crashes={CRASHES} (mid-stream {mid_stream}) batch={BATCH} in {took:.0f}s")
    assert dups == 0
    assert len(ids) == n
    assert set(ids) == {"%06d" % i for i in range(n)}
    assert offsets == set(range(n))
