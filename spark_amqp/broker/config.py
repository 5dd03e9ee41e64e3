"""Broker configuration: users, vhosts, permissions and limits, read from TOML.

File format (``conf/broker.toml``; parsed with :mod:`tomllib`, or ``tomli`` on Python 3.10)::

    [broker]
    data_dir = "var/broker"            # optional; None/absent = in memory
    frame_max = 131072                 # bytes, framing included (RabbitMQ's default)
    channel_max = 2047                 # RabbitMQ's default
    heartbeat = 60                     # seconds offered in connection.tune (0 = off)
    memory_high_watermark = 1073741824 # bytes of message bodies held before connection.blocked
    rabbitmq_version = "4.3"           # the RabbitMQ release to behave like: "4.3" (default) | "3.10"
                                       # (docs/broker/rabbitmq-versions.md lists the differences)
    max_message_size = 16777216        # bytes; default: the version's (4.3: 16 MiB, 3.10: 128 MiB)
    max_connections = 0                # AMQP connections open at once (connection.open beyond: 530); 0 = unlimited
    ranch_connection_max = 0           # sockets on each AMQP listener (more are closed at accept); 0 = unlimited
    max_connections_per_address = 0    # sockets one source address holds on all listeners; 0 = unlimited
    consumer_max_per_channel = 0       # consumers on one channel (basic.consume beyond: 530); 0 = unlimited
    handshake_timeout = 10000          # ms a new connection has to finish the handshake (RabbitMQ's)
    loopback_users = ["guest"]         # users refused unless connected to a loopback address
    disk_free_limit = "50MB"           # disk alarm below this much free space in data_dir (0 = off);
                                       # bytes or "50MB"/"2GiB"; or RabbitMQ's dotted keys:
                                       # disk_free_limit.absolute = "1GB" | disk_free_limit.relative = 1.5

    [management]                       # limits of the management HTTP listener (RabbitMQ's names)
    max_connections = 1024             # sockets at once (ranch's default); more get 503 and are closed
    tcp.request_timeout = 5000         # ms for a request's line and headers, and idle between requests
    tcp.idle_timeout = 60000           # ms without a byte of a request body
    http.max_body_size = 10000000      # bytes of a request body (RabbitMQ 4.x's default; 413 beyond)
    allowed_hosts = []                 # Host names accepted besides IP literals, localhost and this
                                       # machine's name (DNS rebinding); e.g. a reverse proxy's name

    [stream]                           # optional: the stream-protocol listener (broker/stream_config.py)
    listeners.tcp.1 = 5552             # RabbitMQ's stream.listeners.tcp.1; absent = no stream port
    advertised_host = "localhost"      # what the stream protocol's open/metadata answer advertise

    [tls]                              # optional: an amqps listener (RabbitMQ listeners.ssl.default)
    port = 5671                        # the IANA amqps port; spark-amqp broker --tls-port overrides
    certfile = "conf/tls/server_certificate.pem"   # PEM server certificate (chain)
    keyfile = "conf/tls/server_key.pem"            # PEM private key (unencrypted)
    cacertfile = "conf/tls/ca_certificate.pem"     # CA bundle that signs client certificates
    verify = "verify_peer"             # verify_peer | verify_none (RabbitMQ ssl_options.verify)
    fail_if_no_peer_cert = true        # verify_peer only: refuse clients without a certificate
    cert_login_from = "common_name"    # EXTERNAL user name: distinguished_name (default) | common_name

    [[users]]
    name = "guest"
    password = "guest"                 # clear text, or instead:
    # password_hash = "..."            # RabbitMQ's salted hash (spark-amqp broker hash-password)
    # hashing_algorithm = "rabbit_password_hashing_sha256"   # the default
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
(RabbitMQ's defaults) and no TLS listener.

Security defaults, as RabbitMQ's (https://www.rabbitmq.com/docs/access-control): users listed
in ``loopback_users`` (default ``["guest"]``) may only log in on a connection whose *local*
(server-side) address is a loopback address (127.0.0.0/8, ::1; RabbitMQ's
``rabbit_net:is_loopback`` looks at the socket's own address, not the peer's), anything else
is refused with 403 ACCESS_REFUSED; ``loopback_users = []`` lifts that. Passwords may be given
as RabbitMQ's salted hashes (``password_hash``, see :mod:`.passwords`). A connection that has
not finished its handshake (connection.open-ok) within ``handshake_timeout`` ms is dropped,
and frames before connection.tune-ok may be at most 4096 bytes of payload (RabbitMQ's
``initial_frame_max``), which caps the size of a connection.start-ok response.

Resource limits (issue 41; every listener applies them through :mod:`.listener_guard`, the
table with RabbitMQ's values is in docs/broker/security.md): ``ranch_connection_max`` sockets per
AMQP listener and ``max_connections_per_address`` per source address over all listeners (both
0 = unlimited, as RabbitMQ), and always a reserve of file descriptors (5 % of ``RLIMIT_NOFILE``,
at least 64) that no listener may take; ``consumer_max_per_channel`` (RabbitMQ 4.x, default
unlimited); the ``[management]`` section's HTTP limits (:class:`ManagementLimits`).
``connection_max`` is read as ``max_connections`` (RabbitMQ's older name).

TLS follows RabbitMQ's ``ssl_options`` (https://www.rabbitmq.com/docs/ssl): a server
certificate and key are required; ``verify = "verify_peer"`` asks the client for a certificate
and checks it against ``cacertfile`` (a presented certificate that does not verify fails the
TLS handshake), and ``fail_if_no_peer_cert = true`` additionally refuses clients that present
none. Protocol versions are TLS 1.2 and 1.3 (RabbitMQ 3.10's defaults). When both are set
the SASL mechanism EXTERNAL is offered too (RabbitMQ's rabbitmq_auth_mechanism_ssl, which
refuses it as unsafe under weaker settings): the user name is taken from the certificate subject, either the
RFC 4514 string of the whole distinguished name (``"CN=client,O=acme"``, RabbitMQ's default)
or its common name (``cert_login_from = "common_name"``); that user must exist in ``[[users]]``
(its password is not checked).
"""

