"""The stream store's record reader (``spark_amqp/broker/stream.py`` ``split_entries``) and its
compiled twin (``spark_amqp/broker/_stream_records.pyx`` ``split_records``): the same values,
equal consecutive values shared as one object, None for a payload cut short."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_amqp.broker import stream as stream_log
from spark_amqp.protocol import compiled

TWIN = compiled.twin("spark_amqp.broker._stream_records")

needs_twin = pytest.mark.skipif(
    TWIN is None and os.environ.get("SPARK_AMQP_REQUIRE_SPEEDUPS") != "1",
    reason="compiled twins not built or SPARK_AMQP_PURE_PYTHON=1")

PROPS = settings(max_examples=int(os.environ.get("AMQP_FUZZ_EXAMPLES", "150")), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _payload(head: bytes, entries) -> bytes:
    return head + b"".join(stream_log._ENT.pack(len(a), len(b), len(c)) + a + b + c
                           for a, b, c in entries)


def test_the_pure_reader_reads_what_was_written_and_refuses_a_cut_payload():
    entries = [(b"\x00\x02rk", b"\x80\x00\x01a", b"body"), (b"", b"", b"")]
    data = _payload(b"hd", entries)
    assert stream_log.split_entries(data, 2, 2) == entries
    with pytest.raises(Exception):
        stream_log.split_entries(data[:9], 2, 2)


@needs_twin
@PROPS
@given(st.lists(st.tuples(st.sampled_from([b"", b"\x00\x02rk", b"\x00\x03rkx"]),
                          st.sampled_from([b"", b"\x80\x00\x01a"]), st.binary(max_size=50)),
                max_size=10), st.binary(max_size=5), st.integers(0, 3))
def test_compiled_stream_entries_as_pure(entries, head, cut):
    """The stream log's chunk payload split by the compiled ``split_records`` gives the values
    of ``broker/stream.py``'s ``split_entries``; equal consecutive enc / properties are one
    object; a payload cut short gives None (the pure reader then raises)."""
    data = _payload(head, entries)
    got = TWIN.split_records(data, len(head), len(entries))
    assert got == stream_log.split_entries(data, len(head), len(entries))
    for prev, this in zip(got, got[1:]):
        assert (prev[0] is this[0]) == (prev[0] == this[0])
        assert (prev[1] is this[1]) == (prev[1] == this[1])
    if entries and cut:
        assert TWIN.split_records(data[:-cut], len(head), len(entries)) is None
    assert stream_log._split_records is TWIN.split_records
