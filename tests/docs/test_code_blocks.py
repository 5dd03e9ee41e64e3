"""Every code block of the README and of the docs runs or is checked.

- ``python`` blocks must be run by a test: their section is in :data:`RUN_BY` with the test
  that runs it (checked to exist); all are compiled here too.
- ``sh`` blocks: the whole block passes ``bash -n``, and every command line is checked by what
  it runs: ``spark-amqp ...`` is parsed by the command line itself (click: the commands and
  options exist, the values convert), ``python -m spark_amqp.jobs.flight_delays ...`` by the
  job's own argument parser, ``python -m MODULE`` must be importable, ``make TARGET`` must be
  a target of the Makefile, ``pip install`` may only name extras that pyproject.toml has and no
  quoted glob (the shell does not expand a ``*`` inside quotes); any other command must be one
  of :data:`OTHER_COMMANDS` (tools of the system, RabbitMQ or Spark). Sections run by a test
  (:data:`RUN_BY`) are run there as well.
- ``toml`` blocks parse; ``text`` blocks are output or diagrams. A block of any other
  language, or without one, fails.
- A block may be left out with ``<!-- docs-test: skip: REASON -->`` on the line before it.
- The README's relative links point at files that exist.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from app.test_readme import markdown_files

ROOT = Path(__file__).resolve().parents[2]

#: (page, section heading) -> the tests that run the section's blocks as written
RUN_BY = {
    ("README.md", "Quick start"): ["tests/app/test_readme.py::test_quick_start_runs_as_written_twice_in_one_folder"],
    ("docs/getting-started.md", "Quick start"): [
        "tests/app/test_readme.py::test_the_docs_quick_start_is_the_readmes",
        "tests/app/test_readme.py::test_quick_start_runs_as_written_twice_in_one_folder"],
    ("docs/cli.md", "The command line: `spark-amqp`"): ["tests/app/test_readme.py::test_command_line_page_runs_as_written"],
    ("docs/streams.md", "A runnable example"): ["tests/docs/test_examples.py::test_streams_example_runs_as_written"],
    ("docs/stream-protocol.md", "A runnable example"): [
        "tests/client/test_stream_docs.py::test_stream_protocol_example_runs_as_written"],
    ("docs/schema.md", "Schema"): ["tests/docs/test_examples.py::test_schema_snippet_selects_two_columns"],
    ("docs/broker/management.md", "The management API, Prometheus metrics and a web page"): [
        "tests/docs/test_examples.py::test_management_lines_run_as_written"],
    ("docs/broker/streams.md", "The stream protocol (port 5552)"): [
        "tests/docs/test_examples.py::test_stream_port_snippet_prints_its_url"],
    ("docs/spark-connect.md", "Spark Connect"): ["tests/cluster/test_connect.py::test_readme_connect_client_runs_as_written"],
    ("docs/cluster.md", "A standalone cluster on one machine: `spark-amqp cluster`"): [
        "tests/cluster/test_cluster_cli.py::test_readme_cluster_commands_are_the_tested_ones"],
    ("docs/cluster.md", "Shipping the package to the executors"): [
        "tests/app/test_py_files.py::test_py_files_recipe_from_another_folder"],
    ("docs/reading-patterns.md", "Pacing the triggers: `minMessagesPerTrigger`, `maxTriggerDelay`"): [
        "tests/docs/test_examples.py::test_reading_patterns_run_as_written"],
    ("docs/reading-patterns.md", "Subscribing to an exchange (queue mode)"): [
        "tests/docs/test_examples.py::test_reading_patterns_run_as_written"],
    ("docs/reading-patterns.md", "Lag: how far the query is behind"): [
        "tests/docs/test_examples.py::test_reading_patterns_run_as_written"],
    ("docs/reading-patterns.md", "Timestamps per stream (stream mode)"): [
        "tests/docs/test_examples.py::test_reading_patterns_run_as_written"],
    ("docs/reading-patterns.md", "Stream filters (stream mode, RabbitMQ 3.13+)"): [
        "tests/docs/test_examples.py::test_reading_patterns_run_as_written"],
}

#: commands the docs show that are not this project's: checked for syntax only
OTHER_COMMANDS = {
    "cd", "cp", "mkdir", "tar", "zip", "chmod", "curl", "kill", "echo", "printf", "export", "jobs",
    ".", "grep",                        # the shell's source (activate a virtualenv), grep
    "spark-submit",                     # Spark's (tests/cluster and test_py_files run the lines that matter)
    "rabbitmqadmin", "./rabbitmqadmin",  # RabbitMQ's script (test_management_lines_run_as_written)
    "jupyter",                          # the notebook: jupyter lab (notebook extra) / jupyter execute (nbclient)
    "venv-pack",                        # packs a virtualenv (cluster.md)
    ".venv/bin/mkdocs",                 # the docs extra, in the checkout's venv
}

SKIP_MARK = re.compile(r"<!--\s*docs-test:\s*skip:\s*(\S.*?)\s*-->")


def blocks():
    """(page, line, section heading, language, code, skip reason) of every fenced block."""
    out = []
    for path in markdown_files():
        rel = path.relative_to(ROOT).as_posix()
        lines = path.read_text(encoding="utf-8").split("\n")
        heading, i = None, 0
        while i < len(lines):
            line = lines[i]
            if (m := re.match(r"^#{1,6} (.+?)\s*$", line)):
                heading = m.group(1)
            if line.startswith("```"):
                lang, start = line[3:].strip(), i
                j = i + 1
                while not lines[j].startswith("```"):
                    j += 1
                skip = SKIP_MARK.search(lines[start - 1]) if start else None
                out.append((rel, start + 1, heading, lang, "\n".join(lines[start + 1:j]) + "\n",
                            skip.group(1) if skip else None))
                i = j
            i += 1
    return out


BLOCKS = blocks()
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
MAKE_TARGETS = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), re.M))


def _id(b) -> str:
    return f"{b[0]}:{b[1]}[{b[3] or 'no-lang'}]"


def test_the_blocks_are_found():
    langs = {b[3] for b in BLOCKS}
    assert {"python", "sh", "text", "toml"} <= langs
    assert len(BLOCKS) >= 40


@pytest.mark.parametrize("block", BLOCKS, ids=_id)
def test_block_runs_or_is_checked(block):
    page, line, heading, lang, code, skip = block
    if skip:
        pytest.skip(f"marked in the page: {skip}")
    if lang == "python":
        compile(code, f"{page}:{line}", "exec")
        assert (page, heading) in RUN_BY, (
            f"{page}:{line}: a python block under '{heading}' that no test runs: run it in a test "
            f"and add the section to RUN_BY, or mark it <!-- docs-test: skip: REASON -->")
    elif lang == "sh":
        r = subprocess.run(["bash", "-n"], input=code, capture_output=True, text=True)
        assert r.returncode == 0, f"{page}:{line}: bash -n: {r.stderr}"
        for words, raw in _command_lines(code):
            _check_command(words, raw, f"{page}:{line}")
    elif lang == "toml":
        tomllib.loads(code)
    elif lang != "text":
        pytest.fail(f"{page}:{line}: a block in {lang or 'no language'}: give it python, sh, "
                    f"toml or text (output)")


@pytest.mark.parametrize("section", sorted(RUN_BY), ids=lambda s: f"{s[0]}#{s[1]}")
def test_the_named_tests_exist_and_the_sections_too(section):
    page, heading = section
    assert any(b[0] == page and b[2] == heading for b in BLOCKS), f"no block under {heading!r} in {page}"
    for test in RUN_BY[section]:
        file, _, name = test.partition("::")
        tree = ast.parse((ROOT / file).read_text())
        assert name in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}, test


def test_the_readme_links_resolve():
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not re.match(r"^[a-z]+://", link)]
    assert len(local) >= 10
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == []


def _command_lines(code: str) -> list[tuple[list[str], str]]:
    """(words, line) of each command of a block: comments dropped, continuations joined,
    split at ``&&``, ``||``, ``;``, ``|``, ``&`` and parentheses (quotes respected), with
    redirections and leading ``VAR=value`` assignments removed."""
    from app.test_readme import commands

    out = []
    for line in commands(code):
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        words: list[str] = []
        tokens = list(lex)
        i = 0
        while i <= len(tokens):
            tok = tokens[i] if i < len(tokens) else ";"
            if tok in ("&&", "||", ";", "|", "&", "(", ")", ";;"):
                while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                    words.pop(0)  # VAR=value (alone, or before a command)
                if words:
                    out.append((words, line))
                words = []
            elif tok in (">", ">>", "<", "2>", "&>"):
                i += 1  # the redirection's file
            else:
                words.append(tok)
            i += 1
    return out


def _check_command(words: list[str], line: str, where: str) -> None:
    first = words[0]
    command = " ".join(words)
    if "pip" in line:
        for quoted in re.findall(r"'[^']*'|\"[^\"]*\"", line):
            assert not ("*" in quoted and "$(" not in quoted), (
                f"{where}: {line}: a glob inside quotes is not expanded by the shell")
    if first == "spark-amqp":
        _parse_cli(words[1:], where)
    elif first in ("python", "python3") and words[1:2] == ["-m"]:
        _check_module(words[2], words[3:], where)
    elif first in ("python", "python3") and words[1:2] == ["-c"]:
        compile(words[2], where, "exec")
    elif first == "make":
        assert set(words[1:]) <= MAKE_TARGETS, f"{where}: {command}: no such make target"
    elif first.endswith("/pip") or first == "pip":
        _check_pip(words[1:], where)
    else:
        assert first in OTHER_COMMANDS, (
            f"{where}: {command!r}: an unknown command; run it in a test, add it to "
            f"OTHER_COMMANDS with a reason, or mark the block <!-- docs-test: skip: REASON -->")


def _parse_cli(args: list[str], where: str) -> None:
    """Parse ``spark-amqp ARGS`` as the command line would (commands, options, values),
    without running it, in an empty folder where the files it names exist (empty)."""
    import os
    import tempfile

    import click

    from spark_amqp.cli.main import cli

    cmd, name, parent = cli, "spark-amqp", None
    line = " ".join(["spark-amqp", *args])
    here = os.getcwd()
    tmp = tempfile.mkdtemp(prefix="docs-cli-")
    for a in args:
        if re.match(r"^[\w-]+\.(jsonl|json|txt|toml)$", a):
            Path(tmp, a).touch()
    os.chdir(tmp)
    try:
        while True:
            ctx = cmd.make_context(name, list(args), parent=parent)
            if not isinstance(cmd, click.Group):
                return
            rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
            if not rest:
                return
            name, cmd, args = cmd.resolve_command(ctx, rest)
            parent = ctx
    except click.exceptions.Exit as exc:  # --version, --help
        assert exc.exit_code == 0, f"{where}: {line}: exit {exc.exit_code}"
    except click.ClickException as exc:
        pytest.fail(f"{where}: {line}: {exc.format_message()}")
    finally:
        os.chdir(here)


def _check_module(module: str, args: list[str], where: str) -> None:
    if module == "pip":
        _check_pip(args, where)
        return
    assert importlib.util.find_spec(module) is not None, f"{where}: python -m {module}: no such module"
    if module == "spark_amqp.jobs.flight_delays":
        from spark_amqp.jobs.flight_delays import parse_args

        try:
            parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"{where}: python -m {module} {' '.join(args)}: the job refuses its arguments ({exc})")


def _check_pip(args: list[str], where: str) -> None:
    for target in args:
        m = re.search(r"(spark-amqp|spark_amqp[^\[]*\.whl\)?|/path/to/spark-amqp)\[([\w,-]+)\]", target)
        if m:
            extras = set(m.group(2).split(","))
            assert extras <= EXTRAS, f"{where}: pip {' '.join(args)}: no such extra {sorted(extras - EXTRAS)}"