from __future__ import annotations

import hmac
import os
import re
import ssl
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .passwords import DEFAULT_HASHING_ALGORITHM, check_hash, verify_password
from .stream_config import StreamConfig, stream_from_toml
from .versions import DEFAULT_VERSION, Behaviour, behaviour

__all__ = ["BrokerConfig", "User", "Permission", "TLSConfig", "ManagementLimits", "load_config", "ConfigError",
           "parse_size"]


@dataclass
class User:
    """One broker user (RabbitMQ's internal users).

    Args:
        name: the user name clients log in with.
        password: clear-text password (fine for local runs), or ``None`` when
            ``password_hash`` is given.
        tags: RabbitMQ user tags (``"administrator"``, ...).
        password_hash: RabbitMQ's salted hash, base64 of a 4-byte salt + digest of (salt +
            password) (see :mod:`.passwords`; ``spark-amqp broker hash-password`` or
            RabbitMQ's ``definitions.json`` export make one). Used instead of ``password``;
            ``""`` means no password login at all (RabbitMQ's ``clear_password``; such a user
            can still log in with EXTERNAL, a TLS client certificate).
        hashing_algorithm: the hash's algorithm, RabbitMQ's module name
            (``rabbit_password_hashing_sha256``, the default; ``..._sha512``, ``..._md5``).

    Raises :class:`ConfigError` when both or neither of password and password_hash are set,
    or the hash is malformed.
    """

    name: str
    password: str | None = field(default=None, repr=False)  # never in logs or tracebacks
    tags: list[str] = field(default_factory=list)
    password_hash: str | None = field(default=None, repr=False)
    hashing_algorithm: str = DEFAULT_HASHING_ALGORITHM

    def __post_init__(self) -> None:
        if (self.password is None) == (self.password_hash is None):
            raise ConfigError(f"user {self.name!r}: give exactly one of password (clear text) and "
                              f"password_hash (make one with `spark-amqp broker hash-password`)")
        if self.password_hash:  # "" = no password (rabbitmqctl clear_password): EXTERNAL login only
            try:
                check_hash(self.password_hash, self.hashing_algorithm)
            except ValueError as exc:
                raise ConfigError(f"user {self.name!r}: {exc}") from None

    def check_password(self, password: str) -> bool:
        """True when ``password`` is this user's (constant-time comparison)."""
        if self.password_hash is not None:
            return verify_password(password, self.password_hash, self.hashing_algorithm)
        return hmac.compare_digest(self.password.encode("utf-8"), password.encode("utf-8"))


