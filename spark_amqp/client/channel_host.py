"""What a :class:`~.channel.Channel` uses of the connection that owns it.

:class:`ChannelHost` is a structural type (``typing.Protocol``): :class:`.connection.Connection`
satisfies it without naming it. It lets ``channel.py`` type its connection without importing
``connection.py`` (which imports ``channel.py`` to create channels): the import goes one way.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, runtime_checkable

from ..protocol.spec import Method
from .uri import ConnectionParameters

__all__ = ["ChannelHost"]


@runtime_checkable
class ChannelHost(Protocol):
    """The connection side of a channel: writing frames, the channel table, the read limit.

    Attributes (set by the connection):
        params: the connection's :class:`.uri.ConnectionParameters` (``rpc_timeout`` seconds).
        frame_max: negotiated maximum frame size in bytes, framing included (0 = no limit).
        _lock: guards the channel table and ``_rpc_waiting``.
        _wake: channels whose waiters the I/O thread wakes after the current read (list).
        _io_ident: thread id of the I/O thread (None before it starts).
        _read_limit: bytes of undrained deliveries that pause reading (None = no limit).
        _read_wake: set to make the I/O thread look at the read limit again.
        _rpc_waiting: synchronous calls waiting for their reply (reading never pauses then).
    """

    params: ConnectionParameters
    frame_max: int
    _lock: threading.Lock
    _wake: list[Any]
    _io_ident: int | None
    _read_limit: int | None
    _read_wake: threading.Event
    _rpc_waiting: int

    def _send(self, data: bytes) -> None:
        """Write whole frames (bytes); raises the connection's error."""

    def _send_method(self, channel: int, method: Method, handshake: bool = False,
                     lock_timeout: float = -1) -> None:
        """Validate ``method`` with the connection's state machine and write it; raises the
        connection's error or the state machine's typed AMQPError."""

    def _forget_channel(self, ch: Any) -> None:
        """Remove the channel ``ch`` from the channel table (closed)."""

    def _lost(self, err: BaseException, shutdown: bool = True) -> None:
        """End the connection with ``err`` (every channel gets it)."""

    def _set_raw_deliveries(self, channel_number: int, enabled: bool) -> None:
        """Decode the channel's basic.deliver messages as raw runs, or not."""

    def resume_reading(self) -> None:
        """Make the I/O thread look at the read limit again (after a drain)."""
