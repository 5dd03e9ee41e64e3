"""``spark-amqp broker``: run the embedded AMQP 0-9-1 broker in the foreground.

Calls :func:`spark_amqp.broker.server.serve` (blocking) until SIGINT/SIGTERM, logging to
stderr and, with ``--log-file``, to that file too (appended; RabbitMQ logs to a file by
default, https://www.rabbitmq.com/docs/logging). The data directory (``--data-dir``, else the
config's ``data_dir``) is logged at start, and so is its creation when it did not exist.
Without ``--config`` the built-in defaults apply (user guest/guest, vhost ``/``, the limits
of the ``broker.toml`` that ``spark-amqp conf`` writes). ``--stream-port`` adds a stream-protocol
listener (RabbitMQ's ``rabbitmq_stream``, ``stream.listeners.tcp.1``; ``[stream]`` in the config
file). ``--tls-cert/--tls-key/--tls-port`` add an amqps (TLS) listener (RabbitMQ's
``listeners.ssl.default``); verification of client certificates is configured in the
``[tls]`` section of ``--config``. A port that is already bound, a broker that cannot start
and a bad config file each give a one-line ``Error: ...`` and exit status 1 (as
``rabbitmq-server`` refuses to start on a busy port), not a traceback.

``spark-amqp broker hash-password`` prints a RabbitMQ-format salted password hash for the
config's ``[[users]] password_hash`` (as ``rabbitmqctl hash_password`` of RabbitMQ 3.11+).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

# spark_amqp.broker.passwords.HASHING_ALGORITHMS (not imported here: importing the broker
# package costs ~1 s, too much for `spark-amqp --help`)
_ALGORITHMS = ("rabbit_password_hashing_sha256", "rabbit_password_hashing_sha512",
               "rabbit_password_hashing_md5")


def _hide_connection_lines(record: logging.LogRecord) -> bool:
    """Console filter: False for the per-connection lines below WARNING."""
    return not (record.name == "spark_amqp.broker.connections" and record.levelno < logging.WARNING)


@click.group(invoke_without_command=True)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to listen on. The default is loopback only; 0.0.0.0 (all interfaces) "
                   "exposes the broker: the user guest may then still log in only via localhost "
                   "(loopback_users), so give remote clients their own user with a password_hash "
                   "(see `broker hash-password`) and a [tls] listener; the log warns about what is unsafe.")
@click.option("--port", default=5672, show_default=True, type=click.IntRange(0, 65535),
              help="TCP port (0 = any free port; the log says which).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory for durable queues/messages (default: from --config, else in memory).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None,
              help="Broker config (TOML: users, vhosts, limits, data dir); e.g. conf/broker.toml.")
@click.option("--tls-cert", "tls_cert", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              default=None,
              help="PEM server certificate: also listen for amqps (TLS); overrides the config's [tls] certfile.")
@click.option("--tls-key", "tls_key", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              default=None, help="PEM private key of --tls-cert (omit when the certificate file holds it).")
@click.option("--tls-port", type=click.IntRange(0, 65535), default=None,
              help="TLS (amqps) port [default: the config's [tls] port, else 5671].")
@click.option("--stream-port", type=click.IntRange(0, 65535), default=None,
              help="Also serve RabbitMQ's stream protocol on this port (RabbitMQ's is 5552; 0 = any free "
                   "port) [default: the config's [stream] listeners.tcp.1, else none].")
@click.option("--management-port", type=click.IntRange(0, 65535), default=None,
              help="Also serve RabbitMQ's management HTTP API, /metrics and a web page on this port "
                   "(RabbitMQ's is 15672; 0 = any free port).")
@click.option("--management-host", default=None,
              help="Interface of the management port [default: --host]. Keep it 127.0.0.1 (behind a "
                   "TLS reverse proxy) when --host exposes the AMQP port; see docs/broker/security.md.")
@click.option("--rabbitmq-version", type=click.Choice(["4.3", "3.10"]), default=None,
              help="The RabbitMQ release to behave like [default: the config's rabbitmq_version, "
                   "else 4.3]; docs/broker/rabbitmq-versions.md lists the differences.")
@click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also append the log to this file (created with its folder if missing).")
@click.option("--log-connections", is_flag=True,
              help="Also show each connection's open, login and close in the terminal (always in "
                   "--log-file; RabbitMQ logs them at info).")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging (shows the connections too).")
@click.pass_context
def broker(ctx: click.Context, host: str, port: int, data_dir: Path | None, config_path: Path | None,
           tls_cert: Path | None, tls_key: Path | None, tls_port: int | None, stream_port: int | None,
           management_port: int | None, management_host: str | None, rabbitmq_version: str | None,
           log_file: Path | None, log_connections: bool,
           verbose: bool) -> None:
    """Run the embedded AMQP 0-9-1 broker until Ctrl-C.

    Clients connect with amqp://guest:guest@127.0.0.1:PORT/%2F unless the config says
    otherwise (guest can only log in via localhost, as in RabbitMQ); with --tls-cert (or a
    [tls] config section) also amqps://...@HOST:TLS_PORT/%2F. Client-certificate verification
    and EXTERNAL login are set in the config file's [tls]. `broker hash-password` makes a
    password_hash for the config file's [[users]].
    With --management-port, http://HOST:PORT/ is a web page and /api RabbitMQ's management API.
    With --stream-port, stream clients connect with rabbitmq-stream://guest:guest@HOST:PORT/%2F.
    """
    if ctx.invoked_subcommand is not None:
        return
    if config_path is not None and not config_path.is_file():
        raise click.BadParameter(f"no such file: {config_path}", param_hint="--config")
    if tls_key is not None and tls_cert is None:
        raise click.BadParameter("--tls-key needs --tls-cert", param_hint="--tls-key")
    if management_host is not None and management_port is None:
        raise click.BadParameter("--management-host needs --management-port", param_hint="--management-host")
    from ..broker.config import ConfigError, load_config
    from ..broker.server import BrokerError, serve

    console = logging.StreamHandler()
    if not (log_connections or verbose):
        # each connection's open/login/close (logger spark_amqp.broker.connections, INFO as
        # RabbitMQ's) stays out of the terminal, where it mixed with the commands' output of
        # the walk-through in docs/cli.md; warnings and errors about connections still show
        console.addFilter(_hide_connection_lines)
    handlers: list[logging.Handler] = [console]
    if log_file is not None:
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
        except OSError as exc:
            raise click.BadParameter(f"cannot write {log_file}: {exc.strerror or exc}",
                                     param_hint="--log-file") from exc
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=handlers,
                        format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S",
                        force=True)
    log = logging.getLogger("spark_amqp.cli.broker")
    try:
        effective = data_dir if data_dir is not None else load_config(
            str(config_path) if config_path else None).data_dir
    except ConfigError as exc:
        raise click.ClickException(str(exc).strip().splitlines()[0]) from exc
    if effective is not None:
        where = Path(effective).resolve()
        if where.exists():
            log.info("data directory %s (durable queues and persistent messages)", where)
        else:
            log.info("data directory %s does not exist: creating it (durable queues and "
                     "persistent messages go there)", where)
    if log_file is not None:
        log.info("logging to %s too", log_file.resolve())
    try:
        serve(host, port, str(data_dir) if data_dir else None,
              str(config_path) if config_path else None, tls_port=tls_port,
              tls_certfile=str(tls_cert) if tls_cert else None,
              tls_keyfile=str(tls_key) if tls_key else None, management_port=management_port,
              management_host=management_host, rabbitmq_version=rabbitmq_version, stream_port=stream_port)
    except KeyboardInterrupt:
        pass
    except ImportError as exc:  # the management API without the broker extra: one line
        from ..extras import MissingExtraError

        if not isinstance(exc, MissingExtraError):
            raise
        raise click.ClickException(str(exc)) from exc
    except (BrokerError, ConfigError) as exc:  # PortInUseError is a BrokerError
        text = str(exc).strip().splitlines()
        raise click.ClickException(text[0] if text else f"cannot listen on {host}:{port}") from exc


@broker.command("hash-password")
@click.argument("password", required=False)
@click.option("--algorithm", type=click.Choice(_ALGORITHMS),
              default=_ALGORITHMS[0], show_default=True,
              help="RabbitMQ's hashing module name (the hash's hashing_algorithm).")
def hash_password(password: str | None, algorithm: str) -> None:
    """Print a salted hash of PASSWORD for a [[users]] password_hash.

    The format is RabbitMQ's (base64 of a 4-byte random salt + SHA-256 of salt + password), so
    the hash also works in RabbitMQ's definitions.json and hashes exported from RabbitMQ work
    here. Without PASSWORD it is read from the terminal (hidden, asked twice) or, when stdin is
    not a terminal, as one line from stdin (a password on the command line stays in the shell
    history). Example config entry:

    \b
        [[users]]
        name = "app"
        password_hash = "<printed hash>"
        tags = []
    """
    if password is None:
        stdin = sys.stdin
        if stdin.isatty():
            password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
        else:
            password = stdin.readline().rstrip("\r\n")
    if not password:
        raise click.BadParameter("the password is empty", param_hint="PASSWORD")
    from ..broker.passwords import hash_password as make_hash
    click.echo(make_hash(password, algorithm))
