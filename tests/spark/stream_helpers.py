"""Helpers for the stream-mode source tests: declare stream queues (skipping on a broker that
refuses them), publish with pika, read ranges with pika (an independent reader)."""

from __future__ import annotations

import contextlib

import pika
import pytest

from source_helpers import pika_conn


@contextlib.contextmanager
def stream_reader_conn(url: str):
    """A pika connection for reading a stream: at close, pika cancels the consumer and nacks
    the deliveries it holds but has not handed to the callback yet, which RabbitMQ answers on
    a stream with 540 NOT_IMPLEMENTED "basic.nack and basic.reject not supported by stream
    queues", closing the connection (a stream delivers whole chunks past the prefetch, so
    some are always there; it failed test_read_range_matches_pika about one run in four on a
    busy machine). That answer at close is ignored: what was read is complete by then."""
    c = pika_conn(url)
    try:
        yield c
    finally:
        try:
            c.close()
        except pika.exceptions.ConnectionClosedByBroker as e:
            if e.reply_code != 540:
                raise
        except pika.exceptions.ConnectionWrongStateError:
            pass


def declare_stream(url: str, name: str, arguments=None) -> None:
    """Declare a stream queue; skip the test when the broker refuses x-queue-type=stream (the
    embedded broker before it has stream queues)."""
    args = {"x-queue-type": "stream", **(arguments or {})}
    try:
        with pika_conn(url) as c:
            c.channel().queue_declare(name, durable=True, arguments=args)
    except (pika.exceptions.ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker) as e:
        if "127.0.0.1:5672" in url:
            raise
        pytest.skip(f"this broker refuses x-queue-type=stream ({e}): the embedded broker has no "
                    "stream queues yet")


def pika_read(url: str, stream: str, start: int, end: int, timeout: float = 30.0) -> list:
    """Messages of ``stream`` with offsets in ``[start, end)`` read with pika:
    ``[(offset, body, properties)]``. (Not pika's ``consume()`` generator: its ``cancel()``
    nacks what is pending, which RabbitMQ answers on a stream with 540 NOT_IMPLEMENTED.)"""
    import time

    out = []
    done = []

    def on_message(ch, m, p, b):
        off = int(p.headers["x-stream-offset"])   # pika.compat.long on Python 3: make it int
        ch.basic_ack(m.delivery_tag)
        if done:
            return
        if start <= off < end:
            out.append((off, b, p))
        if off >= end - 1:
            done.append(True)

    with stream_reader_conn(url) as c:
        ch = c.channel()
        ch.basic_qos(prefetch_count=1000)
        ch.basic_consume(stream, on_message, arguments={"x-stream-offset": start})
        deadline = time.monotonic() + timeout
        while not done:
            if time.monotonic() > deadline:
                raise AssertionError(f"pika read of {stream} [{start},{end}) timed out at "
                                     f"{out[-1:]}")
            c.process_data_events(0.1)
    return out


def start_stream_runner(*args: str, log_path):
    """Start tests/spark/stream_query_runner.py in its own process group (as
    ``source_helpers.start_runner`` does for the queue mode's runner)."""
    import os
    import subprocess
    import sys

    from source_helpers import HERE, ROOT

    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    logf = open(log_path, "ab")
    return subprocess.Popen([sys.executable, str(HERE / "stream_query_runner.py"), *args],
                            stdout=logf, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True, cwd=str(ROOT))


def pika_read_all(url: str, stream: str, quiet: float = 2.0, timeout: float = 60.0) -> list:
    """Every message of ``stream`` read with pika from its first offset until nothing arrives
    for ``quiet`` seconds: ``[(offset, body)]`` (an independent view of a stream whose end
    is not known; use it once nothing writes to the stream any more)."""
    import time

    out = []

    def on_message(ch, m, p, b):
        out.append((int(p.headers["x-stream-offset"]), b))
        ch.basic_ack(m.delivery_tag)

    with stream_reader_conn(url) as c:
        ch = c.channel()
        ch.basic_qos(prefetch_count=1000)
        ch.basic_consume(stream, on_message, arguments={"x-stream-offset": "first"})
        deadline = time.monotonic() + timeout
        last_n, last_t = -1, time.monotonic()
        while time.monotonic() - last_t < quiet:
            if time.monotonic() > deadline:
                raise AssertionError(f"pika read of all of {stream} still receiving after "
                                     f"{timeout}s ({len(out)} messages)")
            c.process_data_events(0.1)
            if len(out) != last_n:
                last_n, last_t = len(out), time.monotonic()
    return out
