"""SASL authentication of connection.start-ok: PLAIN and AMQPLAIN.

- PLAIN (RFC 4616): response = ``authzid NUL authcid NUL password`` (authzid ignored).
- AMQPLAIN (RabbitMQ, 0-8 heritage): response = a field table *without* its 4-byte length
  prefix, holding ``LOGIN`` and ``PASSWORD`` (longstr values).

Source: RabbitMQ access-control docs and ``rabbit_auth_mechanism_plain/amqplain``.
"""

from __future__ import annotations

import hmac
import struct

from ..protocol.values import decode_table
from .config import BrokerConfig

__all__ = ["MECHANISMS", "authenticate", "AuthFailure"]

MECHANISMS = b"PLAIN AMQPLAIN"


class AuthFailure(Exception):
    """Authentication failed; ``str()`` is the RabbitMQ-style reason sent with 403."""


def _parse(mechanism: str, response: bytes) -> tuple[str, str]:
    if mechanism == "PLAIN":
        parts = response.split(b"\x00")
        if len(parts) != 3:
            raise AuthFailure("PLAIN response must be authzid NUL user NUL password")
        return parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
    if mechanism == "AMQPLAIN":
        try:
            buf = struct.pack(">I", len(response)) + bytes(response)
            table, _ = decode_table(buf, 0, len(buf))
        except Exception:
            raise AuthFailure("AMQPLAIN response is not a valid field table") from None
        login, password = table.get("LOGIN"), table.get("PASSWORD")
        if login is None or password is None:
            raise AuthFailure("AMQPLAIN response lacks LOGIN or PASSWORD")
        if isinstance(login, bytes):
            login = login.decode("utf-8", "replace")
        if isinstance(password, bytes):
            password = password.decode("utf-8", "replace")
        return str(login), str(password)
    raise AuthFailure(f"unsupported mechanism {mechanism!r}")


def authenticate(config: BrokerConfig, mechanism: str, response: bytes) -> str:
    """Check ``response`` for ``mechanism`` against the configured users; return the user name.

    Raises :class:`AuthFailure` with RabbitMQ's wording
    ("ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN...").
    """
    user, password = _parse(mechanism, response)
    u = config.users.get(user)
    if u is None or not hmac.compare_digest(u.password.encode(), password.encode()):
        raise AuthFailure(f"ACCESS_REFUSED - Login was refused using authentication mechanism "
                          f"{mechanism}. For details see the broker logfile.")
    return user
