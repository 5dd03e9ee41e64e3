"""Raw delivery runs (``spark_amqp/protocol/raw_deliveries.py``): the Decoder's raw channels,
``RawDeliveries``, ``scan_deliveries`` / ``deliver_columns`` and their compiled twins
(``_frames.scan_deliveries`` / ``_raw_deliveries.deliver_columns``), and the state machine's
handling of runs.

Runs under both implementations: the compiled twins are compared with the pure-Python ones
when built (skipped under ``SPARK_AMQP_PURE_PYTHON=1`` unless ``SPARK_AMQP_REQUIRE_SPEEDUPS=1``
says they must exist); the decoder property runs with every implementation available.
"""

from __future__ import annotations

import os
import struct
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_strategies import field_tables, shortstr
from speedups_switch import SPEEDUPS, installed
from spark_amqp.protocol import (AMQPError, BasicProperties, ContentMessage, Decoder, Heartbeat,
                                 MethodFrame, RawDeliveries, encode_message, encode_method, spec)
from spark_amqp.protocol import frames as frames_module
from spark_amqp.protocol import raw_deliveries as rd
from spark_amqp.protocol.connection import AMQPConnection, ChannelState, ConnectionState, Role
from spark_amqp.protocol.errors import ChannelErrorCode, CommandInvalid
from spark_amqp.protocol.properties import PROPERTIES

RAW_SPEEDUPS = SPEEDUPS if SPEEDUPS is not None and hasattr(SPEEDUPS, "scan_deliveries") else None
REQUIRE = os.environ.get("SPARK_AMQP_REQUIRE_SPEEDUPS") == "1"
needs_speedups = pytest.mark.skipif(
    RAW_SPEEDUPS is None and not REQUIRE,
    reason="compiled raw-delivery twins not built or SPARK_AMQP_PURE_PYTHON=1")

RAW = 1          # the raw channel of the generated streams
OTHER = 2        # a decoded channel interleaved with it
D = spec.Basic.Deliver
HEARTBEAT = frames_module.HEARTBEAT_FRAME
MAX_BODY = frames_module.DEFAULT_MAX_BODY_SIZE


def compiled():
    """The compiled module (fails, not skips, when it must exist and does not)."""
    assert RAW_SPEEDUPS is not None, (
        "SPARK_AMQP_REQUIRE_SPEEDUPS=1 but the compiled twins are not built")
    return RAW_SPEEDUPS


def implementations():
    """(name, speedups module or None) for every implementation available here."""
    out = [("pure", None)]
    if RAW_SPEEDUPS is not None:
        out.append(("compiled", RAW_SPEEDUPS))
    return out


