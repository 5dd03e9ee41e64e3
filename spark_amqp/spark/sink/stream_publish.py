"""One write task's publisher over RabbitMQ's stream protocol, with deduplication.

Selected by a ``rabbitmq-stream://`` (or ``rabbitmq-stream+tls://``) ``uri`` with the option
``stream`` (or ``superStream``). Runs on an executor inside the writers' ``write``
(:mod:`spark_amqp.spark.sink.writer`), with the stream-protocol client
(:mod:`spark_amqp.client.stream`): a producer on the stream's leader, publisher confirms, at
most ``maxInFlight`` messages unconfirmed.

**Messages.** A stream stores AMQP 1.0 messages. Each row becomes the message RabbitMQ itself
stores for the same row published over AMQP 0-9-1 through the default exchange with the target
stream's name as routing key (the 0-9-1 sink with the option ``stream``): the row's properties
as the 0-9-1 sink builds them (:func:`~spark_amqp.spark.sink.convert.batch_to_messages`), then
RabbitMQ's conversion (:mod:`spark_amqp.protocol.amqp10.convert`: ``rabbit_msg_record`` of
3.10 for brokers before 3.13, ``mc_amqpl`` of 4.x from 3.13 on). So a reader cannot tell
which protocol wrote a row, and the source reads both back the same.

**Deduplication** (option ``producerName``; RabbitMQ docs "Streams", "Deduplication"): the
broker keeps, per stream and producer name, the highest publishing id it stored, and drops
(confirming it all the same) a message whose id is not above it. Task ``p`` publishes as
``<producerName>-<p>`` (:func:`task_producer_name`), so concurrent tasks never share a name, and
each row's publishing id is

- the ``publishing_id`` column's value, when the input has one (a non-negative integer; the
  ids must grow strictly within a task, per target stream: a row whose id is not above the
  previous one fails the task, since the broker would drop it);
- else :func:`derived_publishing_id`: ``batchId * 2**32 + row + 1``, with ``row`` the row's
  position within the task's partition from 0 and ``batchId`` the micro-batch id (0 for a
  batch ``df.write``): the same rows get the same ids when Spark writes the same batch again
  (a retried task, a micro-batch replayed after a restart, a batch write run again), and the
  ids of one producer grow across batches.

On start the task asks the broker for its producer's sequence (``query_publisher_sequence``,
done when the producer is declared) and does not send the rows at or below it; the broker
drops any other repeat. The task returns only once every message it sent is confirmed, so
Spark commits a batch only when the stream holds all its rows. Without ``producerName``:
no name, the producer numbers the messages itself, and the write is at-least-once (a retried
task writes its rows again), as over 0-9-1.

A lost connection, a refused publish (``publish_error``) or a confirm timeout fail the task
with :class:`AmqpSinkError` (Spark retries it; with ``producerName`` the retry writes only
what is missing).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from ...protocol.amqp10.convert import ConversionError, prefix_v43, prefix_v310
from ...protocol.amqp10.types import RABBIT_4, RABBIT_310
from ..errors import AmqpSinkError, SinkDataError
from .publish import TaskStats

__all__ = ["StreamTaskPublisher", "StreamTaskStats", "Amqp10Rows", "derived_publishing_id",
           "derived_publishing_ids", "task_producer_name", "ROW_BITS", "MAX_ROWS_PER_TASK",
           "conversion_version"]

log = logging.getLogger(__name__)

#: bits of a derived publishing id taken by the row position (the batch id is above them)
ROW_BITS = 32
#: rows one task may write with derived ids (row + 1 must stay below 2**ROW_BITS)
MAX_ROWS_PER_TASK = (1 << ROW_BITS) - 1
#: largest batch id of a derived publishing id (the id is a uint64)
MAX_BATCH_ID = (1 << (64 - ROW_BITS)) - 1
#: messages per publish frame (a frame also stops at the connection's frame_max)
FRAME_MESSAGES = 500
#: entries of the conversion caches (cleared when full)
CACHE_MAX = 4096
_UINT64_MAX = (1 << 64) - 1


def derived_publishing_id(batch_id: int, row: int) -> int:
    """The publishing id of row ``row`` (0-based position in its task's partition) of batch
    ``batch_id`` (the micro-batch id; 0 for a batch write): ``batch_id * 2**32 + row + 1``.

    Never 0 (what ``query_publisher_sequence`` answers for a producer with nothing stored);
    strictly increasing in ``row`` within a batch and across batches for a given partition.
    Raises ValueError when ``batch_id`` is not in 0..2**32-1 or ``row`` not in
    0..2**32-2."""
    if not 0 <= batch_id <= MAX_BATCH_ID:
        raise ValueError(f"batch id {batch_id} is outside 0..{MAX_BATCH_ID}: derived "
                         "publishing ids cannot number it (give a publishing_id column)")
    if not 0 <= row < MAX_ROWS_PER_TASK:
        raise ValueError(f"row {row} of a task: derived publishing ids number at most "
                         f"{MAX_ROWS_PER_TASK} rows per task (use more partitions, or give a "
                         "publishing_id column)")
    return (batch_id << ROW_BITS) + row + 1


def derived_publishing_ids(batch_id: int, row_start: int, n: int) -> range:
    """The ids of rows ``row_start .. row_start + n - 1`` (:func:`derived_publishing_id`),
    as a range (consecutive). Raises ValueError as that function."""
    if n <= 0:
        return range(0)
    first = derived_publishing_id(batch_id, row_start)
    derived_publishing_id(batch_id, row_start + n - 1)
    return range(first, first + n)


def task_producer_name(producer_name: str, partition_id: int) -> str:
    """The producer name of the task that writes Spark partition ``partition_id``:
    ``"<producerName>-<partitionId>"`` (one name per partition: two tasks running at once
    never share it, a retry of the task takes it over)."""
    return f"{producer_name}-{int(partition_id)}"


def conversion_version(server_version: tuple) -> str:
    """Which RabbitMQ conversion of 0-9-1 messages to AMQP 1.0 a broker of
    ``server_version`` (e.g. ``(3, 10, 8)``; empty: unknown) applies: ``"3.10"``
    (``rabbit_msg_record``, before 3.13) or ``"4.3"`` (``mc_amqpl``, 3.13 and later, and
    unknown versions)."""
    v = tuple(server_version or ())
    return "3.10" if v and v < (3, 13) else "4.3"


class Amqp10Rows:
    """Rows (``publish_batch`` tuples of :func:`~.convert.batch_to_messages`) to the AMQP 1.0
    messages RabbitMQ of ``version`` (``"3.10"`` or ``"4.3"``) stores for them when they are
    published over 0-9-1 to a stream through the default exchange.

    The sections before the body depend only on the route and the properties: they are
    cached by (routing key, property bytes); rows whose properties are just a delivery mode
    and a message id (the sink's deterministic ids: a different id per row) share a template
    per id length into which the id is spliced (equal byte for byte to the full conversion:
    tests/spark/test_sink_stream_protocol_unit.py)."""

    def __init__(self, version: str):
        if version not in ("3.10", "4.3"):
            raise ValueError(f"conversion version {version!r}: 3.10 or 4.3")
        v310 = version == "3.10"
        self.version = version
        self._prefix = prefix_v310 if v310 else prefix_v43
        short = (RABBIT_310 if v310 else RABBIT_4).short_max
        self._heads = [bytes((0x00, 0x53, 0x75, 0xa0, n)) for n in range(short + 1)]
        self._short = short
        self._cache: dict = {}
        self._templates: dict = {}
        from ...protocol.properties import property_flag

        self._dm_mid = (property_flag("delivery_mode") | property_flag("message_id")).to_bytes(2, "big")

    def _head(self, n: int) -> bytes:
        if n <= self._short:
            return self._heads[n]
        return b"\x00\x53\x75\xb0" + n.to_bytes(4, "big")

    def _general(self, routing_key: str, raw: bytes) -> bytes:
        key = (routing_key, raw)
        prefix = self._cache.get(key)
        if prefix is None:
            prefix = self._prefix("", routing_key, raw)
            if prefix is None:      # 4.x: a body of type amqp-1.0 or a footer header
                return None         # type: ignore[return-value]
            if len(self._cache) >= CACHE_MAX:
                self._cache.clear()
            self._cache[key] = prefix
        return prefix

    def _template(self, routing_key: str, head: bytes, n: int):
        key = (routing_key, head, n)
        t = self._templates.get(key, 0)
        if t != 0:
            return t
        marker = b"\x01" * n
        prefix = self._prefix("", routing_key, head + bytes((n,)) + marker)
        t = None
        if prefix is not None:
            enc = b"\xa1" + bytes((n,)) + marker
            i = prefix.find(enc)
            if i >= 0 and prefix.find(enc, i + 1) < 0:
                t = (prefix[:i + 2], prefix[i + 2 + n:])
        if len(self._templates) >= CACHE_MAX:
            self._templates.clear()
        self._templates[key] = t
        return t

    def convert(self, rows, routing_key: str, row_start: int = 0) -> list:
        """The AMQP 1.0 messages (bytes) of ``rows`` written into stream ``routing_key``.
        Raises SinkDataError naming the row (``row_start`` + index) for a row RabbitMQ could
        not convert (a decimal header value)."""
        out = []
        append = out.append
        dm_mid = self._dm_mid
        head_of = self._head
        i = 0
        try:
            for i, (body, _ex, _rk, props, _m) in enumerate(rows):
                raw = props.encode()
                t = None
                if raw[:2] == dm_mid and len(raw) > 4 and not raw.startswith(b"urn:", 4):
                    t = self._template(routing_key, raw[:3], raw[3])
                if t is not None:
                    append(b"".join((t[0], raw[4:], t[1], head_of(len(body)), body)))
                    continue
                prefix = self._general(routing_key, raw)
                if prefix is None:
                    from ...protocol.amqp10.convert import from_amqp091_v43

                    append(from_amqp091_v43("", routing_key, raw, body))
                else:
                    append(b"".join((prefix, head_of(len(body)), body)))
        except ConversionError as exc:
            raise SinkDataError(f"row {row_start + i} of the task cannot be stored in a stream "
                                f"as AMQP 1.0 (RabbitMQ {self.version} cannot convert it "
                                f"either): {exc}") from None
        return out


@dataclass
class StreamTaskStats(TaskStats):
    """:class:`~.publish.TaskStats` of one task over the stream protocol, plus skipped (rows at
    or below their producer's stored sequence: written by an earlier attempt); confirmed counts
    a message the broker dropped as a duplicate too, returned stays 0 (no basic.return here)."""

    skipped: int = 0


class _Target:
    """One target stream of a task: its producer, the sequence stored for its name when it
    was declared, the last id sent."""

    __slots__ = ("stream", "producer", "stored", "last")

    def __init__(self, stream: str, producer, stored: int):
        self.stream = stream
        self.producer = producer
        self.stored = stored
        self.last = -1


class StreamTaskPublisher:
    """Publishes one task's rows into a stream (or a super stream's partitions) over the
    stream protocol. Not thread-safe; one per task; use as a context manager.

    Args:
        options: :class:`~spark_amqp.spark.sink.options.SinkOptions` with a stream uri.
        task: a label for messages (``"partition 3 of micro-batch 7 of query ..."``).
        producer_name: the task's producer name (:func:`task_producer_name`) or None (no
            deduplication).

    :meth:`publish` per converted Arrow batch, then :meth:`finish`. The connection is opened
    on the first publish (an empty partition never connects).
    """

    def __init__(self, options, task: str, producer_name: str | None = None):
        self.options = options
        self.task = task
        self.producer_name = producer_name
        self.stats = StreamTaskStats()
        self._client = None
        self._rows: Amqp10Rows | None = None
        self._targets: dict = {}
        self._partitions: list = []
        self._t0 = 0.0

    def __enter__(self) -> "StreamTaskPublisher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- connection -----------------------------------------------------------------------
    def open(self) -> None:
        """Connect (the locator) and, for a super stream, read its partitions. Idempotent.
        Raises AmqpSinkError naming the broker's answer or the socket error."""
        if self._client is not None:
            return
        from ...client.stream import connect

        o = self.options
        self._t0 = time.monotonic()
        try:
            client = connect(o.uri, **o.connect_args())
        except Exception as exc:  # noqa: BLE001 - re-raised with context
            raise self._error("could not connect over the stream protocol", exc) from exc
        self._client = client
        self._rows = Amqp10Rows(conversion_version(client.server_version))
        if o.super_stream is not None:
            try:
                self._partitions = client.partitions(o.super_stream)
            except Exception as exc:  # noqa: BLE001
                raise self._error(f"could not read the partitions of super stream "
                                  f"{o.super_stream!r}", exc) from exc
            if not self._partitions:
                raise AmqpSinkError(f"amqp sink {self.task}: super stream {o.super_stream!r} "
                                    "has no partitions (create it first)")

    def _target(self, stream: str) -> _Target:
        t = self._targets.get(stream)
        if t is not None:
            return t
        try:
            p = self._client.producer(stream, name=self.producer_name,
                                      batch_size=FRAME_MESSAGES,
                                      max_unconfirmed=self.options.max_in_flight)
        except Exception as exc:  # noqa: BLE001
            raise self._error(f"could not declare a producer on stream {stream!r}"
                              + (f" named {self.producer_name!r}" if self.producer_name else ""),
                              exc) from exc
        stored = p.next_publishing_id - 1 if self.producer_name else 0
        if stored > 0:
            log.info("amqp sink %s: stream %r holds publishing ids up to %d of producer %r; "
                     "rows at or below are not sent again", self.task, stream, stored,
                     self.producer_name)
        t = self._targets[stream] = _Target(stream, p, stored)
        return t

    def close(self) -> None:
        """Close the producers and the connections (idempotent; never raises)."""
        client, self._client = self._client, None
        self._targets = {}
        if client is not None:
            try:
                client.close()
            except Exception as exc:  # noqa: BLE001 - closing after a failure may fail too
                log.debug("amqp sink %s: error while closing: %s", self.task, exc)

    # -- publishing -----------------------------------------------------------------------
    def publish(self, messages: list, ids, row_start: int) -> None:
        """Send ``messages`` (``publish_batch`` tuples; with a super stream the routing key is
        the partition key) with publishing ``ids`` (a sequence of ints, one per message, or
        None without deduplication); ``row_start``: the task's row index of the first one.

        Raises:
            SinkDataError: an id that is negative, over 2**64-1, null, or not above the
                previous one of its target stream (names the row).
            AmqpSinkError: the connection or the producer failed.
        """
        if not messages:
            return
        if self._client is None:
            self.open()
        o = self.options
        if o.super_stream is None:
            groups = {o.stream: None}
        else:
            from .super_stream import partition_index

            parts, n = self._partitions, len(self._partitions)
            groups = {}
            for k, m in enumerate(messages):
                groups.setdefault(parts[partition_index(m[2] or "", n)], []).append(k)
        st = self.stats
        for stream, idx in groups.items():
            rows = messages if idx is None else [messages[k] for k in idx]
            gids = None
            if ids is not None:
                gids = ids if idx is None else [ids[k] for k in idx]
            self._send(stream, rows, gids, idx, row_start)
        st.body_bytes += sum(len(m[0]) for m in messages)

    def _send(self, stream: str, rows: list, ids, idx, row_start: int) -> None:
        t = self._target(stream)
        first_row = 0
        if ids is not None:
            last = t.last
            for k, pid in enumerate(ids):
                if pid is None or not 0 <= pid <= _UINT64_MAX or pid <= last:
                    r = row_start + (k if idx is None else idx[k])
                    what = ("null" if pid is None else f"{pid}, outside 0..2**64-1"
                            if not 0 <= pid <= _UINT64_MAX
                            else f"{pid}, not above the previous row's {last} for stream "
                                 f"{stream!r} (the broker would drop it as a duplicate)")
                    raise SinkDataError(f"amqp sink {self.task}: row {r} of the task has "
                                        f"publishing id {what}; publishing ids must grow "
                                        "strictly within a task")
                last = pid
            t.last = last
            if t.stored > 0:
                # rows an earlier attempt stored: not sent again (ids are increasing)
                import bisect

                first_row = bisect.bisect_right(ids, t.stored)
                if first_row:
                    self.stats.skipped += first_row
                    rows, ids = rows[first_row:], ids[first_row:]
                    if not rows:
                        return
        msgs = self._rows.convert(rows, stream, row_start)
        p = t.producer
        try:
            if ids is None:
                p.send_batch(msgs)
            elif ids[-1] - ids[0] == len(ids) - 1:
                # consecutive (derived ids, or a gap-free column): whole frames at once
                p.flush()
                p.next_publishing_id = ids[0]
                p.send_batch(msgs)
            else:
                p.send_batch(msgs, list(ids))
        except Exception as exc:  # noqa: BLE001
            raise self._error(f"publishing into stream {stream!r} failed", exc) from exc
        self.stats.published += len(msgs)

    def finish(self) -> StreamTaskStats:
        """Wait (``confirmTimeoutMs``) until every message sent is confirmed; return the
        stats. Raises AmqpSinkError: a refused message (the broker's code), a confirm
        timeout, a lost connection."""
        from ...client.errors import ConfirmTimeout

        deadline = time.monotonic() + self.options.confirm_timeout
        confirmed = 0
        for t in self._targets.values():
            try:
                r = t.producer.wait_for_confirms(max(0.001, deadline - time.monotonic()))
            except ConfirmTimeout as exc:
                raise AmqpSinkError(
                    f"amqp sink {self.task}: {exc.outstanding} of {self.stats.published} "
                    f"message(s) into stream {t.stream!r} still unconfirmed after "
                    f"confirmTimeoutMs={int(self.options.confirm_timeout * 1000)}; the task "
                    "fails so that Spark retries it") from exc
            except Exception as exc:  # noqa: BLE001
                raise self._error(f"waiting for the confirms of stream {t.stream!r} failed",
                                  exc) from exc
            if r.errors:
                pid, code = next(iter(r.errors.items()))
                raise AmqpSinkError(
                    f"amqp sink {self.task}: the broker refused {len(r.errors)} message(s) of "
                    f"stream {t.stream!r} (first: publishing id {pid}, code {code:#06x}); the "
                    "task fails so that Spark retries it")
            confirmed += r.confirmed
        self.stats.confirmed = confirmed
        self.stats.seconds = time.monotonic() - self._t0 if self._t0 else 0.0
        return self.stats

    def _error(self, what: str, exc: BaseException) -> AmqpSinkError:
        dedup = ("the retry writes only the rows the stream lacks (producerName)"
                 if self.producer_name else
                 "messages already confirmed stay published: at-least-once")
        return AmqpSinkError(
            f"amqp sink {self.task}: {what}: {type(exc).__name__}: {exc}; "
            f"{self.stats.published} message(s) sent in this task before that; the task fails "
            f"so that Spark retries it ({dedup})")
