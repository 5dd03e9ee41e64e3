"""protocol/peer.py: the protocol a server speaks, told from its first bytes (an HTTP status
line, a TLS record, another AMQP header), and the sentences the clients raise with them."""

from __future__ import annotations

from hypothesis import given, strategies as st

from spark_amqp.protocol import peer
from spark_amqp.protocol.peer import (AMQP091, AMQP10, HTTP, STREAM, TLS, closed_before_answer_hint,
                                      identify, wrong_protocol_message)

# what each server sent back on this machine (RabbitMQ 3.10.8's stream port answered the
# 0-9-1 header by closing; the management port with aiohttp's and cowboy's 400)
HTTP_400 = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"
TLS_ALERT = b"\x15\x03\x03\x00\x02\x02\x46"           # alert, TLS 1.2, fatal protocol_version
AMQP_091 = b"AMQP\x00\x00\x09\x01"


def test_identify_names_each_protocol():
    assert identify(HTTP_400) == HTTP
    assert identify(b"HTTP/1.0 400 Bad Request\r\n") == HTTP
    assert identify(TLS_ALERT) == TLS
    assert identify(b"\x16\x03\x01\x02\x00") == TLS     # a handshake record
    assert identify(AMQP_091) == AMQP091
    assert identify(b"AMQP\x03\x01\x00\x00") == AMQP10
    assert identify(b"AMQP\x01\x01\x00\x09") == "AMQP 1-1-0-9"
    # an AMQP 0-9-1 connection.start frame and a stream-protocol frame: none of these
    assert identify(b"\x01\x00\x00\x00\x00\x01\xf4\x00\x0a\x00\x0a") is None
    assert identify(b"\x00\x00\x00\x0c\x80\x11\x00\x01") is None
    assert identify(b"HTT") is None and identify(b"") is None


def test_the_message_for_the_management_port_says_http_and_the_usual_port():
    text = wrong_protocol_message(HTTP_400, "amqp://guest@127.0.0.1:15672/%2F", AMQP091)
    assert text.startswith("the server at amqp://guest@127.0.0.1:15672/%2F answered in HTTP "
                           "('HTTP/1.1 400 Bad Request'), not AMQP 0-9-1: is this the "
                           "management port?")
    assert "usually on port 5672" in text
    text = wrong_protocol_message(AMQP_091, "rabbitmq-stream://h:5672", STREAM)
    assert "speaks AMQP 0-9-1, not the stream protocol" in text and "5552" in text
    assert "TLS port" in wrong_protocol_message(TLS_ALERT, "h:5671", AMQP091)
    # its own protocol (or bytes it cannot tell): no message, the caller decodes as usual
    assert wrong_protocol_message(AMQP_091, "h:5672", AMQP091) is None
    assert wrong_protocol_message(b"\x01\x00\x00\x00\x00\x01\xf4", "h:5672", AMQP091) is None


def test_a_silent_close_is_explained_by_the_port():
    assert "port 15672 is RabbitMQ's management port (HTTP)" in \
        closed_before_answer_hint(15672, AMQP091)
    assert "port 5552 is the stream protocol's port" in closed_before_answer_hint(5552, AMQP091)
    assert "connect with TLS" in closed_before_answer_hint(5671, AMQP091)
    generic = closed_before_answer_hint(40000, STREAM)
    assert "TLS port" in generic and "usually on port 5552" in generic
    assert set(peer.RABBITMQ_PORTS) >= {5672, 5671, 5552, 15672}


@given(st.binary(max_size=64))
def test_identify_never_raises_and_only_names_known_shapes(data):
    name = identify(data)
    if name == HTTP:
        assert data.startswith(b"HTTP/")
    elif name == TLS:
        assert data[0] in (20, 21, 22, 23) and data[1] == 3
    elif name is not None:
        assert data.startswith(b"AMQP") and len(data) >= 8
