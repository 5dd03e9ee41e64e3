"""``GET /metrics`` and ``GET /metrics/per-object``: Prometheus text format with RabbitMQ's
metric names.

As the ``rabbitmq_prometheus`` plugin (RabbitMQ 3.10): ``/metrics`` is *aggregated*, every
queue metric summed over all queues without labels, so it names no vhost or queue and needs
no login (a scraper has no credentials); ``/metrics/per-object`` has one sample per queue
with ``vhost`` and ``queue`` labels. Stricter than the plugin (which serves both without a
login, on its own port 15692): per-object needs a ``monitoring`` or ``administrator`` user
(``management/server.py``), since queue names and depths tell an outsider what runs here
(issue 33). Names:

- ``rabbitmq_queue_messages_ready``, ``rabbitmq_queue_messages_unacked``,
  ``rabbitmq_queue_messages``, ``rabbitmq_queue_consumers``,
  ``rabbitmq_queue_messages_published_total`` (summed, or per queue in per-object mode);
- ``rabbitmq_connections``, ``rabbitmq_channels``, ``rabbitmq_consumers``, ``rabbitmq_queues``;
- ``rabbitmq_global_messages_received_total``, ``..._routed_total``,
  ``..._delivered_total``, ``..._delivered_get_total`` (basic.get),
  ``..._acknowledged_total``, ``..._redelivered_total``, ``..._confirmed_total``,
  ``..._unroutable_dropped_total``;
- ``rabbitmq_process_resident_memory_bytes`` is not given (not one process's figure here);
  ``rabbitmq_build_info`` names the broker.

Exposition by the kept library ``prometheus_client`` (a custom collector read on scrape).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

__all__ = ["BrokerCollector", "render_metrics", "CONTENT_TYPE"]

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE


class BrokerCollector:
    """A prometheus_client collector reading the broker's state at scrape time (on the
    broker's loop, where the scrape handler runs); ``per_object``: one sample per queue with
    ``vhost``/``queue`` labels instead of sums."""

    def __init__(self, broker, sampler, per_object: bool = False):
        self.broker = broker
        self.sampler = sampler
        self.per_object = per_object

    def collect(self):
        b = self.broker
        from .._version import __version__
        from .views import rabbitmq_version
        info = InfoMetricFamily("rabbitmq_build", "RabbitMQ-compatible build info")
        info.add_metric([], {"rabbitmq_version": rabbitmq_version(b), "product_name": "spark-amqp",
                             "product_version": __version__})
        yield info
        queues = [q for v in b.vhosts.values() for q in v.queues.values()]
        labels = ["vhost", "queue"] if self.per_object else []
        ready = GaugeMetricFamily("rabbitmq_queue_messages_ready", "Messages ready to be delivered to consumers",
                                  labels=labels)
        unacked = GaugeMetricFamily("rabbitmq_queue_messages_unacked",
                                    "Messages delivered to consumers but not yet acknowledged", labels=labels)
        total = GaugeMetricFamily("rabbitmq_queue_messages", "Sum of ready and unacknowledged messages",
                                  labels=labels)
        cons = GaugeMetricFamily("rabbitmq_queue_consumers", "Consumers on a queue", labels=labels)
        pub = CounterMetricFamily("rabbitmq_queue_messages_published", "Messages published to a queue",
                                  labels=labels)
        if self.per_object:
            for q in queues:
                lab = [q.vhost.name, q.name]
                ready.add_metric(lab, len(q.ready))
                unacked.add_metric(lab, q.unacked_count)
                total.add_metric(lab, len(q.ready) + q.unacked_count)
                cons.add_metric(lab, len(q.consumers))
                pub.add_metric(lab, q.stat_publish)
        else:
            r = sum(len(q.ready) for q in queues)
            u = sum(q.unacked_count for q in queues)
            ready.add_metric([], r)
            unacked.add_metric([], u)
            total.add_metric([], r + u)
            cons.add_metric([], sum(len(q.consumers) for q in queues))
            pub.add_metric([], sum(q.stat_publish for q in queues))
        yield from (ready, unacked, total, cons, pub)
        conns = [c for c in b.connections if c.state == "opened"]
        yield GaugeMetricFamily("rabbitmq_connections", "Connections currently open", value=len(conns))
        yield GaugeMetricFamily("rabbitmq_channels", "Channels currently open",
                                value=sum(len(c.channels) for c in conns))
        yield GaugeMetricFamily("rabbitmq_consumers", "Consumers currently connected",
                                value=sum(len(q.consumers) for q in queues))
        yield GaugeMetricFamily("rabbitmq_queues", "Queues available", value=len(queues))
        g = self.sampler.global_sample()
        for name, doc, v in (
            ("received", "Total number of messages received from publishers", g["received"]),
            ("routed", "Total number of messages routed to queues", g["publish"]),
            ("delivered", "Total number of messages delivered to consumers", g["deliver_get"]),
            ("delivered_get", "Total number of messages fetched with basic.get", g["get"]),
            ("acknowledged", "Total number of messages acknowledged by consumers", g["ack"]),
            ("redelivered", "Total number of messages redelivered to consumers", g["redeliver"]),
            ("confirmed", "Total number of messages confirmed to publishers", g["confirm"]),
            ("unroutable_dropped", "Total number of messages published as non-mandatory into an exchange "
                                   "and dropped as unroutable (mandatory ones included here)", g["drop_unroutable"]),
        ):
            yield CounterMetricFamily(f"rabbitmq_global_messages_{name}", doc, value=v)


def render_metrics(registry: CollectorRegistry) -> bytes:
    """The text exposition of ``registry``."""
    return generate_latest(registry)
