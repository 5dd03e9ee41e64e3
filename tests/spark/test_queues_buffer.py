"""The source's driver-side buffer with raw delivery runs (``source.queues.buffer.QueueBuffer``) and
the frames shipped to executors (``source.queues.frames``): offsets, slices, tags, acks, drops, and
the executor decode against ``arrow.pack_deliveries`` of the decoded deliveries. No broker,
no SparkSession."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_amqp.client import Delivery
from spark_amqp.protocol import (AMQPError, BasicProperties, Decoder, RawDeliveries,
                                 encode_message, spec)
from spark_amqp.protocol import raw_deliveries as rd
from spark_amqp.spark.source.queues import frames as source_frames
from spark_amqp.spark import schema as S
from spark_amqp.spark.source.arrow import BinaryBuffers, pack_deliveries, to_record_batches
from spark_amqp.spark.source.queues.buffer import QueueBuffer
from spark_amqp.spark.source.queues.frames import FramesPart, UndecodableMessages, frames_part, unpack

D = spec.Basic.Deliver
Q = "orders.ü"

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ------------------------------------------------------------------------------ builders

def props_for(tag: int) -> BasicProperties | None:
    k = tag % 6
    if k == 0:
        return None
    if k == 1:
        return BasicProperties(content_type="application/json", delivery_mode=2, priority=3)
    if k == 2:
        return BasicProperties(headers={"x-delivery-count": tag, "s": "é", "l": [1, "a"],
                                        "f": 1.5, "t": {"in": True}})
    if k == 3:
        return BasicProperties(message_id=f"id-{tag}", timestamp=1_700_000_000 + tag,
                               correlation_id="c", reply_to="r", expiration="60000",
                               type="t", user_id="guest", app_id="app",
                               content_encoding="gzip")
    if k == 4:
        return BasicProperties()
    return BasicProperties(headers={})


def body_for(tag: int) -> bytes:
    if tag % 11 == 0:
        return b""
    if tag % 9 == 0:
        return bytes([tag % 256]) * 9000  # several body frames at frame_max 4096
    return b"msg-%d" % tag


def message(tag: int, ctag: str = "ctag-1") -> tuple[D, BasicProperties | None, bytes]:
    return (D(ctag, tag, tag % 4 == 0, "ex" if tag % 2 else "", f"rk.{tag % 3}"),
            props_for(tag), body_for(tag))


def make_run(first_tag: int, count: int, frame_max: int = 4096, corrupt: int | None = None):
    """A RawDeliveries of ``count`` deliveries from ``first_tag``, cut by a raw Decoder from
    ``encode_message(1, basic.deliver, props, body)`` frames. ``corrupt``: index of a message
    whose property table is made malformed (the frames stay well formed)."""
    parts = []
    for i in range(count):
        m, p, b = message(first_tag + i)
        if i == corrupt:
            p = BasicProperties(headers={"k": "v"})
        frames = encode_message(1, m, p, b, frame_max=frame_max)
        if i == corrupt:
            frames = bad_table(frames)
        parts.append(frames)
    dec = Decoder(frame_max=frame_max)
    dec.raw_channels.add(1)
    evs = dec.feed(b"".join(parts))
    assert len(evs) == 1 and type(evs[0]) is RawDeliveries, evs
    run = evs[0]
    assert (run.first_tag, run.count) == (first_tag, count)
    return run


def bad_table(frames: bytes) -> bytes:
    """The content header's (headers-only) table length pointing past the frame."""
    b = bytearray(frames)
    h = 8 + int.from_bytes(b[3:7], "big")  # the header frame follows the method frame
    assert b[h] == 2 and b[h + 19:h + 21] == b"\x20\x00"
    b[h + 21:h + 25] = (0xFFFF).to_bytes(4, "big")
    return bytes(b)


def make_delivery(tag: int, exchange: str | None = None) -> Delivery:
    m, p, b = message(tag)
    return Delivery(m.consumer_tag, tag, m.redelivered,
                    m.exchange if exchange is None else exchange, m.routing_key,
                    p if p is not None else BasicProperties(), b, None, 1)