PROP = settings(max_examples=int(os.environ.get("AMQP_RAW_EXAMPLES", "120")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


# ------------------------------------------------------------------------------ helpers

def split_frames(buf: bytes):
    """(start, type, channel, size) of each complete frame of a well-formed stream."""
    out = []
    p = 0
    while p + 7 <= len(buf):
        t, ch, size = struct.unpack_from(">BHI", buf, p)
        if p + 8 + size > len(buf):
            break
        out.append((p, t, ch, size))
        p += 8 + size
    return out


def flatten(events):
    """Runs replaced by their decoded messages; also a parallel list: True = from a run."""
    flat, from_run = [], []
    for ev in events:
        if ev.__class__ is RawDeliveries:
            msgs = ev.decode()
            flat += msgs
            from_run += [True] * len(msgs)
        else:
            flat.append(ev)
            from_run.append(False)
    return flat, from_run


def check_run(run: RawDeliveries, channel: int = RAW, data=None):
    """Every invariant of a run: counts, ends, tags, frames(lo, hi) against its decode."""
    assert run.count >= 1 and run.channel == channel
    assert isinstance(run.ends, array) and run.ends.typecode == "I"
    assert len(run.ends) == run.count and run.ends[-1] == len(run.data)
    assert all(a < b for a, b in zip([0, *run.ends], run.ends))
    msgs = run.decode()
    assert len(msgs) == run.count
    assert all(m.channel == channel and type(m.method) is D for m in msgs)
    tags = [m.method.delivery_tag for m in msgs]
    assert tags == list(range(run.first_tag, run.first_tag + run.count))
    assert run.last_tag == tags[-1]
    assert run.frames(0, run.count) == run.data
    for i in range(run.count):
        one = run.frames(i, i + 1)
        assert rd.decode_frames(one, 1) == [msgs[i]]
        assert one[:1] == b"\x01" and one[-1:] == b"\xce"
    if run.count >= 2:
        k = run.count // 2
        assert rd.decode_frames(run.frames(0, k), k) == msgs[:k]
        assert rd.decode_frames(run.frames(k, run.count)) == msgs[k:]
        assert run.frames(0, k) + run.frames(k, run.count) == run.data
    assert run.frames(run.count, run.count) == b""
    for lo, hi in ((-1, 0), (0, run.count + 1), (1, 0)):
        with pytest.raises(IndexError):
            run.frames(lo, hi)
    assert repr(run).startswith("RawDeliveries(channel=")
    return msgs


def unpack_bodies(packed) -> list[bytes]:
    """The bodies of ``deliver_columns(..., packed_bodies=True)``: (int32 LE offsets, values)."""
    offsets, values = packed
    assert type(offsets) is bytes and type(values) is bytes and len(offsets) % 4 == 0
    offs = list(struct.unpack(f"<{len(offsets) // 4}i", offsets))
    assert offs[0] == 0 and offs[-1] == len(values) and offs == sorted(offs)
    return [values[a:b] for a, b in zip(offs, offs[1:])]


def outcome(fn, *args):
    """("ok", value) or (error type, reply code or None)."""
    try:
        return "ok", fn(*args)
    except AMQPError as exc:
        return type(exc), exc.reply_code
    except Exception as exc:
        return type(exc), None


def deliver(tag, ctag="ctag", red=False, ex="ex", rk="rk", props=None, body=b"b", ch=RAW,
            frame_max=131072):
    return encode_message(ch, D(ctag, tag, red, ex, rk), props, body, frame_max=frame_max)


# ------------------------------------------------------------------------------ strategies

ascii_short = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30)
any_short = st.one_of(ascii_short, ascii_short, shortstr(40))  # mostly ASCII, some UTF-8


@st.composite
def small_properties(draw):
    """BasicProperties with a random subset of the 14 properties, small values."""
    kw = {}
    for name, ptype in PROPERTIES:
        if not draw(st.booleans()):
            continue
        if ptype == "shortstr":
            kw[name] = draw(shortstr(40))
        elif ptype == "octet":
            kw[name] = draw(st.integers(0, 255))
        elif ptype == "timestamp":
            kw[name] = draw(st.integers(0, 2**64 - 1))
        else:
            kw[name] = draw(field_tables(max_size=3))
    return BasicProperties(**kw)


message_props = st.one_of(st.none(), st.just(BasicProperties()), small_properties())
# up to ~10 KB without hypothesis drawing every byte: a short pattern repeated
bodies = st.one_of(
    st.binary(max_size=40),
    st.tuples(st.binary(min_size=1, max_size=16), st.integers(0, 700)).map(lambda t: t[0] * t[1]))


@st.composite
def streams(draw):
    """(wire bytes, frame_max): basic.deliver messages on RAW, sometimes interleaved with
    heartbeats, basic.ack on OTHER, deliveries on OTHER, basic.get-ok on RAW or OTHER, a
    basic.qos-ok on RAW; tags consecutive or with gaps."""
    frame_max = draw(st.sampled_from([256, 4096, 131072, 0]))
    tag = draw(st.one_of(st.integers(1, 5), st.integers(1, 2**63)))
    ctag = draw(any_short)
    parts = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["deliver"] * 6 + ["heartbeat", "ack", "other_deliver",
                                                      "getok", "raw_method"]))
        if kind == "deliver":
            if draw(st.integers(0, 5)) == 0:
                ctag = draw(any_short)
            m = D(ctag, tag, draw(st.booleans()), draw(any_short), draw(any_short))
            parts.append((RAW, m, draw(message_props), draw(bodies)))
            tag += draw(st.sampled_from([1, 1, 1, 1, 2, 7, 0]))
        elif kind == "heartbeat":
            parts.append(HEARTBEAT)
        elif kind == "ack":
            ack = spec.Basic.Ack(draw(st.integers(0, 2**64 - 1)), draw(st.booleans()))
            parts.append((OTHER, ack))
        elif kind == "other_deliver":
            m = D(draw(any_short), tag, draw(st.booleans()), draw(any_short), draw(any_short))
            parts.append((OTHER, m, draw(message_props), draw(bodies)))
        elif kind == "getok":
            m = spec.Basic.GetOk(tag, draw(st.booleans()), draw(any_short), draw(any_short),
                                 draw(st.integers(0, 100)))
            parts.append((draw(st.sampled_from([RAW, OTHER])), m, draw(message_props),
                          draw(bodies)))
        else:
            parts.append((RAW, spec.Basic.QosOk()))
    # frame sizes must fit frame_max (encode_message does not split method/header frames)
    wire = []
    for fm in (frame_max, 0):
        wire = []
        for p in parts:
            if isinstance(p, bytes):
                wire.append(p)
            elif len(p) == 2:
                wire.append(encode_method(*p))
            else:
                wire.append(encode_message(*p, frame_max=fm))
        data = b"".join(wire)
        if not fm or all(size <= fm - 8 for _, _, _, size in split_frames(data)):
            return data, fm
    raise AssertionError("unreachable")


def chunked(data: bytes, sizes: list[int]):
    out, p = [], 0
    for s in sizes:
        if p >= len(data):
            break
        out.append(data[p:p + s])
        p += s
    if p < len(data):
        out.append(data[p:])
    return out


chunkings = st.one_of(st.just([]), st.lists(st.integers(1, 3000), max_size=20),
                      st.lists(st.integers(1, 40), max_size=60))


# ------------------------------------------------------------------------------ basics

def test_run_of_consecutive_deliveries_is_one_event():
    props = BasicProperties(content_type="text/plain", headers={"k": 1})
    wire = b"".join(deliver(10 + i, props=props, body=b"m%d" % i) for i in range(50))
    dec = Decoder()
    dec.raw_channels.add(RAW)
    evs = dec.feed(wire)
    assert len(evs) == 1 and isinstance(evs[0], RawDeliveries)
    run = evs[0]
    assert (run.channel, run.first_tag, run.count, run.last_tag) == (RAW, 10, 50, 59)
    assert run.data == wire
    msgs = check_run(run)
    assert [m.body for m in msgs] == [b"m%d" % i for i in range(50)]
    assert all(m.properties == props for m in msgs)
    assert msgs == Decoder().feed(wire)
    # the channel's deliveries only: another channel stays decoded
    assert Decoder().feed(deliver(1, ch=OTHER)) == dec.feed(deliver(1, ch=OTHER))


