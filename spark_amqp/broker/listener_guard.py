"""One accept policy for every listener: connection limits, a handshake deadline, and a
refusal that is logged (rate-limited) instead of a file-descriptor limit that is hit.

Issue 41: ~20,000 idle HTTP connections took the broker to its descriptor limit, and then
new AMQP connections failed at once (EOF) and the management API too. The rules here hold on
every port that adopts them (AMQP, amqps, the management API, the stream port), each written
once:

- **a maximum per listener** (``max_connections``; RabbitMQ's ``ranch_connection_max`` for the
  AMQP listeners, ``[management] max_connections`` for HTTP);
- **a maximum per source address** (``max_connections_per_address``, all listeners together;
  0 = none, as RabbitMQ) so that one host cannot take the slots of the others;
- **a descriptor reserve**: a socket is refused while fewer than ``reserve`` descriptors of the
  process's ``RLIMIT_NOFILE`` are free (5 % of it, at least 64), so the store, stream segment
  files and the other listeners always find one; an attacker who fills one port leaves the
  others working;
- **a handshake deadline** (RabbitMQ's ``handshake_timeout``, 10 s on AMQP; the management
  API's ``request_timeout``, 5 s): a socket whose protocol has not said
  :meth:`Admission.handshake_done` by then is closed (the listener may answer first, e.g. HTTP
  408), whether it sent nothing or a byte a second;
- **the oldest unfinished handshake makes room**: when the listener maximum or the descriptor
  reserve is reached, the socket that has waited longest without finishing its handshake (and
  for at least ``EVICT_AFTER`` seconds) is closed to admit the new one; only when there is none
  is the new socket refused (accepted and closed at once; the HTTP listener answers 503
  first). So sockets that connect and say nothing cannot lock clients out: a client finishes
  its handshake in milliseconds, long before it would be the oldest. The per-address maximum
  refuses without evicting;
- optionally **a write stall limit** (``write_timeout``; the management API's
  ``idle_timeout``): a peer that leaves the socket's send buffer full that long is dropped;
- every refusal and every expired handshake is logged, at most one line per listener and
  reason every 10 s plus a count of the ones held back (:class:`~.log_limit.RateLimitedLog`).

Adopting it for a new listener (two lines)::

    guard = broker.guards.listener("stream", max_connections=cfg.ranch_connection_max,
                                   handshake_timeout=cfg.handshake_timeout / 1000)
    server = await loop.create_server(guard.protocol_factory(lambda: MyProtocol(broker)), host, port)

and in the protocol, once the client is authenticated and the connection open::

    self.admission.handshake_done()   # set by the guard before connection_made

(``self.admission`` is :data:`UNGUARDED`, a no-op, when the protocol runs without a guard, so
class-level ``admission = UNGUARDED`` keeps such unit tests working.) A protocol with a
deadline per negotiation step, as RabbitMQ's stream reader
(``connection_negotiation_step_timeout``), calls :meth:`Admission.handshake_progress` at each
step instead, then ``handshake_done()``.

The guard wraps the protocol in a thin proxy (one more Python call per ``data_received``) so
that it sees the connection end however it ends and works for protocols it cannot change
(aiohttp's ``RequestHandler`` has ``__slots__``). Sockets still in a TLS handshake are not
counted (asyncio calls ``connection_made`` after it; ``ssl_handshake_timeout`` bounds them).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Callable

from .log_limit import RateLimitedLog

__all__ = ["ListenerGuards", "ListenerGuard", "Admission", "UNGUARDED", "open_file_descriptors"]

log = logging.getLogger("spark_amqp.broker")

_FD_RESAMPLE = 0.5       # seconds between two counts of the process's open descriptors
#: seconds a socket must have waited in its handshake before a new one may take its place
EVICT_AFTER = 1.0
_RESERVE_FRACTION = 20   # the reserve is 1/20 of RLIMIT_NOFILE ...
_RESERVE_MIN = 64        # ... and at least this many descriptors


def open_file_descriptors() -> int | None:
    """How many descriptors this process has open (``/proc/self/fd``; ``None`` elsewhere)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1   # listdir's own descriptor
    except OSError:
        return None


def _nofile_limit() -> int | None:
    try:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _address(transport) -> str:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and peer:
        host = str(peer[0])
        return host[7:] if host.startswith("::ffff:") and "." in host else host  # IPv4-mapped
    return str(peer or "")