def decoded(item) -> list[Delivery]:
    """The client Deliveries of an item (run decoded, or the delivery itself)."""
    if type(item) is RawDeliveries:
        return [Delivery(e.method.consumer_tag, e.method.delivery_tag, e.method.redelivered,
                         e.method.exchange, e.method.routing_key, e.properties, e.body, None,
                         e.channel) for e in item.decode()]
    return [item]


def count_of(item) -> int:
    return item.count if type(item) is RawDeliveries else 1


def piece_tags(pieces) -> list[int]:
    out = []
    for it, lo, hi in pieces:
        if type(it) is RawDeliveries:
            assert 0 <= lo < hi <= it.count
            out += range(it.first_tag + lo, it.first_tag + hi)
        else:
            assert (lo, hi) == (0, 1)
            out.append(it.delivery_tag)
    return out


def mixed_buffer():
    """Tags 1..20 in items: run 1-5, delivery 6, run 7-9, deliveries 10 and 11, run 12-20."""
    items = [make_run(1, 5), make_delivery(6), make_run(7, 3), make_delivery(10),
             make_delivery(11), make_run(12, 9)]
    b = QueueBuffer(Q)
    b.add(items[:2])
    b.add([])
    b.add(items[2:])
    return b, items


# ------------------------------------------------------------------------------ QueueBuffer

def test_add_counts_runs_and_single_deliveries():
    b, items = mixed_buffer()
    assert b.received == 20 and b.planned == 0 and b.acked == 0 and b.unplanned == 20
    assert b.items == items and b.starts == [0, 5, 6, 9, 10, 11]
    assert [b.tag_at(o) for o in range(20)] == list(range(1, 21))


def test_plan_is_bounded_by_received():
    b, _ = mixed_buffer()
    assert b.plan(0) == 0 and b.plan(-3) == 0
    assert b.plan(7) == 7 and b.unplanned == 13
    assert b.plan(100) == 20 and b.unplanned == 0
    assert b.plan(1) == 20


def test_slice_pieces_across_and_inside_runs():
    b, items = mixed_buffer()
    b.plan(20)
    assert b.slice(0, 7) == [(items[0], 0, 5), (items[1], 0, 1), (items[2], 0, 1)]
    assert b.slice(3, 8) == [(items[0], 3, 5), (items[1], 0, 1), (items[2], 0, 2)]
    assert b.slice(13, 15) == [(items[5], 2, 4)]
    assert b.slice(9, 11) == [(items[3], 0, 1), (items[4], 0, 1)]
    assert b.slice(19, 20) == [(items[5], 8, 9)]
    assert b.slice(5, 5) == [] and b.slice(20, 20) == []
    for lo in range(21):
        for hi in range(lo, 21):
            assert piece_tags(b.slice(lo, hi)) == list(range(lo + 1, hi + 1))
    for lo, hi in ((0, 21), (5, 4), (-1, 3), (21, 21)):
        with pytest.raises(LookupError, match="not buffered"):
            b.slice(lo, hi)


def test_ack_upto_across_run_boundaries_idempotent_and_clamped():
    b, items = mixed_buffer()
    assert b.ack_upto(3) is None  # nothing planned yet
    b.plan(7)
    assert b.ack_upto(3) == 3  # inside the first run
    assert b.ack_upto(3) is None and b.ack_upto(2) is None and b.acked == 3
    assert b.items[0] is items[0]  # the run reaches past 3: kept
    assert b.ack_upto(100) == 7  # clamped to planned: first message of the second run
    assert b.acked == 7 and b.ack_upto(7) is None
    assert b.items[0] is items[2] and b.starts[0] == 6  # items wholly below 7 forgotten
    with pytest.raises(LookupError):
        b.slice(6, 8)  # offset 6 is acked
    b.plan(100)
    assert piece_tags(b.slice(7, 10)) == [8, 9, 10]
    assert b.tag_at(7) == 8 and b.tag_at(19) == 20
    assert b.ack_upto(9) == 9  # exactly at the end of the second run
    assert b.items[0] is items[3]
    assert b.ack_upto(20) == 20 and b.items == [] and b.starts == []
    assert b.received == b.planned == b.acked == 20
    b.add([make_run(21, 2)])  # later offsets continue
    assert b.starts == [20] and b.received == 22
    b.plan(2)
    assert b.ack_upto(22) == 22


