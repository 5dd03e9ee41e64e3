"""``rabbitmq-stream://`` URIs and the stream-protocol client's parameters.

Syntax: the AMQP URI's (:mod:`spark_amqp.client.uri`, RabbitMQ's URI spec) with the schemes the
RabbitMQ stream clients use::

    rabbitmq-stream[+tls]://[user[:password]@]host[:port][,host[:port]...][/vhost][?key=value&...]

- ``rabbitmq-stream`` (port 5552) or ``rabbitmq-stream+tls`` (TLS, port 5551; the same TLS
  query parameters as ``amqps://``: ``cacertfile``, ``certfile``, ``keyfile``, ``verify``,
  ``server_name_indication``);
- several addresses (the nodes of a cluster) as in AMQP URIs: tried in a new random order per
  connection (``shuffle_addresses``), for ``failover_timeout`` milliseconds;
- ``heartbeat`` (seconds; absent: the server's 60), ``frame_max`` (bytes; default 1 MiB, as
  RabbitMQ's), ``connection_timeout`` (ms), ``auth_mechanism`` (``plain`` | ``external``);
- stream-only: ``load_balancer=true`` (every connection dials the URI's addresses and is kept
  only when it lands on the node wanted; see :class:`StreamParameters`).

The stream protocol names no vhost default: the default vhost ``/`` is ``/%2F`` (or no path).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar

from ..uri import ConnectionParameters, parse_bool, parse_uri_as

__all__ = ["StreamParameters", "parse_stream_uri", "DEFAULT_STREAM_URI"]

DEFAULT_STREAM_URI = "rabbitmq-stream://guest:guest@127.0.0.1:5552/%2F"


@dataclasses.dataclass
class StreamParameters(ConnectionParameters):
    """Everything the stream-protocol client needs (build it with :func:`parse_stream_uri`).

    The attributes of :class:`~spark_amqp.client.uri.ConnectionParameters` (host, port, tls,
    username, password, vhost, heartbeat, frame_max, connection_timeout, auth_mechanisms, the
    TLS files, ssl_context, client_properties, rpc_timeout, addresses, shuffle_addresses,
    failover_timeout; ``channel_max`` and ``max_body_size`` are not used), with these defaults
    and additions:

    - ``port`` 5552 (5551 with TLS); ``frame_max`` 1,048,576 bytes (RabbitMQ's default);
      ``rpc_timeout`` 30 seconds (how long a request waits for its response before the
      connection is dropped with ``ConnectionLost``; None: as long as the connection lives);
    - ``address_resolver``: ``callable(host, port) -> (host, port)`` applied to every node
      address the broker *advertises* (metadata, ``open``) before it is dialled: for brokers
      behind NAT, in containers or behind a load balancer, whose advertised host/port
      (RabbitMQ's ``stream.advertised_host``/``advertised_port``) the client cannot reach;
      None: dial the advertised address;
    - ``load_balancer`` (bool, URI ``load_balancer=true``): every node connection dials the
      URI's addresses (a load balancer in front of the cluster) and is kept only if the node it
      reached advertises the address wanted (the leader for a producer, a replica for a
      consumer), trying up to ``load_balancer_attempts`` times (the Java client's
      load-balancer mode);
    - ``max_receive_size`` (bytes, default 256 MiB): the largest frame accepted (a chunk may
      be larger than ``frame_max``); ``verify_crc`` (default True): check every chunk's CRC-32.
    """

    SCHEMES: ClassVar[tuple] = ("rabbitmq-stream", "rabbitmq-stream+tls")
    DEFAULT_PORTS: ClassVar[tuple] = (5552, 5551)
    MECHANISMS: ClassVar[tuple] = ("PLAIN", "EXTERNAL")

    port: int = 5552
    frame_max: int = 1048576
    rpc_timeout: float | None = 30.0
    address_resolver: Callable[[str, int], tuple] | None = None
    load_balancer: bool = False
    load_balancer_attempts: int = 10
    max_receive_size: int = 256 * 1024 * 1024
    verify_crc: bool = True

    def validate(self) -> None:
        super().validate()
        if self.address_resolver is not None and not callable(self.address_resolver):
            raise ValueError("address_resolver must be a callable (host, port) -> (host, port)")
        if int(self.load_balancer_attempts) < 1:
            raise ValueError(f"load_balancer_attempts must be >= 1, got {self.load_balancer_attempts}")
        if int(self.max_receive_size) < 4096:
            raise ValueError(f"max_receive_size must be >= 4096 bytes, got {self.max_receive_size}")

    def resolve(self, host: str, port: int) -> tuple:
        """The address to dial for a node that advertises ``host:port``."""
        if self.address_resolver is None:
            return host, int(port)
        h, p = self.address_resolver(host, int(port))
        return str(h), int(p)


def _bool(value: str) -> bool:
    return parse_bool("load_balancer", value, "rabbitmq-stream URI")


def parse_stream_uri(uri: str | None = None, **overrides: Any) -> StreamParameters:
    """Parse a ``rabbitmq-stream://`` or ``rabbitmq-stream+tls://`` URI (module docstring)
    into :class:`StreamParameters`; ``overrides`` (attribute names) win over the URI.

    Raises ``ValueError`` for another scheme, a bad address/port/number, or an unknown query
    parameter (naming it); ``TypeError`` for an unknown override."""
    return parse_uri_as(StreamParameters, DEFAULT_STREAM_URI if uri is None else uri,
                        {"load_balancer": _bool}, **overrides)
