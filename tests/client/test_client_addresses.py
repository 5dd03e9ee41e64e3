"""Several broker addresses: the URI host list, ``addresses=``, shuffling and failover of
``connect()`` (issue 27). Rotation is tested against two embedded brokers and closed ports
(cheap); the real three-node RabbitMQ cluster is in tests/rabbitmq_cluster/."""

from __future__ import annotations

import socket
import time

import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.client import AllAddressesFailed, ConnectionLost, connect, parse_addresses, parse_uri


def closed_port() -> int:
    """A local port nothing listens on (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("uri, addresses", [
    ("amqp://u:p@h1:5672,h2:5673/%2F", (("h1", 5672), ("h2", 5673))),
    ("amqp://u:p@h1,h2,h3/v", (("h1", 5672), ("h2", 5672), ("h3", 5672))),
    ("amqps://h1, [::1]:5999 ,h%61/v", (("h1", 5671), ("::1", 5999), ("ha", 5671))),
    ("amqp://guest:guest@127.0.0.1:5622,127.0.0.1:5632/%2F",
     (("127.0.0.1", 5622), ("127.0.0.1", 5632))),
])
def test_host_list_in_the_uri(uri, addresses):
    p = parse_uri(uri)
    assert p.addresses == addresses
    assert (p.host, p.port) == addresses[0]
    assert p.address_list() == list(addresses)
    assert p.redacted_uri(all_addresses=True).count(",") == len(addresses) - 1
    assert "p@" not in p.redacted_uri(all_addresses=True)


def test_one_host_keeps_no_address_list():
    p = parse_uri("amqp://h:5673/%2F")
    assert p.addresses == () and p.address_list() == [("h", 5673)]


@pytest.mark.parametrize("uri, needle", [
    ("amqp://u:p@h1:5672,h2:xx/%2F", "address 2 ('h2:xx')"),
    ("amqp://u:p@h1,,h3/%2F", "address 2 ('') of 'h1,,h3' is empty"),
    ("amqp://u:p@h1:99999/%2F", "bad port '99999'"),
    ("amqp://u:p@h1,::1/%2F", "IPv6 address goes in brackets"),
    ("amqp://u:p@h1,[::1/%2F", "malformed AMQP URI 'amqp://u:***@h1,[::1/%2F'"),
])
def test_bad_entry_is_named(uri, needle):
    with pytest.raises(ValueError) as ei:
        parse_uri(uri)
    assert needle in str(ei.value)
    assert ":p@" not in str(ei.value)  # password redacted


def test_addresses_keyword_and_query_parameters():
    p = parse_uri("amqp://u:p@ignored/%2F?shuffle_addresses=false&failover_timeout=2500",
                  addresses="a:1,b")
    assert p.addresses == (("a", 1), ("b", 5672))
    assert p.shuffle_addresses is False and p.failover_timeout == 2.5
    assert parse_uri("amqp://h", addresses=[("x", 7), "y:8"]).addresses == (("x", 7), ("y", 8))
    with pytest.raises(ValueError, match="shuffle_addresses='maybe'"):
        parse_uri("amqp://h?shuffle_addresses=maybe")
    with pytest.raises(ValueError, match="empty"):
        parse_addresses(" , ")


@pytest.fixture(scope="module")
def two_brokers():
    with EmbeddedBroker() as a, EmbeddedBroker() as b:
        yield a, b


def _hostport(url: str) -> str:
    p = parse_uri(url)
    return f"127.0.0.1:{p.port}"


def test_connect_skips_a_dead_address_in_the_given_order(two_brokers):
    a, _ = two_brokers
    dead = closed_port()
    uri = f"amqp://guest:guest@127.0.0.1:{dead},{_hostport(a.url)}/%2F"
    with connect(uri, shuffle_addresses=False) as conn:
        assert conn.params.port == parse_uri(a.url).port
        assert conn.params.addresses[0] == ("127.0.0.1", dead)


def test_shuffle_spreads_connections_over_the_addresses(two_brokers):
    a, b = two_brokers
    uri = f"amqp://guest:guest@{_hostport(a.url)},{_hostport(b.url)}/%2F"
    ports = set()
    for _ in range(20):
        with connect(uri) as conn:
            ports.add(conn.params.port)
    assert ports == {parse_uri(a.url).port, parse_uri(b.url).port}
    firsts = set()
    for _ in range(5):
        with connect(uri, shuffle_addresses=False) as conn:
            firsts.add(conn.params.port)
    assert firsts == {parse_uri(a.url).port}


def test_every_address_down_one_error_lists_each():
    p1, p2 = closed_port(), closed_port()
    t0 = time.monotonic()
    with pytest.raises(AllAddressesFailed) as ei:
        connect(f"amqp://guest:secret@127.0.0.1:{p1},127.0.0.1:{p2}/%2F", failover_timeout=1.2)
    took = time.monotonic() - t0
    assert isinstance(ei.value, ConnectionLost)
    msg = str(ei.value)
    assert f"127.0.0.1:{p1}:" in msg and f"127.0.0.1:{p2}:" in msg
    assert "refused" in msg.lower() and "failover_timeout 1.2 s" in msg and "secret" not in msg
    assert set(ei.value.errors) == {f"127.0.0.1:{p1}", f"127.0.0.1:{p2}"}
    assert 1.2 <= took < 6  # rounds with back-off until the bound, then stop


def test_one_address_without_failover_raises_its_own_error():
    with pytest.raises(ConnectionLost) as ei:
        connect(f"amqp://guest:guest@127.0.0.1:{closed_port()}/%2F")
    assert not isinstance(ei.value, AllAddressesFailed)


def test_failover_timeout_waits_for_a_broker_that_comes_up():
    port = closed_port()
    broker = {}

    def start_later():
        time.sleep(1.0)
        broker["b"] = EmbeddedBroker(port=port).start()

    import threading

    t = threading.Thread(target=start_later)
    t.start()
    try:
        with connect(f"amqp://guest:guest@127.0.0.1:{port}/%2F", failover_timeout=30) as conn:
            assert conn.is_open
    finally:
        t.join()
        if "b" in broker:
            broker["b"].stop()


def test_a_refused_login_is_not_retried_on_the_other_addresses(two_brokers):
    from spark_amqp.protocol.errors import AccessRefused

    a, b = two_brokers
    t0 = time.monotonic()
    with pytest.raises(AccessRefused):
        connect(f"amqp://guest:wrong@{_hostport(a.url)},{_hostport(b.url)}/%2F",
                failover_timeout=30)
    assert time.monotonic() - t0 < 10


def test_all_addresses_failed_pickles_and_copies():
    import pickle

    from spark_amqp.client.errors import copy_error

    p1 = closed_port()
    with pytest.raises(AllAddressesFailed) as ei:
        connect(f"amqp://g:g@127.0.0.1:{p1},127.0.0.1:{p1}/%2F")
    back = pickle.loads(pickle.dumps(ei.value))
    assert isinstance(back, AllAddressesFailed) and str(back) == str(ei.value)
    assert set(back.errors) == {f"127.0.0.1:{p1}"}
    copy_error(ei.value)
