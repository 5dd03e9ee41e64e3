"""The test tiers (markers declared in pyproject.toml), from what a test uses: its fixtures
(with the fixtures' own fixtures), its folder under tests/, its parameters and the markers
put by hand. ``tests/conftest.py`` puts them on every collected test, so a new test lands in
its tier without a marker of its own; docs/development.md, "Test tiers and the fast check".

- ``spark``: the shared SparkSession (a JVM); by hand on the tests that start Spark in a
  subprocess (the crash runners, the job, the notebook);
- ``cluster`` (tests/cluster: a Spark standalone cluster or Spark Connect) and
  ``rabbitmq_cluster`` (tests/rabbitmq_cluster: three RabbitMQ nodes), by folder;
- ``rabbitmq``: the real RabbitMQ, from a ``rabbitmq_url`` fixture or a parameter ``"rabbitmq"``
  (``broker_url``'s, the management API's);
- ``broker``: any broker, embedded or RabbitMQ (no JVM);
- ``unit``: none of these and no ``faults`` (put by hand, as is ``slow``).

The fast check is ``-m "not spark and not cluster and not rabbitmq_cluster"`` (``make check``).
"""

from __future__ import annotations

from typing import Iterable, Mapping

TIER_FOLDERS = {"cluster": "cluster", "rabbitmq_cluster": "rabbitmq_cluster"}
BROKER_FIXTURES = {"embedded_broker", "embedded_broker_310", "embedded_broker_43", "broker_url",
                   "rabbitmq_url"}
#: the tiers of a test that starts something: a test with none of them is a ``unit`` test
NOT_UNIT = {"spark", "cluster", "rabbitmq_cluster", "rabbitmq", "broker", "faults"}


def tiers(fixturenames: Iterable[str], folder: str, params: Mapping[str, object],
          markers: Iterable[str]) -> set[str]:
    """The tiers of a test: ``fixturenames`` (``item.fixturenames``), ``folder`` (the first
    folder of its path under tests/, ``""`` for tests/ itself), ``params`` (its
    ``callspec.params``, ``{}`` if not parametrized), ``markers`` (the names of the markers it
    has already)."""
    names = set(fixturenames)
    out = set(markers) & NOT_UNIT
    if "spark" in names:
        out.add("spark")
    if folder in TIER_FOLDERS:
        out.add(TIER_FOLDERS[folder])
    if "rabbitmq_url" in names or any(isinstance(v, str) and v == "rabbitmq"
                                      for v in params.values()):
        out.add("rabbitmq")
    if names & BROKER_FIXTURES or "rabbitmq" in out:
        out.add("broker")
    if not out & NOT_UNIT:
        out.add("unit")
    return out