@dataclass
class Permission:
    """RabbitMQ-style permission regexes for one user on one vhost."""

    configure: str = ".*"
    write: str = ".*"
    read: str = ".*"

    def allows(self, kind: str, name: str) -> bool:
        """``kind`` is "configure", "write" or "read"; ``name`` a queue or exchange name.

        As RabbitMQ's ``rabbit_auth_backend_internal:check_resource_access``: the regex is
        *searched* in the name, unanchored (``re:run``; write ``^...$`` to anchor it), the
        empty pattern denies everything, and the default exchange ``""`` is checked under the
        name ``amq.default`` (``rabbit_channel:check_resource_access``), so ``^(?!amq\\.)``
        keeps a user off the default exchange too. The one permission rule of both the AMQP
        port and the management API (:mod:`.rules`)."""
        pattern = getattr(self, kind)
        if pattern == "":
            return False
        return re.search(pattern, name or "amq.default") is not None


#: RabbitMQ caps max_message_size at 512 MiB (rabbit_channel:get_max_message_size/0)
MAX_MESSAGE_SIZE_LIMIT = 512 * 1024 * 1024

CERT_LOGIN_FROM = ("distinguished_name", "common_name")


@dataclass
class TLSConfig:
    """The TLS (amqps) listener's settings; names follow RabbitMQ's ``ssl_options``.

    Args:
        certfile: path of the PEM server certificate (leaf first, then intermediates).
        keyfile: path of its PEM private key (unencrypted; ``None`` = the key is in certfile).
        cacertfile: PEM bundle of the CAs that sign client certificates; required when
            ``verify_peer`` is true.
        verify_peer: request a client certificate and verify it against ``cacertfile``
            (RabbitMQ ``ssl_options.verify = verify_peer``). A certificate that does not verify
            fails the TLS handshake.
        fail_if_no_peer_cert: with ``verify_peer``, also refuse clients that send no
            certificate (RabbitMQ ``ssl_options.fail_if_no_peer_cert = true``).
        cert_login_from: how EXTERNAL (offered only with ``verify_peer`` and
            ``fail_if_no_peer_cert``) derives the user name from a client certificate:
            ``"distinguished_name"`` (RabbitMQ's default; RFC 4514 string such as
            ``"CN=client,O=acme"``) or ``"common_name"`` (the subject's CN).
        port: the listener's TCP port (IANA amqps 5671); used by ``spark-amqp broker``;
            :class:`~.embedded.EmbeddedBroker` uses its ``tls_port`` argument instead.
    """

    certfile: str
    keyfile: str | None = None
    cacertfile: str | None = None
    verify_peer: bool = False
    fail_if_no_peer_cert: bool = False
    cert_login_from: str = "distinguished_name"
    port: int = 5671

    def __post_init__(self) -> None:
        if self.cert_login_from not in CERT_LOGIN_FROM:
            raise ConfigError(f"TLS cert_login_from must be one of {', '.join(CERT_LOGIN_FROM)}, "
                              f"got {self.cert_login_from!r}")
        if self.verify_peer and not self.cacertfile:
            raise ConfigError("TLS verify_peer needs cacertfile: the CA bundle that client "
                              "certificates are verified against")
        if self.fail_if_no_peer_cert and not self.verify_peer:
            raise ConfigError("TLS fail_if_no_peer_cert = true needs verify_peer (RabbitMQ: "
                              "verify = verify_peer); without it no client certificate is requested")

    def ssl_context(self) -> ssl.SSLContext:
        """A server-side :class:`ssl.SSLContext` (TLS 1.2+) for these settings.

        Raises :class:`ConfigError` naming the file when a certificate, key or CA bundle is
        missing, unreadable or not valid PEM, or the key does not match the certificate.
        """
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.certfile, self.keyfile)
        except FileNotFoundError as exc:
            raise ConfigError(f"TLS certificate or key file not found: {exc.filename or self.certfile}") from None
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"cannot load the TLS server certificate {self.certfile} with key "
                              f"{self.keyfile or '(in the certificate file)'}: {exc} (PEM files, "
                              f"unencrypted key matching the certificate)") from None
        if self.cacertfile:
            try:
                ctx.load_verify_locations(cafile=self.cacertfile)
            except FileNotFoundError:
                raise ConfigError(f"TLS cacertfile not found: {self.cacertfile}") from None
            except (ssl.SSLError, OSError) as exc:
                raise ConfigError(f"cannot load the TLS CA bundle {self.cacertfile}: {exc}") from None
        if self.verify_peer:
            ctx.verify_mode = ssl.CERT_REQUIRED if self.fail_if_no_peer_cert else ssl.CERT_OPTIONAL
        else:
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


