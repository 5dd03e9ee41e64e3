"""The docs' examples run as written: the streams page's python blocks (a stream and a super
stream on the embedded broker, read and written through Spark), the schema page's snippet, and
the management page's shell lines (the broker with its management API, RabbitMQ's own
``rabbitmqadmin`` fetched from it, the API and ``/metrics`` with curl).

Each test reads its blocks from the page (``section``), so an edit of the page is what runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from app.test_readme import code_blocks, commands, section
from broker_process import free_port, wait_port

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_streams_example_runs_as_written(spark, tmp_path, monkeypatch, capsys):
    blocks = code_blocks(section("A runnable example", DOCS / "streams.md"), "python")
    assert len(blocks) == 3, "the streams page's example changed: update this test"
    monkeypatch.chdir(tmp_path)
    import atexit

    at_exit = []   # what the example registers to run when Python exits, run at the end here
    monkeypatch.setattr(atexit, "register", lambda fn, *a, **k: at_exit.append((fn, a, k)))
    ns: dict = {"__name__": "__streams_example__"}
    try:
        exec(compile("\n".join(blocks), "docs/streams.md#a-runnable-example", "exec"), ns)
    finally:
        if ns.get("broker") is not None:
            ns["broker"].stop()
        for fn, a, k in at_exit:
            fn(*a, **k)
    # the example's temporary folder (/tmp/streams-example-*) is gone at exit
    assert ns["out"].startswith(tempfile.gettempdir()) and not os.path.exists(ns["out"])
    out = capsys.readouterr().out
    assert ns["spark"] is spark
    assert "events read: 2000" in out, out
    assert "offsets 1000..1999: 1000 rows" in out, out
    # the super stream: the partition RabbitMQ's stream clients pick for each key
    shown = re.findall(r"^\|\s*(sales-\d)\s*\|\s*(o-\d)\s*\|$", out, re.M)
    assert sorted(shown) == [("sales-0", "o-2"), ("sales-2", "o-1"), ("sales-2", "o-3")], out


@pytest.mark.spark
def test_schema_snippet_selects_two_columns(spark, embedded_broker):
    import spark_amqp

    spark_amqp.register(spark)
    blocks = code_blocks(section("Schema", DOCS / "schema.md"), "python")
    assert len(blocks) == 1
    ns = {"spark": spark, "uri": embedded_broker.url}
    exec(compile(blocks[0], "docs/schema.md", "exec"), ns)
    assert ns["flights"].isStreaming
    assert ns["flights"].columns == ["body", "routing_key"]


def test_stream_port_snippet_prints_its_url(capsys):
    """docs/broker/streams.md's EmbeddedBroker(stream_port=0) block runs as written and prints
    a rabbitmq-stream:// URL of a port that the broker listened on."""
    blocks = code_blocks(section("The stream protocol (port 5552)", DOCS / "broker" / "streams.md"),
                         "python")
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/broker/streams.md", "exec"), {})
    out = capsys.readouterr().out.strip()
    assert re.fullmatch(r"rabbitmq-stream://guest:guest@127\.0\.0\.1:\d+/%2F", out), out
    assert not out.endswith(":0/%2F"), out


RABBITMQADMIN = next((p for p in ("/usr/bin/rabbitmqadmin", "/usr/sbin/rabbitmqadmin",
                                  shutil.which("rabbitmqadmin")) if p and Path(p).is_file()), None)


@pytest.mark.skipif(RABBITMQADMIN is None, reason="rabbitmqadmin is not installed (it comes with "
                    "RabbitMQ; the broker serves the installed one at /cli/rabbitmqadmin)")
