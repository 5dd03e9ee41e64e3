"""SASL authentication of connection.start-ok: PLAIN, AMQPLAIN and (over TLS) EXTERNAL.

- PLAIN (RFC 4616): response = ``authzid NUL authcid NUL password`` (authzid ignored).
- AMQPLAIN (RabbitMQ, 0-8 heritage): response = a field table *without* its 4-byte length
  prefix, holding ``LOGIN`` and ``PASSWORD`` (longstr values).
- EXTERNAL (RFC 4422 appendix A; RabbitMQ's rabbitmq_auth_mechanism_ssl plugin): the identity
  is the verified TLS client certificate's subject, the response is ignored. Offered only on
  TLS listeners that require verified client certificates (``verify_peer`` +
  ``fail_if_no_peer_cert``; the plugin refuses EXTERNAL as "TLS configuration is unsafe"
  otherwise, see ``rabbit_ssl:peer_cert_auth_name``). The user name is the subject's RFC 4514 distinguished-name string
  (``ssl_cert_login_from = distinguished_name``, RabbitMQ's default) or its common name
  (``common_name``); the user must exist, its password is not checked.

Every login is then subject to ``loopback_users`` (:func:`check_loopback`). Passwords are
checked against clear text or RabbitMQ's salted hashes (:mod:`.passwords`). A refused client
gets RabbitMQ's "Login was refused ... see the broker logfile" text; the reason is logged.

Source: RabbitMQ access-control and TLS docs (https://www.rabbitmq.com/docs/access-control,
https://www.rabbitmq.com/docs/ssl), ``rabbit_auth_mechanism_plain/amqplain/ssl``.
"""

from __future__ import annotations

import ipaddress
import struct

from ..protocol.values import decode_table
from .config import BrokerConfig
from .errors import AuthFailure

__all__ = ["MECHANISMS", "TLS_CLIENT_CERT_MECHANISMS", "authenticate", "authenticate_external", "check_credentials",
           "certificate_user", "check_loopback", "is_loopback", "refused_text", "AuthFailure"]

MECHANISMS = b"PLAIN AMQPLAIN"
# offered on TLS listeners that require a verified client certificate
TLS_CLIENT_CERT_MECHANISMS = b"PLAIN AMQPLAIN EXTERNAL"

# RFC 4514 section 3 short names (plus OpenSSL's emailAddress) for Python's getpeercert() keys
_RDN_NAMES = {
    "commonName": "CN", "localityName": "L", "stateOrProvinceName": "ST", "organizationName": "O",
    "organizationalUnitName": "OU", "countryName": "C", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID", "emailAddress": "emailAddress",
}


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

    Passwords are checked against the user's clear-text ``password`` or its salted
    ``password_hash`` (:meth:`.config.User.check_password`).

    Raises :class:`AuthFailure`: reason "user 'NAME' - invalid credentials" (RabbitMQ's log
    text) or a blank-password refusal (RabbitMQ's internal backend refuses those), client text
    :func:`refused_text`.
    """
    user, password = _parse(mechanism, response)
    check_credentials(config, user, password, refused_text(mechanism))
    return user


def check_credentials(config: BrokerConfig, user: str, password: str, client_text: str | None = None) -> None:
    """The password check of every login, AMQP (:func:`authenticate`) and the management API
    (HTTP basic auth) alike: a blank password is refused whatever is configured (RabbitMQ's
    internal backend, ``rabbit_auth_backend_internal:user_login_authentication``), else
    ``password`` must match the user's clear-text password or salted hash.

    Raises :class:`AuthFailure` with the reason to log and ``client_text`` for the client.
    """
    if password == "":
        raise AuthFailure(f"user '{user}' attempted to log in with a blank password, which is "
                          f"prohibited", client_text)
    u = config.users.get(user)
    if u is None or not u.check_password(password):
        raise AuthFailure(f"user '{user}' - invalid credentials", client_text)


def refused_text(mechanism: str) -> str:
    """The 403 text a client gets for any refused login (RabbitMQ 3.10 ``rabbit_reader:auth_fail``
    sends this "safe" text and logs the reason only)."""
    return (f"ACCESS_REFUSED - Login was refused using authentication mechanism {mechanism}. "
            f"For details see the broker logfile.")


def is_loopback(address: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and IPv4-mapped 127.x (``::ffff:127.0.0.1``), as RabbitMQ's
    ``rabbit_net:is_loopback/1``; False for anything else or ``None``."""
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def check_loopback(config: BrokerConfig, user: str, local_address: str | None,
                   mechanism: str = "PLAIN") -> None:
    """RabbitMQ's ``loopback_users``: a listed user may only log in on a connection whose
    *local* (server-side) address is a loopback address; RabbitMQ's
    ``rabbit_access_control:check_user_loopback`` checks the socket's own address, so a client
    on the same host that connects to a non-loopback address is refused too.

    Raises :class:`AuthFailure` whose reason is RabbitMQ's log text ("user 'guest' can only
    connect via localhost"); the client is told :func:`refused_text` of ``mechanism``, as
    RabbitMQ 3.10 ``rabbit_reader:auth_fail`` does for clients with the
    ``authentication_failure_close`` capability (others just see the socket closed).
    """
    if user in config.loopback_users and not is_loopback(local_address):
        raise AuthFailure(f"user '{user}' can only connect via localhost", refused_text(mechanism))


def _rfc4514_escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def certificate_user(peercert: dict | None, login_from: str = "distinguished_name") -> str:
    """The user name EXTERNAL derives from a client certificate.

    Args:
        peercert: :meth:`ssl.SSLSocket.getpeercert` dict of a verified certificate (``None`` or
            ``{}`` when the client sent none or it was not verified).
        login_from: ``"distinguished_name"``: the subject as an RFC 4514 string, last RDN first
            (``"CN=client,O=acme,C=GB"``, as RabbitMQ and ``openssl x509 -nameopt RFC2253``);
            ``"common_name"``: the subject's (last) CN.

    Raises :class:`AuthFailure` when there is no verified certificate or it has no CN.
    """
    subject = (peercert or {}).get("subject")
    if not subject:
        raise AuthFailure("ACCESS_REFUSED - EXTERNAL login needs a verified TLS client certificate; "
                          "connect with certfile/keyfile to a TLS listener that has verify_peer")
    if login_from == "common_name":
        cns = [v for rdn in subject for k, v in rdn if k == "commonName"]
        if not cns:
            raise AuthFailure("ACCESS_REFUSED - the client certificate subject has no common name (CN)")
        return cns[-1]
    return ",".join("+".join(f"{_RDN_NAMES.get(k, k)}={_rfc4514_escape(v)}" for k, v in rdn)
                    for rdn in reversed(subject))


def authenticate_external(config: BrokerConfig, peercert: dict | None,
                          login_from: str = "distinguished_name") -> str:
    """EXTERNAL: the configured user named by the client certificate (see
    :func:`certificate_user`); its password is not checked.

    Raises :class:`AuthFailure` (sent as 403 ACCESS_REFUSED) when there is no verified
    certificate or no such user.
    """
    user = certificate_user(peercert, login_from)
    if user not in config.users:
        raise AuthFailure(f"ACCESS_REFUSED - Login was refused using authentication mechanism EXTERNAL: "
                          f"user '{user}' (from the client certificate's "
                          f"{'common name' if login_from == 'common_name' else 'distinguished name'}) "
                          f"does not exist")
    return user