def test_drop_unplanned_truncates_a_run_in_the_middle():
    b, items = mixed_buffer()
    b.plan(13)  # offsets 11, 12 of the last run (tags 12, 13) planned, 7 more not
    assert b.drop_unplanned() == 7
    assert b.received == 13 and b.unplanned == 0 and b.drop_unplanned() == 0
    head = b.items[-1]
    orig = items[5]
    assert type(head) is RawDeliveries and head is not orig
    assert (head.channel, head.first_tag, head.count, head.last_tag) == (1, 12, 2, 13)
    assert list(head.ends) == list(orig.ends[:2]) and head.ends[-1] == len(head.data)
    assert head.data == orig.frames(0, 2)
    assert head.decode() == orig.decode()[:2]
    assert orig.count == 9  # the original run object is not changed
    assert piece_tags(b.slice(10, 13)) == [11, 12, 13]
    with pytest.raises(LookupError):
        b.slice(12, 14)
    assert b.ack_upto(13) == 13 and b.items == []
    # redelivered messages come back later at the next offsets
    b.add([make_run(30, 3)])
    assert b.starts == [13] and b.received == 16 and b.tag_at(14) == 31


def test_drop_unplanned_at_item_boundaries():
    b, items = mixed_buffer()
    b.plan(9)  # exactly after the second run
    assert b.drop_unplanned() == 11
    assert b.items == items[:3] and b.received == 9
    b2, items2 = mixed_buffer()
    assert b2.drop_unplanned() == 20 and b2.items == [] and b2.received == 0
    b2.add([make_delivery(40)])
    assert b2.starts == [0] and b2.tag_at(0) == 40


# ------------------------------------------------------------------------------ model check

RUN_CACHE: dict[tuple[int, int], RawDeliveries] = {}


def cached_run(first: int, count: int) -> RawDeliveries:
    key = (first, count)
    if key not in RUN_CACHE:
        RUN_CACHE[key] = make_run(first, count, frame_max=131072)
    return RUN_CACHE[key]


item_specs = st.lists(st.tuples(st.integers(1, 6), st.booleans(), st.integers(0, 2)),
                      min_size=1, max_size=4)
ops = st.lists(st.one_of(
    st.tuples(st.just("add"), item_specs),
    st.tuples(st.just("plan"), st.integers(-2, 12)),
    st.tuples(st.just("ack"), st.integers(0, 40)),
    st.tuples(st.just("drop")),
    st.tuples(st.just("slice"), st.integers(-1, 40), st.integers(-1, 40)),
    st.tuples(st.just("tag"), st.integers(0, 40)),
), max_size=25)


