"""The README's "Spark Connect" section, as written: PySpark's own Spark Connect server started
by the section's ``spark-submit`` line (on a free port instead of 15002, with ``spark_amqp``
importable by the server's Python workers through ``PYSPARK_PYTHON``), and the section's
client code run by a separate Python process (a Connect client switches PySpark's functions
to Connect mode for its whole process, so it cannot share the test process with the classic
``spark`` session), against the embedded broker instead of a RabbitMQ at 5672.

The client registers the data source, writes 1,000 rows to an exchange (a queue and a stream
are bound to it), reads the queue with ``Trigger.AvailableNow`` into parquet and the stream's
first 500 offsets with a stream-mode batch read: the counts it prints are checked, and so is
the broker afterwards (the queue drained, nothing left behind).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.test_readme import code_blocks, commands, section

from broker_process import free_port

from .conftest import LOG4J, require_java

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

PORT_IN_README = "15002"
URI_IN_README = "amqp://guest:guest@127.0.0.1:5672/%2F"


def server_line() -> str:
    lines = [c for b in code_blocks(section("Spark Connect"), "sh") for c in commands(b)
             if "SparkConnectServer" in c]
    assert len(lines) == 1, lines
    assert f"spark.connect.grpc.binding.port={PORT_IN_README}" in lines[0]
    return lines[0].rstrip("&").strip()


def client_code() -> str:
    blocks = code_blocks(section("Spark Connect"), "python")
    assert len(blocks) == 1, "the Spark Connect section's python block changed: update this test"
    code = blocks[0]
    assert f"sc://127.0.0.1:{PORT_IN_README}" in code and URI_IN_README in code
    return code


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    """The README's server line on a free port; yields the port; SIGTERM to its group after."""
    require_java()
    port = free_port()
    tmp = tmp_path_factory.mktemp("connect-server")
    line = server_line().replace(PORT_IN_README, str(port))
    line += f" --conf spark.ui.enabled=false --conf 'spark.driver.extraJavaOptions=" \
            f"-Dlog4j.configurationFile=file:{LOG4J}'"
    bindir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
               PYSPARK_PYTHON=sys.executable)
    log = open(tmp / "server.log", "wb")
    t0 = time.monotonic()
    p = subprocess.Popen(["bash", "-c", "exec " + line], cwd=tmp, env=env, stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while True:
            if p.poll() is not None:
                pytest.fail(f"the Connect server exited ({p.returncode}):\n"
                            + (tmp / "server.log").read_text()[-5000:])
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("the Connect server did not listen within 240 s:\n"
                                + (tmp / "server.log").read_text()[-5000:])
                time.sleep(0.25)
        print(f"Connect server listening after {time.monotonic() - t0:.1f} s")
        yield port, tmp / "server.log"
    finally:
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        log.close()


def test_readme_connect_client_runs_as_written(connect_server, embedded_broker, tmp_path):
    port, server_log = connect_server
    code = client_code().replace(PORT_IN_README, str(port)).replace(URI_IN_README,
                                                                    embedded_broker.url)
    script = tmp_path / "client.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "SPARK_CONNECT", "SPARK_REMOTE"))}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=500)
    print(f"Connect client: {time.monotonic() - t0:.1f} s")
    assert r.returncode == 0, (f"stdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-6000:]}\n"
                               f"server log:\n{server_log.read_text()[-4000:]}")
    out = r.stdout.splitlines()
    assert "written to exchange connect-demo: 1000 rows" in out, r.stdout
    assert "read from queue connect-orders: 1000 rows, 1000 distinct ids" in out, r.stdout
    assert "left in connect-orders: 0" in out, r.stdout
    assert "stream connect-events, offsets [0, 500): 500 rows, offsets 0..499" in out, r.stdout

    from spark_amqp.client import connect

    with connect(embedded_broker.url) as conn:  # the client deleted what it made
        for q in ("connect-orders", "connect-events"):
            with pytest.raises(Exception, match="NOT_FOUND|404"):
                conn.channel().queue_declare(q, passive=True)
