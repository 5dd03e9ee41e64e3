"""Client-side errors (the broker's own errors are the typed classes of
:mod:`spark_amqp.protocol.errors`, e.g. ``NotFound`` 404, raised unchanged).

- :class:`ConnectionLost` (an ``OSError``): the TCP/TLS connection broke, the peer stopped
  sending heartbeats, or the socket could not be opened.
- :class:`ConnectionClosed`: the connection was closed by this client (``conn.close()``) and
  is used again.
- :class:`ChannelClosed`: the channel was closed by this client (``ch.close()``) and is used
  again. A channel closed *by the broker* raises the broker's typed error instead.
- :class:`PublishNacked`: ``wait_for_confirms`` saw one or more ``basic.nack`` from the broker
  (RabbitMQ docs "Consumer Acknowledgements and Publisher Confirms": a nack means the broker
  could not take responsibility for the message, e.g. a queue with ``x-overflow=reject-publish``).
- :class:`ConfirmTimeout`: ``wait_for_confirms(timeout)`` ran out of time.
- :class:`ProtocolMismatch`: the server answered the protocol header with another header
  (it does not speak AMQP 0-9-1; spec §4.2.2).
- :class:`BrokerUnreachable` (a ``ConnectionLost``): no broker address could be reached
  within a failover window (:mod:`.failover`: every path that reconnects gives up with it);
  :class:`AllAddressesFailed` is the one :func:`.connection.connect` raises.

The client's errors are all here (one module per layer, as ``spark_amqp.protocol.errors`` for
the broker's typed errors); each stays importable where it was (``client.failover``,
``client.connection``, ``spark_amqp.client``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .uri import ConnectionParameters

__all__ = ["copy_error", "close_text", "connection_level", "ClientError", "ConnectionLost",
           "ConnectionClosed", "ChannelClosed", "PublishNacked", "ConfirmTimeout",
           "ProtocolMismatch", "BrokerUnreachable", "AllAddressesFailed"]


class ClientError(Exception):
    """Base of the client-side (not broker-sent) errors except :class:`ConnectionLost`."""


class ConnectionLost(OSError):
    """The connection to the broker is gone without an AMQP ``connection.close``.

    Raised by every pending and later call on the connection and its channels when the socket
    reported EOF or an error, when no bytes arrived for two heartbeat intervals (dead-peer
    detection, RabbitMQ docs "Detecting Dead TCP Connections with Heartbeats"), or when the
    socket could not be opened / the handshake timed out (``connection_timeout``).
    """


class ConnectionClosed(ClientError):
    """The connection was closed by this client and then used again."""


class ChannelClosed(ClientError):
    """The channel was closed by this client (``Channel.close``) and then used again."""


class PublishNacked(ClientError):
    """The broker nacked one or more publishes (``basic.nack`` in confirm mode).

    Attributes:
        result: the :class:`~spark_amqp.client.messages.ConfirmResult` of the wait, whose
            ``nacked`` lists the nacked publish sequence numbers.
    """

    def __init__(self, result):
        self.result = result
        n = len(result.nacked)
        first = result.nacked[:10]
        super().__init__(
            f"the broker nacked {n} publish(es) (sequence numbers {first}{'...' if n > 10 else ''}); "
            "it did not take responsibility for them: republish them or check the queue's "
            "overflow/length limits and the broker log")


class ConfirmTimeout(ClientError, TimeoutError):
    """``wait_for_confirms(timeout)`` returned before all publishes were confirmed.

    Attributes:
        outstanding: how many publishes were still unconfirmed.
    """

    def __init__(self, outstanding: int, timeout: float):
        self.outstanding = outstanding
        super().__init__(f"{outstanding} publish(es) still unconfirmed after {timeout} s; "
                         "wait again or raise the timeout")


class ProtocolMismatch(ClientError):
    """The server replied with a protocol header: it does not accept AMQP 0-9-1."""


class BrokerUnreachable(ConnectionLost, ConnectionError):
    """No broker address could be reached (or served) within the failover window of the path
    that raises it: :func:`.connection.connect` (as its subclass
    :class:`.connection.AllAddressesFailed`), the source's queue mode (the query fails),
    the stream mode's probe (the query fails) and range reads (the task fails; Spark may
    retry it). The message names the bound and lists every address with its last error; the
    last error is the ``__cause__``. An ``OSError`` (a :class:`.errors.ConnectionLost` and a
    ``ConnectionError``); picklable (Spark ships it between processes).

    Attributes:
        errors: ``{"host:port": exception}``, the last error of every address tried (empty
            when the raiser keeps them as text only, in the message).
    """

    def __init__(self, message: str, errors: dict | None = None):
        super().__init__(message)   # one argument: OSError(a, b) would read a as an errno
        self.errors = dict(errors or {})

    def __reduce__(self):
        # rebuilt from its text and the errors' texts (their classes may not unpickle)
        return _rebuild, (type(self), str(self),
                          {a: str(e) for a, e in self.errors.items()})


def _rebuild(cls: type, text: str, errors: dict) -> "BrokerUnreachable":
    err = BrokerUnreachable.__new__(cls)
    BrokerUnreachable.__init__(err, text, {a: ConnectionLost(e) for a, e in errors.items()})
    return err


class AllAddressesFailed(BrokerUnreachable):
    """No broker address could be connected (:func:`connect` with several addresses or a
    ``failover_timeout``): the client's :class:`.failover.BrokerUnreachable`.

    Attributes:
        errors: ``{"host:port": exception}``, the last error of every address tried.
    """

    def __init__(self, params: "ConnectionParameters | str", errors: dict | None = None):
        if isinstance(params, str):  # a copy (copy_error) or an unpickled one: the text
            super().__init__(params, errors)
            return
        errors = dict(errors or {})
        lines = "; ".join(f"{a}: {e}" for a, e in errors.items())
        within = (f" within failover_timeout {params.failover_timeout:g} s"
                  if params.failover_timeout else " (one round; failover_timeout 0)")
        super().__init__(
            f"could not connect to any of the {len(errors)} broker address(es) of "
            f"{params.redacted_uri(all_addresses=True)}{within}: {lines}. Check that the "
            "nodes run and the addresses are right", errors)


def copy_error(err: BaseException) -> BaseException:
    """A fresh exception equal to ``err`` (same type, code, text, level) to raise again from a
    later call without growing the original's traceback."""
    from ..protocol.errors import AMQPError, error_for_code

    if isinstance(err, AMQPError):
        new = error_for_code(err.reply_code, err.reply_text, err.class_id, err.method_id,
                             connection_level=err.connection_level)
        if new.connection_level != err.connection_level:
            new.connection_level = err.connection_level
        return new
    if isinstance(err, (ConnectionLost, ConnectionClosed, ChannelClosed)):
        return type(err)(str(err))
    return err


def close_text(m, where: str) -> str:
    """The reply text of the broker's ``connection.close`` ``m``, with a hint for 403 (login
    or permissions) and 530 (vhost) naming ``where`` (a redacted URI)."""
    text = m.reply_text
    if m.reply_code == 403:
        text += f" (user or password wrong, or no permission; connecting to {where})"
    elif m.reply_code == 530:
        text += f" (check the vhost and the user's permissions on it; connecting to {where})"
    return text


def connection_level(err):
    """Mark the AMQPError ``err`` as connection-level (raised during the handshake, where no
    channel exists, or for a protocol violation that ends the connection); returns it."""
    err.connection_level = True
    return err
