"""The flight-delays job's names, defaults and schemas (no Spark, no broker)."""

from __future__ import annotations

from ...tools.flights import FLIGHTS_EXCHANGE

__all__ = ["ALERTS_EXCHANGE", "DEFAULT_ALERTS_QUEUE", "DEFAULT_MAX_PER_TRIGGER",
           "DEFAULT_PARTITIONS", "DEFAULT_QUEUE", "DEFAULT_SUPER_STREAM", "FLIGHTS_EXCHANGE",
           "FLIGHT_SCHEMA_DDL", "LIVE_INTERVAL", "LIVE_RATE", "LIVE_STREAM_WATERMARK",
           "RESULT_COLUMNS", "SOURCE_SCHEMA"]

DEFAULT_QUEUE = "flight-delays"
DEFAULT_SUPER_STREAM = "flight-delays-stream"
DEFAULT_PARTITIONS = 3
#: --max-per-trigger default of the queue mode (the stream mode's is 0 = no cap)
DEFAULT_MAX_PER_TRIGGER = 50_000
DEFAULT_ALERTS_QUEUE = "flight-delay-alerts"
#: --live defaults: the publisher's msg/s, the trigger interval (s), and the stream mode's
#: watermark. A trigger probes the partitions' tails one after the other, so one partition's
#: batch can end later in the publishing than another's (by the probes' time, up to ~0.1 s);
#: at 2,000 msg/s (~2 days of flights per second of publishing) 10 ms are ~30 minutes of
#: event time, and the next batch's flights of the partition behind would fall behind a
#: 30-minute watermark and be dropped as late. 12 hours covers ~0.2 s at 2,000 msg/s and stays
#: below the end-of-stream marker's day minus the last 1-hour window.
LIVE_RATE = 2000.0
LIVE_INTERVAL = 0.5
LIVE_STREAM_WATERMARK = "12 hours"
ALERTS_EXCHANGE = "alerts"

#: The JSON of one flight message (see spark_amqp.tools.flights); ``event`` is set only on the
#: end-of-stream marker. Explicit, so malformed fields become null instead of changing types.
FLIGHT_SCHEMA_DDL = (
    "year INT, month INT, day INT, dep_time INT, sched_dep_time INT, dep_delay DOUBLE, "
    "arr_time INT, sched_arr_time INT, arr_delay DOUBLE, carrier STRING, flight INT, "
    "tailnum STRING, origin STRING, dest STRING, air_time DOUBLE, distance DOUBLE, hour INT, "
    "minute INT, time_hour STRING, sched_dep TIMESTAMP, event STRING")

#: The source's columns the query reads, as a user schema: the source then builds and sends
#: Spark only ``body`` instead of its 20 columns (CHANGELOG.md, "The main job's speed").
SOURCE_SCHEMA = "body binary"

#: Columns of the result (parquet and the summary), in order.
RESULT_COLUMNS = ("origin", "carrier", "window_start", "window_end", "flights", "cancelled",
                  "mean_dep_delay", "p90_dep_delay")
