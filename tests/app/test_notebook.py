"""notebooks/explore.ipynb runs top to bottom (nbclient, the venv's python3 kernel), on a few
thousand flights and the embedded broker, from a folder outside the checkout (it imports only
the installed package), so the notebook cannot rot; and it is stored with its outputs (the
plots show when it is opened)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "explore.ipynb"

pytestmark = [pytest.mark.timeout(600)]


def _outputs(nb, kind: str) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if o.get("output_type") == kind or kind in o.get("data", {})]


def test_the_notebook_is_stored_with_its_outputs():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert len(_outputs(nb, "image/png")) == 2, "store the notebook run: jupyter execute --inplace"
    assert _outputs(nb, "error") == []
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "from spark_amqp.jobs.flight_delays import" in code and "sys.path" not in code


@pytest.mark.spark
def test_explore_notebook_runs(monkeypatch, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")

    nb = nbformat.read(NOTEBOOK, as_version=4)
    # The kernel must be this interpreter (the venv), whatever kernelspecs the machine has:
    # jupyter_client substitutes sys.executable for "python" in the native python3 kernelspec.
    # The kernel inherits this environment.
    monkeypatch.setenv("EXPLORE_FLIGHTS", "3000")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
    monkeypatch.delenv("SPARK_AMQP_URI", raising=False)  # the embedded broker
    # startup_timeout: a kernel's first start on a cold machine (imports from an empty page
    # cache) can outlast nbclient's default 60 s; a fast start does not wait for it
    client = nbclient.NotebookClient(nb, timeout=300, startup_timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()

    text = "\n".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
        if o.get("output_type") == "stream")
    assert "published 3,000 flights" in text
    assert "3,000 flights" in text and "cancelled" in text
    # the depth read from the embedded broker's management API while the query drained it
    depth = text.split("queue depth from the management API while the query drained it")[1]
    # the table's rows: the indented lines right after its title (later outputs indent too)
    rows = [line.split() for line in
            itertools.takewhile(lambda line: line.startswith("  "), depth.splitlines()[1:])]
    counts = [(int(r[1].replace(",", "")), int(r[2].replace(",", ""))) for r in rows]
    assert sum(counts[0]) == 3000 and counts[-1] == (0, 0), rows
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) == 2, "the delay histogram and the worst-windows chart"
    assert text.rstrip().endswith("done")