def test_gap_in_tags_ends_the_run_and_starts_another():
    wire = b"".join(deliver(t) for t in (1, 2, 3, 7, 8, 8, 9))
    dec = Decoder()
    dec.raw_channels.add(RAW)
    evs = dec.feed(wire)
    assert [(e.first_tag, e.count) for e in evs] == [(1, 3), (7, 2), (8, 2)]
    assert flatten(evs)[0] == Decoder().feed(wire)


def test_raw_channels_not_touched_without_membership_and_removal_turns_it_off():
    wire = deliver(1) + deliver(2)
    dec = Decoder()
    assert dec.raw_channels == set()
    assert all(type(e) is ContentMessage for e in dec.feed(wire))
    dec.raw_channels.add(RAW)
    assert [type(e) for e in dec.feed(wire)] == [RawDeliveries]
    dec.raw_channels.discard(RAW)
    assert [type(e) for e in dec.feed(wire)] == [ContentMessage, ContentMessage]


def test_run_equality_and_repr():
    wire = deliver(5) + deliver(6)
    run = rd.scan_deliveries(wire, 0, len(wire), RAW, 131064, 1 << 20)[0]
    same = RawDeliveries(run.channel, run.data, run.first_tag, run.count, array("I", run.ends))
    assert run == same and not run != same
    assert run != RawDeliveries(run.channel, run.data, 6, run.count, run.ends)
    assert run != RawDeliveries(3, run.data, run.first_tag, run.count, run.ends)
    assert run != "x"
    assert repr(run) == f"RawDeliveries(channel=1, count=2, tags=5..6, bytes={len(run.data)})"
    assert run.method.INDEX == rd.DELIVER_INDEX and type(run.method) is D


def test_non_ascii_strings_take_the_general_path():
    wire = deliver(1) + deliver(2, ex="échange") + deliver(3) + deliver(4, ctag="ü")
    dec = Decoder()
    dec.raw_channels.add(RAW)
    evs = dec.feed(wire)
    assert [type(e) for e in evs] == [RawDeliveries, ContentMessage, RawDeliveries,
                                      ContentMessage]
    assert evs[1].method.exchange == "échange"
    assert flatten(evs)[0] == Decoder().feed(wire)


def test_message_split_across_feeds_comes_out_decoded():
    wire = deliver(1) + deliver(2) + deliver(3)
    fr = split_frames(wire)
    assert [t for _, t, _, _ in fr[3:6]] == [1, 2, 3]
    cut = fr[4][0] + 5  # inside the second message's header frame, after its method frame
    dec = Decoder()
    dec.raw_channels.add(RAW)
    evs = dec.feed(wire[:cut]) + dec.feed(wire[cut:])
    assert [type(e) for e in evs] == [RawDeliveries, ContentMessage, RawDeliveries]
    assert flatten(evs)[0] == Decoder().feed(wire)


def test_multi_frame_bodies_are_cut_into_runs():
    body = bytes(range(256)) * 40  # 10240 bytes: 3 body frames at frame_max 4096
    wire = b"".join(deliver(i, body=body, frame_max=4096) for i in (1, 2, 3))
    assert sum(t == 3 for _, t, _, _ in split_frames(wire)) == 9
    dec = Decoder(frame_max=4096)
    dec.raw_channels.add(RAW)
    evs = dec.feed(wire)
    assert len(evs) == 1 and evs[0].count == 3
    assert [m.body for m in check_run(evs[0])] == [body] * 3


def test_body_over_max_body_size_is_not_a_run_and_fails_the_same():
    wire = deliver(1, body=b"x" * 10) + deliver(2, body=b"y" * 100)
    for raw in (False, True):
        dec = Decoder(max_body_size=50)
        if raw:
            dec.raw_channels.add(RAW)
        with pytest.raises(AMQPError) as info:
            dec.feed(wire)
        assert info.value.reply_code == 501
        first = ContentMessage(RAW, D("ctag", 1, False, "ex", "rk"), BasicProperties(), b"x" * 10)
        assert flatten(info.value.events)[0] == [first]


# ------------------------------------------------------------------------------ property