@dataclass
class ManagementLimits:
    """The management HTTP listener's limits (``[management]`` in broker.toml; the keys are
    RabbitMQ's ``management.*`` names where it has one). Times in milliseconds, sizes in bytes.

    Args:
        max_connections: sockets the listener holds at once; more are answered 503 and closed
            (ranch's default ``max_connections``, 1024, which RabbitMQ's cowboy listener keeps).
        request_timeout: ``tcp.request_timeout``, cowboy's: a request's line and headers must
            arrive within it (else 408 and close), and a connection idle between requests is
            closed after it (RabbitMQ 3.10.8 measured: 5 s both).
        idle_timeout: ``tcp.idle_timeout``, cowboy's: a request body that sends no byte for
            this long is dropped (60 s).
        max_body_size: ``http.max_body_size`` (RabbitMQ 4.x, default 10,000,000 bytes; 3.10
            had none): a larger body gets 413 before it is read. Routes that take small bodies
            have lower limits of their own (``management/bodies.py``).
        allowed_hosts: host names a request's ``Host`` may name besides IP literals of the
            listener or loopback, ``localhost`` and this machine's name; a page on another name
            that resolves here (DNS rebinding) is refused with 403 (a reverse proxy that passes
            its own ``Host`` on needs its name here).
    """

    max_connections: int = 1024
    request_timeout: int = 5000
    idle_timeout: int = 60000
    max_body_size: int = 10_000_000
    allowed_hosts: list[str] = field(default_factory=list)


#: [management] keys -> ManagementLimits fields (RabbitMQ's management.* names)
_MANAGEMENT_KEYS = {"max_connections": "max_connections", "tcp.request_timeout": "request_timeout",
                    "tcp.idle_timeout": "idle_timeout", "http.max_body_size": "max_body_size",
                    "allowed_hosts": "allowed_hosts"}


