"""Spark's read limits for one trigger (spark_amqp/spark/source/read_limits.py), shared by the
queue mode (which caps bytes too) and the stream mode (no byte cap)."""

from __future__ import annotations

from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxBytes, ReadMaxRows,
                                              ReadMinRows)

from spark_amqp.spark.source.read_limits import Limits, default_read_limit, read_limits


def test_queue_mode_limits_cap_bytes_with_every_limit():
    assert read_limits(ReadMaxRows(7), True, None, 100) == Limits(7, 100)
    assert read_limits(ReadMaxBytes(50), True, 9, 100) == Limits(None, 50)
    assert read_limits(ReadMaxBytes(500), True, 9, 100) == Limits(None, 100)
    assert read_limits(ReadMinRows(3), True, 9, 100) == Limits(9, 100, 3)
    assert read_limits(ReadAllAvailable(), True, 9, 100) == Limits(None, 100)
    assert read_limits(None, False, 9, 100) == Limits(9, 100)   # PySpark 4.0/4.1


def test_stream_mode_limits_have_no_byte_cap():
    assert read_limits(ReadMaxRows(7), True, None) == Limits(7)
    assert read_limits(ReadMinRows(3), True, 9) == Limits(9, None, 3)
    assert read_limits(ReadAllAvailable(), True, 9) == Limits(None)
    assert read_limits(None, False, 9) == Limits(9)              # PySpark 4.0/4.1
    assert read_limits(None, True, 9) == Limits(None)


def test_default_read_limit_of_each_mode():
    assert isinstance(default_read_limit(5, 100), ReadMaxRows)
    assert isinstance(default_read_limit(None, 100), ReadMaxBytes)   # the queue mode
    assert isinstance(default_read_limit(None), ReadAllAvailable)    # the stream mode
