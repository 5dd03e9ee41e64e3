"""Hypothesis over the management API's routes, query parameters and JSON bodies: no answer
is a 500 (issue 41: "malformed input answers 4xx, never 500"), and the broker still answers
afterwards.

Requests are built from the server's own route table (every method and pattern, path
parameters from names that exist, names that do not, and odd text: percent signs, slashes,
``..``, long and non-ASCII strings), the query parameters the lists read, and bodies that are
either any JSON value or objects with the keys the routes read holding any JSON value. They go
as raw HTTP/1.1 to an embedded broker of this module's own, as an administrator or as a
``management`` user (a definitions import may add vhosts and users: the broker is this test's
alone; ``guest`` itself is never in a generated name, so the session keeps its login).

Its CI time is bounded by the ``management-fuzz`` settings profile: 500 examples (~6 s);
``SPARK_AMQP_FUZZ_EXAMPLES=20000`` runs a long fuzz (found the findings fixed with issue 41:
definitions entries that were not objects or names that were not strings gave 500s).
"""

from __future__ import annotations

import base64
import json
import os
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_amqp.broker.config import BrokerConfig, Permission, User
from spark_amqp.broker.embedded import EmbeddedBroker
from spark_amqp.management.server import _ROUTES

from .test_limits import _port, _request

settings.register_profile(
    "management-fuzz", max_examples=int(os.environ.get("SPARK_AMQP_FUZZ_EXAMPLES", "500")), deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture])

USERS = {"guest": "guest", "fuzz-mgmt": "pw"}
NAMES = ["%2F", "fuzz-vhost", "amq.direct", "amq.topic", "amq.default", "fuzz-q", "fuzz-x", "q", "e",
         "source", "destination", "fuzz-q~", "~", "..", "%2e%2e", "a%2Fb", "%", "%zz", "%00", "%C3%A9",
         "%FF", "x" * 300]


@pytest.fixture(scope="module")
def fuzz_broker():
    cfg = BrokerConfig()
    cfg.users["fuzz-mgmt"] = User("fuzz-mgmt", "pw", ["management"])
    cfg.vhosts.append("fuzz-vhost")
    cfg.permissions[("fuzz-mgmt", "/")] = Permission("^fuzz", "^fuzz", "^fuzz")
    cfg.permissions[("guest", "fuzz-vhost")] = Permission()
    with EmbeddedBroker(config=cfg, management=True) as b:
        port = _port(b.management_url)
        auth = [("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode()),
                ("Content-Type", "application/json")]
        assert _request(port, "PUT", "/api/queues/%2F/fuzz-q", auth, b'{"durable": true}')[0] == 201
        assert _request(port, "PUT", "/api/exchanges/%2F/fuzz-x", auth, b'{"type": "topic"}')[0] == 201
        assert _request(port, "POST", "/api/bindings/%2F/e/fuzz-x/q/fuzz-q", auth, b'{"routing_key": "k"}')[0] == 201
        yield b


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=False, allow_infinity=False), _text,
                    st.sampled_from(["true", "false", "0", "-1", "1e309", "direct", "headers", "stream",
                                     "quorum", "base64", "string", "auto", "ack_requeue_true",
                                     "reject_requeue_false", "x-queue-type", "x-max-length", "x-match",
                                     "%2F", "fuzz-q", "fuzz-x", "amq.direct", ""]))
_json = st.recursive(_scalar, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                      st.dictionaries(_text, kids, max_size=4)),
                     max_leaves=20)
_KEYS = ["durable", "auto_delete", "internal", "type", "arguments", "routing_key", "payload",
         "payload_encoding", "properties", "count", "ackmode", "encoding", "truncate", "users", "vhosts",
         "permissions", "queues", "exchanges", "bindings", "name", "vhost", "source", "destination",
         "destination_type", "tags", "password", "password_hash", "hashing_algorithm", "headers",
         "x-queue-type", "x-match", "alternate-exchange", "x-dead-letter-exchange", "delivery_mode",
         "priority", "user_id", "expiration", "timestamp", "configure", "write", "read"]


def _shaped(kids):
    """Objects with the keys the routes read, nested as definitions and properties nest them."""
    return st.dictionaries(st.sampled_from(_KEYS), kids, max_size=8)


_body_value = st.recursive(_json, lambda kids: st.one_of(_shaped(kids), st.lists(_shaped(kids), max_size=3)),
                           max_leaves=30)
_segment = st.one_of(st.sampled_from(NAMES), st.text(max_size=12).map(lambda s: urllib.parse.quote(s, safe="")),
                     st.text(alphabet="%/.~-_aZ09é", max_size=10))
_QUERY_KEYS = ["page", "page_size", "name", "use_regex", "columns", "sort", "sort_reverse", "if-unused",
               "if-empty", "download", "lengths_age", "lengths_incr", "msg_rates_age", "pagination"]


@st.composite
def requests(draw):
    method, pattern, _fn, _p = draw(st.sampled_from(_ROUTES))
    if draw(st.integers(0, 9)) == 0:
        method = draw(st.sampled_from(["GET", "PUT", "POST", "DELETE", "HEAD", "OPTIONS", "PATCH"]))
    segments = [draw(_segment) if p.startswith("{") else p for p in pattern]
    query = draw(st.dictionaries(st.sampled_from(_QUERY_KEYS),
                                 st.one_of(_text, st.sampled_from(["1", "0", "-5", "500", "501", "true",
                                                                    "name,messages", "(", ".*", "a{99999}"])),
                                 max_size=4))
    path = "/api/" + "/".join(segments)
    if query:
        path += "?" + urllib.parse.urlencode(query)
    if method in ("PUT", "POST", "DELETE", "PATCH"):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            body = draw(st.binary(max_size=64))
        else:
            body = json.dumps(draw(_body_value)).encode()
    else:
        body = b""
    user = draw(st.sampled_from(sorted(USERS)))
    return method, path, body, user


@settings(settings.get_profile("management-fuzz"))
@given(req=requests())
def test_no_route_answers_500(fuzz_broker, req):
    method, path, body, user = req
    port = _port(fuzz_broker.management_url)
    auth = "Basic " + base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()
    headers = [("Authorization", auth)]
    if body:
        headers.append(("Content-Type", "application/json"))
    status, _, text = _request(port, method, path, headers, body)
    assert 0 < status < 500, (method, path, body[:300], status, text[:300])


def test_the_broker_still_answers_after_the_fuzz(fuzz_broker):
    port = _port(fuzz_broker.management_url)
    auth = [("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())]
    for path in ("/api/overview", "/api/queues", "/api/exchanges", "/api/bindings", "/api/definitions"):
        assert _request(port, "GET", path, auth)[0] == 200, path
