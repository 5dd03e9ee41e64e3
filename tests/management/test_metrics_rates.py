"""Embedded broker only: /metrics in the Prometheus format with RabbitMQ's names, 5 s-style
rates, and ``spark-amqp broker --management-port``.

(RabbitMQ's names are those of its rabbitmq_prometheus plugin, listed in
/work/shared/reference/rabbitmq-management-api.md; that plugin is not enabled here.)
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request

import pika
from prometheus_client.parser import text_string_to_metric_families

from spark_amqp import EmbeddedBroker


def _metrics(url: str, path: str = "metrics/per-object", auth: str = "mgmt-test-mon:pw") -> dict:
    """Samples by (name, labels); per-object metrics by default (a monitoring user's login)."""
    import base64

    req = urllib.request.Request(url + path)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_with_rabbitmq_names(mgmt_broker, unique):
    q = unique("metrics")
    conn = pika.BlockingConnection(pika.URLParameters(mgmt_broker.url))
    try:
        ch = conn.channel()
        ch.queue_declare(q, auto_delete=False)
        ch.confirm_delivery()
        for i in range(3):
            ch.basic_publish("", q, b"x")
        before = _metrics(mgmt_broker.management_url)
        method, _, _ = ch.basic_get(q)
        ch.basic_ack(method.delivery_tag)
        ch.basic_consume(q, lambda *a: None, auto_ack=False)
        conn.process_data_events(0.3)
        m = _metrics(mgmt_broker.management_url)
        # /metrics itself is aggregated: sums without labels, names no queue (issue 33)
        agg = _metrics(mgmt_broker.management_url, "metrics", auth=None)
        assert agg[("rabbitmq_queue_messages_unacked", ())] >= 2
        assert not any(dict(labels).keys() & {"vhost", "queue"} for _, labels in agg), agg
        lab = (("queue", q), ("vhost", "/"))
        assert before[("rabbitmq_queue_messages_ready", lab)] == 3
        assert m[("rabbitmq_queue_messages_ready", lab)] == 0
        assert m[("rabbitmq_queue_messages_unacked", lab)] == 2
        assert m[("rabbitmq_queue_messages", lab)] == 2
        assert m[("rabbitmq_queue_consumers", lab)] == 1
        assert m[("rabbitmq_queue_messages_published_total", lab)] == 3
        assert m[("rabbitmq_connections", ())] >= 1 and m[("rabbitmq_channels", ())] >= 1
        g = lambda n: m[(f"rabbitmq_global_messages_{n}_total", ())]  # noqa: E731
        gb = lambda n: before[(f"rabbitmq_global_messages_{n}_total", ())]  # noqa: E731
        assert g("received") - gb("received") == 0 and gb("received") >= 3
        assert gb("confirmed") >= 3
        assert g("delivered") - gb("delivered") == 3   # one get + two deliveries
        assert g("delivered_get") - gb("delivered_get") == 1
        assert g("acknowledged") - gb("acknowledged") == 1
        ch.queue_delete(q)
    finally:
        conn.close()
    # a deleted queue's counts stay in the global totals (counters never go down)
    after = _metrics(mgmt_broker.management_url)
    assert after[("rabbitmq_global_messages_delivered_total", ())] >= m[("rabbitmq_global_messages_delivered_total", ())]
    assert ("rabbitmq_queue_messages_ready", lab) not in after


def test_rates_between_samples(unique):
    """rate = counter change / time between the last two samples (RabbitMQ's basic mode)."""
    import json

    with EmbeddedBroker(management=True) as b:
        sampler = b.broker.management.sampler
        q = unique("rates")
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        try:
            ch = conn.channel()
            ch.queue_declare(q, durable=True)
            b._loop.call_soon_threadsafe(sampler.sample)
            time.sleep(0.3)
            t0 = time.monotonic()
            for _ in range(200):
                ch.basic_publish("", q, b"x")
            conn.process_data_events(0.5)
            b._loop.call_soon_threadsafe(sampler.sample)
            dt = time.monotonic() - t0 + 0.3
            time.sleep(0.2)
            r = urllib.request.Request(b.management_url + f"api/queues/%2F/{q}",
                                       headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="})
            with urllib.request.urlopen(r) as resp:
                view = json.loads(resp.read())
            rate = view["message_stats"]["publish_details"]["rate"]
            assert 200 / (dt + 1.0) <= rate <= 200 / 0.5, (rate, dt)
            assert view["messages_details"]["rate"] == rate
            assert view["message_stats"]["publish"] == 200
        finally:
            conn.close()


def test_cli_management_port(tmp_path):
    import socket

    def free() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    amqp, http = free(), free()
    p = subprocess.Popen([sys.executable, "-m", "spark_amqp.cli.main", "broker", "--port", str(amqp),
                          "--management-port", str(http)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        body = None
        while time.monotonic() < deadline and body is None:
            try:
                r = urllib.request.Request(f"http://127.0.0.1:{http}/api/overview",
                                           headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="})
                with urllib.request.urlopen(r, timeout=2) as resp:
                    body = resp.read()
            except OSError:
                time.sleep(0.1)
        assert body is not None, "the management port did not answer within 30 s"
        assert b'"rabbitmq_version"' in body
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/", timeout=5) as resp:
            assert b"<html" in resp.read().lower()
    finally:
        p.terminate()
        _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert f"management API and web page on http://127.0.0.1:{http}/" in err


def test_management_port_in_use():
    import socket

    import pytest

    from spark_amqp.broker import PortInUseError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        b = EmbeddedBroker(management=busy)
        with pytest.raises(PortInUseError, match=f"port {busy} .* already in use.*--management-port"):
            b.start()
    # the AMQP listener was closed again: a new broker starts fine
    with EmbeddedBroker(management=True) as b2:
        assert b2.management_url.startswith("http://127.0.0.1:")
