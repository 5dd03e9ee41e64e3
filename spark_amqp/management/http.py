"""The pieces every route shares: the request context, JSON answers and RabbitMQ's errors.

Errors are JSON ``{"error": ..., "reason": ...}`` with RabbitMQ's status codes: 400
``bad_request`` (bad JSON, inequivalent declare, precondition), 401 (login, tags,
permissions), 404 ``Object Not Found`` / ``not_found``, 405 (method; empty body with
``Allow``). AMQP errors raised by the broker core map to these by reply code.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ..protocol.errors import AccessRefused, AMQPError, NotFound
from .auth import AuthError

__all__ = ["ApiError", "Created", "Ctx", "NoContent", "NOT_FOUND", "amqp_to_api_error", "channel_error", "parse_bool",
           "parse_int", "json_body"]


class Created:
    """201, optionally with a Location header (a binding's properties key)."""

    def __init__(self, location: str | None = None):
        self.location = location


class NoContent:
    """204."""



class ApiError(Exception):
    """An HTTP error answer: ``status``, ``error``, ``reason`` (and extra headers)."""

    def __init__(self, status: int, error: str, reason: str, headers: dict | None = None):
        super().__init__(f"{status} {error}: {reason}")
        self.status = status
        self.error = error
        self.reason = reason
        self.headers = headers or {}


def NOT_FOUND() -> ApiError:
    return ApiError(404, "Object Not Found", "Not Found")


def amqp_to_api_error(exc: AMQPError) -> ApiError:
    """RabbitMQ's HTTP answer to an AMQP error of the same operation: 404 not_found, 401
    not_authorised (access refused), else 400 bad_request with the reply text."""
    if isinstance(exc, NotFound):
        return ApiError(404, "not_found", exc.reply_text)
    if isinstance(exc, AccessRefused):
        return ApiError(401, "not_authorised", "Access refused.")
    return ApiError(400, "bad_request", exc.reply_text)


def channel_error(exc: AMQPError) -> ApiError:
    """RabbitMQ's answer to an AMQP error of a route its plugin runs over an AMQP channel
    (publish, get): 400 ``bad_request`` with the channel's close text "CODE NAME - text"."""
    text = exc.reply_text
    if not text.startswith(exc.name):
        text = f"{exc.name} - {text}"
    return ApiError(400, "bad_request", f"{exc.reply_code} {text}")


def auth_error(exc: AuthError) -> ApiError:
    return ApiError(401, exc.error, exc.reason,
                    {"WWW-Authenticate": 'Basic realm="RabbitMQ Management"'} if exc.error == "not_authorized" else {})


def parse_bool(v: Any, key: str, default: bool = False) -> bool:
    """A boolean body field as RabbitMQ reads it: JSON true/false or "true"/"false"."""
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise ApiError(400, "bad_request", f"{key} must be true or false, got {json.dumps(v)}")


def parse_int(v: Any, key: str, default: int | None = None) -> int:
    """An integer body field: a JSON number or a decimal string (rabbitmqadmin sends strings)."""
    if v is None:
        if default is None:
            raise ApiError(400, "bad_request", f"[{{key_missing,{key}}}]")
        return default
    if isinstance(v, bool):
        raise ApiError(400, "bad_request", f"{key} must be an integer, got {json.dumps(v)}")
    try:
        return int(v)
    except (TypeError, ValueError):
        raise ApiError(400, "bad_request", f"{key} must be an integer, got {json.dumps(v)}") from None


def json_body(raw: bytes) -> dict:
    """The request body as a JSON object; ``{}`` for an empty body; 400 ``not_json``."""
    if not raw.strip():
        return {}
    try:
        v = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "bad_request", "not_json") from None
    if not isinstance(v, dict):
        raise ApiError(400, "bad_request", "not_json")
    return v


class Ctx:
    """One request as routes see it: the broker, the rate sampler, the authenticated user,
    the query parameters and the body (parsed lazily)."""

    def __init__(self, server, principal, query: Mapping[str, str], raw_body: bytes, method: str,
                 parsed: Any = None):
        self.server = server
        self.broker = server.broker
        self.sampler = server.sampler
        self.user = principal
        self.query = query
        self.raw_body = raw_body
        self.method = method
        self._parsed = parsed   # the body's JSON value, parsed with limits (bodies.py); None: not yet
        self._body: dict | None = None

    @property
    def body(self) -> dict:
        """The body as a JSON object (``{}`` when empty); 400 ``not_json`` otherwise."""
        if self._body is None:
            if self._parsed is None:
                self._body = json_body(self.raw_body)
            elif isinstance(self._parsed, dict):
                self._body = self._parsed
            else:
                raise ApiError(400, "bad_request", "not_json")
        return self._body

    def vhost(self, name: str):
        """The VHost ``name``, 404 when missing or invisible to the user."""
        v = self.broker.vhosts.get(name)
        if v is None or not self.user.can_see_vhost(name):
            raise NOT_FOUND()
        return v

    def visible_vhosts(self):
        return [v for n, v in self.broker.vhosts.items() if self.user.can_see_vhost(n)]