def _management_from_toml(path: str | Path, m: Any) -> ManagementLimits:
    if not isinstance(m, dict):
        raise ConfigError(f"{path}: [management] must be a table")
    flat: dict[str, Any] = {}
    for k, v in m.items():   # tcp.request_timeout = 5000 parses as {"tcp": {"request_timeout": 5000}}
        if isinstance(v, dict):
            flat.update({f"{k}.{k2}": v2 for k2, v2 in v.items()})
        else:
            flat[k] = v
    unknown = sorted(set(flat) - set(_MANAGEMENT_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown [management] key(s) {', '.join(unknown)}; known: "
                          f"{', '.join(_MANAGEMENT_KEYS)}")
    out = ManagementLimits()
    for k, v in flat.items():
        if k == "allowed_hosts":
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ConfigError(f"{path}: [management] allowed_hosts must be a list of host names, got {v!r}")
            out.allowed_hosts = [x.lower() for x in v]
        elif k == "http.max_body_size":
            out.max_body_size = parse_size(v, f"{path}: [management] {k}")
        elif isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"{path}: [management] {k} must be a non-negative integer, got {v!r}")
        else:
            setattr(out, _MANAGEMENT_KEYS[k], v)
    return out


@dataclass
class BrokerConfig:
    """Everything the broker reads from its config file (see the module docstring).

    Units: ``frame_max``, ``max_message_size``, ``memory_high_watermark``,
    ``write_buffer_limit`` in bytes; ``heartbeat`` in seconds; ``handshake_timeout`` in
    milliseconds (RabbitMQ's unit and default, 10000); ``max_connections``,
    ``ranch_connection_max``, ``max_connections_per_address``, ``consumer_max_per_channel`` and
    ``channel_max`` counts (0 = unlimited); ``management``: :class:`ManagementLimits`. ``loopback_users``: user names that may only
    connect via a loopback interface (default ``["guest"]``). ``rabbitmq_version``: the
    RabbitMQ release to behave like, ``"4.3"`` (default) or ``"3.10"`` (:mod:`.versions`);
    ``max_message_size`` ``None`` means that version's default (16 MiB / 128 MiB).
    Raises :class:`ConfigError` for an unknown ``rabbitmq_version``.
    """

    users: dict[str, User] = field(default_factory=lambda: {"guest": User("guest", "guest", ["administrator"])})
    vhosts: list[str] = field(default_factory=lambda: ["/"])
    permissions: dict[tuple[str, str], Permission] = field(
        default_factory=lambda: {("guest", "/"): Permission()})
    data_dir: str | None = None
    frame_max: int = 131072
    channel_max: int = 2047
    heartbeat: int = 60
    memory_high_watermark: int = 1 << 30
    max_message_size: int | None = None
    max_connections: int = 0
    ranch_connection_max: int = 0
    max_connections_per_address: int = 0
    consumer_max_per_channel: int = 0
    management: ManagementLimits = field(default_factory=ManagementLimits)
    write_buffer_limit: int = 4 * 1024 * 1024
    disk_free_limit: int = 50_000_000
    disk_free_limit_relative: float | None = None
    tls: TLSConfig | None = None
    #: the stream-protocol listener (``[stream]``, :mod:`.stream_config`)
    stream: StreamConfig = field(default_factory=StreamConfig)
    loopback_users: list[str] = field(default_factory=lambda: ["guest"])
    handshake_timeout: int = 10000
    rabbitmq_version: str = DEFAULT_VERSION
    #: True when max_message_size came from the version (so a version change moves it too)
    _default_max_message_size: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.set_version(self.rabbitmq_version)

    def set_version(self, version: str) -> None:
        """Behave like RabbitMQ ``version`` ("3.10" or "4.3"); a max_message_size that was
        not set explicitly follows the version's default. Raises :class:`ConfigError`."""
        try:
            b = behaviour(version)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.rabbitmq_version = b.version
        if self.max_message_size is None or self._default_max_message_size:
            self.max_message_size = b.max_message_size
            self._default_max_message_size = True

    @property
    def behaviour(self) -> Behaviour:
        """The :class:`~.versions.Behaviour` of ``rabbitmq_version``."""
        return behaviour(self.rabbitmq_version)

    def permission(self, user: str, vhost: str) -> Permission | None:
        return self.permissions.get((user, vhost))

    def disk_free_limit_bytes(self) -> int:
        """The disk alarm's threshold in bytes: ``disk_free_limit_relative`` times the total
        RAM when set (RabbitMQ's ``disk_free_limit.relative``), else ``disk_free_limit``
        (RabbitMQ's default 50 MB, ``disk_free_limit.absolute``); 0 = no disk alarm.
        Source: https://www.rabbitmq.com/docs/disk-alarms"""
        if self.disk_free_limit_relative is not None:
            return int(self.disk_free_limit_relative * total_memory())
        return self.disk_free_limit


