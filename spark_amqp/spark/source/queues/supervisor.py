"""The queue mode's connection supervisor: opens the driver's consumer, backs off between
reconnects, bounds an outage (``failoverTimeout``) and Trigger.AvailableNow's wait for a
reconnect.

The rules (issue 27; :class:`ConnectionSupervisor`):

* The first connection's errors propagate: a wrong URI, password or queue fails the query at
  its first trigger.
* After a loss, reconnects back off exponentially: 0.5 s, doubling up to 30 s (5 s with
  several broker addresses: another node is likely up, and the first loss then reconnects at
  once); each attempt tries every address (the client's ``connect``, shuffled unless
  ``shuffleAddresses=false``). Failures are logged, not raised, so the query keeps running;
  except what is refused for good (``ACCESS_REFUSED``, a vhost, other reply codes, errors
  that are not the connection's), a missing queue with
  ``failOnDataLoss=true``, and :class:`.errors.BrokerUnreachable` once reconnects have failed
  for ``failoverTimeout`` seconds (default :data:`DEFAULT_FAILOVER_TIMEOUT`). What counts as
  refused for good is the client's one classification
  (:func:`spark_amqp.client.failover.classify`).

Time comes from an injected ``clock`` (monotonic seconds; tests pass a fake one) and
``sleep``. No I/O but the consumer's own.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from spark_amqp.client.failover import (Backoff, BrokerUnreachable, Failure, FailoverWindow,
                                        classify, several_addresses)

from ..options import SourceOptions
from .consumer import QueueConsumer, QueueMissing
from .errors import body_too_large, message_too_large

__all__ = ["ConnectionSupervisor", "DEFAULT_FAILOVER_TIMEOUT", "FIRST_BACKOFF", "MAX_BACKOFF",
           "MAX_FAILOVER_BACKOFF"]

log = logging.getLogger(__name__)

#: seconds before the first reconnect after a loss; doubled after each failed attempt
FIRST_BACKOFF = 0.5
#: the longest back-off with one broker address
MAX_BACKOFF = 30.0
#: the longest back-off when the connection has several addresses: another node is likely up
MAX_FAILOVER_BACKOFF = 5.0
#: seconds of failed reconnects after a loss before the query fails (option failoverTimeout)
DEFAULT_FAILOVER_TIMEOUT = 300.0


class ConnectionSupervisor:
    """Owns the driver's consumer (:attr:`consumer`, None while disconnected) and the
    reconnect timing (see the module doc), on the client's failure model
    (:mod:`spark_amqp.client.failover`): a :class:`~spark_amqp.client.failover.Backoff`
    (:data:`FIRST_BACKOFF` up to :data:`MAX_BACKOFF`, or :data:`MAX_FAILOVER_BACKOFF` with
    several addresses) and a :class:`~spark_amqp.client.failover.FailoverWindow`
    (``failoverTimeout``, default :data:`DEFAULT_FAILOVER_TIMEOUT`).

    ``make_consumer``: builds an unopened :class:`.consumer.QueueConsumer`. ``options``: the
    source's (queues, ``failOnDataLoss``, ``failoverTimeout``, addresses). ``clock``:
    monotonic seconds; ``sleep``: waits seconds (both for tests).

    State, readable: :attr:`ever_connected`, :attr:`next_attempt` (clock time of the next
    reconnect attempt), :attr:`backoff` (seconds the next failure waits),
    :attr:`failing_since` (clock time the current outage began, None when connected) and
    :attr:`reconnect_deadline` (Trigger.AvailableNow: when waiting for a reconnect ends).
    """

    def __init__(self, make_consumer: Callable[[], QueueConsumer], options: SourceOptions,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self._make_consumer = make_consumer
        self.options = options
        self._clock = clock
        self._sleep = sleep
        self.several_addresses = several_addresses(options.uri, options.connection)
        self.max_backoff = MAX_FAILOVER_BACKOFF if self.several_addresses else MAX_BACKOFF
        #: the wait between reconnect attempts
        self.retry = Backoff(FIRST_BACKOFF, self.max_backoff, clock)
        #: how long reconnects may fail after a loss (``failoverTimeout``)
        self.window = FailoverWindow(self.failover_timeout(), clock)
        self.consumer: QueueConsumer | None = None
        self.ever_connected = False
        self.reconnect_deadline: float | None = None

    @property
    def next_attempt(self) -> float:
        """Clock time of the next reconnect attempt."""
        return self.retry.next_attempt

    @next_attempt.setter
    def next_attempt(self, t: float) -> None:
        self.retry.next_attempt = t

    @property
    def backoff(self) -> float:
        """Seconds the next failed attempt waits."""
        return self.retry.delay

    @property
    def failing_since(self) -> float | None:
        """Clock time the current outage began (None while connected)."""
        return self.window.failing_since

    @property
    def is_open(self) -> bool:
        """A consumer is there and its connection is open."""
        return self.consumer is not None and self.consumer.is_open

    def failover_timeout(self) -> float:
        """The ``failoverTimeout`` option (seconds), or :data:`DEFAULT_FAILOVER_TIMEOUT`."""
        t = self.options.connection.get("failover_timeout")
        return DEFAULT_FAILOVER_TIMEOUT if t is None else float(t)

    def retry_due(self) -> bool:
        """The back-off has passed: a reconnect may be tried now."""
        return self.retry.due()

    def connect(self) -> QueueConsumer | None:
        """Open a new consumer, unless a reconnect's back-off has not passed yet. Returns the
        open consumer (now :attr:`consumer`), or None when the attempt must wait or failed
        (logged; the back-off doubles). Raises the first connection's errors, what is
        refused for good (:attr:`~spark_amqp.client.failover.Failure.REFUSED`: e.g.
        ``ACCESS_REFUSED``), :class:`.consumer.QueueMissing` with ``failOnDataLoss=true``,
        :class:`.errors.MessageTooLarge` and
        :class:`~spark_amqp.client.failover.BrokerUnreachable` (see the module doc)."""
        now = self._clock()
        if self.ever_connected and not self.retry.due(now):
            return None
        consumer = self._make_consumer()
        try:
            consumer.open()
        except QueueMissing:
            if not self.ever_connected or self.options.fail_on_data_loss:
                raise
            log.warning("amqp source: a queue is missing; retrying in %.1fs "
                        "(failOnDataLoss=false)", self.backoff)
            self.retry.failed(now)
            return None
        except Exception as e:
            big = body_too_large(e)
            if big is not None:
                raise message_too_large(big, consumer, self.options.queues) from e
            if not self.ever_connected or classify(e) is Failure.REFUSED:
                raise
            self._raise_if_out_of_time(e, now)
            log.warning("amqp source: reconnect failed (%s); retrying in %.1fs", e, self.backoff)
            self.retry.failed(now)
            return None
        self.consumer = consumer
        self.ever_connected = True
        self.retry.reset()
        self.window.succeeded()
        return consumer

    def lost(self) -> None:
        """The connection is gone (or given up): drop the consumer (``abort``: the broker
        requeues its unacked deliveries) and schedule the reconnect. The first loss with
        several addresses reconnects at once; otherwise after the back-off."""
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            consumer.abort()
        now = self._clock()
        first_loss = self.window.failing_since is None
        self.window.failed(now)
        if first_loss and self.several_addresses:
            # the first loss with several addresses: another node is likely up, reconnect now
            self.retry.retry_now(now)
            return
        self.retry.failed(now)

    def detach(self) -> QueueConsumer | None:
        """Take the consumer away (to close it on stop); the supervisor holds none."""
        consumer, self.consumer = self.consumer, None
        return consumer

    def _raise_if_out_of_time(self, e: BaseException, now: float) -> None:
        """Raise :class:`~spark_amqp.client.failover.BrokerUnreachable` (from ``e``, the last
        reconnect's error, which lists every address) when reconnects have failed for
        ``failoverTimeout`` seconds."""
        elapsed = self.window.failed(now)
        if self.window.expired(now):
            from spark_amqp.client.uri import redact_uri

            raise BrokerUnreachable(
                f"amqp source: no broker address could be reached for "
                f"{elapsed:.1f} s (failoverTimeout {self.window.bound:g} s) after the "
                f"connection was lost: {redact_uri(str(e))}. Nothing was acked since: restart "
                "the query when the broker is back, it resumes from its checkpoint (the "
                "unacked messages are redelivered); or raise failoverTimeout.",
                getattr(e, "errors", None)) from e

    def wait_for_retry(self, within: float) -> bool:
        """Trigger.AvailableNow after a loss (Spark ends the run at the first trigger that
        plans nothing): sleep until the back-off has passed and return True (try to connect
        again). The first call starts a deadline ``within`` seconds away; a wait is cut at
        the deadline, and the attempt then goes at once (at least one more attempt is made).
        Once the deadline has passed, return False (and forget it)."""
        now = self._clock()
        if self.reconnect_deadline is None:
            self.reconnect_deadline = now + within
        elif now >= self.reconnect_deadline:
            self.reconnect_deadline = None
            return False
        wait = self.retry.left(now)
        self._sleep(min(wait, max(0.0, self.reconnect_deadline - now)) if wait else 0.0)
        if not self.retry.due():   # the deadline came first: one last try
            self.retry.next_attempt = 0.0
        return True

    def progressed(self) -> None:
        """A batch was planned: a later loss gets its own reconnect time."""
        self.reconnect_deadline = None
