"""The driver's view of stream queues over AMQP 0-9-1: first offset, tail, offset of a time.

AMQP 0-9-1 has no command that tells a stream's first or last offset (reference
rabbitmq-streams-over-0-9-1.md, "Consuming"); one learns them by consuming. A probe opens a
channel, sets ``basic.qos(1)`` (a stream consumer must have a prefetch), consumes in raw mode
(nothing is decoded but the one or two deliveries looked at) with ``x-stream-offset``:

* ``"last"``: the broker delivers the whole last chunk as it was when the consume arrived,
  then nothing more: a stream consumer's prefetch is credit, and RabbitMQ 3.10.8 delivers
  whole chunks while the credit is above 0 (``rabbit_stream_queue:stream_entries/4``; seen
  here: a prefetch of 1 gets all of a 147-message chunk); the embedded broker does the same
  (``broker/stream_queue.py``). The probe never acks, so however fast the stream is written
  it is not chased: what a probe sees is bounded by one chunk. To know that the chunk is all
  there without waiting for a silence, the probe sends ``basic.qos`` on the same channel once
  the first delivery is in: the broker sent the chunk's deliveries before handling it (one
  channel's frames are written in order), so when ``qos-ok`` is back every delivery of the
  chunk has been read. The offset of the last delivery + 1 is the tail: an offset the probe
  saw, never one it guessed; the tail of a live stream is found in two round trips, and what
  was written meanwhile is left to the next probe (an underestimate is safe).
* ``"first"``: the first delivery is the first retained offset.
* an AMQP timestamp (seconds): the first delivery is the first offset of the chunk with that
  time (or the first chunk; nothing when the time is after the log's end).

So the driver receives one chunk per probe, never the stream's data as such
(:attr:`StreamProbe.bytes_received` counts it). A stream with no message delivers nothing:
``wait`` seconds without a delivery mean "empty" (None). :meth:`StreamProbe.tails` probes
several streams (a super stream's partitions) at once, each on its own channel: a probe
round takes the longest probe's time, not their sum. The channel is closed after each probe
(``channel.close`` cancels the consumer and forgets its unacked deliveries; acks on a stream
only give credit back).

A queue that is not a stream is refused as :class:`NotAStream`: RabbitMQ 3.10.8 answers the
consume with 406 "invalid arg 'x-stream-offset' ... of queue type rabbit_classic_queue" (seen
here; nothing is delivered); a broker that ignores the argument delivers messages without
the ``x-stream-offset`` header, which the probe nacks back (``requeue=true``).
"""

from __future__ import annotations

import datetime as _dt
import logging
import time
from typing import Any

from spark_amqp.client.failover import (AddressErrors, Failure, address_of, classify,
                                        connect_avoiding)

from ..timeouts import RPC_TIMEOUT

__all__ = ["StreamProbe", "StreamMissing", "NotAStream", "stream_offset_of",
           "super_stream_partitions"]

log = logging.getLogger(__name__)


class StreamMissing(RuntimeError):
    """A stream of the source does not exist (queue.declare passive: 404)."""


class NotAStream(ValueError):
    """The named queue exists but is not a stream queue (a classic or quorum queue)."""


def stream_offset_of(item: Any, last: bool = False) -> int | None:
    """The ``x-stream-offset`` header of the first (or ``last``) message of a drained item (a
    ``RawDeliveries`` run or a decoded ``Delivery``); None when it has none."""
    from spark_amqp.protocol.raw_deliveries import RawDeliveries, decode_frames

    if item.__class__ is RawDeliveries:
        i = item.count - 1 if last else 0
        props = decode_frames(item.frames(i, i + 1), 1)[0].properties
    else:
        props = item.properties
    h = getattr(props, "headers", None) or {}
    v = h.get("x-stream-offset")
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def _not_a_stream(name: str, why: str) -> str:
    return (f"Queue {name!r} is not a stream queue ({why}): stream mode (options 'stream', "
            "'superStream') reads queues declared with x-queue-type=stream; read classic or "
            "quorum queues with the option 'queue'/'queues' instead.")


def _last_tag(item: Any) -> int:
    return item.last_tag if hasattr(item, "last_tag") else item.delivery_tag


