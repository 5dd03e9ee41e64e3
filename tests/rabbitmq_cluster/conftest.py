"""A real three-node RabbitMQ cluster for the failover tests (issue 27), one per test session.

``rmq_cluster``: a started :class:`spark_amqp.tools.rabbitmq_cluster.LocalRabbitMQCluster`
(nodes ``rabbit2/3/4@localhost`` on AMQP ports 5622/5632/5642, clustered; ~15-30 s to start),
stopped and its folders removed at the end of the session (the test modules share it).
Between tests every node is brought back up (a test that stopped or killed one need not).
Fault API: the cluster's ``stop_app``, ``start_app``, ``kill9``, ``restart``, ``leader``,
``wait_online`` (every replica of some queues running again); ``stall_proxy(node)`` puts the existing
:class:`faults_proxy.FaultProxy` in front of a node (its ``stall()`` stops forwarding while the
sockets stay open: only heartbeats notice).

Skips, naming why, when the machine cannot run the nodes (no rabbitmq-server, not root nor the
rabbitmq user); with SPARK_AMQP_REQUIRE_RABBITMQ=1 (CI) that, and any failure to start, is a
test failure instead.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # faults_proxy (tests/)
sys.path.insert(0, str(Path(__file__).resolve().parent))  # cluster_helpers

REQUIRE = os.environ.get("SPARK_AMQP_REQUIRE_RABBITMQ") == "1"


def _cannot_run() -> str | None:
    import pwd

    if not shutil.which("rabbitmq-server") or not shutil.which("rabbitmqctl"):
        return "rabbitmq-server/rabbitmqctl not installed"
    try:
        pwd.getpwnam("rabbitmq")
    except KeyError:
        return "no rabbitmq system user (the Erlang cookie's owner)"
    if os.getuid() != 0 and pwd.getpwuid(os.getuid()).pw_name != "rabbitmq":
        return "starting RabbitMQ nodes as the rabbitmq user needs root (runuser)"
    return None


@pytest.fixture(scope="session")
def rmq_cluster():
    from spark_amqp.tools.rabbitmq_cluster import LocalRabbitMQCluster, RabbitMQClusterError

    why = _cannot_run()
    if why:
        if REQUIRE:
            pytest.fail(f"a RabbitMQ cluster cannot run here: {why} "
                        "(SPARK_AMQP_REQUIRE_RABBITMQ=1 makes this a failure)")
        pytest.skip(f"a RabbitMQ cluster cannot run here: {why}")
    cluster = LocalRabbitMQCluster()
    try:
        cluster.start()
    except RabbitMQClusterError as exc:
        cluster.stop()
        pytest.fail(f"the three-node RabbitMQ cluster did not start: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(rmq_cluster):
    """The session's cluster, with every node running again after the test."""
    yield rmq_cluster
    heal(rmq_cluster)


def heal(c) -> None:
    """Bring every node of ``c`` back: start_app where the VM runs, restart where it was
    killed."""
    from spark_amqp.tools.rabbitmq_cluster import RabbitMQClusterError

    running = c.running_nodes()
    for node in c.nodes:
        if node in running:
            continue
        try:
            c.start_app(node)
        except RabbitMQClusterError:
            c.restart(node)


@pytest.fixture
def stall_proxy(rmq_cluster):
    """``stall_proxy(node)`` -> a :class:`faults_proxy.FaultProxy` in front of ``node``
    (closed after the test)."""
    from faults_proxy import FaultProxy

    proxies = []

    def make(node: str) -> FaultProxy:
        p = FaultProxy(rmq_cluster.node_url(node))
        proxies.append(p)
        return p

    yield make
    for p in proxies:
        p.close()
