"""Fixtures of the client tests: TLS test certificates, skip-safe broker parametrisation."""

from __future__ import annotations

import shutil
import subprocess

import pytest


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory):
    """(ca.pem, server/client cert.pem, key.pem): a self-signed certificate for "localhost"
    and 127.0.0.1 made with the openssl CLI (skips when openssl is missing)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl CLI not found: cannot make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    key, cert = d / "key.pem", d / "cert.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60)
    return str(cert), str(cert), str(key)


@pytest.fixture(params=["embedded", "rabbitmq"])
def any_broker_url(request) -> str:
    """Like tests/conftest.py's ``broker_url`` but skips (instead of erroring) when the
    embedded broker cannot be started yet."""
    if request.param == "rabbitmq":
        return request.getfixturevalue("rabbitmq_url")
    try:
        return request.getfixturevalue("embedded_broker").url
    except (ImportError, AttributeError, NotImplementedError) as exc:
        pytest.skip(f"embedded broker not available: {exc!r}")


@pytest.fixture(scope="session")
def embedded_broker(embedded_broker_310):
    """The client tests compare the embedded broker with the local RabbitMQ 3.10.8: its 3.10 mode
    (tests/test_rabbitmq_versions.py and the 4.3 tests here cover the default 4.3 mode)."""
    return embedded_broker_310
