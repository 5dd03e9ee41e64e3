"""Hypothesis strategies for the stream-protocol codec: every command class with random fields,
messages, chunks."""

from __future__ import annotations

from hypothesis import strategies as st

from spark_amqp.protocol.stream import commands as C
from spark_amqp.protocol.stream.chunk import make_sub_batch
from spark_amqp.protocol.stream.constants import Compression, OffsetType

u8 = st.integers(0, 255)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 0xFFFFFFFFFFFFFFFF)
i64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
corr = st.integers(1, 0xFFFFFFFF)
text = st.text(max_size=12)
strs = st.lists(text, max_size=4)
str_maps = st.dictionaries(text, text, max_size=4)
messages = st.binary(max_size=64)


def offset_specs(allow_none: bool = False):
    kinds = [st.just(C.OffsetSpec(OffsetType.FIRST)), st.just(C.OffsetSpec(OffsetType.LAST)),
             st.just(C.OffsetSpec(OffsetType.NEXT)),
             u64.map(lambda v: C.OffsetSpec(OffsetType.OFFSET, v)),
             i64.map(lambda v: C.OffsetSpec(OffsetType.TIMESTAMP, v))]
    if allow_none:
        kinds.append(st.just(C.OffsetSpec(OffsetType.NONE)))
    return st.one_of(*kinds)


KIND_STRATEGIES = {
    "u8": u8, "u16": u16, "u32": u32, "u64": u64, "i64": i64, "bool": st.booleans(),
    "str": text, "bytes": st.binary(min_size=1, max_size=32), "map": str_maps,
    "list": strs, "opt_map": str_maps, "offset_spec": offset_specs(),
    "offset_spec_none": offset_specs(allow_none=True),
    "cmd_versions": st.lists(st.builds(C.CommandVersion, u16, u16, u16), max_size=4),
    "stats": st.dictionaries(text, i64, max_size=4),
}


def sub_batches():
    return st.builds(lambda ms, comp: make_sub_batch(ms, comp),
                     st.lists(messages, min_size=1, max_size=5),
                     st.sampled_from([Compression.NONE, Compression.GZIP]))


def _table_command(cls):
    fields = {"correlation_id": corr} if cls.CORRELATED else {}
    if issubclass(cls, C.Response):
        fields["code"] = u16
    for name, kind in cls.FIELDS:
        fields[name] = KIND_STRATEGIES[kind]
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def _special(cls):
    if cls is C.Subscribe:
        return st.builds(C.Subscribe, corr, u8, text, offset_specs(), u16, str_maps)
    if cls is C.SubscribeResponse:
        return st.builds(C.SubscribeResponse, corr, u16)
    if cls is C.SaslAuthenticateResponse:
        return st.builds(C.SaslAuthenticateResponse, corr, u16, st.binary(max_size=40))
    if cls is C.MetadataResponse:
        brokers = st.lists(st.builds(C.Broker, u16, text, u32), max_size=3)
        metas = st.lists(st.builds(C.StreamMetadata, text, u16, u16,
                                   st.lists(u16, max_size=3).map(tuple)), max_size=3)
        return st.builds(C.MetadataResponse, corr, brokers, metas)
    if cls is C.Publish:
        def build(entries, v2, pid):
            ids = [e[0] for e in entries]
            msgs = [e[1] for e in entries]
            fvs = None
            if v2:
                fvs = [None if isinstance(m, C.SubBatch) else e[2] for m, e in zip(msgs, entries)]
            return C.Publish(pid, ids, msgs, fvs)
        entry = st.tuples(u64, st.one_of(messages, sub_batches()), st.one_of(st.none(), text))
        return st.builds(build, st.lists(entry, max_size=5), st.booleans(), u8)
    if cls is C.PublishConfirm:
        return st.builds(lambda p, ids: C.PublishConfirm(p, ids), u8, st.lists(u64, max_size=6))
    if cls is C.PublishError:
        return st.builds(C.PublishError, u8, st.lists(st.tuples(u64, u16), max_size=4))
    if cls is C.Deliver:
        return st.builds(C.Deliver, u8, st.binary(max_size=80), st.one_of(st.none(), u64))
    raise AssertionError(cls)


def command_of(cls):
    if hasattr(cls, "FIELDS"):
        return _table_command(cls)
    return _special(cls)


ALL_CLASSES = sorted(set(C.COMMANDS.values()), key=lambda c: (c.KEY, c.__name__))


def commands():
    return st.sampled_from(ALL_CLASSES).flatmap(command_of)
