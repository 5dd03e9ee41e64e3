"""The stream log's per-chunk Bloom filters (spark_amqp/broker/stream_filter.py, stream.py):
no false negatives, chunks that cannot match are skipped unread, match-unfiltered, and the
filters read back from the chunks' bloom fields after a restart. Over the wire (pika, both brokers):
tests/broker/conformance/test_stream_filters.py."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_amqp.broker.stream import StreamLog, records_view
from spark_amqp.broker.stream_filter import StreamMatcher, matcher_from_arguments


def _log(chunks: list[list], directory=None, size: int = 16) -> StreamLog:
    log = StreamLog(directory, filter_bytes=size)
    for values in chunks:
        for v in values:
            log.append(b"body", None if v is None else v.encode())
        log.seal()
    return log


def _read_all(log: StreamLog, matcher) -> list[int]:
    pos, out = log.first, []
    while pos < log.next:
        pos, runs = log.read_chunks(pos, 10_000, records_view, matcher)
        for first, entries in runs:
            out.extend(range(first, first + len(entries)))
    return out


values = st.one_of(st.none(), st.sampled_from([f"v{i}" for i in range(40)]))


@settings(max_examples=60, deadline=None)
@given(chunks=st.lists(st.lists(values, min_size=1, max_size=6), min_size=1, max_size=25),
       wanted=st.sets(st.sampled_from([f"v{i}" for i in range(40)]), min_size=1, max_size=3),
       unfiltered=st.booleans(), size=st.sampled_from([16, 17, 255]))
def test_no_false_negatives_and_whole_chunks(chunks, wanted, unfiltered, size):
    log = _log(chunks, size=size)
    m = StreamMatcher([w.encode() for w in wanted], unfiltered, size)
    got = set(_read_all(log, m))
    off = 0
    for values_ in chunks:
        offsets = set(range(off, off + len(values_)))
        must = any(v in wanted or (unfiltered and v is None) for v in values_)
        if must:   # a chunk with a wanted message is delivered, whole
            assert offsets <= got
        else:      # a chunk is delivered whole or not at all
            assert offsets <= got or not offsets & got
        off += len(values_)
    s = log.filter_stats
    assert s["chunks_read"] + s["chunks_skipped"] == len(chunks)


def test_a_chunk_that_cannot_match_is_never_read():
    chunks = [["v%d" % (i % 10)] * 3 for i in range(100)]
    log = _log(chunks)
    reads = []
    orig = log.chunk_data
    log.chunk_data = lambda i: reads.append(i) or orig(i)
    got = _read_all(log, StreamMatcher([b"v3"], False, 16))
    assert got == [o for i in range(3, 100, 10) for o in range(3 * i, 3 * i + 3)]
    assert reads == list(range(3, 100, 10))      # the other 90 chunks were not even read
    assert log.filter_stats["chunks_skipped"] == 90
    assert log.filter_stats["bytes_skipped"] > 0


def test_match_unfiltered_and_empty_filters():
    log = _log([[None, None], ["a"], ["a", None], ["b"]])
    assert _read_all(log, StreamMatcher([b"a"], False, 16)) == [2, 3, 4]
    assert _read_all(log, StreamMatcher([b"a"], True, 16)) == [0, 1, 2, 3, 4]
    assert _read_all(log, StreamMatcher([b"zzz"], True, 16)) == [0, 1, 3, 4]


def test_start_inside_a_chunk_and_credit():
    log = _log([["a"] * 5, ["b"] * 5, ["a"] * 5])
    pos, runs = log.read_chunks(2, 1, records_view, StreamMatcher([b"a"], False, 16))
    assert pos == 5 and runs[0][0] == 2 and len(runs[0][1]) == 3   # the chunk's rest, then stop
    pos, runs = log.read_chunks(pos, 100, records_view, StreamMatcher([b"a"], False, 16))
    assert pos == 15 and [(f, len(e)) for f, e in runs] == [(10, 5)]


def test_filters_are_read_back_when_the_segments_are_scanned(tmp_path):
    log = _log([["a"], ["b"], [None], ["a"]], directory=str(tmp_path))
    log.close()
    again = StreamLog(str(tmp_path), filter_bytes=16)
    assert _read_all(again, StreamMatcher([b"a"], False, 16)) == [0, 3]
    again.close()


def test_consumer_arguments_as_rabbitmq_parses_them():
    assert matcher_from_arguments({}, 16) is None
    assert matcher_from_arguments({"x-stream-filter": 5}, 16) is None
    assert matcher_from_arguments({"x-stream-filter": [1, True]}, 16) is None
    m = matcher_from_arguments({"x-stream-filter": ["a", 3, b"b"], "x-stream-match-unfiltered": "yes"}, 16)
    assert m.values == (b"a", b"b") and m.match_unfiltered is False
    assert matcher_from_arguments({"x-stream-filter": "a", "x-stream-match-unfiltered": True},
                                  16).match_unfiltered
    assert matcher_from_arguments({"x-stream-filter": [""]}, 16).match_unfiltered
