"""The client package's imports go one way: no import circle between its modules (imports
under ``TYPE_CHECKING`` included), nothing above the protocol layer imported, and the
connection is what a channel expects of it (:class:`ChannelHost`)."""

from __future__ import annotations

import ast
from pathlib import Path

import spark_amqp.client as client_pkg
from spark_amqp.client import connect
from spark_amqp.client.channel_host import ChannelHost

CLIENT_DIR = Path(client_pkg.__file__).parent


def _imports(path: Path) -> set[str]:
    """Absolute names of the spark_amqp modules ``path`` imports, anywhere in the file."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against spark_amqp.client
                base = ["spark_amqp", "client"][:3 - node.level]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("spark_amqp"):
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("spark_amqp"))
    return out


def _graph() -> dict[str, set[str]]:
    mods = {f"spark_amqp.client.{p.stem}": p for p in CLIENT_DIR.glob("*.py")
            if p.stem != "__init__"}
    return {m: {i for i in _imports(p) if i in mods} for m, p in mods.items()}


def test_channel_never_imports_connection():
    assert "spark_amqp.client.connection" not in _graph()["spark_amqp.client.channel"]


def test_no_import_circle_in_client():
    graph = _graph()
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        assert m not in path, "import circle: " + " -> ".join(path[path.index(m):] + [m])
        if m in done:
            return
        for n in sorted(graph[m]):
            visit(n, path + [m])
        done.add(m)

    for m in sorted(graph):
        visit(m, [])
    assert "spark_amqp.client.channel" in graph["spark_amqp.client.connection"]


def test_client_imports_only_protocol_and_itself():
    # the version from the ground floor, never from the package root (spark_amqp itself)
    allowed = ("spark_amqp.protocol", "spark_amqp.client", "spark_amqp._version")
    for path in CLIENT_DIR.glob("*.py"):
        for name in _imports(path):
            assert name.startswith(allowed), (path.name, name)


def test_connection_is_a_channel_host(embedded_broker):
    with connect(embedded_broker.url) as conn:
        assert isinstance(conn, ChannelHost)
        ch = conn.channel()
        assert ch.connection is conn
        ch.basic_publish(b"x", routing_key="spark-amqp-test.layers.none")  # unroutable: dropped
        ch.close()
