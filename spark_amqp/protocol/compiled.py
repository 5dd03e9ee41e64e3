"""The compiled twins (Cython, built by ``setup.py``: one ``.pyx`` beside each module it speeds
up) and the switch that turns them off.

Each twin handles the common, well-formed shapes of its pure-Python module and hands anything
else to it, so results and errors are those of the pure-Python code (``_codec_core.pyx``).
The protocol layer's twins are loaded together by :func:`load` (at import, as
:data:`.properties.SPEEDUPS`), one namespace of their public functions (``decode_properties``, ``decode_method``, ``content_messages``,
``deliver_columns``, ``scan_publish``, ``append_deliver`` ...), or None: with
``SPARK_AMQP_PURE_PYTHON=1``, or when one of them is not built (they are built together).
Each pure-Python module binds its own twin (``bind_<module>``) and picks its functions from
that namespace; a twin loaded on its own (the stream protocol's and the AMQP 1.0 codec's
``_speedups``) is loaded with :func:`twin`.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType, SimpleNamespace

__all__ = ["PURE_PYTHON_ENV", "PROTOCOL_TWINS", "load", "twin"]

#: the environment variable that forces pure Python (``"1"``), read at import
PURE_PYTHON_ENV = "SPARK_AMQP_PURE_PYTHON"
#: the protocol layer's twins, by module name (``setup.py`` builds them)
PROTOCOL_TWINS = ("_codec_core", "_properties", "_methods", "_frames", "_raw_deliveries",
                  "_raw_publish", "_server_frames")


def twin(module: str, pure: str | None = None) -> ModuleType | None:
    """The compiled module ``module`` (a full dotted name, e.g.
    ``"spark_amqp.protocol.stream._speedups"``), or None when ``pure`` (default: the
    ``SPARK_AMQP_PURE_PYTHON`` environment variable) is ``"1"`` or it is not built."""
    if (os.environ.get(PURE_PYTHON_ENV) if pure is None else pure) == "1":
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def load(pure: str | None = None) -> SimpleNamespace | None:
    """Every public function of the protocol's twins as one namespace, or None (see the module
    doc; ``pure`` as for :func:`twin`)."""
    functions: dict = {}
    for name in PROTOCOL_TWINS:
        mod = twin(f"{__package__}.{name}", pure)
        if mod is None:
            return None
        functions.update((k, v) for k, v in vars(mod).items()
                         if not k.startswith("_") and callable(v) and not isinstance(v, type))
    return SimpleNamespace(**functions)