@pytest.mark.timeout(300)
def test_management_lines_run_as_written(tmp_path):
    lines = [c for b in code_blocks(section("The management API, Prometheus metrics and a web page",
                                            DOCS / "broker" / "management.md"), "sh")
             for c in commands(b)]
    assert lines[0] == "spark-amqp broker --port 5673 --management-port 15673 &", lines[0]
    assert lines[-1] == "kill %1"
    amqp, http = free_port(), free_port()

    def ports(line: str) -> str:
        return line.replace("15673", str(http)).replace("5673", str(amqp))

    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    log_path = tmp_path / "broker.log"
    with open(log_path, "w") as log:
        broker = subprocess.Popen(["bash", "-c", "exec " + ports(lines[0][:-1].strip())], cwd=tmp_path,
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
    out = {}
    try:
        for port in (amqp, http):
            try:
                wait_port(port, timeout=60, proc=broker)
            except (RuntimeError, TimeoutError) as exc:
                raise AssertionError(f"{exc}\n{log_path.read_text()}") from None
        for line in lines[1:-1]:
            r = subprocess.run(["bash", "-c", ports(line)], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, f"{line}\nexit {r.returncode}\n{r.stdout}\n{r.stderr}"
            out[line] = r.stdout
    finally:
        broker.terminate()  # the page's `kill %1`
        broker.wait(30)
    text = "\n".join(out.values())
    assert (tmp_path / "rabbitmqadmin").read_text().startswith("#!")  # the script, not a 404
    assert "hello" in next(v for k, v in out.items() if "get queue=orders" in k)
    assert '"name": "orders"' in next(v for k, v in out.items() if "/api/queues/" in k)
    assert "rabbitmq_queue_messages_ready" in text
    per_object = next(v for k, v in out.items() if "/metrics/per-object" in k)
    assert re.search(r'^rabbitmq_queue_messages_ready\{[^}]*queue="orders"', per_object, re.M), \
        per_object
    assert (tmp_path / "definitions.json").is_file()


def _bullet(page: str, start: str) -> str:
    """The list item of ``page`` that starts with ``start``, up to the next item."""
    i = page.index("\n- " + start)
    j = page.find("\n- ", i + 3)
    return page[i:j]


def _metric_names(text: str) -> set[str]:
    """The backticked ``rabbitmq_*`` names of ``text``, ``{a,b}`` alternatives expanded."""
    names = set()
    for name in re.findall(r"`(rabbitmq_[\w{},]+)`", text):
        m = re.fullmatch(r"(\w*)\{([\w,]+)\}(\w*)", name)
        names |= {m.group(1) + alt + m.group(3) for alt in m.group(2).split(",")} if m else {name}
    return names


def test_the_management_pages_metrics_claims_hold_on_the_server():
    """docs/broker/management.md said ``/metrics`` was labelled by vhost and queue; the
    per-object series had moved to ``/metrics/per-object``. Each bullet's claims, read from
    the page, against the embedded broker: the names, the labels, who may scrape."""
    import base64
    import urllib.error
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from spark_amqp import EmbeddedBroker
    from spark_amqp.client import connect

    page = (DOCS / "broker" / "management.md").read_text()
    aggregated, per_object = _bullet(page, "`/metrics`:"), _bullet(page, "`/metrics/per-object`:")
    claimed = _metric_names(aggregated.split("The series:", 1)[1])
    assert len(claimed) >= 15, claimed
    assert "without labels" in aggregated and "needs no login" in aggregated
    labels = set(re.findall(r"labelled `(\w+)`\s+and `(\w+)`", per_object)[0])
    assert labels == {"vhost", "queue"}
    assert "`monitoring`" in per_object and "`administrator`" in per_object

    def scrape(url: str, auth: bool) -> dict:
        headers = {"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()} \
            if auth else {}
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
            text = r.read().decode()
        return {s.name: s.labels for f in text_string_to_metric_families(text) for s in f.samples}

    with EmbeddedBroker(management=True) as b:
        with connect(b.url) as conn:
            ch = conn.channel()
            for q in ("docs-metrics-a", "docs-metrics-b"):
                ch.queue_declare(q, durable=True)
        base = b.management_url.rstrip("/")
        flat = scrape(base + "/metrics", auth=False)                 # no login needed
        missing = claimed - set(flat)
        assert not missing, f"the page names series /metrics does not serve: {missing}"
        labelled = {n: lab for n, lab in flat.items() if lab and n != "rabbitmq_build_info"}
        assert not labelled, f"/metrics has labelled series: {labelled}"
        with pytest.raises(urllib.error.HTTPError) as refused:
            scrape(base + "/metrics/per-object", auth=False)
        assert refused.value.code == 401
        per_queue = scrape(base + "/metrics/per-object", auth=True)
        queue_series = {n for n in claimed if n.startswith("rabbitmq_queue_")}
        assert len(queue_series) == 5, queue_series            # "the five queue series"
        for name in queue_series:
            assert set(per_queue[name]) == labels, (name, per_queue[name])


READING_PATTERNS = ("Pacing the triggers: `minMessagesPerTrigger`, `maxTriggerDelay`",
                    "Subscribing to an exchange (queue mode)",
                    "Lag: how far the query is behind",
                    "Timestamps per stream (stream mode)",
                    "Stream filters (stream mode, RabbitMQ 3.13+)")


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_reading_patterns_run_as_written(spark, tmp_path):
    """Every python block of docs/reading-patterns.md, as written, against a fresh embedded
    broker (4.3 mode) holding what the blocks name; each query it defines then runs with
    Trigger.AvailableNow (streaming) or is collected (batch)."""
    import spark_amqp
    from spark_amqp import EmbeddedBroker
    from spark_amqp.client import connect
    from spark_amqp.client.streams import declare_super_stream

    spark_amqp.register(spark)
    page = DOCS / "reading-patterns.md"
    with EmbeddedBroker() as broker:
        with connect(broker.url) as c:
            ch = c.channel()
            ch.exchange_declare("orders", "topic", durable=True)   # exchangeDeclare=false
            ch.queue_declare("orders", durable=True)               # the pacing block's queue
            ch.confirm_select()
            for i in range(3):
                ch.basic_publish(b"paced %d" % i, "", "orders")
            ch.wait_for_confirms(timeout=30)
            for s in ("orders-eu", "orders-us", "orders-log"):
                ch.queue_declare(s, durable=True, arguments={"x-queue-type": "stream"})
            declare_super_stream(ch, "sales", 3)
        ran = []
        for n, heading in enumerate(READING_PATTERNS):
            blocks = code_blocks(section(heading, page), "python")
            assert len(blocks) == 1, f"{heading}: the page changed, update this test"
            ns: dict = {"spark": spark, "uri": broker.url}
            exec(compile(blocks[0], f"docs/reading-patterns.md#{heading}", "exec"), ns)
            if "listener" in ns:
                spark.streams.removeListener(ns["listener"])
                ran.append("listener")
            for name, df in ns.items():
                if not hasattr(df, "isStreaming"):
                    continue
                if not df.isStreaming:
                    ran.append((name, sorted(bytes(r.body).decode() for r in df.collect())))
                    continue
                q = (df.writeStream.format("memory").queryName(f"rp_{n}_{name}")
                     .trigger(availableNow=True)
                     .option("checkpointLocation", str(tmp_path / f"{n}-{name}")).start())
                assert q.awaitTermination(240), f"{heading}: {name} did not finish"
                assert q.exception() is None, f"{heading}: {name}: {q.exception()}"
                rows = spark.table(f"rp_{n}_{name}").collect()
                ran.append((name, sorted(bytes(r.body).decode() for r in rows)))
    assert ran[0] == ("df", ["paced 0", "paced 1", "paced 2"])   # AvailableNow: no minimum
    assert ("emea", ["order 1", "order 3"]) in ran      # streamFilter + streamMatchUnfiltered
    assert ("live", ["order 1", "order 2"]) in ran      # streamFilter=emea,apac
    assert ("hour", []) in ran and "listener" in ran
    assert [r[0] for r in ran if isinstance(r, tuple)] == ["df", "df", "pdfs", "df", "hour",
                                                          "emea", "live"]
