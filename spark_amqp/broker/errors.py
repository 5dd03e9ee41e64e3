"""The broker layer's errors, in one module with stable names: starting and running the broker
(:mod:`spark_amqp.broker.server`, and the management server it starts,
:mod:`spark_amqp.management.server`), its configuration (:mod:`.config`), its store
(:mod:`.store`) and a client's authentication (:mod:`.auth`). Each stays importable from the
module that raises it (``spark_amqp.broker.config.ConfigError``, ...). What the broker answers
a client with is :mod:`spark_amqp.protocol.errors`' typed errors (reply codes)."""

from __future__ import annotations

__all__ = ["BrokerError", "PortInUseError", "ConfigError", "StoreError", "AuthFailure"]


class BrokerError(RuntimeError):
    """The broker could not start (message says why and what to do)."""


class PortInUseError(BrokerError, OSError):
    """The TCP port is already taken by another process."""


class ConfigError(ValueError):
    """A configuration file that cannot be read or has invalid values (message says which)."""


class StoreError(RuntimeError):
    """The store file cannot be used at start: corrupt or truncated, or its directory is not
    writable. The message names the file, the cause and what to do."""


class AuthFailure(Exception):
    """Authentication failed. ``str()`` is the reason (logged; sent with 403 too unless
    ``client_text`` is set); ``client_text``: what the client is told instead, when the reason
    must stay in the log (RabbitMQ tells clients only that the login was refused)."""

    def __init__(self, reason: str, client_text: str | None = None):
        super().__init__(reason)
        self.client_text = client_text
