"""amqps end to end: the embedded broker's TLS listener against the project's client and pika.

A throwaway PKI is made with the ``openssl`` CLI (skipped with a reason when it is missing):
a CA, a server certificate for localhost / 127.0.0.1, a client certificate
(``CN=guest,O=spark-amqp-tests``) and a second, unrelated CA for the wrong-CA case.
RabbitMQ behaviour mirrored: https://www.rabbitmq.com/docs/ssl (``ssl_options.verify``,
``fail_if_no_peer_cert``) and rabbitmq_auth_mechanism_ssl (EXTERNAL, ``ssl_cert_login_from``).
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

import pytest

from spark_amqp.broker import ConfigError, EmbeddedBroker, PortInUseError, load_config
from spark_amqp.broker.auth import AuthFailure, certificate_user
from spark_amqp.broker.config import BrokerConfig, Permission, TLSConfig, User
from spark_amqp.client import connect
from spark_amqp.protocol import BasicProperties
from spark_amqp.protocol.errors import AccessRefused

pytestmark = pytest.mark.timeout(120)

CLIENT_DN = "CN=guest,O=spark-amqp-tests"


def _openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {r.stderr.strip()}")


def _make_ca(d: Path, name: str, cn: str) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-days", "2", "-subj", f"/CN={cn}", "-keyout", f"{name}.key", "-out", f"{name}.pem",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _make_leaf(d: Path, name: str, subj: str, ext: str) -> None:
    (d / f"{name}.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n" + ext)
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-subj", subj, "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> SimpleNamespace:
    """Paths (str) of ca, server, client PEM files and of a second CA that signed nothing here."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not installed: cannot make test certificates "
                    "(install openssl to run the TLS tests)")
    d = tmp_path_factory.mktemp("pki")
    _make_ca(d, "ca", "spark-amqp test CA")
    _make_ca(d, "other_ca", "some other CA")
    _make_leaf(d, "server", "/CN=localhost",
               "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    _make_leaf(d, "client", "/O=spark-amqp-tests/CN=guest", "extendedKeyUsage=clientAuth\n")
    return SimpleNamespace(**{f"{n}_{k}": str(d / f"{n}.{ext}")
                              for n in ("ca", "other_ca", "server", "client")
                              for k, ext in (("cert", "pem"), ("key", "key"))}, dir=d)


def _amqps(url: str, **params: str) -> str:
    return url + "?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items())


@pytest.fixture(scope="module")
def tls_broker(pki):
    """Server authentication only (RabbitMQ's ``verify = verify_none``): PLAIN over TLS."""
    with EmbeddedBroker(tls=TLSConfig(pki.server_cert, pki.server_key)) as b:
        yield b


@pytest.fixture(scope="module")
def mtls_broker(pki):
    """Client certificates required (verify_peer + fail_if_no_peer_cert): EXTERNAL offered,
    user name from the certificate's CN."""
    tls = TLSConfig(pki.server_cert, pki.server_key, cacertfile=pki.ca_cert, verify_peer=True,
                    fail_if_no_peer_cert=True, cert_login_from="common_name")
    with EmbeddedBroker(tls=tls) as b:
        yield b


def _client_cert(pki) -> dict:
    return dict(cacertfile=pki.ca_cert, certfile=pki.client_cert, keyfile=pki.client_key)


def test_urls_and_plain_listener_unchanged(tls_broker):
    assert tls_broker.tls_url == f"amqps://guest:guest@127.0.0.1:{tls_broker.tls_port}/%2F"
    assert tls_broker.tls_port not in (0, tls_broker.port)
    with connect(tls_broker.url) as conn, conn.channel() as ch:  # plain amqp still there
        assert ch.queue_declare("", exclusive=True).queue


def test_amqps_publish_with_confirms_and_consume(tls_broker, pki, unique):
    q = unique("tls")
    with connect(_amqps(tls_broker.tls_url, cacertfile=pki.ca_cert)) as conn:
        assert conn._transport.version in ("TLSv1.2", "TLSv1.3")
        ch = conn.channel()
        ch.queue_declare(q, durable=True)
        ch.confirm_select()
        for i in range(50):
            ch.basic_publish(b"m%d" % i, "", q, BasicProperties(delivery_mode=2, message_id=str(i)))
        res = ch.wait_for_confirms(timeout=10)
        assert not res.nacked
        ch.basic_qos(20)
        ch.basic_consume(q)
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 50 and time.monotonic() < deadline:
            for d in ch.drain(timeout=0.5):
                got.append(d)
                ch.basic_ack(d.delivery_tag)
        assert [d.body for d in got] == [b"m%d" % i for i in range(50)]
        assert [d.properties.message_id for d in got] == [str(i) for i in range(50)]
        ch.queue_delete(q)


def test_large_message_over_tls(tls_broker, pki):
    body = os.urandom(1_000_000)  # many TLS records and frames
    with connect(_amqps(tls_broker.tls_url, cacertfile=pki.ca_cert)) as conn, conn.channel() as ch:
        q = ch.queue_declare("", exclusive=True).queue
        ch.confirm_select()
        ch.basic_publish(body, "", q)
        ch.wait_for_confirms(timeout=10)
        d = ch.basic_get(q, no_ack=True)
        assert d is not None and d.body == body


def test_wrong_ca_fails_with_certificate_verify_error(tls_broker, pki):
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        connect(_amqps(tls_broker.tls_url, cacertfile=pki.other_ca_cert), connection_timeout=5)


def test_host_name_mismatch_fails(tls_broker, pki):
    with pytest.raises(ssl.SSLCertVerificationError, match="match|mismatch"):
        connect(_amqps(tls_broker.tls_url, cacertfile=pki.ca_cert,
                       server_name_indication="not-this-host.example"), connection_timeout=5)


def test_verify_none_needs_no_ca(tls_broker):
    with connect(_amqps(tls_broker.tls_url, verify="verify_none")) as conn, conn.channel() as ch:
        q = ch.queue_declare("", exclusive=True).queue
        ch.basic_publish(b"x", "", q)
        d = None
        deadline = time.monotonic() + 5
        while d is None and time.monotonic() < deadline:
            d = ch.basic_get(q, no_ack=True)
        assert d is not None and d.body == b"x"


def test_plain_client_on_tls_port_is_refused(tls_broker):
    # an amqp:// client talking cleartext to the TLS port: the TLS handshake fails, the
    # broker drops the socket (RabbitMQ does the same) and the client gets an OSError
    url = tls_broker.url.replace(f":{tls_broker.port}/", f":{tls_broker.tls_port}/")
    with pytest.raises(OSError):
        connect(url, connection_timeout=5)


def test_pika_over_tls(tls_broker, pki, unique):
    pika = pytest.importorskip("pika")
    ctx = ssl.create_default_context(cafile=pki.ca_cert)
    params = pika.ConnectionParameters(
        host="localhost", port=tls_broker.tls_port, virtual_host="/",
        credentials=pika.PlainCredentials("guest", "guest"),
        ssl_options=pika.SSLOptions(ctx, "localhost"), connection_attempts=1, socket_timeout=5)
    conn = pika.BlockingConnection(params)
    try:
        ch = conn.channel()
        q = unique("pika-tls")
        ch.queue_declare(q, exclusive=True)
        ch.confirm_delivery()
        for i in range(20):
            ch.basic_publish("", q, b"p%d" % i)  # raises on nack/return in confirm mode
        bodies = []
        for _method, _props, body in ch.consume(q, inactivity_timeout=2):
            if body is None:
                break
            bodies.append(body)
            if len(bodies) == 20:
                break
        ch.cancel()
        assert bodies == [b"p%d" % i for i in range(20)]
    finally:
        conn.close()


# ------------------------------------------------------------------ client certificates / EXTERNAL

def test_certificate_user_names():
    cert = {"subject": ((("organizationName", "spark-amqp-tests"),), (("commonName", "guest"),))}
    assert certificate_user(cert, "common_name") == "guest"
    assert certificate_user(cert) == CLIENT_DN  # RFC 4514: last RDN first
    odd = {"subject": ((("commonName", "a,b+c"),),)}
    assert certificate_user(odd) == "CN=a\\,b\\+c"
    with pytest.raises(AuthFailure, match="client certificate"):
        certificate_user(None)


def test_external_with_client_certificate(mtls_broker, pki):
    url = _amqps(mtls_broker.tls_url, **_client_cert(pki), auth_mechanism="external")
    with connect(url) as conn, conn.channel() as ch:
        q = ch.queue_declare("", exclusive=True).queue
        ch.confirm_select()
        ch.basic_publish(b"via EXTERNAL", "", q)
        ch.wait_for_confirms(timeout=10)
        d = ch.basic_get(q, no_ack=True)
        assert d is not None and d.body == b"via EXTERNAL"


def test_external_with_pika(mtls_broker, pki):
    pika = pytest.importorskip("pika")
    ctx = ssl.create_default_context(cafile=pki.ca_cert)
    ctx.load_cert_chain(pki.client_cert, pki.client_key)
    params = pika.ConnectionParameters(
        host="localhost", port=mtls_broker.tls_port, credentials=pika.credentials.ExternalCredentials(),
        ssl_options=pika.SSLOptions(ctx, "localhost"), connection_attempts=1, socket_timeout=5)
    conn = pika.BlockingConnection(params)
    try:
        ok = conn.channel().queue_declare("", exclusive=True)
        assert ok.method.queue
    finally:
        conn.close()


def test_plain_still_works_with_client_certificate(mtls_broker, pki):
    with connect(_amqps(mtls_broker.tls_url, **_client_cert(pki))) as conn, conn.channel() as ch:
        assert ch.queue_declare("", exclusive=True).queue


def test_external_not_offered_without_required_client_certificates(tls_broker, pki):
    # RabbitMQ refuses EXTERNAL unless verify_peer + fail_if_no_peer_cert; here it is not
    # offered at all, and the client names the mechanism it could not use
    with pytest.raises(AccessRefused, match="EXTERNAL"):
        connect(_amqps(tls_broker.tls_url, **_client_cert(pki), auth_mechanism="external"),
                connection_timeout=5)


def test_external_distinguished_name_default_and_unknown_user(pki):
    # RabbitMQ's default ssl_cert_login_from is distinguished_name: the user is the DN string
    cfg = BrokerConfig()
    cfg.users[CLIENT_DN] = User(CLIENT_DN, "unused")
    cfg.permissions[(CLIENT_DN, "/")] = Permission()
    tls = TLSConfig(pki.server_cert, pki.server_key, cacertfile=pki.ca_cert, verify_peer=True,
                    fail_if_no_peer_cert=True)
    client = _client_cert(pki)
    with EmbeddedBroker(config=cfg, tls=tls) as b:
        with connect(_amqps(b.tls_url, **client, auth_mechanism="external")) as conn:
            conn.channel().close()
        del cfg.users[CLIENT_DN]  # read at each login
        with pytest.raises(AccessRefused, match="does not exist"):
            connect(_amqps(b.tls_url, **client, auth_mechanism="external"), connection_timeout=5)


def test_fail_if_no_peer_cert_refuses_clients_without_certificate(mtls_broker, pki):
    # TLS 1.3: the server's alert may arrive after the client's handshake finished, so the
    # failure is an SSLError or a lost connection (both OSError)
    with pytest.raises(OSError):
        connect(_amqps(mtls_broker.tls_url, cacertfile=pki.ca_cert), connection_timeout=5)


def test_optional_client_certificate_must_verify(pki):
    # verify_peer without fail_if_no_peer_cert: no certificate is fine, but a presented one
    # must verify against the broker's cacertfile
    tls = TLSConfig(pki.server_cert, pki.server_key, cacertfile=pki.other_ca_cert, verify_peer=True)
    with EmbeddedBroker(tls=tls) as b:
        with connect(_amqps(b.tls_url, cacertfile=pki.ca_cert)) as conn:
            conn.channel().close()
        with pytest.raises(OSError):
            connect(_amqps(b.tls_url, **_client_cert(pki)), connection_timeout=5)


# ------------------------------------------------------------------ configuration

def test_tls_config_errors(pki, tmp_path):
    with pytest.raises(ConfigError, match="verify_peer needs cacertfile"):
        TLSConfig(pki.server_cert, pki.server_key, verify_peer=True)
    with pytest.raises(ConfigError, match="needs verify_peer"):
        TLSConfig(pki.server_cert, pki.server_key, fail_if_no_peer_cert=True)
    with pytest.raises(ConfigError, match="not found"):
        TLSConfig(str(tmp_path / "nope.pem"), pki.server_key).ssl_context()
    with pytest.raises(ConfigError, match="cannot load the TLS server certificate"):
        TLSConfig(pki.server_cert, pki.client_key).ssl_context()  # key of another certificate
    with pytest.raises(ConfigError):
        EmbeddedBroker(tls=TLSConfig(str(tmp_path / "nope.pem"))).start()


def test_tls_port_in_use(tls_broker, pki):
    with pytest.raises(PortInUseError, match="--tls-port"):
        EmbeddedBroker(tls=TLSConfig(pki.server_cert, pki.server_key), tls_port=tls_broker.tls_port).start()


def test_cli_tls_options_need_a_certificate():
    r = subprocess.run([sys.executable, "-m", "spark_amqp", "broker", "--port", "0", "--tls-port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1].startswith("Error: a TLS listener needs a server certificate")


def test_toml_tls_section(pki, tmp_path):
    p = tmp_path / "broker.toml"
    p.write_text(f'[tls]\nport = 0\ncertfile = "{pki.server_cert}"\nkeyfile = "{pki.server_key}"\n'
                 f'cacertfile = "{pki.ca_cert}"\nverify = "verify_peer"\nfail_if_no_peer_cert = true\n'
                 f'cert_login_from = "common_name"\n')
    cfg = load_config(p)
    assert cfg.tls == TLSConfig(pki.server_cert, pki.server_key, pki.ca_cert, True, True, "common_name", 0)
    with EmbeddedBroker(config=p) as b:  # the config's [tls] turns the listener on
        url = _amqps(b.tls_url, **_client_cert(pki), auth_mechanism="external")
        with connect(url) as conn:
            conn.channel().close()
    p.write_text('[tls]\nverify = "maybe"\ncertfile = "x"\n')
    with pytest.raises(ConfigError, match="verify must be"):
        load_config(p)
    p.write_text('[tls]\ncertfile = "x"\nverify_peer = true\n')
    with pytest.raises(ConfigError, match="unknown \\[tls\\] key"):
        load_config(p)
    assert load_config(None).tls is None


def test_cli_broker_with_tls(pki):
    """``spark-amqp broker --port 0 --tls-cert --tls-key --tls-port 0`` logs its amqps port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_amqp", "broker", "--port", "0", "--tls-cert", pki.server_cert,
         "--tls-key", pki.server_key, "--tls-port", "0"],
        stderr=subprocess.PIPE, text=True)
    # stderr is read by a thread (and kept drained): readline() in this thread would block past
    # any deadline while the subprocess is still importing (slow on a cold machine)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stderr] + [lines.put("")],
                     daemon=True).start()
    try:
        port, seen = None, []
        deadline = time.monotonic() + 90
        while port is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if not line:
                break
            seen.append(line)
            if "amqps on port" in line:
                port = int(line.split("amqps on port")[1].split()[0].rstrip(","))
        assert port, f"the broker did not log its amqps port; stderr:\n{''.join(seen)[-3000:]}"
        with connect(f"amqps://guest:guest@localhost:{port}/%2F?cacertfile={quote(pki.ca_cert, safe='')}") as conn:
            conn.channel().close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------ the TLS stream listener

def test_stream_protocol_over_tls_plain_and_external(pki):
    """The TLS stream listener (RabbitMQ's stream.listeners.ssl.1) with the broker's TLS
    settings: PLAIN over TLS; with client certificates required, EXTERNAL offered and the
    user taken from the certificate; a plain client on the TLS port gets nothing."""
    import ssl
    from spark_amqp.protocol import stream as S
    from stream_raw import RawStream

    tls = TLSConfig(pki.server_cert, pki.server_key, cacertfile=pki.ca_cert, verify_peer=True,
                    fail_if_no_peer_cert=True, cert_login_from="common_name")
    with EmbeddedBroker(tls=tls, stream_port=0, stream_tls_port=0) as b:
        assert b.stream_tls_url.startswith("rabbitmq-stream+tls://guest:guest@127.0.0.1:")
        ctx = ssl.create_default_context(cafile=pki.ca_cert)
        ctx.load_cert_chain(pki.client_cert, pki.client_key)
        with RawStream(b.stream_tls_port, ssl_context=ctx) as c:
            c.rpc(S.PeerProperties(0, {}))
            mechs = c.rpc(S.SaslHandshake(0)).mechanisms
            assert "EXTERNAL" in mechs and "PLAIN" in mechs
        with RawStream(b.stream_tls_port, ssl_context=ctx) as c:
            opened = c.handshake(mechanism="EXTERNAL", data=b"")
            assert opened.code == S.Code.OK
            assert c.rpc(S.CreateStream(0, "tls-stream", {})).code == S.Code.OK
        with RawStream(b.stream_tls_port, ssl_context=ctx) as c:
            assert c.handshake().code == S.Code.OK          # PLAIN over TLS
        with RawStream(b.stream_port) as c:                 # the plain listener: no EXTERNAL
            c.rpc(S.PeerProperties(0, {}))
            assert "EXTERNAL" not in c.rpc(S.SaslHandshake(0)).mechanisms
        with RawStream(b.stream_tls_port) as c:             # no TLS on the TLS port
            c.send(S.PeerProperties(0, {}))
            assert c.wait_closed(10)
