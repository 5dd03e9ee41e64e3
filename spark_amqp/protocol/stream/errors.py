"""Typed stream-protocol errors, one class per response code.

Every response code other than ``OK`` (and ``SASL_CHALLENGE``, which is a step, not an error)
that a peer sends, and every violation this package finds in received bytes, surfaces as a
subclass of :class:`StreamError` carrying the code (``.code``), its name (``.name``, the
constant's name in ``rabbit_stream.hrl``) and a text saying what was wrong.

What the codec raises for bad input (the codes RabbitMQ's ``rabbit_stream_reader`` closes
with; v4.3.5 ``handle_frame_post_auth``):

* a frame the codec cannot parse (unknown key or version, a field running past the frame's
  end, bytes left over, invalid UTF-8 in a string) → :class:`UnknownFrame` (0x0d): RabbitMQ's
  ``rabbit_stream_core:parse_command`` yields ``{unknown, Bin}`` and the reader sends
  ``close`` with ``UNKNOWN_FRAME``;
* a frame announcing more than the negotiated ``frame_max`` → :class:`FrameTooLarge` (0x0e),
  raised from the 4-byte size alone, before any of its payload is buffered;
* a chunk whose CRC-32 does not match its data, or whose entries do not fit its header →
  :class:`CorruptChunk` (an :class:`UnknownFrame`: its content is not a valid chunk).
"""

from __future__ import annotations

from .constants import Code

__all__ = [
    "StreamError", "StreamDoesNotExist", "SubscriptionIdAlreadyExists",
    "SubscriptionIdDoesNotExist", "StreamAlreadyExists", "StreamNotAvailable",
    "SaslMechanismNotSupported", "AuthenticationFailure", "SaslError", "SaslChallenge",
    "AuthenticationFailureLoopback", "VirtualHostAccessFailure", "UnknownFrame",
    "FrameTooLarge", "InternalError", "AccessRefused", "PreconditionFailed",
    "PublisherDoesNotExist", "NoOffset", "SaslCannotChangeMechanism",
    "SaslCannotChangeUsername", "CorruptChunk", "error_for_code", "ERROR_CLASSES",
]


class StreamError(Exception):
    """Base of the typed stream-protocol errors.

    Attributes:
        code: the response code (int), e.g. ``0x02``; ``name``: its constant's name, e.g.
            ``"STREAM_DOES_NOT_EXIST"``; ``text``: what was wrong (and, where it helps,
            what to do).
    """

    code: int = 0
    name: str = "UNKNOWN"

    def __init__(self, text: str = "", code: int | None = None):
        if code is not None:
            self.code = code
            try:
                self.name = Code(code).name
            except ValueError:
                self.name = f"CODE_{code:#06x}"
        self.text = text or self.name.lower().replace("_", " ")
        super().__init__(self.text)

    def __str__(self) -> str:
        return f"{self.code:#04x} {self.name}: {self.text}"

    def __reduce__(self):  # picklable across Spark processes
        return (error_for_code, (self.code, self.text))


def _make(name: str, code: Code, doc: str, base: type = StreamError) -> type:
    return type(name, (base,), {"code": int(code), "name": code.name, "__doc__": doc,
                                "__module__": __name__})


StreamDoesNotExist = _make("StreamDoesNotExist", Code.STREAM_DOES_NOT_EXIST,
                           "The stream (or super stream) does not exist in this vhost.")
SubscriptionIdAlreadyExists = _make("SubscriptionIdAlreadyExists",
                                    Code.SUBSCRIPTION_ID_ALREADY_EXISTS,
                                    "The subscription id is in use on this connection.")
SubscriptionIdDoesNotExist = _make("SubscriptionIdDoesNotExist",
                                   Code.SUBSCRIPTION_ID_DOES_NOT_EXIST,
                                   "No subscription has that id on this connection.")
StreamAlreadyExists = _make("StreamAlreadyExists", Code.STREAM_ALREADY_EXISTS,
                            "A stream of that name exists (with other arguments, or create "
                            "was asked twice).")
