"""Builds the optional compiled twins (Cython): one ``.pyx`` per compiled module, listed in
:data:`TWINS`; a new one is one line there.

Everything else is configured in pyproject.toml. The extensions are optional: without Cython or
a C compiler (the build of an extension fails: setuptools warns and goes on), or with
``SPARK_AMQP_PURE_PYTHON=1`` at build time, the package installs as pure Python and the codec
uses its pure-Python code (the same results and errors, slower).
"""

import os
import sys

from setuptools import Extension, setup

#: the compiled twins, each the ``.pyx`` beside the pure-Python module it speeds up
#: (``_codec_core``: the C helpers they share, declared in its ``.pxd``)
TWINS = [
    "spark_amqp/protocol/_codec_core.pyx",
    "spark_amqp/protocol/_properties.pyx",
    "spark_amqp/protocol/_methods.pyx",
    "spark_amqp/protocol/_frames.pyx",
    "spark_amqp/protocol/_raw_deliveries.pyx",
    "spark_amqp/protocol/_raw_publish.pyx",
    "spark_amqp/protocol/_server_frames.pyx",
    "spark_amqp/protocol/stream/_speedups.pyx",
    "spark_amqp/protocol/amqp10/_speedups.pyx",
]


def extension(path: str) -> Extension:
    """The extension module of ``path`` (``spark_amqp/protocol/_frames.pyx`` ->
    ``spark_amqp.protocol._frames``)."""
    return Extension(path[:-len(".pyx")].replace("/", "."), [path])


ext_modules = []
if os.environ.get("SPARK_AMQP_PURE_PYTHON") != "1":
    try:
        from Cython.Build import cythonize

        ext_modules = cythonize([extension(p) for p in TWINS],
                                compiler_directives={"language_level": 3}, quiet=True)
    except Exception as exc:  # no Cython in the build environment, or it failed: pure Python
        print(f"spark-amqp: building without the compiled twins ({exc!r})", file=sys.stderr)
        ext_modules = []
    for ext in ext_modules:  # (cythonize does not carry `optional` over from the template)
        ext.optional = True  # a failed C compile leaves the pure-Python package

setup(ext_modules=ext_modules)
