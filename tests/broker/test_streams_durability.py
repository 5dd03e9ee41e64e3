"""Stream queues with a data directory: restart and kill -9 after publisher confirms keep every
confirmed message at the same offset (issue 12, "Durability"); the segment log itself
(spark_amqp/broker/stream.py): osiris chunks in segments, torn tails, retention, tracking
chunks (stored offsets, publisher sequences) and the conversion of storage version 1."""

from __future__ import annotations

import os
import time

import pika
import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.broker.stream import (CHUNK_TRK_DELTA, CHUNK_TRK_SNAPSHOT, CHUNK_USER, SEGMENT_MAGIC, StreamLog,
                                      records_view)
from spark_amqp.protocol.properties import BasicProperties

STREAM = {"x-queue-type": "stream"}


def _conn(url):
    return pika.BlockingConnection(pika.URLParameters(url))


def read_stream(url: str, queue: str, expect: int, offset="first", timeout: float = 30.0) -> list[tuple[int, bytes]]:
    """(offset, body) of ``expect`` messages read from ``offset`` (acks every 500)."""
    c = _conn(url)
    ch = c.channel()
    ch.basic_qos(prefetch_count=1000)
    got: list = []

    def on(ch_, m, p, body):
        got.append((p.headers["x-stream-offset"], body))
        if len(got) % 500 == 0:
            ch_.basic_ack(m.delivery_tag, multiple=True)

    ch.basic_consume(queue, on, arguments={"x-stream-offset": offset})
    deadline = time.monotonic() + timeout
    while len(got) < expect and time.monotonic() < deadline:
        c.process_data_events(time_limit=0.05)
    c.process_data_events(time_limit=0.2)
    c.close()
    return got


def test_kill9_after_confirms_keeps_every_confirmed_message_and_offset(tmp_path, broker_process):
    from spark_amqp.client import connect

    b = broker_process(data_dir=str(tmp_path))
    c = _conn(b.url)
    ch = c.channel()
    # small segments: the log spans many segment files
    ch.queue_declare("s", durable=True, arguments={**STREAM, "x-stream-max-segment-size-bytes": 20_000})
    ch.confirm_delivery()
    for i in range(300):   # pika waits for each confirm
        ch.basic_publish("", "s", b"p%05d" % i)
    c.close()
    n = 5000
    with connect(b.url) as conn:   # pipelined publishes, then every confirm
        pch = conn.channel()
        pch.confirm_select()
        pch.publish_batch([(b"q%05d" % i, "", "s", BasicProperties(), False) for i in range(n)])
        assert not pch.wait_for_confirms(timeout=60).nacked
        b.kill()
    expected = [b"p%05d" % i for i in range(300)] + [b"q%05d" % i for i in range(n)]
    assert len(os.listdir(tmp_path / "streams" / "%2F" / "s")) > 2   # a chunk never spans segments
    b2 = broker_process(data_dir=str(tmp_path))
    got = read_stream(b2.url, "s", len(expected))
    assert [o for o, _ in got] == list(range(len(expected)))
    assert [body for _, body in got] == expected
    # new messages continue the offsets
    c = _conn(b2.url)
    ch = c.channel()
    ch.confirm_delivery()
    ch.basic_publish("", "s", b"after")
    c.close()
    assert read_stream(b2.url, "s", 1, offset=len(expected)) == [(len(expected), b"after")]


def test_clean_restart_keeps_stream_arguments_bindings_and_offsets(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path) as b:
        c = _conn(b.url)
        ch = c.channel()
        ch.exchange_declare("sx", "fanout", durable=True)
        ch.queue_declare("s", durable=True, arguments={**STREAM, "x-max-age": "7D"})
        ch.queue_bind("s", "sx")
        ch.confirm_delivery()
        for i in range(10):
            ch.basic_publish("sx", "k", b"m%d" % i)
        c.close()
    with EmbeddedBroker(data_dir=tmp_path) as b:
        c = _conn(b.url)
        ch = c.channel()
        assert ch.queue_declare("s", passive=True).method.message_count == 10
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:   # arguments recovered
            ch.queue_declare("s", durable=True, arguments={**STREAM, "x-max-age": "1D"})
        assert ei.value.reply_code == 406
        ch = c.channel()
        ch.confirm_delivery()
        ch.basic_publish("sx", "k", b"m10")
        got = read_stream(b.url, "s", 11)
        assert got == [(i, b"m%d" % i) for i in range(11)]
        ch.queue_delete("s")
        c.close()
    assert not (tmp_path / "streams" / "%2F" / "s").exists()


