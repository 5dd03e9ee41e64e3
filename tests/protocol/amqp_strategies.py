"""Hypothesis strategies for AMQP 0-9-1 values, methods, properties and frame streams.

Generated from the codec's own spec table (``spec.METHODS`` field types) so every method of
the table is covered without a hand-written list.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from hypothesis import strategies as st

from spark_amqp.protocol import BasicProperties, spec
from spark_amqp.protocol.properties import PROPERTIES

UTC = dt.timezone.utc


def shortstr(max_bytes: int = 255):
    """Text whose UTF-8 encoding fits a short string."""
    return st.text(max_size=max_bytes // 4 + 20).filter(lambda s: len(s.encode()) <= max_bytes)


longstr = st.binary(max_size=300)

INT_RANGES = {"octet": (0, 2**8 - 1), "short": (0, 2**16 - 1), "long": (0, 2**32 - 1),
              "longlong": (0, 2**64 - 1), "timestamp": (0, 2**64 - 1)}

# --------------------------------------------------------------------- field-table values

decimals = st.builds(lambda raw, scale: Decimal(raw).scaleb(-scale),
                     st.integers(-(2**31), 2**31 - 1), st.integers(0, 20))
datetimes = st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(9999, 1, 1),
                         timezones=st.just(UTC)).map(lambda d: d.replace(microsecond=0, fold=0))
finite_floats = st.floats(allow_nan=False)
int64 = st.integers(-(2**63), 2**63 - 1)

scalar_values = st.one_of(
    st.text(max_size=40), st.binary(max_size=40), st.booleans(), int64, finite_floats,
    decimals, datetimes, st.none(),
)


def table_keys():
    return shortstr(60)


def field_values(scalars=scalar_values, max_leaves: int = 12):
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4),
                                st.dictionaries(table_keys(), inner, max_size=4)),
        max_leaves=max_leaves)


def field_tables(scalars=scalar_values, max_size: int = 6):
    return st.dictionaries(table_keys(), field_values(scalars), max_size=max_size)


# --------------------------------------------------------------------- methods

def value_for(ftype: str, tables=None):
    if ftype in INT_RANGES:
        lo, hi = INT_RANGES[ftype]
        return st.integers(lo, hi)
    if ftype == "bit":
        return st.booleans()
    if ftype == "shortstr":
        return shortstr()
    if ftype == "longstr":
        return longstr
    if ftype == "table":
        return tables if tables is not None else field_tables()
    raise AssertionError(ftype)


def method_of(cls, tables=None):
    """Instances of one method class with random field values."""
    return st.builds(cls, **{n: value_for(t, tables) for n, t in zip(cls.fields, cls.field_types)})


ALL_METHOD_CLASSES = sorted(spec.METHODS.values(), key=lambda c: c.INDEX)
methods = st.sampled_from(ALL_METHOD_CLASSES).flatmap(method_of)

# --------------------------------------------------------------------- properties

def prop_value(ptype: str, tables=None):
    if ptype == "shortstr":
        return shortstr()
    if ptype == "octet":
        return st.integers(0, 255)
    if ptype == "timestamp":
        return st.integers(0, 2**64 - 1)
    return tables if tables is not None else field_tables()


def properties(tables=None):
    """BasicProperties with any combination of the 14 properties present."""
    return st.builds(BasicProperties, **{
        n: st.none() | prop_value(t, tables) for n, t in PROPERTIES})


channels = st.integers(1, 65535)
bodies = st.binary(max_size=3000)


# mutations of valid frames (bit flips, truncation, insertion, deletion, length fields set to
# extreme values): the fuzz tests of the decoder and of the broker's framing
mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 7)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 8)),
    st.tuples(st.just("length"), st.integers(0, 10**6),
              st.sampled_from([0, 1, 255, 256, 65535, 2**31, 2**32 - 1]), st.sampled_from([1, 2, 4])),
)


def mutate(data: bytes, muts) -> bytes:
    b = bytearray(data)
    for m in muts:
        if not b:
            break
        pos = m[1] % len(b)
        if m[0] == "flip":
            b[pos] ^= 1 << m[2]
        elif m[0] == "truncate":
            del b[pos:]
        elif m[0] == "insert":
            b[pos:pos] = m[2]
        elif m[0] == "delete":
            del b[pos:pos + m[2]]
        else:  # overwrite a length-like field with an extreme value
            width = m[3]
            b[pos:pos + width] = (m[2] % (1 << (8 * width))).to_bytes(width, "big")
    return bytes(b)
