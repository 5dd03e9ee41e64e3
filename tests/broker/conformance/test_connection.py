"""Connection-level behaviour seen through pika: authentication, vhosts, server capabilities,
frame-max, channel.flow, and which errors close the channel versus the connection
(rules 3, 5, 8, 10 of amqp-0-9-1-from-the-seeds.md §5; RabbitMQ extensions §3)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import pika
import pika.exceptions
import pytest

from conformance_helpers import Collector, broker_closes_channel, broker_closes_connection, connect, get


def with_credentials_or_vhost(url: str, password: str | None = None, vhost: str | None = None):
    u = urlsplit(url)
    netloc = u.netloc
    if password is not None:
        user = u.username or "guest"
        netloc = f"{user}:{password}@{u.hostname}:{u.port}"
    path = u.path if vhost is None else "/" + vhost
    return urlunsplit((u.scheme, netloc, path, u.query, u.fragment))


def test_wrong_password_is_403(broker_url):
    # Rule 3: bad credentials -> RabbitMQ closes with 403 ACCESS_REFUSED when the client has the
    # authentication_failure_close capability (pika sets it); pika raises
    # ProbableAuthenticationError (or AuthenticationError) carrying the 403.
    url = with_credentials_or_vhost(broker_url, password="definitely-wrong")
    with pytest.raises((pika.exceptions.ProbableAuthenticationError,
                        pika.exceptions.AuthenticationError)) as ei:
        connect(url)
    assert "403" in str(ei.value) and "ACCESS_REFUSED" in str(ei.value)


def test_unknown_vhost_is_530(broker_url):
    # Rule 5: spec says 402 INVALID_PATH; RabbitMQ answers connection.open to an unknown vhost
    # (or one the user may not use) with 530 NOT_ALLOWED "vhost ... not found".
    url = with_credentials_or_vhost(broker_url, vhost="spark-amqp-no-such-vhost")
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as ei:
        connect(url)
    assert "530" in str(ei.value) and "NOT_ALLOWED" in str(ei.value)


def test_server_capabilities(conn):
    # RabbitMQ [ext]: connection.start server-properties carry a capabilities table.
    caps = conn._impl.server_capabilities
    for cap in ("publisher_confirms", "exchange_exchange_bindings", "basic.nack",
                "consumer_cancel_notify", "authentication_failure_close", "per_consumer_qos"):
        assert caps.get(cap) is True, cap
    props = conn._impl.server_properties
    assert "product" in props and "version" in props


def test_small_frame_max_splits_large_bodies(amqp):
    # Rule 4: frame-max >= 4096 is negotiated; bodies are split across frames of that size.
    c = amqp.connect(frame_max=4096)
    ch = c.channel()
    q = amqp.queue(ch)
    body = bytes(range(256)) * 400  # 102,400 bytes = 26 body frames
    ch.basic_publish("", q, body)
    col = Collector(c)
    ch.basic_consume(q, col, auto_ack=True)
    assert col.wait(1)[0].body == body


def test_empty_body(amqp, ch):
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"")
    m = get(ch, q, auto_ack=True)
    assert m.body == b""


def test_many_channels(amqp, conn):
    chans = [conn.channel() for _ in range(40)]
    q = amqp.queue(chans[0])
    for i, c in enumerate(chans):
        c.basic_publish("", q, str(i).encode())
    amqp.wait_counts(q, (40, 0))
    numbers = {c.channel_number for c in chans}
    assert len(numbers) == 40 and 0 not in numbers


def test_channel_close_and_reopen(amqp, conn):
    ch = conn.channel()
    q = amqp.queue(ch)
    ch.close()
    ch2 = conn.channel()
    assert ch2.queue_declare(q, passive=True).method.queue == q


def test_channel_flow_active_true_is_ok(conn, ch):
    # Rule 10: channel.flow answered with flow-ok(active).
    assert ch.flow(True) is True


def test_channel_flow_active_false_is_540(conn, ch):
    # Rule 10: the spec lets a client pause deliveries with flow(active=false); RabbitMQ (>= 3.3)
    # rejects it: connection.close 540 NOT_IMPLEMENTED "active=false".
    with broker_closes_connection(540):
        ch.flow(False)
    assert not conn.is_open


def test_connection_error_closes_all_channels(amqp, conn, ch):
    other = conn.channel()
    with broker_closes_connection(540):
        ch.basic_qos(prefetch_size=1, prefetch_count=0)
    assert not conn.is_open and not other.is_open


@pytest.mark.parametrize("code", [404, 403, 405, 406])
def test_channel_errors_leave_connection_open(amqp, conn, code):
    # Reply codes 311-406 are channel exceptions: only the channel is closed (§2.4).
    ch = conn.channel()
    owner = amqp.channel()
    excl = amqp.queue(owner, exclusive=True)
    with broker_closes_channel(code):
        if code == 404:
            ch.queue_declare(amqp.unique("missing"), passive=True)
        elif code == 403:
            ch.queue_declare("amq.forbidden." + amqp.unique("x"))
        elif code == 405:
            ch.queue_declare(excl, passive=True)
        else:
            ch.tx_commit()
    assert conn.is_open
    assert conn.channel().is_open


def test_client_close_requeues_and_reports_no_error(amqp, ch):
    c = amqp.connect()
    q = amqp.queue(ch)
    ch.basic_publish("", q, b"x")
    och = c.channel()
    assert get(och, q) is not None
    c.close()
    assert not c.is_open
    amqp.wait_counts(q, (1, 0))


@pytest.mark.parametrize("secret", ["guest", "a-refreshed-oauth-token"])
def test_update_secret(amqp, conn, ch, secret):
    # RabbitMQ extension connection.update-secret (§3.2): answered with update-secret-ok; the
    # connection and its channels keep working. RabbitMQ's internal auth backend does not check
    # the new secret against the password (3.10.8: a token that is not the password is
    # accepted too), so clients' token-refresh tests pass against it.
    q = amqp.queue(ch)
    conn.update_secret(secret, "conformance refresh")
    assert conn.is_open and ch.is_open
    assert ch.queue_declare(q, passive=True).method.queue == q
    ch2 = conn.channel()
    assert ch2.queue_declare(q, passive=True).method.queue == q
