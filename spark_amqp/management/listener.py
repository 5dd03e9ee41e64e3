"""The management API's TCP listener: aiohttp's site behind the broker's listener guard.

What a client that holds a socket open without finishing a request meets (issue 41; RabbitMQ
3.10.8's cowboy listener measured on this machine: an idle socket closed after 5 s, a
half-sent request answered 408 after 5 s, a body that stops arriving dropped after 60 s):

- ``[management] tcp.request_timeout`` (5 s): the first request's line and headers must
  arrive within it (the guard's handshake deadline: 408 and close if some bytes came, close if
  none), and a connection idle between requests is closed after it (aiohttp's
  ``keepalive_timeout``, which also closes a half-sent later request);
- ``tcp.idle_timeout`` (60 s): a request body that sends nothing for that long is answered 408
  (:mod:`.bodies`), and a response the client does not read for that long (the socket's send
  buffer stays full) ends the connection;
- ``max_connections`` (1024, ranch's default; at most half of the descriptors the process may
  open, so the AMQP port keeps the rest): beyond it the oldest socket that has not sent a
  request yet is closed, or, when there is none, the new one is answered 503 and closed;
- request lines and header fields longer than 8190 bytes or more than 128 headers: 400 from
  aiohttp's parser (its defaults, cowboy's are similar).

Source: https://ninenines.eu/docs/en/cowboy/2.9/manual/cowboy_http/ (request_timeout,
idle_timeout), RabbitMQ ``rabbitmq_management.schema`` (``management.tcp.*``).
"""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

__all__ = ["GuardedSite", "http_guard", "handler_args"]


def _answer(status: str, reason: str, extra: str = "") -> bytes:
    body = json.dumps({"error": status.split(" ", 1)[1].lower().replace(" ", "_"), "reason": reason}).encode()
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Cache-Control: no-cache\r\nConnection: close\r\n{extra}\r\n").encode() + body


_REFUSED = _answer("503 Service Unavailable", "too many connections to the management API; retry later",
                   "Retry-After: 5\r\n")
_TIMEOUT = _answer("408 Request Timeout", "the request line and headers did not arrive in time "
                                          "(management tcp.request_timeout)")


def _refuse(transport) -> None:
    transport.write(_REFUSED)
    transport.close()


def _timed_out(transport, received: int) -> None:
    if received:
        transport.write(_TIMEOUT)
        transport.close()
    else:   # nothing said: closed without an answer, as cowboy does
        transport.abort()


def http_guard(broker):
    """The :class:`~spark_amqp.broker.listener_guard.ListenerGuard` of the management listener
    of ``broker`` (limits from ``broker.config.management``)."""
    limits = broker.config.management
    guards = broker.guards
    cap = limits.max_connections
    if guards.nofile:   # leave the AMQP port at least half of what the process may open
        half = max(1, (guards.nofile - guards.reserve) // 2)
        cap = min(cap, half) if cap else half
    return guards.listener("http", max_connections=cap, handshake_timeout=limits.request_timeout / 1000.0,
                           timeout_setting="[management] tcp.request_timeout",
                           max_setting="[management] max_connections",
                           write_timeout=limits.idle_timeout / 1000.0,
                           on_handshake_timeout=_timed_out, refuse=_refuse)


def handler_args(broker) -> dict:
    """aiohttp ``RequestHandler`` settings (``AppRunner(**kwargs)``): idle keep-alive closed
    after ``request_timeout``, a little later than the guard's own deadline, so that a first
    request that is late gets the guard's 408 rather than aiohttp's silent close; the unread
    rest of a refused body (401, 413, ...) drained for at most 1 s before the socket is closed
    (cowboy's ``linger_timeout``; aiohttp's default is 10 s of reading what we do not want)."""
    return {"keepalive_timeout": broker.config.management.request_timeout / 1000.0 + 0.5,
            "lingering_time": 1.0}


class GuardedSite(web.TCPSite):
    """aiohttp's ``TCPSite`` whose sockets go through ``guard`` (a
    :class:`~spark_amqp.broker.listener_guard.ListenerGuard`) before aiohttp sees them."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, guard, **kw):
        super().__init__(runner, host, port, **kw)
        self._guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._guard.protocol_factory(server), self._host, self._port,
            backlog=self._backlog, reuse_address=self._reuse_address)
        if hasattr(self, "_bound_port"):   # aiohttp >= 3.10 names the site by it
            self._bound_port = self._server.sockets[0].getsockname()[1] if self._server.sockets else self._port
