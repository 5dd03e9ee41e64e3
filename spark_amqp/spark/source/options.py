"""The ``amqp`` source's options: which mode an options dict asks for, and that mode's parsed
options (no I/O).

Each mode's options live in its folder: the queue mode's :mod:`.queues.options`
(:class:`~.queues.options.SourceOptions`, ``parse_source_options``, the table
``QUEUE_OPTIONS``) and the stream mode's :mod:`.streams.options`
(:class:`~.streams.options.StreamOptions`, ``parse_stream_options``, ``STREAM_TABLE``); the
options both use are beside them (:mod:`..connection_options`, and the pacing options of
:mod:`.pacing`). The stream mode is chosen by the option ``stream`` or ``superStream``
(:func:`is_stream_mode`); without it the source reads classic and quorum queues.
"""

from __future__ import annotations

from typing import Mapping

from .queues.options import KNOWN_OPTIONS, SourceOptions, parse_source_options
from .streams.options import StreamOptions, is_stream_mode, parse_stream_options

__all__ = ["parse_options", "is_stream_mode", "parse_source_options", "parse_stream_options",
           "SourceOptions", "StreamOptions", "KNOWN_OPTIONS"]


def parse_options(opts: Mapping[str, str]) -> SourceOptions | StreamOptions:
    """The options of the mode ``opts`` asks for (lower-cased keys, string values, as Spark
    hands them over): :class:`~.streams.options.StreamOptions` with ``stream`` or
    ``superStream``, else :class:`~.queues.options.SourceOptions`. Raises ``ValueError``
    naming the option that is wrong (the mode's parser)."""
    if is_stream_mode(opts):
        return parse_stream_options(opts)
    return parse_source_options(opts)
