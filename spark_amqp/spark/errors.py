"""Every error the ``amqp`` data source raises of its own, in one module with stable names (as
Spark's Kafka connector keeps its errors in ``KafkaExceptions``). No I/O.

Each is an :class:`AmqpSparkError` (catch them all with it) and keeps the built-in base it
always had (``ValueError``, ``RuntimeError``, ``ConnectionError``/``OSError``,
``TimeoutError``), so code catching those goes on working; each is also importable from the
module that raises it (``spark_amqp.spark.sink.publish.AmqpSinkError``, ...). The client's
:class:`~spark_amqp.client.failover.BrokerUnreachable` (every path that gives up reconnecting)
is re-exported here, with its old stream-mode name :data:`StreamBrokerUnreachable`. The
broker's own errors (``ACCESS_REFUSED`` ...) are :mod:`spark_amqp.protocol.errors`' typed
classes, raised unchanged.

============================  ==================================================  ==========
error                         raised when                                         where
============================  ==================================================  ==========
:class:`SinkOptionError`      an unknown or invalid sink option                   driver
:class:`SinkSchemaError`      a missing, mistyped or unknown sink column          driver
:class:`SinkDataError`        a value that cannot be published                    task
:class:`AmqpSinkError`        a write task's messages not all confirmed           task
:class:`QueueMissing`         a source queue does not exist                       driver
:class:`QueueUnavailable`     a classic queue's home node is down (retried)       driver
:class:`ConsumerCancelled`    the broker cancelled the source's consumer          driver
:class:`MessageTooLarge`      a queue message above ``maxMessageBytes``           driver
:class:`PartitionFetchError`  a partition's frames cannot be fetched              task
:class:`UndecodableMessages`  a partition's frames cannot be decoded              task
:class:`StreamMissing`        a stream does not exist                             driver
:class:`NotAStream`           the queue named is not a stream                     driver
:class:`DataLoss`             retention removed offsets still needed              task
:class:`ReadTimeout`          no delivery within ``readTimeout``                  task
``BrokerUnreachable``         no broker address within ``failoverTimeout``        both
============================  ==================================================  ==========
"""

from __future__ import annotations

from ..client.failover import BrokerUnreachable

__all__ = ["AmqpSparkError", "SinkOptionError", "SinkSchemaError", "SinkDataError",
           "AmqpSinkError", "QueueMissing", "QueueUnavailable", "ConsumerCancelled",
           "MessageTooLarge", "PartitionFetchError", "UndecodableMessages", "StreamMissing",
           "NotAStream", "DataLoss", "ReadTimeout", "BrokerUnreachable",
           "StreamBrokerUnreachable", "lead_with_message", "leads_with_message",
           "leading_errors"]

#: the stream mode's name for :class:`~spark_amqp.client.failover.BrokerUnreachable` (one
#: class since issue 43)
StreamBrokerUnreachable = BrokerUnreachable


class AmqpSparkError(Exception):
    """Base of the ``amqp`` data source's own errors (each also keeps its built-in base)."""


# -- the sink ---------------------------------------------------------------------------------

class SinkOptionError(AmqpSparkError, ValueError):
    """An unknown option or an invalid option value of the ``amqp`` sink.

    The message names the option (as the user spells it in the docs) and the allowed values.
    Raised on the driver at ``save()`` / ``start()``.
    """


class SinkSchemaError(AmqpSparkError, ValueError):
    """The DataFrame given to the ``amqp`` sink has a missing, wrongly typed or unknown column.

    Raised on the driver at ``save()``/``start()``; the message names the column, its type and
    the accepted types.
    """


class SinkDataError(AmqpSparkError, ValueError):
    """A value cannot be published (null body, out-of-range octet, short string > 255 bytes).

    Raised in the write task; the message names the column and the row index in the task.
    """


class AmqpSinkError(AmqpSparkError, RuntimeError):
    """A write task of the ``amqp`` sink could not get every message confirmed.

    The message says what happened (broker error with reply code and text, nack, confirm
    timeout, returned messages, lost connection) and how many messages were published,
    confirmed and affected. Spark fails the task and retries it (at-least-once).
    """


# -- the source's queue mode ------------------------------------------------------------------

class QueueMissing(AmqpSparkError, RuntimeError):
    """A source queue does not exist (passive queue.declare answered 404 NOT_FOUND)."""


class QueueUnavailable(AmqpSparkError, ConnectionError):
    """A source queue exists but its node is down: RabbitMQ answers a declare of a classic
    queue whose home node is stopped with 404 NOT_FOUND "home node ... is down or
    inaccessible" (rabbit_amqqueue:not_found_or_absent_dirty / rabbit_misc:absent; the
    client's classification takes it as a node that cannot serve now). An OSError, so the
    offset reader retries it (within ``failoverTimeout``) instead of failing the query for a
    missing queue."""


