"""Publish many messages under pipelined publisher confirms, with a tqdm progress bar.

Used by ``spark-amqp publish``, ``jobs/publish_flights.py`` and the main job's demo
(:func:`run_flights_publish`: the flights data set). Messages are written in
batches (``Channel.publish_batch``: one socket write for many messages) and confirmed in
windows of ``confirm_window`` messages: after each window ``wait_for_confirms`` blocks
until the broker has confirmed everything so far, so at most ``confirm_window`` messages
are unconfirmed at any time and the progress bar counts *confirmed* messages.

While the broker blocks the connection (``connection.blocked``: a memory or disk alarm) the
progress bar shows ``blocked: <reason>`` (e.g. ``blocked: low on disk``) until
``connection.unblocked``; publishing waits meanwhile, as RabbitMQ's clients do.

Publishes are ``mandatory``: a message no queue is bound for comes back as
``basic.return`` before its confirm (RabbitMQ, "Publisher Confirms": "For unroutable
messages, the broker will issue a confirm once the exchange verifies a message won't route
to any queue (returns an empty list of queues). If the message is also published as
mandatory, the basic.return is sent to the client before basic.ack"). Such messages are
counted as ``returned``, not as delivered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable

from .flights import FLIGHTS_EXCHANGE, OutgoingMessage, end_marker, flight_messages, load_flights


@dataclass
class PublishStats:
    """What a :func:`publish_messages` run did.

    ``confirmed``: messages the broker confirmed (``basic.ack``) - includes returned ones;
    ``returned``: of those, unroutable messages (``basic.return``, reply code 312);
    ``seconds``: wall time; ``rate``: confirmed messages per second.
    """

    confirmed: int = 0
    returned: int = 0
    seconds: float = 0.0
    returned_keys: list[str] = field(default_factory=list)

    @property
    def routed(self) -> int:
        """Messages confirmed and routed to at least one queue."""
        return self.confirmed - self.returned

    @property
    def rate(self) -> float:
        return self.confirmed / self.seconds if self.seconds > 0 else 0.0


def _properties(msg: OutgoingMessage, content_type: str | None, persistent: bool):
    from ..protocol import BasicProperties

    return BasicProperties(
        content_type=content_type, delivery_mode=2 if persistent else None,
        message_id=msg.message_id, timestamp=msg.timestamp, type=msg.type)


def publish_messages(channel, messages: Iterable[OutgoingMessage], exchange: str, *,
                     total: int | None = None, content_type: str | None = "application/json",
                     persistent: bool = False, batch_size: int = 500,
                     confirm_window: int = 5000, progress: bool = True,
                     description: str = "publish", rate: float | None = None) -> PublishStats:
    """Publish ``messages`` to ``exchange`` on ``channel`` under publisher confirms.

    ``channel``: an open :class:`spark_amqp.client.Channel`; ``confirm.select`` is sent here.
    ``total``: expected count, for the progress bar only. ``persistent`` sets
    ``delivery_mode=2``. ``rate``: at most this many messages per second, sent as they fall
    due (:mod:`.pacing`; a live feed), instead of as fast as the broker confirms. Returns
    :class:`PublishStats` once every message is confirmed.

    Raises :class:`spark_amqp.client` confirm errors (``PublishNacked`` when the broker
    nacks, ``ConfirmTimeout``) and the typed protocol error when the broker closes the
    channel (e.g. ``NotFound`` 404 for a missing exchange).
    """
    from tqdm import tqdm

    stats = PublishStats()
    channel.confirm_select()
    if hasattr(channel, "max_in_flight"):
        channel.max_in_flight = max(confirm_window * 2, batch_size)
    started = time.monotonic()
    bar = tqdm(total=total, unit="msg", unit_scale=True, desc=description, disable=not progress,
               dynamic_ncols=True, mininterval=0.5)
    pending: list = []
    unconfirmed = 0
    conn = getattr(channel, "connection", None)
    saved = (getattr(conn, "on_blocked", None), getattr(conn, "on_unblocked", None))
    if conn is not None:
        # run in the client's I/O thread; tqdm's refresh takes its own lock
        conn.on_blocked = lambda reason: bar.set_postfix_str(f"blocked: {reason}")
        conn.on_unblocked = lambda: bar.set_postfix_str("")
        if getattr(conn, "blocked", False):
            bar.set_postfix_str(f"blocked: {conn.blocked_reason}")

    def confirm():
        nonlocal unconfirmed
        result = channel.wait_for_confirms()
        returned = list(getattr(result, "returned", None) or [])
        stats.returned += len(returned)
        for r in returned[: 10 - len(stats.returned_keys)]:
            stats.returned_keys.append(getattr(r, "routing_key", "?"))
        stats.confirmed += unconfirmed
        bar.update(unconfirmed)
        unconfirmed = 0

    if rate is not None:  # confirm about once a second: the bar moves, the window stays small
        confirm_window = min(confirm_window, max(batch_size, int(rate)))

    def send(batch: list) -> None:
        nonlocal unconfirmed
        channel.publish_batch(batch)
        unconfirmed += len(batch)
        if unconfirmed >= confirm_window:
            confirm()

    try:
        if rate is not None:
            from itertools import islice

            from .pacing import paced_sends

            it = iter(messages)

            def send_due(n: int) -> int:
                batch = [(m.body, exchange, m.routing_key,
                          _properties(m, content_type, persistent), True)
                         for m in islice(it, n)]
                for i in range(0, len(batch), batch_size):
                    send(batch[i:i + batch_size])
                return len(batch)

            paced_sends(rate, None, send_due)
        else:
            for msg in messages:
                pending.append((msg.body, exchange, msg.routing_key,
                                _properties(msg, content_type, persistent), True))
                if len(pending) >= batch_size:
                    send(pending)
                    pending = []
            if pending:
                channel.publish_batch(pending)
                unconfirmed += len(pending)
        confirm()
    finally:
        if conn is not None:
            conn.on_blocked, conn.on_unblocked = saved
        bar.close()
    stats.seconds = time.monotonic() - started
    return stats


def run_flights_publish(channel, exchange: str = FLIGHTS_EXCHANGE, limit: int | None = None,
                        end_of_stream: bool = True, persistent: bool = False,
                        progress: bool = True, rate: float | None = None,
                        df=None) -> tuple[PublishStats, int]:
    """Publish the flights (first ``limit`` in event-time order) and the end marker.

    ``rate``: at most this many messages per second (a live feed; None: as fast as the
    broker confirms). ``df``: the flights already loaded (:func:`load_flights`), else they
    are loaded here. Returns ``(stats, flights)``: ``stats.confirmed`` counts the marker too.
    Shared by ``spark-amqp publish --flights``, ``jobs/publish_flights.py`` and the main job's
    ``--demo``.
    """
    import itertools

    df = load_flights(limit) if df is None else df
    messages: Iterable[OutgoingMessage] = flight_messages(df)
    if end_of_stream:
        messages = itertools.chain(messages, [end_marker(df)])
    stats = publish_messages(channel, messages, exchange, total=len(df) + int(end_of_stream),
                             persistent=persistent, progress=progress, description="flights",
                             rate=rate)
    return stats, len(df)
