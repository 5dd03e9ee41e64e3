"""``basic.publish`` messages encoded to bytes with the method frame cached (sans-IO).

A publisher sends the same ``basic.publish`` method (same exchange, routing key and mandatory
flag) for most of its messages, so :class:`PublishEncoder` encodes that method frame once per
``(exchange, routing_key, mandatory)`` and, per message, only packs the content header and
body frames around the properties and the body. The bytes are those of
:func:`.frames.encode_message` for ``Basic.Publish(0, exchange, routing_key, mandatory,
False)``: a method frame, a content header frame (class 60, weight 0, body size, property
flags and list) and the body in frames of at most ``frame_max - 8`` bytes (0-9-1 spec §2.3.5.2
and §4.2.6 content framing; a zero-length body has no body frame).
"""

from __future__ import annotations

from typing import Any

from .frames import END_BODY_HEAD, END_HEADER_HEAD, encode_message
from .spec import Basic

__all__ = ["PublishEncoder", "MAX_CACHED_METHODS"]

#: publish method frames kept per encoder; the cache starts over when it would grow past this
MAX_CACHED_METHODS = 1024

_Publish = Basic.Publish
_CLASS_ID = Basic.CLASS_ID  # 60
_NO_PROPERTIES = b"\x00\x00"  # property flags word with no property present


class PublishEncoder:
    """Encodes ``basic.publish`` messages of one channel as bytes ready to write.

    Args:
        channel: the channel number (1..65535).
        frame_max: the negotiated maximum frame size in bytes, the 8 bytes of framing
            included (``connection.tune-ok``); 0 = no limit. Bodies longer than
            ``frame_max - 8`` bytes are split into several body frames.

    The method frame of each ``(exchange, routing_key, mandatory)`` is encoded once and
    kept (at most :data:`MAX_CACHED_METHODS`, then the cache starts over). Not thread-safe
    by itself; a channel's publishes are serialised by its owner.
    """

    __slots__ = ("channel", "frame_max", "_chunk", "_methods")

    def __init__(self, channel: int, frame_max: int):
        self.channel = channel
        self.frame_max = frame_max
        # the largest body sent in one body frame (no limit when frame_max is 0)
        self._chunk = frame_max - 8 if frame_max else 1 << 62
        self._methods: dict[tuple, bytes] = {}

    def _method_frame(self, key: tuple) -> bytes:
        """The publish method frame of ``key`` (exchange, routing_key, mandatory) without
        its frame-end octet (that is packed with the content header's frame header)."""
        exchange, routing_key, mandatory = key
        frame = b"".join(_Publish(0, exchange, routing_key, mandatory, False)
                         .frame_parts(self.channel))
        methods = self._methods
        if len(methods) >= MAX_CACHED_METHODS:
            methods.clear()
        methods[key] = frame
        return frame

    def encode(self, body: Any, exchange: str = "", routing_key: str = "",
               properties: Any = None, mandatory: bool = False) -> bytes:
        """One message: method, content header and body frames as one bytes object.

        ``body``: bytes-like. ``properties``: a :class:`.properties.BasicProperties` or any
        object whose ``encode()`` returns the encoded property flags and list (bytes), or
        None for no properties. Equal, byte for byte, to
        ``encode_message(channel, Basic.Publish(0, exchange, routing_key, mandatory, False),
        properties, bytes(body), frame_max)``.

        Raises AMQPSyntaxError (502) for an exchange or routing key over 255 UTF-8 bytes, a
        channel out of range or unencodable properties; ValueError when a non-empty body
        does not fit in a frame of ``frame_max`` < 9.
        """
        blen = len(body)
        if blen > self._chunk:  # split over several body frames: the general encoder
            return encode_message(self.channel, _Publish(0, exchange, routing_key, mandatory,
                                                         False),
                                  properties, bytes(body), self.frame_max)
        key = (exchange, routing_key, mandatory)
        head = self._methods.get(key)
        if head is None:
            head = self._method_frame(key)
        props = properties.encode() if properties is not None else _NO_PROPERTIES
        ch = self.channel
        if blen:
            return b"".join((head, END_HEADER_HEAD(0xCE, 2, ch, 12 + len(props), _CLASS_ID,
                                                    0, blen),
                             props, END_BODY_HEAD(0xCE, 3, ch, blen), body, b"\xce"))
        return b"".join((head, END_HEADER_HEAD(0xCE, 2, ch, 12 + len(props), _CLASS_ID, 0, 0),
                         props, b"\xce"))
