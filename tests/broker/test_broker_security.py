"""Security defaults of the embedded broker (issue 18): RabbitMQ-format password hashes (and
hashes made by this machine's RabbitMQ), the hash-password CLI, loopback_users decisions,
exposure warnings, handshake_timeout and max_message_size. The loopback refusal over a real
non-loopback interface is in test_loopback_netns.py; limits RabbitMQ shares with us are in
conformance/test_handshake_limits.py."""

from __future__ import annotations

import base64
import hashlib
import logging
import shutil
import socket
import subprocess
import time

import pika
import pytest
from click.testing import CliRunner

from spark_amqp import EmbeddedBroker
from spark_amqp.broker import BrokerConfig, ConfigError, load_config
from spark_amqp.broker.auth import AuthFailure, authenticate, check_loopback, is_loopback
from spark_amqp.broker.config import Permission, User
from spark_amqp.broker.exposure import exposure_warnings
from spark_amqp.broker.passwords import HASHING_ALGORITHMS, check_hash, hash_password, verify_password
from spark_amqp.cli.main import cli
from spark_amqp.protocol import PROTOCOL_HEADER, spec

from conformance.raw_amqp import RawPeer

# made on this machine by RabbitMQ 3.10.8:
#   rabbitmqctl eval 'io:format("~s~n", [base64:encode(rabbit_password:hash(<<"p4ss-word">>))]).'
RABBITMQ_HASH_OF_P4SS_WORD = "EoOaxGw851xPOkC3l+rRLaPHwGAJPMhCfkDDEglQCWcHlUts"


# --- password hashes ------------------------------------------------------------------------

def test_hash_is_salt_plus_sha256_of_salt_and_password():
    h = hash_password("s3cret", salt=b"\x01\x02\x03\x04")
    raw = base64.b64decode(h)
    assert raw[:4] == b"\x01\x02\x03\x04"
    assert raw[4:] == hashlib.sha256(b"\x01\x02\x03\x04s3cret").digest()
    assert verify_password("s3cret", h) and not verify_password("s3cret ", h)


def test_hashes_are_salted_and_every_algorithm_round_trips():
    assert hash_password("x") != hash_password("x")  # random salt
    for algo in HASHING_ALGORITHMS:
        h = hash_password("pässword", algo)
        check_hash(h, algo)
        assert verify_password("pässword", h, algo)
        assert not verify_password("password", h, algo)


def test_hash_recorded_from_rabbitmq_verifies():
    assert verify_password("p4ss-word", RABBITMQ_HASH_OF_P4SS_WORD)
    assert not verify_password("p4ss-wordx", RABBITMQ_HASH_OF_P4SS_WORD)


@pytest.mark.parametrize("bad,match", [("not base64!", "not base64"),
                                       (base64.b64encode(b"\0" * 20).decode(), "decodes to 20 bytes")])
def test_malformed_hash_is_a_clear_error(bad, match):
    with pytest.raises(ValueError, match=match):
        check_hash(bad)
    assert not verify_password("x", bad)
    with pytest.raises(ValueError, match="unknown hashing_algorithm"):
        check_hash(hash_password("x"), "rabbit_password_hashing_sha1")


def _rabbitmqctl(expr: str) -> str:
    exe = shutil.which("rabbitmqctl")
    if exe is None:
        pytest.skip("rabbitmqctl is not installed (RabbitMQ's own hashing is checked with it)")
    try:
        r = subprocess.run([exe, "eval", expr], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.skip("rabbitmqctl eval did not answer within 120 s")
    if r.returncode != 0:
        pytest.skip(f"rabbitmqctl eval failed (RabbitMQ node not running or no access): {r.stderr.strip()[:200]}")
    return r.stdout


@pytest.mark.rabbitmq
def test_hashes_interchange_with_rabbitmq(tmp_path):
    """One ``rabbitmqctl eval`` (~2-7 s): RabbitMQ hashes a password with the function its
    add_user uses (rabbit_password:hash), and checks a hash made here the way its internal
    backend checks logins (salted_hash of the stored salt, compared with the stored digest)."""
    ours = hash_password("our-p4ss")
    expr = (f'<<S:4/binary, D/binary>> = base64:decode(<<"{ours}">>), '
            f'io:format("~s~n~p~n~p~n", [base64:encode(rabbit_password:hash(<<"their-p4ss">>)), '
            f'D =:= rabbit_password:salted_hash(rabbit_password_hashing_sha256, S, <<"our-p4ss">>), '
            f'D =:= rabbit_password:salted_hash(rabbit_password_hashing_sha256, S, <<"our-p4sx">>)]).')
    theirs, ok, wrong = _rabbitmqctl(expr).split()[:3]
    assert (ok, wrong) == ("true", "false"), "RabbitMQ must accept our hash and only for its password"
    assert verify_password("their-p4ss", theirs) and not verify_password("their-p4sx", theirs)
    # the RabbitMQ-made hash as a [[users]] password_hash: pika logs in with the password
    conf = tmp_path / "broker.toml"
    conf.write_text(f'[[users]]\nname = "app"\npassword_hash = "{theirs}"\n'
                    f'hashing_algorithm = "rabbit_password_hashing_sha256"\ntags = []\n'
                    f'[[permissions]]\nuser = "app"\nvhost = "/"\n')
    with EmbeddedBroker(config=conf) as b:
        c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.port, "/",
                                                              pika.PlainCredentials("app", "their-p4ss")))
        c.channel().queue_declare("", exclusive=True)
        c.close()
        with pytest.raises(pika.exceptions.ProbableAuthenticationError):
            pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.port, "/",
                                                              pika.PlainCredentials("app", "their-p4sx")))


