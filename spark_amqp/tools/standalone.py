"""A Spark standalone cluster on this machine, from the pip-installed PySpark: one master and N
workers, the processes behind ``spark-amqp cluster start|stop|status``.

The processes are Spark's own daemons, started as Spark's ``sbin/start-master.sh`` /
``sbin/start-worker.sh`` start them (``$SPARK_HOME/bin/spark-class
org.apache.spark.deploy.master.Master`` / ``...deploy.worker.Worker``; Spark docs, "Spark
Standalone Mode", https://spark.apache.org/docs/latest/spark-standalone.html), but in the
foreground of their own process group, with:

- ``SPARK_HOME`` = PySpark's package folder (``pyspark.find_spark_home``) unless set;
- every daemon on ``host`` (default 127.0.0.1), the master on ``port`` (default 7077) with its
  web UI on ``webui_port`` (default 8080: the registration check reads its ``/json``), each
  worker with ``cores`` cores and ``memory`` for executors, its RPC and UI ports free ones;
- lean JVMs: 256 MiB heap for each daemon (``SPARK_DAEMON_MEMORY``; the executors get
  Spark's ``spark.executor.memory``, which must fit in ``memory``), the serial GC and the
  C1 compiler only (``-XX:TieredStopAtLevel=1``: they start faster and do little work), logs
  at WARN (the package's ``conf/log4j2.properties``);
- everything in ``work_dir``: ``cluster.json`` (the state: URLs and process ids),
  ``logs/<daemon>.log``, ``worker-<n>/`` (the worker's ``SPARK_WORKER_DIR``: executor logs
  and application files) and ``local/`` (``SPARK_LOCAL_DIRS``: shuffle and spill files).

:meth:`StandaloneCluster.start` returns once every worker is ``ALIVE`` in the master's
``/json``; :meth:`StandaloneCluster.stop` sends SIGTERM to each daemon's process group (the
executors a worker started are in it) and SIGKILL to what is left after ``timeout``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["ClusterError", "StandaloneCluster", "default_work_dir", "find_java", "find_spark_home"]

STATE_FILE = "cluster.json"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DAEMON_MEMORY = "256m"
DAEMON_JAVA_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


class ClusterError(RuntimeError):
    """The cluster could not be started, found or stopped; the message says why and what to do."""


def default_work_dir() -> Path:
    """``$TMPDIR/spark-amqp-cluster-<user>`` (``/tmp/spark-amqp-cluster-alice`` on Linux): one
    per user of the machine, so that two users' clusters do not share a state file or logs
    (``spark-amqp cluster stop`` removes it)."""
    try:
        import getpass

        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name (a container's uid): the uid
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"spark-amqp-cluster-{user}"


def find_java() -> str:
    """The ``java`` Spark's launcher will run: ``$JAVA_HOME/bin/java`` else ``java`` on the
    PATH. Raises :class:`ClusterError` when there is none (Spark 4 needs Java 17+)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ClusterError("no Java found (JAVA_HOME unset and no `java` on the PATH): Spark needs "
                           "Java 17+, e.g. `apt-get install openjdk-17-jre-headless`")
    return java


def find_spark_home() -> Path:
    """``$SPARK_HOME`` when it has ``bin/spark-class``, else PySpark's package folder (the pip
    install ships ``bin/``, ``sbin/`` and ``jars/``). Raises :class:`ClusterError`."""
    env = os.environ.get("SPARK_HOME")
    if env:
        if (Path(env) / "bin" / "spark-class").is_file():
            return Path(env)
        raise ClusterError(f"SPARK_HOME={env} has no bin/spark-class: unset it to use PySpark's, "
                           "or point it at a Spark distribution")
    from pyspark.find_spark_home import _find_spark_home

    home = Path(_find_spark_home())
    if not (home / "bin" / "spark-class").is_file():
        raise ClusterError(f"PySpark's Spark home {home} has no bin/spark-class: reinstall pyspark "
                           "or set SPARK_HOME to a Spark distribution")
    return home


