"""Unit tests of the connection options shared by the amqp source and sink (no broker)."""

import pytest

from spark_amqp.spark.connection_options import (DEFAULT_URI, parse_connection_options,
                                                 parse_uri_option)


class MyError(ValueError):
    pass


def test_uri_default_and_scheme_check_raise_the_callers_error_type():
    assert parse_uri_option({}) == DEFAULT_URI
    assert parse_uri_option({"uri": "  "}) == DEFAULT_URI
    assert parse_uri_option({"uri": " AMQPS://h/v "}) == "AMQPS://h/v"
    with pytest.raises(MyError, match=r"uri must start with amqp:// or amqps://, got 'http://u:\*\*\*@h'"):
        parse_uri_option({"uri": "http://u:secret@h"}, MyError)


def test_connection_kwargs_for_the_client():
    kw = parse_connection_options({"cacertfile": "/ca.pem", "certfile": "/c.pem", "keyfile": "/k.pem",
                                   "verify": "FALSE", "servernameindication": "h",
                                   "heartbeat": "0", "connectiontimeout": "2.5", "other": "x"},
                                  "amqps://h", MyError)
    assert kw == {"cacertfile": "/ca.pem", "certfile": "/c.pem", "keyfile": "/k.pem",
                  "verify": "verify_none", "server_name_indication": "h", "heartbeat": 0,
                  "connection_timeout": 2.5}
    assert parse_connection_options({"verify": "true"}, "amqps://h")["verify"] == "verify_peer"
    assert parse_connection_options({}, "amqp://h") == {}
    from spark_amqp.client import parse_uri

    parse_uri("amqps://h").replace(**kw)  # the client accepts every keyword


@pytest.mark.parametrize("opts, uri, needle", [
    ({"cacertfile": "/ca.pem", "verify": "true"}, "amqp://h",
     "TLS option(s) cacertfile, verify need an amqps:// uri"),
    ({"verify": "maybe"}, "amqps://h", "verify='maybe' is not allowed; allowed: verify_peer"),
    ({"heartbeat": "65536"}, "amqp://h", "heartbeat='65536' is not an integer in 0..65535"),
    ({"heartbeat": "ten"}, "amqp://h", "heartbeat='ten' is not an integer in 0..65535"),
    ({"connectiontimeout": "inf"}, "amqp://h", "connectionTimeout='inf' is not allowed"),
    ({"connectiontimeout": "-1"}, "amqp://h", "connectionTimeout='-1' is not allowed"),
])
def test_bad_values_name_the_option_and_allowed_values(opts, uri, needle):
    with pytest.raises(MyError) as ei:
        parse_connection_options(opts, uri, MyError)
    assert needle in str(ei.value)


def test_several_addresses_validated_at_load():
    """Issue 27: a host list in the uri passes; a bad entry fails at load() naming it."""
    uri = "amqp://guest:guest@127.0.0.1:5622,127.0.0.1:5632/%2F"
    assert parse_uri_option({"uri": uri}) == uri
    with pytest.raises(MyError) as ei:
        parse_uri_option({"uri": "amqp://guest:secret@127.0.0.1:5622,127.0.0.1:x/%2F"}, MyError)
    assert "option uri" in str(ei.value) and "address 2 ('127.0.0.1:x')" in str(ei.value)
    assert "secret" not in str(ei.value)
    kw = parse_connection_options({"addresses": "h1:5622, h2", "shuffleaddresses": "false",
                                   "failovertimeout": "7.5"}, "amqp://h", MyError)
    assert kw == {"addresses": (("h1", 5622), ("h2", 5672)), "shuffle_addresses": False,
                  "failover_timeout": 7.5}
    assert parse_connection_options({"failovertimeout": "0"}, "amqp://h") == {"failover_timeout": 0.0}
    assert parse_connection_options({"addresses": "h"}, "amqps://h")["addresses"] == (("h", 5671),)
    from spark_amqp.client import parse_uri

    parse_uri("amqp://h").replace(**kw)  # the client accepts every keyword


@pytest.mark.parametrize("opts, needle", [
    ({"addresses": "h1,,h2"}, "option addresses: address 2 ('') of 'h1,,h2' is empty"),
    ({"addresses": "h1:0"}, "bad port '0'"),
    ({"shuffleaddresses": "sometimes"}, "shuffleAddresses='sometimes' is not a boolean"),
    ({"failovertimeout": "-1"}, "failoverTimeout='-1' is not allowed"),
])
def test_bad_address_options_name_the_option(opts, needle):
    with pytest.raises(MyError) as ei:
        parse_connection_options(opts, "amqp://h", MyError)
    assert needle in str(ei.value)


def test_source_and_sink_accept_the_address_options():
    from spark_amqp.spark.sink.options import SinkOptionError, parse_sink_options
    from spark_amqp.spark.source.queues.options import parse_source_options

    opts = {"uri": "amqp://u:p@a:1,b:2/%2F", "addresses": "c:3", "shuffleAddresses": "false",
            "failoverTimeout": "5"}
    src = parse_source_options({**opts, "queue": "q"})
    assert src.client_kwargs()["addresses"] == (("c", 3),)
    sink = parse_sink_options(opts)
    assert sink.connect_args()["failover_timeout"] == 5.0
    with pytest.raises(SinkOptionError, match="option uri"):
        parse_sink_options({"uri": "amqp://a:1,b:bad/%2F"})
    with pytest.raises(ValueError, match="option uri"):
        parse_source_options({"uri": "amqp://a:1,b:bad/%2F", "queue": "q"})
