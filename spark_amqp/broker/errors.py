"""Errors of starting and running the broker, raised by :mod:`spark_amqp.broker.server` and
by the management server it starts (:mod:`spark_amqp.management.server`): one module below
both, so that neither imports the other for them."""

from __future__ import annotations

__all__ = ["BrokerError", "PortInUseError"]


class BrokerError(RuntimeError):
    """The broker could not start (message says why and what to do)."""


class PortInUseError(BrokerError, OSError):
    """The TCP port is already taken by another process."""