@SETTINGS
@given(ops)
def test_queue_buffer_against_a_list_model(operations):
    """Random add/plan/ack/drop/slice sequences: the buffer behaves like a plain list of tags
    with three cursors (acked <= planned <= received)."""
    b = QueueBuffer(Q)
    model: list[int] = []  # tag at each offset (all offsets ever received, minus dropped)
    acked = planned = 0
    next_tag = 1
    for op in operations:
        kind = op[0]
        if kind == "add":
            items = []
            for count, as_delivery, gap in op[1]:
                next_tag += gap  # tags may jump between items (another consumer's, say)
                if count == 1 and as_delivery:
                    items.append(make_delivery(next_tag))
                else:
                    items.append(cached_run(next_tag, count))
                model += range(next_tag, next_tag + count)
                next_tag += count
            b.add(items)
        elif kind == "plan":
            if op[1] > 0:
                planned += min(op[1], len(model) - planned)
            assert b.plan(op[1]) == planned
        elif kind == "ack":
            u = min(op[1], planned)
            want = model[u - 1] if u > acked else None
            assert b.ack_upto(op[1]) == want
            acked = max(acked, u)
        elif kind == "drop":
            assert b.drop_unplanned() == len(model) - planned
            del model[planned:]
        elif kind == "slice":
            lo, hi = op[1], op[2]
            if lo < acked or hi > len(model) or lo > hi:
                with pytest.raises(LookupError):
                    b.slice(lo, hi)
            else:
                pieces = b.slice(lo, hi)
                assert piece_tags(pieces) == model[lo:hi]
                if lo < hi:
                    part = frames_part(Q, lo, pieces)
                    assert part.n == hi - lo
                    got = rd.decode_frames(part.frames, part.n)
                    assert [e.method.delivery_tag for e in got] == model[lo:hi]
        else:
            off = op[1]
            if acked <= off < len(model):
                assert b.tag_at(off) == model[off]
        assert (b.acked, b.planned, b.received) == (acked, planned, len(model))
        assert b.unplanned == len(model) - planned
        assert acked <= planned <= len(model)
        assert len(b.items) == len(b.starts)
        assert b.starts == sorted(b.starts)
        if b.items:
            assert b.starts[0] <= acked
            assert b.starts[-1] + count_of(b.items[-1]) == len(model)
            for s, nxt, it in zip(b.starts, b.starts[1:], b.items):
                assert s + count_of(it) == nxt


# ------------------------------------------------------------------------------ frames

def body_list(col) -> list[bytes]:
    """A body column as a list of bytes (``BinaryBuffers``: Arrow offsets + values)."""
    if isinstance(col, BinaryBuffers):
        n = len(col.offsets) // 4 - 1
        offs = [int.from_bytes(col.offsets[4 * i:4 * i + 4], "little") for i in range(n + 1)]
        assert offs[0] == 0 and offs[-1] == len(col.values)
        return [col.values[a:b] for a, b in zip(offs, offs[1:])]
    return list(col)


def same_columns(got, want):
    """The columns of two PackedColumns agree (the body column in either representation)."""
    assert got.columns.keys() == want.columns.keys()
    assert body_list(got.columns[S.BODY]) == body_list(want.columns[S.BODY])
    for k in got.columns:
        if k != S.BODY:
            assert got.columns[k] == want.columns[k], k


def _table(packed):
    import pyarrow as pa

    return pa.Table.from_batches(list(to_record_batches(packed)))


@pytest.mark.parametrize("include_headers", [True, False])
def test_frames_part_pickle_unpack_equals_pack_deliveries(include_headers):
    items = [make_run(1, 5), make_delivery(6, exchange="échange"), make_run(7, 12),
             make_delivery(19), make_run(20, 1), make_delivery(21)]
    b = QueueBuffer(Q)
    b.add(items)
    b.plan(b.received)
    everything = [d for it in items for d in decoded(it)]
    assert [d.delivery_tag for d in everything] == list(range(1, 22))
    for lo, hi in ((0, 21), (0, 1), (3, 8), (5, 6), (6, 17), (10, 21), (16, 20), (20, 21)):
        part = frames_part(Q, lo, b.slice(lo, hi))
        assert (part.queue, part.start, part.n) == (Q, lo, hi - lo)
        assert type(part.frames) is bytes
        shipped = pickle.loads(pickle.dumps(part))
        assert shipped == part
        got = unpack(shipped, include_headers)
        want = pack_deliveries(Q, lo, everything[lo:hi], include_headers)
        assert (got.queue, got.start, got.n) == (Q, lo, hi - lo)
        same_columns(got, want)
        assert body_list(got.columns[S.BODY]) == [d.body for d in everything[lo:hi]]
        assert _table(got).equals(_table(want))
        # the frames hold the messages' own delivery tags
        assert [e.method.delivery_tag for e in rd.decode_frames(part.frames)] == \
            list(range(lo + 1, hi + 1))