def test_config_password_hash_and_its_errors(tmp_path):
    h = hash_password("pw1")
    p = tmp_path / "b.toml"
    p.write_text(f'[[users]]\nname = "a"\npassword_hash = "{h}"\ntags = "administrator,monitoring"\n')
    u = load_config(p).users["a"]
    assert u.password is None and u.tags == ["administrator", "monitoring"]
    assert u.check_password("pw1") and not u.check_password("pw2")
    for body, match in [(f'password = "x"\npassword_hash = "{h}"', "exactly one of password"),
                        ('tags = []', "exactly one of password"),
                        ('password_hash = "zz"', "not base64"),
                        ('password = "x"\nhash = "y"', "unknown key")]:
        p.write_text(f'[[users]]\nname = "a"\n{body}\n')
        with pytest.raises(ConfigError, match=match) as ei:
            load_config(p)
        assert str(p) in str(ei.value)
    p.write_text('[broker]\nloopback_users = "guest"\n')
    with pytest.raises(ConfigError, match="loopback_users must be a list"):
        load_config(p)
    p.write_text('[broker]\nloopback_users = []\nhandshake_timeout = 2500\n')
    cfg = load_config(p)
    assert cfg.loopback_users == [] and cfg.handshake_timeout == 2500
    assert BrokerConfig().loopback_users == ["guest"] and BrokerConfig().handshake_timeout == 10000


def test_empty_password_hash_means_no_password_login():
    # rabbitmqctl clear_password leaves "password_hash": "" in definitions.json
    u = User("cert-only", password_hash="")
    assert not u.check_password("") and not u.check_password("x")


def test_blank_password_is_refused_even_if_configured():
    cfg = BrokerConfig(users={"a": User("a", "")}, permissions={("a", "/"): Permission()})
    with pytest.raises(AuthFailure, match="blank password"):
        authenticate(cfg, "PLAIN", b"\0a\0")


# --- hash-password CLI ------------------------------------------------------------------------

def test_cli_hash_password_argument_and_stdin():
    runner = CliRunner()
    r = runner.invoke(cli, ["broker", "hash-password", "s3cret"])
    assert r.exit_code == 0, r.output
    assert verify_password("s3cret", r.output.strip())
    r = runner.invoke(cli, ["broker", "hash-password", "--algorithm", "rabbit_password_hashing_sha512"],
                      input="from-stdin\n")
    assert r.exit_code == 0, r.output
    assert verify_password("from-stdin", r.output.strip(), "rabbit_password_hashing_sha512")
    r = runner.invoke(cli, ["broker", "hash-password"], input="\n")
    assert r.exit_code != 0 and "empty" in r.output
    # the CLI's algorithm list is the library's
    from spark_amqp.cli.broker import _ALGORITHMS
    assert set(_ALGORITHMS) == set(HASHING_ALGORITHMS)


def test_cli_host_help_warns_about_exposure():
    r = CliRunner().invoke(cli, ["broker", "--help"])
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "loopback_users" in text and "0.0.0.0" in text and "hash-password" in text


# --- loopback_users ---------------------------------------------------------------------------

@pytest.mark.parametrize("addr,expected", [("127.0.0.1", True), ("127.8.9.10", True), ("::1", True),
                                           ("::ffff:127.0.0.1", True), ("10.0.0.1", False),
                                           ("192.0.2.2", False), ("::", False), ("fe80::1%eth0", False),
                                           (None, False), ("", False)])
