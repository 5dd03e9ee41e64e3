"""The stream-protocol listener's settings (``[stream]`` in broker.toml; RabbitMQ's names).

RabbitMQ's ``rabbitmq_stream`` plugin reads ``stream.listeners.tcp.1 = 5552``,
``stream.listeners.ssl.1 = 5551``, ``stream.advertised_host``, ``stream.advertised_port``,
``stream.frame_max`` and ``stream.heartbeat`` (https://www.rabbitmq.com/docs/stream,
``deps/rabbitmq_stream/priv/schema/rabbitmq_stream.schema``). broker.toml takes the same keys
in a ``[stream]`` table::

    [stream]
    listeners.tcp.1 = 5552             # the stream port (absent: no stream listener)
    listeners.ssl.1 = 5551             # TLS stream port, with the [tls] section's certificate
    advertised_host = "broker.example" # what metadata and open answer (default: the host
    advertised_port = 5552             # the client connected to / the listener's port)
    frame_max = 1048576                # bytes offered in tune (RabbitMQ's default, 1 MiB)
    heartbeat = 60                     # seconds offered in tune (0 = none)

``spark-amqp broker --stream-port`` and ``EmbeddedBroker(stream_port=...)`` override the TCP
port (0 = any free port).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["StreamConfig", "stream_from_toml", "DEFAULT_STREAM_PORT", "DEFAULT_STREAM_TLS_PORT"]

DEFAULT_STREAM_PORT = 5552
DEFAULT_STREAM_TLS_PORT = 5551


@dataclass
class StreamConfig:
    """The stream listener: ``port`` (None: no listener; 0: a free port), ``tls_port`` (None:
    no TLS stream listener), ``advertised_host`` / ``advertised_port`` (None: the address the
    client connected to and the listener's port), ``frame_max`` (bytes), ``heartbeat``
    (seconds)."""

    port: int | None = None
    tls_port: int | None = None
    advertised_host: str | None = None
    advertised_port: int | None = None
    frame_max: int = 1048576
    heartbeat: int = 60


def _flat(d: dict, prefix: str = "") -> dict:
    out: dict = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


def stream_from_toml(path: str | Path, section: Any, error) -> StreamConfig:
    """The :class:`StreamConfig` of a ``[stream]`` table; raises ``error`` (the config's
    exception class) naming the file and the key."""
    if not isinstance(section, dict):
        raise error(f"{path}: [stream] must be a table")
    flat = _flat(section)
    known = {"listeners.tcp.1", "listeners.ssl.1", "advertised_host", "advertised_port", "frame_max", "heartbeat"}
    unknown = sorted(set(flat) - known)
    if unknown:
        raise error(f"{path}: unknown [stream] key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    out = StreamConfig()
    for key, attr in (("listeners.tcp.1", "port"), ("listeners.ssl.1", "tls_port"),
                      ("advertised_port", "advertised_port")):
        if key in flat:
            v = flat[key]
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 65535:
                raise error(f"{path}: [stream] {key} must be a port number 0-65535, got {v!r}")
            setattr(out, attr, v)
    if "advertised_host" in flat:
        v = flat["advertised_host"]
        if not isinstance(v, str) or not v:
            raise error(f"{path}: [stream] advertised_host must be a host name, got {v!r}")
        out.advertised_host = v
    for key in ("frame_max", "heartbeat"):
        if key in flat:
            v = flat[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise error(f"{path}: [stream] {key} must be a non-negative integer, got {v!r}")
            setattr(out, key, v)
    if out.frame_max and out.frame_max < 8192:
        raise error(f"{path}: [stream] frame_max must be 0 or at least 8192 bytes, got {out.frame_max}")
    return out