class ConsumerCancelled(AmqpSparkError, ConnectionError):
    """The broker cancelled a consumer (``basic.cancel`` from the server, RabbitMQ
    docs/consumer-cancel.md). An OSError so the offset reader handles it like a connection
    loss."""


class MessageTooLarge(AmqpSparkError, ValueError):
    """A queue holds a message whose body is above ``maxMessageBytes``: the query fails
    (retrying would take the same message again). Nothing was acked: the client closed the
    connection before the body arrived and the broker requeued every unacked delivery."""


class PartitionFetchError(AmqpSparkError, ConnectionError):
    """An executor could not fetch a partition's frames from the driver's source runner. The
    task fails (Spark may retry it: the frames are kept until the batch is committed);
    nothing in the batch is acked, the messages stay in the queue."""


class UndecodableMessages(AmqpSparkError, ValueError):
    """The frames of a partition could not be decoded (e.g. a malformed property table from
    the broker); the message says which queue offsets and why. The batch fails, so nothing in
    it is acked: the messages stay in the queue."""


# -- the source's stream mode -----------------------------------------------------------------

class StreamMissing(AmqpSparkError, RuntimeError):
    """A stream of the source does not exist (queue.declare passive: 404)."""


class NotAStream(AmqpSparkError, ValueError):
    """The named queue exists but is not a stream queue (a classic or quorum queue)."""


class DataLoss(AmqpSparkError, RuntimeError):
    """Retention removed offsets the query still needed (failOnDataLoss=true)."""


class ReadTimeout(AmqpSparkError, TimeoutError):
    """No delivery for ``readTimeout`` seconds while reading a planned range."""


# -- what the user sees first -----------------------------------------------------------------

def _user_facing(exc: BaseException) -> bool:
    """True for the errors that are the user's to act on (a bad option, a missing queue, a
    broker that refuses or cannot be reached), whose message says it all; False for bugs
    (``TypeError``, ``AttributeError``, ...), whose traceback is what helps."""
    from ..client.errors import ClientError
    from ..protocol.errors import AMQPError

    return isinstance(exc, (AmqpSparkError, ValueError, AMQPError, OSError, ClientError))


def _in_pyspark_worker() -> bool:
    """True in a Python process PySpark started (its ``__main__`` is ``pyspark.daemon`` or a
    ``pyspark.sql.worker``/``pyspark.sql.streaming`` runner), False in the user's own."""
    import sys

    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (getattr(spec, "name", None) or "").startswith("pyspark.")


def lead_with_message(err: BaseException) -> BaseException:
    """Make what PySpark shows for ``err`` *start* with its message; returns ``err``.

    A Python data source's exception reaches the user as the text PySpark's worker sends the
    JVM, wrapped: ``[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance:
    <text>`` (``[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data
    source perform <callback>: <text>`` for the streaming callbacks). The worker makes
    ``<text>`` in ``pyspark.util.handle_worker_exception``: the whole formatted traceback,
    which starts with ``Traceback (most recent call last):`` and ends with the message (1.5 to
    3.5 KB later; with ``SPARK_SIMPLIFIED_TRACEBACK``, on by default, it also drops the chain),
    or only ``module.Class: message`` when ``SPARK_HIDE_TRACEBACK`` is set in the worker's
    environment, read when the exception is handled. So for a user-facing error
    (:func:`_user_facing`) raised in a PySpark worker process, this sets
    ``SPARK_HIDE_TRACEBACK=1`` in that process: the first line becomes ``[...] Failed to ...:
    spark_amqp.spark.errors.QueueMissing: Queue 'x' does not exist ... declare=true``. Both
    runners exit right after reporting the error (``sys.exit(-1)``), so no later error of
    that process is affected. Bugs keep their traceback; the user's own process (a direct
    call, the tests) is never changed."""
    import os

    if _user_facing(err) and _in_pyspark_worker():
        os.environ["SPARK_HIDE_TRACEBACK"] = "1"
    return err


def leads_with_message(fn):
    """Decorator of the methods Spark calls (the data source's, the readers' and writers'):
    an ``Exception`` raised through ``fn`` (or, for a generator function such as ``read``,
    while iterating it) is re-raised after :func:`lead_with_message`."""
    import functools
    import inspect

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generate(*args, **kwargs):
            try:
                return (yield from fn(*args, **kwargs))
            except Exception as exc:
                raise lead_with_message(exc)
        return generate

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise lead_with_message(exc)
    return call


def leading_errors(*names: str):
    """Class decorator: wraps the methods ``names`` of the class (those it defines) with
    :func:`leads_with_message`."""
    def wrap(cls):
        for name in names:
            if name in cls.__dict__:
                setattr(cls, name, leads_with_message(cls.__dict__[name]))
        return cls
    return wrap
