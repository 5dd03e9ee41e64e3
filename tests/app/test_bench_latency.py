"""``python -m spark_amqp.bench.latency``: its pure parts (percentiles, the time stamp in the
body, the sustained verdict, the table, the options), without Spark or a broker; its publisher's
pacing is tested in test_pacing.py. The benchmark's run itself is measured, not tested (a run
takes minutes)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from spark_amqp.bench.latency import (RATE_SHARE, STAMP_DIGITS, LatencyStats, parse_args,
                                      parse_stamp, percentiles, row_text, stamp)


def test_percentiles_nearest_rank():
    values = list(range(1, 101))          # 1..100
    assert percentiles(values) == [50, 90, 99]
    assert percentiles(values, (0, 100)) == [1, 100]
    assert percentiles([7.0], (50, 99)) == [7.0, 7.0]
    assert percentiles([3, 1, 2], (50,)) == [2]      # unsorted input


def test_percentiles_refuse_empty_and_out_of_range():
    with pytest.raises(ValueError, match="no values"):
        percentiles([])
    with pytest.raises(ValueError, match="outside"):
        percentiles([1, 2], (101,))


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=200),
       st.floats(0, 100))
def test_percentile_is_a_value_with_q_percent_at_or_below(values, q):
    (p,) = percentiles(values, (q,))
    assert p in values
    assert sum(v <= p for v in values) >= q / 100 * len(values)
    assert sum(v < p for v in values) < max(1, q / 100 * len(values))


@given(st.floats(1.0e9, 4.0e9), st.integers(STAMP_DIGITS, 300))
def test_stamp_round_trips_to_the_microsecond(t, size):
    b = stamp(t, size)
    assert len(b) == size
    assert abs(parse_stamp(b) - t) <= 0.5e-6 + 1e-6
    # Spark reads it as substring(body, 1, 16) cast to string then long
    assert int(b[:STAMP_DIGITS].decode()) == round(t * 1e6)


def stats(latencies, sent=100, seen=100, rate=1000.0, pub_rate=1000.0, **kw):
    return LatencyStats("queue/embedded", rate, list(latencies), sent, seen, pub_rate, **kw)


def test_sustained_needs_every_message_a_bounded_p99_and_the_rate():
    ok = stats([0.1] * 99 + [1.9])
    assert ok.sustained(2.0) and ok.verdict(2.0) == "yes"
    slow = stats([0.1] * 98 + [2.5] * 2)
    assert not slow.sustained(2.0) and slow.verdict(2.0) == "no"
    lost = stats([0.1] * 100, seen=99)
    assert not lost.sustained(2.0) and lost.verdict(2.0) == "lost 1"
    behind = stats([0.1] * 100, pub_rate=RATE_SHARE * 1000 - 1)
    assert not behind.sustained(2.0) and behind.verdict(2.0) == "pub<rate"
    failed = stats([0.1] * 100, error="boom")
    assert not failed.sustained(2.0) and failed.verdict(2.0) == "error"
    assert not stats([]).sustained(2.0)


def test_row_text_prints_the_floor_and_the_ratios():
    floor = LatencyStats("floor", 1000.0, [0.2] * 100, 100, 100, 1000.0)
    s = stats([0.3] * 100)
    line = row_text(s, floor, 2.0)
    assert "queue/embedded" in line and "300" in line and "200" in line
    assert "1.50x" in line and line.rstrip().endswith("yes")


def test_parse_args_checks_rates_body_size_and_options():
    a = parse_args(["--rates", "100, 1000", "--option", "prefetch=500"])
    assert a.rates == [100.0, 1000.0] and a.option == ["prefetch=500"]
    for bad in (["--rates", "fast"], ["--rates", "0"], ["--body-size", "8"],
                ["--option", "prefetch"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
