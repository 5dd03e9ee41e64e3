"""Switching the codec between its compiled fast paths and pure Python inside a test."""

from __future__ import annotations

import contextlib

from spark_amqp.protocol import frames as frames_module
from spark_amqp.protocol import properties as props_module
from spark_amqp.protocol import spec

#: the compiled module the codec loaded at import (None: pure Python)
SPEEDUPS = props_module.SPEEDUPS


@contextlib.contextmanager
def installed(speedups):
    """Every codec entry point switched to ``speedups`` (None = pure Python) for the block: the
    content fast path, the raw-delivery scan, the method decoders, the property codec;
    restored afterwards."""
    def install(s):
        frames_module._CONTENT_FAST = frames_module._content_fast(s)
        frames_module._MESSAGE_FAST = frames_module._message_fast(s)
        frames_module._ENCODE_FAST = frames_module._encode_fast(s)
        frames_module._SCAN_DELIVERIES = frames_module._scan_fast(s)
        frames_module._SCAN_PUBLISH = frames_module._publish_fast(s)
        spec._install_decoders(s)
        props_module._install(s)
        props_module.SPEEDUPS = s
        props_module._DECODERS.clear()
        frames_module.decode_properties = props_module.decode_properties

    install(speedups)
    try:
        yield
    finally:
        install(SPEEDUPS)
