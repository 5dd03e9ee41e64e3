"""Connection options shared by the ``amqp`` source (both modes) and sink: ``uri``, broker
addresses, TLS, heartbeat, timeouts.

:data:`CONNECTION` holds their table entries (:class:`.options_table.Option`: name, kind,
default, doc; each mode's table lists them beside its own options, and the docs' option tables
are generated from them). :func:`parse_connection` parses them, from Spark's option dict (keys
lower-cased, values strings; lessons §1.4), into one :class:`ConnectionOptions`: the URI and
the keyword arguments for :func:`spark_amqp.client.connect`. No I/O. Every error names the
option, the value given and the allowed values, and is raised as the caller's error type
(``error``: a ``ValueError`` subclass such as the sink's ``SinkOptionError``), so each side
keeps its own exception type with one wording.

The client keywords: ``addresses`` (``host[:port],...``, replacing the URI's hosts),
``shuffle_addresses``, ``failover_timeout`` (seconds >= 0: how long to go on trying the
addresses; source: after a lost connection, default 300; sink: each task's connect, default 0:
one round), ``cacertfile``/``certfile``/``keyfile``, ``verify`` (``verify_peer`` |
``verify_none``), ``server_name_indication``, ``heartbeat`` (0..65535, 0 disables),
``connection_timeout`` (seconds > 0). TLS options with a plain ``amqp://`` URI are rejected
(they would be silently unused).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping, Type

from .option_values import LENIENT_BOOLEANS, OptionErrors, parse_duration
from .options_table import Option, snake_case


def redact_uri(uri: str) -> str:
    """:func:`spark_amqp.client.uri.redact_uri` (the password replaced), imported at the first
    call: this module is imported wherever the readers and writers are unpickled (Spark's
    Python workers), which need no client; importing it there cost ~0.1 CPU-s per worker
    process (the client package imports its connection, channel and ``ssl``)."""
    from ..client.uri import redact_uri as redact

    return redact(uri)

__all__ = ["DEFAULT_URI", "CONNECTION", "CONNECTION_OPTIONS", "TLS_OPTIONS", "ConnectionOptions",
           "ConnectionFields", "parse_connection", "parse_uri_option", "parse_connection_options", "redact_uri"]

# the one default URI, the client's (RabbitMQ's default user, port and vhost)
from ..client.uri import DEFAULT_URI  # noqa: E402

#: ``verify`` spellings -> the client's ``verify`` (ConnectionParameters.verify)
_VERIFY_MODES = {"verify_peer": "verify_peer", "verify_none": "verify_none",
                 "true": "verify_peer", "false": "verify_none"}
_TLS = "TLS for `amqps://` (rejected with an `amqp://` uri, where it would go unused)"


def _held_in_conn(option: Option) -> Option:
    """A connection option's entry: its value goes into :class:`ConnectionOptions` (the
    client keyword of the entry's snake-case name), not into a mode's own field."""
    return dataclasses.replace(option, field=None)


#: the connection options' table entries, by name. ``section="cluster"``: documented in
#: docs/rabbitmq-cluster.md (with their URI query parameters), not in the modes' tables.
CONNECTION: dict[str, Option] = {o.name: o for o in (_held_in_conn(o) for o in (
    Option("uri", "custom", DEFAULT_URI,
           "`amqp://` or `amqps://` URI ([RabbitMQ URI spec](https://www.rabbitmq.com/docs/"
           "uri-spec); query parameters `heartbeat`, `frame_max`, `channel_max`, "
           "`connection_timeout`, `auth_mechanism`, TLS files); several nodes: "
           "`amqp://u:p@h1:5672,h2,h3/%2F` (see [RabbitMQ cluster](rabbitmq-cluster.md))"),
    Option("addresses", "custom", None, "`host[:port],...`, replacing the URI's hosts",
           section="cluster"),
    Option("shuffleAddresses", "bool", None, "a new random order of the addresses per "
           "connection (`false`: the order given)", section="cluster",
           spellings=LENIENT_BOOLEANS),
    Option("failoverTimeout", "custom", None, "seconds >= 0 to go on trying the addresses "
           "before failing with one error listing every address (or a duration: `5m`)",
           section="cluster"),
    Option("heartbeat", "int", None, "heartbeat seconds asked of the broker (`0` disables); "
           "a node that stalls with its socket open is found after two intervals",
           "the broker's (RabbitMQ: 60 s)", maximum=65535, note="seconds; 0 disables heartbeats"),
    Option("connectionTimeout", "duration", None, "seconds each connect (TCP, TLS, AMQP "
           "handshake) may take before the next address is tried (or a duration: `500ms`)",
           "client default (10 s)", plain="seconds"),
    Option("cacertfile", "text", None, f"CA bundle (PEM) to check the broker's certificate (absent: the "
           f"system's CAs); {_TLS}"),
    Option("certfile", "text", None, f"client certificate (PEM); {_TLS}"),
    Option("keyfile", "text", None, f"the client certificate's key (PEM); {_TLS}"),
    Option("verify", "choice", None, f"`verify_peer` | `verify_none` (or `true` | `false`): "
           f"check the broker's certificate; {_TLS}", "`verify_peer`",
           choices=_VERIFY_MODES),
    Option("serverNameIndication", "text", None, f"TLS SNI and the host name to check; {_TLS}",
           "the URI's host"),
))}
#: lower-cased key -> documented spelling, for the options this module parses
CONNECTION_OPTIONS = {o.key: o.name for o in CONNECTION.values()}
#: the TLS options (lower-cased), which need an ``amqps://`` URI
TLS_OPTIONS = ("cacertfile", "certfile", "keyfile", "verify", "servernameindication")


@dataclass(frozen=True)
class ConnectionOptions:
    """The parsed connection options of the source or the sink. Picklable, immutable.

    ``uri``: the ``amqp://``/``amqps://`` URI (:data:`DEFAULT_URI` when not given).
    ``kwargs``: sorted ``(keyword, value)`` pairs for :func:`spark_amqp.client.connect` (see
    :func:`parse_connection_options`); absent options are left out (the client's defaults).
    """

    uri: str = DEFAULT_URI
    kwargs: tuple = ()

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`spark_amqp.client.connect` besides the URI."""
        return dict(self.kwargs)


class ConnectionFields:
    """``uri``, ``connection`` and :meth:`client_kwargs` of an options dataclass (the source's
    modes, the sink) whose ``conn`` field holds its :class:`ConnectionOptions`."""

    conn: ConnectionOptions

    @property
    def uri(self) -> str:
        """The ``amqp://``/``amqps://`` URI."""
        return self.conn.uri

    @property
    def connection(self) -> dict[str, Any]:
        """Client keywords from the TLS, heartbeat, timeout and address options."""
        return self.conn.client_kwargs()

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`spark_amqp.client.connect` besides the URI."""
        return self.conn.client_kwargs()


def parse_connection(opts: Mapping[str, Any], error: Type[ValueError] = ValueError
                     ) -> ConnectionOptions:
    """The connection options of ``opts`` (lower-cased keys; other keys are ignored).

    Raises ``error`` as :func:`parse_uri_option` and :func:`parse_connection_options` do.
    """
    uri = parse_uri_option(opts, error)
    return ConnectionOptions(uri, tuple(sorted(parse_connection_options(opts, uri,
                                                                       error).items())))


def parse_uri_option(opts: Mapping[str, str], error: Type[ValueError] = ValueError) -> str:
    """The ``uri`` option (stripped; :data:`DEFAULT_URI` when absent or empty).

    Args:
        opts: options with lower-cased keys.
        error: exception class raised on a bad value.

    Raises:
        error: the URI does not start with ``amqp://`` or ``amqps://``, or the client cannot
            parse it (a bad port, an empty or malformed entry of a host list, an unknown query
            parameter): the message names the bad entry (password redacted).
    """
    uri = str(opts.get("uri", DEFAULT_URI) or "").strip() or DEFAULT_URI
    if not re.match(r"^amqps?://", uri, re.IGNORECASE):
        raise error(f"option uri must start with amqp:// or amqps://, got {redact_uri(uri)!r}"
                    f" (e.g. {DEFAULT_URI})")
    from ..client.uri import parse_uri  # driver only (load()/save()); see redact_uri

    try:
        parse_uri(uri)
    except ValueError as exc:
        raise error(f"option uri: {redact_uri(str(exc))}") from None
    return uri


def parse_connection_options(opts: Mapping[str, str], uri: str,
                             error: Type[ValueError] = ValueError) -> dict[str, Any]:
    """Keyword arguments for :func:`spark_amqp.client.connect` from the TLS, ``heartbeat``,
    ``connectionTimeout``, ``addresses``, ``shuffleAddresses`` and ``failoverTimeout`` options
    (absent options are left out: the client's defaults apply).

    Args:
        opts: options with lower-cased keys (other keys are ignored).
        uri: the parsed ``uri`` (:func:`parse_uri_option`), to check TLS against its scheme.
        error: exception class raised on a bad value.

    Returns:
        dict with some of ``cacertfile``, ``certfile``, ``keyfile`` (str), ``verify``
        (``"verify_peer"`` | ``"verify_none"``), ``server_name_indication`` (str),
        ``heartbeat`` (int seconds), ``connection_timeout`` (float seconds), ``addresses``
        (tuple of ``(host, port)``), ``shuffle_addresses`` (bool), ``failover_timeout``
        (float seconds).

    Raises:
        error: TLS options with an ``amqp://`` URI; ``verify`` not one of verify_peer |
            verify_none | true | false; ``heartbeat`` not an integer in 0..65535;
            ``connectionTimeout`` not a finite number > 0; an ``addresses`` entry that is
            empty or has a bad port (named); ``shuffleAddresses`` not a boolean;
            ``failoverTimeout`` not a finite number >= 0.
    """
    errors = OptionErrors(error)
    tls = [k for k in TLS_OPTIONS if k in opts]
    if tls and not uri.lower().startswith("amqps://"):
        raise error(f"TLS option(s) {', '.join(CONNECTION_OPTIONS[k] for k in tls)} need an "
                    "amqps:// uri")
    kw: dict[str, Any] = {}
    for option in CONNECTION.values():  # each entry parsed into the client keyword it names
        if option.kind in ("custom", "bool"):
            continue   # uri, addresses, failoverTimeout: below; shuffleAddresses: below
        value = option.parse(opts, errors)
        if value is not None:
            kw[snake_case(option.name)] = str(value) if option.kind == "text" else value
    if "addresses" in opts:
        from ..client.uri import parse_addresses  # driver only, see redact_uri

        try:
            kw["addresses"] = parse_addresses(str(opts["addresses"]),
                                              5671 if uri.lower().startswith("amqps") else 5672)
        except ValueError as exc:
            raise error(f"option addresses: {exc}") from None
    shuffle = CONNECTION["shuffleAddresses"].parse(opts, errors)
    if shuffle is not None:
        kw["shuffle_addresses"] = shuffle
    raw = opts.get("failovertimeout")
    if raw is not None:  # a duration > 0, or 0 (one round)
        kw["failover_timeout"] = (0.0 if str(raw).strip() in ("0", "0.0")
                                  else parse_duration(opts, "failoverTimeout", errors,
                                                      plain="seconds"))
    return kw
