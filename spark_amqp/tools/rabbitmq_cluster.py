"""A real RabbitMQ cluster of three nodes on this machine, for tests, benchmarks and the docs.

``spark-amqp rabbitmq-cluster start|status|stop [--base-dir DIR]`` and
:class:`LocalRabbitMQCluster` start three RabbitMQ nodes (the Debian package's
``rabbitmq-server``, 3.10 here) beside the system node, cluster them, and remove them again;
with a fault API for tests: :meth:`~LocalRabbitMQCluster.stop_app` /
:meth:`~LocalRabbitMQCluster.start_app` a node, :meth:`~LocalRabbitMQCluster.kill9` a node's
Erlang VM (``beam.smp``) and :meth:`~LocalRabbitMQCluster.restart` it.

Node ``i`` (2, 3, 4) is ``rabbit<i>@localhost`` with AMQP port ``56<i>2`` and distribution port
``256<i>2``, its data and logs in ``<base-dir>/n<i>``, no plugins (no port clashes with the
system node's management plugin). The nodes run as the ``rabbitmq`` user with
``HOME=/var/lib/rabbitmq`` so that they share the system's Erlang cookie (so must
``rabbitmqctl``): as root through ``runuser -u rabbitmq --``. Nodes 3 and 4 join node 2
(``rabbitmqctl join_cluster``). The system node ``rabbit@localhost`` (5672) is never touched.
Recipe: RabbitMQ docs "Clustering Guide" (a cluster on one machine: node names and ports per
node) and "rabbitmqctl"; measured here: the three nodes are up and clustered in ~30 s.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["LocalRabbitMQCluster", "RabbitMQClusterError", "DEFAULT_BASE_DIR", "NODE_IDS"]

DEFAULT_BASE_DIR = Path("/tmp/spark-amqp-rmqc")
NODE_IDS = (2, 3, 4)
_RABBIT_HOME = "/var/lib/rabbitmq"


class RabbitMQClusterError(RuntimeError):
    """The cluster could not be started or a command on a node failed (the message carries the
    command's output or the end of the node's log)."""


class LocalRabbitMQCluster:
    """Three clustered RabbitMQ nodes on 127.0.0.1 (see the module doc).

    Args:
        base_dir: folder of the nodes' data and logs (removed by :meth:`stop`).
        ids: node numbers; node ``i`` listens on AMQP port ``56<i>2``.
        user: the system user running the nodes (``rabbitmq``: the Erlang cookie's owner).

    Attributes:
        nodes: node names (``rabbit2@localhost`` ...); ports: ``{node: AMQP port}``.
    """

    def __init__(self, base_dir: str | Path = DEFAULT_BASE_DIR, ids=NODE_IDS,
                 user: str = "rabbitmq"):
        self.base_dir = Path(base_dir)
        self.ids = tuple(ids)
        self.user = user
        self.nodes = [f"rabbit{i}@localhost" for i in self.ids]
        self.ports = {f"rabbit{i}@localhost": int(f"56{i}2") for i in self.ids}

    # -- addresses ---------------------------------------------------------------------------
    def url(self, nodes=None, vhost: str = "%2F", query: str = "") -> str:
        """``amqp://guest:guest@127.0.0.1:5622,127.0.0.1:5632,.../%2F`` (every node, or
        ``nodes``)."""
        hosts = ",".join(f"127.0.0.1:{self.ports[n]}" for n in (nodes or self.nodes))
        return f"amqp://guest:guest@{hosts}/{vhost}" + (f"?{query}" if query else "")

    def node_url(self, node: str) -> str:
        """The URI of one node."""
        return self.url([node])

    # -- running commands as the nodes' user -------------------------------------------------
    def _as_user(self) -> list:
        me = pwd.getpwuid(os.getuid()).pw_name
        if me == self.user:
            return ["env", f"HOME={_RABBIT_HOME}"]
        if os.getuid() == 0 and shutil.which("runuser"):
            return ["runuser", "-u", self.user, "--", "env", f"HOME={_RABBIT_HOME}"]
        raise RabbitMQClusterError(
            f"the RabbitMQ nodes run as the {self.user!r} user (the Erlang cookie's owner): "
            "run as root (runuser) or as that user")

    def _run(self, args: list, timeout: float = 120.0, check: bool = True,
             env: dict | None = None) -> subprocess.CompletedProcess:
        extra = [f"{k}={v}" for k, v in (env or {}).items()]
        cmd = self._as_user() + extra + list(args)
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise RabbitMQClusterError(f"{' '.join(args)} timed out after {timeout} s") from exc
        if check and res.returncode != 0:
            raise RabbitMQClusterError(f"{' '.join(args)} failed ({res.returncode}): "
                                       f"{(res.stdout + res.stderr).strip()[-2000:]}")
        return res

    def ctl(self, node: str, *args: str, timeout: float = 120.0, check: bool = True) -> str:
        """``rabbitmqctl -n NODE ARGS...`` as the nodes' user; its stdout. Raises
        :class:`RabbitMQClusterError` on a non-zero exit (unless ``check=False``)."""
        return self._run(["rabbitmqctl", "-n", node, *args], timeout=timeout, check=check).stdout

    def _dir(self, node: str) -> Path:
        return self.base_dir / f"n{node.split('@')[0].removeprefix('rabbit')}"

    # -- lifecycle ---------------------------------------------------------------------------
    def _launch(self, node: str) -> None:
        i = node.split("@")[0].removeprefix("rabbit")
        d = self._dir(node)
        self._run(["mkdir", "-p", str(d / "mnesia"), str(d / "log")])
        self._run(["sh", "-c", f"echo '[].' > {d}/enabled_plugins"])
        self._run(["rabbitmq-server", "-detached"], env={
            "RABBITMQ_NODENAME": node, "RABBITMQ_NODE_PORT": self.ports[node],
            "RABBITMQ_DIST_PORT": f"256{i}2", "RABBITMQ_MNESIA_BASE": d / "mnesia",
            "RABBITMQ_LOG_BASE": d / "log", "RABBITMQ_PID_FILE": d / "pid",
            "RABBITMQ_ENABLED_PLUGINS_FILE": d / "enabled_plugins",
            "RABBITMQ_CONFIG_FILE": d / "rabbitmq",
            "RABBITMQ_ADVANCED_CONFIG_FILE": d / "advanced.config"}, timeout=60)

    def _await(self, node: str, timeout: float = 120.0) -> None:
        """Wait until the node's app has started (``rabbitmqctl await_startup``, retried while
        the freshly launched VM has not registered with epmd yet: await_startup fails at once
        on a node it cannot reach)."""
        deadline = time.monotonic() + timeout
        while True:
            left = max(5, int(deadline - time.monotonic()))
            res = self._run(["rabbitmqctl", "-n", node, "await_startup", "--timeout", str(left)],
                            timeout=left + 15, check=False)
            if res.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RabbitMQClusterError(
                    f"{node} did not start within {timeout} s: "
                    f"{(res.stdout + res.stderr).strip()[-800:]}\n--- end of {node}'s log ---\n"
                    f"{self.log_tail(node)}")
            time.sleep(1.0)

    def log_tail(self, node: str, n: int = 30) -> str:
        """The last ``n`` lines of the node's log files (for error messages)."""
        out = []
        for f in sorted((self._dir(node) / "log").glob("*.log")):
            try:
                out.append(f"{f.name}: " + "\n".join(f.read_text(errors="replace").splitlines()[-n:]))
            except OSError:
                pass
        return "\n".join(out) or "(no log)"

    def start(self, timeout: float = 180.0) -> "LocalRabbitMQCluster":
        """Start the nodes (stopping leftovers of an earlier run of the same names first),
        cluster them, and wait until ``cluster_status`` shows every node running.

        Raises :class:`RabbitMQClusterError` (with the end of the failing node's log)."""
        if not shutil.which("rabbitmq-server") or not shutil.which("rabbitmqctl"):
            raise RabbitMQClusterError("rabbitmq-server / rabbitmqctl not found (install the "
                                       "rabbitmq-server package)")
        self.stop()  # leftovers of a crashed run
        self._run(["mkdir", "-p", str(self.base_dir)])
        for node in self.nodes:
            self._launch(node)
        for node in self.nodes:
            self._await(node, timeout)
        first = self.nodes[0]
        for node in self.nodes[1:]:
            self.ctl(node, "stop_app")
            self.ctl(node, "join_cluster", first)
            self.ctl(node, "start_app")
        self.wait_running(self.nodes, timeout)
        return self

    def running_nodes(self, via: str | None = None) -> list:
        """The running nodes as seen by ``via`` (default: the first node that answers)."""
        import json

        for node in ([via] if via else self.nodes):
            res = self._run(["rabbitmqctl", "-n", node, "cluster_status", "--formatter", "json"],
                            timeout=30, check=False)
            if res.returncode == 0:
                return sorted(json.loads(res.stdout).get("running_nodes", []))
        return []

    def wait_running(self, nodes, timeout: float = 120.0) -> None:
        """Wait until every node of ``nodes`` is running in the cluster."""
        deadline = time.monotonic() + timeout
        want = sorted(nodes)
        while True:
            got = self.running_nodes()
            if all(n in got for n in want) and all(self._port_open(self.ports[n]) for n in want):
                return
            if time.monotonic() > deadline:
                raise RabbitMQClusterError(f"nodes {want} not all running after {timeout} s "
                                           f"(running: {got})")
            time.sleep(1.0)

    @staticmethod
    def _port_open(port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        """Stop every node of this cluster (``rabbitmqctl stop``, else kill -9 of its VM) and
        remove the base folder. Never touches other nodes."""
        pids = []
        for node in self.nodes:
            pid = self._pid(node)
            if self._run(["rabbitmqctl", "-n", node, "stop"], timeout=60,
                         check=False).returncode != 0 and pid:
                self._kill(pid)
            if pid:
                pids.append(pid)
        # rabbitmqctl stop returns before the VM has exited; a VM still running writes its
        # logs into the folder removed below (seen: empty n2..n4 folders left behind)
        deadline = time.monotonic() + 30
        for pid in pids:
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            if Path(f"/proc/{pid}").exists():
                self._kill(pid)
        if self.base_dir.exists():
            self._run(["rm", "-rf", str(self.base_dir)], check=False)

    # -- faults ------------------------------------------------------------------------------
    def stop_app(self, node: str) -> None:
        """``rabbitmqctl stop_app``: the node leaves (its clients see a reset, new connects are
        refused); the VM stays up."""
        self.ctl(node, "stop_app")

    def start_app(self, node: str, wait: bool = True) -> None:
        """``rabbitmqctl start_app``; with ``wait``, until the node runs in the cluster."""
        self.ctl(node, "start_app")
        if wait:
            self.wait_running([node])

    def _pid(self, node: str) -> int | None:
        try:
            text = (self._dir(node) / "pid").read_text().strip()
            return int(text) if text else None
        except (OSError, ValueError):
            pass
        res = self._run(["rabbitmqctl", "-n", node, "eval", "os:getpid()."], timeout=30,
                        check=False)
        try:
            return int(res.stdout.strip().strip('"')) if res.returncode == 0 else None
        except ValueError:
            return None

    def _kill(self, pid: int) -> None:
        self._run(["kill", "-9", str(pid)], check=False)

    def kill9(self, node: str) -> int:
        """kill -9 of the node's Erlang VM (``beam.smp``); returns its pid."""
        pid = self._pid(node)
        if pid is None:
            raise RabbitMQClusterError(f"no pid for {node}")
        self._kill(pid)
        deadline = time.monotonic() + 30
        while self._port_open(self.ports[node]) and time.monotonic() < deadline:
            time.sleep(0.1)
        return pid

    def restart(self, node: str, timeout: float = 180.0) -> None:
        """Start a node's VM again (after :meth:`kill9` or ``rabbitmqctl stop``) on its data;
        wait until it runs in the cluster."""
        (self._dir(node) / "pid").unlink(missing_ok=True) if os.getuid() != 0 else \
            self._run(["rm", "-f", str(self._dir(node) / "pid")], check=False)
        self._launch(node)
        self._await(node, timeout)
        self.wait_running([node], timeout)

    def queue_rows(self, vhost: str = "/", via: str | None = None) -> dict:
        """``{queue: {"type", "leader", "members", "online"}}`` of the vhost's queues
        (``rabbitmqctl list_queues name type leader members online``) as seen by ``via`` (default:
        the first node that answers); ``{}`` when no node answers. ``online``: the members whose
        replica runs (a quorum queue's Ra member, a stream's osiris replica)."""
        import json

        for node in ([via] if via else self.nodes):
            res = self._run(["rabbitmqctl", "-n", node, "list_queues", "-p", vhost, "name",
                             "type", "leader", "members", "online", "--formatter", "json"],
                            timeout=30, check=False)
            if res.returncode == 0:
                try:
                    rows = json.loads(res.stdout or "[]")
                except ValueError:  # a node answering while it starts: ask the next one
                    continue
                return {r["name"]: r for r in rows if isinstance(r, dict) and "name" in r}
        return {}

    def leader(self, queue: str, vhost: str = "/") -> str | None:
        """The node leading a quorum queue or stream (``list_queues name leader``), or None."""
        row = self.queue_rows(vhost).get(queue) or {}
        leader = row.get("leader")
        return leader if isinstance(leader, str) and "@" in leader else None

    def wait_online(self, queues, timeout: float = 120.0, vhost: str = "/") -> float:
        """Wait until every member of each quorum queue or stream of ``queues`` is online (its
        replica runs again after a node's restart) and it has a leader; the seconds waited.
        What RabbitMQ's upgrade guide asks before the next node of a rolling restart
        (``rabbitmq-upgrade await_online_quorum_plus_one`` waits for a quorum + 1 only)."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        while True:
            rows = self.queue_rows(vhost)
            missing = {}
            for q in queues:
                r = rows.get(q) or {}
                members, online = r.get("members") or [], r.get("online") or []
                if not members or set(members) - set(online) or "@" not in str(r.get("leader")):
                    missing[q] = r
            if not missing:
                return time.monotonic() - t0
            if time.monotonic() > deadline:
                raise RabbitMQClusterError(f"replicas not all online after {timeout} s: "
                                           f"{missing}")
            time.sleep(0.5)


# -- the ``spark-amqp rabbitmq-cluster`` command -----------------------------------------------