def _http_json(url: str, timeout: float = 2.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 (a local http URL)
        return json.loads(r.read().decode())


def _is_spark_daemon(pid: int) -> bool:
    """True when ``pid`` runs and is a Spark master/worker JVM (a reused pid is not touched).

    An empty ``/proc/<pid>/cmdline`` is not taken for an exit: the kernel shows it empty while
    the process is inside ``execve`` (``spark-class`` is a bash script that ends in ``exec
    java``), as well as for a zombie. So an empty one is read again until the process shows its
    arguments or ``/proc/<pid>/stat`` says it is a zombie (``Z``/``X``) or gone; CI once took a
    worker caught mid-exec for one that "exited while starting", with an empty log.
    """
    for _ in range(40):  # at most ~2 s of an exec in progress
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            try:
                os.kill(pid, 0)
            except OSError:
                return False
            return True  # no /proc (macOS): trust the state file
        if cmdline:
            return b"org.apache.spark.deploy." in cmdline
        if _proc_state(pid) in (None, "Z", "X"):
            return False
        time.sleep(0.05)
    return False


def _proc_state(pid: int) -> str | None:
    """The one-letter state of ``/proc/<pid>/stat`` (``R``, ``S``, ``Z``...); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2:]  # the command name in parentheses may hold spaces
    return rest[:1] or None


def _exit_status(pid: int) -> int | None:
    """The exit code of our child ``pid`` once it has exited (negative: killed by that signal);
    None while it runs or when it is not our child."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    if done == 0:
        return None
    return os.waitstatus_to_exitcode(status)


@dataclass
class StandaloneCluster:
    """A local Spark standalone cluster (see the module docstring).

    Args:
        work_dir: folder for the state file, logs and worker folders (created).
        host: interface of every daemon (the master URL is ``spark://host:port``).
        port: the master's RPC port (Spark's default 7077).
        webui_port: the master's web UI port (Spark's default 8080), whose ``/json`` lists
            the workers.
        workers: how many workers; ``cores`` (int) and ``memory`` (Spark size, e.g. ``"1g"``)
            are what each offers to executors.
        spark_home: a Spark distribution; default :func:`find_spark_home`.

    Attributes set by :meth:`start` (and :meth:`load`): ``pids`` (daemon name → process id).
    Raises :class:`ClusterError` (no Java, no Spark, a daemon that exits or workers that do not
    register within the timeout; the message includes the end of the daemon's log).
    """

    work_dir: Path = field(default_factory=default_work_dir)
    host: str = "127.0.0.1"
    port: int = 7077
    webui_port: int = 8080
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    spark_home: str | None = None
    pids: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.work_dir = Path(self.work_dir)

    @property
    def master_url(self) -> str:
        """``spark://host:port``: the ``--master`` of spark-submit."""
        return f"spark://{self.host}:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://{self.host}:{self.webui_port}"

    # -- state ------------------------------------------------------------------------------

    @classmethod
    def load(cls, work_dir: Path | str | None = None) -> StandaloneCluster:
        """The cluster recorded in ``work_dir/cluster.json``; :class:`ClusterError` if none."""
        work_dir = Path(work_dir) if work_dir is not None else default_work_dir()
        path = work_dir / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(f"no cluster recorded in {work_dir} (no {STATE_FILE}): start one "
                               "with `spark-amqp cluster start`") from None
        state["work_dir"] = work_dir
        return cls(**state)

    def _save(self) -> None:
        state = asdict(self)
        state.pop("work_dir")
        (self.work_dir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")

    def running_pids(self) -> dict[str, int]:
        """The recorded daemons that still run."""
        return {name: pid for name, pid in self.pids.items() if _is_spark_daemon(pid)}

    def alive_workers(self) -> int:
        """Workers ``ALIVE`` in the master's ``/json``; 0 when the master does not answer."""
        try:
            info = _http_json(f"{self.webui_url}/json")
        except (OSError, ValueError):
            return 0
        return sum(1 for w in info.get("workers", []) if w.get("state") == "ALIVE")

    def status(self) -> dict:
        """``{"master_url", "webui_url", "work_dir", "daemons": {name: pid or None},
        "alive_workers", "up"}``; ``up`` when every daemon runs and every worker is ALIVE."""
        running = self.running_pids()
        alive = self.alive_workers() if "master" in running else 0
        return {"master_url": self.master_url, "webui_url": self.webui_url,
                "work_dir": str(self.work_dir),
                "daemons": {n: (p if n in running else None) for n, p in self.pids.items()},
                "alive_workers": alive,
                "up": len(running) == len(self.pids) == self.workers + 1 and alive == self.workers}

    # -- start / stop -----------------------------------------------------------------------

    def _env(self, home: Path) -> dict[str, str]:
        log4j = Path(__file__).resolve().parents[1] / "conf" / "log4j2.properties"
        opts = DAEMON_JAVA_OPTS
        if log4j.is_file():
            opts += f" -Dlog4j.configurationFile=file:{log4j}"
        local = self.work_dir / "local"
        local.mkdir(parents=True, exist_ok=True)
        return dict(os.environ, SPARK_HOME=str(home), SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
                    SPARK_DAEMON_JAVA_OPTS=opts, SPARK_LOCAL_DIRS=str(local),
                    SPARK_LOCAL_IP=self.host, SPARK_NO_DAEMONIZE="1")

    def _spawn(self, name: str, home: Path, env: dict, args: list[str]) -> int:
        logs = self.work_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"{name}.log", "ab") as log:
            p = subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env,
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        self.pids[name] = p.pid
        self._save()
        return p.pid

    def _log_tail(self, name: str, lines: int = 25) -> str:
        path = self.work_dir / "logs" / f"{name}.log"
        try:
            text = path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"(no log at {path})"
        return f"--- end of {path} ---\n" + "\n".join(text)

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        """Start the master and the workers; return once all workers are ALIVE.

        Raises :class:`ClusterError` when a cluster recorded in ``work_dir`` still runs, when
        a port is taken, a daemon exits, or the workers are not ALIVE within ``timeout``
        seconds (the daemons started are then stopped).
        """
        find_java()
        home = Path(self.spark_home) if self.spark_home else find_spark_home()
        self.spark_home = str(home)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if (self.work_dir / STATE_FILE).exists():
            old = StandaloneCluster.load(self.work_dir)
            if old.running_pids():
                raise ClusterError(f"a cluster recorded in {self.work_dir} still runs "
                                   f"({old.master_url}): `spark-amqp cluster stop` first, or use "
                                   "another --work-dir")
            (self.work_dir / STATE_FILE).unlink()
        for port, what in ((self.port, "--port"), (self.webui_port, "--webui-port")):
            if _port_taken(self.host, port):
                raise ClusterError(f"{self.host}:{port} is already in use: choose another {what}")
        self.pids = {}
        env = self._env(home)
        try:
            self._spawn("master", home, env, [MASTER_CLASS, "--host", self.host, "--port",
                                              str(self.port), "--webui-port", str(self.webui_port)])
            for i in range(1, self.workers + 1):
                wdir = self.work_dir / f"worker-{i}"
                wdir.mkdir(parents=True, exist_ok=True)
                self._spawn(f"worker-{i}", home, env, [
                    WORKER_CLASS, "--host", self.host, "--port", "0", "--webui-port", "0",
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--work-dir", str(wdir), self.master_url])
            self._wait_registered(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_registered(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        alive = 0
        while time.monotonic() < deadline:
            # our children: waitpid is the truth (a /proc look can catch one inside execve)
            for name, pid in self.pids.items():
                code = _exit_status(pid)
                if code is not None:
                    raise ClusterError(f"Spark {name} exited while starting (exit code {code}):\n"
                                       + self._log_tail(name))
            alive = self.alive_workers()
            if alive >= self.workers:
                return
            time.sleep(0.25)
        raise ClusterError(f"{alive} of {self.workers} workers registered with {self.master_url} "
                           f"within {timeout:.0f} s (a slow machine: raise --timeout)\n"
                           + self._log_tail("master"))

    def stop(self, timeout: float = 30.0) -> list[str]:
        """Stop the recorded daemons (workers first); return the names that were running.
        SIGTERM to each process group, SIGKILL after ``timeout`` s; removes the state file."""
        running = self.running_pids()
        order = sorted(running, key=lambda n: n == "master")  # workers, then the master
        for name in order:
            try:
                os.killpg(running[name], signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        for name in order:
            pid = running[name]
            while _is_spark_daemon(pid) and time.monotonic() < deadline:
                _reap(pid)
                time.sleep(0.1)
            if _is_spark_daemon(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _reap(pid)
        (self.work_dir / STATE_FILE).unlink(missing_ok=True)
        return order

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _reap(pid: int) -> None:
    """Collect a child that exited (a zombie still has a /proc entry)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _port_taken(host: str, port: int) -> bool:
    import socket

    if port == 0:
        return False
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False
