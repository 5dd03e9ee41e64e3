"""The version matrix in one command (`nox`, issue 40): PySpark 4.0-4.3 x CPython 3.10-3.13.

    nox -s tests                      # the full suite on the newest pair (CPython 3.11, PySpark 4.3)
    nox -s compat                     # the compatibility tier on PySpark 4.0, 4.1, 4.2, 4.3 (3.11)
    nox -s "compat(pyspark='4.1')"    # one of them
    nox -s compat_python              # the tier on CPython 3.10, 3.12, 3.13 (newest PySpark)
    nox -s compat -- -m "not rabbitmq"   # pytest arguments after --: the embedded broker only

Each session is a venv under .nox/ (`nox -R` reuses it without reinstalling): PySpark first,
then this package editable with a constraint that keeps that PySpark (as a platform that ships
its own PySpark installs it, docs/getting-started.md). The interpreters are pyenv's
(``$PYENV_ROOT/versions/3.x.y/bin``, put on PATH here) or any ``python3.x`` on PATH. The
compiled twins build in place for each interpreter (their file names carry the ABI tag), and
the tier requires them (``SPARK_AMQP_REQUIRE_SPEEDUPS=1``: a silently failed build fails the
codec's differential tests instead of skipping them).
"""

from __future__ import annotations

import glob
import os

import nox

#: the compatibility tier (issue 40): quick start, queue and stream source including live and
#: crash tests, sink, the codec's differential tests (compiled twins against pure Python)
COMPAT_TIER = [
    "tests/app/test_readme.py::test_quick_start_runs_as_written_twice_in_one_folder",
    "tests/spark/test_queues_query.py",
    "tests/spark/test_streams_query.py",
    "tests/spark/test_live.py",
    "tests/spark/test_queues_crash.py",
    "tests/spark/test_streams_crash.py",
    "tests/spark/test_sink.py",
    "tests/protocol/test_codec_speedups.py",
]
PYSPARK_VERSIONS = ["4.0", "4.1", "4.2", "4.3"]
NEWEST_PYSPARK = PYSPARK_VERSIONS[-1]
NEWEST_PAIR_PYTHON = "3.11"
OTHER_PYTHONS = ["3.10", "3.12", "3.13"]

_pyenv = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
_bins = sorted(glob.glob(os.path.join(_pyenv, "versions", "3.1[0-9].*", "bin")))
os.environ["PATH"] = os.pathsep.join([*_bins, os.environ.get("PATH", "")])

nox.options.sessions = ["tests"]
nox.options.default_venv_backend = "venv"


def _install(session: nox.Session, pyspark: str) -> None:
    """PySpark ``pyspark``.* first, then the package editable (test and broker extras) under a
    constraint that pins the PySpark just installed."""
    session.install(f"pyspark[sql,connect]=={pyspark}.*")
    # run_install: also under --install-only (where session.run runs nothing)
    version = session.run_install("python", "-c", "import importlib.metadata as m; "
                                  "print(m.version('pyspark'))", silent=True)
    if version is None:  # nox -R (--no-install): the venv is reused as it is
        return
    version = version.strip()
    constraint = os.path.join(session.create_tmp(), "pyspark-constraint.txt")
    with open(constraint, "w") as f:
        f.write(f"pyspark=={version}\n")
    if _admitted(version):
        session.install("-c", constraint, "-e", ".[test,broker]")
    else:
        # below pyproject's pin (4.0/4.1, not supported yet: docs/getting-started.md): the
        # requirements without PySpark's, then the package with --no-deps, as on a platform
        # that ships its own PySpark
        session.install("-c", constraint, *_requirements_but_pyspark())
        session.install("--no-deps", "-e", ".")
    session.log(f"PySpark {version}")


def _pyproject() -> dict:
    import tomllib

    with open("pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _admitted(version: str) -> bool:
    """Whether pyproject's PySpark requirement admits ``version``."""
    from packaging.requirements import Requirement

    for line in _pyproject()["dependencies"]:
        r = Requirement(line)
        if r.name == "pyspark":
            return r.specifier.contains(version)
    return True


def _requirements_but_pyspark() -> list[str]:
    """The package's requirements and its test and broker extras, without PySpark."""
    from packaging.requirements import Requirement

    p = _pyproject()
    lines = [*p["dependencies"], *p["optional-dependencies"]["test"],
             *p["optional-dependencies"]["broker"]]
    return [line for line in lines if Requirement(line).name != "pyspark"]


def _pytest(session: nox.Session, paths: list[str]) -> None:
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=10",
                *(session.posargs or []), *paths,
                env={"SPARK_AMQP_REQUIRE_SPEEDUPS": "1"})


@nox.session(python=NEWEST_PAIR_PYTHON)
def tests(session: nox.Session) -> None:
    """The full suite on the newest pair (what `make test` runs, in a nox venv)."""
    _install(session, NEWEST_PYSPARK)
    _pytest(session, ["tests"])


@nox.session(python=NEWEST_PAIR_PYTHON)
@nox.parametrize("pyspark", PYSPARK_VERSIONS)
def compat(session: nox.Session, pyspark: str) -> None:
    """The compatibility tier on one PySpark (CPython 3.11)."""
    _install(session, pyspark)
    _pytest(session, COMPAT_TIER)


@nox.session(python=OTHER_PYTHONS)
def compat_python(session: nox.Session) -> None:
    """The compatibility tier on one CPython (the newest PySpark)."""
    _install(session, NEWEST_PYSPARK)
    _pytest(session, COMPAT_TIER)
