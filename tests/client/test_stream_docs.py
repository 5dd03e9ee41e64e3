"""The stream-protocol page's example runs as written against each broker of ``stream_url``
(its block read from the page, so an edit of the page is what runs)."""

from __future__ import annotations

from pathlib import Path

from app.test_readme import code_blocks, section
from stream_client_helpers import stream_url  # noqa: F401

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_stream_protocol_example_runs_as_written(stream_url, capsys):
    [block] = code_blocks(section("A runnable example", DOCS / "stream-protocol.md"), "python")
    default = "rabbitmq-stream://guest:guest@127.0.0.1:5552/%2F"
    assert default in block, "the page's example changed: update this test"
    ns: dict = {"__name__": "__stream_protocol_example__"}
    exec(compile(block.replace(default, stream_url), "docs/stream-protocol.md", "exec"), ns)
    out = capsys.readouterr().out
    first = ns["first"]
    assert "confirmed: 1000" in out, out   # distinct ids; the replayed 100 are dropped
    assert f"stored sequence: {first + 999}" in out, out
    assert "last: 999 b'{\"order\": 999}'" in out, out