def _peer(transport) -> str:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"[{peer[0]}]:{peer[1]}" if ":" in str(peer[0]) else f"{peer[0]}:{peer[1]}"
    return str(peer or "?")


class _Unguarded:
    """The admission of a protocol that runs without a guard: every call does nothing."""

    received = 0

    def handshake_done(self) -> None:
        pass

    def handshake_progress(self) -> None:
        pass


#: what ``protocol.admission`` is without a guard (see the module docstring)
UNGUARDED = _Unguarded()


class Admission:
    """One accepted socket of a :class:`ListenerGuard`: its counts and handshake deadline.

    Attributes: ``peer`` ("host:port"), ``address`` (the host, the per-address key),
    ``received`` (bytes read before the handshake was done), ``handshaking`` (bool).
    """

    __slots__ = ("guard", "transport", "peer", "address", "received", "handshaking", "since",
                 "_timer", "_released", "_stall")

    def __init__(self, guard: "ListenerGuard", transport, address: str):
        self.guard = guard
        self.transport = transport
        self.peer = _peer(transport)
        self.address = address
        self.received = 0
        self.handshaking = True
        self.since = guard.guards.loop.time()
        self._timer: asyncio.TimerHandle | None = None
        self._stall: asyncio.TimerHandle | None = None
        self._released = False
        guard._handshaking[id(self)] = self
        self._arm()

    def _arm(self) -> None:
        t = self.guard.handshake_timeout
        if t:
            self._timer = self.guard.guards.loop.call_later(t, self._expired)

    def handshake_done(self) -> None:
        """The client finished its handshake (AMQP: connection.open-ok sent; HTTP: a request's
        headers arrived): the deadline no longer applies. Idempotent."""
        if self.handshaking:
            self.handshaking = False
            self.guard._handshaking.pop(id(self), None)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def handshake_progress(self) -> None:
        """A negotiation step finished: the deadline starts again (a per-step timeout)."""
        if self.handshaking and self._timer is not None:
            self._timer.cancel()
            self._arm()

    def _expired(self) -> None:
        self._timer = None
        if not self.handshaking or self._released:
            return
        g = self.guard
        g.guards.log.warning(("handshake", g.name), "closing %s connection %s: handshake not finished "
                             "within %g s (%s)", g.name, self.peer, g.handshake_timeout, g.timeout_setting)
        if g.on_handshake_timeout is not None:
            try:
                g.on_handshake_timeout(self.transport, self.received)
                return
            except Exception:  # pragma: no cover - a bug in the listener's answer
                log.exception("%s: answering an expired handshake", g.name)
        self.transport.abort()

    def writing_paused(self, paused: bool) -> None:
        """The transport's send buffer passed its high-water mark (``paused``) or drained:
        a stall longer than the listener's ``write_timeout`` drops the socket."""
        t = self.guard.write_timeout
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        if paused and t and not self._released:
            self._stall = self.guard.guards.loop.call_later(t, self._stalled)

    def _stalled(self) -> None:
        self._stall = None
        g = self.guard
        g.guards.log.warning(("stalled", g.name), "closing %s connection %s: it read nothing of what was "
                             "sent to it for %g s (%s)", g.name, self.peer, g.write_timeout, g.write_setting)
        self.transport.abort()

    def release(self) -> None:
        """The socket is gone: its slots are free again. Idempotent."""
        if self._released:
            return
        self._released = True
        self.handshake_done()
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        self.guard._release(self)


class _GuardedProtocol(asyncio.Protocol):
    """The proxy a :class:`ListenerGuard` puts before a listener's protocol: admits or refuses
    the socket, then passes every callback on."""

    __slots__ = ("_guard", "_inner", "admission")

    def __init__(self, guard: "ListenerGuard", inner):
        self._guard = guard
        self._inner = inner
        self.admission: Admission | None = None

    def connection_made(self, transport) -> None:
        adm = self._guard._admit(transport)
        if adm is None:
            return
        self.admission = adm
        try:
            self._inner.admission = adm
        except AttributeError:   # a protocol with __slots__: the listener finds it by transport
            pass
        self._inner.connection_made(transport)

    def connection_lost(self, exc) -> None:
        adm = self.admission
        if adm is None:
            return  # refused: the protocol never saw this socket
        adm.release()
        self._inner.connection_lost(exc)

    def data_received(self, data) -> None:
        adm = self.admission
        if adm is not None and adm.handshaking:
            adm.received += len(data)
        self._inner.data_received(data)

    def eof_received(self):
        if self.admission is None:
            return False
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        adm = self.admission
        if adm is not None:
            adm.writing_paused(True)
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        adm = self.admission
        if adm is not None:
            adm.writing_paused(False)
            self._inner.resume_writing()


