"""Stream mode of the amqp source without Spark queries: options, canonical offsets, planning
(pure), and the driver probe + executor range reader against the brokers (no Spark)."""

from __future__ import annotations

import json
import pickle

import pytest

from spark_amqp.spark.source.streams.offsets import (StreamOffset, StreamRange, plan_ends,
                                                    split_ranges)
from spark_amqp.spark.source.stream_options import is_stream_mode, parse_stream_options
from spark_amqp.spark.source.streams.reader import (AmqpStreamBatchReader, AmqpStreamOffsetReader,
                                            StreamRangePartition)

from source_helpers import delete, publish, wait_until
from stream_helpers import declare_stream, pika_read


# -- options ---------------------------------------------------------------------------------

def test_stream_mode_is_chosen_by_stream_or_superstream():
    assert is_stream_mode({"Stream": "s"}) and is_stream_mode({"superstream": "x"})
    assert not is_stream_mode({"queue": "q"})


def test_parse_defaults_and_values():
    o = parse_stream_options({"stream": " a , b ", "startingoffsets": '{"a": 5, "b": -2}',
                              "maxmessagespertrigger": "10", "minpartitions": "3",
                              "failondataloss": "FALSE", "prefetch": "100"})
    assert o.streams == ("a", "b") and o.starting == {"a": 5, "b": -2}
    assert o.max_messages_per_trigger == 10 and o.min_partitions == 3
    assert o.fail_on_data_loss is False and o.prefetch == 100 and o.ending is None
    d = parse_stream_options({"stream": "a"})
    assert d.starting is None and d.fail_on_data_loss and d.prefetch == 2000
    assert parse_stream_options({"superStream": "inv"}).super_stream == "inv"
    pickle.loads(pickle.dumps(o))


@pytest.mark.parametrize("opts, match", [
    ({"stream": "a", "superstream": "b"}, "exclusive"),
    ({"stream": "a,,b"}, "'stream'"),
    ({"stream": "a,a"}, "listed twice"),
    ({"stream": "a", "queue": "q"}, "queue mode"),
    ({"stream": "a", "startingoffsets": "first"}, "'startingOffsets'.*earliest, latest"),
    ({"stream": "a", "startingoffsets": '{"a": -3}'}, "'startingOffsets'"),
    ({"stream": "a", "startingoffsets": '{"a": 1.5}'}, "'startingOffsets'"),
    ({"stream": "a", "startingoffsets": '{"b": 1}'}, "unknown stream.*b.*missing stream.*a"),
    ({"stream": "a", "endingoffsets": "[1]"}, "'endingOffsets'"),
    ({"stream": "a", "startingtimestamp": "yesterday"}, "'startingTimestamp'"),
    ({"stream": "a", "startingtimestamp": "1", "startingoffsets": "earliest"}, "exclusive"),
    ({"stream": "a", "prefetch": "0"}, "'prefetch'.*1..65535"),
    ({"stream": "a", "prefetch": "70000"}, "1..65535"),
    ({"stream": "a", "maxmessagespertrigger": "0"}, "'maxMessagesPerTrigger'"),
    ({"stream": "a", "minpartitions": "x"}, "'minPartitions'"),
    ({"stream": "a", "failondataloss": "yes"}, "'failOnDataLoss'"),
    ({"stream": "a", "readtimeout": "-1"}, "'readTimeout'"),
    ({"stream": "a", "uri": "http://x"}, "amqp://"),
])
def test_bad_options_name_the_option(opts, match):
    with pytest.raises(ValueError, match=match):
        parse_stream_options(opts)


def test_ending_offsets_refused_in_streaming_and_bad_batch_bounds():
    with pytest.raises(ValueError, match="batch reads"):
        AmqpStreamOffsetReader(parse_stream_options({"stream": "a", "endingoffsets": "latest"}))
    with pytest.raises(ValueError, match="cannot be 'latest'"):
        AmqpStreamBatchReader(parse_stream_options({"stream": "a", "startingoffsets": "latest"}))
    with pytest.raises(ValueError, match="cannot be 'latest'"):
        AmqpStreamBatchReader(parse_stream_options({"stream": "a",
                                                    "startingoffsets": '{"a": -1}'}))
    with pytest.raises(ValueError, match="cannot be 'earliest'"):
        AmqpStreamBatchReader(parse_stream_options({"stream": "a", "endingoffsets": "earliest"}))


