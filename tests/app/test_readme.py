"""The README's Quick start and command lines run as written.

- The Quick start's ``python`` blocks run in order, in one namespace, in this process (the
  shared ``spark`` fixture is the session its ``getOrCreate()`` returns), in an empty folder.
  The one change: its relative ``out/...`` paths are made absolute, because Spark resolves
  relative paths against the JVM's working directory, which the shared session fixed when it
  started (a user's fresh session starts in their folder).
- Every command of the ``sh`` blocks of "The command line" section runs with ``bash`` in an
  empty folder, against the broker its first line starts (the only change: ``--port`` of a
  free port instead of 5672, where the shared RabbitMQ listens), and must exit 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from broker_process import free_port, wait_port

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(title: str, level: int = 2) -> str:
    """The README text under the heading ``title`` up to the next heading of that level."""
    mark = "#" * level + " "
    start = README.index(f"\n{mark}{title}\n")
    end = README.find(f"\n{mark}", start + 1)
    return README[start:end if end >= 0 else None]


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


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_quick_start_runs_as_written(spark, tmp_path, monkeypatch, capsys):
    blocks = code_blocks(section("Quick start"), "python")
    assert len(blocks) == 4, "the Quick start's python blocks changed: update this test"
    monkeypatch.chdir(tmp_path)
    code = "\n".join(blocks)
    assert code.count('"out/') == 4
    code = code.replace('"out/', f'"{tmp_path}/out/')
    ns: dict = {"__name__": "__quickstart__"}
    try:
        exec(compile(code, "README.md#quick-start", "exec"), ns)
    finally:
        if "broker" in ns:
            ns["broker"].stop()
    out = capsys.readouterr().out
    assert ns["spark"] is spark  # the shared session: no second Spark
    rows = spark.read.parquet(str(tmp_path / "out" / "orders")).orderBy("id").collect()
    assert [r.id for r in rows] == ["o-1", "o-2", "o-3", "o-4"]
    assert [r.message_id for r in rows] == ["o-1", "o-2", "o-3", "o-4"]
    assert not any(r.redelivered for r in rows)
    read_back = sorted(line for line in out.splitlines() if line.startswith("orders.big."))
    assert read_back == ['orders.big.fr {"id":"o-2","amount":180.0}',
                         'orders.big.it {"id":"o-4","amount":250.0}']


@pytest.mark.timeout(300)
def test_command_line_section_runs_as_written(tmp_path):
    text = section("The command line: `spark-amqp`").split("\n### ")[0]
    lines = [c for block in code_blocks(text, "sh") for c in commands(block)]
    assert lines[0].startswith("spark-amqp broker ") and lines[0].endswith("&"), lines[0]
    broker_cmd = lines[0][:-1].strip()
    port = free_port()
    env = dict(os.environ, SPARK_AMQP_URI=f"amqp://guest:guest@127.0.0.1:{port}/%2F",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    env.pop("SPARK_AMQP_REQUIRE_RABBITMQ", None)
    broker_log = tmp_path / "broker.log"
    with open(broker_log, "w") as log:
        broker = subprocess.Popen(["bash", "-c", f"exec {broker_cmd} --port {port}"], cwd=tmp_path,
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
    results = {}
    try:
        try:
            wait_port(port, timeout=60, proc=broker)
        except (RuntimeError, TimeoutError) as exc:
            raise AssertionError(f"{exc}\n{broker_log.read_text()}") from None
        for line in lines[1:]:
            r = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True,
                               text=True, timeout=240)
            assert r.returncode == 0, f"{line}\nexit {r.returncode}\n{r.stdout}\n{r.stderr}"
            results[line] = r
    finally:
        broker.terminate()
        broker.wait(30)
    assert len(lines) >= 8, lines
    by_cmd = {line.split()[1] if line.startswith("spark-amqp") else line.split()[0]: r
              for line, r in results.items()}
    assert "flight-delays: 2,001 messages ready, 0 consumers" in by_cmd["depth"].stdout
    assert len(by_cmd["peek"].stdout.splitlines()) == 3
    assert "redelivered=true" in by_cmd["peek"].stderr
    assert '"body": "hello"' in by_cmd["consume"].stdout
    log = broker_log.read_text()
    assert "does not exist: creating it" in log
