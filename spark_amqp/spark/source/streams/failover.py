"""Failover of stream mode's connections over a cluster's addresses: which errors mean "try
another node (or the same one a moment later)", the address order after a node answered that
it has no running replica, and the error a query fails with when no node serves it.

Used by the driver's probe (:mod:`.probe`, :mod:`.reader`) and the executors'
range reads (:mod:`.consumer`). A stream has the same offsets on every replica (RabbitMQ
docs "Streams": replication), so any node with a running replica serves any read.

RabbitMQ 3.10 answers ``basic.consume`` of a stream on a node whose replica is not running
with 506 RESOURCE_ERROR "does not have a running local replica" (a connection error: the
connection is closed), and on a node that holds no replica with 406 PRECONDITION_FAILED "does
not have a replica on the local node" (``rabbit_stream_queue:consume/3``; both seen here while
a stopped node's replicas restart, right after ``start_app``, and during a re-election). Such
a node is tried last on the next connect (:func:`connect_avoiding`): on a cluster with more
nodes than replicas, the nodes without one would otherwise be tried first again and again.
"""

from __future__ import annotations

import random
from typing import Any, Callable

__all__ = ["lost_connection", "replica_unavailable", "connect_avoiding", "address_of",
           "AddressErrors", "StreamBrokerUnreachable", "DEFAULT_PROBE_FAILOVER_TIMEOUT"]

#: seconds the driver's probe goes on failing (every trigger retrying every address) before
#: the query fails; the option failoverTimeout overrides (the queue mode's default too)
DEFAULT_PROBE_FAILOVER_TIMEOUT = 300.0


def replica_unavailable(e: BaseException) -> bool:
    """The node could not serve a consume of the stream: it answered that its replica is not
    running (506) or that it has none (406), or the consume crashed on it (541
    INTERNAL_ERROR, a connection exception: seen here answering a range read's
    ``basic.consume`` right after kill -9 of the stream's leader, during the re-election,
    RabbitMQ 3.10.8). Another node, or this one a moment later, serves the read; the
    callers' ``failoverTimeout`` bounds the retries, so a 541 that persists still fails."""
    from spark_amqp.protocol.errors import InternalError, PreconditionFailed, ResourceError

    if isinstance(e, InternalError):
        return True
    if not isinstance(e, (PreconditionFailed, ResourceError)):
        return False
    text = str(getattr(e, "reply_text", "") or e)
    return "local replica" in text or "replica on the local node" in text


def lost_connection(e: BaseException) -> bool:
    """A loss worth a reconnect: a lost socket or a refused connect (``OSError``, except a
    read timeout), the broker forcing the connection closed (320 CONNECTION_FORCED: a node
    shutting down), or :func:`replica_unavailable`."""
    from spark_amqp.protocol.errors import ConnectionForced

    if replica_unavailable(e):
        return True
    return (isinstance(e, OSError) and not isinstance(e, TimeoutError)) \
        or isinstance(e, ConnectionForced)


def address_of(conn: Any) -> str | None:
    """``host:port`` of the address an open connection uses, or None."""
    from spark_amqp.client.uri import format_address

    p = getattr(conn, "params", None)
    if p is None or not getattr(p, "host", None):
        return None
    return format_address(p.host, p.port)


def connect_avoiding(connect_fn: Callable, uri: str, kwargs: dict, avoid: set) -> Any:
    """``connect_fn(uri, **kwargs)`` with the addresses in ``avoid`` (``host:port``) tried
    after the others (each group shuffled unless ``shuffle_addresses`` is false). With no
    address to avoid, or a single address, the call is unchanged."""
    if not avoid:
        return connect_fn(uri, **kwargs)
    from spark_amqp.client.uri import format_address, parse_uri

    params = parse_uri(uri).replace(**kwargs)
    addrs = params.address_list()
    if len(addrs) < 2:
        return connect_fn(uri, **kwargs)
    good = [a for a in addrs if format_address(*a) not in avoid]
    bad = [a for a in addrs if format_address(*a) in avoid]
    if params.shuffle_addresses:
        random.shuffle(good)
        random.shuffle(bad)
    return connect_fn(uri, **{**kwargs, "addresses": tuple(good + bad),
                              "shuffle_addresses": False})


class AddressErrors:
    """The last error of every broker address (``{"host:port": text}``), for the error a
    query fails with."""

    def __init__(self, uri: str, kwargs: dict):
        from spark_amqp.client.uri import format_address, parse_uri

        try:
            params = parse_uri(uri).replace(**{k: v for k, v in kwargs.items()
                                               if k != "rpc_timeout"})
            self.addresses = [format_address(*a) for a in params.address_list()]
            self.redacted = params.redacted_uri(all_addresses=True)
        except Exception:  # noqa: BLE001 - validated at load(); never fail while failing
            self.addresses, self.redacted = [], "(the source's URI)"
        self.last: dict[str, str] = {}

    def record(self, e: BaseException, conn: Any = None) -> None:
        """Keep ``e`` as the last error of the address ``conn`` used, or of every address an
        ``AllAddressesFailed`` lists (or of the only address)."""
        from spark_amqp.client.uri import redact_uri

        per = getattr(e, "errors", None)
        if isinstance(per, dict) and per:
            for a, err in per.items():
                self.last[a] = redact_uri(f"{type(err).__name__}: {err}")
            return
        where = address_of(conn) if conn is not None else None
        if where is None and len(self.addresses) == 1:
            where = self.addresses[0]
        if where is not None:
            self.last[where] = redact_uri(f"{type(e).__name__}: {e}")

    def describe(self) -> str:
        """``h1:p1: <last error>; h2:p2: <last error>; ...`` over every address."""
        names = self.addresses + [a for a in self.last if a not in self.addresses]
        return "; ".join(f"{a}: {self.last.get(a, 'no error recorded')}" for a in names)


class StreamBrokerUnreachable(ConnectionError):
    """No broker address served the streams for ``failoverTimeout`` seconds: raised by the
    driver when its tail probes failed that long (the stream-mode query fails; the message
    lists every address and its last error), and by an executor's range read (the task fails;
    Spark may retry it). Nothing is lost: a stream keeps no consumer position; the restarted
    query resumes from its checkpoint and reads the same offsets."""
