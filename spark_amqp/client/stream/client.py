"""The stream-protocol client: :func:`connect` and :class:`StreamClient`.

A :class:`StreamClient` holds one *locator* connection (to whichever node of the URI answered
first) for the commands about streams (create, delete, metadata, offsets, publisher sequences,
super-stream routes and partitions, statistics) and opens the connections its producers and
consumers need: a producer's to the stream's **leader** (only the leader writes), a
consumer's to a **replica** when the stream has one (else the leader), as RabbitMQ's stream
clients do (the metadata command: leader and replicas as each node *advertises* itself). One
connection per node is shared by the producers and consumers placed on it (up to 256
publishers and 256 subscriptions each: uint8 ids).

Brokers whose advertised host/port the client cannot reach (NAT, containers, a load balancer)
are reached with ``address_resolver`` (rewrite every advertised address before it is dialled)
or ``load_balancer=True`` (dial the URI's addresses and keep the connection that lands on the
node wanted); see :class:`~.params.StreamParameters`.

Failover: :func:`connect` tries the URI's addresses in a new random order, each once, and with
``failover_timeout`` > 0 goes on in rounds with back-off (:mod:`spark_amqp.client.failover`:
the project's one failure model) until that much time has passed; then it raises
:class:`~spark_amqp.client.failover.BrokerUnreachable` listing every address with its last
error. A refused login or vhost is raised at once (users and vhosts are cluster-wide). A
producer or consumer whose connection breaks raises ``ConnectionLost`` (or
``StreamNotAvailable`` when its stream's leader moved); open a new one (a consumer from its
:attr:`~.consumer.Consumer.offset`, a named producer resumes after
:meth:`StreamClient.query_publisher_sequence`).
"""

from __future__ import annotations

import logging
import random
import re
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

from ...protocol.stream import commands as C
from ...protocol.stream.constants import Code, Key
from ...protocol.stream.errors import (AccessRefused, AuthenticationFailure,
                                       AuthenticationFailureLoopback, SaslError,
                                       SaslMechanismNotSupported, StreamError,
                                       StreamNotAvailable, VirtualHostAccessFailure,
                                       error_for_code)
from ..errors import ConnectionClosed, ConnectionLost
from ..failover import Backoff, BrokerUnreachable, FailoverWindow
from ..uri import format_address
from .consumer import Consumer, offset_spec
from .node import NodeConnection
from .params import StreamParameters, parse_stream_uri
from .producer import Producer

__all__ = ["connect", "StreamClient", "StreamInfo", "FIRST_FAILOVER_BACKOFF",
           "MAX_FAILOVER_BACKOFF"]

log = logging.getLogger("spark_amqp.client.stream")

#: back-off between rounds over the addresses (seconds): first, doubling up to max
FIRST_FAILOVER_BACKOFF = 0.5
MAX_FAILOVER_BACKOFF = 5.0
#: errors that every node would give the same: raised at once, no failover
_REFUSED = (AuthenticationFailure, AuthenticationFailureLoopback, SaslError,
            SaslMechanismNotSupported, VirtualHostAccessFailure, AccessRefused,
            ssl.SSLCertVerificationError)