def test_confirm_comes_after_the_segment_fsync(tmp_path, monkeypatch):
    """The publisher confirm of a stream message waits for the fsync of its segment file."""
    synced: list[str] = []
    real = os.fsync

    def spy(fd):
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            path = ""
        real(fd)
        if path.endswith(".segment"):
            time.sleep(0.2)   # a slow disk: a confirm sent without waiting would come first
        synced.append(path)

    monkeypatch.setattr(os, "fsync", spy)
    with EmbeddedBroker(data_dir=tmp_path) as b:
        c = _conn(b.url)
        ch = c.channel()
        ch.queue_declare("s", durable=True, arguments=STREAM)
        ch.confirm_delivery()
        for i in range(3):
            before = sum(p.endswith(".segment") for p in synced)
            ch.basic_publish("", "s", b"m%d" % i)      # returns once confirmed
            assert sum(p.endswith(".segment") for p in synced) > before
        c.close()


# ---------------------------------------------------------------------------------- the log

def _fill(log: StreamLog, n: int, start: int = 0, size: int = 50) -> None:
    for i in range(start, start + n):
        log.append((b"b%d" % i).ljust(size, b"."))
        log.seal()  # one chunk each


def _read(log: StreamLog, offset: int, limit: int) -> tuple[int, list]:
    """(offset of the first record read, records) from ``offset``, at most ``limit``."""
    _, runs = log.read_chunks(offset, limit, records_view)
    if not runs:
        return offset, []
    out = [r for _, rs in runs for r in rs]
    return runs[0][0], out[:limit]


def test_log_rolls_segments_and_reads_any_offset(tmp_path):
    log = StreamLog(str(tmp_path), max_segment_bytes=500)
    _fill(log, 40)
    assert len(log.segments) > 5 and (log.first, log.next) == (0, 40)
    start, entries = _read(log, 17, 5)
    assert start == 17 and [e[:3] for e in entries] == [b"b17", b"b18", b"b19", b"b20", b"b21"]
    log.close()
    again = StreamLog(str(tmp_path), max_segment_bytes=500)
    assert (again.first, again.next) == (0, 40)
    assert _read(again, 39, 10)[1][0][:3] == b"b39"
    for name in os.listdir(tmp_path):
        with open(tmp_path / name, "rb") as f:
            assert f.read(8) == SEGMENT_MAGIC
    again.close()


def test_log_cuts_a_torn_tail_at_start(tmp_path):
    log = StreamLog(str(tmp_path))
    _fill(log, 5)
    seg = log.segments[-1]
    path = seg.path
    log.close()
    size = os.path.getsize(path)
    with open(path, "r+b") as f:   # half of the last chunk written, then a crash
        f.truncate(size - 10)
    again = StreamLog(str(tmp_path))
    assert (again.first, again.next) == (0, 4)
    _fill(again, 1, start=4)
    assert [e[:2] for e in _read(again, 0, 10)[1]] == [b"b0", b"b1", b"b2", b"b3", b"b4"]
    again.close()
    with open(path, "r+b") as f:   # a flipped byte in the last chunk: its CRC fails
        f.seek(os.path.getsize(path) - 3)
        f.write(b"X")
    third = StreamLog(str(tmp_path))
    assert third.next == 4
    third.close()


def test_retention_by_bytes_keeps_the_last_segment_offsets_unchanged():
    log = StreamLog(None, max_segment_bytes=400, max_bytes=1000)
    _fill(log, 100)
    assert log.first > 0 and log.next == 100
    assert log.bytes <= 1000 + 400
    start, entries = _read(log, 0, 1000)      # below the start: from the first retained
    assert start == log.first and entries[0].startswith(b"b%d" % log.first)
    tiny = StreamLog(None, max_segment_bytes=100, max_bytes=1)
    _fill(tiny, 10)
    assert tiny.message_count >= 1 and tiny.next == 10


