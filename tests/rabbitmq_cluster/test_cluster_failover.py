"""Failover on a real three-node RabbitMQ cluster (issue 27): a node goes away under a
queue-mode query reading a quorum queue while a publisher writes through another node.

The cluster starts once per module (``rmq_cluster``, conftest). Each test measures the time
from the fault to the first micro-batch holding a message published after the fault (so it
came through a working connection, not from the driver's buffer; printed; the issue's target
is 10 s) and checks: 0 lost, duplicates at most the batches in flight.
"""

from __future__ import annotations

import time

import pytest

from spark_amqp.client import connect

from cluster_helpers import (BatchLog, Publisher, declare_quorum, declare_stream, delete_queue,
                             fault_between_batches, held_in_stream, start_query, stream_query,
                             wait_until)

pytestmark = [pytest.mark.spark, pytest.mark.rabbitmq_cluster]

#: the publishers run until stopped once the fault is over (a fixed count could all be
#: published before the fault on a loaded machine, where a first batch took 20 s)
UNTIL_STOPPED = 10**9
#: messages/s of a publisher: below what the query reads on a loaded 2-core machine (1,000 per
#: trigger, 1-2 s a batch there), so no backlog builds up and "the first batch holding an id
#: published after the fault" measures the failover, not the time to drain a backlog (at
#: 1,500/s it measured 44.8 s in a run beside other Spark work, against 6 s quiet)
RATE = 500
PER_TRIGGER = 1000
#: a loss replays at most the batch run but not acked plus the one planned: 2 batches
MAX_DUPLICATES = 2 * PER_TRIGGER


def _read_through_a_fault(spark, cluster, unique, tmp_path, capsys, fault, heal=None,
                          url=None, **options):
    """Query reading a quorum queue led by node 2 and connected to node 2 first; publisher on
    node 4 writing until stopped after the failover; ``fault()`` after two batches; returns
    the seconds from the fault to the next batch with rows."""
    n2, _, n4 = cluster.nodes
    q = unique("qq-failover")
    declare_quorum(cluster.node_url(n2), q)
    log = BatchLog()
    # runs until stopped: on a loaded machine the first batch can take longer than a fixed
    # number of messages takes to publish, and the fault must come while it writes
    pub = Publisher(cluster.node_url(n4), q, UNTIL_STOPPED, rate=RATE)
    query = start_query(spark, url or cluster.url(), q, log, str(tmp_path / "cp"),
                        maxMessagesPerTrigger=PER_TRIGGER, shuffleAddresses="false",
                        connectionTimeout=3, **options)
    try:
        t_fault, t_next = fault_between_batches(pub, log, query, fault, "fault")
        failover = t_next - t_fault
        if heal is not None:
            heal()
        pub.stop()  # it wrote before, through and after the fault
        assert pub.error is None, pub.error
        n = pub.confirmed
        wait_until(lambda: log.distinct() >= n, 180, f"all {n} ids", query)
        time.sleep(1.5)  # a few more triggers: nothing beyond n may appear
        ids = set(log.ids())
        assert ids == {b"%08d" % i for i in range(n)}, "lost or foreign ids"
        dups = log.duplicates()
        assert dups <= MAX_DUPLICATES, f"{dups} duplicates > {MAX_DUPLICATES}"
        assert query.exception() is None
        with capsys.disabled():
            print(f"\n[cluster] {fault.__name__}: fault -> next batch {failover:.1f} s; "
                  f"{n} ids, 0 lost, {dups} duplicates, {len(log.batches)} batches")
        return failover
    finally:
        query.stop()
        pub.stop(10)
        delete_queue(cluster.url(), q)


def test_queue_mode_node_stop_app_fails_over_to_another_node(spark, cluster, unique, tmp_path,
                                                              capsys):
    n2 = cluster.nodes[0]

    def stop_app_node2():
        cluster.stop_app(n2)

    failover = _read_through_a_fault(spark, cluster, unique, tmp_path, capsys, stop_app_node2,
                                     heal=lambda: cluster.start_app(n2))
    # the target is 10 s; measured 6.0 s here, bench median 3.5 s (2026-11-26, loaded
    # 2-core machine); the bound leaves room for a slow CI machine
    assert failover <= 30, f"{failover:.1f} s from stop_app to the next batch (target 10 s)"


def test_queue_mode_kill9_of_the_quorum_leaders_node(spark, cluster, unique, tmp_path, capsys):
    """kill -9 of the Erlang VM of the node that leads the queue (node 2, where it was declared,
    and the query's connection): a new leader is elected on nodes 3/4, the query reconnects
    there and the unacked batch comes back redelivered."""
    n2 = cluster.nodes[0]

    def kill9_leader():
        # the queue of this test is the newest one led by node 2 (declared there)
        cluster.kill9(n2)

    failover = _read_through_a_fault(spark, cluster, unique, tmp_path, capsys, kill9_leader,
                                     heal=lambda: cluster.restart(n2))
    assert failover <= 30, f"{failover:.1f} s from kill -9 to the next batch"