def total_memory() -> int:
    """Total RAM in bytes (``sysconf``), the base of ``disk_free_limit.relative``."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 0


_UNITS = {"": 1, "k": 1024, "kib": 1024, "m": 1024 ** 2, "mib": 1024 ** 2, "g": 1024 ** 3,
          "gib": 1024 ** 3, "kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3, "tb": 1000 ** 4}


def parse_size(value: Any, what: str) -> int:
    """A byte count from an int or a string with RabbitMQ's units ("50MB" = 50,000,000,
    "2GiB" = 2 * 1024**3, "512k" = 512 * 1024; https://www.rabbitmq.com/docs/disk-alarms).
    Raises :class:`ConfigError` naming ``what`` for anything else."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _UNITS:
            return int(m.group(1)) * _UNITS[m.group(2).lower()]
    raise ConfigError(f"{what} must be a byte count (an integer, or a string like \"50MB\", "
                      f"\"2GiB\", \"512k\"), got {value!r}")


def _disk_free_limit_from_toml(path: str | Path, cfg: "BrokerConfig", v: Any) -> None:
    where = f"{path}: [broker] disk_free_limit"
    if isinstance(v, dict):
        unknown = sorted(set(v) - {"absolute", "relative"})
        if unknown or len(v) != 1:
            raise ConfigError(f"{where} takes exactly one of .absolute (bytes) or .relative (a "
                              f"multiple of the total RAM), got {', '.join(sorted(v)) or 'nothing'}")
        if "relative" in v:
            r = v["relative"]
            if isinstance(r, bool) or not isinstance(r, (int, float)) or r < 0:
                raise ConfigError(f"{where}.relative must be a non-negative number (a multiple "
                                  f"of the total RAM, RabbitMQ suggests 1.0-2.0), got {r!r}")
            cfg.disk_free_limit_relative = float(r)
            return
        cfg.disk_free_limit = parse_size(v["absolute"], where + ".absolute")
        return
    cfg.disk_free_limit = parse_size(v, where)


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
             "max_message_size", "max_connections", "write_buffer_limit", "handshake_timeout",
             "ranch_connection_max", "max_connections_per_address", "consumer_max_per_channel")


def _tls_from_toml(path: str | Path, t: Any) -> TLSConfig:
    if not isinstance(t, dict):
        raise ConfigError(f"{path}: [tls] must be a table")
    known = {"port", "certfile", "keyfile", "cacertfile", "verify", "fail_if_no_peer_cert", "cert_login_from"}
    unknown = sorted(set(t) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown [tls] key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    if "certfile" not in t:
        raise ConfigError(f"{path}: [tls] needs certfile (and keyfile) for the server certificate")
    verify = t.get("verify", "verify_none")
    if verify not in ("verify_peer", "verify_none"):
        raise ConfigError(f"{path}: [tls] verify must be \"verify_peer\" or \"verify_none\", got {verify!r}")
    port = t.get("port", 5671)
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"{path}: [tls] port must be an integer 0-65535, got {port!r}")
    fail = t.get("fail_if_no_peer_cert", False)
    if not isinstance(fail, bool):
        raise ConfigError(f"{path}: [tls] fail_if_no_peer_cert must be true or false, got {fail!r}")

    def file(key: str) -> str | None:  # relative paths: to the working directory, as data_dir
        v = t.get(key)
        return None if v is None else str(v)
    try:
        return TLSConfig(certfile=file("certfile"), keyfile=file("keyfile"), cacertfile=file("cacertfile"),
                         verify_peer=verify == "verify_peer", fail_if_no_peer_cert=fail,
                         cert_login_from=t.get("cert_login_from", "distinguished_name"), port=port)
    except ConfigError as exc:
        raise ConfigError(f"{path}: [tls] {exc}") from None


