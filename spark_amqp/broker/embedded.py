"""EmbeddedBroker: the broker on a background thread, for tests, notebooks and local runs.

``with EmbeddedBroker() as b:`` starts it on an ephemeral port (``port=0``) with its own
asyncio loop in a daemon thread; ``b.url`` is the AMQP URI to connect to
(``amqp://guest:guest@127.0.0.1:<port>/%2F``). ``data_dir=None`` keeps everything in memory.

TLS: ``EmbeddedBroker(tls=TLSConfig(certfile, keyfile, cacertfile=None, verify_peer=False,
fail_if_no_peer_cert=False), tls_port=0)`` (or a ``[tls]`` section in the config file) adds an
amqps listener (RabbitMQ's ``listeners.ssl.default``) next to the plain one; ``b.tls_url`` is
``amqps://guest:guest@127.0.0.1:<tls_port>/%2F`` - connect with ``?cacertfile=<ca.pem>`` (and
``certfile``/``keyfile`` for a client certificate, ``auth_mechanism=external`` for EXTERNAL).
See :mod:`.config` and https://www.rabbitmq.com/docs/ssl.

Version: ``EmbeddedBroker(rabbitmq_version="3.10")`` behaves like RabbitMQ 3.10.8 instead of
4.3, the default (the differences: :mod:`.versions`, docs/broker/rabbitmq-versions.md).

Stream protocol: ``EmbeddedBroker(stream_port=0)`` (a free port) or ``stream_port=5552`` also
serves RabbitMQ's stream protocol (its ``rabbitmq_stream`` plugin) over the same stream queues
that AMQP 0-9-1 clients declare and read (:mod:`.stream_connection`); ``b.stream_url`` is
``rabbitmq-stream://guest:guest@127.0.0.1:<port>/%2F``. With TLS, ``stream_tls_port=0`` adds
the TLS stream listener (``b.stream_tls_url``, ``rabbitmq-stream+tls://``).

Management: ``EmbeddedBroker(management=True)`` (a free port) or ``management=15672`` also
serves RabbitMQ's management HTTP API, ``/metrics`` and a web page on the broker's loop
(:mod:`spark_amqp.management`); ``b.management_url`` is ``http://127.0.0.1:<port>/``.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from pathlib import Path
from urllib.parse import quote

from .config import BrokerConfig, TLSConfig, load_config
from .server import Broker, BrokerError, new_event_loop

__all__ = ["EmbeddedBroker"]


class EmbeddedBroker:
    """An in-process AMQP 0-9-1 broker.

    Args:
        host: interface to listen on ("127.0.0.1"; "localhost" = IPv4 and IPv6 loopback).
        port: TCP port; 0 (default) picks a free one.
        data_dir: directory for durable state; None = in memory.
        config: a :class:`BrokerConfig`, a path to a TOML config file, or None (defaults).
        tls: a :class:`~.config.TLSConfig` to also listen for amqps; None (default) uses the
            config's ``[tls]`` section if any, else no TLS listener.
        tls_port: the TLS listener's TCP port; 0 (default) picks a free one (the config's
            ``[tls] port`` is for ``spark-amqp broker`` only).
        management: ``None``/``False`` (default): no HTTP server; ``True``: the management
            API on a free port; an int: on that port (same interface as ``host``).
        rabbitmq_version: ``"4.3"`` or ``"3.10"``: the RabbitMQ release to behave like;
            None (default) = the config's ``rabbitmq_version`` (itself "4.3" by default). A
            given ``config`` object is copied, not changed.
        stream_port: serve the stream protocol on this port (0: a free one); None (default):
            the config's ``[stream] listeners.tcp.1`` if any, else no stream listener.
        stream_tls_port: with TLS, the TLS stream listener's port (0: a free one); None
            (default): the config's ``listeners.ssl.1`` if any, else none.

    Attributes: ``port`` (int, after start), ``url`` (str), ``tls_port`` / ``tls_url`` (with
    TLS), ``stream_port`` / ``stream_url`` (with the stream listener), ``management_port`` / ``management_url`` (with management), ``broker`` (the core object; only touch it from the broker thread).

    Raises :class:`~.server.PortInUseError` / :class:`~.server.BrokerError` from :meth:`start`,
    :class:`~.config.ConfigError` when the TLS certificate, key or CA files cannot be loaded.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, data_dir: str | Path | None = None,
                 config: BrokerConfig | str | Path | None = None, *, tls: TLSConfig | None = None,
                 tls_port: int = 0, management: bool | int | None = None,
                 rabbitmq_version: str | None = None, stream_port: int | None = None,
                 stream_tls_port: int | None = None):
        self.host = host
        self.port = port
        self.data_dir = str(data_dir) if data_dir is not None else None
        if config is None or isinstance(config, BrokerConfig):
            self.config = config or BrokerConfig()
        else:
            self.config = load_config(config)
        if rabbitmq_version is not None:
            self.config = copy.copy(self.config)
            self.config.set_version(rabbitmq_version)
        self.tls = tls if tls is not None else self.config.tls
        self.tls_port = tls_port
        self.management_port: int | None = (None if management is None or management is False
                                            else 0 if management is True else int(management))
        self.stream_port = stream_port if stream_port is not None else self.config.stream.port
        self.stream_tls_port = stream_tls_port if stream_tls_port is not None else self.config.stream.tls_port
        self.broker: Broker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _uri(self, scheme: str, port: int) -> str:
        if self.broker is None:
            raise BrokerError("the embedded broker is not running; call start() first")
        # the first user whose clear-text password is known (a password_hash cannot be undone)
        u = next((u for u in self.config.users.values() if u.password is not None), None)
        if u is None:
            raise BrokerError("no configured user has a clear-text password (only password_hash): "
                              "build the URL yourself with the user's password")
        host = "127.0.0.1" if self.host in ("localhost", "0.0.0.0", "") else self.host
        if ":" in host:
            host = f"[{host}]"
        vhost = self.config.vhosts[0] if self.config.vhosts else "/"
        return f"{scheme}://{quote(u.name, safe='')}:{quote(u.password, safe='')}@{host}:{port}/{quote(vhost, safe='')}"

    @property
    def url(self) -> str:
        """``amqp://user:password@host:port/%2F`` for the first configured user with a
        clear-text password (raises :class:`BrokerError` if all have only ``password_hash``)."""
        return self._uri("amqp", self.port)

    @property
    def tls_url(self) -> str:
        """``amqps://user:password@host:tls_port/%2F`` for the first configured user (no TLS
        query parameters: add ``?cacertfile=...``). Raises :class:`BrokerError` when the broker
        is not running or has no TLS listener."""
        if self.tls is None:
            raise BrokerError("the embedded broker has no TLS listener; pass tls=TLSConfig(...) "
                              "or a config file with a [tls] section")
        return self._uri("amqps", self.tls_port)

    @property
    def stream_url(self) -> str:
        """``rabbitmq-stream://user:password@host:stream_port/%2F`` (the scheme of RabbitMQ's
        stream clients). Raises :class:`BrokerError` when there is no stream listener."""
        if self.stream_port is None:
            raise BrokerError("the embedded broker has no stream listener; pass stream_port=0 (a free port) "
                              "or stream_port=5552")
        return self._uri("rabbitmq-stream", self.stream_port)

    @property
    def stream_tls_url(self) -> str:
        """``rabbitmq-stream+tls://...`` of the TLS stream listener (add the TLS query
        parameters, as for :attr:`tls_url`). Raises :class:`BrokerError` without one."""
        if self.stream_tls_port is None or self.tls is None:
            raise BrokerError("the embedded broker has no TLS stream listener; pass tls=... and stream_tls_port=0")
        return self._uri("rabbitmq-stream+tls", self.stream_tls_port)

    @property
    def management_url(self) -> str:
        """``http://host:port/`` of the management API and web page. Raises
        :class:`BrokerError` when the broker is not running or was started without it."""
        if self.broker is None or self.broker.management is None:
            raise BrokerError("the embedded broker has no management API; pass management=True "
                              "(or a port) and start() it")
        return self.broker.management.url

    def start(self) -> "EmbeddedBroker":
        """Start the loop thread and listen; returns self once connections are accepted."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        error: list[BaseException] = []
        loop = new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)

            async def boot() -> None:
                self.broker = Broker(self.config, self.data_dir, loop)
                self.port = await self.broker.listen(self.host, self.port)
                if self.tls is not None:
                    self.tls_port = await self.broker.listen(self.host, self.tls_port, self.tls)
                if self.stream_port is not None:
                    self.stream_port = await self.broker.listen_stream(self.host, self.stream_port)
                if self.stream_tls_port is not None and self.tls is not None:
                    self.stream_tls_port = await self.broker.listen_stream(self.host, self.stream_tls_port, self.tls)
                if self.management_port is not None:
                    from ..management import start_management
                    host = "127.0.0.1" if self.host == "localhost" else self.host
                    srv = await start_management(self.broker, host, self.management_port)
                    self.management_port = srv.port

            try:
                loop.run_until_complete(boot())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                error.append(exc)
                if self.broker is not None:
                    if self.broker.management is not None:
                        loop.run_until_complete(self.broker.management.stop())
                    for srv in self.broker.servers:
                        srv.close()
                    self.broker.store.close()
                    self.broker = None
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="spark-amqp-broker", daemon=True)
        self._thread.start()
        ready.wait()
        if error:
            self._thread = None
            raise error[0]
        return self

    def stop(self) -> None:
        """Close connections (320 CONNECTION_FORCED), flush the store, stop the thread."""
        if self._thread is None or self._loop is None:
            return
        loop = self._loop
        if self.broker is not None:
            fut = asyncio.run_coroutine_threadsafe(self.broker.close(), loop)
            try:
                fut.result(timeout=30)
            except Exception:  # pragma: no cover
                pass
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=30)
        self._thread = None
        self._loop = None
        self.broker = None

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"port {self.port}" if self.broker is not None else "stopped"
        if self.broker is not None and self.tls is not None:
            state += f", amqps port {self.tls_port}"
        if self.broker is not None and self.stream_port is not None:
            state += f", stream port {self.stream_port}"
        return f"<EmbeddedBroker {self.host} {state} data_dir={self.data_dir!r}>"
