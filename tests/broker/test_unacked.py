"""spark_amqp.broker.unacked.Unacked against a reference model (a dict in tag order): random
deliveries, single acks out of order, ack multiple, ack all and tx-rollback restores, with
enough entries to cross the compaction thresholds."""

from __future__ import annotations

import random

import pytest

from spark_amqp.broker.unacked import Unacked


def _check(u: Unacked, ref: dict) -> None:
    assert len(u) == len(ref)
    assert bool(u) == bool(ref)
    live = [(t, m, o) for t, m, o in zip(u.tags[u.head:], u.msgs[u.head:], u.owners[u.head:]) if m is not None]
    assert live == [(t, m, o) for t, (m, o) in ref.items()]
    assert u.holes == sum(1 for m in u.msgs[u.head:] if m is None)


def _batch(ref: dict, tags: list[int]) -> tuple[list, list, list]:
    return tags, [ref[t][0] for t in tags], [ref[t][1] for t in tags]


@pytest.mark.parametrize("seed", range(4))
def test_matches_a_reference_model(seed):
    rnd = random.Random(seed)
    u = Unacked()
    ref: dict[int, tuple] = {}
    next_tag = 1
    owners = ["c1", "c2", "q"]
    taken: list[tuple] = []
    for _ in range(1000):
        op = rnd.random()
        if op < 0.35:
            n = rnd.choice((1, 1, 5, 300, 5000))
            o = rnd.choice(owners)
            msgs = [object() for _ in range(n)]
            if n == 1:
                u.add(next_tag, msgs[0], o)
            else:
                u.add_run(next_tag, msgs, o)
            for i, m in enumerate(msgs):
                ref[next_tag + i] = (m, o)
            # a no-ack delivery or an unknown tag in between: tags are not contiguous
            next_tag += n + rnd.choice((0, 0, 1))
        elif op < 0.75:
            tag = rnd.choice(list(ref)) if ref and rnd.random() < 0.9 else next_tag + 5
            got = u.take_one(tag)
            if tag in ref:
                assert got == _batch(ref, [tag])
                del ref[tag]
                taken.append(got)
            else:
                assert got is None
        elif op < 0.93:
            tag = rnd.choice(list(ref)) if ref and rnd.random() < 0.9 else 10 ** 9
            got = u.take_upto(tag)
            if tag in ref:
                want = [t for t in ref if t <= tag]
                assert got == _batch(ref, want)
                for t in want:
                    del ref[t]
                taken.append(got)
            else:
                assert got is None
        elif op < 0.97 and taken:
            batches = rnd.sample(taken, min(len(taken), 3))
            for b in batches:
                taken.remove(b)
                for t, m, o in zip(*b):
                    ref[t] = (m, o)
            ref = dict(sorted(ref.items()))
            u.restore(batches)
        else:
            got = u.take_all()
            assert got == _batch(ref, list(ref))
            ref.clear()
            taken.clear()
        _check(u, ref)
        assert all(tag in u for tag in list(ref)[:3])


def test_single_acks_in_order_keep_the_lists_short():
    u = Unacked()
    for t in range(1, 20001):
        u.add(t, t, "c")
        if t > 10:
            assert u.take_one(t - 10) == ([t - 10], [t - 10], ["c"])
    assert len(u) == 10
    assert len(u.tags) < 2 * 4096 + 10


def test_holes_behind_an_old_outstanding_tag_are_compacted():
    u = Unacked()
    u.add(1, "old", "c")
    for t in range(2, 50002):
        u.add(t, t, "c")
        u.take_one(t)
    assert len(u) == 1
    assert len(u.tags) < 2 * 4096 + 10
    assert u.take_upto(1) == ([1], ["old"], ["c"])
    assert not u and u.tags == []
