"""The ``spark-amqp`` command (also ``python -m spark_amqp``): a click group.

Subcommands, one per module:

- ``broker``  (:mod:`.broker`)  run the embedded AMQP 0-9-1 broker in the foreground;
- ``publish`` (:mod:`.publish`) publish lines / JSON lines / the NYC flights under confirms;
- ``consume`` (:mod:`.consume`) print (and acknowledge) the messages of a queue;
- ``depth``   (:mod:`.depth`)   how many messages a queue holds (touches none);
- ``peek``    (:mod:`.peek`)    show the first N messages of a queue and requeue them;
- ``conf``    (:mod:`.conf`)    write the default configuration files to a folder;
- ``streams`` (:mod:`.streams`) super streams and stream offsets;
- ``cluster`` (:mod:`.cluster`) a local Spark standalone cluster (master + workers).
"""

from __future__ import annotations

import click

from .._version import __version__
from .broker import broker
from .cluster import cluster
from .conf import conf
from .consume import consume
from .depth import depth
from .peek import peek
from .publish import publish
from .rabbitmq_cluster import rabbitmq_cluster
from .streams import streams


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="spark-amqp")
def cli() -> None:
    """spark-amqp: an embedded AMQP 0-9-1 broker and tools around the Spark `amqp` source/sink."""


cli.add_command(broker)
cli.add_command(publish)
cli.add_command(consume)
cli.add_command(streams)
cli.add_command(depth)
cli.add_command(peek)
cli.add_command(conf)
cli.add_command(cluster)
cli.add_command(rabbitmq_cluster)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``spark-amqp``); ``argv`` defaults to ``sys.argv[1:]``."""
    cli.main(args=argv, prog_name="spark-amqp")


if __name__ == "__main__":  # pragma: no cover
    main()
