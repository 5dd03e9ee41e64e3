"""The query's DataFrame functions: flight JSON → per origin/carrier/hour windows → result
rows and alert messages (streaming or batch DataFrames alike; no I/O)."""

from __future__ import annotations

from .data import FLIGHT_SCHEMA_DDL


def window_aggregates(messages, watermark: str = "30 minutes"):
    """Streaming (or batch) DataFrame of per origin/carrier/hour aggregates from ``messages``.

    ``messages``: rows of the ``amqp`` source (a ``body`` binary column of flight JSON).
    Returns the columns of :data:`RESULT_COLUMNS` (the marker's group has ``origin`` null;
    :func:`result_rows` drops it).
    """
    from pyspark.sql import functions as F

    flights = (messages
               .select(F.from_json(F.col("body").cast("string"), FLIGHT_SCHEMA_DDL,
                                   {"mode": "PERMISSIVE"}).alias("f"))
               .select("f.*")
               .where(F.col("sched_dep").isNotNull())
               .withWatermark("sched_dep", watermark))
    return (flights
            .groupBy("origin", "carrier", F.window("sched_dep", "1 hour"))
            .agg(F.count(F.lit(1)).alias("flights"),
                 F.count(F.when(F.col("dep_time").isNull(), 1)).alias("cancelled"),
                 F.avg("dep_delay").alias("mean_dep_delay"),
                 F.percentile_approx("dep_delay", 0.9).cast("double").alias("p90_dep_delay"))
            .select("origin", "carrier", F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "flights", "cancelled",
                    "mean_dep_delay", "p90_dep_delay"))


def result_rows(df):
    """Drop the end-of-stream marker's group (no origin) from an aggregate DataFrame."""
    from pyspark.sql import functions as F

    return df.where(F.col("origin").isNotNull() & F.col("carrier").isNotNull())


def alert_messages(windows, threshold: float):
    """Rows for the ``amqp`` sink: one JSON alert per window with mean delay > ``threshold``.

    Columns ``routing_key`` (``delay.<origin>.<carrier>``), ``body`` (JSON string),
    ``content_type``, ``type`` (``delay-alert``) and ``message_id``
    (``delay-<origin>-<carrier>-<window start>``): one id per window, so a consumer can drop
    the duplicates a replayed micro-batch publishes (the sink is at-least-once).
    """
    from pyspark.sql import functions as F

    return (windows.where(F.col("mean_dep_delay") > F.lit(threshold))
            .select(F.concat(F.lit("delay."), "origin", F.lit("."), "carrier").alias("routing_key"),
                    F.to_json(F.struct(
                        "origin", "carrier",
                        F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
                        F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
                        "flights", "cancelled",
                        F.round("mean_dep_delay", 1).alias("mean_dep_delay"),
                        "p90_dep_delay", F.lit(threshold).alias("threshold"))).alias("body"),
                    F.lit("application/json").alias("content_type"),
                    F.lit("delay-alert").alias("type"),
                    F.concat_ws("-", F.lit("delay"), "origin", "carrier",
                                F.date_format("window_start", "yyyyMMdd'T'HHmm")).alias("message_id")))
