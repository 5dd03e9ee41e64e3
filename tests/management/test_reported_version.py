"""The embedded broker reports the RabbitMQ release it behaves like, as RabbitMQ reports its
own: ``/api/overview`` (``rabbitmq_version``, ``management_version``), ``/api/definitions``
(``rabbit_version``), ``/metrics`` (``rabbitmq_build``), the stream protocol's peer properties
and the web page, in both modes (it said "RabbitMQ 3.10.8" while behaving like 4.3)."""

from __future__ import annotations

import base64
import json
import urllib.request

import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.client.stream import connect as stream_connect


def _get(base: str, path: str) -> bytes:
    req = urllib.request.Request(base.rstrip("/") + path, headers={
        "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read()


@pytest.mark.parametrize("mode, release", [("4.3", "4.3.5"), ("3.10", "3.10.8")])
def test_every_surface_reports_the_release_the_broker_behaves_like(mode, release):
    with EmbeddedBroker(management=True, rabbitmq_version=mode, stream_port=0) as b:
        ov = json.loads(_get(b.management_url, "/api/overview"))
        assert (ov["rabbitmq_version"], ov["management_version"]) == (release, release)
        assert ov["product_name"] == "spark-amqp"
        d = json.loads(_get(b.management_url, "/api/definitions"))
        assert (d["rabbit_version"], d["rabbitmq_version"]) == (release, release)
        assert json.loads(_get(b.management_url, "/api/definitions/%2F"))["rabbit_version"] \
            == release
        metrics = _get(b.management_url, "/metrics").decode()
        build = [line for line in metrics.splitlines() if line.startswith("rabbitmq_build_info")]
        assert build and f'rabbitmq_version="{release}"' in build[0], build
        with stream_connect(b.stream_url) as c:
            assert c.server_properties["version"] == release
