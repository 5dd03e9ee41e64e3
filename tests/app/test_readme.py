"""The README's and the docs' Quick start and command lines run as written.

- The Quick start's ``python`` blocks (the README's; the docs' Getting started has the same
  blocks, checked here) run in order, in one namespace, in this process (the shared ``spark``
  fixture is the session its ``getOrCreate()`` returns), in an empty folder, **twice in the
  same folder** (a second run must show the same 4 orders, not 8). The one change: its relative
  ``out/...`` paths are made absolute, because Spark resolves relative paths against the JVM's
  working directory, which the shared session fixed when it started (a user's fresh session
  starts in their folder).
- Every command of the ``sh`` block of "The command line" page runs with ``bash`` in an empty
  folder, against the broker its first line starts (the only change: a free port instead of
  5673), and must exit 0; then the broker is started again on the same data directory and the
  durable queue still holds its persistent messages.

``section(title)`` finds a heading in the README or in any page under ``docs/`` (other tests
read their sections with it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from broker_process import free_port, wait_port

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"


@lru_cache(maxsize=None)
def markdown_files() -> tuple[Path, ...]:
    """README.md, then every page under docs/ (sorted)."""
    return (ROOT / "README.md", *sorted(DOCS.rglob("*.md")))


def _headings(text: str) -> list[tuple[int, int, str]]:
    """(line index, level, title) of the Markdown headings outside fenced code."""
    out, fence = [], False
    for i, line in enumerate(text.split("\n")):
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"^(#{1,6}) (.+?)\s*$", line)):
            out.append((i, len(m.group(1)), m.group(2)))
    return out


def section(title: str, path: Path | None = None) -> str:
    """The text under the heading ``title`` (any level) up to the next heading of the same or
    a higher level, from ``path`` or from the first of the README and the docs' pages that
    has it. KeyError when none has it."""
    for p in [path] if path else markdown_files():
        text = p.read_text(encoding="utf-8")
        heads = _headings(text)
        for k, (i, level, t) in enumerate(heads):
            if t == title:
                end = next((j for j, lv, _ in heads[k + 1:] if lv <= level), None)
                lines = text.split("\n")
                return "\n".join(lines[i:end])
    raise KeyError(f"no heading {title!r} in the README or docs/")


def code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def commands(block: str) -> list[str]:
    """The command lines of an ``sh`` block: comments dropped, ``\\`` continuations joined."""
    out, pending = [], ""
    for line in block.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        line = pending + line
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        out.append(re.sub(r"\s+#\s.*$", "", line).strip())
    return out


def test_the_docs_quick_start_is_the_readmes():
    readme = code_blocks(section("Quick start"), "python")
    docs = code_blocks(section("Quick start", DOCS / "getting-started.md"), "python")
    assert docs == readme, "docs/getting-started.md's Quick start differs from the README's"


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_quick_start_runs_as_written_twice_in_one_folder(spark, tmp_path, monkeypatch, capsys):
    blocks = code_blocks(section("Quick start"), "python")
    assert len(blocks) == 4, "the Quick start's python blocks changed: update this test"
    monkeypatch.chdir(tmp_path)
    code = "\n".join(blocks)
    assert code.count('"out/') == 5
    code = code.replace('"out/', f'"{tmp_path}/out/')
    for run in (1, 2):
        ns: dict = {"__name__": "__quickstart__"}
        try:
            exec(compile(code, "README.md#quick-start", "exec"), ns)
        finally:
            if ns.get("broker") is not None:  # stop() is idempotent
                ns["broker"].stop()
        out = capsys.readouterr().out
        assert ns["spark"] is spark  # the shared session: no second Spark
        rows = spark.read.parquet(str(tmp_path / "out" / "orders")).orderBy("id").collect()
        assert [r.id for r in rows] == ["o-1", "o-2", "o-3", "o-4"], f"run {run}"
        assert [r.message_id for r in rows] == ["o-1", "o-2", "o-3", "o-4"]
        assert not any(r.redelivered for r in rows)
        read_back = sorted(line for line in out.splitlines() if line.startswith("orders.big."))
        assert read_back == ['orders.big.fr {"id":"o-2","amount":180.0}',
                             'orders.big.it {"id":"o-4","amount":250.0}'], f"run {run}"


PORT_IN_DOCS = "5673"


@pytest.mark.timeout(300)
def test_command_line_page_runs_as_written(tmp_path):
    lines = [c for block in code_blocks(section("The command line: `spark-amqp`"), "sh")
             for c in commands(block)]
    assert lines[0].startswith(f"spark-amqp broker --port {PORT_IN_DOCS} ") and lines[0].endswith("&"), lines[0]
    assert lines[1] == f"export SPARK_AMQP_URI=amqp://guest:guest@127.0.0.1:{PORT_IN_DOCS}/%2F"
    assert lines[-1] == "kill %1"
    port = free_port()
    broker_cmd = lines[0][:-1].strip().replace(PORT_IN_DOCS, str(port))
    env = dict(os.environ, SPARK_AMQP_URI=f"amqp://guest:guest@127.0.0.1:{port}/%2F",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    env.pop("SPARK_AMQP_REQUIRE_RABBITMQ", None)

    def start_broker(log_path: Path) -> subprocess.Popen:
        with open(log_path, "w") as log:
            proc = subprocess.Popen(["bash", "-c", f"exec {broker_cmd}"], cwd=tmp_path, env=env,
                                    stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_port(port, timeout=60, proc=proc)
        except (RuntimeError, TimeoutError) as exc:
            raise AssertionError(f"{exc}\n{log_path.read_text()}") from None
        return proc

    def sh(line: str) -> subprocess.CompletedProcess:
        r = subprocess.run(["bash", "-c", line.replace(PORT_IN_DOCS, str(port))], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, f"{line}\nexit {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    broker_log = tmp_path / "broker.log"
    broker = start_broker(broker_log)
    results = {}
    try:
        for line in lines[1:-1]:
            results[line] = sh(line)
    finally:
        broker.terminate()  # the page's `kill %1`
        broker.wait(30)
    assert len(lines) >= 10, lines
    by_cmd = {line.split()[1] if line.startswith("spark-amqp") else line.split()[0]: r
              for line, r in results.items()}
    assert "flight-delays: 2,001 messages ready, 0 consumers" in by_cmd["depth"].stdout
    assert len(by_cmd["peek"].stdout.splitlines()) == 3
    assert "redelivered=true" in by_cmd["peek"].stderr
    assert '"body": "hello"' in by_cmd["consume"].stdout
    assert "does not exist: creating it" in broker_log.read_text()
    # the terminal of the walk-through: startup lines, not one line per command's connection
    assert "ready on" in broker_log.read_text()
    assert "AMQP connection" not in broker_log.read_text(), broker_log.read_text()

    # --durable --persistent with --data-dir: after a restart the queue and its messages are there
    broker = start_broker(tmp_path / "broker-again.log")
    try:
        again = sh("spark-amqp depth flight-delays")
        assert "flight-delays: 2,001 messages ready" in again.stdout, again.stdout
    finally:
        broker.terminate()
        broker.wait(30)
