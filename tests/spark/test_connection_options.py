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