# -- offsets and planning --------------------------------------------------------------------

def test_offsets_are_canonical_json():
    a = StreamOffset.make({"b": 2, "a": 10})
    b = StreamOffset.from_dict('{"streams": {"a": 10, "b": 2}}')
    assert a == b and a.to_json() == '{"streams": {"a": 10, "b": 2}}'
    assert json.dumps(a.to_dict(), sort_keys=True) == a.to_json()
    assert list(a.to_dict()["streams"]) == ["a", "b"]
    with pytest.raises(ValueError, match="new checkpointLocation"):
        StreamOffset.from_dict({"queues": {"q": 1}, "session": "x"})
    with pytest.raises(ValueError, match="stream mode"):
        StreamOffset.from_dict({"streams": {"a": -1}})


def test_plan_ends_fair_split_and_caps():
    start = {"a": 0, "b": 100, "c": 5}
    tails = {"a": 1000, "b": 110, "c": 5}
    assert plan_ends(start, tails, None) == {"a": 1000, "b": 110, "c": 5}
    # 100 rows: b can use 10, the rest goes to a; c has nothing
    assert plan_ends(start, tails, 100) == {"a": 90, "b": 110, "c": 5}
    assert plan_ends(start, tails, 7) == {"a": 4, "b": 103, "c": 5}
    assert plan_ends(start, tails, None, caps={"a": 50}) == {"a": 50, "b": 110, "c": 5}
    assert plan_ends({"a": 10}, {}, None) == {"a": 10}     # an unknown tail: nothing new


def test_split_ranges_tiles_exactly():
    r = split_ranges({"a": 0, "b": 10}, {"a": 25, "b": 12}, 10)
    assert r == [StreamRange("a", 0, 10), StreamRange("a", 10, 20), StreamRange("a", 20, 25),
                 StreamRange("b", 10, 12)]
    r = split_ranges({"a": 0}, {"a": 9}, 100, min_partitions=4)
    assert len(r) == 4 and r[0].start == 0 and r[-1].end == 9
    assert all(x.end == y.start for x, y in zip(r, r[1:]))
    assert split_ranges({"a": 0}, {"a": 2}, 100, min_partitions=5) == [
        StreamRange("a", 0, 1), StreamRange("a", 1, 2)]
    assert split_ranges({"a": 5}, {"a": 5}, 10) == []


def test_partitions_and_pickling_of_the_reader():
    r = AmqpStreamOffsetReader(parse_stream_options({"stream": "a,b",
                                                     "maxmessagesperpartition": "4"}))
    parts = r.partitions({"streams": {"a": 0, "b": 3}}, {"streams": {"a": 6, "b": 5}})
    assert [(p.stream, p.start, p.end) for p in parts] == [("a", 0, 4), ("a", 4, 6),
                                                           ("b", 3, 5)]
    r2 = pickle.loads(pickle.dumps(r))
    assert r2.options == r.options and r2._planner._probe is None
    assert isinstance(pickle.loads(pickle.dumps(parts[0])), StreamRangePartition)


class FakeProbe:
    """Tails/first offsets from dicts; counts probes."""

    def __init__(self, tails, firsts=None):
        self.tail_of, self.first_of, self.calls = tails, firsts or {}, 0
        self.bytes_received = 0

    def check_exists(self, s):
        pass

    def tails(self, streams, wait):
        self.calls += 1
        return {s: self.tail_of.get(s) for s in streams}

    def firsts(self, streams, wait):
        return {s: self.first_of.get(s, 0) for s in streams}

    def at_timestamp(self, s, ms, wait):
        return 3

    def close(self):
        pass