def _user_from_toml(path: str | Path, u: Any) -> User:
    if not isinstance(u, dict) or not isinstance(u.get("name"), str):
        raise ConfigError(f"{path}: every [[users]] entry needs a name (string)")
    known = {"name", "password", "password_hash", "hashing_algorithm", "tags"}
    unknown = sorted(set(u) - known)
    if unknown:
        raise ConfigError(f"{path}: user {u['name']!r}: unknown key(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(known))}")
    tags = u.get("tags", [])
    if isinstance(tags, str):  # RabbitMQ definitions.json before 3.11: "administrator,monitoring"
        tags = [t for t in tags.split(",") if t]
    try:
        return User(u["name"], None if u.get("password") is None else str(u["password"]), list(tags),
                    password_hash=u.get("password_hash"),
                    hashing_algorithm=u.get("hashing_algorithm", DEFAULT_HASHING_ALGORITHM))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def load_config(path: str | Path | None = None, **overrides: Any) -> BrokerConfig:
    """Read a broker config from ``path`` (TOML; None = defaults) and apply ``overrides``.

    Raises :class:`ConfigError` naming the file and the offending key.
    """
    cfg = BrokerConfig()
    if path is not None:
        data = _toml_load(Path(path))
        b = data.get("broker", {})
        if "connection_max" in b:   # RabbitMQ's older name of max_connections
            b = {**b, "max_connections": b["connection_max"]}
            b.pop("connection_max")
        if "rabbitmq_version" in b:
            try:
                cfg.set_version(str(b["rabbitmq_version"]))
            except ConfigError as exc:
                raise ConfigError(f"{path}: [broker] {exc}") from None
        for key in _INT_KEYS:
            if key in b:
                v = b[key]
                if not isinstance(v, int) or v < 0:
                    raise ConfigError(f"{path}: [broker] {key} must be a non-negative integer, got {v!r}")
                setattr(cfg, key, v)
                if key == "max_message_size":
                    cfg._default_max_message_size = False
        if cfg.max_message_size > MAX_MESSAGE_SIZE_LIMIT:
            raise ConfigError(f"{path}: [broker] max_message_size must be at most {MAX_MESSAGE_SIZE_LIMIT} "
                              f"(512 MiB, RabbitMQ's hard limit), got {cfg.max_message_size}")
        if "loopback_users" in b:
            lu = b["loopback_users"]
            if not isinstance(lu, list) or not all(isinstance(x, str) for x in lu):
                raise ConfigError(f"{path}: [broker] loopback_users must be a list of user names "
                                  f"(e.g. [\"guest\"]; [] lets every user connect from anywhere), got {lu!r}")
            cfg.loopback_users = list(lu)
        if "disk_free_limit" in b:
            _disk_free_limit_from_toml(path, cfg, b["disk_free_limit"])
        if "data_dir" in b:
            cfg.data_dir = str(b["data_dir"]) or None
        if cfg.frame_max and cfg.frame_max < 4096:
            raise ConfigError(f"{path}: [broker] frame_max must be >= 4096 (AMQP frame-min-size), got {cfg.frame_max}")
        if "tls" in data:
            cfg.tls = _tls_from_toml(path, data["tls"])
        if "management" in data:
            cfg.management = _management_from_toml(path, data["management"])
        if "stream" in data:
            cfg.stream = stream_from_toml(path, data["stream"], ConfigError)
        if "users" in data:
            cfg.users = {}
            for u in data["users"]:
                cfg.users[u.get("name")] = _user_from_toml(path, u)
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
    if overrides.get("rabbitmq_version") is not None:
        cfg.set_version(overrides.pop("rabbitmq_version"))
    for k, v in overrides.items():
        if v is not None:
            setattr(cfg, k, v)
            if k == "max_message_size":
                cfg._default_max_message_size = False
    return cfg
