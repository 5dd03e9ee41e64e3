"""The source on a RabbitMQ 4.x quorum queue (issue 30): a crash returns the in-flight batch
through a lost connection, which counts toward the queue's delivery limit (20 by default in
4.x; rabbit_fifo ``return_all`` with DeliveryFailed=true at v4.3.0). With a dead-letter
exchange nothing is lost: every id is in the sink or in the dead-letter queue.

The embedded broker runs in its default mode (RabbitMQ 4.3); the queue's x-delivery-limit is
0 so that the first crash already dead-letters what was in flight (the docs' advice for real
deployments is the opposite: a dead-letter exchange and a limit well above the restarts a
query may need, docs/broker/rabbitmq-versions.md).
"""

from __future__ import annotations

import subprocess

import pytest

from source_helpers import (committed_sink_ids, delete, dump_group_stacks, fast_publish,
                            kill_group, message_count, pika_conn, start_runner, wait_until)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

N = 3000
BATCH = 500


def _drain(url: str, queue: str) -> list[tuple[str, str]]:
    """(body, x-death reason) of every message in ``queue`` (acked)."""
    out = []
    with pika_conn(url) as c:
        ch = c.channel()
        while True:
            m, props, body = ch.basic_get(queue, auto_ack=True)
            if m is None:
                return out
            deaths = (props.headers or {}).get("x-death") or [{}]
            reason = deaths[0].get("reason")
            out.append((body.decode(), reason.decode() if isinstance(reason, bytes) else reason))


@pytest.mark.timeout(900)
def test_crash_on_a_quorum_queue_with_a_dead_letter_exchange_loses_nothing(embedded_broker, unique,
                                                                         tmp_path):
    url = embedded_broker.url
    assert embedded_broker.config.rabbitmq_version == "4.3"
    q, dlq = unique("qq-crash"), unique("qq-crash-dlq")
    with pika_conn(url) as c:
        ch = c.channel()
        ch.queue_declare(dlq, durable=True)
        ch.queue_declare(q, durable=True, arguments={
            "x-queue-type": "quorum", "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": dlq, "x-delivery-limit": 0})
    all_ids = {"%06d" % i for i in range(N)}
    try:
        fast_publish(url, q, [i.encode() for i in sorted(all_ids)], persistent=True)
        ck, out, log = tmp_path / "ck", tmp_path / "out", tmp_path / "runner.log"
        opts = [f"maxMessagesPerTrigger={BATCH}", f"prefetch={2 * BATCH}"]
        markers = tmp_path / "m0"
        p = start_runner(url, q, str(ck), str(out), str(markers), "0 seconds", *opts, log_path=log)
        try:
            wait_until(lambda: p.poll() is not None or any(markers.glob("batch-*")), 300,
                       what="a first batch")
            assert p.poll() is None, log.read_text()[-3000:]
        finally:
            kill_group(p)   # mid-stream: the consumer holds a prefetch window of unacked deliveries
        # the lost connection returned them as failed deliveries: over the limit of 0
        wait_until(lambda: message_count(url, dlq) > 0, 30, what="dead-lettered in-flight messages")
        markers = tmp_path / "final"
        p = start_runner(url, q, str(ck), str(out), str(markers), "availableNow", *opts, log_path=log)
        try:
            try:
                rc = p.wait(timeout=400)
            except subprocess.TimeoutExpired as e:
                raise AssertionError(f"the AvailableNow run did not finish\n{dump_group_stacks(p)}") from e
            assert rc == 0, log.read_text()[-3000:]
        finally:
            kill_group(p)
        wait_until(lambda: message_count(url, q) == 0, 30, what="queue empty")
        sink = set(committed_sink_ids(out))
        dead = _drain(url, dlq)
        assert {r for _b, r in dead} == {"delivery_limit"}
        dead_ids = {b for b, _r in dead}
        print(f"\n[quorum crash] sink={len(sink)} dead-lettered={len(dead_ids)} "
              f"both={len(sink & dead_ids)} of {N}")
        assert sink | dead_ids == all_ids      # lossless
        assert dead_ids and len(sink) < N      # the crash did dead-letter something
    finally:
        delete(url, q, dlq)
