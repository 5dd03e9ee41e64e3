"""Builds the optional compiled fast paths of the codec (``spark_amqp/protocol/_speedups.pyx``).

Everything else is configured in pyproject.toml. The extension is optional: without Cython or
a C compiler, or with ``SPARK_AMQP_PURE_PYTHON=1`` at build time, the package installs as pure
Python and the codec uses its pure-Python code (the same results and errors, slower).
"""

import os

from setuptools import Extension, setup

ext_modules = []
if os.environ.get("SPARK_AMQP_PURE_PYTHON") != "1":
    try:
        from Cython.Build import cythonize
    except ImportError:  # no Cython in the build environment: pure Python
        pass
    else:
        ext_modules = cythonize(
            [Extension("spark_amqp.protocol._speedups", ["spark_amqp/protocol/_speedups.pyx"],
                       optional=True)],
            compiler_directives={"language_level": 3}, quiet=True)

setup(ext_modules=ext_modules)
