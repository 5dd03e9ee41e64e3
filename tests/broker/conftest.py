"""Fixtures of the broker tests: a broker in a subprocess (for kill -9 / SIGTERM tests)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from broker_process import BrokerProcess

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def broker_process():
    procs: list[BrokerProcess] = []

    def start(**kw) -> BrokerProcess:
        p = BrokerProcess(**kw)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait(30)