@pytest.mark.parametrize("impl", implementations(), ids=lambda i: i[0])
@PROP
@given(stream=streams(), sizes=chunkings)
def test_flattened_runs_equal_the_decoded_events(impl, stream, sizes):
    """A raw channel changes only the shape of the events: the runs, flattened, and the other
    events in order are exactly what a decoder without raw channels gives."""
    wire, frame_max = stream
    with installed(impl[1]):
        ref = Decoder(frame_max=frame_max).feed(wire)
        dec = Decoder(frame_max=frame_max)
        dec.raw_channels.add(RAW)
        pieces = chunked(wire, sizes)
        events = []
        for piece in pieces:
            events += dec.feed(piece)
        assert dec.buffered == 0 and dec.pending_channels() == []
        flat, from_run = flatten(events)
        assert flat == ref
        for ev in events:
            if ev.__class__ is RawDeliveries:
                check_run(ev)
        # every message in a run is a basic.deliver of the raw channel
        assert all(type(m.method) is D and m.channel == RAW
                   for m, r in zip(flat, from_run) if r)
        if len(pieces) == 1:
            # all bytes at once: every ASCII-only delivery of the raw channel is in a run
            for m, r in zip(flat, from_run):
                if type(getattr(m, "method", None)) is D and m.channel == RAW:
                    meth = m.method
                    ascii_only = all(s.isascii() for s in
                                     (meth.consumer_tag, meth.exchange, meth.routing_key))
                    assert r == ascii_only, m
        # adjacent runs of one feed never hold consecutive tags (they would be one run)
        # unless something came between them
        for a, b in zip(events, events[1:]):
            if a.__class__ is RawDeliveries and b.__class__ is RawDeliveries and len(pieces) == 1:
                assert b.first_tag != a.last_tag + 1


# ------------------------------------------------------------------------------ differential

def _frame_positions(wire):
    return [p for p, t, _, _ in split_frames(wire) if t == 1] or [0]


@st.composite
def mutated(draw):
    """(bytes, pos, n, channel, fmax8, max_body) for scan_deliveries: a valid stream of
    deliveries (ASCII and not), mutated by one of the ways a stream can be wrong."""
    frame_max = draw(st.sampled_from([4096, 131072]))
    tag = draw(st.integers(1, 2**40))
    msgs = []
    for _ in range(draw(st.integers(1, 6))):
        msgs.append(encode_message(
            RAW, D(draw(any_short), tag, draw(st.booleans()), draw(any_short), draw(any_short)),
            draw(message_props), draw(bodies), frame_max=frame_max))
        tag += draw(st.sampled_from([1, 1, 1, 2, 0]))
    wire = bytearray(b"".join(msgs))
    frames = split_frames(bytes(wire))
    fmax8 = frame_max - 8
    max_body = MAX_BODY
    kind = draw(st.sampled_from(["none", "flip", "insert", "truncate", "frame_end", "channel",
                                 "class_id", "weight", "body_size", "fmax8", "max_body",
                                 "frame_type", "method_id"]))
    fi = draw(st.integers(0, len(frames) - 1))
    start, ftype, _ch, size = frames[fi]
    headers = [f for f in frames if f[1] == 2]
    h = draw(st.sampled_from(headers))
    if kind == "flip":
        for _ in range(draw(st.integers(1, 3))):
            wire[draw(st.integers(0, len(wire) - 1))] ^= draw(st.integers(1, 255))
    elif kind == "insert":
        at = draw(st.integers(0, len(wire)))
        wire[at:at] = draw(st.binary(min_size=1, max_size=4))
    elif kind == "truncate":
        del wire[draw(st.integers(0, len(wire) - 1)):]
    elif kind == "frame_end":
        wire[start + 7 + size] = draw(st.integers(0, 255).filter(lambda b: b != 0xCE))
    elif kind == "channel":
        struct.pack_into(">H", wire, start + 1, draw(st.sampled_from([0, OTHER, 257, 65535])))
    elif kind == "class_id":
        struct.pack_into(">H", wire, h[0] + 7, draw(st.sampled_from([0, 10, 50, 61, 0x3C00])))
    elif kind == "weight":
        struct.pack_into(">H", wire, h[0] + 9, draw(st.integers(1, 65535)))
    elif kind == "body_size":
        (bs,) = struct.unpack_from(">Q", wire, h[0] + 11)
        struct.pack_into(">Q", wire, h[0] + 11,
                         max(0, bs + draw(st.sampled_from([-2, -1, 1, 5, 2**40]))))
    elif kind == "fmax8":
        fmax8 = max(size - draw(st.integers(1, 3)), 0)
    elif kind == "max_body":
        (bs,) = struct.unpack_from(">Q", wire, h[0] + 11)
        max_body = max(bs - 1, -1) if draw(st.booleans()) else bs
    elif kind == "frame_type":
        wire[start] = draw(st.sampled_from([1, 2, 3, 4, 8]))
    elif kind == "method_id":
        mframes = [f for f in frames if f[1] == 1]
        m = draw(st.sampled_from(mframes))
        struct.pack_into(">HH", wire, m[0] + 7, *draw(st.sampled_from(
            [(60, 71), (60, 61), (61, 60), (0, 0)])))
    buf = bytes(wire)
    pos = draw(st.sampled_from(_frame_positions(buf) + [0]))
    n = draw(st.one_of(st.just(len(buf)), st.integers(pos, len(buf))))
    channel = draw(st.sampled_from([RAW, RAW, RAW, OTHER]))
    return buf, pos, n, channel, fmax8, max_body


@needs_speedups
def test_compiled_twins_are_installed():
    S = compiled()
    assert frames_module._SCAN_DELIVERIES is S.scan_deliveries
    assert rd.deliver_columns_fast is S.deliver_columns
    assert frames_module._scan_fast(None) is rd.scan_deliveries


def test_pure_python_selection_without_the_compiled_module():
    assert frames_module._scan_fast(None) is rd.scan_deliveries
    if RAW_SPEEDUPS is None:
        assert frames_module._SCAN_DELIVERIES is rd.scan_deliveries
        assert rd.deliver_columns_fast is rd.deliver_columns