StreamNotAvailable = _make("StreamNotAvailable", Code.STREAM_NOT_AVAILABLE,
                           "The stream exists but has no leader/replica available now "
                           "(e.g. a node is down): retry later.")
SaslMechanismNotSupported = _make("SaslMechanismNotSupported", Code.SASL_MECHANISM_NOT_SUPPORTED,
                                  "The broker does not offer that SASL mechanism.")
AuthenticationFailure = _make("AuthenticationFailure", Code.AUTHENTICATION_FAILURE,
                              "Wrong user name or password (or certificate for EXTERNAL).")
SaslError = _make("SaslError", Code.SASL_ERROR, "The SASL exchange was malformed.")
SaslChallenge = _make("SaslChallenge", Code.SASL_CHALLENGE,
                      "The broker sent a SASL challenge this client cannot answer.")
AuthenticationFailureLoopback = _make(
    "AuthenticationFailureLoopback", Code.SASL_AUTHENTICATION_FAILURE_LOOPBACK,
    "The user may only connect from localhost (RabbitMQ's loopback_users, e.g. guest).")
VirtualHostAccessFailure = _make("VirtualHostAccessFailure", Code.VIRTUAL_HOST_ACCESS_FAILURE,
                                 "The vhost does not exist or the user may not use it.")
UnknownFrame = _make("UnknownFrame", Code.UNKNOWN_FRAME,
                     "A frame that could not be parsed (unknown key/version, malformed "
                     "fields) or was not expected now.")
FrameTooLarge = _make("FrameTooLarge", Code.FRAME_TOO_LARGE,
                      "A frame larger than the negotiated frame_max.")
InternalError = _make("InternalError", Code.INTERNAL_ERROR, "The broker failed internally.")
AccessRefused = _make("AccessRefused", Code.ACCESS_REFUSED,
                      "The user lacks the permission (configure/write/read) on the resource.")
PreconditionFailed = _make("PreconditionFailed", Code.PRECONDITION_FAILED,
                           "A precondition failed (e.g. invalid stream arguments, a publisher "
                           "reference in use, a sub-batch over the broker's size limit).")
PublisherDoesNotExist = _make("PublisherDoesNotExist", Code.PUBLISHER_DOES_NOT_EXIST,
                              "No publisher has that id on this connection.")
NoOffset = _make("NoOffset", Code.NO_OFFSET,
                 "No offset is stored for that reference on that stream.")
SaslCannotChangeMechanism = _make("SaslCannotChangeMechanism", Code.SASL_CANNOT_CHANGE_MECHANISM,
                                  "A re-authentication tried another SASL mechanism.")
SaslCannotChangeUsername = _make("SaslCannotChangeUsername", Code.SASL_CANNOT_CHANGE_USERNAME,
                                 "A re-authentication tried another user name.")


class CorruptChunk(UnknownFrame):  # type: ignore[misc, valid-type]
    """A delivered chunk that is not valid: its CRC-32 does not match its entries, or its
    entries do not fit the sizes and counts of its header (osiris_log.erl's chunk format).
    Nothing of it is handed on; the connection should be closed (code ``UNKNOWN_FRAME``)."""


ERROR_CLASSES: dict[int, type] = {
    cls.code: cls for cls in (
        StreamDoesNotExist, SubscriptionIdAlreadyExists, SubscriptionIdDoesNotExist,
        StreamAlreadyExists, StreamNotAvailable, SaslMechanismNotSupported,
        AuthenticationFailure, SaslError, SaslChallenge, AuthenticationFailureLoopback,
        VirtualHostAccessFailure, UnknownFrame, FrameTooLarge, InternalError, AccessRefused,
        PreconditionFailed, PublisherDoesNotExist, NoOffset, SaslCannotChangeMechanism,
        SaslCannotChangeUsername)
}
"""``response code -> error class`` (every code but OK)."""


def error_for_code(code: int, text: str = "") -> StreamError:
    """The typed error for response ``code`` (a plain :class:`StreamError` carrying the code
    for one this package does not know, e.g. from a newer broker)."""
    cls = ERROR_CLASSES.get(code)
    if cls is None:
        return StreamError(text or f"response code {code:#06x}", code=code)
    return cls(text)
