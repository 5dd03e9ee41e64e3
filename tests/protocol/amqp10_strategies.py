"""Hypothesis strategies for AMQP 1.0 values and messages (spark_amqp.protocol.amqp10)."""

from __future__ import annotations

import uuid

from hypothesis import strategies as st

from spark_amqp.protocol.amqp10 import (Array, Byte, Char, Decimal32, Decimal64, Decimal128, Described,
                                        Float, Header, Int, Message, Properties, Short, Symbol,
                                        Timestamp, UByte, UInt, ULong, UShort)

_text = st.text(max_size=40)
_sym = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=30).map(Symbol)


def _ints(cls, lo, hi):
    return st.integers(lo, hi).map(cls)


SCALARS = st.one_of(
    st.none(), st.booleans(),
    _ints(UByte, 0, 255), _ints(UShort, 0, 65535), _ints(UInt, 0, 2 ** 32 - 1),
    _ints(ULong, 0, 2 ** 64 - 1), _ints(Byte, -128, 127), _ints(Short, -2 ** 15, 2 ** 15 - 1),
    _ints(Int, -2 ** 31, 2 ** 31 - 1), st.integers(-2 ** 63, 2 ** 63 - 1),
    st.floats(allow_nan=False, width=32).map(Float), st.floats(allow_nan=False),
    st.characters().map(Char), st.integers(-2 ** 63, 2 ** 63 - 1).map(Timestamp),
    st.uuids(), st.binary(max_size=300), _text, st.text(min_size=250, max_size=300), _sym,
    st.binary(min_size=4, max_size=4).map(Decimal32), st.binary(min_size=8, max_size=8).map(Decimal64),
    st.binary(min_size=16, max_size=16).map(Decimal128),
)

_KEYS = st.one_of(_text, _sym, _ints(ULong, 0, 2 ** 64 - 1), st.integers(-100, 100))


def _arrays(children):
    return st.one_of(
        st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), max_size=5).map(Array),
        st.lists(_text, max_size=5).map(Array),
        st.lists(_sym, max_size=5).map(Array),
        st.lists(_ints(UInt, 0, 2 ** 32 - 1), max_size=5).map(Array),
        st.lists(st.booleans(), max_size=5).map(Array),
        st.lists(st.lists(children, max_size=3), min_size=1, max_size=3).map(Array),
    )


VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(_KEYS, children, max_size=6),
        _arrays(children),
        st.tuples(st.one_of(_ints(ULong, 0, 2 ** 64 - 1), _sym), children).map(lambda t: Described(*t)),
    ),
    max_leaves=20,
)

_ids = st.one_of(st.none(), _text, st.binary(max_size=20), st.uuids(), _ints(ULong, 0, 2 ** 64 - 1))
_opt = st.one_of(st.none(), _text)
_ts = st.one_of(st.none(), st.integers(-2 ** 63, 2 ** 63 - 1).map(Timestamp))

HEADERS = st.builds(Header, durable=st.one_of(st.none(), st.booleans()),
                    priority=st.one_of(st.none(), _ints(UByte, 0, 255)),
                    ttl=st.one_of(st.none(), _ints(UInt, 0, 2 ** 32 - 1)),
                    first_acquirer=st.one_of(st.none(), st.booleans()),
                    delivery_count=st.one_of(st.none(), _ints(UInt, 0, 2 ** 32 - 1)))

PROPERTIES = st.builds(Properties, message_id=_ids, user_id=st.one_of(st.none(), st.binary(max_size=20)),
                       to=_opt, subject=_opt, reply_to=_opt, correlation_id=_ids,
                       content_type=st.one_of(st.none(), _sym), content_encoding=st.one_of(st.none(), _sym),
                       absolute_expiry_time=_ts, creation_time=_ts, group_id=_opt,
                       group_sequence=st.one_of(st.none(), _ints(UInt, 0, 2 ** 32 - 1)),
                       reply_to_group_id=_opt)

_annotations = st.one_of(st.none(), st.dictionaries(st.one_of(_sym, _ints(ULong, 0, 1000)), VALUES, min_size=1,
                                                    max_size=4))


@st.composite
def messages(draw) -> Message:
    kind = draw(st.sampled_from(["data", "data", "datas", "value", "sequence"]))
    if kind == "data":
        body, bt = draw(st.binary(max_size=400)), "data"
    elif kind == "datas":
        body, bt = draw(st.lists(st.binary(max_size=50), min_size=2, max_size=4)), "data"
    elif kind == "value":
        body, bt = draw(VALUES), "value"
    else:
        body, bt = draw(st.lists(st.lists(VALUES, max_size=3), min_size=1, max_size=3)), "sequence"
    h = draw(st.one_of(st.none(), HEADERS))
    p = draw(st.one_of(st.none(), PROPERTIES))
    if h is not None and h.is_empty():
        h = None
    if p is not None and p.is_empty():
        p = None
    return Message(body, body_type=bt, header=h, delivery_annotations=draw(_annotations),
                   message_annotations=draw(_annotations), properties=p,
                   application_properties=draw(st.one_of(st.none(), st.dictionaries(_text, SCALARS, min_size=1,
                                                                                   max_size=5))),
                   footer=draw(_annotations))


def uuid_strings():
    return st.uuids().map(str)


__all__ = ["SCALARS", "VALUES", "HEADERS", "PROPERTIES", "messages", "uuid", "uuid_strings"]
