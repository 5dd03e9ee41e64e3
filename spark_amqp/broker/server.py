"""The broker core (vhosts, store, scheduling) and the asyncio server that runs it.

:class:`Broker` owns the vhosts, the durable store and the per-tick work: every read marks
queues and connections dirty, and one ``tick`` callback per event-loop iteration dispatches
dirty queues to consumers, hands the store its batch (group commit, see :mod:`.store`), sends
publisher confirms and writes each dirty connection's output in one ``transport.write``.

:func:`serve` is the blocking entry point of ``spark-amqp broker``: it logs connections and
errors, stops cleanly on SIGINT/SIGTERM (connections get connection.close 320
CONNECTION_FORCED, the store is flushed), and raises :class:`PortInUseError` with a one-line
message when the port is taken. ``host="localhost"`` listens on 127.0.0.1 and ::1.

TLS (amqps): :meth:`Broker.listen` with a :class:`~.config.TLSConfig` adds a TLS listener
(RabbitMQ's ``listeners.ssl.default``, usually port 5671) through asyncio's
``create_server(ssl=...)``; the AMQP connection is the same as on the plain listener once the
TLS handshake (at most 5 s, RabbitMQ's ``ssl_handshake_timeout``) is done. A listener that
requires client certificates (``verify_peer`` + ``fail_if_no_peer_cert``) also offers SASL
EXTERNAL (see :class:`TLSServerProtocol` and :mod:`.auth`). Source:
https://www.rabbitmq.com/docs/ssl.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import time
from typing import Callable

from .auth import MECHANISMS, TLS_CLIENT_CERT_MECHANISMS, authenticate_external, certificate_user
from .config import BrokerConfig, ConfigError, TLSConfig, load_config
from .connection import AMQPServerProtocol
from .errors import BrokerError, PortInUseError
from .exchange import Exchange
from .exposure import exposure_warnings
from .listener_guard import ListenerGuards
from .message import Message, route_enc
from .stats import BrokerStats
from .store import MemoryStore, SqliteStore, StoreError
from .vhost import VHost

__all__ = ["Broker", "serve", "PortInUseError", "BrokerError", "new_event_loop"]

log = logging.getLogger("spark_amqp.broker")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """The broker's event loop: uvloop's when installed (fewer µs per socket read; optional
    dependency ``uvloop>=0.19,<1``), else asyncio's default. ``SPARK_AMQP_BROKER_LOOP=asyncio``
    forces the standard loop."""
    if os.environ.get("SPARK_AMQP_BROKER_LOOP", "auto") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


_TLS_HANDSHAKE_TIMEOUT = 5.0  # seconds; RabbitMQ's ssl_handshake_timeout default (5000 ms)


class TLSServerProtocol(AMQPServerProtocol):
    """An AMQP connection accepted on the TLS listener: as :class:`AMQPServerProtocol`, plus
    SASL EXTERNAL (user name from the verified client certificate's subject, see
    :func:`.auth.certificate_user`) when the listener requires client certificates
    (``verify_peer`` and ``fail_if_no_peer_cert``). RabbitMQ's rabbitmq_auth_mechanism_ssl
    refuses EXTERNAL as "TLS configuration is unsafe" under any weaker ``ssl_options``, so
    there it is simply not offered."""

    def __init__(self, broker, tls: TLSConfig):
        super().__init__(broker)
        self.tls = tls
        self.peercert: dict | None = None

    @property
    def offers_external(self) -> bool:
        return bool(self.tls.verify_peer and self.tls.fail_if_no_peer_cert and self.peercert)

    def connection_made(self, transport) -> None:
        # asyncio calls this after the TLS handshake; getpeercert() is {} / None unless the
        # client sent a certificate that verified against cacertfile
        self.peercert = transport.get_extra_info("peercert") or None
        super().connection_made(transport)
        cipher = transport.get_extra_info("cipher")
        logging.getLogger("spark_amqp.broker.connections").info(  # see broker/connection.py
            "connection %s: %s%s", self.peer, cipher[1] if cipher else "TLS",
            f", client certificate {certificate_user(self.peercert)!r}" if self.peercert else "")

    @property
    def mechanisms(self) -> bytes:  # type: ignore[override]
        return TLS_CLIENT_CERT_MECHANISMS if self.offers_external else MECHANISMS

    def _authenticate(self, mechanism: str, response: bytes) -> str:
        if mechanism == "EXTERNAL":
            return authenticate_external(self.broker.config, self.peercert, self.tls.cert_login_from)
        return super()._authenticate(mechanism, response)


_DISK_CHECK_BYTES = 1 << 20  # bytes of message bodies added to the store between disk checks


class Broker:
    """Broker state living on one asyncio loop (see the module docstring).

    Resource alarms (``alarms``, ``blocked``): the memory alarm (``memory_high_watermark``)
    and the disk alarm (``disk_free_limit``, with a data directory only) block publishing
    connections, see :meth:`set_alarm`.

    Args:
        config: a :class:`BrokerConfig` (defaults: guest/guest on vhost "/").
        data_dir: directory of the durable store; ``None`` keeps everything in memory
            (``config.data_dir`` is used when this is None).
        loop: the event loop the broker runs on.

    Raises :class:`BrokerError` naming the store file when the data directory's store is
    corrupt, truncated or not writable.
    """

    DISK_CHECK_INTERVAL = 1.0  # seconds between disk alarm checks

    def __init__(self, config: BrokerConfig | None = None, data_dir: str | None = None,
                 loop: asyncio.AbstractEventLoop | None = None):
        self.config = config or BrokerConfig()
        self.loop = loop or asyncio.get_event_loop()
        self.data_dir = data_dir or self.config.data_dir
        self.vhosts: dict[str, VHost] = {v: VHost(self, v) for v in self.config.vhosts}
        self.connections: set[AMQPServerProtocol] = set()
        #: stream-protocol connections (:mod:`.stream_connection`)
        self.stream_connections: set = set()
        #: connections closed by their client whose socket the client has not closed yet
        self.lingering: set[AMQPServerProtocol] = set()
        self.mem_used = 0
        self.blocked = False  # any resource alarm is on: publishing connections are blocked
        self.alarms: dict[str, str] = {}  # resource ("memory", "disk") -> connection.blocked reason
        self.disk_free_bytes: int | None = None  # at the last disk check
        self._disk_timer: asyncio.TimerHandle | None = None
        self._disk_checked_bytes = 0
        self._dirty_queues: dict[int, object] = {}
        self._dirty_conns: list[AMQPServerProtocol] = []
        self._scheduled = False
        #: publisher confirms (:class:`.confirms.PublisherConfirms`) waiting on a store commit
        self.store_waiters: set = set()
        self._commit_waiters: list[tuple[int, Callable]] = []
        self.servers: list[asyncio.base_events.Server] = []
        self._warned: set[str] = set()  # exposure warnings already logged
        self.pending_streams: dict[int, object] = {}   # streams with messages not yet in a chunk
        self.stats = BrokerStats()
        #: the accept policy of every listener: connection limits, handshake deadlines
        self.guards = ListenerGuards(self.loop, self.config.max_connections_per_address)
        #: the management HTTP server when started (spark_amqp.management), else None
        self.management = None
        if self.data_dir:
            try:
                self.store = SqliteStore(self.data_dir, on_commit=self._on_commit_thread)
            except StoreError as exc:
                raise BrokerError(f"cannot start the broker: {exc}") from None
            try:
                self._recover()
            except StoreError as exc:
                self.store.close()
                raise BrokerError(f"cannot start the broker: {exc}") from None
            self._check_disk()
        else:
            self.store = MemoryStore()

    # ------------------------------------------------------------------ scheduling
    def kick(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._tick)

    def mark_queue(self, q) -> None:
        self._dirty_queues[id(q)] = q
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._tick)

    def mark_conn(self, conn) -> None:
        self._dirty_conns.append(conn)
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._tick)

    def _tick(self) -> None:
        self._scheduled = False
        for _ in range(4):
            if not self._dirty_queues:
                break
            qs = self._dirty_queues
            self._dirty_queues = {}
            for q in qs.values():
                if not q.deleted:
                    try:
                        q.dispatch()
                    except Exception:  # pragma: no cover - a bug; keep serving others
                        log.exception("error dispatching queue %r", q.name)
        if self._dirty_queues and not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._tick)
        if self.pending_streams:
            # a stream's chunk is written (and its fsync joins the store batch) in the tick its
            # messages arrived in, so their confirms wait for this batch's ticket
            ps = self.pending_streams
            self.pending_streams = {}
            for q in ps.values():
                if not q.deleted:
                    q.seal()
        store = self.store
        if store.durable and store.bytes_added - self._disk_checked_bytes >= _DISK_CHECK_BYTES:
            self._check_disk(reschedule=False)  # before a large write, not only every second
        store.flush()
        self._check_memory()
        conns = self._dirty_conns
        if conns:
            self._dirty_conns = []
            for c in conns:
                try:
                    c.flush()
                except Exception:  # pragma: no cover
                    log.exception("error writing to %s", c.peer)

    def _on_commit_thread(self, first: int, last: int, error: BaseException | None) -> None:
        try:
            self.loop.call_soon_threadsafe(self._on_commit, first, last, error)
        except RuntimeError:
            pass  # loop closed during shutdown

    def _on_commit(self, first: int, last: int, error: BaseException | None = None) -> None:
        """Store batches ``first..last`` were committed (``error`` None) or failed: settle the
        publisher confirms and ``tx.commit`` waiting on them (ack / nack, commit-ok / 506)."""
        if error is not None:
            for confirms in list(self.store_waiters):
                confirms.fail(first, last)
        if last > self.store.durable_ticket:
            self.store.durable_ticket = last
        self._check_disk(reschedule=False)  # after every commit: one statvfs, microseconds
        for confirms in list(self.store_waiters):
            confirms.stored()
        if self._commit_waiters:
            keep = []
            for t, fn, fail in self._commit_waiters:
                if t <= last:
                    if error is None or t < first:
                        fn()
                    elif fail is not None:
                        fail(error)
                else:
                    keep.append((t, fn, fail))
            self._commit_waiters = keep
        self.kick()

    def after_commit(self, ticket: int, fn: Callable[[], object],
                     on_failure: Callable[[BaseException], object] | None = None) -> None:
        """Run ``fn`` on the loop once store batch ``ticket`` is durable, or
        ``on_failure(error)`` when its commit failed."""
        self._commit_waiters.append((ticket, fn, on_failure))

    # ------------------------------------------------------------------ messages
    def enqueue(self, queues: list, msg: Message) -> tuple[int, bool]:
        """Put ``msg`` (a copy per extra queue) into ``queues``. Returns (store ticket the
        publisher confirm must wait for, 0 if none; whether a reject-publish queue refused it).
        Each queue decides what publishing means for it (:meth:`.queue.Queue.refuses`,
        :meth:`.queue.Queue.publish`: TTL, limits, persistence; a stream appends to its log)."""
        if len(queues) == 1:
            q = queues[0]
            if q.rejects_publish and q.refuses(msg):
                return 0, True
            return q.publish(msg), False
        ticket = 0
        rejected = False
        first = True
        for q in queues:
            if q.stream:
                m = msg   # a stream keeps only the encoded parts: no copy needed
            else:
                if q.rejects_publish and q.refuses(msg):
                    rejected = True
                    continue
                m = msg if first else msg.copy()
                first = False
            t = q.publish(m)
            if t > ticket:
                ticket = t
        return ticket, rejected

    def _check_memory(self) -> None:
        wm = self.config.memory_high_watermark
        if not wm:
            return
        if "memory" not in self.alarms and self.mem_used > wm:
            log.warning("memory alarm: %d bytes of messages held, above the high watermark of %d; "
                        "blocking publishers", self.mem_used, wm)
            self.set_alarm("memory", "low on memory")
        elif "memory" in self.alarms and self.mem_used <= wm * 0.9:
            log.warning("memory alarm cleared: %d bytes held", self.mem_used)
            self.set_alarm("memory", None)

    def disk_free(self) -> int:
        """Free bytes for unprivileged writers on the data directory's filesystem
        (``statvfs``: ``f_bavail * f_frsize``). Raises ``OSError`` when it cannot be read."""
        st = os.statvfs(self.data_dir)
        return st.f_bavail * st.f_frsize

    def _check_disk(self, reschedule: bool = True) -> None:
        """The disk alarm (RabbitMQ's ``disk_free_limit``): free space of the data directory
        below the limit raises it, above the limit clears it. Runs every
        ``DISK_CHECK_INTERVAL`` seconds, after every store commit, and before a store batch when
        ``_DISK_CHECK_BYTES`` of message bodies were added since the last check. Source: https://www.rabbitmq.com/docs/disk-alarms"""
        if reschedule:
            if self._disk_timer is not None:
                self._disk_timer.cancel()
            self._disk_timer = self.loop.call_later(self.DISK_CHECK_INTERVAL, self._check_disk)
        self._disk_checked_bytes = self.store.bytes_added
        limit = self.config.disk_free_limit_bytes()
        if not limit:
            if "disk" in self.alarms:
                self.set_alarm("disk", None)
            return
        try:
            free = self.disk_free()
        except OSError as exc:
            if "disk" not in self.alarms:
                log.error("disk alarm: cannot read the free space of %s (%s); blocking publishers",
                          self.data_dir, exc)
                self.set_alarm("disk", "low on disk")
            return
        self.disk_free_bytes = free
        if free < limit and "disk" not in self.alarms:
            log.warning("disk alarm: %d bytes free in %s, below disk_free_limit of %d; blocking "
                        "publishers", free, self.data_dir, limit)
            self.set_alarm("disk", "low on disk")
        elif free >= limit and "disk" in self.alarms:
            log.warning("disk alarm cleared: %d bytes free in %s (disk_free_limit %d)", free, self.data_dir, limit)
            self.set_alarm("disk", None)

    def set_alarm(self, resource: str, reason: str | None) -> None:
        """Raise (``reason`` = the connection.blocked reason) or clear (``None``) the alarm of
        ``resource``. While any alarm is on, connections that publish get connection.blocked
        and are no longer read from; when the last one clears they get connection.unblocked
        (RabbitMQ "Memory and Disk Alarms", "Blocked Connection Notifications")."""
        if reason is None:
            self.alarms.pop(resource, None)
        else:
            self.alarms[resource] = reason
        blocked = bool(self.alarms)
        if blocked == self.blocked:
            return
        self.blocked = blocked
        for c in list(self.connections) + list(self.stream_connections):
            if blocked:
                if c.published:
                    c.block()
            else:
                c.unblock()

    @property
    def block_reason(self) -> str:
        """The connection.blocked reason of the first alarm raised ("low on memory" /
        "low on disk"), "" without alarms."""
        return next(iter(self.alarms.values()), "")

    # ------------------------------------------------------------------ recovery
    def _recover(self) -> None:
        data = self.store.load()
        for row in data["exchanges"]:
            v = self.vhosts.get(row["vhost"])
            if v is None or row["name"] in v.exchanges:
                continue
            v.exchanges[row["name"]] = Exchange(v, row["name"], row["type"], True, row["auto_delete"],
                                                row["internal"], row["arguments"])
        from .vhost import new_queue
        for row in data["queues"]:
            v = self.vhosts.get(row["vhost"])
            if v is None:
                continue
            try:
                v.queues[row["name"]] = new_queue(self, v, row["name"], True, None, row["auto_delete"],
                                                  row["arguments"])
            except Exception:
                log.exception("cannot recover queue %r", row["name"])
        for row in data["bindings"]:
            v = self.vhosts.get(row["vhost"])
            if v is None:
                continue
            src = v.exchanges.get(row["source"])
            dst = v.exchanges.get(row["destination"]) if row["dest_kind"] == "exchange" else v.queues.get(row["destination"])
            if src is None or dst is None:
                continue
            from .exchange import Binding
            b = Binding(src, dst, row["routing_key"], row["arguments"])
            if src.add_binding(b) and isinstance(dst, Exchange):
                dst.incoming.append(b)
        n = 0
        for sid, vname, qname, exchange, rk, props, body, redelivered, dcount in data["messages"]:
            v = self.vhosts.get(vname)
            q = v.queues.get(qname) if v is not None else None
            if q is None:
                self.store.delete_message(sid)
                continue
            m = Message(exchange, rk, bytes(props), bytes(body))
            m.persistent = True
            p = m.props
            m.priority = p.priority or 0
            m.enc = route_enc(exchange, rk)
            m.redelivered = bool(redelivered)
            m.delivery_count = m.acquired_count = dcount or 0
            m.store_id = sid
            self.mem_used += len(m.body)
            q.enqueue(m)
            n += 1
        log.info("recovered %d exchanges, %d queues, %d bindings, %d messages from %s",
                 len(data["exchanges"]), len(data["queues"]), len(data["bindings"]), n, self.data_dir)

    # ------------------------------------------------------------------ listening
    async def listen(self, host: str = "127.0.0.1", port: int = 0, tls: TLSConfig | None = None) -> int:
        """Start listening; returns the bound port. ``localhost`` → 127.0.0.1 and ::1.

        With ``tls`` this is a TLS (amqps) listener using ``tls.ssl_context()``; call
        ``listen`` once per listener (plain and TLS on different ports).

        Raises :class:`PortInUseError` when the port is taken, :class:`BrokerError` otherwise,
        :class:`~.config.ConfigError` when the TLS certificate/key/CA files cannot be loaded.
        """
        if tls is not None:
            return await self._listen(lambda: TLSServerProtocol(self, tls), host, port, tls,
                                      "AMQP 0-9-1 over TLS (amqps)", "--tls-port", "amqps")
        return await self._listen(lambda: AMQPServerProtocol(self), host, port, None, "AMQP 0-9-1", "--port", "amqp")

    async def listen_stream(self, host: str = "127.0.0.1", port: int = 0, tls: TLSConfig | None = None) -> int:
        """Start a stream-protocol listener (RabbitMQ's ``rabbitmq_stream``, port 5552;
        :mod:`.stream_connection`); with ``tls`` over TLS (RabbitMQ's 5551) with the broker's
        TLS settings. Returns the bound port. Raises as :meth:`listen`."""
        from .stream_connection import StreamServerProtocol

        if tls is not None:
            return await self._listen(lambda: StreamServerProtocol(self, tls), host, port, tls,
                                      "the stream protocol over TLS", "--stream-tls-port", "stream+tls")
        return await self._listen(lambda: StreamServerProtocol(self), host, port, None, "the stream protocol",
                                  "--stream-port", "stream")

    async def _listen(self, factory: Callable, host: str, port: int, tls: TLSConfig | None, what: str, opt: str,
                      name: str) -> int:
        """A listener of ``factory``'s protocol behind the listener guard (connection limits
        and handshake_timeout: listener_guard.py), over TLS with ``tls``."""
        extra: dict = {}
        if tls is not None:
            extra = {"ssl": tls.ssl_context(), "ssl_handshake_timeout": _TLS_HANDSHAKE_TIMEOUT}
        guard = self.guards.listener(name, max_connections=self.config.ranch_connection_max,
                                     handshake_timeout=self.config.handshake_timeout / 1000.0)
        return await self._bind(guard.protocol_factory(factory), host, port, extra, what, opt, tls is not None)

    async def _bind(self, factory: Callable, host: str, port: int, extra: dict, what: str, opt: str,
                    tls: bool) -> int:
        """Listen with ``factory`` on ``host`` (``localhost``: 127.0.0.1 and ::1) and ``port``
        (0: a free one); returns the bound port (see :meth:`listen`)."""
        hosts = ["127.0.0.1", "::1"] if host == "localhost" else [host]
        bound = port
        first = len(self.servers)
        for i, h in enumerate(hosts):
            try:
                srv = await self.loop.create_server(factory, h, bound, reuse_address=True, backlog=1024, **extra)
            except OSError as exc:
                if i > 0:
                    log.warning("cannot also listen on %s port %d (%s); continuing with %s only", h, bound, exc, hosts[0])
                    continue
                if exc.errno in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", -1)):
                    raise PortInUseError(f"cannot start the broker: port {port} on {host} is already in use "
                                         f"(another broker or RabbitMQ?); choose another {opt}") from None
                raise BrokerError(f"cannot start the broker on {host}:{port}: {exc.strerror or exc}") from None
            self.servers.append(srv)
            if bound == 0:
                bound = srv.sockets[0].getsockname()[1]
        for srv in self.servers[first:]:
            for s in srv.sockets:
                log.info("listening for %s on %s", what, s.getsockname()[:2])
                for w in exposure_warnings(self.config, *s.getsockname()[:2], tls=tls):
                    # a user's warning once (not again for the TLS listener), others per listener
                    key = w.split(": ", 1)[1] if "user '" in w else w
                    if key not in self._warned:
                        self._warned.add(key)
                        log.warning(w)
        return bound

    async def close(self) -> None:
        """Stop listening, close every connection with 320 CONNECTION_FORCED, flush the store."""
        if self._disk_timer is not None:
            self._disk_timer.cancel()
            self._disk_timer = None
        if self.management is not None:
            await self.management.stop()
        for srv in self.servers:
            srv.close()
        for c in list(self.connections) + list(self.stream_connections):
            try:
                c.close_by_server()
            except Exception:  # pragma: no cover
                pass
        deadline = time.monotonic() + 1.0
        while (self.connections or self.stream_connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for c in list(self.connections) + list(self.lingering) + list(self.stream_connections):
            c._abort()
        for srv in self.servers:
            try:
                await asyncio.wait_for(srv.wait_closed(), 1.0)
            except (asyncio.TimeoutError, Exception):
                pass
        self.servers = []
        self._tick()
        await self.loop.run_in_executor(None, self.store.close)
        for v in self.vhosts.values():
            for q in v.queues.values():
                if q.stream:
                    q.log.close()


def serve(host: str = "127.0.0.1", port: int = 5672, data_dir: str | None = None,
          config_path: str | None = None, *, tls_port: int | None = None,
          tls_certfile: str | None = None, tls_keyfile: str | None = None,
          management_port: int | None = None, management_host: str | None = None,
          rabbitmq_version: str | None = None, stream_port: int | None = None) -> None:
    """Run a broker until SIGINT/SIGTERM (blocking). Logs to the ``spark_amqp.broker`` logger.

    ``management_port``: also serve the management API there, on ``management_host``
    (default: ``host``; a loopback address keeps it local while ``host`` exposes AMQP).
    ``rabbitmq_version`` ("3.10"/"4.3") overrides the config's ``rabbitmq_version``
    (:mod:`.versions`; default: the config's, else "4.3"). ``stream_port``: also serve the
    stream protocol there (default: the config's ``[stream] listeners.tcp.1``, else none; its
    ``listeners.ssl.1`` adds a TLS stream listener with the ``[tls]`` certificate).

    A TLS (amqps) listener is added when the config file has a ``[tls]`` section or
    ``tls_certfile`` is given (``tls_certfile``/``tls_keyfile`` override the file's certfile /
    keyfile; ``tls_port`` overrides its port, default 5671, 0 = any free port).

    Raises :class:`PortInUseError` / :class:`BrokerError` (one-line messages) when it cannot
    start, and :class:`~.config.ConfigError` for a bad config file or unusable TLS files.
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = load_config(config_path, rabbitmq_version=rabbitmq_version)
    if data_dir is None:
        data_dir = config.data_dir
    if tls_certfile is not None:
        if config.tls is None:
            config.tls = TLSConfig(certfile=tls_certfile, keyfile=tls_keyfile)
        else:
            config.tls.certfile, config.tls.keyfile = tls_certfile, tls_keyfile
    elif (tls_keyfile is not None or tls_port is not None) and config.tls is None:
        raise ConfigError("a TLS listener needs a server certificate: give --tls-cert (and --tls-key) "
                          "or a [tls] section in the config file")
    tls = config.tls
    if tls is not None:
        tls.ssl_context()  # fail before binding anything when the files are unusable
        if tls_port is not None:
            tls.port = tls_port

    async def main() -> None:
        loop = asyncio.get_running_loop()
        broker = Broker(config, data_dir, loop)
        try:
            bound = await broker.listen(host, port)
            tls_bound = await broker.listen(host, tls.port, tls) if tls is not None else None
            sport = stream_port if stream_port is not None else config.stream.port
            stream_bound = await broker.listen_stream(host, sport) if sport is not None else None
            if config.stream.tls_port is not None and tls is not None:
                await broker.listen_stream(host, config.stream.tls_port, tls)
            if management_port is not None:
                from ..management import start_management
                mhost = host if management_host is None else management_host
                await start_management(broker, "127.0.0.1" if mhost == "localhost" else mhost, management_port)
        except BaseException:
            if broker.management is not None:
                await broker.management.stop()
            for srv in broker.servers:
                srv.close()
            broker.store.close()
            raise
        log.info("spark-amqp broker ready on %s:%d%s%s (data_dir=%s, behaves like RabbitMQ %s)", host, bound,
                 f", amqps on port {tls_bound}" if tls_bound is not None else "",
                 f", stream protocol on port {stream_bound}" if stream_bound is not None else "",
                 data_dir or "in memory", config.rabbitmq_version)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - non-main thread / Windows
                pass
        await stop.wait()
        log.info("shutting down")
        await broker.close()
        log.info("stopped")

    loop = new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
