"""Connection options shared by the ``amqp`` source and sink: ``uri``, broker addresses, TLS,
heartbeat, timeouts.

Parses the part of Spark's option dict (keys lower-cased, values strings; lessons §1.4) that
says how to reach the broker, into keyword arguments for :func:`spark_amqp.client.connect`.
No I/O. Every error names the option, the value given and the allowed values, and is raised
as the caller's error type (``error``: a ``ValueError`` subclass such as the sink's
``SinkOptionError``), so each side keeps its own exception type with one wording.

=========================  ==============================================================
option                     meaning (client keyword)
=========================  ==============================================================
``uri``                    ``amqp://`` or ``amqps://`` URI (RabbitMQ "URI Specification");
                           default :data:`DEFAULT_URI`. Several nodes of a cluster:
                           ``amqp://u:p@h1:5672,h2:5673,h3/%2F`` (each ``host[:port]``)
``addresses``              ``host[:port],host[:port],...``: the broker addresses, replacing
                           the URI's host(s) (its user, vhost and parameters stay)
                           (``addresses``)
``shuffleAddresses``       ``true`` (default): try the addresses in a new random order per
                           connection (RabbitMQ's advice: connections spread over the
                           nodes); ``false``: in the order given (``shuffle_addresses``)
``failoverTimeout``        seconds >= 0: how long to go on trying the addresses (with
                           back-off) before failing with one error listing every address
                           and its last error (``failover_timeout``). Source: after a lost
                           connection (default 300; the first connect of a query fails at
                           once); sink: each task's connect (default 0: one round)
``cacertfile``             CA bundle for ``amqps://`` (``cacertfile``)
``certfile``, ``keyfile``  client certificate and key (``certfile``, ``keyfile``)
``verify``                 ``verify_peer`` | ``verify_none`` | ``true`` | ``false``
                           (``verify``: ``verify_peer`` or ``verify_none``)
``serverNameIndication``   TLS SNI / host name to check (``server_name_indication``)
``heartbeat``              heartbeat seconds asked of the broker, 0..65535, 0 disables
``connectionTimeout``      TCP connect + handshake timeout, seconds > 0
=========================  ==============================================================

TLS options with a plain ``amqp://`` URI are rejected (they would be silently unused).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Type

from .option_values import (LENIENT_BOOLEANS, OptionErrors, parse_bool, parse_choice, parse_float,
                            parse_int)


def redact_uri(uri: str) -> str:
    """:func:`spark_amqp.client.uri.redact_uri` (the password replaced), imported at the first
    call: this module is imported wherever the readers and writers are unpickled (Spark's
    Python workers), which need no client; importing it there cost ~0.1 CPU-s per worker
    process (the client package imports its connection, channel and ``ssl``)."""
    from ..client.uri import redact_uri as redact

    return redact(uri)

__all__ = ["DEFAULT_URI", "CONNECTION_OPTIONS", "TLS_OPTIONS", "parse_uri_option",
           "parse_connection_options", "redact_uri"]

# the one default URI, the client's (RabbitMQ's default user, port and vhost)
from ..client.uri import DEFAULT_URI  # noqa: E402
#: lower-cased key -> documented spelling, for the options this module parses
CONNECTION_OPTIONS = {k.lower(): k for k in (
    "uri", "cacertfile", "certfile", "keyfile", "verify", "serverNameIndication", "heartbeat",
    "connectionTimeout", "addresses", "shuffleAddresses", "failoverTimeout")}
#: the TLS options (lower-cased), which need an ``amqps://`` URI
TLS_OPTIONS = ("cacertfile", "certfile", "keyfile", "verify", "servernameindication")
#: ``verify`` spellings -> the client's ``verify`` (ConnectionParameters.verify)
_VERIFY_MODES = {"verify_peer": "verify_peer", "verify_none": "verify_none",
                 "true": "verify_peer", "false": "verify_none"}


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
    """Keyword arguments for :func:`spark_amqp.client.connect` from the TLS, ``heartbeat`` and
    ``connectionTimeout`` options (absent options are left out: the client's defaults apply).

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
    kw: dict[str, Any] = {}
    tls = [k for k in TLS_OPTIONS if k in opts]
    if tls and not uri.lower().startswith("amqps://"):
        raise error(f"TLS option(s) {', '.join(CONNECTION_OPTIONS[k] for k in tls)} need an "
                    "amqps:// uri")
    for k in ("cacertfile", "certfile", "keyfile"):
        if k in opts:
            kw[k] = str(opts[k])
    verify = parse_choice(opts, "verify", errors, _VERIFY_MODES)
    if verify is not None:
        kw["verify"] = verify
    if "servernameindication" in opts:
        kw["server_name_indication"] = str(opts["servernameindication"])
    heartbeat = parse_int(opts, "heartbeat", errors, minimum=0, maximum=65535,
                          note="seconds; 0 disables heartbeats")
    if heartbeat is not None:
        kw["heartbeat"] = heartbeat
    timeout = parse_float(opts, "connectionTimeout", errors)
    if timeout is not None:
        kw["connection_timeout"] = timeout
    if "addresses" in opts:
        from ..client.uri import parse_addresses  # driver only, see redact_uri

        try:
            kw["addresses"] = parse_addresses(str(opts["addresses"]),
                                              5671 if uri.lower().startswith("amqps") else 5672)
        except ValueError as exc:
            raise error(f"option addresses: {exc}") from None
    shuffle = parse_bool(opts, "shuffleAddresses", errors, default=None,
                         spellings=LENIENT_BOOLEANS)
    if shuffle is not None:
        kw["shuffle_addresses"] = shuffle
    raw = opts.get("failovertimeout")
    failover = None
    if raw is not None:  # parse_float takes > 0; 0 (one round) is allowed here
        failover = 0.0 if str(raw).strip() in ("0", "0.0") else parse_float(
            opts, "failoverTimeout", errors)
    if failover is not None:
        kw["failover_timeout"] = failover
    return kw
