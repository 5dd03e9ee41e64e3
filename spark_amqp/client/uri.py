"""AMQP URIs and connection parameters.

Syntax per RabbitMQ's URI specification (https://www.rabbitmq.com/docs/uri-spec)::

    amqp[s]://[user[:password]@]host[:port][,host[:port]...][/vhost][?key=value&...]

- scheme ``amqp`` (port 5672) or ``amqps`` (TLS, port 5671);
- user, password, host and vhost are percent-decoded; ``/`` inside a vhost must be written
  ``%2F`` (so the default vhost ``/`` is ``amqp://host/%2F``). A missing or empty path
  (``amqp://host`` or ``amqp://host/``) selects the default vhost ``/``; note the URI spec
  reads ``amqp://host/`` as the empty vhost ``""``, which RabbitMQ never has, so this
  client (like pika) maps it to ``/``;
- an IPv6 host goes in brackets (``amqp://[::1]:5672``);
- several broker addresses (the nodes of a RabbitMQ cluster) are a comma-separated list in the
  authority, each ``host[:port]`` with its own optional port: ``amqp://u:p@h1:5672,h2:5673/%2F``.
  This is the multi-host form of the RabbitMQ .NET/Go clients' ``AmqpTcpEndpoint`` lists and of
  pika's list of parameters; the RabbitMQ Java client takes the same ``host[:port],...`` string
  in ``Address.parseAddresses``. :func:`spark_amqp.client.connect` tries them in a shuffled
  order by default (RabbitMQ docs "Clustering": "clients ... should be configured with
  multiple addresses ... shuffled", so that connections spread over the nodes) and fails over
  to the next one (see ``connect``). A bad entry raises ``ValueError`` naming it.

Query parameters (https://www.rabbitmq.com/docs/uri-query-parameters):

====================== ============================================================
heartbeat              seconds (int); 0 disables heartbeats; absent: the server's value
frame_max              bytes (int, >= 4096, framing included); default 131072
channel_max            int; default 2047 (RabbitMQ's default)
connection_timeout     **milliseconds** (int): limit of each wait of the TCP connect, TLS
                       and AMQP handshake (not their sum); default 10000
auth_mechanism         ``plain`` | ``external`` | ``amqplain`` (case-insensitive; may be
                       repeated, first one the server offers wins); default plain
cacertfile, certfile,  paths of PEM files (amqps): CA bundle to verify the server, client
keyfile                certificate and key (for EXTERNAL / mutual TLS)
verify                 ``verify_peer`` (default) | ``verify_none``
server_name_indication host name sent in SNI and checked against the certificate (default:
                       the URI host); ``disable`` sends no SNI and skips the host check
shuffle_addresses      ``true`` (default) | ``false``: with several addresses, try them in a
                       new random order per connection, or in the order given
failover_timeout       **milliseconds** (int): how long ``connect`` goes on trying the
                       addresses (rounds over all of them, with back-off 0.5 s doubling up
                       to 5 s) before it fails; default 0: one round, each address once
====================== ============================================================

Keyword arguments of :func:`spark_amqp.client.connect` override URI values; unknown query
parameters raise ``ValueError`` (a typo should not be silently ignored).
"""

from __future__ import annotations

import dataclasses
import re
import ssl
from typing import Any, ClassVar
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["ConnectionParameters", "parse_uri", "parse_uri_as", "parse_addresses",
           "format_address", "redact_uri", "parse_bool", "DEFAULT_URI"]

DEFAULT_URI = "amqp://guest:guest@127.0.0.1:5672/%2F"
_MECHANISMS = ("PLAIN", "EXTERNAL", "AMQPLAIN")
_INT_PARAMS = ("heartbeat", "frame_max", "channel_max", "connection_timeout", "failover_timeout")
_BOOL_PARAMS = ("shuffle_addresses",)
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
_STR_PARAMS = ("cacertfile", "certfile", "keyfile", "verify", "server_name_indication")


