"""rabbitmqadmin (v1, the Python script RabbitMQ ships) runs unchanged against the embedded
broker's management API: the same commands against both brokers, the same results.

The script is downloaded from RabbitMQ's management plugin (``/cli/rabbitmqadmin``, as
RabbitMQ's docs say to get it) when that is reachable, else taken from the disk
(``/usr/bin/rabbitmqadmin`` of the Debian package), else the test skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request

import pytest

RABBITMQ_MGMT = os.environ.get("SPARK_AMQP_RABBITMQ_MANAGEMENT_URL", "http://127.0.0.1:15672/")


@pytest.fixture(scope="module")
def rabbitmqadmin(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("cli") / "rabbitmqadmin"
    try:
        with urllib.request.urlopen(RABBITMQ_MGMT + "cli/rabbitmqadmin", timeout=10) as r:
            path.write_bytes(r.read())
        return str(path)
    except OSError:
        pass
    for p in ("/usr/bin/rabbitmqadmin", "/usr/sbin/rabbitmqadmin", shutil.which("rabbitmqadmin")):
        if p:
            try:
                shutil.copy(p, path)
                return str(path)
            except OSError:
                continue
    pytest.skip("rabbitmqadmin not found: RabbitMQ's management plugin is not reachable at "
                f"{RABBITMQ_MGMT} and no rabbitmqadmin is installed (it ships with RabbitMQ)")


def test_rabbitmqadmin_unchanged(api, rabbitmqadmin, unique, tmp_path):
    port = urllib.parse.urlparse(api.base).port

    def run(*args: str) -> str:
        r = subprocess.run([sys.executable, rabbitmqadmin, "-H", "127.0.0.1", "-P", str(port),
                            "-u", "guest", "-p", "guest", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{api.kind}: rabbitmqadmin {' '.join(args)}: {r.stdout}{r.stderr}"
        return r.stdout

    q = unique("admin")
    assert run("declare", "queue", f"name={q}", "durable=false") == "queue declared\n"
    api.cleanup_paths.append(f"queues/%2F/{urllib.parse.quote(q, safe='')}")
    assert run("publish", "exchange=amq.default", f"routing_key={q}", "payload=hello") == "Message published\n"
    assert run("publish", f"routing_key={q}", "payload=world", 'properties={"content_type":"text/plain"}') \
        == "Message published\n"
    rows = api.wait_for(lambda: [r for r in json.loads(run("-f", "raw_json", "list", "queues", "name", "messages"))
                                 if r["name"] == q and r.get("messages") == 2], "2 messages listed")
    assert rows == [{"name": q, "messages": 2}]
    table = run("list", "queues")                       # the default table format
    assert q in table and table.splitlines()[1].split() == ["|", "name", "|", "messages", "|"]
    got = json.loads(run("-f", "raw_json", "get", f"queue={q}", "ackmode=ack_requeue_false", "count=1"))
    assert [(m["payload"], m["message_count"], m["redelivered"]) for m in got] == [("hello", 1, False)]
    got = json.loads(run("-f", "raw_json", "get", f"queue={q}"))   # ack_requeue_true by default
    assert [(m["payload"], m["properties"]) for m in got] == [("world", {"content_type": "text/plain"})]
    out = tmp_path / "defs.json"
    assert "Exported definitions" in run("export", str(out))
    defs = json.loads(out.read_text())
    assert [x for x in defs["queues"] if x["name"] == q] == [
        {"name": q, "vhost": "/", "durable": False, "auto_delete": False, "arguments": {}}]
    assert run("purge", "queue", f"name={q}") == "queue purged\n"
    assert run("delete", "queue", f"name={q}") == "queue deleted\n"
    assert api.get(f"queues/%2F/{urllib.parse.quote(q, safe='')}").status == 404
