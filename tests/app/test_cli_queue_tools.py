"""``spark-amqp depth`` / ``peek`` / ``consume --no-ack`` tell the truth, on both brokers.

The queue holds more messages (2,500) than consume's default prefetch window (1,000) and
than the peek, so a command that stops at a window, or that loses or reorders what it
requeues, fails here.
"""

from __future__ import annotations

import json

import pytest

N = 2_500


@pytest.fixture
def full_queue(broker_url, unique):
    """A classic queue holding m0 .. m2499, deleted afterwards."""
    from spark_amqp.client import connect

    q = unique("cli-depth")
    with connect(broker_url) as conn:
        ch = conn.channel()
        ch.queue_declare(q, durable=True)
        ch.confirm_select()
        ch.publish_batch([(f"m{i}".encode(), "", q, None, False) for i in range(N)])
        ch.wait_for_confirms()
    yield q
    with connect(broker_url) as conn:
        conn.channel().queue_delete(q)


def drain_all(broker_url, q):
    """Consume (ack) everything; returns [(body, redelivered)] in delivery order."""
    from spark_amqp.client import connect

    out = []
    with connect(broker_url) as conn:
        ch = conn.channel()
        ch.basic_qos(5000)
        ch.basic_consume(q)
        while len(out) < N:
            batch = ch.drain(timeout=10)
            if not batch:
                break
            out += [(d.body.decode(), d.redelivered) for d in batch]
            ch.basic_ack(batch[-1].delivery_tag, multiple=True)
    return out


def test_depth_counts_every_message_and_touches_none(run, broker_url, full_queue):
    r = run("depth", full_queue, "--uri", broker_url)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == f"{full_queue}: 2,500 messages ready, 0 consumers"
    r = run("depth", full_queue, full_queue, "--uri", broker_url, "--format", "count")
    assert r.stdout.split() == [str(N), str(N)]
    r = run("depth", full_queue, "--uri", broker_url, "--format", "json")
    assert json.loads(r.stdout) == {"queue": full_queue, "messages": N, "consumers": 0}
    got = drain_all(broker_url, full_queue)
    assert [b for b, _ in got] == [f"m{i}" for i in range(N)]
    assert not any(red for _, red in got)


def test_depth_missing_queue_is_404(run, broker_url, unique):
    r = run("depth", unique("missing"), "--uri", broker_url)
    assert r.exit_code == 1
    assert "(404)" in r.stderr and "Traceback" not in r.output


def test_peek_shows_the_head_and_requeues_in_place(run, broker_url, full_queue):
    r = run("peek", full_queue, "-n", 1500, "--uri", broker_url, "--format", "json")
    assert r.exit_code == 0, r.output
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert [d["body"] for d in records] == [f"m{i}" for i in range(1500)]
    assert not any(d["redelivered"] for d in records)  # as they were before the peek
    assert "peeked 1,500 of 2,500 ready messages" in r.stderr
    assert "redelivered=true" in r.stderr
    r = run("depth", full_queue, "--uri", broker_url, "--format", "count")
    assert r.stdout.strip() == str(N)
    got = drain_all(broker_url, full_queue)
    assert [b for b, _ in got] == [f"m{i}" for i in range(N)]  # same order: back in place
    assert [red for _, red in got] == [True] * 1500 + [False] * (N - 1500)


def test_peek_more_than_the_queue_holds_and_an_empty_queue(run, broker_url, full_queue, unique):
    r = run("peek", full_queue, "-n", 3000, "--uri", broker_url)
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == [f"m{i}" for i in range(N)]
    assert "peeked 2,500 of 2,500 ready messages" in r.stderr
    from spark_amqp.client import connect

    q = unique("cli-empty")
    with connect(broker_url) as conn:
        ch = conn.channel()
        ch.queue_declare(q, durable=True)
        try:
            r = run("peek", q, "--uri", broker_url, "--timeout", 30)
            assert r.exit_code == 0 and r.stdout == ""
            assert "peeked 0 of 0 ready messages" in r.stderr
        finally:
            ch.queue_delete(q)


def test_consume_no_ack_says_it_stopped_at_the_window(run, broker_url, full_queue):
    r = run("consume", full_queue, "--no-ack", "--format", "count", "--timeout", 1,
            "--uri", broker_url)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == "1000"
    assert "stopped at the prefetch window" in r.stderr and "spark-amqp depth" in r.stderr
    # -n with --no-ack widens the window to N
    r = run("consume", full_queue, "--no-ack", "-n", 2000, "--format", "count", "--timeout", 1,
            "--uri", broker_url)
    assert r.stdout.strip() == "2000"
    assert "stopped at the prefetch window" not in r.stderr
    r = run("depth", full_queue, "--uri", broker_url, "--format", "count")
    assert r.stdout.strip() == str(N)


def test_uri_with_a_host_list_fails_over_and_a_bad_entry_is_named(run, embedded_broker, unique):
    """Issue 27: --uri takes the nodes of a cluster; a dead first node is skipped; a bad
    entry of the list is a usage error naming it."""
    import socket
    from urllib.parse import urlparse

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    port = urlparse(embedded_broker.url).port
    q = unique("hostlist")
    from spark_amqp.client import connect

    with connect(embedded_broker.url) as conn:
        conn.channel().queue_declare(q, durable=True)
    uri = f"amqp://guest:guest@127.0.0.1:{dead},127.0.0.1:{port}/%2F?shuffle_addresses=false"
    r = run("publish", "--uri", uri, "-k", q, input="a\nb\nc\n")
    assert r.exit_code == 0, r.output
    r = run("depth", "--uri", uri, q)
    assert r.exit_code == 0 and "3" in r.output, r.output
    r = run("depth", "--uri", "amqp://guest:secret@127.0.0.1:1,127.0.0.1:port/%2F", q)
    assert r.exit_code == 2 and "address 2 ('127.0.0.1:port')" in r.output
    assert "secret" not in r.output
