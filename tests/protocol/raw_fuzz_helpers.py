"""Frame-stream strategies and helpers for the raw-mode differential fuzz (test_raw_deliveries_fuzz.py)."""
from __future__ import annotations

import struct

from hypothesis import strategies as st

from spark_amqp.protocol import (AMQPError, BasicProperties, ContentMessage, Decoder,
                                 RawDeliveries, encode_method, spec)
from spark_amqp.protocol import frames as F
from spark_amqp.protocol import raw_deliveries as rd
from spark_amqp.protocol.properties import SPEEDUPS

D = spec.Basic.Deliver
RAW = 1
OTHER = 2
HB = F.HEARTBEAT_FRAME
COMPILED = SPEEDUPS if SPEEDUPS is not None and hasattr(SPEEDUPS, "scan_deliveries") else None


def frame(t, ch, payload):
    return struct.pack(">BHI", t, ch, len(payload)) + payload + b"\xce"


def method_frame(ch, m):
    return encode_method(ch, m)


def header_frame(ch, body_size, props_bytes=b"\x00\x00", class_id=60):
    return frame(2, ch, struct.pack(">HHQ", class_id, 0, body_size) + props_bytes)


def message_frames(ch, m, props_bytes, body, cuts):
    """[method, header, body frames...] with the body cut at ``cuts`` (may repeat: empty frames)."""
    out = [method_frame(ch, m), header_frame(ch, len(body), props_bytes, m.CLASS_ID)]
    pts = [0] + sorted(min(c, len(body)) for c in cuts) + [len(body)]
    if body:
        for a, b in zip(pts, pts[1:]):
            out.append(frame(3, ch, body[a:b]))
    else:
        # a zero-length body may still come with empty body frames?  no: the decoder
        # completes the message at the header; keep none
        pass
    return out


ascii_s = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=8)
short = st.one_of(ascii_s, ascii_s, st.text(max_size=4))


@st.composite
def props_bytes(draw):
    kind = draw(st.sampled_from(["none", "none", "obj", "obj", "cont", "all"]))
    if kind == "none":
        return b"\x00\x00"
    if kind == "cont":
        return b"\x00\x01\x00\x00"
    if kind == "all":
        p = BasicProperties(content_type="a", content_encoding="b",
                            headers={"x-delivery-count": draw(st.integers(0, 5)), "s": "v",
                                     "n": {"a": [1, "x", None, True]}},
                            delivery_mode=2, priority=draw(st.integers(0, 255)),
                            correlation_id="c", reply_to="r", expiration="60000",
                            message_id="m", timestamp=draw(st.integers(0, 2**64 - 1)),
                            type="t", user_id="u", app_id="ap", cluster_id="cl")
        return p.encode()
    kw = {}
    if draw(st.booleans()):
        kw["content_type"] = draw(short)
    if draw(st.booleans()):
        kw["headers"] = draw(st.dictionaries(ascii_s, st.one_of(st.integers(-2**63, 2**63 - 1),
                                                                st.text(max_size=4),
                                                                st.binary(max_size=4)),
                                             max_size=3))
    if draw(st.booleans()):
        kw["priority"] = draw(st.integers(0, 255))
    return BasicProperties(**kw).encode()


@st.composite
def streams(draw, frame_max=None):
    fm = draw(st.sampled_from([0, 4096, 131072])) if frame_max is None else frame_max
    tag = draw(st.one_of(st.integers(1, 4), st.integers(2**64 - 4, 2**64 - 1)))
    frames_out = []
    pending_other = []  # frames of an OTHER-channel message still to interleave
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["deliver"] * 6 + ["hb", "other", "getok", "ack"]))
        if kind == "deliver":
            m = D(draw(short), tag, draw(st.booleans()), draw(short), draw(short))
            body = draw(st.one_of(st.just(b""), st.binary(max_size=30)))
            cuts = draw(st.lists(st.integers(0, 30), max_size=4))
            fr = message_frames(RAW, m, draw(props_bytes()), body, cuts)
            # interleave heartbeats / other-channel frames inside the message sometimes
            if draw(st.integers(0, 4)) == 0 and len(fr) > 1:
                at = draw(st.integers(1, len(fr) - 1))
                ins = HB if draw(st.booleans()) or not pending_other else pending_other.pop(0)
                fr.insert(at, ins)
            frames_out += fr
            tag = (tag + draw(st.sampled_from([1, 1, 1, 1, 2, 0, 5]))) % 2**64
        elif kind == "hb":
            frames_out.append(HB)
        elif kind == "ack":
            frames_out.append(method_frame(OTHER, spec.Basic.Ack(tag, False)))
        elif kind == "other":
            m = D(draw(short), tag, False, "", "")
            fr = message_frames(OTHER, m, b"\x00\x00", draw(st.binary(max_size=8)), [])
            frames_out += fr
        else:
            m = spec.Basic.GetOk(tag, False, "e", "r", 0)
            frames_out += message_frames(draw(st.sampled_from([RAW, OTHER])), m, b"\x00\x00",
                                         draw(st.binary(max_size=8)), [])
    # a trailing cancel / close on the raw channel
    tail = draw(st.sampled_from([None, "cancel", "close"]))
    if tail == "cancel":
        frames_out.append(method_frame(RAW, spec.Basic.Cancel("ct", True)))
    elif tail == "close":
        frames_out.append(method_frame(RAW, spec.Channel.Close(404, "x", 60, 20)))
    wire = b"".join(frames_out)
    if fm and any(len(f) > fm for f in frames_out):
        fm = 0
    return wire, fm


def run_decoder(wire, pieces, raw, frame_max):
    dec = Decoder(frame_max=frame_max)
    if raw:
        dec.raw_channels.add(RAW)
    events = []
    err = None
    for p in pieces:
        try:
            events += dec.feed(p)
        except AMQPError as e:
            events += e.events
            err = (type(e), e.reply_code)
            break
    return events, err, dec


def flatten(events):
    out = []
    for e in events:
        if e.__class__ is RawDeliveries:
            msgs = e.decode()
            assert len(msgs) == e.count
            assert [m.method.delivery_tag for m in msgs] == [
                (e.first_tag + i) for i in range(e.count)]
            assert all(m.channel == e.channel for m in msgs)
            out += msgs
        else:
            out.append(e)
    return out


def split(wire, cuts):
    pts = [0] + sorted(set(c for c in cuts if 0 < c < len(wire))) + [len(wire)]
    return [wire[a:b] for a, b in zip(pts, pts[1:])]