def test_frames_part_of_one_whole_run_is_its_bytes():
    run = make_run(1, 4)
    b = QueueBuffer(Q)
    b.add([run])
    b.plan(4)
    assert frames_part(Q, 0, b.slice(0, 4)).frames is run.data
    assert frames_part(Q, 1, b.slice(1, 3)).frames == run.frames(1, 3)


def test_delivery_frames_round_trip():
    d = make_delivery(3)
    (ev,) = rd.decode_frames(source_frames.delivery_frames(d), 1)
    assert (ev.method.consumer_tag, ev.method.delivery_tag, ev.method.redelivered,
            ev.method.exchange, ev.method.routing_key, ev.properties, ev.body) == \
        (d.consumer_tag, d.delivery_tag, d.redelivered, d.exchange, d.routing_key,
         d.properties, d.body)
    big = make_delivery(9)  # 9000-byte body: one body frame (frame_max 0)
    assert len(big.body) == 9000
    assert rd.decode_frames(source_frames.delivery_frames(big), 1)[0].body == big.body


message_specs = st.lists(st.tuples(st.integers(1, 5), st.booleans()), min_size=1, max_size=6)


@SETTINGS
@given(message_specs, st.data())
def test_random_partitions_decode_like_pack_deliveries(specs, data):
    items, tag = [], 1
    for count, as_delivery in specs:
        items.append(make_delivery(tag) if count == 1 and as_delivery
                     else cached_run(tag, count))
        tag += count
    b = QueueBuffer(Q)
    b.add(items)
    n = b.received
    b.plan(n)
    everything = [d for it in items for d in decoded(it)]
    lo = data.draw(st.integers(0, n - 1))
    hi = data.draw(st.integers(lo + 1, n))
    include_headers = data.draw(st.booleans())
    part = pickle.loads(pickle.dumps(frames_part(Q, lo, b.slice(lo, hi))))
    got = unpack(part, include_headers)
    want = pack_deliveries(Q, lo, everything[lo:hi], include_headers)
    assert got.n == hi - lo
    same_columns(got, want)
    assert _table(got).equals(_table(want))


def test_undecodable_messages_name_the_queue_and_offsets():
    bad = make_run(1, 6, corrupt=3)  # message 4 (offset 3) has a malformed property table
    with pytest.raises(AMQPError):
        bad.decode()
    b = QueueBuffer(Q)
    b.add([make_delivery(100), bad])  # offsets: 0 delivery, 1..6 the run
    b.plan(7)
    # ranges without the bad message decode
    assert unpack(frames_part(Q, 0, b.slice(0, 4)), True).n == 4
    assert unpack(frames_part(Q, 5, b.slice(5, 7)), True).n == 2
    for lo, hi in ((0, 7), (4, 5), (3, 6)):
        part = pickle.loads(pickle.dumps(frames_part(Q, lo, b.slice(lo, hi))))
        with pytest.raises(UndecodableMessages) as info:
            unpack(part, True)
        text = str(info.value)
        assert repr(Q) in text and f"messages {lo}..{hi - 1}" in text
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value.__cause__, AMQPError)


@pytest.mark.parametrize("damage", ["truncated", "wrong count", "garbage", "not deliver"])
def test_undecodable_frames_of_a_part(damage):
    run = make_run(10, 3)
    frames, n = run.data, 3
    if damage == "truncated":
        frames = frames[:-5]
    elif damage == "wrong count":
        n = 4
    elif damage == "garbage":
        frames = b"\x01\x00\x01\xff\xff\xff\xff" + frames
    else:
        frames = encode_message(1, spec.Basic.GetOk(1, False, "e", "r", 0), None, b"x")
        n = 1
    with pytest.raises(UndecodableMessages, match=r"messages 40\.\.4\d of queue 'orders\.ü'"):
        unpack(FramesPart(Q, 40, n, frames), False)


def test_frames_part_of_an_empty_slice():
    b, _ = mixed_buffer()
    b.plan(5)
    part = frames_part(Q, 5, b.slice(5, 5))
    assert (part.start, part.n, part.frames) == (5, 0, b"")
    assert unpack(part, True).n == 0