def test_latest_offset_plans_up_to_the_tail_and_reports_it():
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    probe = FakeProbe({"a": 50, "b": None})
    r = AmqpStreamOffsetReader(parse_stream_options({"stream": "a,b",
                                                     "startingoffsets": "earliest"}),
                               probe_factory=lambda o: probe)
    start = r.initialOffset()
    assert start == {"streams": {"a": 0, "b": 0}}
    assert r.latestOffset(start, ReadMaxRows(20)) == {"streams": {"a": 20, "b": 0}}
    assert r.reportLatestOffset() == {"streams": {"a": 50}}
    end = r.latestOffset({"streams": {"a": 20, "b": 0}}, ReadAllAvailable())
    assert end == {"streams": {"a": 50, "b": 0}}
    probe.tail_of["a"] = 70
    r._next_probe = 0
    r.prepareForTriggerAvailableNow()
    probe.tail_of["a"] = 90                      # after the snapshot: not in this run
    assert r.latestOffset(end, ReadAllAvailable()) == {"streams": {"a": 70, "b": 0}}


def test_starting_latest_and_timestamp_resolve_on_the_broker():
    probe = FakeProbe({"a": 42})
    r = AmqpStreamOffsetReader(parse_stream_options({"stream": "a"}),
                               probe_factory=lambda o: probe)
    assert r.initialOffset() == {"streams": {"a": 42}}
    r = AmqpStreamOffsetReader(parse_stream_options({"stream": "a", "startingtimestamp": "5"}),
                               probe_factory=lambda o: probe)
    assert r.initialOffset() == {"streams": {"a": 3}}


# -- the probe and the range reader against the brokers (no Spark) ---------------------------

@pytest.fixture
def filled_stream(broker_url, unique):
    s = unique("st")
    declare_stream(broker_url, s)
    publish(broker_url, s, [b"m%d" % i for i in range(1000)])
    yield s
    delete(broker_url, s)


def test_probe_finds_first_and_tail_without_reading_the_stream(broker_url, filled_stream):
    from spark_amqp.spark.source.streams.probe import NotAStream, StreamMissing, StreamProbe

    p = StreamProbe(broker_url)
    try:
        assert p.tail(filled_stream, 3.0) == 1000
        assert p.first(filled_stream, 3.0) == 0
        assert p.at_timestamp(filled_stream, 0, 3.0) == 0
        assert p.at_timestamp(filled_stream, 4102444800000, 0.5) is None   # year 2100
        with pytest.raises(StreamMissing, match="does not exist"):
            p.check_exists(filled_stream + "-missing")
        assert p.bytes_received < 1000 * 60      # not the whole stream (one chunk per probe)
    finally:
        p.close()


def test_probe_finds_a_live_tail_in_bounded_time_never_past_it(broker_url, unique):
    """Issue 26: while a publisher writes as fast as the broker confirms, every tail probe
    returns (the old probe chased the tail: it returned only after a 50 ms silence, or
    never), with a tail between what was confirmed before it began and what was published
    when it ended (an offset seen, never guessed), and without reading the stream through
    the driver; once the publisher stops, the probe finds the exact end. Probing several
    streams at once gives each its own tail."""
    import threading
    import time

    from spark_amqp.client import connect
    from spark_amqp.spark.source.streams.probe import StreamProbe

    s, empty = unique("st-live"), unique("st-empty")
    declare_stream(broker_url, s)
    declare_stream(broker_url, empty)
    counts = {"confirmed": 0, "published": 0}
    stop = threading.Event()

    def publisher():
        with connect(broker_url) as conn:
            ch = conn.channel()
            ch.confirm_select()
            while not stop.is_set():
                counts["published"] += 50
                ch.publish_batch([(b"x" * 100, "", s)] * 50)
                ch.wait_for_confirms(timeout=60)
                counts["confirmed"] += 50

    th = threading.Thread(target=publisher, daemon=True)
    th.start()
    p = StreamProbe(broker_url)
    tails = []
    try:
        wait_until(lambda: counts["confirmed"] >= 500, 30, what="the publisher to start")
        for i in range(20):
            before = counts["confirmed"]
            t0 = time.monotonic()
            # once with an empty stream too (which takes the whole wait)
            got = p.tails([s, empty], 1.0) if i == 0 else p.tails([s], 3.0)
            took = time.monotonic() - t0
            after = counts["published"]
            assert got.get(empty) is None
            assert before <= got[s] <= after, (before, got, after)
            assert took < 10, f"a probe took {took:.1f}s on a live stream"
            tails.append(got[s])
        assert tails == sorted(tails) and tails[-1] > tails[0]    # it follows the stream
        assert p.bytes_received < counts["published"] * 100 / 4  # not the stream's data
        # an executor's range read on the live stream stops at the range's end
        from spark_amqp.spark.source.streams.consumer import read_range

        o = parse_stream_options({"stream": s, "uri": broker_url, "prefetch": "100"})
        end = min(tails[-1], tails[0] + 3000)
        got = [x for b in read_range(o, s, tails[0] - 7, end)
               for x in b.column("offset").to_pylist()]
        assert got == list(range(tails[0] - 7, end))
    finally:
        stop.set()
        th.join(60)
        try:
            assert p.tail(s, 3.0) == counts["confirmed"]           # the exact end, at rest
        finally:
            p.close()
            delete(broker_url, s, empty)