def connect(uri: str | StreamParameters | None = None, **overrides: Any) -> "StreamClient":
    """Open a stream-protocol client from a ``rabbitmq-stream://`` URI (see
    :mod:`~spark_amqp.client.stream.params`).

    ``overrides`` are :class:`~.params.StreamParameters` attributes that win over the URI, e.g.
    ``connect(url, heartbeat=10, address_resolver=lambda h, p: ("127.0.0.1", p))`` (seconds
    here; ``connection_timeout`` and ``failover_timeout`` are milliseconds in the URI). Returns
    a :class:`StreamClient` (a context manager: it closes every connection it opened).

    Several addresses (``rabbitmq-stream://u:p@h1,h2:5553/%2F`` or ``addresses=``): tried in
    a new random order per call (``shuffle_addresses=False``: as given); the first that
    completes the handshake is the locator. A refused connect, a lost socket or a node that
    cannot serve (``StreamNotAvailable``) moves on to the next address; with
    ``failover_timeout`` > 0 seconds, rounds over all of them go on with back-off (0.5 s,
    doubling up to 5 s) until that much time has passed since the first attempt.

    >>> from spark_amqp.client.stream import connect                  # doctest: +SKIP
    >>> with connect("rabbitmq-stream://guest:guest@127.0.0.1:5552/%2F") as client:
    ...     client.create_stream("events", max_age="7D", exists_ok=True)
    ...     with client.producer("events", name="writer-1") as p:
    ...         p.send(amqp10_message_bytes)
    ...         p.wait_for_confirms(timeout=10)
    ...     with client.consumer("events", offset="first") as c:
    ...         for offset, message in c.messages(timeout=1.0):
    ...             ...

    Raises:
        ValueError / TypeError: a malformed URI, an unknown or out-of-range parameter (named).
        BrokerUnreachable: several addresses, or ``failover_timeout`` > 0, and none could be
            connected; ``errors`` maps ``"host:port"`` to the last error of each.
        ConnectionLost: one address, no ``failover_timeout``: TCP/TLS/handshake failure or
            timeout (an ``OSError``), unchanged.
        AuthenticationFailure (0x08): wrong user name or password; SaslMechanismNotSupported
            (0x07): the broker offers none of ``auth_mechanisms``;
            AuthenticationFailureLoopback (0x0b): the user may only connect from localhost;
            VirtualHostAccessFailure (0x0c): the vhost does not exist or the user may not use
            it; ssl.SSLError: the certificate was not accepted.
    """
    params = uri if isinstance(uri, StreamParameters) else parse_stream_uri(uri)
    if overrides:
        params = params.replace(**overrides)
    return StreamClient(params)


def _dial_any(params: StreamParameters, addresses: list, what: str) -> NodeConnection:
    """Connect to one of ``addresses`` (``[(host, port)]``, tried in order), in rounds with
    back-off for ``params.failover_timeout`` seconds (the failure model of
    :mod:`spark_amqp.client.failover`). Raises as :func:`connect` says."""
    if len(addresses) == 1 and not params.failover_timeout:
        return NodeConnection(params, *addresses[0])
    window = FailoverWindow(float(params.failover_timeout))
    backoff = Backoff(FIRST_FAILOVER_BACKOFF, MAX_FAILOVER_BACKOFF)
    window.failed()  # the window runs from the first attempt
    errors: dict[str, BaseException] = {}
    while True:
        order = list(addresses)
        if params.shuffle_addresses:
            random.shuffle(order)
        for host, port in order:
            try:
                return NodeConnection(params, host, port)
            except _REFUSED:
                raise  # the same on every node
            except (OSError, StreamError) as exc:
                errors[format_address(host, port)] = exc
                log.warning("cannot connect to %s (%s); trying the next address",
                            format_address(host, port), exc)
        if window.expired():
            lines = "; ".join(f"{a}: {e}" for a, e in errors.items())
            within = (f" within failover_timeout {params.failover_timeout:g} s"
                      if params.failover_timeout else " (one round; failover_timeout 0)")
            raise BrokerUnreachable(
                f"could not connect {what} to any of the {len(errors)} address(es) of "
                f"{params.redacted_uri(all_addresses=True)}{within}: {lines}. Check that the "
                "nodes run with the rabbitmq_stream plugin and the addresses are right", errors)
        time.sleep(min(backoff.failed(), max(0.0, window.left())))


_MAX_AGE = re.compile(r"[0-9]+[YMDhms]")
_INT_ARGUMENTS = {"max-length-bytes": 0, "stream-max-segment-size-bytes": 0,
                  "initial-cluster-size": 1}


