"""The tiers tests/conftest.py puts on the tests (tests/tiers.py), and that a run sees them."""

from __future__ import annotations

from tiers import tiers


def test_tiers_from_fixtures_folders_parameters_and_hand_markers():
    assert tiers(["tmp_path"], "protocol", {}, []) == {"unit"}
    assert tiers(["embedded_broker", "unique"], "client", {}, []) == {"broker"}
    # broker_url's RabbitMQ variant; the management API's parameter too
    assert tiers(["broker_url"], "broker", {"broker_url": "rabbitmq"}, []) == {"broker", "rabbitmq"}
    assert tiers(["broker_url"], "broker", {"broker_url": "embedded"}, []) == {"broker"}
    assert tiers(["api"], "management", {"api": "rabbitmq"}, []) == {"broker", "rabbitmq"}
    assert tiers(["rabbitmq_url"], "client", {}, []) == {"broker", "rabbitmq"}
    # the shared SparkSession (a fixture of a fixture counts: fixturenames is the closure)
    assert tiers(["spark", "broker_url"], "spark", {"broker_url": "embedded"}, []) == {
        "spark", "broker"}
    assert tiers([], "cluster", {}, []) == {"cluster"}
    assert tiers(["spark"], "rabbitmq_cluster", {}, ["rabbitmq_cluster"]) == {
        "spark", "rabbitmq_cluster"}
    # hand-put markers: spark on a subprocess job, faults (not a unit test), slow (no tier)
    assert tiers([], "app", {}, ["spark"]) == {"spark"}
    assert tiers([], "faults", {}, ["faults"]) == {"faults"}
    assert tiers([], "protocol", {}, ["slow"]) == {"unit"}
    # a parameter that is not a string is no RabbitMQ (nor an error)
    assert tiers([], "protocol", {"n": 3, "b": b"rabbitmq"}, []) == {"unit"}


def test_this_run_sees_the_tiers(request):
    mine = {m.name for m in request.node.iter_markers()}
    assert "unit" in mine and "spark" not in mine
