"""Shared fixtures: one SparkSession per run, broker URLs for the embedded broker and RabbitMQ.

RabbitMQ at 127.0.0.1:5672 (override with SPARK_AMQP_RABBITMQ_URL) is the reference broker.
Tests that need it skip with a reason when it is unreachable, unless
SPARK_AMQP_REQUIRE_RABBITMQ=1 (set by .ci/run), which turns the skip into a failure.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
from hypothesis import HealthCheck, settings

# Property tests run beside Spark's JVM and the background crash runs: an example that waits for
# a CPU is not slow code. No per-example deadline and no too_slow health check, so a loaded
# machine cannot fail them (a failed property still fails; seen: test_offset_json_round_trip
# over the 200 ms default deadline while a clean-clone CI ran beside it).
settings.register_profile("spark-amqp", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("spark-amqp")

ROOT = Path(__file__).resolve().parent.parent

#: Every JVM the tests start through spark-submit (the session's, and the subprocess jobs',
#: demos', notebook's and docs examples' ones: they inherit the variable) compiles with C1 only
#: and collects with the serial collector, as the crash runners already did
#: (tests/spark/source_query_runner.py RUNNER_JVM_OPTIONS) and the standalone daemons do
#: (spark_amqp/tools/standalone.py): a test's JVM lives for seconds to minutes and spends most
#: of its CPU starting up and compiling. Measured on 2026-11-27 (2 cores, beside a CI run),
#: ``flight_delays.py --demo --limit 5000``: the JVM used 80.0 CPU-s with the defaults and 39.8
#: with these; the whole process tree 104.9 and 63.9. The suite is CPU-bound on 2 cores
#: (tests/background.py), so that is wall time. A value already set is kept.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
RABBITMQ_URL = os.environ.get("SPARK_AMQP_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
REQUIRE_RABBITMQ = os.environ.get("SPARK_AMQP_REQUIRE_RABBITMQ") == "1"


def _reachable(url: str) -> bool:
    u = urlparse(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 5672), timeout=2) as s:
            s.sendall(b"AMQP\x00\x00\x09\x01")
            s.settimeout(3)
            return s.recv(1) == b"\x01"  # a method frame: connection.start
    except OSError:
        return False


_RABBIT_OK: bool | None = None


def rabbitmq_available() -> bool:
    global _RABBIT_OK
    if _RABBIT_OK is None:
        _RABBIT_OK = _reachable(RABBITMQ_URL)
    return _RABBIT_OK


def require_rabbitmq() -> str:
    """Return the RabbitMQ URL, or skip (fail under SPARK_AMQP_REQUIRE_RABBITMQ=1)."""
    if rabbitmq_available():
        return RABBITMQ_URL
    reason = (f"RabbitMQ not reachable at {RABBITMQ_URL}: start it with `rabbitmq-server -detached` "
              "or set SPARK_AMQP_RABBITMQ_URL")
    if REQUIRE_RABBITMQ:
        pytest.fail(reason + " (SPARK_AMQP_REQUIRE_RABBITMQ=1 makes this a failure)")
    pytest.skip(reason)


def pytest_addoption(parser):
    parser.addoption("--session-id", default=None,
                     help="the test session's id (tests/session_guard.py; default: a new one "
                          "from the time): names and processes of the session carry it")


#: the session's watchdog process (tests/session_guard.py start_watchdog) and the signal
#: handlers it replaced
_GUARD: dict = {}


def _interrupted(signum, frame):
    """SIGINT/SIGTERM: stop the background runs from starting more, kill every process of the
    session and delete its names on RabbitMQ now, then unwind as Ctrl-C does (the teardowns
    then find dead processes instead of waiting for them). A second signal meanwhile is
    ignored so that the cleanup finishes (the watchdog does it if pytest is SIGKILLed)."""
    import background
    import session_guard

    if _GUARD.get("killing"):
        return
    _GUARD["killing"] = True
    if "session" in _GUARD:
        # pytest stops after the test that runs now, even if a `finally` of that test turns
        # the KeyboardInterrupt into another error (say, q.stop() on the dead JVM)
        _GUARD["session"].shouldstop = f"{signal.Signals(signum).name}: interrupted"
    try:
        background.cancel_all()
        watchdog = _GUARD.get("watchdog")
        killed = session_guard.kill_session(exclude={watchdog.pid} if watchdog else ())
        deleted = (session_guard.delete_session_objects(amqp_url=RABBITMQ_URL)
                   if rabbitmq_available() else [])
        _GUARD["report"] = (f"{signal.Signals(signum).name}: stopped {len(killed)} processes of "
                            f"test session {session_guard.session_id()}, deleted {len(deleted)} "
                            f"of its queues/exchanges on RabbitMQ")
    finally:
        _GUARD["killing"] = False
    raise KeyboardInterrupt


def pytest_configure(config):
    """The session's id in the environment (tests/session_guard.py: every process the session
    starts carries it and every name it declares starts with it), leftovers of sessions older
    than session_guard.STALE_HOURS deleted from RabbitMQ, the watchdog started and the
    SIGINT/SIGTERM handler installed (:func:`_interrupted`)."""
    import session_guard

    sid = config.getoption("--session-id") or session_guard.new_session_id()
    os.environ[session_guard.ENV] = sid
    if rabbitmq_available():
        session_guard.delete_session_objects(stale_hours=session_guard.STALE_HOURS,
                                             amqp_url=RABBITMQ_URL)
    _GUARD["watchdog"] = session_guard.start_watchdog()
    # a SIGINT ignored from the start (a background job of a non-interactive shell: `make test &`
    # in a script) stays ignored, as pytest would leave it
    _GUARD["handlers"] = {s: signal.signal(s, _interrupted) for s in (signal.SIGINT, signal.SIGTERM)
                          if signal.getsignal(s) is not signal.SIG_IGN}


def pytest_sessionstart(session):
    _GUARD["session"] = session


def _reguard() -> None:
    """Put :func:`_interrupted` back where something replaced it: creating a SparkContext in
    the main thread installs pyspark's own SIGINT handler (it cancels the jobs through the
    JVM and raises KeyboardInterrupt, and kills nothing)."""
    for s in _GUARD.get("handlers", {}):
        if signal.getsignal(s) is not _interrupted:
            signal.signal(s, _interrupted)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    _reguard()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item):
    _reguard()


def pytest_terminal_summary(terminalreporter):
    """Say what the SIGINT/SIGTERM handler stopped and deleted (its own output is captured)."""
    if "report" in _GUARD:
        terminalreporter.write_line(_GUARD["report"])


def pytest_unconfigure(config):
    """The session finalizer (after every fixture's teardown, also after an interruption):
    kill what is left of the session's processes, delete its names on RabbitMQ, stop the
    watchdog, put the signal handlers back."""
    import session_guard

    for s, h in _GUARD.pop("handlers", {}).items():
        signal.signal(s, h)
    watchdog = _GUARD.pop("watchdog", None)
    session_guard.kill_session(exclude={watchdog.pid} if watchdog else ())
    if rabbitmq_available():
        session_guard.delete_session_objects(amqp_url=RABBITMQ_URL)
    if watchdog is not None:
        watchdog.kill()
        watchdog.wait()


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config, items):
    """Put each test's tiers on it (tests/tiers.py: unit, broker, rabbitmq, spark, cluster,
    rabbitmq_cluster), from its fixtures, folder, parameters and hand-put markers; then order
    the session (tests/background.py)."""
    from tiers import tiers

    tests = ROOT / "tests"
    for item in items:
        have = {m.name for m in item.iter_markers()}
        parts = Path(str(item.fspath)).resolve().relative_to(tests).parts
        callspec = getattr(item, "callspec", None)
        for tier in sorted(tiers(getattr(item, "fixturenames", ()),
                                 parts[0] if len(parts) > 1 else "",
                                 callspec.params if callspec is not None else {}, have) - have):
            item.add_marker(tier)
        if getattr(item, "originalname", None) in EARLY_CRASH_TESTS:
            item.add_marker("background_result")
    # the session order of tests/background.py: the folders that leave the cores idle first
    # (the slow background runs fill them), the tests that take a slow run's result last
    from background import session_order

    items[:] = session_order(items)


@pytest.fixture(scope="session")
def rabbitmq_url() -> str:
    return require_rabbitmq()


@pytest.fixture(scope="session")
def embedded_broker():
    """One in-memory embedded broker on an ephemeral port for the whole run, in the default
    mode (RabbitMQ 4.3; tests/broker/conformance and tests/client use ``embedded_broker_310``)."""
    from spark_amqp import EmbeddedBroker

    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def embedded_broker_310():
    """An in-memory embedded broker in RabbitMQ 3.10 mode (``rabbitmq_version="3.10"``), for
    the tests that compare it with the local RabbitMQ 3.10.8: tests/broker/conformance and
    tests/client make it their ``embedded_broker``."""
    from spark_amqp import EmbeddedBroker

    with EmbeddedBroker(rabbitmq_version="3.10") as broker:
        yield broker


@pytest.fixture(scope="session")
def embedded_stream_broker():
    """An in-memory embedded broker in RabbitMQ 3.10 mode that also serves the stream protocol
    (``stream_port=0``): the embedded side of the stream-protocol tests, which compare it with
    the local RabbitMQ 3.10.8 (``b.stream_url``, ``b.url``)."""
    from spark_amqp import EmbeddedBroker

    with EmbeddedBroker(rabbitmq_version="3.10", stream_port=0) as broker:
        yield broker


@pytest.fixture(scope="session")
def embedded_broker_43():
    """An in-memory embedded broker in RabbitMQ 4.3 mode, named so (the default mode too)."""
    from spark_amqp import EmbeddedBroker

    with EmbeddedBroker(rabbitmq_version="4.3") as broker:
        yield broker


@pytest.fixture(params=["embedded", "rabbitmq"])
def broker_url(request) -> str:
    """The same test against the embedded broker and against the real RabbitMQ."""
    if request.param == "rabbitmq":
        return require_rabbitmq()
    return request.getfixturevalue("embedded_broker").url


@pytest.fixture
def unique():
    """A factory of unique names for queues/exchanges/streams: ``unique("orders")`` ->
    ``spark-amqp-test.<session id>.orders.<10 hex>`` (tests/session_guard.py unique_name: the
    session finalizer deletes what carries the session's prefix from RabbitMQ)."""
    from session_guard import unique_name

    return unique_name


@pytest.fixture(scope="session")
def spark():
    """The one shared SparkSession of the test run (local[2], quiet logs)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    log4j = ROOT / "conf" / "log4j2.properties"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("spark-amqp-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{log4j}")
        .config("spark.executor.extraJavaOptions", f"-Dlog4j.configurationFile=file:{log4j}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    import spark_amqp

    spark_amqp.register(session)
    _reguard()   # the SparkContext replaced the SIGINT handler
    yield session
    session.stop()


#: The crash tests whose runs start in the background when the test session starts, in this
#: order: each is a test module's ``crash_scenario(broker_url, tmp_dir)`` (one broker's
#: publish, kills, restarts and final run), run for every broker its selected items ask for.
EARLY_CRASH_TESTS = ("test_crash_restart_exactly_once", "test_crash_restart_loses_nothing")


@pytest.fixture(scope="session", autouse=True)
def background_runs(request, tmp_path_factory):
    """The session's slow runs (tests/background.py), started when the session starts and run
    two at a time beside the tests: the crash tests' scenarios (``{(test name,
    "embedded"|"rabbitmq"): Future of crash_scenario's result}``, taken by the crash tests'
    module fixtures through source_helpers.broker_variants_at_once), then the runs that test
    modules ask for with a ``start_background_runs(runs, fixturenames, tmp_path_factory)``
    function (the flight demos). Yields the :class:`background.BackgroundRuns`.

    Why: each crash test restarts a Spark query in a subprocess 4-6 times per broker and each
    flight demo is a whole Spark job; those runs spend most of their time starting JVMs. In
    the session's first stretch (tests/broker, tests/client, ...) the cores are mostly idle.
    Each crash scenario runs in a Python subprocess of its own
    (:func:`background.in_subprocess`), with the embedded broker's runs on a broker of their
    own (another subprocess: 100,000 messages each would compete with the tests for this
    process's GIL, and its queues would show in other tests' views of the broker). Only
    selected items are run; RabbitMQ's only when it is reachable (its item then skips or
    fails through ``broker_url`` as any other)."""
    from background import BackgroundRuns, in_subprocess

    items = request.session.items
    crash = [i for i in items
             if getattr(i, "originalname", None) in EARLY_CRASH_TESTS and hasattr(i, "callspec")]
    modules = []
    for item in items:
        m = getattr(item, "module", None)
        if m is not None and hasattr(m, "start_background_runs") and m not in modules:
            modules.append(m)
    runs = BackgroundRuns()
    broker = None
    if crash:
        from broker_process import BrokerProcess

        kinds = {i.callspec.params.get("broker_url") for i in crash}
        broker = BrokerProcess(log_level="ERROR") if "embedded" in kinds else None
        urls = {"embedded": broker.url} if broker is not None else {}
        if "rabbitmq" in kinds:
            try:
                urls["rabbitmq"] = require_rabbitmq()
            except (pytest.skip.Exception, pytest.fail.Exception):
                pass
        for name in EARLY_CRASH_TESTS:
            mine = [i for i in crash if i.originalname == name]
            for kind in sorted({i.callspec.params.get("broker_url") for i in mine} & urls.keys()):
                runs.submit((name, kind), in_subprocess, str(mine[0].fspath), "crash_scenario",
                            urls[kind], tmp_path_factory.mktemp(f"{name}-{kind}"))
    used = {name for item in items for name in getattr(item, "fixturenames", ())}
    for m in modules:
        m.start_background_runs(runs, used, tmp_path_factory)
    try:
        yield runs
    finally:
        runs.close()
        if broker is not None:
            broker.kill()