@needs_speedups
@PROP
@given(mutated())
def test_scan_compiled_equals_pure(case):
    buf, pos, n, channel, fmax8, max_body = case
    want = rd.scan_deliveries(buf, pos, n, channel, fmax8, max_body)
    got = compiled().scan_deliveries(buf, pos, n, channel, fmax8, max_body)
    assert got == want
    if got is not None:
        run, end = got
        assert type(run) is RawDeliveries and run.ends.typecode == "I"
        assert end == pos + len(run.data) and run.data == buf[pos:end] and end <= n
        assert run.channel == channel and run.count == len(run.ends) >= 1
        assert run.ends[-1] == len(run.data)
        assert all(a < b for a, b in zip([0, *run.ends], run.ends))
        try:
            msgs = run.decode()
        except AMQPError:  # the scan does not look at property lists (decoded later)
            return
        assert [m.method.delivery_tag for m in msgs] == list(range(run.first_tag,
                                                                    run.last_tag + 1))
        assert all(type(m.method) is D and m.channel == channel for m in msgs)
        assert all(len(m.body) <= max_body for m in msgs)


@needs_speedups
@pytest.mark.parametrize("limits", [(2**70, 1 << 20), (131064, 2**70), (131064, -1),
                                    (0, 1 << 20), (131064, 0)])
def test_scan_limits_of_any_size(limits):
    wire = deliver(1) + deliver(2, body=b"")
    fmax8, max_body = limits
    want = rd.scan_deliveries(wire, 0, len(wire), RAW, fmax8, max_body)
    assert compiled().scan_deliveries(wire, 0, len(wire), RAW, fmax8, max_body) == want


@needs_speedups
@PROP
@given(mutated(), st.data())
def test_deliver_columns_compiled_equals_pure(case, data):
    buf = case[0]
    pos = case[1]
    frames = buf[pos:] if data.draw(st.booleans()) else buf
    expect = data.draw(st.sampled_from([None, None, 0, 1, 3, 6, 7]))
    packed = data.draw(st.booleans())
    want = outcome(rd.deliver_columns, frames, expect, packed)
    got = outcome(compiled().deliver_columns, frames, expect, packed)
    assert got == want
    if want[0] == "ok":
        bodies_, red, exchanges, keys, props = want[1]
        if packed:
            bodies_ = unpack_bodies(bodies_)
            assert want[1][1:] == rd.deliver_columns(frames, expect)[1:]
            assert bodies_ == rd.deliver_columns(frames, expect)[0]
        assert len({len(bodies_), len(red), len(exchanges), len(keys), len(props)}) == 1
        assert all(p is None or isinstance(p, BasicProperties) for p in props)


@needs_speedups
@PROP
@given(stream=streams())
def test_deliver_columns_of_runs_match_the_decoded_messages(stream):
    wire, frame_max = stream
    dec = Decoder(frame_max=frame_max)
    dec.raw_channels.add(RAW)
    for ev in dec.feed(wire):
        if ev.__class__ is not RawDeliveries:
            continue
        msgs = ev.decode()
        cols = rd.deliver_columns(ev.data, ev.count)
        assert compiled().deliver_columns(ev.data, ev.count) == cols
        assert compiled().deliver_columns(ev.data) == cols
        packed = compiled().deliver_columns(ev.data, ev.count, True)
        assert packed == rd.deliver_columns(ev.data, ev.count, True)
        assert unpack_bodies(packed[0]) == cols[0] and packed[1:] == cols[1:]
        assert cols == ([m.body for m in msgs], [m.method.redelivered for m in msgs],
                        [m.method.exchange for m in msgs], [m.method.routing_key for m in msgs],
                        [None if m.properties == BasicProperties() else m.properties
                         for m in msgs])


def test_deliver_columns_pure_and_fast_give_the_columns():
    props = BasicProperties(content_type="a", headers={"x-delivery-count": 2})
    wire = (deliver(1, red=True, ex="e1", rk="k1", props=props, body=b"one")
            + deliver(2, ex="e1", rk="k2", body=b"")
            + deliver(3, ex="é", rk="ü", props=BasicProperties(), body=b"z" * 9000,
                      frame_max=4096))
    want = ([b"one", b"", b"z" * 9000], [True, False, False], ["e1", "e1", "é"],
            ["k1", "k2", "ü"], [props, None, None])
    for fn in (rd.deliver_columns, rd.deliver_columns_fast):
        assert fn(wire) == want
        assert fn(wire, 3) == want
        assert fn(b"") == ([], [], [], [], [])
        with pytest.raises(ValueError):
            fn(wire, 2)
        packed = fn(wire, 3, True)
        assert packed[1:] == want[1:]
        assert packed[0] == (struct.pack("<4i", 0, 3, 3, 9003), b"one" + b"z" * 9000)
        assert unpack_bodies(packed[0]) == want[0]
        assert fn(b"", 0, True) == ((b"\0\0\0\0", b""), [], [], [], [])
        with pytest.raises(ValueError):
            fn(wire, 4, True)


# Known divergences of the compiled deliver_columns from the pure one (which decodes with
# a Decoder and so checks what the compiled loop skips). The driver only ships frames cut
# by scan_deliveries (which checks channel and ASCII), but deliver_columns is documented as
# "a pure function of the bytes" giving "the same result" as the pure twin.

