"""HTTP basic authentication and RabbitMQ's management user tags.

Rules (RabbitMQ docs "Management Plugin", section "Permissions"; ``rabbit_mgmt_util``):

- every ``/api`` request needs HTTP basic credentials of a configured broker user; missing or
  wrong ones get 401 ``{"error": "not_authorized", "reason": "Login failed"}`` with
  ``WWW-Authenticate: Basic realm="RabbitMQ Management"``;
- the user needs one of the tags ``management``, ``policymaker``, ``monitoring`` or
  ``administrator``; else 401 ``"Not management user"``;
- ``management`` / ``policymaker`` users see and act on the vhosts they have permissions
  on; ``monitoring`` users see every vhost; ``administrator`` users also list users and
  permissions and may act on every vhost they have permissions on;
- acting on an object needs the AMQP permission RabbitMQ checks for the same operation
  (configure to declare/delete, write to publish, read to get/purge), else 401
  ``not_authorised``.
"""

from __future__ import annotations

import base64
import binascii

from ..broker.auth import AuthFailure, check_credentials, check_loopback
from ..broker.rules import check_permission
from ..protocol.errors import AccessRefused

__all__ = ["Principal", "authenticate_header", "AuthError", "MANAGEMENT_TAGS"]

MANAGEMENT_TAGS = ("management", "policymaker", "monitoring", "administrator")


class AuthError(Exception):
    """401: ``error`` and ``reason`` as RabbitMQ's JSON answer."""

    def __init__(self, error: str, reason: str):
        super().__init__(reason)
        self.error = error
        self.reason = reason


class Principal:
    """An authenticated management user: ``name``, ``tags`` and what they may see and do."""

    def __init__(self, config, name: str, tags: list[str]):
        self.config = config
        self.name = name
        self.tags = list(tags)

    @property
    def is_admin(self) -> bool:
        return "administrator" in self.tags

    @property
    def is_monitor(self) -> bool:
        return self.is_admin or "monitoring" in self.tags

    def can_see_vhost(self, vhost: str) -> bool:
        """Objects of ``vhost`` appear in lists for this user."""
        return self.is_monitor or self.config.permission(self.name, vhost) is not None

    def require_admin(self) -> None:
        if not self.is_admin:
            raise AuthError("not_authorised", "Not administrator user")

    def require_monitor(self) -> None:
        if not self.is_monitor:
            raise AuthError("not_authorised", "Not monitor user")

    def permission(self, vhost: str):
        """This user's :class:`~spark_amqp.broker.config.Permission` on ``vhost`` or ``None``
        (what :mod:`spark_amqp.broker.rules` checks)."""
        return self.config.permission(self.name, vhost)

    def require(self, vhost: str, kind: str | None = None, name: str | None = None,
                what: str = "queue") -> None:
        """Access to ``vhost`` (any permission entry), and the ``kind`` permission
        ("configure"/"write"/"read") on resource ``what`` ``name`` when given
        (:func:`spark_amqp.broker.rules.check_permission`, the AMQP port's rule); raises
        AuthError "Access refused." (RabbitMQ's 401)."""
        perm = self.config.permission(self.name, vhost)
        if perm is None:
            raise AuthError("not_authorised", "Access refused.")
        if kind is not None:
            try:
                check_permission(perm, self.name, vhost, kind, what, name or "")
            except AccessRefused:
                raise AuthError("not_authorised", "Access refused.") from None


def authenticate_header(config, header: str | None, local_address: str | None) -> Principal:
    """Check an ``Authorization: Basic ...`` header against ``config.users`` with the same
    rules as an AMQP login (:func:`spark_amqp.broker.auth.check_credentials`: blank passwords
    refused; :func:`~spark_amqp.broker.auth.check_loopback`: a ``loopback_users`` user only on
    a request whose *local* address, ``local_address``, is loopback); returns the
    :class:`Principal` or raises :class:`AuthError` (401): "Login failed" (RabbitMQ's
    ``not_authorized``), "User can only log in via localhost" and "Not management user"
    (``not_authorised``), as RabbitMQ 3.10's ``rabbit_mgmt_util:is_authorized``."""
    if not header or not header.lower().startswith("basic "):
        raise AuthError("not_authorized", "Login failed")
    try:
        raw = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise AuthError("not_authorized", "Login failed") from None
    user, sep, password = raw.partition(":")
    if not sep:
        raise AuthError("not_authorized", "Login failed")
    try:
        check_credentials(config, user, password)
    except AuthFailure:
        raise AuthError("not_authorized", "Login failed") from None
    try:
        check_loopback(config, user, local_address)
    except AuthFailure:
        raise AuthError("not_authorised", "User can only log in via localhost") from None
    u = config.users[user]
    if not any(t in MANAGEMENT_TAGS for t in u.tags):
        raise AuthError("not_authorised", "Not management user")
    return Principal(config, u.name, u.tags)
