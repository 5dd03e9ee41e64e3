"""spark/errors.py lead_with_message: the text PySpark's worker sends to the JVM for a data
source's user-facing error (pyspark.util.handle_worker_exception, what follows
``[PYTHON_DATA_SOURCE_ERROR] Failed to ...:``) starts with the project's message, not with
``Traceback (most recent call last):``; bugs keep their traceback; "did you mean" for
misspelled options (options_table.did_you_mean)."""

from __future__ import annotations

import io
import os
import sys
import types

import pytest
from pyspark.serializers import read_int
from pyspark.util import handle_worker_exception

from spark_amqp.protocol.errors import NotFound
from spark_amqp.spark.errors import QueueMissing, leading_errors
from spark_amqp.spark.options_table import did_you_mean
from spark_amqp.spark.sink.options import SinkOptionError, parse_sink_options
from spark_amqp.spark.source.options import parse_options


def _raise_missing():
    try:
        raise NotFound("NOT_FOUND - no queue 'q' in vhost '/'")
    except NotFound as exc:
        raise QueueMissing("Queue 'q' does not exist; set option declare=true") from exc


@leading_errors("plan", "rows", "load", "bug")
class _Reader:
    def plan(self):
        _raise_missing()

    def rows(self):
        yield 1
        _raise_missing()

    def load(self):
        parse_options({"queue": "q", "maxmessagespertriger": "5"})

    def bug(self):
        return None.missing


@pytest.fixture
def pyspark_worker(monkeypatch):
    """This process as a PySpark worker: ``__main__`` is a pyspark module, no
    SPARK_HIDE_TRACEBACK yet; the simplified traceback on, as Spark sets it by default."""
    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name="pyspark.sql.worker.create_data_source")
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.delenv("SPARK_HIDE_TRACEBACK", raising=False)
    monkeypatch.setenv("SPARK_SIMPLIFIED_TRACEBACK", "1")


def _as_the_worker_reports(call) -> str:
    """What PySpark's worker sends the JVM for the exception ``call()`` raises."""
    out = io.BytesIO()
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - as the worker catches it
        handle_worker_exception(exc, out)
    else:
        raise AssertionError("no exception")
    out.seek(0)
    read_int(out)                                   # SpecialLengths.PYTHON_EXCEPTION_THROWN
    n = read_int(out)
    return out.read(n).decode()


def test_a_user_facing_error_is_reported_message_first(pyspark_worker):
    text = _as_the_worker_reports(lambda: _Reader().plan())
    assert text.splitlines()[0] == ("spark_amqp.spark.errors.QueueMissing: Queue 'q' does not "
                                    "exist; set option declare=true"), text
    os.environ.pop("SPARK_HIDE_TRACEBACK")
    text = _as_the_worker_reports(lambda: list(_Reader().rows()))      # a generator (read)
    assert text.startswith("spark_amqp.spark.errors.QueueMissing: Queue 'q'"), text
    os.environ.pop("SPARK_HIDE_TRACEBACK")
    text = _as_the_worker_reports(lambda: _Reader().load())
    assert text.startswith("ValueError: Unknown option(s) 'maxmessagespertriger' for the amqp "
                           "source (did you mean 'maxMessagesPerTrigger'?); known options:"), text


def test_without_it_the_report_starts_with_the_traceback(pyspark_worker):
    """What the user saw (and still sees for a bug): the traceback first, the message last."""
    text = _as_the_worker_reports(_raise_missing)
    assert text.startswith("Traceback (most recent call last):"), text
    text = _as_the_worker_reports(lambda: _Reader().bug())
    assert text.startswith("Traceback (most recent call last):") and "AttributeError" in text
    assert "SPARK_HIDE_TRACEBACK" not in os.environ


def test_the_users_own_process_is_not_changed(monkeypatch):
    monkeypatch.delenv("SPARK_HIDE_TRACEBACK", raising=False)
    with pytest.raises(QueueMissing):
        _Reader().plan()
    assert "SPARK_HIDE_TRACEBACK" not in os.environ


def test_did_you_mean():
    known = {"maxmessagespertrigger": "maxMessagesPerTrigger", "prefetch": "prefetch",
             "maxmessagebytes": "maxMessageBytes"}
    assert did_you_mean(["maxmessagespertriger"], known) == " (did you mean 'maxMessagesPerTrigger'?)"
    assert did_you_mean(["zzz"], known) == ""
    assert did_you_mean(["prefech", "zzz", "maxmesagebytes"], known) == \
        " (did you mean 'prefetch' for 'prefech', 'maxMessageBytes' for 'maxmesagebytes'?)"
    with pytest.raises(SinkOptionError, match=r"routing_key \(did you mean 'routingKey'\?\)"):
        parse_sink_options({"routing_key": "x"})
