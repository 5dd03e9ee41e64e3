"""Property test of the publisher-confirm bookkeeping (no broker): any order of single and
``multiple`` acks/nacks, duplicates included, settles exactly what a simple set model does
(RabbitMQ docs: ``multiple`` settles every publish up to and including the tag). The
bookkeeping is :class:`~spark_amqp.client.confirms.ConfirmTracker`, driven here through the
channel's confirm handler as the I/O thread drives it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_amqp.client.channel import Channel


class _FakeConn:
    frame_max = 131072
    _wake: list = []
    _io_ident = None


ops = st.lists(st.tuples(st.integers(1, 40), st.booleans(), st.booleans()), max_size=60)


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 40), ops=ops, keep=st.booleans())
def test_confirm_tracker_matches_model(n, ops, keep):
    ch = Channel(_FakeConn(), 1)
    ch._confirming = True
    if keep:  # the messages are kept beside the numbers (keep_unconfirmed, the sink's republish)
        ch.keep_unconfirmed()
    t = ch._confirms
    if n:
        assert t.add(n, [f"m{s}" for s in range(1, n + 1)]) == 1
    assert ch.next_publish_seq == n + 1
    outstanding = set(range(1, n + 1))
    acked = 0
    nacked: list[int] = []
    for tag, multiple, nack in ops:
        if multiple:
            hit = sorted(s for s in outstanding if s <= tag)
        else:
            hit = [tag] if tag in outstanding else []
        outstanding -= set(hit)
        if nack:
            nacked += hit
        else:
            acked += len(hit)
        ch._on_confirm(tag, multiple, nack)
        assert ch.in_flight == len(outstanding)
        assert ch.unconfirmed() == outstanding
        assert ch.oldest_unconfirmed == min(outstanding, default=n + 1)
        assert ch.unconfirmed_messages() == ([f"m{s}" for s in sorted(outstanding)] if keep
                                             else [])
    assert t.acked == acked
    assert sorted(t.nacked) == sorted(nacked)
    if not outstanding:
        assert not t._unconfirmed and not t._early and not t._kept
    assert t.take() == (acked, sorted(nacked)) and t.take() == (0, [])