def test_is_loopback_as_rabbitmq(addr, expected):
    assert is_loopback(addr) is expected


def test_check_loopback_only_for_listed_users():
    cfg = BrokerConfig()
    check_loopback(cfg, "guest", "127.0.0.1")
    check_loopback(cfg, "alice", "10.0.0.1")
    with pytest.raises(AuthFailure, match="user 'guest' can only connect via localhost") as ei:
        check_loopback(cfg, "guest", "10.0.0.1")
    assert ei.value.client_text.startswith("ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN")
    check_loopback(BrokerConfig(loopback_users=[]), "guest", "10.0.0.1")


# --- exposure warnings ------------------------------------------------------------------------

def test_exposure_warnings_name_what_to_change():
    cfg = BrokerConfig()
    assert exposure_warnings(cfg, "127.0.0.1", 5672) == []
    assert exposure_warnings(cfg, "::1", 5672) == []
    w = exposure_warnings(cfg, "0.0.0.0", 5672)
    assert len(w) == 2
    assert "'guest'" in w[0] and "loopback_users" in w[0] and "password_hash" in w[0]
    assert "without TLS" in w[1] and "[tls]" in w[1]
    open_cfg = BrokerConfig(loopback_users=[])
    w = exposure_warnings(open_cfg, "192.0.2.2", 5672, tls=True)
    assert len(w) == 1 and "anyone who can reach this port can log in as 'guest'" in w[0]
    safe = BrokerConfig(users={"app": User("app", password_hash=hash_password("long-random"))},
                        permissions={("app", "/"): Permission()})
    assert exposure_warnings(safe, "0.0.0.0", 5671, tls=True) == []


def test_broker_on_all_interfaces_logs_the_warnings(caplog):
    with caplog.at_level(logging.WARNING, logger="spark_amqp.broker"):
        with EmbeddedBroker(host="0.0.0.0"):
            pass
    text = caplog.text
    assert "still has the default password 'guest'" in text and "without TLS" in text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="spark_amqp.broker"):
        with EmbeddedBroker(host="127.0.0.1"):
            pass
    assert "default password" not in caplog.text


# --- handshake_timeout and max_message_size (embedded broker, configured values) ---------------

def test_handshake_timeout_drops_silent_and_unfinished_connections():
    with EmbeddedBroker(config=BrokerConfig(handshake_timeout=500)) as b:
        silent = socket.create_connection(("127.0.0.1", b.port), timeout=10)
        half = RawPeer(b.url)  # header, start-ok, tune-ok, but never connection.open
        half.send(PROTOCOL_HEADER)
        half.expect(spec.Connection.Start)
        half.send_method(0, spec.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                                    response=b"\0guest\0guest", locale="en_US"))
        half.expect(spec.Connection.Tune)
        half.send_method(0, spec.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0))
        done = RawPeer(b.url)
        done.open()
        t0 = time.monotonic()
        assert silent.recv(1) == b""  # EOF (blocks until the broker drops it; timeout 10 s)
        assert half.wait_eof(10)
        assert time.monotonic() - t0 < 5
        assert not done.wait_eof(1.0), "an opened connection must outlive handshake_timeout"
        done.open_channel(1)
        silent.close()
        half.close()
        done.close()


def test_message_above_max_message_size_is_406_on_its_channel():
    # RabbitMQ 3.10 rabbit_channel:check_msg_size: 406 PRECONDITION_FAILED "message size N is
    # larger than configured max size M", a channel error (the connection stays usable).
    with EmbeddedBroker(config=BrokerConfig(max_message_size=10_000)) as b:
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = c.channel()
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.confirm_delivery()
        ch.basic_publish("", q, b"x" * 10_000)
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
            ch.basic_publish("", q, b"y" * 300_000)  # several body frames, all dropped
        assert ei.value.reply_code == 406
        assert "message size 300000 is larger than configured max size 10000" in ei.value.reply_text
        ch2 = c.channel()
        assert ch2.queue_declare(q, passive=True).method.message_count == 1
        c.close()


def test_shipped_config_keeps_the_security_defaults(tmp_path):
    from pathlib import Path
    cfg = load_config(Path(__file__).resolve().parents[2] / "conf" / "broker.toml")
    assert cfg.loopback_users == ["guest"] and cfg.handshake_timeout == 10000
    assert repr(cfg.users["guest"]).count("'guest'") == 1  # the name; the password is not printed
    p = tmp_path / "b.toml"
    p.write_text("[broker]\nmax_message_size = 536870913\n")
    with pytest.raises(ConfigError, match="at most 536870912"):
        load_config(p)