def _check_stream_arguments(args: dict) -> None:
    """Refuse, before anything is sent, the stream arguments RabbitMQ 3.10.8 cannot parse:
    its stream manager crashes on them (``binary_to_integer`` of a non-integer size,
    ``check_max_age`` of a max-age without leading digits: the connection is lost, seen on
    this machine) instead of answering PRECONDITION_FAILED. Raises ``ValueError`` naming the
    argument."""
    age = args.get("max-age")
    if age is not None and (not _MAX_AGE.fullmatch(age) or int(age[:-1]) == 0):
        raise ValueError(f"max_age {age!r}: give a positive number and a unit, Y M D h m s "
                         "(e.g. '7D', '12h'; RabbitMQ's x-max-age)")
    for key, low in _INT_ARGUMENTS.items():
        v = args.get(key)
        if v is not None and (not v.isdigit() or int(v) < low):
            raise ValueError(f"{key.replace('-', '_')} {v!r}: give an integer >= {low}")


@dataclass(frozen=True)
class StreamInfo:
    """A stream's metadata: ``code`` (OK, STREAM_DOES_NOT_EXIST, STREAM_NOT_AVAILABLE,
    ACCESS_REFUSED), ``leader`` (``(host, port)`` as advertised, or None), ``replicas`` (a
    tuple of ``(host, port)``)."""

    stream: str
    code: int
    leader: tuple | None
    replicas: tuple

    @property
    def exists(self) -> bool:
        return self.code == Code.OK