_DIVERGE = {
    "consumer tag not UTF-8": lambda: bytes(_patch(deliver(1, ctag="ab"), 12, b"\xff")),
    "header frame on another channel": lambda: _on_channel(deliver(1), 2, 3),
    "body frame on another channel": lambda: _on_channel(deliver(1), 3, 3),
    "message on channel 0": lambda: deliver(1, ch=0),
}


def _patch(b: bytes, at: int, new: bytes) -> bytearray:
    out = bytearray(b)
    out[at:at + len(new)] = new
    return out


def _on_channel(wire: bytes, ftype: int, channel: int) -> bytes:
    out = bytearray(wire)
    for p, t, _, _ in split_frames(wire):
        if t == ftype:
            struct.pack_into(">H", out, p + 1, channel)
    return bytes(out)


@needs_speedups
@pytest.mark.parametrize("case", sorted(_DIVERGE))
def test_deliver_columns_compiled_checks_what_pure_checks(case):
    wire = _DIVERGE[case]()
    want = outcome(rd.deliver_columns, wire, 1)
    assert want[0] != "ok"  # the pure twin rejects these bytes
    assert outcome(compiled().deliver_columns, wire, 1) == want


@needs_speedups
def test_scan_tag_wraparound_is_not_consecutive():
    wire = deliver(2**64 - 1) + deliver(0)
    want = rd.scan_deliveries(wire, 0, len(wire), RAW, 131064, 1 << 20)
    assert want[0].count == 1
    assert compiled().scan_deliveries(wire, 0, len(wire), RAW, 131064, 1 << 20) == want


def test_pure_scan_ends_the_run_at_the_tag_wraparound():
    wire = deliver(2**64 - 1) + deliver(0)
    dec = Decoder()
    dec.raw_channels.add(RAW)
    with installed(None):
        evs = dec.feed(wire)
    assert [(e.first_tag, e.count) for e in evs] == [(2**64 - 1, 1), (0, 1)]


# ------------------------------------------------------------------------------ errors

GOOD = b"".join(deliver(t, body=b"x" * t) for t in range(1, 6))


def _bad_frame_end(m):
    b = bytearray(m)
    b[-1] = 0
    return bytes(b)


MALFORMED = {
    "bad frame-end": lambda: _bad_frame_end(deliver(6)),
    "unknown frame type": lambda: b"\x05\x00\x01\x00\x00\x00\x00\xce",
    "heartbeat on the raw channel": lambda: b"\x08\x00\x01\x00\x00\x00\x00\xce",
    "frame over frame-max": lambda: deliver(6, body=b"y" * 5000, frame_max=0),
    "body longer than announced": lambda: _longer_body(deliver(6, body=b"abc")),
    "header without method": lambda: deliver(6)[split_frames(deliver(6))[1][0]:],
    "header class id 50": lambda: _header_field(deliver(6), 7, ">H", 50),
    "header weight 1": lambda: _header_field(deliver(6), 9, ">H", 1),
    "method frame too short": lambda: b"\x01\x00\x01\x00\x00\x00\x02\x00\x3c\xce",
    "unknown method": lambda: b"\x01\x00\x01\x00\x00\x00\x04\x00\x3c\x00\x63\xce",
    "deliver truncated arguments": lambda: _method_size(deliver(6), -3),
    "exchange not UTF-8": lambda: _patch_exchange(deliver(6, ex="ab")),
    "deliver on channel 0": lambda: deliver(6, ch=0),
}


def _longer_body(m):
    fr = split_frames(m)
    b = bytearray(m)
    struct.pack_into(">Q", b, fr[1][0] + 11, 2)  # announce 2 bytes, send 3
    return bytes(b)


def _header_field(m, off, fmt, value):
    fr = split_frames(m)
    b = bytearray(m)
    struct.pack_into(fmt, b, fr[1][0] + off, value)
    return bytes(b)


def _method_size(m, delta):
    fr = split_frames(m)
    size = fr[0][3] + delta
    payload = m[7:7 + size]
    return struct.pack(">BHI", 1, RAW, size) + payload + b"\xce" + m[fr[1][0]:]


def _patch_exchange(m):
    b = bytearray(m)
    i = b.index(b"\x02ab")
    b[i + 1] = 0xFF
    return bytes(b)


@pytest.mark.parametrize("impl", implementations(), ids=lambda i: i[0])
@pytest.mark.parametrize("case", sorted(MALFORMED))
@pytest.mark.parametrize("split", [False, True])
def test_malformed_frame_after_good_deliveries_raises_the_same_error(impl, case, split):
    wire = GOOD + MALFORMED[case]()
    results = []
    with installed(impl[1]):
        for raw in (False, True):
            dec = Decoder(frame_max=4096)
            if raw:
                dec.raw_channels.add(RAW)
            events = []
            with pytest.raises(AMQPError) as info:
                if split:  # the good deliveries in one feed, the bad frame in the next
                    events += dec.feed(GOOD)
                    dec.feed(wire[len(GOOD):])
                else:
                    dec.feed(wire)
            exc = info.value
            events += exc.events
            results.append((type(exc), exc.reply_code, flatten(events)[0]))
            # the decoder stays failed
            with pytest.raises(type(exc)):
                dec.feed(b"")
            if raw:
                assert any(e.__class__ is RawDeliveries for e in events)
    assert results[0] == results[1]
    assert len(results[1][2]) == 5


