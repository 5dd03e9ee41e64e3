"""AMQP URI parsing and TLS option plumbing (no broker needed).

Expected values follow RabbitMQ's URI spec (https://www.rabbitmq.com/docs/uri-spec) and
query-parameter page (https://www.rabbitmq.com/docs/uri-query-parameters).
"""

from __future__ import annotations

import ssl

import pytest

from spark_amqp.client import ConnectionParameters, parse_uri


def test_defaults():
    p = parse_uri()
    assert (p.host, p.port, p.username, p.password, p.vhost, p.tls) == \
        ("127.0.0.1", 5672, "guest", "guest", "/", False)
    assert p.heartbeat is None and p.frame_max == 131072 and p.auth_mechanisms == ("PLAIN",)


@pytest.mark.parametrize("uri, expected", [
    ("amqp://user:pass@host:10000/vhost", ("host", 10000, "user", "pass", "vhost")),
    ("amqp://user%61:%61pass@ho%61st:10000/v%2Fhost", ("hoast", 10000, "usera", "apass", "v/host")),
    ("amqp://", ("127.0.0.1", 5672, "guest", "guest", "/")),
    ("amqp://:@/", ("127.0.0.1", 5672, "", "", "/")),
    ("amqp://user@", ("127.0.0.1", 5672, "user", "", "/")),
    ("amqp://user:pass@", ("127.0.0.1", 5672, "user", "pass", "/")),
    ("amqp://host", ("host", 5672, "guest", "guest", "/")),
    ("amqp://:10000", ("127.0.0.1", 10000, "guest", "guest", "/")),
    ("amqp:///vhost", ("127.0.0.1", 5672, "guest", "guest", "vhost")),
    ("amqp://host/", ("host", 5672, "guest", "guest", "/")),
    ("amqp://host/%2F", ("host", 5672, "guest", "guest", "/")),
    ("amqp://host/%2f", ("host", 5672, "guest", "guest", "/")),
    ("amqp://[::1]", ("::1", 5672, "guest", "guest", "/")),
    ("amqp://[::1]:5673/%2Fprod", ("::1", 5673, "guest", "guest", "/prod")),
    ("amqp://us%40er:p%3Ass@h/v%20h", ("h", 5672, "us@er", "p:ss", "v h")),
    ("AMQP://host", ("host", 5672, "guest", "guest", "/")),
])
def test_uri_spec_examples(uri, expected):
    p = parse_uri(uri)
    assert (p.host, p.port, p.username, p.password, p.vhost) == expected


def test_amqps_default_port_and_tls():
    p = parse_uri("amqps://h")
    assert p.tls and p.port == 5671
    assert parse_uri("amqps://h:1234").port == 1234


def test_query_parameters():
    p = parse_uri("amqp://h?heartbeat=5&connection_timeout=2500&frame_max=8192&channel_max=10"
                  "&auth_mechanism=external&auth_mechanism=plain")
    assert p.heartbeat == 5
    assert p.connection_timeout == 2.5  # milliseconds in the URI, seconds here
    assert p.frame_max == 8192 and p.channel_max == 10
    assert p.auth_mechanisms == ("EXTERNAL", "PLAIN")


def test_tls_query_parameters():
    p = parse_uri("amqps://myhost?cacertfile=/ca.pem&certfile=/c.pem&keyfile=/k.pem"
                  "&verify=verify_none&server_name_indication=other")
    assert (p.cacertfile, p.certfile, p.keyfile, p.verify, p.server_name_indication) == \
        ("/ca.pem", "/c.pem", "/k.pem", "verify_none", "other")
    assert p.sni_hostname == "other"
    assert parse_uri("amqps://myhost").sni_hostname == "myhost"
    assert parse_uri("amqps://myhost?server_name_indication=disable").sni_hostname is None


def test_keyword_overrides_win():
    p = parse_uri("amqp://u:p@h/v?heartbeat=5", heartbeat=7, vhost="w", auth_mechanism="external")
    assert p.heartbeat == 7 and p.vhost == "w" and p.auth_mechanisms == ("EXTERNAL",)
    with pytest.raises(TypeError, match="unknown connection parameter"):
        parse_uri("amqp://h", hearbeat=1)


@pytest.mark.parametrize("uri, match", [
    ("http://host", "amqp:// or amqps://"),
    ("amqp://host:notaport", "port"),
    ("amqp://host:70000", "port"),
    ("amqp://host/a/b", "%2F"),
    ("amqp://host?heartbeat=abc", "integer"),
    ("amqp://host?heartbeat=-1", "heartbeat"),
    ("amqp://host?frame_max=100", "frame_max"),
    ("amqp://host?bogus=1", "unknown query parameter"),
    ("amqp://host?auth_mechanism=cram-md5", "not supported"),
    ("amqp://host?verify=maybe", "verify"),
    ("amqp://host?connection_timeout=0", "connection_timeout"),
])
def test_bad_uris(uri, match):
    with pytest.raises(ValueError, match=match):
        parse_uri(uri)


def test_redacted_uri_hides_password():
    p = parse_uri("amqp://bob:secret@h:1/v")
    assert "secret" not in p.redacted_uri() and "bob@h:1/v" in p.redacted_uri()


def test_ssl_context_verify_peer_defaults():
    ctx = parse_uri("amqps://h").make_ssl_context()
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_ssl_context_verify_none():
    ctx = parse_uri("amqps://h?verify=verify_none").make_ssl_context()
    assert ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname


def test_ssl_context_sni_disable_skips_hostname_check():
    ctx = parse_uri("amqps://h?server_name_indication=disable").make_ssl_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and not ctx.check_hostname


def test_ssl_context_loads_files(tls_files):
    ca, cert, key = tls_files
    p = parse_uri(f"amqps://localhost?cacertfile={ca}&certfile={cert}&keyfile={key}")
    ctx = p.make_ssl_context()
    assert ctx.cert_store_stats()["x509_ca"] >= 1  # the CA file was loaded
    with pytest.raises((OSError, ssl.SSLError)):
        parse_uri("amqps://h?cacertfile=/nonexistent/ca.pem").make_ssl_context()
    with pytest.raises(ValueError, match="keyfile given without certfile"):
        parse_uri(f"amqps://h?keyfile={key}").make_ssl_context()


def test_explicit_ssl_context_is_used_as_is():
    ctx = ssl.create_default_context()
    assert parse_uri("amqps://h", ssl_context=ctx).make_ssl_context() is ctx


def test_parameters_validate_directly():
    with pytest.raises(ValueError):
        ConnectionParameters(port=0)
    with pytest.raises(ValueError):
        ConnectionParameters(channel_max=70000)
    assert ConnectionParameters(auth_mechanisms="amqplain").auth_mechanisms == ("AMQPLAIN",)
