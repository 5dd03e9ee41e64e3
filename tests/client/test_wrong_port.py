"""A client pointed at another protocol's port says so (protocol/peer.py) instead of failing in
its codec ("FrameError (501): frame of 1345270070 bytes on channel 21588 exceeds frame-max",
the management port's "HTTP/1." read as a frame header): the AMQP 0-9-1 client and the
stream-protocol client, against fake servers, the embedded broker's management port and
RabbitMQ's ports 15672 (management) and 5672/5552."""

from __future__ import annotations

import os
import socket
import threading
import urllib.parse

import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.client import ConnectionLost, ProtocolMismatch, connect
from spark_amqp.client.stream import connect as stream_connect


class _Answering:
    """A TCP server on an ephemeral port that reads what the client sends first and answers
    ``reply`` (then closes), in a thread."""

    def __init__(self, reply: bytes):
        self.reply = reply
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.listener.settimeout(10)
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        with sock:
            sock.settimeout(10)
            try:
                sock.recv(4096)
                if self.reply:
                    sock.sendall(self.reply)
            except OSError:
                pass

    def __enter__(self) -> "_Answering":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.listener.close()
        self.thread.join(10)


HTTP_400 = (b"HTTP/1.1 400 Bad Request\r\ncontent-length: 11\r\nconnection: close\r\n\r\n"
            b"Bad Request")


@pytest.mark.parametrize("client", ["amqp", "stream"])
def test_an_http_server_is_named_as_such(client):
    with _Answering(HTTP_400) as srv:
        with pytest.raises(ProtocolMismatch) as info:
            if client == "amqp":
                connect(f"amqp://guest:guest@127.0.0.1:{srv.port}/%2F", connection_timeout=10)
            else:
                stream_connect(f"rabbitmq-stream://guest:guest@127.0.0.1:{srv.port}/%2F")
    text = str(info.value)
    assert f"127.0.0.1:{srv.port}" in text and "answered in HTTP ('HTTP/1.1 400 Bad Request')" \
        in text and "management port?" in text, text
    assert ("usually on port 5672" if client == "amqp" else "usually on port 5552") in text
    assert "frame" not in text.lower()


def test_a_tls_alert_is_named_as_such():
    with _Answering(b"\x15\x03\x03\x00\x02\x02\x46") as srv:
        with pytest.raises(ProtocolMismatch, match=r"answered with a TLS record.*amqps://"):
            connect(f"amqp://guest:guest@127.0.0.1:{srv.port}/%2F", connection_timeout=10)


def test_a_silent_close_before_connection_start_names_the_likely_causes():
    with _Answering(b"") as srv:
        with pytest.raises(ConnectionLost, match=r"waited for connection\.start: a TLS port "
                                                 r"closes a plain connection so"):
            connect(f"amqp://guest:guest@127.0.0.1:{srv.port}/%2F", connection_timeout=10)


def test_the_embedded_brokers_management_port():
    with EmbeddedBroker(management=True) as b:
        port = b.management_port
        with pytest.raises(ProtocolMismatch, match=rf"127\.0\.0\.1:{port}/%2F answered in HTTP "
                                                   r"\('HTTP/1\.\d 400 Bad Request'\), not AMQP "
                                                   r"0-9-1: is this the management port\?"):
            connect(f"amqp://guest:guest@127.0.0.1:{port}/%2F")
        with pytest.raises(ProtocolMismatch, match="answered in HTTP"):
            stream_connect(f"rabbitmq-stream://guest:guest@127.0.0.1:{port}/%2F")


def test_rabbitmqs_management_and_amqp_ports(rabbitmq_url):
    """RabbitMQ 3.10.8's management listener (cowboy) closes a connection that opens with
    the AMQP header without answering: the port number tells; the stream client gets an
    HTTP 400, and on the AMQP port the 0-9-1 header."""
    mgmt = urllib.parse.urlsplit(os.environ.get("SPARK_AMQP_RABBITMQ_MANAGEMENT_URL",
                                                "http://127.0.0.1:15672/"))
    host, port = mgmt.hostname, mgmt.port or 15672
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError:
        pytest.skip(f"RabbitMQ's management plugin is not reachable at {host}:{port}")
    amqp = urllib.parse.urlsplit(rabbitmq_url)
    with pytest.raises((ConnectionLost, ProtocolMismatch)) as info:
        connect(f"amqp://guest:guest@{host}:{port}/%2F", connection_timeout=10)
    text = str(info.value)
    if port == 15672:
        assert "port 15672 is RabbitMQ's management port (HTTP)" in text \
            or "answered in HTTP" in text, text
    assert "usually on port 5672" in text, text
    assert "frame" not in text.lower(), text
    with pytest.raises(ProtocolMismatch, match="answered in HTTP.*usually on port 5552"):
        stream_connect(f"rabbitmq-stream://guest:guest@{host}:{port}/%2F")
    with pytest.raises(ProtocolMismatch, match="speaks AMQP 0-9-1, not the stream protocol"):
        stream_connect(f"rabbitmq-stream://guest:guest@{amqp.hostname}:{amqp.port or 5672}/%2F")
