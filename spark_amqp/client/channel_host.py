"""What a :class:`~.channel.Channel` uses of the connection that owns it.

:class:`ChannelHost` is a structural type (``typing.Protocol``): :class:`.connection.Connection`
satisfies it without naming it. It lets ``channel.py`` type its connection without importing
``connection.py`` (which imports ``channel.py`` to create channels): the import goes one way.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..protocol.spec import Method
from .uri import ConnectionParameters

__all__ = ["ChannelHost"]


@runtime_checkable
class ChannelHost(Protocol):
    """The connection side of a channel: writing frames and methods, the channel table, the
    read limit, waking waiters, failing the connection. A channel uses nothing else of its
    connection (no private state: :class:`.connection.Connection`'s "what channels use").

    Attributes (set by the connection):
        params: the connection's :class:`.uri.ConnectionParameters` (``rpc_timeout`` seconds).
        frame_max: negotiated maximum frame size in bytes, framing included (0 = no limit).
    """

    params: ConnectionParameters
    frame_max: int

    def send_frames(self, data: bytes) -> None:
        """Write whole frames (bytes); raises the connection's error."""

    def send_method(self, channel: int, method: Method, lock_timeout: float = -1) -> None:
        """Validate ``method`` with the connection's state machine and write it; raises the
        connection's error or the state machine's typed AMQPError."""

    def forget_channel(self, ch: Any) -> None:
        """Remove the channel ``ch`` from the channel table (closed)."""

    def fail(self, err: BaseException) -> None:
        """End the connection with ``err`` (every channel gets it)."""

    def set_raw_deliveries(self, channel_number: int, enabled: bool) -> None:
        """Decode the channel's basic.deliver messages as raw runs, or not."""

    def in_io_thread(self) -> bool:
        """True when called from the connection's I/O thread."""

    @property
    def read_limited(self) -> bool:
        """A read limit is set: a drain calls :meth:`resume_reading`."""

    def resume_reading(self) -> None:
        """Make the I/O thread look at the read limit again (after a drain)."""

    def wake_after_read(self, ch: Any) -> None:
        """I/O thread: wake ``ch``'s waiters after the current read."""

    def rpc_wait_started(self) -> None:
        """A synchronous call waits for its reply: read past the read limit meanwhile."""

    def rpc_wait_ended(self) -> None:
        """That reply arrived (or the channel ended): the read limit applies again."""