def test_queue_mode_stalled_node_found_by_heartbeats(spark, cluster, stall_proxy, unique,
                                                     tmp_path, capsys):
    """The query's node stops answering with its socket open (a proxy that stops forwarding):
    only heartbeats (2 s here) notice, within two intervals; then the next address."""
    n2, n3, n4 = cluster.nodes
    proxy = stall_proxy(n2)
    url = (f"amqp://guest:guest@127.0.0.1:{proxy.port},127.0.0.1:{cluster.ports[n3]},"
           f"127.0.0.1:{cluster.ports[n4]}/%2F")
    hb = 2

    def stall_node2():
        proxy.stall()

    failover = _read_through_a_fault(spark, cluster, unique, tmp_path, capsys, stall_node2,
                                     heal=proxy.heal, url=url, heartbeat=hb)
    # detection within 2 heartbeat intervals (4 s), the reconnect back-off (0.5 s), the stalled
    # address' connectionTimeout (3 s; shuffleAddresses=false tries it first), then a trigger
    assert 2 * hb - 1 <= failover <= 2 * hb + 3 + 10, \
        f"{failover:.1f} s from the stall to the next batch"


def test_every_node_down_longer_than_failover_timeout(spark, cluster, unique, tmp_path, capsys):
    """Every node stopped under a queue-mode and a stream-mode query: after failoverTimeout
    (5 s) each query fails with one error listing the three addresses (the stream mode's from
    the driver's tail probe: it was caught up, so only the probe was connecting); nothing was
    acked wrongly: the queries restarted from their checkpoints once the cluster is back read
    every message (queue mode 0 lost, stream mode exactly once)."""
    n2, n3, n4 = cluster.nodes
    q, st = unique("qq-alldown"), unique("st-alldown")
    declare_quorum(cluster.node_url(n2), q)
    declare_stream(cluster.node_url(n2), st)
    n = 6000
    for name in (q, st):
        pub = Publisher(cluster.node_url(n4), name, n, rate=1e9, chunk=500)
        pub.run()
        assert pub.error is None, pub.error
    log, log_s = BatchLog(), BatchLog()
    cp, cp_s = str(tmp_path / "cp"), str(tmp_path / "cp-s")
    opts = dict(failoverTimeout=5, connectionTimeout=3)

    def queries():
        return (start_query(spark, cluster.url(), q, log, cp, maxMessagesPerTrigger=PER_TRIGGER,
                            **opts),
                stream_query(spark, cluster.url(), st, log_s, cp_s, PER_TRIGGER, **opts))

    query, s_query = queries()
    try:
        wait_until(lambda: sum(1 for _, b in log.batches if b) >= 2, 120, "two batches", query)
        wait_until(lambda: log_s.distinct() >= n, 120, "the stream query caught up", s_query)
        t0 = time.monotonic()
        for node in (n4, n3, n2):
            cluster.stop_app(node)
        t_down = time.monotonic()
        wait_until(lambda: query.exception() is not None, 120, "the query to fail")
        failed_after = time.monotonic() - t_down
        wait_until(lambda: s_query.exception() is not None, 120, "the stream query to fail")
        s_failed_after = time.monotonic() - t_down
        for text in (str(query.exception()), str(s_query.exception())):
            assert "failoverTimeout 5 s" in text, text
            for node in (n2, n3, n4):
                assert f"127.0.0.1:{cluster.ports[node]}" in text, text
        assert "tails of" in str(s_query.exception()), s_query.exception()
        seen = log.distinct()
    finally:
        query.stop()
        s_query.stop()
    for node in (n2, n3, n4):  # the last one stopped starts first
        cluster.start_app(node, wait=False)
    cluster.wait_running(cluster.nodes)
    cluster.wait_online([q, st])
    query, s_query = queries()
    try:
        with connect(cluster.url()) as conn:  # 100 more after the restart
            ch = conn.channel()
            ch.confirm_select()
            for i in range(n, n + 100):
                ch.basic_publish(b"%08d" % i, routing_key=st)
            ch.wait_for_confirms(timeout=30)
        wait_until(lambda: log.distinct() >= n, 180, f"all {n} ids after the restart", query)
        wait_until(lambda: log_s.distinct() >= n + 100, 180, f"all {n + 100} stream ids after "
                   "the restart", s_query)
        time.sleep(1.5)
    finally:
        query.stop()
        s_query.stop()
        delete_queue(cluster.url(), q)
        delete_queue(cluster.url(), st)
    assert set(log.ids()) == {b"%08d" % i for i in range(n)}
    dups = log.duplicates()
    assert dups <= MAX_DUPLICATES, dups
    assert sorted(log_s.ids()) == [b"%08d" % i for i in range(n + 100)], \
        "stream mode: not exactly once across the failure and the restart"
    with capsys.disabled():
        print(f"\n[cluster] every node down: the queue-mode query failed {failed_after:.1f} s, "
              f"the stream-mode query {s_failed_after:.1f} s after the last stop "
              f"({time.monotonic() - t0:.0f} s in all); {seen} ids before, all {n} after the "
              f"restart, {dups} duplicates; stream {n + 100} ids exactly once")