def test_probe_refuses_a_classic_queue(broker_url, unique):
    from source_helpers import declare
    from spark_amqp.spark.source.streams.probe import NotAStream, StreamProbe

    q = unique("classic")
    declare(broker_url, q)
    publish(broker_url, q, [b"x"])
    p = StreamProbe(broker_url)
    try:
        with pytest.raises(NotAStream, match="not a stream queue.*'queue'"):
            p.tail(q, 3.0)
    finally:
        p.close()
        from source_helpers import message_count

        assert message_count(broker_url, q) == 1     # nacked back, nothing lost
        delete(broker_url, q)


@pytest.mark.parametrize("start, end", [(0, 1000), (17, 433), (999, 1000), (500, 501)])
def test_read_range_matches_pika(broker_url, filled_stream, start, end):
    import pyarrow as pa

    from spark_amqp.spark.source.streams.consumer import read_range

    o = parse_stream_options({"stream": filled_stream, "uri": broker_url, "prefetch": "50"})
    t = pa.Table.from_batches(list(read_range(o, filled_stream, start, end)))
    want = pika_read(broker_url, filled_stream, start, end)
    assert t.column("offset").to_pylist() == [w[0] for w in want] == list(range(start, end))
    assert t.column("body").to_pylist() == [w[1] for w in want]
    assert set(t.column("queue").to_pylist()) == {filled_stream}


def test_read_range_split_anywhere_loses_nothing(broker_url, filled_stream):
    from spark_amqp.spark.source.streams.consumer import read_range

    o = parse_stream_options({"stream": filled_stream, "uri": broker_url})
    got = []
    for r in split_ranges({filled_stream: 3}, {filled_stream: 1000}, 1000, min_partitions=7):
        for b in read_range(o, r.stream, r.start, r.end):
            got += b.column("offset").to_pylist()
    assert got == list(range(3, 1000))


@pytest.fixture
def truncated_stream(broker_url, unique):
    """A stream whose first offsets retention has removed (small segments, small max length)."""
    from spark_amqp.spark.source.streams.probe import StreamProbe

    s = unique("st-retention")
    declare_stream(broker_url, s, {"x-max-length-bytes": 20_000,
                                   "x-stream-max-segment-size-bytes": 5_000})
    for _ in range(10):
        publish(broker_url, s, [b"%0200d" % i for i in range(100)])
    p = StreamProbe(broker_url)
    try:
        first = p.first(s, 3.0)
        tail = p.tail(s, 3.0)
    finally:
        p.close()
    if not first:
        delete(broker_url, s)
        pytest.skip(f"this broker kept every offset of {s} (retention did not remove any)")
    yield s, first, tail
    delete(broker_url, s)


