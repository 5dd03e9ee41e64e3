"""``spark-amqp rabbitmq-cluster start|status|stop``: three clustered RabbitMQ nodes on this
machine, the commands over :class:`spark_amqp.tools.rabbitmq_cluster.LocalRabbitMQCluster`
(see that module for the nodes' names, ports and folders)."""

from __future__ import annotations

from pathlib import Path

import click

from ..tools.rabbitmq_cluster import DEFAULT_BASE_DIR, LocalRabbitMQCluster, RabbitMQClusterError

_base_dir = click.option(
    "--base-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_BASE_DIR,
    show_default=True, help="The nodes' data and log folders (removed by stop).")


@click.group("rabbitmq-cluster")
def rabbitmq_cluster() -> None:
    """Three clustered RabbitMQ nodes on this machine (ports 5622, 5632, 5642), as the rabbitmq
    user (run as root), beside the system node, which is never touched."""


@rabbitmq_cluster.command("start")
@_base_dir
@click.option("--timeout", default=180.0, show_default=True, type=click.FloatRange(1),
              help="Seconds to wait for the nodes to start and cluster.")
def start_cmd(base_dir: Path, timeout: float) -> None:
    """Start the three nodes, cluster them; print the URI with every address."""
    c = LocalRabbitMQCluster(base_dir)
    try:
        c.start(timeout=timeout)
    except RabbitMQClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"running: {', '.join(c.running_nodes())}; data in {base_dir}")
    click.echo(c.url())


@rabbitmq_cluster.command("status")
@_base_dir
def status_cmd(base_dir: Path) -> None:
    """Print the running nodes; exit 1 unless all three run."""
    c = LocalRabbitMQCluster(base_dir)
    running = c.running_nodes()
    click.echo(f"running: {', '.join(running) or 'none'}")
    if sorted(running) != sorted(c.nodes):
        raise SystemExit(1)
    click.echo(c.url())


@rabbitmq_cluster.command("stop")
@_base_dir
def stop_cmd(base_dir: Path) -> None:
    """Stop the three nodes and remove their folders."""
    LocalRabbitMQCluster(base_dir).stop()
    click.echo("stopped")
