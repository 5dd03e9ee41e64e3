"""The option tables of the docs are the ones generated from the code's option tables
(:class:`spark_amqp.spark.options_table.OptionTable`: one entry per option, with its doc and
default). No JVM, no broker.

Each generated table in ``docs/`` follows a marker line ``<!-- option-table: MODE SECTION -->``
(MODE: queue, stream or sink; SECTION: the entries' ``section``). After editing an entry's doc
or default, rewrite the tables with
``.venv/bin/python tests/spark/test_option_tables.py --write``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from spark_amqp.spark.connection_options import CONNECTION
from spark_amqp.spark.sink.options import SINK_TABLE
from spark_amqp.spark.source.queues.options import QUEUE_OPTIONS
from spark_amqp.spark.source.streams.options import STREAM_TABLE

DOCS = Path(__file__).resolve().parents[2] / "docs"
TABLES = {"queue": QUEUE_OPTIONS, "stream": STREAM_TABLE, "sink": SINK_TABLE}
MARKER = re.compile(r"^<!-- option-table: (\w+) (\w+) -->\n", re.M)
#: every generated table, by (page, mode, section): the test fails when one goes missing
EXPECTED = {("source.md", "queue", "main"), ("reading-patterns.md", "queue", "pacing"),
            ("reading-patterns.md", "queue", "subscription"), ("source.md", "stream", "main"),
            ("reading-patterns.md", "stream", "timestamps"),
            ("reading-patterns.md", "stream", "filter"), ("sink.md", "sink", "main")}


def _tables(text: str):
    """(mode, section, start, end) of each marked table: ``text[start:end]`` is the table."""
    for m in MARKER.finditer(text):
        end = m.end()
        while end < len(text) and text.startswith("|", end):
            end = text.index("\n", end) + 1
        yield m.group(1), m.group(2), m.end(), end


def _pages():
    return sorted(p for p in DOCS.rglob("*.md") if MARKER.search(p.read_text()))


def rewrite() -> None:
    """Write the generated tables into the docs pages (``--write``)."""
    for page in _pages():
        text = page.read_text()
        for mode, section, start, end in reversed(list(_tables(text))):
            text = text[:start] + TABLES[mode].markdown(section) + text[end:]
        page.write_text(text)


def test_every_docs_option_table_is_the_generated_one():
    found = set()
    for page in _pages():
        text = page.read_text()
        for mode, section, start, end in _tables(text):
            found.add((page.name, mode, section))
            assert text[start:end] == TABLES[mode].markdown(section), (
                f"docs/{page.name}: the {mode} {section} option table differs from the code's; "
                "run: .venv/bin/python tests/spark/test_option_tables.py --write")
    assert found == EXPECTED


@pytest.mark.parametrize("mode", sorted(TABLES))
def test_every_option_is_documented_in_one_table(mode):
    # an entry shared by two modes (the pacing and connection options) is rendered once
    rendered = {id(o) for _, m, s in EXPECTED for o in TABLES[m].options if o.section == s}
    page = (DOCS / "rabbitmq-cluster.md").read_text()
    for o in TABLES[mode].options:
        assert o.doc, f"{mode} option {o.name} has no doc"
        if o.section == "cluster":   # documented in docs/rabbitmq-cluster.md's table
            assert o is CONNECTION[o.name] and f"| `{o.name}` |" in page
        else:
            assert id(o) in rendered, f"{mode} option {o.name} is in no docs table"
    # a table's known options are its entries, and every connection option is one of them
    assert set(TABLES[mode].known) == {o.name.lower() for o in TABLES[mode].options}
    assert all(o.key in TABLES[mode].known for o in CONNECTION.values())


def test_markdown_escapes_pipes_and_renders_defaults():
    from spark_amqp.spark.options_table import Option, OptionTable
    from spark_amqp.spark.option_values import OptionErrors

    t = OptionTable([Option("aB", "bool", True, "a | b"), Option("c", "int", None, "n"),
                     Option("d", "float", 5.0, "x", section="other")], OptionErrors(),
                    lambda keys, table: ValueError(keys))
    assert t.markdown() == ("| option | meaning | default |\n|---|---|---|\n"
                            "| `aB` | a \\| b | `true` |\n| `c` | n | unset |\n")
    assert t.markdown("other").endswith("| `d` | x | `5` |\n")
    with pytest.raises(ValueError, match=r"\['zz'\]"):
        t.lower_checked({"AB": "true", "zz": "1"})
    assert t.lower_checked({"AB": "true"}) == {"ab": "true"}


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    rewrite()