@dataclasses.dataclass
class ConnectionParameters:
    """Everything needed to open a connection. Build it with :func:`parse_uri`.

    Attributes:
        host (str), port (int), tls (bool, ``amqps``), username, password (str),
        vhost (str), heartbeat (int seconds or None = accept the server's proposal;
        0 = disabled), frame_max (int bytes), channel_max (int), connection_timeout
        (float **seconds**; the URI gives milliseconds), auth_mechanisms (tuple of upper-case
        SASL names in preference order), cacertfile / certfile / keyfile (str paths or None),
        verify (``"verify_peer"`` | ``"verify_none"``), server_name_indication (str or None),
        ssl_context (a ready :class:`ssl.SSLContext`, overrides the file options),
        client_properties (dict merged into the ``connection.start-ok`` client properties;
        ``connection_name`` shows in RabbitMQ's management UI), rpc_timeout (float seconds or
        None = wait as long as the connection lives: how long a synchronous method such as
        ``queue.declare`` or ``basic.consume`` waits for its reply before the connection is
        dropped with ``ConnectionLost``; not part of RabbitMQ's URI spec, so only settable as a
        ``connect()`` keyword), max_body_size (int bytes: the largest message body accepted
        from the broker; a larger one ends the connection with ``BodyTooLarge``, unacked
        deliveries being requeued; default 512 MiB, RabbitMQ's ceiling for
        ``max_message_size``; a ``connect()`` keyword only), addresses (tuple of
        ``(host, port)``: every broker address to try, empty = just ``(host, port)``; a
        ``connect()`` keyword also takes a string ``"h1:5672,h2"`` or a list of such
        entries; ``host``/``port`` are the address in use), shuffle_addresses (bool, default
        True: a new random order per connection), failover_timeout (float **seconds**, default
        0 = one round over the addresses; the URI gives milliseconds).
    """

    #: URI schemes (plain, TLS) and default ports (plain, TLS) of this kind of parameters
    SCHEMES: ClassVar[tuple] = ("amqp", "amqps")
    DEFAULT_PORTS: ClassVar[tuple] = (5672, 5671)
    #: auth mechanisms this client speaks
    MECHANISMS: ClassVar[tuple] = _MECHANISMS

    host: str = "127.0.0.1"
    port: int = 5672
    tls: bool = False
    username: str = "guest"
    password: str = "guest"
    vhost: str = "/"
    heartbeat: int | None = None
    frame_max: int = 131072
    channel_max: int = 2047
    connection_timeout: float = 10.0
    auth_mechanisms: tuple = ("PLAIN",)
    cacertfile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    verify: str = "verify_peer"
    server_name_indication: str | None = None
    ssl_context: Any = None
    client_properties: dict = dataclasses.field(default_factory=dict)
    rpc_timeout: float | None = None
    max_body_size: int = 512 * 1024 * 1024
    addresses: tuple = ()
    shuffle_addresses: bool = True
    failover_timeout: float = 0.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check ranges; raises ``ValueError`` naming the bad parameter."""
        if self.rpc_timeout is not None and not float(self.rpc_timeout) > 0:
            raise ValueError(f"rpc_timeout must be > 0 seconds or None, got {self.rpc_timeout}")
        if not int(self.max_body_size) > 0:
            raise ValueError(f"max_body_size must be > 0 bytes, got {self.max_body_size}")
        if not (0 < int(self.port) < 65536):
            raise ValueError(f"port must be 1-65535, got {self.port}")
        if self.heartbeat is not None and not (0 <= int(self.heartbeat) <= 65535):
            raise ValueError(f"heartbeat must be 0-65535 seconds, got {self.heartbeat}")
        if not (self.frame_max == 0 or 4096 <= int(self.frame_max) <= 0xFFFFFFFF):
            raise ValueError(f"frame_max must be 0 (no limit) or >= 4096 bytes (spec minimum "
                             f"frame size), got {self.frame_max}")
        if not (0 <= int(self.channel_max) <= 65535):
            raise ValueError(f"channel_max must be 0-65535, got {self.channel_max}")
        if self.connection_timeout is not None and self.connection_timeout <= 0:
            raise ValueError(f"connection_timeout must be > 0 seconds, got {self.connection_timeout}")
        if isinstance(self.auth_mechanisms, str):
            self.auth_mechanisms = (self.auth_mechanisms,)
        mechs = tuple(m.upper() for m in self.auth_mechanisms)
        for m in mechs:
            if m not in self.MECHANISMS:
                raise ValueError(f"auth_mechanism {m!r} is not supported; use one of "
                                 f"{', '.join(x.lower() for x in self.MECHANISMS)}")
        if not mechs:
            raise ValueError("auth_mechanisms is empty")
        self.auth_mechanisms = mechs
        if self.verify not in ("verify_peer", "verify_none"):
            raise ValueError(f"verify must be 'verify_peer' or 'verify_none', got {self.verify!r}")
        if not float(self.failover_timeout) >= 0:
            raise ValueError(f"failover_timeout must be >= 0 seconds, got {self.failover_timeout}")
        default_port = self.DEFAULT_PORTS[1] if self.tls else self.DEFAULT_PORTS[0]
        if isinstance(self.addresses, str):
            self.addresses = parse_addresses(self.addresses, default_port)
        else:
            addrs = []
            for a in self.addresses:
                if isinstance(a, str):
                    addrs.extend(parse_addresses(a, default_port))
                else:
                    host, port = a
                    if not (0 < int(port) < 65536):
                        raise ValueError(f"port of address {host!r} must be 1-65535, got {port}")
                    addrs.append((str(host), int(port)))
            self.addresses = tuple(addrs)

    def address_list(self) -> list:
        """Every address to try, ``[(host, port), ...]``, in the order given (``addresses``,
        or just ``(host, port)``)."""
        return list(self.addresses) or [(self.host, self.port)]

    def replace(self, **changes: Any) -> "ConnectionParameters":
        """A copy with ``changes`` applied (keyword overrides of :func:`connect`).

        ``auth_mechanism`` is accepted as an alias of ``auth_mechanisms``; ``connection_timeout``
        is in seconds here. Raises ``TypeError`` for unknown names.
        """
        if "auth_mechanism" in changes:
            changes["auth_mechanisms"] = changes.pop("auth_mechanism")
        names = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - names
        if unknown:
            raise TypeError(f"unknown connection parameter(s) {sorted(unknown)}; "
                            f"known: {sorted(names)}")
        return dataclasses.replace(self, **changes)

    def make_ssl_context(self) -> ssl.SSLContext:
        """The client :class:`ssl.SSLContext` for ``amqps``.

        ``verify_peer``: certificate chain checked against ``cacertfile`` (or the system
        CAs when absent) and host name checked against ``server_name_indication`` or the host
        (unless SNI is ``disable``). ``verify_none``: no verification (testing only).
        ``certfile``/``keyfile`` present a client certificate (mutual TLS, EXTERNAL auth).
        Raises ``OSError``/``ssl.SSLError`` when a file cannot be read.
        """
        if self.ssl_context is not None:
            return self.ssl_context
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.cacertfile)
        if self.verify == "verify_none":
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.server_name_indication == "disable":
            ctx.check_hostname = False
        if self.certfile:
            ctx.load_cert_chain(self.certfile, self.keyfile)
        elif self.keyfile:
            raise ValueError("keyfile given without certfile")
        return ctx

    @property
    def sni_hostname(self) -> str | None:
        """The host name for SNI / certificate checks, or None when disabled."""
        if self.server_name_indication == "disable":
            return None
        return self.server_name_indication or self.host

    def redacted_uri(self, all_addresses: bool = False) -> str:
        """The URI without the password, for logs and error messages: with the address in
        use (``host``/``port``), or every address when ``all_addresses``."""
        scheme = self.SCHEMES[1] if self.tls else self.SCHEMES[0]
        from urllib.parse import quote
        hosts = ",".join(format_address(h, p) for h, p in (
            self.address_list() if all_addresses else [(self.host, self.port)]))
        return f"{scheme}://{quote(self.username, safe='')}@{hosts}/{quote(self.vhost, safe='')}"


def format_address(host: str, port: int) -> str:
    """``host:port`` (an IPv6 host in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_addresses(text: str, default_port: int = 5672) -> tuple:
    """Parse a comma-separated address list ``host[:port],[v6addr][:port],...`` into a tuple
    of ``(host, port)`` (hosts percent-decoded; a missing port is ``default_port``).

    The syntax of the host list in a multi-host AMQP URI and of the Java client's
    ``Address.parseAddresses``. Spaces around entries are ignored.

    Raises:
        ValueError: an empty list or entry, a port that is not an integer in 1..65535, an
            unclosed ``[``, or an IPv6 address without brackets; the message names the entry.
    """
    entries = [e.strip() for e in str(text).split(",")]
    if not any(entries):
        raise ValueError("the broker address list is empty; give host[:port][,host[:port]...]")
    out = []
    for i, entry in enumerate(entries):
        where = f"address {i + 1} ({entry!r}) of {str(text)!r}"
        if not entry:
            raise ValueError(f"{where} is empty; give host[:port][,host[:port]...]")
        if entry.startswith("["):
            end = entry.find("]")
            if end < 0:
                raise ValueError(f"{where}: IPv6 address without its closing ']'")
            host, rest = entry[1:end], entry[end + 1:]
            if rest and not rest.startswith(":"):
                raise ValueError(f"{where}: expected ':port' after ']', got {rest!r}")
            port_text = rest[1:] if rest else None
        else:
            if entry.count(":") > 1:
                raise ValueError(f"{where}: an IPv6 address goes in brackets, e.g. [::1]:5672")
            host, sep, port_text = entry.partition(":")
            if not sep:
                port_text = None
        host = unquote(host)
        if not host:
            raise ValueError(f"{where} has no host")
        if port_text is None:
            port = default_port
        else:
            if not port_text.isdigit() or not (0 < int(port_text) < 65536):
                raise ValueError(f"{where}: bad port {port_text!r}, expected an integer 1-65535")
            port = int(port_text)
        out.append((host, port))
    return tuple(out)


def parse_bool(key: str, value: str, what: str = "AMQP URI") -> bool:
    """A URI query parameter's boolean (true/false, 1/0, yes/no); ``ValueError`` otherwise."""
    if value.lower() not in _BOOLEANS:
        raise ValueError(f"query parameter {key}={value!r} in {what} must be true or false")
    return _BOOLEANS[value.lower()]


def redact_uri(uri: str) -> str:
    """``uri`` (any string, parsable or not) with its password replaced by ``***``, for error
    messages and logs; a URI without a password is returned unchanged."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", uri)


def parse_uri(uri: str | None = None, **overrides: Any) -> ConnectionParameters:
    """Parse an AMQP URI (module docstring) into :class:`ConnectionParameters`.

    ``uri=None`` means :data:`DEFAULT_URI`. ``overrides`` (parameter names as attributes of
    :class:`ConnectionParameters`, e.g. ``heartbeat=5``) win over the URI.
    Raises ``ValueError`` for another scheme, a bad port/number or an unknown query parameter.
    """
    return parse_uri_as(ConnectionParameters, DEFAULT_URI if uri is None else uri, **overrides)


def parse_uri_as(cls: type, uri: str, extra: dict | None = None, **overrides: Any):
    """:func:`parse_uri` for another parameters class ``cls`` (a subclass of
    :class:`ConnectionParameters` with its own ``SCHEMES``, ``DEFAULT_PORTS``, fields): the
    same syntax and query parameters, plus ``extra`` (``{name: converter}``: query parameters
    of that class, each value converted by its function, which raises ``ValueError``)."""
    what = "AMQP URI" if cls is ConnectionParameters else f"{cls.SCHEMES[0]} URI"
    try:
        parts = urlsplit(uri)
    except ValueError as exc:  # e.g. an unclosed [ of an IPv6 host
        raise ValueError(f"malformed {what} {redact_uri(uri)!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in cls.SCHEMES:
        raise ValueError(f"{what} must start with {cls.SCHEMES[0]}:// or {cls.SCHEMES[1]}://, "
                         f"got {redact_uri(uri)!r}")
    tls = scheme == cls.SCHEMES[1]
    default_port = cls.DEFAULT_PORTS[1] if tls else cls.DEFAULT_PORTS[0]
    hostinfo = parts.netloc.rpartition("@")[2]
    if hostinfo in ("", ":"):
        addresses: tuple = (("127.0.0.1", default_port),)
    else:
        if hostinfo.startswith(":"):  # amqp://:5673 : the default host, that port
            hostinfo = "127.0.0.1" + hostinfo
        try:
            addresses = parse_addresses(hostinfo, default_port)
        except ValueError as exc:
            raise ValueError(f"bad broker address in {what} {redact_uri(uri)!r}: {exc}") from None
    kw: dict[str, Any] = {
        "tls": tls,
        "host": addresses[0][0],
        "port": addresses[0][1],
        "addresses": addresses if len(addresses) > 1 else (),
    }
    if parts.username is not None:
        kw["username"] = unquote(parts.username)
        kw["password"] = unquote(parts.password or "")
    path = parts.path
    if path in ("", "/"):
        kw["vhost"] = "/"
    else:
        vhost = path[1:]
        if "/" in vhost:
            raise ValueError(f"vhost {vhost!r} in {what} {redact_uri(uri)!r} contains '/'; "
                             "percent-encode it as %2F (the default vhost is written /%2F)")
        kw["vhost"] = unquote(vhost)
    mechs: list[str] = []
    extra = extra or {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if key in _INT_PARAMS:
            try:
                n = int(value)
            except ValueError:
                raise ValueError(f"query parameter {key}={value!r} in {what} must be an integer") from None
            kw[key] = n / 1000.0 if key in ("connection_timeout", "failover_timeout") else n
        elif key in _BOOL_PARAMS:
            kw[key] = parse_bool(key, value, what)
        elif key == "auth_mechanism":
            mechs.append(value.upper())
        elif key in _STR_PARAMS:
            kw[key] = value
        elif key in extra:
            try:
                kw[key] = extra[key](value)
            except ValueError as exc:
                raise ValueError(f"query parameter {key}={value!r} in {what}: {exc}") from None
        else:
            known = _INT_PARAMS + _BOOL_PARAMS + ("auth_mechanism",) + _STR_PARAMS + tuple(extra)
            raise ValueError(f"unknown query parameter {key!r} in {what}; known: "
                             f"{', '.join(known)}")
    if mechs:
        kw["auth_mechanisms"] = tuple(mechs)
    params = cls(**kw)
    if overrides:
        params = params.replace(**overrides)
    return params