def test_fail_on_data_loss(broker_url, truncated_stream):
    from spark_amqp.spark.source.streams.consumer import LOST, DataLoss, read_range

    s, first, tail = truncated_stream
    o = parse_stream_options({"stream": s, "uri": broker_url})
    with pytest.raises(DataLoss, match=f"{s}.*wanted offset 0, first retained offset {first}"):
        list(read_range(o, s, 0, tail))
    o = parse_stream_options({"stream": s, "uri": broker_url, "failOnDataLoss": "false"})
    before = LOST["offsets"]
    got = [x for b in read_range(o, s, 0, tail) for x in b.column("offset").to_pylist()]
    assert got == [w[0] for w in pika_read(broker_url, s, 0, tail)]   # may have gaps
    assert got[0] == first and LOST["offsets"] - before == first
    # a range wholly removed: nothing, and no hang
    assert [b for b in read_range(o, s, 0, first)] == []


# -- super streams ---------------------------------------------------------------------------

def _murmur3_x86_32(data: bytes, seed: int) -> int:
    """An independent MurmurHash3 x86 32-bit (Austin Appleby's reference algorithm)."""
    c1, c2, m = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed & m
    n = len(data) // 4 * 4
    for i in range(0, n, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * c1) & m
        k = ((k << 15) | (k >> 17)) & m
        k = (k * c2) & m
        h ^= k
        h = ((h << 13) | (h >> 19)) & m
        h = (h * 5 + 0xE6546B64) & m
    k = 0
    tail = data[n:]
    for j in reversed(range(len(tail))):
        k = (k << 8) | tail[j]
    if tail:
        k = (k * c1) & m
        k = ((k << 15) | (k >> 17)) & m
        k = (k * c2) & m
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & m
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & m
    h ^= h >> 16
    return h


def test_super_stream_routing_matches_known_hashes():
    import mmh3

    from spark_amqp.spark.sink.super_stream import SEED, key_hash, partition_index, partition_name

    # published MurmurHash3 x86_32 vectors (SMHasher): mmh3 is that hash
    for data, seed, want in [(b"", 1, 0x514E28B7), (b"", 0xFFFFFFFF, 0x81F16F39),
                             (b"\0\0\0\0", 0, 0x2362F9DE),
                             (b"Hello, world!", 0x9747B28C, 0x24884CBA),
                             (b"The quick brown fox jumps over the lazy dog", 0x9747B28C,
                              0x2FA826CD)]:
        assert mmh3.hash(data, seed, signed=False) == want == _murmur3_x86_32(data, seed)
    assert SEED == 104729
    keys = ["", "a", "hello", "order-42", "ünïcode", "x" * 37] + [str(i) for i in range(200)]
    negative = 0
    for k in keys:
        h = _murmur3_x86_32(k.encode(), 104729)
        negative += h >= 2 ** 31         # a negative Java int: remainderUnsigned matters
        assert key_hash(k) == h
        for n in (1, 2, 3, 5, 7):
            assert partition_index(k, n) == h % n
    assert negative > 0
    from spark_amqp.client import streams as client_streams   # the CLI's own murmur3 agrees
    assert all(client_streams.partition_for(k, 5) == partition_index(k, 5) for k in keys)
    assert partition_name("inv", "hello", 3) == f"inv-{_murmur3_x86_32(b'hello', 104729) % 3}"
    with pytest.raises(ValueError):
        partition_index("k", 0)


def test_super_stream_source_finds_partitions(broker_url, unique):
    from spark_amqp.spark.source.streams.probe import (StreamMissing, StreamProbe,
                                                      super_stream_partitions)

    name = unique("super")
    for i in range(3):
        declare_stream(broker_url, f"{name}-{i}")
    p = StreamProbe(broker_url)
    try:
        assert super_stream_partitions(p, name) == [f"{name}-{i}" for i in range(3)]
        with pytest.raises(StreamMissing, match="no partition"):
            super_stream_partitions(p, name + "x")
    finally:
        p.close()
        delete(broker_url, *[f"{name}-{i}" for i in range(3)])