class StreamProbe:
    """One driver connection that probes streams (see module doc). Not thread-safe.

    ``uri``/``client_kwargs``: as the source options. Methods raise
    ``spark_amqp.client.ConnectionLost``/``AMQPError`` on connection trouble,
    :class:`StreamMissing` and :class:`NotAStream` as documented.
    """

    def __init__(self, uri: str, client_kwargs: dict | None = None, connect_fn=None):
        self.uri = uri
        # one round over the addresses per connect: the reader bounds the retries
        # (failoverTimeout) across triggers instead of blocking one trigger that long
        self.client_kwargs = {**(client_kwargs or {}), "failover_timeout": 0}
        self._connect_fn = connect_fn
        self.conn: Any = None
        self._bytes_before = 0  # bytes of earlier (closed) connections
        #: nodes that answered "no running replica of the stream": tried last
        self.avoid: set = set()
        #: the last error of every address (for the error a query fails with)
        self.errors = AddressErrors(uri, self.client_kwargs)

    def _connection(self):
        if self.conn is None or not self.conn.is_open:
            if self.conn is not None:
                self._bytes_before += getattr(self.conn, "_bytes_in", 0)
                self.close()
            connect_fn = self._connect_fn
            if connect_fn is None:
                from spark_amqp.client import connect as connect_fn
            try:
                self.conn = connect_avoiding(connect_fn, self.uri,
                                             {**self.client_kwargs, "rpc_timeout": RPC_TIMEOUT},
                                             self.avoid)
            except Exception as e:
                self.errors.record(e)
                raise
        return self.conn

    @property
    def bytes_received(self) -> int:
        """Bytes received from the broker by this probe's connections (frames, all kinds)."""
        return self._bytes_before + (getattr(self.conn, "_bytes_in", 0) if self.conn else 0)

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception as e:  # noqa: BLE001 - best effort
                log.debug("closing the probe connection: %s", e)

    def check_exists(self, stream: str) -> None:
        """Passive ``queue.declare``; raises :class:`StreamMissing` on 404."""
        from spark_amqp.protocol.errors import NotFound

        ch = self._connection().channel()
        try:
            ch.queue_declare(stream, passive=True)
        except NotFound as e:
            raise StreamMissing(
                f"Stream {stream!r} does not exist ({e.reply_text}); declare it with "
                "x-queue-type=stream, or fix the option 'stream'/'superStream'.") from e
        try:
            ch.close()
        except Exception:  # noqa: BLE001
            pass

    def _open(self, stream: str, spec: Any):
        """A channel consuming ``stream`` from ``spec`` with prefetch 1, in raw mode."""
        from spark_amqp.protocol.errors import PreconditionFailed

        ch = self._connection().channel()
        try:
            ch.set_raw_deliveries()
            ch.basic_qos(1)
            try:
                ch.basic_consume(stream, arguments={"x-stream-offset": spec})
            except PreconditionFailed as e:
                if "x-stream-offset" in (e.reply_text or ""):
                    raise NotAStream(_not_a_stream(stream, e.reply_text)) from e
                raise
        except BaseException:
            _close_quietly(ch)
            raise
        return ch

    @staticmethod
    def _collect(ch, stream: str, deadline: float, whole_chunk: bool):
        """(first offset, last offset) of what ``ch`` delivers, or None when nothing came by
        ``deadline`` (``time.monotonic()``). ``whole_chunk``: fence with ``basic.qos`` after
        the first delivery and take everything delivered before its reply (see module doc);
        otherwise the first delivery only."""
        items = ch.drain(None, max(0.0, deadline - time.monotonic()))
        if not items:
            return None
        first = stream_offset_of(items[0])
        if first is None:  # not a stream: give the messages back before anything else
            try:
                ch.basic_nack(_last_tag(items[-1]), multiple=True, requeue=True)
            except Exception:  # noqa: BLE001
                pass
            raise NotAStream(_not_a_stream(stream, "its deliveries carry no "
                                                   "x-stream-offset header"))
        if whole_chunk:
            ch.basic_qos(1)            # the fence: the chunk's deliveries came before qos-ok
            items += ch.drain(None, 0)
        last = stream_offset_of(items[-1], last=True)
        if last is None:
            raise NotAStream(_not_a_stream(stream, "a delivery carries no "
                                                   "x-stream-offset header"))
        return first, last

    def _probe(self, streams, spec: Any, wait: float, whole_chunk: bool) -> dict:
        """``{stream: (first, last) or None}``: every stream consumed from ``spec`` on its own
        channel at once, each given ``wait`` seconds from the last consume for a first
        delivery. Channels are closed (consumers cancelled, nothing acked) before returning.

        A node answering that it cannot serve the stream now (its replica is not running, or
        it has none: :attr:`~spark_amqp.client.failover.Failure.UNAVAILABLE`) is tried last
        from then on, and the probe goes on at once on another node (each address once per
        call); any other error is recorded for its address and raised."""
        tries = max(1, len(self.errors.addresses))
        for attempt in range(tries):
            conn = None
            try:
                conn = self._connection()
                return self._probe_once(streams, spec, wait, whole_chunk)
            except Exception as e:
                if conn is None:
                    raise  # the connect failed: recorded by _connection
                where = address_of(conn)
                self.errors.record(e, conn)
                if classify(e) is not Failure.UNAVAILABLE or attempt == tries - 1:
                    raise
                log.info("probe: %s has no running replica of %s (%s); trying another node",
                         where, list(streams), e)
                if where is not None:
                    self.avoid.add(where)
                self.close()
        raise AssertionError("unreachable")  # pragma: no cover

    def _probe_once(self, streams, spec: Any, wait: float, whole_chunk: bool) -> dict:
        chans = []
        try:
            for s in streams:
                chans.append((s, self._open(s, spec)))
            deadline = time.monotonic() + wait
            return {s: self._collect(ch, s, deadline, whole_chunk) for s, ch in chans}
        finally:
            for _, ch in chans:
                _close_quietly(ch)

    def tails(self, streams, wait: float = 0.5) -> dict[str, int | None]:
        """``{stream: next offset after its last one (last offset + 1)}`` for each of
        ``streams`` (probed at once), None for a stream that delivered nothing within
        ``wait`` seconds (empty). Each is the end of the last chunk that existed when its
        consume arrived (an offset seen, never guessed); written later is found later. Takes
        about ``wait`` at most for empty streams, two round trips otherwise, whatever the
        publish rate."""
        r = self._probe(list(streams), "last", wait, True)
        return {s: None if v is None else v[1] + 1 for s, v in r.items()}

    def tail(self, stream: str, wait: float = 0.5) -> int | None:
        """The next offset after the stream's last one (see :meth:`tails`), or None when the
        stream delivered nothing within ``wait`` seconds (empty)."""
        return self.tails([stream], wait)[stream]

    def firsts(self, streams, wait: float = 0.5) -> dict[str, int | None]:
        """``{stream: first retained offset}`` for each of ``streams`` (probed at once), None
        for a stream that delivered nothing within ``wait`` seconds (empty)."""
        r = self._probe(list(streams), "first", wait, False)
        return {s: None if v is None else v[0] for s, v in r.items()}

    def first(self, stream: str, wait: float = 0.5) -> int | None:
        """The first retained offset, or None when the stream is empty."""
        return self.firsts([stream], wait)[stream]

    def at_timestamp(self, stream: str, ms: int, wait: float = 0.5) -> int | None:
        """The first offset of the chunk RabbitMQ picks for time ``ms`` (ms since the epoch,
        taken to whole seconds: an AMQP timestamp), or None when nothing is at or after it."""
        t = _dt.datetime.fromtimestamp(ms // 1000, tz=_dt.timezone.utc)
        r = self._probe([stream], t, wait, False)[stream]
        return None if r is None else r[0]


def _close_quietly(ch) -> None:
    try:
        ch.close()
    except Exception:  # noqa: BLE001 - closing a probe channel is best effort
        pass


def super_stream_partitions(probe: StreamProbe, name: str, limit: int = 10_000) -> list[str]:
    """The partitions ``NAME-0, NAME-1, ...`` of super stream ``name`` that exist (passive
    declares until the first 404). Raises :class:`StreamMissing` when ``NAME-0`` does not
    exist. (Partitions named by explicit binding keys, ``NAME-<key>``, cannot be listed over
    AMQP 0-9-1; give them with the option ``stream``.)"""
    out: list[str] = []
    for i in range(limit):
        try:
            probe.check_exists(f"{name}-{i}")
        except StreamMissing as e:
            if i == 0:
                raise StreamMissing(
                    f"Super stream {name!r} has no partition {name}-0 ({e}); create it "
                    "(rabbitmq-streams add_super_stream) or give its streams with the option "
                    "'stream'.") from e
            break
        out.append(f"{name}-{i}")
    return out

