"""Executor side of stream mode: read offsets ``[start, end)`` of one stream into Arrow batches.

Each input partition is read by the executor itself (no data passes through the driver):
connect, ``basic.qos(prefetch)`` (mandatory for stream consumers; it is the credit),
``basic.consume`` with ``x-stream-offset = start`` (an integer: RabbitMQ starts at the chunk
holding it and drops the entries below it; other brokers may not, so offsets below ``start``
are skipped here too), in raw mode; every drained run is decoded column-wise by the same path
as the queue mode (``deliver_columns``, :func:`..arrow.pack_columns`), the rows with offsets in
``[start, end)`` are kept, and the run is acked (``multiple``: acks only give credit back on a
stream). The read stops at the first delivery whose offset is ``>= end - 1`` (the planner only
plans ranges for which such an offset exists; see :mod:`.offsets`), cancels and closes.

Replaying the same range reads the same rows: a stream is an append-only log whose offsets
never change. Retention is the exception: when the first delivery is above ``start`` the
reader asks for the first retained offset; if ``start`` is below it, offsets were removed:
``failOnDataLoss`` raises :class:`DataLoss` (stream, wanted offset, first retained offset),
otherwise the loss is logged and counted (:data:`LOST`) and the rest is read. A first delivery
above ``start`` with ``start`` still retained is a gap (not a loss).

Stream filtering (option ``streamFilter``, RabbitMQ 3.13+; RabbitMQ docs "Stream Filtering"):
the consumer passes ``x-stream-filter`` (and ``x-stream-match-unfiltered``), so a broker with
filtering skips the chunks whose Bloom filter cannot match and the offsets delivered have
gaps; every row is then filtered exactly here (:func:`row_filter`), so the rows are the same
on a broker without filtering (RabbitMQ 3.10 sends everything). A skipped chunk is not
delivered at all, so the read could not see where its range ends if the chunk holding
``end - 1`` were skipped: before consuming, the reader *peeks* at offset ``end - 1`` without
a filter (one chunk, prefetch 1) and adds that message's filter value to the consumer's
filter (or match-unfiltered when it has none). That chunk then matches (a Bloom filter has no
false negatives), so a delivery at or past ``end - 1`` always comes and ends the read. The cost
is one chunk per range, plus the chunks holding the peeked value when it is not a wanted one.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Iterator

from spark_amqp.client.failover import (Backoff, BrokerUnreachable, Failure, FailoverWindow,
                                        address_of, classify, connect_avoiding)

from ...connection_options import redact_uri
from ..arrow import ARROW_BATCH_ROWS, pack_columns, to_record_batches
from ..stream_options import StreamOptions

__all__ = ["read_range", "row_filter", "DataLoss", "ReadTimeout", "LOST", "FILTER_VALUE_HEADER"]

#: the header a publisher sets for stream filtering (RabbitMQ 3.13+)
FILTER_VALUE_HEADER = "x-stream-filter-value"

log = logging.getLogger(__name__)

#: offsets this process skipped because retention had removed them (failOnDataLoss=false)
LOST = {"offsets": 0}


class DataLoss(RuntimeError):
    """Retention removed offsets the query still needed (failOnDataLoss=true)."""


class ReadTimeout(TimeoutError):
    """No delivery for ``readTimeout`` seconds while reading a planned range."""


def _columns(item: Any):
    """(bodies, redelivered, exchanges, routing_keys, properties) of a drained item."""
    from spark_amqp.protocol.raw_deliveries import RawDeliveries, deliver_columns_fast

    if item.__class__ is RawDeliveries:
        return deliver_columns_fast(item.data, item.count, False)
    p = item.properties
    return [item.body], [item.redelivered], [item.exchange], [item.routing_key], [p]


def _offsets(stream: str, props: list) -> list[int]:
    out = []
    for p in props:
        h = getattr(p, "headers", None) if p is not None else None
        v = h.get("x-stream-offset") if h else None
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"a delivery from {stream!r} has no x-stream-offset header: it is "
                             "not a stream queue (read classic/quorum queues with the option "
                             "'queue'/'queues')")
        out.append(v)
    return out


def _filter_value(props) -> str | None:
    """A message's ``x-stream-filter-value`` (a non-empty string), or None: absent, empty
    or not a string is *unfiltered*, as RabbitMQ takes it (``rabbit_stream_queue:
    stream_message/2`` only reads a string value; osiris treats ``<<>>`` as no value)."""
    h = getattr(props, "headers", None) if props is not None else None
    v = h.get(FILTER_VALUE_HEADER) if h else None
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode("utf-8", "replace")
    return v if isinstance(v, str) and v else None


def row_filter(options: StreamOptions):
    """The exact filter of option ``streamFilter``: a function of a message's properties,
    True for the rows to keep (filter value among ``streamFilter``, or none when
    ``streamMatchUnfiltered``); None without ``streamFilter``."""
    if not options.stream_filter:
        return None
    wanted = frozenset(options.stream_filter)
    unfiltered = options.stream_match_unfiltered

    def keep(props) -> bool:
        v = _filter_value(props)
        return unfiltered if v is None else v in wanted
    return keep


def _peek(conn, stream: str, offset: int, wait: float):
    """The properties of the first message at or after ``offset`` (no filter, prefetch 1),
    or None when nothing came within ``wait`` seconds."""
    ch = conn.channel()
    try:
        ch.basic_qos(1)
        ch.basic_consume(stream, arguments={"x-stream-offset": offset})
        deadline = time.monotonic() + wait
        while True:
            ds = ch.drain(None, max(0.0, deadline - time.monotonic()))
            if not ds:
                return None
            for d in ds:
                h = d.properties.headers or {}
                if h.get("x-stream-offset", -1) >= offset:
                    return d.properties
            ch.basic_ack(ds[-1].delivery_tag, multiple=True)   # a broker that starts lower
    finally:
        try:
            ch.close()
        except Exception:  # noqa: BLE001
            pass


def consume_arguments(conn, options: StreamOptions, stream: str, start: int, end: int) -> dict:
    """basic.consume arguments of a range read: ``x-stream-offset`` = ``start`` and, with
    ``streamFilter``, the broker-side filter widened by the value of the message at
    ``end - 1`` (see the module doc). Raises :class:`ReadTimeout` when the peek gets nothing."""
    args: dict = {"x-stream-offset": start}
    if not options.stream_filter:
        return args
    last = _peek(conn, stream, end - 1, options.read_timeout)
    if last is None:
        raise ReadTimeout(f"no delivery from stream {stream!r} at offset {end - 1} within "
                          f"{options.read_timeout:g}s (the last offset of the range to read); "
                          "option readTimeout sets the wait")
    values = list(options.stream_filter)
    unfiltered = options.stream_match_unfiltered
    v = _filter_value(last)
    if v is None:
        unfiltered = True
    elif v not in values:
        values.append(v)
    args["x-stream-filter"] = values
    if unfiltered:
        args["x-stream-match-unfiltered"] = True
    return args


def _first_retained(conn, stream: str, wait: float) -> int | None:
    ch = conn.channel()
    try:
        ch.basic_qos(1)
        ch.basic_consume(stream, arguments={"x-stream-offset": "first"})
        ds = ch.drain(1, wait)
        if not ds:
            return None
        h = ds[0].properties.headers or {}
        return h.get("x-stream-offset")
    finally:
        try:
            ch.close()
        except Exception:  # noqa: BLE001
            pass


#: seconds a range read goes on reconnecting after a lost connection (option failoverTimeout
#: overrides); each reconnect tries every broker address
DEFAULT_READ_FAILOVER_TIMEOUT = 60.0
#: seconds between a range read's reconnects, doubling up to READ_MAX_BACKOFF
READ_FIRST_BACKOFF = 0.2
READ_MAX_BACKOFF = 2.0


def read_range(options: StreamOptions, stream: str, start: int, end: int,
               connect_fn=None, clock=time.monotonic, sleep=time.sleep) -> Iterator:
    """Yield ``pyarrow.RecordBatch``es (:func:`spark_amqp.spark.schema.arrow_schema` of ``options.columns``)
    of the messages of ``stream`` with offsets in ``[start, end)`` (``end > start``), in
    offset order; the ``offset`` column holds each message's stream offset, ``queue`` the
    stream name.

    Failover inside the task, on the client's failure model
    (:mod:`spark_amqp.client.failover`): when the connection is lost (a node stopping, a
    stalled node found by heartbeats) or the node cannot serve the stream now, the read
    reconnects (``connect`` tries every broker address, the nodes that could not serve last,
    so it lands on another node: every replica of a stream has the same offsets, RabbitMQ
    docs "Streams") and goes on from the offset after the last one yielded, so each offset
    is yielded exactly once; with back-off (:data:`READ_FIRST_BACKOFF` doubling up to
    :data:`READ_MAX_BACKOFF`), for at most ``failoverTimeout`` seconds (default
    :data:`DEFAULT_READ_FAILOVER_TIMEOUT`), then
    :class:`~spark_amqp.client.failover.BrokerUnreachable` is raised (from the last error,
    which lists every address when there are several). ``clock``/``sleep``: monotonic
    seconds and the wait (tests pass fakes).

    Raises :class:`DataLoss` (see module doc), :class:`ReadTimeout` when no delivery comes for
    ``options.read_timeout`` seconds, ``ValueError`` for a queue that is not a stream, what is
    refused for good, and ``BrokerUnreachable`` once reconnects have failed for
    ``failoverTimeout`` seconds (Spark retries the task; the replay reads the same rows).
    """
    if end <= start:
        return
    progress = {"next": start}
    bound = options.client_kwargs().get("failover_timeout")
    window = FailoverWindow(DEFAULT_READ_FAILOVER_TIMEOUT if bound is None else float(bound),
                            clock)
    backoff = Backoff(READ_FIRST_BACKOFF, READ_MAX_BACKOFF, clock)
    avoid: set = set()  # nodes that could not serve the stream: tried last
    while True:
        try:
            yield from _read_range_once(options, stream, progress["next"], end, connect_fn,
                                        progress, avoid)
            return
        except Exception as e:
            if classify(e) is Failure.REFUSED or progress["next"] >= end:
                raise
            elapsed = window.failed()
            if window.expired():
                raise BrokerUnreachable(
                    f"amqp stream source: offsets [{progress['next']}, {end}) of stream "
                    f"{stream!r} could not be read on any broker address for "
                    f"{elapsed:.1f} s (failoverTimeout {window.bound:g} s); last error: "
                    f"{type(e).__name__}: {redact_uri(str(e))}. Nothing is lost: the batch is "
                    "read again when Spark retries the task or the query restarts from its "
                    "checkpoint.", getattr(e, "errors", None)) from e
            log.warning("stream %r: connection lost while reading offsets [%d, %d) (%s); "
                        "reconnecting through the next broker address", stream,
                        progress["next"], end, e)
            sleep(backoff.failed())


def _read_range_once(options: StreamOptions, stream: str, start: int, end: int,
                     connect_fn, progress: dict, avoid: set | None = None) -> Iterator:
    """One connection's part of :func:`read_range`; ``progress["next"]`` is moved past the
    offsets of every batch yielded. A node that answers that it cannot serve the stream now
    (:attr:`~spark_amqp.client.failover.Failure.UNAVAILABLE`: its replica is not running) is
    added to ``avoid`` (tried last by the next connect)."""
    if end <= start:
        return
    if connect_fn is None:
        from spark_amqp.client import connect as connect_fn
    avoid = set() if avoid is None else avoid
    conn = connect_avoiding(connect_fn, options.uri,
                            {**options.client_kwargs(), "failover_timeout": 0}, avoid)
    try:
        yield from _consume_range(conn, options, stream, start, end, progress)
    except Exception as e:
        where = address_of(conn)
        if where is not None:
            if classify(e) is Failure.UNAVAILABLE:
                avoid.add(where)
            else:
                avoid.discard(where)
        raise
    finally:
        try:
            conn.close()
        except Exception:  # noqa: BLE001
            pass


def _consume_range(conn, options: StreamOptions, stream: str, start: int, end: int,
                   progress: dict) -> Iterator:
    """Consume ``[start, end)`` of ``stream`` on the open ``conn`` (see :func:`read_range`)."""
    args = consume_arguments(conn, options, stream, start, end)
    keep = row_filter(options)
    ch = conn.channel()
    ch.set_raw_deliveries()
    ch.basic_qos(options.prefetch)
    tag = ch.basic_consume(stream, arguments=args)
    cols: list[list] = [[], [], [], [], []]
    offs: list[int] = []
    checked = False
    done = False
    while not done:
        items = ch.drain(None, options.read_timeout)
        if not items:
            raise ReadTimeout(
                f"no delivery from stream {stream!r} for {options.read_timeout:g}s while "
                f"reading offsets [{start}, {end}) (last kept offset: "
                f"{offs[-1] if offs else None}); the broker may be overloaded, or the "
                "stream was deleted; option readTimeout sets the wait")
        for it in items:
            b, r, e, k, p = _columns(it)
            o = _offsets(stream, p)
            if not checked:
                checked = True
                if o[0] > start:
                    _check_loss(conn, options, stream, start, end, o[0])
            last_offset = o[-1]
            lo = 0
            n = len(o)
            while lo < n and o[lo] < start:
                lo += 1
            hi = lo
            while hi < n and o[hi] < end:
                hi += 1
            if keep is not None and lo < hi:
                idx = [i for i in range(lo, hi) if keep(p[i])]
                if len(idx) < hi - lo:   # streamFilter: the rows to keep, exactly
                    b, r, e, k, p, o = ([c[i] for i in idx] for c in (b, r, e, k, p, o))
                    lo, hi = 0, len(idx)
                    n = hi
            if lo < hi:
                if lo == 0 and hi == n:
                    parts = (b, r, e, k, p)
                    offs.extend(o)
                else:
                    parts = (b[lo:hi], r[lo:hi], e[lo:hi], k[lo:hi], p[lo:hi])
                    offs.extend(o[lo:hi])
                for col, part in zip(cols, parts):
                    col.extend(part)
            if last_offset >= end - 1:
                done = True
                break
        if not done:
            last = items[-1]
            ch.basic_ack(last.last_tag if hasattr(last, "last_tag") else last.delivery_tag,
                         multiple=True)
        if len(offs) >= ARROW_BATCH_ROWS or (done and offs):
            packed = pack_columns(stream, offs[0], cols[0], cols[1], cols[2], cols[3],
                                  cols[4], options.include_headers)
            packed.offsets = offs
            yield from to_record_batches(packed, columns=options.columns)
            progress["next"] = offs[-1] + 1
            cols = [[], [], [], [], []]
            offs = []
    try:
        ch.basic_cancel(tag)
    except Exception:  # noqa: BLE001 - the close ends the consumer anyway
        pass


def _check_loss(conn, options: StreamOptions, stream: str, start: int, end: int,
                got: int) -> None:
    first = _first_retained(conn, stream, min(options.read_timeout, 10.0))
    if first is None or start >= first:
        return  # a gap in the offsets (filtered or non-AMQP entries), not a loss
    lost = min(first, end) - start
    msg = (f"Stream {stream!r}: offsets {start}..{min(first, end) - 1} the query still needed "
           f"were removed by retention (wanted offset {start}, first retained offset {first})")
    if options.fail_on_data_loss:
        raise DataLoss(msg + ". Set failOnDataLoss=false to skip them and go on, or keep the "
                       "stream longer (x-max-age / x-max-length-bytes).")
    LOST["offsets"] += lost
    log.warning("%s; skipped (failOnDataLoss=false), %d offsets lost in this process so far",
                msg, LOST["offsets"])
