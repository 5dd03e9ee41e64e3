"""The package's import graph: no import cycles, and each layer imports only the layers below it.

Layers (the brief's and :mod:`spark_amqp`'s docstring): ``protocol`` (sans-IO codec) →
``broker`` core and ``client`` transport → ``management`` (over the broker) and ``spark``
(source and sink, over the client) → ``tools`` (the applications' shared libraries: the
flights data, publishing, a standalone cluster) → ``cli`` → ``jobs`` → ``bench`` (the
applications, each over the ones before it: the jobs' publisher reuses the CLI's topology
helper, the benchmarks run the job).
Folders of the same layer are siblings and do not import each other. Inside ``spark``: ``source`` and
``sink`` import the shared modules beside them (``schema``, ``connection_options``,
``option_values``), never each other (one exception below), and the shared modules import
neither; ``datasource`` and ``import_guard`` are the entry point over both.

The graph is read from the source with :mod:`ast` (no module is imported), counting every
``import`` wherever it stands: an import inside a function is still a dependency, only a later
one. The package root (``spark_amqp``: ``register`` and the lazy
``EmbeddedBroker``) stands over the library (``spark``, ``broker``) and under the applications
(``cli``, ``jobs``, ``bench``) that use it, and ``spark_amqp._version`` (which imports nothing)
below them all: the layers read the version there, never from the root.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "spark_amqp"

#: layer of each subpackage of spark_amqp; a module may import its own subpackage and lower layers
RANK = {
    "protocol": 0,
    "broker": 1, "client": 1,
    "management": 2, "spark": 2,
    # the libraries the applications share (flights data, publishing, standalone cluster)
    "tools": 3,
    # the applications: the CLI's commands; the jobs (spark-submit scripts; publish_flights
    # reuses the CLI's topology helper); the benchmarks measure everything below them, the
    # job included
    "cli": 4, "jobs": 5, "bench": 6,
}
#: modules outside the subpackages: the version at the ground floor, the root over the library
GROUND, ROOT_MODULE = "spark_amqp._version", "spark_amqp"

#: the edges against the layer order that are there by design (importer module, imported
#: module), each with its reason. Anything not listed fails the test, and so does a listed edge
#: that no longer exists.
ALLOWED_VIOLATIONS = {
    # the management HTTP API is the broker's plugin, as rabbitmq_management is RabbitMQ's:
    # the broker starts it (lazily, only when asked for a management port); by design
    ("spark_amqp.broker.embedded", "spark_amqp.management"),
    ("spark_amqp.broker.server", "spark_amqp.management"),
    # the sink accepts and ignores the source's option names (sink/options.py
    # SOURCE_ONLY_OPTIONS), so it reads their table: a sideways edge kept by design
    ("spark_amqp.spark.sink.options", "spark_amqp.spark.source.options"),
}

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    """Every module of the package; compiled ones (``.pyx``) too, as leaves (not parsed)."""
    return {_module_name(p): p for pattern in ("*.py", "*.pyx") for p in ROOT.rglob(pattern)}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The spark_amqp modules ``name`` imports (``from P import m`` counts as ``P.m`` when that
    is a module, else as ``P``)."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    if path.suffix != ".py":
        return out

    def add(target: str) -> None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "spark_amqp":
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "spark_amqp":
                continue
            names = [a.name for a in node.names]
            for n in names:
                add(f"{mod}.{n}" if f"{mod}.{n}" in modules else mod)
    return out


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _rank(module: str) -> float | None:
    """The layer of ``module`` (as RANK): -1 for the version, 2.5 for the root, else None."""
    if module == GROUND:
        return -1
    if module == ROOT_MODULE:
        return 2.5
    parts = module.split(".")
    return RANK[parts[1]] if len(parts) > 1 and parts[1] in RANK else None


def _layer(module: str) -> str | None:
    if module in (GROUND, ROOT_MODULE):
        return module
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else None


def _cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(tuple(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_imports(graph):
    # a reader that found nothing would pass every test below
    assert "spark_amqp.spark.source.queues.micro_batch_stream" in graph["spark_amqp.spark.datasource"]
    assert "spark_amqp.spark.sink.writer" in graph["spark_amqp.spark.datasource"]
    assert "spark_amqp.protocol.errors" in graph["spark_amqp.spark.source.queues.errors"]  # lazy
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [("a", "b", "c")]


def test_no_import_cycles(graph):
    assert _cycles(graph) == [], "import cycles (modules of each cycle listed)"


#: the entry point of spark_amqp.spark, over its source and sink
SPARK_ENTRY = {"spark_amqp.spark", "spark_amqp.spark.datasource", "spark_amqp.spark.import_guard"}


def _spark_part(module: str) -> str | None:
    """``source`` / ``sink`` (the folder), ``entry`` or ``shared`` for a module of
    spark_amqp.spark; None elsewhere."""
    parts = module.split(".")
    if parts[:2] != ["spark_amqp", "spark"]:
        return None
    if module in SPARK_ENTRY:
        return "entry"
    return parts[2] if parts[2] in ("source", "sink") else "shared"


def _violations(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    bad = set()
    for importer, targets in graph.items():
        a = _layer(importer)
        for target in targets:
            b = _layer(target)
            if a is None or b is None or a == b:
                continue
            if _rank(target) >= _rank(importer):
                bad.add((importer, target))
    for importer, targets in graph.items():
        for target in targets:
            if not _spark_part(importer) or not _spark_part(target):
                continue
            a, b = _spark_part(importer), _spark_part(target)
            if a == "entry" or b in ("shared", a):
                continue
            bad.add((importer, target))  # shared imports a side, or a side the other one
    return bad


def test_layers_import_only_lower_layers(graph):
    bad = _violations(graph)
    assert sorted(bad - ALLOWED_VIOLATIONS) == []
    assert sorted(ALLOWED_VIOLATIONS - bad) == [], "allowed violations that no longer exist: " \
                                                   "remove them"


def test_a_violation_is_seen():
    graph = {"spark_amqp.protocol.frames": {"spark_amqp.client.connection"},
             "spark_amqp.spark.source.reader": {"spark_amqp.spark.sink.writer"},
             "spark_amqp.spark.schema": {"spark_amqp.spark.source.arrow"},
             "spark_amqp.cli.main": {"spark_amqp.protocol.frames"},
             "spark_amqp.broker.connection": {"spark_amqp", "spark_amqp._version"},
             # allowed: the entry point over both sides, a side over the shared modules
             "spark_amqp.spark.datasource": {"spark_amqp.spark.source.reader"},
             "spark_amqp.spark.sink.convert": {"spark_amqp.spark.schema"}}
    assert _violations(graph) == {
        ("spark_amqp.protocol.frames", "spark_amqp.client.connection"),
        ("spark_amqp.spark.source.reader", "spark_amqp.spark.sink.writer"),
        ("spark_amqp.spark.schema", "spark_amqp.spark.source.arrow"),
        ("spark_amqp.broker.connection", "spark_amqp")}