def test_stored_offsets_take_an_offset_and_survive_a_restart(tmp_path):
    """As RabbitMQ 3.10.8 (rstream: publish, StoreOffset twice, publish: offsets 0 and 3): a
    write batch with tracking and no messages is a tracking delta chunk that takes an offset;
    readers skip it. With messages, the tracking rides in the user chunk's trailer."""
    log = StreamLog(str(tmp_path))
    log.append(b"a")
    log.seal()
    log.store_offset(b"ref1", 0)
    log.seal()
    log.store_offset(b"ref2", 0)
    log.seal()
    assert log.append(b"b") == 3
    log.track_writer(b"producer", 7)
    log.store_offset(b"ref1", 3)
    log.seal()
    assert log.c_type == [CHUNK_USER, CHUNK_TRK_DELTA, CHUNK_TRK_DELTA, CHUNK_USER]
    _, runs = log.read_chunks(0, 100, records_view)
    assert runs == [(0, [b"a"]), (3, [b"b"])]
    assert (log.query_offset(b"ref1"), log.query_offset(b"ref2"), log.writer_sequence(b"producer")) == (3, 0, 7)
    assert log.is_duplicate(b"producer", 7) and not log.is_duplicate(b"producer", 8)
    log.close()
    again = StreamLog(str(tmp_path))
    assert (again.query_offset(b"ref1"), again.query_offset(b"ref2"), again.writer_sequence(b"producer")) == (3, 0, 7)
    assert again.next == 4 and again.query_offset(b"nobody") is None
    again.close()


def test_a_new_segment_starts_with_a_tracking_snapshot_that_outlives_retention():
    log = StreamLog(None, max_segment_bytes=300, max_bytes=600)
    log.store_offset(b"c", 1)
    log.track_writer(b"p", 1)
    log.append(b"x" * 100)
    log.seal()
    for i in range(30):
        log.append(b"y" * 100)
        log.seal()
    assert CHUNK_TRK_SNAPSHOT in log.c_type[log.head:]
    assert log.first > 0 and log.query_offset(b"c") == 1 and log.writer_sequence(b"p") == 1
    # every segment after the first begins with a snapshot
    starts = {id(s): i for i, s in reversed(list(enumerate(log.c_seg)))}
    assert all(log.c_type[i] == CHUNK_TRK_SNAPSHOT for i in starts.values() if i > log.head)


def test_storage_version_1_is_converted_with_the_same_offsets(tmp_path):
    """A stream written before issue 38 (chunks of 0-9-1 messages) is converted at start."""
    import struct
    import zlib
    from spark_amqp.broker.stream_convert import StreamConversions

    def v1_chunk(first, msgs, ts):
        payload = b"".join(struct.pack(">HII", len(e), len(p), len(b)) + e + p + b for e, p, b in msgs)
        tail = struct.pack(">IQIQ", len(payload), first, len(msgs), ts)
        return struct.pack(">I", zlib.crc32(payload, zlib.crc32(tail))) + tail + payload

    enc = b"\x00\x01s"
    props = BasicProperties(content_type="t", headers={"h": 1}).encode()
    with open(tmp_path / f"{0:020d}.segment", "wb") as f:
        f.write(v1_chunk(0, [(enc, props, b"m0"), (enc, props, b"m1")], 1000))
        f.write(v1_chunk(2, [(enc, b"\x00\x00", b"m2")], 2000))
    conv = StreamConversions("s", "3.10")
    log = StreamLog(str(tmp_path), convert_v1=conv.message)
    assert (log.first, log.next, log.c_first, log.c_ts) == (0, 3, [0, 2], [1000, 2000])
    _, runs = log.read_chunks(0, 10, conv.view)
    assert [(o, [b for _, _, b in es]) for o, es in runs] == [(0, [b"m0", b"m1"]), (2, [b"m2"])]
    stored = _read(log, 0, 1)[1][0]
    assert stored == conv.message("", "s", props, b"m0")
    log.close()
    with pytest.raises(ValueError, match="version 1"):
        with open(tmp_path / f"{3:020d}.segment", "wb") as f:
            f.write(v1_chunk(3, [(enc, props, b"m3")], 3000))
        StreamLog(str(tmp_path))