def test_read_range_fails_over_inside_the_task_exactly_once(broker_url, filled_stream,
                                                            monkeypatch, caplog):
    """Issue 27: the connection of a range read is cut mid-range (a node going away); the
    read reconnects through the next address and goes on after the last offset it yielded:
    every offset exactly once, in order."""
    from urllib.parse import urlparse

    from faults_proxy import FaultProxy   # tests/faults_proxy.py

    from spark_amqp.spark.source.streams import consumer as stream_consumer
    from spark_amqp.spark.source.streams.consumer import read_range

    monkeypatch.setattr(stream_consumer, "ARROW_BATCH_ROWS", 100)
    with FaultProxy(broker_url) as proxy:
        u = urlparse(broker_url)
        uri = (f"amqp://guest:guest@127.0.0.1:{proxy.port},127.0.0.1:{u.port}"
               f"{u.path or '/%2F'}")
        o = parse_stream_options({"stream": filled_stream, "uri": uri, "prefetch": "50",
                                  "shuffleAddresses": "false"})
        got = []
        for i, b in enumerate(read_range(o, filled_stream, 5, 1000)):
            got += b.column("offset").to_pylist()
            if i == 1:
                proxy.cut()
                proxy.close()  # the first address is gone for good
        assert got == list(range(5, 1000))
        assert proxy.accepted == 1
        assert "connection lost while reading offsets [" in caplog.text


def test_range_read_reconnects_on_a_node_without_a_running_replica():
    """RabbitMQ 3.10 answers basic.consume on a node whose replica of the stream is not
    running (just restarted) with 406 "... does not have a replica on the local node", 506
    "... does not have a running local replica" or, during a re-election, 541 INTERNAL_ERROR:
    worth a reconnect, as a lost connection; other 406s/506s and read timeouts are not (the
    client's one classification, spark_amqp.client.failover)."""
    from spark_amqp.client.errors import ConnectionLost
    from spark_amqp.client.failover import retryable as _lost_connection
    from spark_amqp.protocol.errors import (ConnectionForced, InternalError, PreconditionFailed,
                                            ResourceError)
    from spark_amqp.spark.source.streams.consumer import ReadTimeout

    assert _lost_connection(PreconditionFailed(
        "PRECONDITION_FAILED - queue 'queue 's' in vhost '/'' does not have a replica on the "
        "local node"))
    assert not _lost_connection(PreconditionFailed("PRECONDITION_FAILED - inequivalent arg"))
    # 3.10 while a stopped node's replicas restart (seen in CI: the cluster's stream test)
    assert _lost_connection(ResourceError(
        "RESOURCE_ERROR - queue 's' in vhost '/' does not have a running local replica"))
    assert not _lost_connection(ResourceError("RESOURCE_ERROR - cannot allocate"))
    # 3.10 answering a range read's basic.consume right after kill -9 of the stream's leader
    # (seen in the cluster's kill -9 test): the consume crashed on that node during the
    # re-election; another node, or the same one a moment later, serves it
    assert _lost_connection(InternalError("INTERNAL_ERROR"))
    assert _lost_connection(ConnectionLost("reset")) and _lost_connection(
        ConnectionForced("CONNECTION_FORCED - shutdown"))
    assert not _lost_connection(ReadTimeout("no delivery"))


# -- failover of the driver's probe (issue 27) -----------------------------------------------

def test_connect_avoiding_tries_the_nodes_without_a_replica_last():
    from spark_amqp.client.failover import connect_avoiding

    calls = []

    def fake_connect(uri, **kw):
        calls.append(kw)
        return "conn"

    uri = "amqp://guest:guest@h1:5001,h2:5002,h3:5003/%2F"
    assert connect_avoiding(fake_connect, uri, {"heartbeat": 5}, set()) == "conn"
    assert calls[-1] == {"heartbeat": 5}                     # nothing to avoid: unchanged
    for _ in range(20):
        connect_avoiding(fake_connect, uri, {}, {"h1:5001"})
        assert calls[-1]["addresses"][-1] == ("h1", 5001)     # shuffled, the avoided one last
        assert calls[-1]["shuffle_addresses"] is False
    connect_avoiding(fake_connect, uri, {"shuffle_addresses": False}, {"h2:5002"})
    assert calls[-1]["addresses"] == (("h1", 5001), ("h3", 5003), ("h2", 5002))