class _GuardedBufferedProtocol(_GuardedProtocol, asyncio.BufferedProtocol):
    """:class:`_GuardedProtocol` for a protocol that reads into its own buffer."""

    __slots__ = ()

    def get_buffer(self, sizehint: int):
        return self._inner.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        adm = self.admission
        if adm is not None and adm.handshaking:
            adm.received += nbytes
        self._inner.buffer_updated(nbytes)


class ListenerGuard:
    """The accept policy of one listener (see the module docstring); made by
    :meth:`ListenerGuards.listener`.

    Attributes: ``name`` (in log lines: "amqp", "amqps", "http", "stream"), ``max_connections``
    (0 = only the broker-wide rules), ``handshake_timeout`` (seconds, 0 = none),
    ``open`` (sockets admitted now), ``refused`` (since start).
    """

    def __init__(self, guards: "ListenerGuards", name: str, max_connections: int,
                 handshake_timeout: float, timeout_setting: str, max_setting: str,
                 on_handshake_timeout: Callable | None, refuse: Callable | None,
                 write_timeout: float = 0.0, write_setting: str = "idle_timeout"):
        self.guards = guards
        self.name = name
        self.max_connections = max_connections
        self.handshake_timeout = handshake_timeout
        self.timeout_setting = timeout_setting
        self.max_setting = max_setting
        self.write_timeout = write_timeout
        self.write_setting = write_setting
        self.on_handshake_timeout = on_handshake_timeout
        self.refuse = refuse
        self.open = 0
        self.refused = 0
        self.evicted = 0
        self._by_transport: dict[int, Admission] = {}
        #: admissions still in their handshake, oldest first
        self._handshaking: dict[int, Admission] = {}

    def protocol_factory(self, factory: Callable[[], asyncio.BaseProtocol]) -> Callable[[], asyncio.BaseProtocol]:
        """``factory`` wrapped for ``loop.create_server``: each socket is admitted or refused
        before the listener's protocol sees it."""
        def make() -> asyncio.BaseProtocol:
            inner = factory()
            if isinstance(inner, asyncio.BufferedProtocol):
                return _GuardedBufferedProtocol(self, inner)
            return _GuardedProtocol(self, inner)
        return make

    def admission(self, transport) -> Admission | _Unguarded:
        """The :class:`Admission` of ``transport`` (:data:`UNGUARDED` if it has none), for
        protocols that cannot hold an attribute (aiohttp's request handler)."""
        return self._by_transport.get(id(transport), UNGUARDED)

    def _admit(self, transport) -> Admission | None:
        g = self.guards
        address = _address(transport)
        reason = None
        if g.max_per_address and g.by_address.get(address, 0) >= g.max_per_address:
            reason = (f"{g.by_address[address]} connections open from {address}, the maximum per address "
                      f"(max_connections_per_address = {g.max_per_address})")
        elif self.max_connections and self.open >= self.max_connections:
            reason = f"{self.open} connections open on this listener, the maximum ({self.max_setting} = {self.max_connections})"
            if self._evict_oldest([self], transport, reason):
                reason = None
        elif g.descriptors_short():
            reason = (f"fewer than {g.reserve} of the process's {g.nofile} file descriptors are free "
                      f"(the reserve kept for the store and the other listeners)")
            if self._evict_oldest(list(g.listeners.values()), transport, reason):
                reason = None
        if reason is not None:
            self.refused += 1
            g.log.warning(("refused", self.name), "refused %s connection from %s: %s",
                          self.name, _peer(transport), reason)
            try:
                if self.refuse is not None:
                    self.refuse(transport)
                else:
                    transport.abort()
            except Exception:  # pragma: no cover - the socket is gone already
                transport.abort()
            return None
        adm = Admission(self, transport, address)
        self.open += 1
        g.total += 1
        g.by_address[address] = g.by_address.get(address, 0) + 1
        self._by_transport[id(transport)] = adm
        return adm

    def _evict_oldest(self, guards: list["ListenerGuard"], transport, reason: str) -> bool:
        """Close the socket of ``guards`` that has waited longest in its handshake (at least
        ``EVICT_AFTER`` s) to make room for ``transport``; False when there is none."""
        oldest = None
        for lg in guards:
            first = next(iter(lg._handshaking.values()), None)
            if first is not None and (oldest is None or first.since < oldest.since):
                oldest = first
        if oldest is None or self.guards.loop.time() - oldest.since < EVICT_AFTER:
            return False
        lg = oldest.guard
        lg.evicted += 1
        self.guards.log.warning(("evicted", lg.name), "closed %s connection %s, the oldest unfinished handshake "
                                "(%.1f s), to admit %s: %s", lg.name, oldest.peer,
                                self.guards.loop.time() - oldest.since, _peer(transport), reason)
        oldest.release()   # its slots now: the transport reports its end later
        oldest.transport.abort()
        return True

    def _release(self, adm: Admission) -> None:
        g = self.guards
        self.open -= 1
        g.total -= 1
        n = g.by_address.get(adm.address, 1) - 1
        if n:
            g.by_address[adm.address] = n
        else:
            g.by_address.pop(adm.address, None)
        if self._by_transport.get(id(adm.transport)) is adm:
            del self._by_transport[id(adm.transport)]