def test_classic_queue_on_a_stopped_node_waits_for_its_node(spark, cluster, unique, tmp_path,
                                                             capsys):
    """A classic queue lives on one node (its home). While that node is stopped the queue is
    unavailable from every node (RabbitMQ answers a declare with 404 "home node ... is down
    or inaccessible"): the query reads nothing, retries (it is not a missing queue, so
    failOnDataLoss does not fail it) and goes on when the node is back; its persistent
    messages are all there (0 lost)."""
    n2, n3, n4 = cluster.nodes
    q = unique("classic-failover")
    with connect(cluster.node_url(n2)) as conn:
        conn.channel().queue_declare(q, durable=True)
    n = 4000
    pub = Publisher(cluster.node_url(n2), q, n, rate=1e9, chunk=500, persistent=True)
    pub.run()
    assert pub.error is None, pub.error
    log = BatchLog()
    url = cluster.url([n3, n4])  # the query never connects to the queue's home node
    query = start_query(spark, url, q, log, str(tmp_path / "cp"), maxMessagesPerTrigger=500,
                        prefetch=500, failoverTimeout=120, connectionTimeout=3)
    try:
        wait_until(lambda: log.distinct() >= 500, 120, "a first batch", query)
        cluster.stop_app(n2)
        t_stop = time.monotonic()
        time.sleep(8)
        seen_down = log.distinct()
        assert seen_down < n, "the whole queue was read while its home node was down"
        assert query.exception() is None, query.exception()
        late = [len(ids) for t, ids in log.batches if t > t_stop + 3 and ids]
        assert late == [], f"rows read while the queue's node was down: {late}"
        cluster.start_app(n2)
        t_back = time.monotonic()
        wait_until(lambda: log.distinct() >= n, 180, f"all {n} ids once the node is back", query)
        resumed = log.with_rows_after(t_back) - t_back
    finally:
        query.stop()
        delete_queue(cluster.node_url(n2), q)
    assert set(log.ids()) == {b"%08d" % i for i in range(n)}
    with capsys.disabled():
        print(f"\n[cluster] classic queue, home node stopped 8 s: {seen_down} of {n} ids read "
              f"before, none while down, the rest {resumed:.1f} s after start_app; "
              f"{log.duplicates()} duplicates")


def test_stream_mode_node_stop_exactly_once(spark, cluster, unique, tmp_path, capsys):
    """Stream mode: the node leading the stream and serving the query stops while a publisher
    writes through another node; the driver's probe and the executors' range reads fail over
    (a stream has the same offsets on every replica): every message exactly once."""
    n2, _, n4 = cluster.nodes
    s = unique("st-failover")
    declare_stream(cluster.node_url(n2), s)
    pub = Publisher(cluster.node_url(n4), s, UNTIL_STOPPED, rate=RATE)
    log = BatchLog()
    query = stream_query(spark, cluster.url(), s, log, str(tmp_path / "cp"), PER_TRIGGER,
                         shuffleAddresses="false", connectionTimeout=3)
    try:
        t_stop, t_next = fault_between_batches(pub, log, query, lambda: cluster.stop_app(n2),
                                               "stop")
        cluster.start_app(n2)
        pub.stop()  # it wrote before, through and after the stop
        assert pub.error is None, pub.error
        n = pub.confirmed
        wait_until(lambda: log.distinct() >= n, 180, f"all {n} ids", query)
        time.sleep(1.5)
        held = held_in_stream(cluster.node_url(n4), s)  # what the stream holds
    finally:
        query.stop()
        pub.stop(10)
        delete_queue(cluster.url(), s)
    ids = log.ids()
    assert set(held) == {b"%08d" % i for i in range(n)}, "the stream lacks published ids"
    # exactly once: each message of the stream once (a chunk the publisher had to publish
    # again after a lost leader is in the stream twice, and so in the output twice)
    assert sorted(ids) == held, f"{len(ids)} rows for {len(held)} stream messages: not exactly once"
    with capsys.disabled():
        print(f"\n[cluster] stream mode, stop_app of node 2: next batch after "
              f"{t_next - t_stop:.1f} s; {n} ids exactly once")