def test_probe_goes_on_at_once_on_a_node_with_a_running_replica(monkeypatch):
    """RabbitMQ 3.10 answers the probe's basic.consume on a node whose replica is restarting
    with 506 "does not have a running local replica" (closing the connection): the probe
    takes another node within the same call, and tries that node last from then on."""
    from types import SimpleNamespace

    from spark_amqp.protocol.errors import ResourceError
    from spark_amqp.spark.source.streams.probe import StreamProbe

    class Conn:
        def __init__(self, kw):
            host, port = kw["addresses"][0] if "addresses" in kw else ("h1", 5001)
            self.params = SimpleNamespace(host=host, port=port)
            self.is_open = True

        def close(self):
            self.is_open = False

    used = []

    def probe_once(self, streams, spec, wait, whole_chunk):
        used.append(self.conn.params.port)
        if self.conn.params.port == 5001:
            raise ResourceError("RESOURCE_ERROR - queue 's' in vhost '/' does not have a "
                                "running local replica")
        return {s: (0, 41) for s in streams}

    monkeypatch.setattr(StreamProbe, "_probe_once", probe_once)
    p = StreamProbe("amqp://guest:guest@h1:5001,h2:5002/%2F?shuffle_addresses=false",
                    connect_fn=lambda uri, **kw: Conn(kw))
    assert p.tails(["s"]) == {"s": 42}
    assert used == [5001, 5002] and p.avoid == {"h1:5001"}
    assert "h1:5001: ResourceError" in p.errors.describe()
    assert p.tails(["s"]) == {"s": 42} and used[-1] == 5002


def test_tail_probes_failing_longer_than_failover_timeout_fail_the_query():
    """Every node down: each trigger plans with the tails known so far and probes again;
    after failoverTimeout the query fails with one error listing every address and its last
    error (real connects to closed ports)."""
    import time

    from spark_amqp.client.failover import BrokerUnreachable as StreamBrokerUnreachable

    o = parse_stream_options({"stream": "a", "uri": "amqp://guest:guest@127.0.0.1:1,"
                              "127.0.0.1:2/%2F", "failovertimeout": "1",
                              "connectiontimeout": "1"})
    r = AmqpStreamOffsetReader(o)
    r._planner._streams = ("a",)              # as after the first trigger
    r._tails = {"a": 30}
    start = {"streams": {"a": 10}}
    t0 = time.monotonic()
    assert r.latestOffset(start, None) == {"streams": {"a": 30}}   # the known tail
    with pytest.raises(StreamBrokerUnreachable) as e:
        while time.monotonic() - t0 < 10:
            r._next_probe = 0
            r.latestOffset(start, None)
            time.sleep(0.1)
    text = str(e.value)
    assert "failoverTimeout 1 s" in text and "guest:guest" not in text
    assert "127.0.0.1:1: " in text and "127.0.0.1:2: " in text, text
    assert "refused" in text.lower(), text
    assert 1 <= time.monotonic() - t0 < 10


def test_range_read_gives_up_after_failover_timeout_with_a_clear_error():
    """No node reachable: the executor's range read retries for failoverTimeout, then fails
    naming the stream, the offsets, the bound and every address' error."""
    import time

    from spark_amqp.spark.source.streams.consumer import read_range
    from spark_amqp.client.failover import BrokerUnreachable as StreamBrokerUnreachable

    o = parse_stream_options({"stream": "s", "uri": "amqp://guest:guest@127.0.0.1:1,"
                              "127.0.0.1:2/%2F", "failovertimeout": "0.5"})
    t0 = time.monotonic()
    with pytest.raises(StreamBrokerUnreachable) as e:
        list(read_range(o, "s", 10, 20))
    text = str(e.value)
    assert 0.5 <= time.monotonic() - t0 < 10
    assert "offsets [10, 20) of stream 's'" in text and "failoverTimeout 0.5 s" in text, text
    assert "127.0.0.1:1" in text and "127.0.0.1:2" in text and "guest:guest" not in text, text


def test_read_of_spark_placeholder_partition_is_empty():
    """A batch read whose planned ranges are empty: PySpark reads one ``InputPartition(None)``
    (plan_data_source_read.py) which must give no rows, not an AttributeError."""
    from pyspark.sql.datasource import InputPartition

    from spark_amqp.spark.source.streams.reader import _read

    assert list(_read(None, InputPartition(None))) == []