class ListenerGuards:
    """The broker-wide part of the accept policy: counts over all listeners, per source
    address, and the descriptor reserve (see the module docstring). One per broker
    (``Broker.guards``).

    Args:
        loop: the broker's event loop (timers, the log's summary lines).
        max_per_address: sockets one source address may hold on all listeners together
            (0 = no limit; broker.toml ``max_connections_per_address``).
        nofile: the descriptor limit (default: this process's ``RLIMIT_NOFILE`` soft limit;
            ``None``: no reserve rule).
        reserve: descriptors kept free (default: 5 % of ``nofile``, at least 64).

    Attributes: ``total`` (sockets admitted now), ``by_address`` (host -> sockets),
    ``log`` (the :class:`~.log_limit.RateLimitedLog` of refusals; ``log.counts``).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, max_per_address: int = 0,
                 nofile: int | None | bool = True, reserve: int | None = None):
        self.loop = loop
        self.max_per_address = max_per_address
        self.nofile = _nofile_limit() if nofile is True else nofile
        self.reserve = reserve if reserve is not None else (
            max(_RESERVE_MIN, self.nofile // _RESERVE_FRACTION) if self.nofile else 0)
        self.total = 0
        self.by_address: dict[str, int] = {}
        self.listeners: dict[str, ListenerGuard] = {}
        self.log = RateLimitedLog(log, 10.0, loop)
        self._fd_open: int | None = None
        self._fd_at = -1e9
        self._fd_total = 0

    def listener(self, name: str, *, max_connections: int = 0, handshake_timeout: float = 0.0,
                 timeout_setting: str = "handshake_timeout", max_setting: str = "ranch_connection_max",
                 write_timeout: float = 0.0, write_setting: str = "[management] tcp.idle_timeout",
                 on_handshake_timeout: Callable | None = None,
                 refuse: Callable | None = None) -> ListenerGuard:
        """A :class:`ListenerGuard` named ``name`` (one per listener; a second call with the
        same name returns a new guard that shares the broker-wide counts).

        Args:
            max_connections: sockets this listener holds at most (0 = no own limit).
            handshake_timeout: seconds until :meth:`Admission.handshake_done` (0 = no deadline).
            write_timeout: seconds a peer may leave the send buffer full (0 = no limit; not
                for AMQP, whose consumers may be slow for as long as they like).
            timeout_setting / max_setting / write_setting: the broker.toml names log lines cite.
            on_handshake_timeout: ``(transport, bytes_received)`` answers an expired handshake
                and closes the transport (default: abort it).
            refuse: ``(transport)`` answers a refused socket and closes it (default: abort).
        """
        g = ListenerGuard(self, name, max_connections, handshake_timeout, timeout_setting,
                          max_setting, on_handshake_timeout, refuse, write_timeout, write_setting)
        self.listeners[name] = g
        return g

    def descriptors_short(self) -> bool:
        """True when fewer than ``reserve`` descriptors are free: counted in ``/proc/self/fd``
        at most every 0.5 s, plus the sockets admitted since."""
        if not self.nofile:
            return False
        now = self.loop.time()
        if now - self._fd_at >= _FD_RESAMPLE:
            self._fd_at = now
            self._fd_open = open_file_descriptors()
            self._fd_total = self.total
        if self._fd_open is None:
            return False
        return self._fd_open + (self.total - self._fd_total) >= self.nofile - self.reserve
