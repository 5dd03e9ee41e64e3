"""Loading the stream codec's compiled fast paths (``_speedups.pyx``, built by setup.py).

:data:`SPEEDUPS` is the compiled module, or None when it was not built or
``SPARK_AMQP_PURE_PYTHON=1``. :func:`install` makes the codec's hot functions
(``commands.encode_publish``, ``encode_publish_ids``, ``split_publish``,
``chunk.split_entries``, ``join_entries``) the compiled ones, or the pure-Python ones for
``None``: the same results and errors either way (the compiled functions hand every
uncommon or bad input to the pure-Python ones).
"""

from __future__ import annotations

import os

from . import chunk, commands

__all__ = ["SPEEDUPS", "install", "load"]

_NAMES = {"encode_publish": commands, "encode_publish_ids": commands,
          "split_publish": commands, "split_entries": chunk, "join_entries": chunk}


def load(pure: str | None):
    """The compiled module set up with its pure-Python fallbacks, or None."""
    if pure == "1":
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    _speedups.setup(chunk.py_split_entries, commands.py_encode_publish,
                    commands.py_encode_publish_ids, commands.py_split_publish,
                    chunk.py_join_entries)
    return _speedups


def install(speedups) -> None:
    """Switch the codec's hot functions to ``speedups`` (None: pure Python)."""
    import sys

    pkg = sys.modules[__package__]
    for name, module in _NAMES.items():
        fn = getattr(speedups, name) if speedups is not None else getattr(module, "py_" + name)
        setattr(module, name, fn)
        if hasattr(pkg, name):
            setattr(pkg, name, fn)


SPEEDUPS = load(os.environ.get("SPARK_AMQP_PURE_PYTHON"))