def _bad_table(m: bytes) -> bytes:
    """The content header's field table length pointing past the frame (props: headers only)."""
    fr = split_frames(m)
    b = bytearray(m)
    h = fr[1][0]
    assert struct.unpack_from(">H", b, h + 19)[0] == 0x2000  # flags: headers only
    struct.pack_into(">I", b, h + 21, 0xFFFF)
    return bytes(b)


@pytest.mark.parametrize("impl", implementations(), ids=lambda i: i[0])
def test_malformed_property_table_inside_a_run_fails_at_decode_not_in_the_decoder(impl):
    bad = _bad_table(deliver(2, props=BasicProperties(headers={"k": "v"})))
    wire = deliver(1) + bad + deliver(3)
    with installed(impl[1]):
        with pytest.raises(AMQPError) as ref:
            Decoder().feed(wire)
        dec = Decoder()
        dec.raw_channels.add(RAW)
        evs = dec.feed(wire)
        assert len(evs) == 1 and (evs[0].first_tag, evs[0].count) == (1, 3)
        run = evs[0]
        with pytest.raises(AMQPError) as info:
            run.decode()
        assert (type(info.value), info.value.reply_code) == (type(ref.value), ref.value.reply_code)
        assert rd.decode_frames(run.frames(0, 1), 1)[0].method.delivery_tag == 1
        assert rd.decode_frames(run.frames(2, 3), 1)[0].method.delivery_tag == 3
        with pytest.raises(AMQPError):
            rd.decode_frames(run.frames(1, 2))
        with pytest.raises(AMQPError):
            rd.deliver_columns(run.data, 3)
        with pytest.raises(AMQPError):
            rd.deliver_columns_fast(run.data, 3)
        with pytest.raises(AMQPError):
            rd.deliver_columns_fast(run.frames(1, 2), 1)
        assert rd.deliver_columns_fast(run.frames(2, 3), 1)[0] == [b"b"]
        assert dec.error is None and dec.feed(deliver(4)) != []


def test_decode_frames_value_errors():
    wire = deliver(1) + deliver(2, body=b"q" * 9000, frame_max=4096)
    assert len(rd.decode_frames(wire, 2)) == 2
    assert len(rd.decode_frames(wire)) == 2
    assert rd.decode_frames(b"") == [] and rd.decode_frames(b"", 0) == []
    fr = split_frames(wire)
    cuts = {len(wire) - 1, fr[1][0] + 5, fr[-1][0], fr[-2][0], len(deliver(1)) + 3}
    for cut in sorted(cuts):  # ends inside a frame, or between frames of a message
        with pytest.raises(ValueError, match="end inside a message"):
            rd.decode_frames(wire[:cut])
    for expect in (0, 1, 3):
        with pytest.raises(ValueError, match="expected"):
            rd.decode_frames(wire, expect)
    with pytest.raises(ValueError, match="other than content"):
        rd.decode_frames(deliver(1) + HEARTBEAT)
    with pytest.raises(ValueError, match="other than content"):
        rd.decode_frames(encode_method(RAW, spec.Basic.Ack(1, False)))


@pytest.mark.parametrize("fn", ["pure", "fast"])
def test_deliver_columns_rejects_other_content_methods_and_bad_counts(fn):
    f = rd.deliver_columns if fn == "pure" else rd.deliver_columns_fast
    getok = encode_message(RAW, spec.Basic.GetOk(1, False, "e", "r", 0), None, b"x")
    ret = encode_message(RAW, spec.Basic.Return(312, "NO_ROUTE", "e", "r"), None, b"x")
    for wire in (getok, deliver(1) + getok, ret + deliver(1)):
        with pytest.raises(ValueError, match="expected basic.deliver"):
            f(wire)
    with pytest.raises(ValueError):
        f(deliver(1)[:-1], 1)
    with pytest.raises(ValueError):
        f(deliver(1) + HEARTBEAT)
    with pytest.raises(ValueError):
        f(deliver(1) + deliver(2), 3)


# ------------------------------------------------------------------------------ state machine

C, S_ = Role.CLIENT, Role.SERVER


def _negotiate():
    c, s = AMQPConnection(C), AMQPConnection(S_)
    s.receive_data(c.initiate())

    def xfer(src, dst, ch, m):
        return dst.receive_data(src.send_method(ch, m))

    xfer(s, c, 0, spec.Connection.Start(0, 9, {"product": "x"}, b"PLAIN", b"en_US"))
    xfer(c, s, 0, spec.Connection.StartOk({"product": "t"}, "PLAIN", b"\x00g\x00g", "en_US"))
    xfer(s, c, 0, spec.Connection.Tune(2047, 131072, 60))
    xfer(c, s, 0, spec.Connection.TuneOk(2047, 131072, 60))
    xfer(c, s, 0, spec.Connection.Open("/"))
    xfer(s, c, 0, spec.Connection.OpenOk())
    assert c.state is ConnectionState.OPEN
    for n in (1, 2, 3):
        xfer(c, s, n, spec.Channel.Open())
        xfer(s, c, n, spec.Channel.OpenOk())
    return c, s, xfer


def _client_pair(raw: set[int]):
    c, s, xfer = _negotiate()
    c.decoder.raw_channels.update(raw)
    return c, s, xfer


