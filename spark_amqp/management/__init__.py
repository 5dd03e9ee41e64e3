"""spark_amqp.management: RabbitMQ's management HTTP API, Prometheus metrics and a web page.
May import: broker, protocol (and ``spark_amqp._version``); aiohttp, prometheus_client,
re2 (``google-re2``).
Imported by: the broker, which starts it on its own port (lazily), and the CLI through it.

Layer: above the broker core (reads its objects, calls its declare/delete/route operations on
its event loop), below the CLI. Start it with ``EmbeddedBroker(management=True)`` (then
``broker.management_url``), ``spark-amqp broker --management-port 15672`` or
:func:`start_management` on a running :class:`~spark_amqp.broker.server.Broker`'s loop.
Needs the ``broker`` extra (``aiohttp``, ``prometheus_client``, ``google-re2``).
"""

from __future__ import annotations

__all__ = ["ManagementServer", "start_management"]


def __getattr__(name):
    if name == "ManagementServer":
        from .server import ManagementServer
        return ManagementServer
    raise AttributeError(name)


async def start_management(broker, host: str = "127.0.0.1", port: int = 0, **kw):
    """Start a :class:`~.server.ManagementServer` for ``broker`` on its loop (call from a
    coroutine running there); sets ``broker.management`` and returns the server.

    Raises :class:`~spark_amqp.broker.server.PortInUseError` when ``port`` is taken, and
    MissingExtraError (an ImportError) naming the extra and its install command when aiohttp /
    prometheus_client / google-re2 are not installed.
    """
    try:
        from .server import ManagementServer
    except ImportError as exc:
        from ..extras import MissingExtraError

        raise MissingExtraError("the management API", "broker", exc.name) from exc
    srv = ManagementServer(broker, host, port, **kw)
    await srv.start()
    broker.management = srv
    return srv
