"""``spark-amqp cluster start|stop|status``: a Spark standalone cluster on this machine.

A master and two workers (one core and 1 GiB each, by default) from the pip-installed PySpark,
on 127.0.0.1, so that ``spark-submit --master spark://127.0.0.1:7077`` runs the executors in
other JVMs than the driver, as on a real cluster. The processes and their files are those of
:class:`spark_amqp.tools.standalone.StandaloneCluster` (state, logs and worker folders in
``--work-dir``). A failure (no Java, a port in use, workers that do not register) is a one-line
``Error: ...`` with the end of the daemon's log, exit status 1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click

from ..tools.standalone import ClusterError, StandaloneCluster, default_work_dir

_work_dir = click.option(
    "--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help=f"State file, logs and worker folders [default: {default_work_dir()}].")


@click.group()
def cluster() -> None:
    """A local Spark standalone cluster (master + workers) for spark-submit --master spark://..."""


@cluster.command()
@_work_dir
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface of every daemon.")
@click.option("--port", default=7077, show_default=True, type=click.IntRange(1, 65535),
              help="The master's port (spark://HOST:PORT).")
@click.option("--webui-port", default=8080, show_default=True, type=click.IntRange(1, 65535),
              help="The master's web UI (its /json tells which workers registered).")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64))
@click.option("--cores", default=1, show_default=True, type=click.IntRange(1, 1024),
              help="Cores each worker offers to executors.")
@click.option("--memory", default="1g", show_default=True,
              help="Memory each worker offers to executors (Spark size: 512m, 1g, ...).")
@click.option("--timeout", default=120.0, show_default=True, type=click.FloatRange(1),
              help="Seconds to wait for every worker to register.")
def start(work_dir: Path | None, host: str, port: int, webui_port: int, workers: int, cores: int,
          memory: str, timeout: float) -> None:
    """Start the master and the workers; return when every worker has registered."""
    c = StandaloneCluster(work_dir=work_dir or default_work_dir(), host=host, port=port,
                          webui_port=webui_port, workers=workers, cores=cores, memory=memory)
    try:
        c.start(timeout=timeout)
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"master {c.master_url} (web UI {c.webui_url}), {workers} workers x {cores} core, "
               f"{memory}; state and logs in {c.work_dir}")


@cluster.command()
@_work_dir
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(work_dir: Path | None, as_json: bool) -> None:
    """Print the master URL and which daemons run; exit 1 unless all run and are registered."""
    try:
        st = StandaloneCluster.load(work_dir).status()
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(st))
    else:
        daemons = ", ".join(f"{n} {'pid ' + str(p) if p else 'not running'}"
                            for n, p in st["daemons"].items())
        click.echo(f"{st['master_url']}: {'up' if st['up'] else 'DOWN'}, "
                   f"{st['alive_workers']} workers alive; {daemons}")
    if not st["up"]:
        raise SystemExit(1)


@cluster.command()
@_work_dir
@click.option("--timeout", default=30.0, show_default=True, type=click.FloatRange(0),
              help="Seconds to wait after SIGTERM before SIGKILL.")
@click.option("--keep-work-dir", is_flag=True,
              help="Keep the default work folder (logs, executor folders) after stopping.")
def stop(work_dir: Path | None, timeout: float, keep_work_dir: bool) -> None:
    """Stop the daemons (workers first, with their executors) and remove the state file; the
    default work folder (no --work-dir) is removed too, unless --keep-work-dir."""
    try:
        c = StandaloneCluster.load(work_dir)
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    stopped = c.stop(timeout=timeout)
    click.echo(f"stopped {', '.join(stopped) if stopped else 'nothing (no daemon was running)'}")
    if work_dir is None and not keep_work_dir:
        shutil.rmtree(c.work_dir, ignore_errors=True)
        click.echo(f"removed {c.work_dir} (--keep-work-dir keeps it)")