class StreamClient:
    """A client of one RabbitMQ cluster's stream protocol (create with :func:`connect`).

    Attributes: ``params`` (:class:`~.params.StreamParameters`); ``server_properties`` and
    ``server_version`` (of the locator's node, e.g. ``(3, 10, 8)``); ``locator`` (its
    :class:`~.node.NodeConnection`).

    Thread safety: its methods may be called from any thread; a producer or a consumer should
    be used by one thread at a time.
    """

    def __init__(self, params: StreamParameters):
        self.params = params
        self._lock = threading.RLock()
        self._nodes: dict[tuple, NodeConnection] = {}  # advertised (host, port) -> connection
        self._closed = False
        self.locator = _dial_any(params, params.address_list(), "the locator")
        self._nodes[self.locator.advertised] = self.locator
        self.server_properties = self.locator.server_properties
        self.server_version = self.locator.server_version

    # ------------------------------------------------------------------ plumbing

    def _request(self, cmd, ok: tuple = (Code.OK,)):
        self._check()
        return self.locator.request(cmd, ok=ok)

    def _check(self) -> None:
        if self._closed:
            raise ConnectionClosed("this stream client was closed")

    def _needs(self, key: int, what: str) -> None:
        if not self.locator.supports(key):
            from ...protocol.stream.constants import KEYS_SINCE

            since = ".".join(map(str, KEYS_SINCE[Key(key)]))
            version = ".".join(map(str, self.server_version)) or "?"
            raise NotImplementedError(f"{what} needs RabbitMQ {since} or later; this broker is "
                                      f"{version}")

    # ------------------------------------------------------------------ streams

    def create_stream(self, stream: str, arguments: dict | None = None, *,
                      max_length_bytes: int | None = None, max_age: str | None = None,
                      max_segment_size_bytes: int | None = None,
                      initial_cluster_size: int | None = None,
                      leader_locator: str | None = None, exists_ok: bool = False) -> bool:
        """Create ``stream`` (``create`` command). Retention: ``max_length_bytes`` (bytes),
        ``max_age`` (``"7D"``, ``"12h"``, ``"30m"``, units Y M D h m s); segment size in bytes;
        ``initial_cluster_size`` (nodes); ``leader_locator`` (``client-local``, ``balanced``,
        ``least-leaders``); ``arguments``: any other, as strings (RabbitMQ's stream
        arguments without ``x-``). Returns True when created, False when it existed and
        ``exists_ok``. Raises ValueError (a malformed ``max_age`` or size, before anything
        is sent), StreamAlreadyExists (0x05: it exists with the same arguments),
        PreconditionFailed (0x11: a bad argument, or it exists with other arguments: what
        RabbitMQ 3.10.8 answers, whatever ``exists_ok``), AccessRefused (0x10)."""
        args = {k: str(v) for k, v in (arguments or {}).items()}
        for key, value in (("max-length-bytes", max_length_bytes), ("max-age", max_age),
                           ("stream-max-segment-size-bytes", max_segment_size_bytes),
                           ("initial-cluster-size", initial_cluster_size),
                           ("queue-leader-locator", leader_locator)):
            if value is not None:
                args[key] = str(value)
        _check_stream_arguments(args)
        ok = (Code.OK, Code.STREAM_ALREADY_EXISTS) if exists_ok else (Code.OK,)
        r = self._request(C.CreateStream(0, stream, args), ok)
        return r.code == Code.OK

    def delete_stream(self, stream: str, missing_ok: bool = False) -> bool:
        """Delete ``stream`` and its messages. Returns True when deleted, False when it did not
        exist and ``missing_ok``. Raises StreamDoesNotExist (0x02), AccessRefused (0x10)."""
        ok = (Code.OK, Code.STREAM_DOES_NOT_EXIST) if missing_ok else (Code.OK,)
        return self._request(C.DeleteStream(0, stream), ok).code == Code.OK

    def metadata(self, *streams: str) -> dict:
        """``{stream: StreamInfo}`` for each of ``streams`` (``metadata`` command): the
        leader's and replicas' addresses as the nodes advertise them."""
        r = self._request(C.Metadata(0, list(streams)))
        brokers = {b.reference: (b.host, b.port) for b in r.brokers}
        out = {}
        for s in r.streams:
            out[s.stream] = StreamInfo(s.stream, s.code, brokers.get(s.leader),
                                       tuple(brokers[x] for x in s.replicas if x in brokers))
        return out

    def stream_exists(self, stream: str) -> bool:
        """Whether ``stream`` exists (its metadata code is OK or STREAM_NOT_AVAILABLE)."""
        info = self.metadata(stream).get(stream)
        return info is not None and info.code in (Code.OK, Code.STREAM_NOT_AVAILABLE)

    def stream_stats(self, stream: str) -> dict:
        """``{name: int}`` statistics of ``stream`` (``stream_stats``, RabbitMQ 3.11+):
        ``first_chunk_id``, ``committed_chunk_id`` (offsets of the first and of the last
        committed chunk; -1 when empty) and, on newer brokers, more. Raises
        NotImplementedError on older brokers, StreamDoesNotExist (0x02)."""
        self._needs(Key.STREAM_STATS, "stream_stats")
        return dict(self._request(C.StreamStats(0, stream)).stats)

    # ------------------------------------------------------------------ offsets, sequences

    def query_offset(self, reference: str, stream: str) -> int | None:
        """The offset stored for consumer ``reference`` on ``stream`` (``query_offset``), or
        None when none is (NO_OFFSET). Raises StreamDoesNotExist (0x02)."""
        r = self._request(C.QueryOffset(0, reference, stream), (Code.OK, Code.NO_OFFSET))
        return r.offset if r.code == Code.OK else None

    def store_offset(self, reference: str, stream: str, offset: int) -> None:
        """Store ``offset`` for consumer ``reference`` on ``stream`` (``store_offset``:
        fire-and-forget, no reply; :meth:`query_offset` reads it back once written)."""
        self._check()
        self.locator.send_command(C.StoreOffset(reference, stream, int(offset)))

    def query_publisher_sequence(self, reference: str, stream: str) -> int:
        """The highest publishing id ``stream`` stored for producer ``reference`` (0: none):
        where a deduplicating producer of that name resumes (``query_publisher_sequence``).
        Raises StreamDoesNotExist (0x02)."""
        return self._request(C.QueryPublisherSequence(0, reference, stream)).sequence

    # ------------------------------------------------------------------ super streams

    def partitions(self, super_stream: str) -> list:
        """The partition streams of ``super_stream``, in order (``partitions``). Raises
        StreamDoesNotExist (0x02) when there is no such super stream."""
        return list(self._request(C.Partitions(0, super_stream)).streams)

    def route(self, routing_key: str, super_stream: str) -> list:
        """The partition streams a message with ``routing_key`` goes to in ``super_stream``
        (``route``: its bindings; empty when none matches). Raises StreamDoesNotExist."""
        return list(self._request(C.Route(0, routing_key, super_stream)).streams)

    def create_super_stream(self, name: str, partitions: int | None = None,
                            binding_keys: list | None = None,
                            arguments: dict | None = None) -> None:
        """Create super stream ``name`` (``create_super_stream``, RabbitMQ 3.13+): with
        ``partitions`` N, partitions ``name-0..name-(N-1)`` bound with keys ``"0".."N-1"``;
        with ``binding_keys``, one partition ``name-<key>`` per key. ``arguments``: the
        partitions' stream arguments. On older brokers declare it over AMQP 0-9-1
        (:func:`spark_amqp.client.streams.declare_super_stream`): NotImplementedError."""
        self._needs(Key.CREATE_SUPER_STREAM, "create_super_stream")
        if (partitions is None) == (binding_keys is None):
            raise ValueError("give either partitions (a count) or binding_keys")
        keys = [str(i) for i in range(partitions)] if partitions is not None else \
            [str(k) for k in binding_keys]  # type: ignore[union-attr]
        names = [f"{name}-{k}" for k in keys]
        self._request(C.CreateSuperStream(0, name, names, keys,
                                          {k: str(v) for k, v in (arguments or {}).items()}))

    def delete_super_stream(self, name: str) -> None:
        """Delete super stream ``name`` and its partitions (RabbitMQ 3.13+)."""
        self._needs(Key.DELETE_SUPER_STREAM, "delete_super_stream")
        self._request(C.DeleteSuperStream(0, name))

    # ------------------------------------------------------------------ placement

    def _node_for(self, want: list, what: str) -> NodeConnection:
        """A connection to one of the advertised addresses ``want`` (reused when open)."""
        with self._lock:
            self._check()
            for addr in want:
                node = self._nodes.get(addr)
                if node is not None and node.is_open:
                    return node
            addr = random.choice(want)
            node = self._open_node(addr, what)
            self._nodes[node.advertised] = node
            return node

    def _open_node(self, addr: tuple, what: str) -> NodeConnection:
        p = self.params
        if not p.load_balancer:
            node = _dial_any(p, [p.resolve(*addr)], what)
            return node
        last: BaseException | None = None
        for _ in range(p.load_balancer_attempts):
            node = _dial_any(p, p.address_list(), what)
            if node.advertised == tuple(addr):
                return node
            last = ConnectionLost(f"the load balancer led to {node.advertised}, not {addr}")
            node.close()
        raise BrokerUnreachable(f"{p.load_balancer_attempts} connections through the load "
                                f"balancer {p.redacted_uri(all_addresses=True)} did not reach "
                                f"node {format_address(*addr)} ({what}): {last}")

    def _placement(self, stream: str, leader: bool) -> list:
        info = self.metadata(stream).get(stream)
        if info is None or info.code != Code.OK:
            code = info.code if info is not None else Code.STREAM_DOES_NOT_EXIST
            raise error_for_code(code, f"stream {stream!r}: "
                                 + {Code.STREAM_DOES_NOT_EXIST: "it does not exist (create_stream)",
                                    Code.STREAM_NOT_AVAILABLE: "it has no leader now: retry",
                                    Code.ACCESS_REFUSED: "the user may not use it"}.get(
                                        code, "metadata refused"))
        if leader or not info.replicas:
            if info.leader is None:
                raise StreamNotAvailable(f"stream {stream!r} has no leader now: retry shortly")
            return [info.leader]
        return list(info.replicas)

    @staticmethod
    def _free_id(used: dict, what: str) -> int:
        for i in range(256):
            if i not in used:
                return i
        raise RuntimeError(f"a connection holds at most 256 {what} (uint8 ids)")

    # ------------------------------------------------------------------ producers, consumers

    def producer(self, stream: str, name: str | None = None, *, batch_size: int = 500,
                 max_unconfirmed: int = 20000) -> Producer:
        """A :class:`~.producer.Producer` on ``stream``, on a connection to its leader.

        ``name``: the publisher reference for deduplication (at most 256 bytes; None: no
        deduplication): its :attr:`~.producer.Producer.next_publishing_id` starts after the
        stream's stored sequence for that name. ``batch_size``: messages per publish frame;
        ``max_unconfirmed``: messages in flight before ``send`` waits. Raises
        StreamDoesNotExist (0x02), StreamNotAvailable (0x06), PreconditionFailed (0x11: the
        name is in use by another producer), AccessRefused (0x10)."""
        if name is not None and len(name.encode("utf-8")) > 256:
            raise ValueError("a producer name is at most 256 bytes")
        node = self._node_for(self._placement(stream, leader=True), f"a producer of {stream!r}")
        with self._lock:
            pid = self._free_id(node.producers, "publishers")
            node.producers[pid] = None  # reserve
        try:
            node.request(C.DeclarePublisher(0, pid, name or "", stream))
            seq = 0
            if name:
                seq = node.request(C.QueryPublisherSequence(0, name, stream)).sequence
            prod = Producer(node, stream, pid, name, seq + 1 if name else 0, batch_size,
                            max_unconfirmed)
            node.producers[pid] = prod
            return prod
        except BaseException:
            node.producers.pop(pid, None)
            raise

    def consumer(self, stream: str, offset: Any = "next", *, credit: int = 10,
                 name: str | None = None, single_active: bool = False,
                 properties: dict | None = None, on_update=None,
                 leader: bool = False) -> Consumer:
        """A :class:`~.consumer.Consumer` of ``stream`` from ``offset`` (``"first"``,
        ``"last"``, ``"next"``, an int offset, a ``datetime``, or an ``OffsetSpec``), on a
        connection to a replica (``leader=True``: the leader).

        ``credit``: chunks the broker may send ahead (1..65535); ``name``: the reference its
        offsets are stored under (``store_offset`` / ``query_offset``; also the group name of
        a single active consumer); ``single_active`` (RabbitMQ 3.11+): only one consumer of
        the group ``name`` receives, ``on_update(active: bool)`` is called (in the I/O
        thread) when that changes; ``properties``: more subscription properties
        (``filter.N``, ``match-unfiltered``, ``super-stream``...). Raises ValueError (a bad
        offset or credit), StreamDoesNotExist (0x02), StreamNotAvailable (0x06),
        AccessRefused (0x10)."""
        spec = offset_spec(offset)
        if not 1 <= int(credit) <= 0xFFFF:
            raise ValueError(f"credit must be 1..65535 chunks, got {credit}")
        props = {str(k): str(v) for k, v in (properties or {}).items()}
        if single_active:
            if not name:
                raise ValueError("a single active consumer needs a name (its group)")
            self._needs(Key.CONSUMER_UPDATE, "single_active")
            props["single-active-consumer"] = "true"
        if name:
            props.setdefault("name", name)
        node = self._node_for(self._placement(stream, leader=leader),
                              f"a consumer of {stream!r}")
        with self._lock:
            sid = self._free_id(node.consumers, "subscriptions")
            cons = Consumer(node, stream, sid, spec, int(credit), name, props, on_update)
            node.consumers[sid] = cons
        try:
            node.request(C.Subscribe(0, sid, stream, spec, int(credit), props))
        except BaseException:
            node.consumers.pop(sid, None)
            raise
        return cons

    # ------------------------------------------------------------------ lifecycle

    @property
    def nodes(self) -> list:
        """The open node connections (the locator first)."""
        with self._lock:
            return [n for n in self._nodes.values() if n.is_open]

    def close(self) -> None:
        """Close every producer, consumer and connection. Idempotent; never raises."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            nodes = list(self._nodes.values())
        for node in nodes:
            for p in list(node.producers.values()):
                if p is not None:
                    p.close(timeout=5.0)
            for c in list(node.consumers.values()):
                c.close()
            node.close()

    def __enter__(self) -> "StreamClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<StreamClient {self.params.redacted_uri()} nodes={len(self._nodes)}>"
