"""Builds the optional compiled fast paths of the codecs (``spark_amqp/protocol/_speedups.pyx``
for AMQP 0-9-1, ``spark_amqp/protocol/stream/_speedups.pyx`` for the stream protocol,
``spark_amqp/protocol/amqp10/_speedups.pyx`` for the AMQP 1.0 message format).

Everything else is configured in pyproject.toml. The extension is optional: without Cython or
a C compiler (the build of the extension fails: setuptools warns and goes on), or with
``SPARK_AMQP_PURE_PYTHON=1`` at build time, the package installs as pure Python and the codec
uses its pure-Python code (the same results and errors, slower).
"""

import os
import sys

from setuptools import Extension, setup

ext_modules = []
if os.environ.get("SPARK_AMQP_PURE_PYTHON") != "1":
    try:
        from Cython.Build import cythonize

        ext_modules = cythonize(
            [Extension("spark_amqp.protocol._speedups", ["spark_amqp/protocol/_speedups.pyx"]),
             Extension("spark_amqp.protocol.stream._speedups",
                       ["spark_amqp/protocol/stream/_speedups.pyx"]),
             Extension("spark_amqp.protocol.amqp10._speedups", ["spark_amqp/protocol/amqp10/_speedups.pyx"])],
            compiler_directives={"language_level": 3}, quiet=True)
    except Exception as exc:  # no Cython in the build environment, or it failed: pure Python
        print(f"spark-amqp: building without the codec's compiled fast paths ({exc!r})",
              file=sys.stderr)
        ext_modules = []
    for ext in ext_modules:  # (cythonize does not carry `optional` over from the template)
        ext.optional = True  # a failed C compile leaves the pure-Python package

setup(ext_modules=ext_modules)