def test_state_machine_passes_runs_on_an_open_channel():
    c, s, _ = _client_pair({1})
    wire = b"".join(s.send_message(1, D("t", i, False, "e", "r"), None, b"m") for i in (1, 2, 3))
    evs = c.receive_data(wire)
    assert [type(e) for e in evs] == [RawDeliveries]
    assert (evs[0].first_tag, evs[0].count) == (1, 3)
    ref, _, _ = _client_pair(set())
    assert flatten(evs)[0] == ref.receive_data(wire)
    assert c.channel_state(1) is ChannelState.OPEN
    # interleaved with method frames and heartbeats, all validated in order
    mixed = (wire + encode_method(2, spec.Basic.Ack(1, False)) + HEARTBEAT
             + s.send_message(1, D("t", 4, False, "e", "r"), None, b"m"))
    evs = c.receive_data(mixed)
    assert [type(e) for e in evs] == [RawDeliveries, MethodFrame, Heartbeat, RawDeliveries]


def _states():
    """Setups of channel 1 in which a basic.deliver is not plainly accepted."""
    def never_opened(c, s, xfer):
        return 9  # channel 9 was never opened

    def closing(c, s, xfer):
        c.send_method(1, spec.Channel.Close(200, "bye", 0, 0))  # this side closes: discard
        return 1

    def close_received(c, s, xfer):
        xfer(s, c, 1, spec.Channel.Close(406, "nope", 0, 0))  # the peer closed: 503
        return 1

    def connection_closing(c, s, xfer):
        c.send_method(0, spec.Connection.Close(200, "bye", 0, 0))
        return 1

    def connection_close_received(c, s, xfer):
        xfer(s, c, 0, spec.Connection.Close(320, "forced", 0, 0))
        return 1

    return {f.__name__: f for f in (never_opened, closing, close_received, connection_closing,
                                     connection_close_received)}


@pytest.mark.parametrize("state", sorted(_states()))
def test_state_machine_handles_runs_like_deliveries_on_channels_not_open(state):
    setup = _states()[state]
    results = []
    for raw in (False, True):
        c, s, xfer = _negotiate()
        ch = setup(c, s, xfer)
        if raw:
            c.decoder.raw_channels.add(ch)
        wire = (encode_method(2, spec.Basic.Ack(1, False))
                + b"".join(deliver(i, ch=ch) for i in (1, 2, 3)))
        try:
            evs = c.receive_data(wire)
            got = ("ok", flatten(evs)[0])
            kinds = [type(e) for e in evs]
        except AMQPError as exc:
            got = (type(exc), exc.reply_code, flatten(exc.events)[0])
            kinds = [type(e) for e in exc.events]
        if raw and got[0] == "ok" and len(got[1]) > 1:
            assert RawDeliveries in kinds
        results.append((got, c.state, c.channel_state(ch)))
    assert results[0] == results[1]
    want = {"never_opened": (ChannelErrorCode, 504), "close_received": (CommandInvalid, 503)}
    if state in want:
        assert results[1][0][:2] == want[state]
        assert len(results[1][0][2]) == 1  # the basic.ack before it
    elif state in ("closing", "connection_closing"):
        # discarded: only the ack on channel 2 remains (dropped too while the connection closes)
        assert results[1][0][0] == "ok"
        assert all(type(e) is MethodFrame for e in results[1][0][1])


# ----------------------------------------------------------- review findings (regressions)

def _with_continuation_flags(msg: bytes) -> bytes:
    """The message with its property list replaced by flags 0x0001 + continuation word 0x0000
    (no property present; valid per 0-9-1 §4.2.6.1, accepted by the decoder)."""
    msize = struct.unpack_from(">I", msg, 3)[0]
    h = 7 + msize + 1
    hsize = struct.unpack_from(">I", msg, h + 3)[0]
    assert hsize == 14  # no properties
    payload = msg[h + 7:h + 7 + 12] + b"\x00\x01\x00\x00"
    header = struct.pack(">BHI", 2, 1, len(payload)) + payload + b"\xce"
    return msg[:h] + header + msg[h + 8 + hsize:]


def test_deliver_columns_no_properties_behind_a_continuation_word_is_none():
    """Compiled and pure deliver_columns agree: flags 0x0001 + 0x0000 means no properties
    (None), as the normal decoder's empty BasicProperties."""
    wire = _with_continuation_flags(
        encode_message(1, spec.Basic.Deliver("c", 1, False, "e", "r"), None, b"x"))
    (ev,) = Decoder().feed(wire)
    assert ev.properties == BasicProperties()
    assert rd.deliver_columns(wire, 1)[4] == [None]
    if SPEEDUPS is not None and hasattr(SPEEDUPS, "deliver_columns"):
        assert SPEEDUPS.deliver_columns(wire, 1) == rd.deliver_columns(wire, 1)


def test_raw_channel_0_deliver_is_still_504():
    """basic.deliver on channel 0 is CHANNEL_ERROR (504) with or without raw mode: the raw
    scan never changes which errors a stream produces."""
    wire = encode_message(0, spec.Basic.Deliver("c", 1, False, "e", "r"), None, b"x")
    with pytest.raises(ChannelErrorCode):
        Decoder().feed(wire)
    dec = Decoder()
    dec.raw_channels.add(0)
    with pytest.raises(ChannelErrorCode):
        dec.feed(wire)
