"""Checks of a request's headers before any route runs: malformed input is 4xx, never 500
(issue 41).

- **Authorization**: more than one ``Authorization`` header, or one with a byte outside ASCII
  (HTTP basic credentials are base64), is 400 ``bad_request``, as RabbitMQ 3.10.8 answers
  both (with an empty body; here a short JSON reason). Before: the first of two headers was
  used, and a non-ASCII byte raised a 500 with ~1.9 KB of traceback in the log.
- **Host** (DNS rebinding): a page on a name that its owner makes resolve to this machine is
  same-origin for the browser, so the ``Origin`` check of :mod:`.csrf` passes, and the page
  can send guest/guest itself. A request whose ``Host`` names neither an IP address of loopback
  or of the listener's own address, nor ``localhost``, this machine's name or a name in
  ``[management] allowed_hosts``, is 403 ``forbidden``. RabbitMQ does not check ``Host``; a
  reverse proxy that passes its own name on needs it in ``allowed_hosts``. A request without
  ``Host`` (HTTP/1.0 clients) passes; browsers always send one. ``/metrics`` (no login,
  aggregated figures) is not checked, so scrapers may use any name.

Each refusal is logged in one line, at most one per kind every 10 s
(:class:`~spark_amqp.broker.log_limit.RateLimitedLog`).
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Iterable

from .http import ApiError

__all__ = ["check_authorization_header", "HostCheck"]


def check_authorization_header(values: list[str]) -> None:
    """``values``: every ``Authorization`` header of the request. Raises :class:`ApiError`
    400 for more than one, or for one that is not ASCII."""
    if len(values) > 1:
        raise ApiError(400, "bad_request", f"{len(values)} Authorization headers; send one")
    if values and not values[0].isascii():
        raise ApiError(400, "bad_request", "the Authorization header holds a byte outside ASCII "
                                           "(HTTP basic credentials are base64 of user:password)")


def _host_name(host: str) -> str:
    """The name or address part of a ``Host`` value, lower case, without port or brackets."""
    h = host.strip().lower()
    if h.startswith("["):
        end = h.find("]")
        return h[1:end] if end > 0 else h
    if h.count(":") == 1:
        h = h.split(":", 1)[0]
    return h.rstrip(".")


class HostCheck:
    """The ``Host`` rule of one listener (see the module docstring).

    Args:
        listen_host: the address or name the listener was started on.
        allowed: extra names (``[management] allowed_hosts``).
    """

    def __init__(self, listen_host: str, allowed: Iterable[str] = ()):
        names = {"localhost", socket.gethostname().lower()}
        names.update(a.lower().rstrip(".") for a in allowed)
        try:
            ipaddress.ip_address(listen_host)
        except ValueError:
            if listen_host:
                names.add(listen_host.lower())
        self.names = frozenset(n for n in names if n)

    def check(self, host: str | None, local_address: str | None) -> None:
        """Raises :class:`ApiError` 403 when ``host`` (the ``Host`` header) names something
        else than this listener; ``local_address`` is the address the request came in on."""
        if host is None:
            return
        name = _host_name(host)
        try:
            ip = ipaddress.ip_address(name)
        except ValueError:
            if name in self.names or name.endswith(".localhost"):
                return
        else:
            if ip.is_loopback or (local_address is not None and _same_ip(ip, local_address)):
                return
        raise ApiError(403, "forbidden",
                       f"Host {host!r} is not a name of this server: requests must name it by an IP "
                       f"address it listens on, localhost or its host name; add other names (a "
                       f"reverse proxy's) to [management] allowed_hosts in broker.toml")


def _same_ip(ip, local: str) -> bool:
    try:
        other = ipaddress.ip_address(local.split("%", 1)[0])
    except ValueError:
        return False
    if getattr(other, "ipv4_mapped", None) is not None:
        other = other.ipv4_mapped
    return ip == other
