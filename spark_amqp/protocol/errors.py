"""Typed AMQP 0-9-1 errors, one class per reply code.

Every protocol violation detected by this package, and every ``channel.close`` or
``connection.close`` received from a peer, surfaces as a subclass of :class:`AMQPError`
carrying the reply code, the reply text, the class/method id that caused it, and whether it
is a *channel* exception (soft; closes the channel) or a *connection* exception (hard; closes
the connection).

Source: AMQP 0-9-1 reference, "Constants" table (seed 002, section 1.1), and RabbitMQ's
constant table (seed 004), which adds 312 NO_ROUTE. Soft/hard classes as in the spec:
3xx/4xx codes are channel exceptions, 320, 402 and 5xx are connection exceptions.
"""

from __future__ import annotations

__all__ = [
    "AMQPError",
    "BodyTooLarge",
    "ChannelError",
    "ConnectionError_",
    "ContentTooLarge",
    "NoRoute",
    "NoConsumers",
    "AccessRefused",
    "NotFound",
    "ResourceLocked",
    "PreconditionFailed",
    "ConnectionForced",
    "InvalidPath",
    "FrameError",
    "AMQPSyntaxError",
    "CommandInvalid",
    "ChannelErrorCode",
    "UnexpectedFrame",
    "ResourceError",
    "NotAllowed",
    "AMQPNotImplemented",
    "InternalError",
    "ERROR_CLASSES",
    "error_for_code",
    "REPLY_SUCCESS",
]

REPLY_SUCCESS = 200


class AMQPError(Exception):
    """Base of every typed AMQP error.

    Attributes:
        reply_code: the AMQP reply code (int), e.g. 404.
        reply_text: the human-readable text (str, at most 255 UTF-8 bytes on the wire).
        class_id, method_id: the method that caused it, or 0/0 when not method-specific.
        connection_level: ``True`` for connection exceptions (hard errors), ``False`` for
            channel exceptions (soft errors).
        name: the spec's constant name, e.g. ``"NOT_FOUND"``.
    """

    reply_code: int = 0
    name: str = "UNKNOWN"
    connection_level: bool = True

    def __init__(self, reply_text: str = "", class_id: int = 0, method_id: int = 0,
                 reply_code: int | None = None):
        if reply_code is not None:
            self.reply_code = reply_code
        self.reply_text = reply_text or self.name
        self.class_id = class_id
        self.method_id = method_id
        super().__init__(self.reply_text)

    @property
    def channel_level(self) -> bool:
        """``True`` when this is a channel (soft) exception."""
        return not self.connection_level

    def __str__(self) -> str:
        scope = "connection" if self.connection_level else "channel"
        where = ""
        if self.class_id or self.method_id:
            where = f" (class {self.class_id}, method {self.method_id})"
        return f"{self.reply_code} {self.name} [{scope} exception]: {self.reply_text}{where}"

    def __reduce__(self):  # picklable across Spark processes
        return (_rebuild_error, (self.reply_code, self.reply_text, self.class_id, self.method_id))


def _rebuild_error(code: int, text: str, class_id: int, method_id: int) -> "AMQPError":
    return error_for_code(code, text, class_id, method_id)


class ChannelError(AMQPError):
    """A channel (soft) exception: the channel is closed, the connection survives."""

    connection_level = False


class ConnectionError_(AMQPError):
    """A connection (hard) exception: the whole connection is closed."""

    connection_level = True


class ContentTooLarge(ChannelError):
    reply_code, name = 311, "CONTENT_TOO_LARGE"


class NoRoute(ChannelError):
    reply_code, name = 312, "NO_ROUTE"


class NoConsumers(ChannelError):
    reply_code, name = 313, "NO_CONSUMERS"


class AccessRefused(ChannelError):
    reply_code, name = 403, "ACCESS_REFUSED"


class NotFound(ChannelError):
    reply_code, name = 404, "NOT_FOUND"


class ResourceLocked(ChannelError):
    reply_code, name = 405, "RESOURCE_LOCKED"


class PreconditionFailed(ChannelError):
    reply_code, name = 406, "PRECONDITION_FAILED"


class ConnectionForced(ConnectionError_):
    reply_code, name = 320, "CONNECTION_FORCED"


class InvalidPath(ConnectionError_):
    reply_code, name = 402, "INVALID_PATH"


class FrameError(ConnectionError_):
    """501: malformed frame, bad frame-end, oversized frame, bad field encoding."""

    reply_code, name = 501, "FRAME_ERROR"


class BodyTooLarge(FrameError):
    """501: a content header announces a body above the decoder's ``max_body_size``.

    Attributes: ``channel`` (int), ``body_size`` and ``limit`` (bytes)."""

    def __init__(self, reply_text: str = "", channel: int = 0, body_size: int = 0,
                 limit: int = 0, **kw):
        super().__init__(reply_text, **kw)
        self.channel, self.body_size, self.limit = channel, body_size, limit


class AMQPSyntaxError(ConnectionError_):
    """502: a frame that is well formed but carries illegal field values."""

    reply_code, name = 502, "SYNTAX_ERROR"


class CommandInvalid(ConnectionError_):
    """503: a method that is not valid in the current state."""

    reply_code, name = 503, "COMMAND_INVALID"


class ChannelErrorCode(ConnectionError_):
    """504 CHANNEL_ERROR: a frame on a channel that is not open, or a reopened channel.

    Despite its name this is a *connection* exception (spec constant table).
    """

    reply_code, name = 504, "CHANNEL_ERROR"


class UnexpectedFrame(ConnectionError_):
    """505: a frame of a type not expected here (content out of sequence)."""

    reply_code, name = 505, "UNEXPECTED_FRAME"


class ResourceError(ConnectionError_):
    reply_code, name = 506, "RESOURCE_ERROR"


class NotAllowed(ConnectionError_):
    reply_code, name = 530, "NOT_ALLOWED"


class AMQPNotImplemented(ConnectionError_):
    reply_code, name = 540, "NOT_IMPLEMENTED"


class InternalError(ConnectionError_):
    reply_code, name = 541, "INTERNAL_ERROR"


ERROR_CLASSES: dict[int, type[AMQPError]] = {
    cls.reply_code: cls
    for cls in (
        ContentTooLarge, NoRoute, NoConsumers, AccessRefused, NotFound, ResourceLocked,
        PreconditionFailed, ConnectionForced, InvalidPath, FrameError, AMQPSyntaxError,
        CommandInvalid, ChannelErrorCode, UnexpectedFrame, ResourceError, NotAllowed,
        AMQPNotImplemented, InternalError,
    )
}


def error_for_code(reply_code: int, reply_text: str = "", class_id: int = 0,
                   method_id: int = 0, connection_level: bool | None = None) -> AMQPError:
    """Build the typed error for ``reply_code``.

    Unknown codes give a plain :class:`ChannelError` or :class:`ConnectionError_` carrying the
    code; ``connection_level`` decides which (default: codes ≥ 500 and 320/402 are hard).
    """
    cls = ERROR_CLASSES.get(reply_code)
    if cls is not None:
        return cls(reply_text, class_id, method_id)
    if connection_level is None:
        connection_level = reply_code >= 500 or reply_code in (320, 402)
    base = ConnectionError_ if connection_level else ChannelError
    err = base(reply_text or f"reply code {reply_code}", class_id, method_id, reply_code=reply_code)
    return err
