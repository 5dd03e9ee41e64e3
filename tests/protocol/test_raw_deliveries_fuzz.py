"""Differential fuzz of the codec's raw mode (found no bug in review; keeps it that way):
raw-mode Decoder output against the normal decoder on generated frame streams split at every
byte or at random points (same events once flattened, same errors and reply codes, consecutive
tags, nothing left buffered), and the compiled scan_deliveries / deliver_columns against the
pure-Python ones on generated and bit-flipped frames."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raw_fuzz_helpers import (COMPILED, RAW, RawDeliveries, flatten, rd,
                              run_decoder, split, streams)
from spark_amqp.protocol import AMQPError

S = settings(max_examples=int(os.environ.get("AMQP_FUZZ_EXAMPLES", "150")), deadline=None,
             suppress_health_check=list(HealthCheck))
needs_compiled = pytest.mark.skipif(COMPILED is None, reason="compiled module not in use")



def compare(wire, fm, pieces):
    ref, ref_err, _ = run_decoder(wire, [wire], False, fm)
    got, err, dec = run_decoder(wire, pieces, True, fm)
    assert err == ref_err
    assert flatten(got) == ref
    if err is None:
        assert dec.buffered == 0 and dec.pending_channels() == []
    for ev in got:
        if ev.__class__ is RawDeliveries:
            cols = rd.deliver_columns(ev.data, ev.count)
            msgs = ev.decode()
            assert cols[0] == [m.body for m in msgs]
            if COMPILED is not None:
                assert COMPILED.scan_deliveries(ev.data, 0, len(ev.data), RAW,
                                                (fm or 1 << 40) - 8,
                                                512 * 1024 * 1024)[0] == ev
                assert rd.scan_deliveries(ev.data, 0, len(ev.data), RAW, (fm or 1 << 40) - 8,
                                          512 * 1024 * 1024)[0] == ev
    return got


@S
@given(streams(), st.lists(st.integers(0, 2000), max_size=8))
def test_raw_equals_normal_random_splits(stream, cuts):
    wire, fm = stream
    compare(wire, fm, split(wire, cuts))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams())
def test_raw_equals_normal_every_split_point(stream):
    wire, fm = stream
    compare(wire, fm, [wire])
    for i in range(1, len(wire)):
        compare(wire, fm, [wire[:i], wire[i:]])
    compare(wire, fm, [wire[i:i + 1] for i in range(len(wire))])




def outcome(fn, *a):
    try:
        return "ok", fn(*a)
    except AMQPError as e:
        return type(e), e.reply_code
    except Exception as e:
        return type(e), None


@needs_compiled
@S
@given(streams(), st.sampled_from([None, 0, 1, 2, 5]), st.booleans(), st.data())
def test_columns_compiled_equals_pure(stream, expect, packed, data):
    wire, fm = stream
    if data.draw(st.booleans()):
        b = bytearray(wire)
        for _ in range(data.draw(st.integers(1, 3))):
            b[data.draw(st.integers(0, len(b) - 1))] ^= data.draw(st.integers(1, 255))
        wire = bytes(b)
    assert outcome(COMPILED.deliver_columns, wire, expect, packed) == \
        outcome(rd.deliver_columns, wire, expect, packed)


@needs_compiled
@S
@given(streams(), st.data())
def test_scan_compiled_equals_pure(stream, data):
    wire, fm = stream
    b = bytearray(wire)
    for _ in range(data.draw(st.integers(0, 3))):
        b[data.draw(st.integers(0, len(b) - 1))] ^= data.draw(st.integers(1, 255))
    wire = bytes(b)
    pos = data.draw(st.integers(0, len(wire)))
    n = data.draw(st.integers(pos, len(wire)))
    fmax8 = data.draw(st.sampled_from([(fm or 1 << 40) - 8, 20, 0, 4088]))
    mb = data.draw(st.sampled_from([512 << 20, 0, 5, 2**64 - 1, 2**64]))
    ch = data.draw(st.sampled_from([RAW, 2, 0]))
    assert outcome(COMPILED.scan_deliveries, wire, pos, n, ch, fmax8, mb) == \
        outcome(rd.scan_deliveries, wire, pos, n, ch, fmax8, mb)
