"""Stream queues with a data directory: restart and kill -9 after publisher confirms keep every
confirmed message at the same offset (issue 12, "Durability"); the segment log itself
(spark_amqp/broker/stream.py): segments, torn tails, retention, the offset header."""

from __future__ import annotations

import os
import time

import pika
import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.broker.stream import StreamLog, add_offset_header
from spark_amqp.protocol.properties import BasicProperties, decode_properties

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


# ---------------------------------------------------------------------------------- the log

def _fill(log: StreamLog, n: int, start: int = 0, size: int = 50) -> None:
    for i in range(start, start + n):
        log.append(b"\x00\x01q", b"\x00\x00", (b"b%d" % i).ljust(size, b"."))
        log.seal()  # one chunk each


def test_log_rolls_segments_and_reads_any_offset(tmp_path):
    log = StreamLog(str(tmp_path), max_segment_bytes=500)
    _fill(log, 40)
    assert len(log.segments) > 5 and (log.first, log.next) == (0, 40)
    start, entries = log.read(17, 5)
    assert start == 17 and [e[2][:3] for e in entries] == [b"b17", b"b18", b"b19", b"b20", b"b21"]
    log.close()
    again = StreamLog(str(tmp_path), max_segment_bytes=500)
    assert (again.first, again.next) == (0, 40)
    assert again.read(39, 10)[1][0][2][:3] == b"b39"
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
    assert [e[2][:2] for e in again.read(0, 10)[1]] == [b"b0", b"b1", b"b2", b"b3", b"b4"]
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
    start, entries = log.read(0, 1000)      # below the start: from the first retained
    assert start == log.first and entries[0][2].startswith(b"b%d" % log.first)
    tiny = StreamLog(None, max_segment_bytes=100, max_bytes=1)
    _fill(tiny, 10)
    assert tiny.message_count >= 1 and tiny.next == 10


@pytest.mark.parametrize("props", [
    BasicProperties(),
    BasicProperties(content_type="text/plain", content_encoding="gzip", delivery_mode=2),
    BasicProperties(content_type="a", headers={"h": 1, "s": "x"}, priority=3, message_id="m"),
])
def test_add_offset_header(props):
    raw = props.encode()
    out = decode_properties(add_offset_header(raw, 2 ** 40), 0, len(add_offset_header(raw, 2 ** 40)))
    want = dict(props.as_dict())
    want["headers"] = {**(props.headers or {}), "x-stream-offset": 2 ** 40}
    got = out.as_dict()
    assert {k: v for k, v in got.items() if v is not None} == {k: v for k, v in want.items() if v is not None}
    assert b"\x0fx-stream-offsetl" in add_offset_header(raw, 5)   # AMQP type 'l' (signed 64-bit)
