"""spark/errors.py lead_with_message: what PySpark sends to the JVM for a data source's
exception (the formatted traceback, pyspark.util.handle_worker_exception) starts with the
project's message; "did you mean" for misspelled options (options_table.did_you_mean)."""

from __future__ import annotations

import traceback

import pytest

from spark_amqp.protocol.errors import NotFound
from spark_amqp.spark.errors import QueueMissing, lead_with_message, leading_errors
from spark_amqp.spark.options_table import did_you_mean
from spark_amqp.spark.sink.options import SinkOptionError, parse_sink_options
from spark_amqp.spark.source.options import parse_options


def _as_pyspark_formats(exc: BaseException) -> str:
    # pyspark.util.handle_worker_exception (4.3): the exception being handled, compact
    return "".join(traceback.TracebackException(type(exc), exc, exc.__traceback__,
                                                compact=True).format())


def _raise_missing():
    try:
        raise NotFound("NOT_FOUND - no queue 'q' in vhost '/'")
    except NotFound as exc:
        raise QueueMissing("Queue 'q' does not exist; set option declare=true") from exc


@leading_errors("plan", "rows")
class _Reader:
    def plan(self):
        _raise_missing()

    def rows(self):
        yield 1
        _raise_missing()


def test_the_formatted_traceback_starts_with_the_message():
    with pytest.raises(QueueMissing) as info:
        _raise_missing()
    assert _as_pyspark_formats(info.value).startswith("Traceback")   # as PySpark showed it
    for call in (lambda r: r.plan(), lambda r: list(r.rows())):
        with pytest.raises(QueueMissing) as info:
            call(_Reader())
        text = _as_pyspark_formats(info.value)
        assert text.splitlines()[0] == ("spark_amqp.spark.errors.QueueMissing: Queue 'q' does "
                                        "not exist; set option declare=true"), text
        # the tracebacks and the broker's error follow, unchanged
        assert "NOT_FOUND - no queue 'q'" in text and "_raise_missing" in text
        assert lead_with_message(info.value) is info.value               # idempotent
        assert _as_pyspark_formats(info.value).count("errors.QueueMissing: Queue") == 2


def test_an_option_error_leads_too():
    @leading_errors("load")
    class Source:
        def load(self):
            parse_options({"queue": "q", "maxmessagespertriger": "5"})

    with pytest.raises(ValueError) as info:
        Source().load()
    first = _as_pyspark_formats(info.value).splitlines()[0]
    assert first.startswith("ValueError: Unknown option(s) 'maxmessagespertriger' for the amqp "
                            "source (did you mean 'maxMessagesPerTrigger'?); known options:")


def test_did_you_mean():
    known = {"maxmessagespertrigger": "maxMessagesPerTrigger", "prefetch": "prefetch",
             "maxmessagebytes": "maxMessageBytes"}
    assert did_you_mean(["maxmessagespertriger"], known) == " (did you mean 'maxMessagesPerTrigger'?)"
    assert did_you_mean(["zzz"], known) == ""
    assert did_you_mean(["prefech", "zzz", "maxmesagebytes"], known) == \
        " (did you mean 'prefetch' for 'prefech', 'maxMessageBytes' for 'maxmesagebytes'?)"
    with pytest.raises(SinkOptionError, match=r"routing_key \(did you mean 'routingKey'\?\)"):
        parse_sink_options({"routing_key": "x"})
