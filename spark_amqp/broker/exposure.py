"""Warnings for a broker that listens beyond loopback with unsafe settings.

RabbitMQ ships guest/guest and, since 3.3, refuses it on anything but loopback
(``loopback_users``, https://www.rabbitmq.com/docs/access-control#loopback-users). This broker
does the same (:func:`.auth.check_loopback`) and, when a listener is bound to a non-loopback
address (``--host 0.0.0.0``, an interface address), says what is still unsafe:

- a user whose password is its own name (guest/guest, the default) and that is *not* in
  ``loopback_users``: anyone who reaches the port can log in as it;
- such a user that *is* in ``loopback_users``: harmless remotely, but remote clients then
  need a user of their own;
- a plain (non-TLS) listener: passwords and messages cross the network unencrypted.

Each warning names what to change (``password_hash`` via ``spark-amqp broker hash-password``,
``loopback_users``, ``[tls]``).
"""

from __future__ import annotations

import ipaddress

from .auth import is_loopback
from .config import BrokerConfig

__all__ = ["exposure_warnings", "is_exposed"]


def is_exposed(address: str) -> bool:
    """True when a listener bound to ``address`` (IP literal; ``0.0.0.0`` / ``::`` / ``""`` =
    every interface) accepts connections from other hosts, i.e. it is not a loopback address."""
    if address in ("", "localhost"):
        return address == ""
    try:
        ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return True  # a host name: assume it resolves to a reachable interface
    return not is_loopback(address)


def exposure_warnings(config: BrokerConfig, address: str, port: int, tls: bool = False) -> list[str]:
    """The warnings (one line each; empty list if none) for a listener on ``address:port``.

    Args:
        config: the broker's users, ``loopback_users`` and TLS settings.
        address: the bound address (``"0.0.0.0"``, ``"192.0.2.2"``, ``"::"``, ...).
        port: the bound TCP port (for the message).
        tls: True for the amqps listener (no clear-text warning).
    """
    if not is_exposed(address):
        return []
    where = f"{address}:{port}" if ":" not in address else f"[{address}]:{port}"
    out = []
    for u in config.users.values():
        if not u.check_password(u.name):
            continue
        tags = f" (tags: {', '.join(u.tags)})" if u.tags else ""
        if u.name in config.loopback_users:
            out.append(f"listening on {where}, a non-loopback address: user '{u.name}'{tags} still has "
                       f"the default password '{u.name}'; it is in loopback_users, so it can only log in "
                       f"via localhost. Remote clients need a user of their own: add a [[users]] entry "
                       f"with a password_hash (spark-amqp broker hash-password) and [[permissions]] for it")
        else:
            out.append(f"listening on {where}, a non-loopback address: user '{u.name}'{tags} still has "
                       f"the default password '{u.name}' and is not in loopback_users: anyone who can reach "
                       f"this port can log in as '{u.name}'. Give it a strong password_hash (spark-amqp "
                       f"broker hash-password), add it to [broker] loopback_users, or remove it")
    if not tls:
        out.append(f"listening on {where}, a non-loopback address, without TLS: passwords and messages "
                   f"cross the network in clear text. Add a [tls] listener (or --tls-cert/--tls-key) for "
                   f"remote clients and keep this port on loopback or behind a firewall")
    return out
