"""``spark-amqp conf``: write the default configuration files to a folder, to edit them.

The files ship inside the package (``spark_amqp/conf/``, package data), so every command
works from any folder without them: ``spark-amqp broker`` without ``--config`` uses the same
defaults as ``broker.toml``, and the jobs apply ``spark-defaults.conf`` and
``log4j2.properties`` themselves under plain ``python``. ``spark-amqp conf DIR`` copies them
out for ``spark-amqp broker --config DIR/broker.toml`` and ``spark-submit --properties-file
DIR/spark-defaults.conf``; the log4j path in the written ``spark-defaults.conf`` is made
absolute, so it holds from any working directory.
"""

from __future__ import annotations

from pathlib import Path

import click

#: The files ``spark-amqp conf`` writes, with what they are for.
CONF_FILES = {
    "broker.toml": "embedded broker: users, vhosts, permissions, limits, data_dir, TLS "
                   "(spark-amqp broker --config)",
    "spark-defaults.conf": "Spark settings for local runs (spark-submit --properties-file)",
    "log4j2.properties": "Spark's logs: warnings and errors only",
}

LOG4J_RELATIVE = "-Dlog4j.configurationFile=conf/log4j2.properties"


def default_conf_dir() -> Path:
    """The folder of the package's default configuration files (``spark_amqp/conf``)."""
    return Path(__file__).resolve().parent.parent / "conf"


def write_conf(folder: Path, force: bool = False) -> list[Path]:
    """Copy :data:`CONF_FILES` into ``folder`` (created if missing); returns the paths written.

    Raises ``FileExistsError`` naming the first file that exists, unless ``force``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    targets = [folder / name for name in CONF_FILES]
    if not force:
        for t in targets:
            if t.exists():
                raise FileExistsError(str(t))
    for t in targets:
        text = (default_conf_dir() / t.name).read_text(encoding="utf-8")
        if t.name == "spark-defaults.conf":
            text = text.replace(LOG4J_RELATIVE, "-Dlog4j.configurationFile="
                                + str((folder / "log4j2.properties").resolve()))
        t.write_text(text, encoding="utf-8")
    return targets


def _interactive() -> bool:
    """True when a person can answer a prompt (stdin and stdout are terminals)."""
    import sys

    return sys.stdin.isatty() and sys.stdout.isatty()


@click.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path), default="conf",
                required=False)
@click.option("-f", "--force", is_flag=True, help="Overwrite files that exist, without asking.")
def conf(folder: Path, force: bool) -> None:
    """Write the default configuration files into FOLDER (default: ./conf) to edit them.

    \b
    Writes broker.toml (spark-amqp broker --config FOLDER/broker.toml),
    spark-defaults.conf (spark-submit --properties-file FOLDER/spark-defaults.conf) and
    log4j2.properties. Nothing needs them: without them the same defaults apply.
    When some exist: in a terminal it asks before overwriting them; elsewhere it fails
    (exit 1) unless --force.
    """
    existing = [folder / name for name in CONF_FILES if (folder / name).exists()]
    if existing and not force:
        names = ", ".join(str(p) for p in existing)
        if not _interactive():
            raise click.ClickException(f"{names} {'exists' if len(existing) == 1 else 'exist'}"
                                       ": edit them, or pass --force to overwrite them with "
                                       "the defaults")
        if not click.confirm(f"{names} {'exists' if len(existing) == 1 else 'exist'}: "
                             "overwrite with the defaults?", default=False):
            raise click.ClickException("nothing written (--force overwrites without asking)")
        force = True
    written = write_conf(folder, force)
    for path in written:
        click.echo(f"{path}  ({CONF_FILES[path.name]})")
