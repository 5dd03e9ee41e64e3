"""Shared helpers of the broker conformance suite (pika ``BlockingConnection`` as the client).

Imported by the test modules of tests/broker/conformance/ (``from conformance_helpers import
...``) and by its conftest.py, which turns :class:`Amqp` into the ``amqp`` fixture.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import pika
import pika.exceptions
import pytest

#: Default deadline (seconds) when polling for an asynchronous effect (a delivery, an expiry).
DEADLINE = 5.0
#: How long (seconds) to wait before concluding that something that must NOT happen did not.
QUIET = 0.25


def connect(url: str, **kwargs: Any) -> pika.BlockingConnection:
    """Open a pika BlockingConnection to ``url`` (an AMQP URI); extra kwargs set URLParameters
    attributes (e.g. ``heartbeat=0``)."""
    params = pika.URLParameters(url)
    params.connection_attempts = 1
    params.socket_timeout = 5
    params.blocked_connection_timeout = 10
    for k, v in kwargs.items():
        setattr(params, k, v)
    return pika.BlockingConnection(params)


def safe_close(conn: pika.BlockingConnection) -> None:
    """Close ``conn`` ignoring errors (the broker may already have closed it)."""
    with contextlib.suppress(Exception):
        if conn.is_open:
            conn.close()


@contextlib.contextmanager
def broker_closes_channel(code: int) -> Iterator[pytest.ExceptionInfo]:
    """Assert that the block ends with the broker closing the channel with ``code``
    (pika raises ``ChannelClosedByBroker``)."""
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
        yield ei
    assert ei.value.reply_code == code, f"expected channel.close {code}, got {ei.value!r}"


@contextlib.contextmanager
def broker_closes_connection(code: int) -> Iterator[pytest.ExceptionInfo]:
    """Assert that the block ends with the broker closing the connection with ``code``
    (pika raises ``ConnectionClosedByBroker``)."""
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as ei:
        yield ei
    assert ei.value.reply_code == code, f"expected connection.close {code}, got {ei.value!r}"


@dataclass
class Msg:
    """One received message (deliver or get-ok)."""

    method: Any
    properties: pika.BasicProperties
    body: bytes

    @property
    def tag(self) -> int:
        return self.method.delivery_tag

    @property
    def redelivered(self) -> bool:
        return self.method.redelivered

    @property
    def headers(self) -> dict:
        return self.properties.headers or {}


@dataclass
class Collector:
    """``on_message_callback`` for ``BlockingChannel.basic_consume`` that buffers messages."""

    conn: pika.BlockingConnection
    messages: list[Msg] = field(default_factory=list)

    def __call__(self, _ch, method, properties, body) -> None:
        self.messages.append(Msg(method, properties, body))

    def wait(self, n: int, timeout: float = DEADLINE) -> list[Msg]:
        """Pump I/O until at least ``n`` messages arrived or ``timeout`` s passed; return all."""
        deadline = time.monotonic() + timeout
        while len(self.messages) < n and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.02)
        return self.messages

    def settle(self, quiet: float = QUIET) -> list[Msg]:
        """Pump I/O for ``quiet`` seconds (to show that nothing more arrives); return all."""
        deadline = time.monotonic() + quiet
        while time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.02)
        return self.messages

    @property
    def bodies(self) -> list[bytes]:
        return [m.body for m in self.messages]


def get(ch, queue: str, auto_ack: bool = False) -> Msg | None:
    """basic.get ``queue``; a :class:`Msg` (method is the GetOk) or None on get-empty."""
    method, props, body = ch.basic_get(queue, auto_ack=auto_ack)
    if method is None:
        return None
    return Msg(method, props, body)


def get_all(ch, queue: str, auto_ack: bool = True, limit: int = 1000) -> list[Msg]:
    """basic.get until get-empty; the messages in order."""
    out = []
    for _ in range(limit):
        m = get(ch, queue, auto_ack=auto_ack)
        if m is None:
            break
        out.append(m)
    return out


class Amqp:
    """Per-test helper bound to one broker URL; deletes what it declared at teardown."""

    def __init__(self, url: str, unique: Callable[[str], str]):
        self.url = url
        self.unique = unique
        self._conns: list[pika.BlockingConnection] = []
        self._queues: list[str] = []
        self._exchanges: list[str] = []

    # connections -------------------------------------------------------------------------
    def connect(self, url: str | None = None, **kwargs: Any) -> pika.BlockingConnection:
        """A new connection (closed at teardown)."""
        c = connect(url or self.url, **kwargs)
        self._conns.append(c)
        return c

    def channel(self) -> pika.adapters.blocking_connection.BlockingChannel:
        """A channel on a new connection."""
        return self.connect().channel()

    # resources ---------------------------------------------------------------------------
    def queue(self, ch, prefix: str = "q", name: str | None = None, **kwargs: Any) -> str:
        """Declare a queue with a unique name (or ``name``) on ``ch``; delete it at teardown."""
        name = name if name is not None else self.unique(prefix)
        self._queues.append(name)
        ok = ch.queue_declare(name, **kwargs)
        return ok.method.queue

    def exchange(self, ch, exchange_type: str = "direct", prefix: str = "x", **kwargs: Any) -> str:
        """Declare an exchange with a unique name on ``ch``; delete it at teardown."""
        name = self.unique(prefix)
        self._exchanges.append(name)
        ch.exchange_declare(name, exchange_type=exchange_type, **kwargs)
        return name

    def track_queue(self, name: str) -> str:
        self._queues.append(name)
        return name

    def track_exchange(self, name: str) -> str:
        self._exchanges.append(name)
        return name

    # inspection --------------------------------------------------------------------------
    def counts(self, queue: str) -> tuple[int, int] | None:
        """(message_count, consumer_count) from a passive queue.declare on a fresh connection,
        or None when the queue does not exist (404)."""
        c = connect(self.url)
        try:
            ch = c.channel()
            try:
                ok = ch.queue_declare(queue, passive=True)
            except pika.exceptions.ChannelClosedByBroker as e:
                assert e.reply_code == 404, e
                return None
            return ok.method.message_count, ok.method.consumer_count
        finally:
            safe_close(c)

    def exchange_exists(self, name: str) -> bool:
        c = connect(self.url)
        try:
            ch = c.channel()
            try:
                ch.exchange_declare(name, passive=True)
            except pika.exceptions.ChannelClosedByBroker as e:
                assert e.reply_code == 404, e
                return False
            return True
        finally:
            safe_close(c)

    def wait_for(self, predicate: Callable[[], Any], timeout: float = DEADLINE,
                 interval: float = 0.02, what: str = "condition") -> Any:
        """Poll ``predicate`` until truthy (returned) or fail after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
            time.sleep(interval)

    def wait_counts(self, queue: str, expected: tuple[int, int] | None,
                    timeout: float = DEADLINE) -> None:
        """Poll passive declares until (message_count, consumer_count) == ``expected``
        (None = the queue is gone)."""
        last: list = []

        def check():
            last[:] = [self.counts(queue)]
            return last[0] == expected

        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() >= deadline:
                pytest.fail(f"queue {queue!r}: expected counts {expected}, last {last[0]}")
            time.sleep(0.02)

    # teardown ----------------------------------------------------------------------------
    def cleanup(self) -> None:
        for c in self._conns:
            safe_close(c)
        if not (self._queues or self._exchanges):
            return
        try:
            c = connect(self.url)
        except Exception:  # broker gone: nothing to clean
            return
        try:
            ch = c.channel()
            for q in self._queues:
                try:
                    ch.queue_delete(q)
                except pika.exceptions.ChannelClosedByBroker:  # e.g. 405 exclusive elsewhere
                    ch = c.channel()
            for x in self._exchanges:
                try:
                    ch.exchange_delete(x)
                except pika.exceptions.ChannelClosedByBroker:
                    ch = c.channel()
        finally:
            safe_close(c)
