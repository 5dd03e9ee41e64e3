"""Broker configuration: users, vhosts, permissions and limits, read from TOML.

File format (``conf/broker.toml``; parsed with :mod:`tomllib`, or ``tomli`` on Python 3.10)::

    [broker]
    data_dir = "var/broker"            # optional; None/absent = in memory
    frame_max = 131072                 # bytes, framing included (RabbitMQ's default)
    channel_max = 2047                 # RabbitMQ's default
    heartbeat = 60                     # seconds offered in connection.tune (0 = off)
    memory_high_watermark = 1073741824 # bytes of message bodies held before connection.blocked
    max_message_size = 134217728       # bytes (RabbitMQ 3.10 default 128 MiB)
    max_connections = 0                # 0 = unlimited

    [[users]]
    name = "guest"
    password = "guest"
    tags = ["administrator"]

    [[vhosts]]
    name = "/"

    [[permissions]]                    # regexes as RabbitMQ's set_permissions
    user = "guest"
    vhost = "/"
    configure = ".*"
    write = ".*"
    read = ".*"

Without a file the broker has user guest/guest with full permissions on vhost ``/``
(RabbitMQ's defaults).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BrokerConfig", "User", "Permission", "load_config", "ConfigError"]


class ConfigError(ValueError):
    """A configuration file that cannot be read or has invalid values (message says which)."""


@dataclass
class User:
    name: str
    password: str
    tags: list[str] = field(default_factory=list)


@dataclass
class Permission:
    """RabbitMQ-style permission regexes for one user on one vhost."""

    configure: str = ".*"
    write: str = ".*"
    read: str = ".*"

    def allows(self, kind: str, name: str) -> bool:
        """``kind`` is "configure", "write" or "read"; RabbitMQ matches with an anchored regex
        (``^(...)$`` semantics of ``re:run``; the empty string denies everything)."""
        pattern = getattr(self, kind)
        if pattern == "":
            return False
        return re.match(pattern, name) is not None


@dataclass
class BrokerConfig:
    """Everything the broker reads from its config file (see the module docstring)."""

    users: dict[str, User] = field(default_factory=lambda: {"guest": User("guest", "guest", ["administrator"])})
    vhosts: list[str] = field(default_factory=lambda: ["/"])
    permissions: dict[tuple[str, str], Permission] = field(
        default_factory=lambda: {("guest", "/"): Permission()})
    data_dir: str | None = None
    frame_max: int = 131072
    channel_max: int = 2047
    heartbeat: int = 60
    memory_high_watermark: int = 1 << 30
    max_message_size: int = 128 * 1024 * 1024
    max_connections: int = 0
    write_buffer_limit: int = 4 * 1024 * 1024

    def permission(self, user: str, vhost: str) -> Permission | None:
        return self.permissions.get((user, vhost))


def _toml_load(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"broker config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"broker config file {path} is not valid TOML: {exc}") from None


_INT_KEYS = ("frame_max", "channel_max", "heartbeat", "memory_high_watermark",
             "max_message_size", "max_connections", "write_buffer_limit")


def load_config(path: str | Path | None = None, **overrides: Any) -> BrokerConfig:
    """Read a broker config from ``path`` (TOML; None = defaults) and apply ``overrides``.

    Raises :class:`ConfigError` naming the file and the offending key.
    """
    cfg = BrokerConfig()
    if path is not None:
        data = _toml_load(Path(path))
        b = data.get("broker", {})
        for key in _INT_KEYS:
            if key in b:
                v = b[key]
                if not isinstance(v, int) or v < 0:
                    raise ConfigError(f"{path}: [broker] {key} must be a non-negative integer, got {v!r}")
                setattr(cfg, key, v)
        if "data_dir" in b:
            cfg.data_dir = str(b["data_dir"]) or None
        if cfg.frame_max and cfg.frame_max < 4096:
            raise ConfigError(f"{path}: [broker] frame_max must be >= 4096 (AMQP frame-min-size), got {cfg.frame_max}")
        if "users" in data:
            cfg.users = {}
            for u in data["users"]:
                if "name" not in u or "password" not in u:
                    raise ConfigError(f"{path}: every [[users]] entry needs name and password")
                cfg.users[u["name"]] = User(u["name"], str(u["password"]), list(u.get("tags", [])))
        if "vhosts" in data:
            cfg.vhosts = [v["name"] if isinstance(v, dict) else str(v) for v in data["vhosts"]]
        if "permissions" in data:
            cfg.permissions = {}
            for p in data["permissions"]:
                if "user" not in p or "vhost" not in p:
                    raise ConfigError(f"{path}: every [[permissions]] entry needs user and vhost")
                perm = Permission(p.get("configure", ".*"), p.get("write", ".*"), p.get("read", ".*"))
                for kind in ("configure", "write", "read"):
                    try:
                        re.compile(getattr(perm, kind))
                    except re.error as exc:
                        raise ConfigError(f"{path}: permission {kind} regex for {p['user']}@{p['vhost']} is invalid: {exc}") from None
                cfg.permissions[(p["user"], p["vhost"])] = perm
    for k, v in overrides.items():
        if v is not None:
            setattr(cfg, k, v)
    return cfg
