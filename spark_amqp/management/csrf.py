"""Cross-site request forgery guard for the API's writes (issue 33, row 6).

The API authenticates with HTTP basic auth, which a browser that has logged in once (the
401's ``WWW-Authenticate`` invites it) sends with *every* request to the API's origin, also
one that a page on another site makes. A page cannot read the answer, but it can make a
write: a ``<form enctype="text/plain">`` that posts ``{"users": [...]}`` to
``/api/definitions`` creates an administrator. RabbitMQ 3.10's plugin takes such a request
(it does not look at ``Content-Type`` or ``Origin``; its ``Content-Security-Policy`` header
guards its own page, not its API).

What a write (any method but GET, HEAD, OPTIONS) must satisfy here, stricter than RabbitMQ:

1. a body is JSON *labelled* as such, ``Content-Type: application/json`` (charset and other
   parameters allowed): anything else is 415 ``unsupported_media_type``. A cross-site form
   can only send ``text/plain``, ``application/x-www-form-urlencoded`` or
   ``multipart/form-data``, and a cross-site ``fetch`` that sets ``application/json`` needs a
   CORS preflight, which this server never grants. A write without a body (DELETE) needs no
   ``Content-Type``; one that has a non-JSON ``Content-Type`` is refused all the same (a form
   with no fields sends one).
2. an ``Origin`` header, when present, names the ``Host`` the request was sent to (the
   scheme is not compared, so that a TLS reverse proxy that passes ``Host`` on works): else
   403 ``forbidden``. Browsers send ``Origin`` with
   every cross-origin write (and ``null`` from sandboxed frames and ``data:`` pages, refused
   too); command-line clients (rabbitmqadmin, curl, the project's tests) send none.

rabbitmqadmin (``Content-Type: application/json`` with every body, no ``Origin``), the web
page (same origin, JSON) and ``curl -H 'content-type: application/json'`` (as RabbitMQ's
docs show every write) pass unchanged. ``curl -d`` without that header, which RabbitMQ
accepts, is refused with a reason saying what to add.
"""

from __future__ import annotations

from typing import Mapping

from .http import ApiError

__all__ = ["SAFE_METHODS", "check_write_request"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _netloc(origin: str) -> str | None:
    """``host[:port]`` of an ``Origin`` value (``"null"`` and junk give ``None``)."""
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in ("http", "https") or not rest or "/" in rest:
        return None
    return rest


def check_write_request(method: str, headers: Mapping[str, str], body: bytes, scheme: str,
                        host: str | None) -> None:
    """Refuse a write that a page on another site could have made.

    Args:
        method: the HTTP method (upper case).
        headers: the request headers (case-insensitive mapping).
        body: the request body as received.
        scheme: ``"http"`` or ``"https"``, as the request came in.
        host: the request's ``Host`` header (``"127.0.0.1:15672"``).

    Raises :class:`~.http.ApiError` 403 ``forbidden`` (foreign ``Origin``) or 415
    ``unsupported_media_type`` (a body or content type that is not JSON).
    """
    if method in SAFE_METHODS:
        return
    origin = headers.get("Origin")
    if origin is not None and (host is None or _netloc(origin) != host.lower()):
        raise ApiError(403, "forbidden",
                       f"cross-origin request refused: Origin {origin} is not this API's origin "
                       f"{scheme}://{host}; writes are only taken from the API's own web page or from "
                       f"clients that send no Origin header (behind a reverse proxy, pass the Host "
                       f"header on: nginx proxy_set_header Host $host)")
    ctype = headers.get("Content-Type")
    mime = ctype.split(";", 1)[0].strip().lower() if ctype is not None else None
    if (body.strip() or ctype is not None) and mime != "application/json":
        raise ApiError(415, "unsupported_media_type",
                       f"a {method} request's body must be JSON sent with 'Content-Type: application/json' "
                       f"(got {ctype or 'no Content-Type'}); with curl add -H 'content-type: application/json'")
