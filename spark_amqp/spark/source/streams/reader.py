"""Stream mode of the ``amqp`` source: the driver plans offset ranges, executors read them.

For RabbitMQ stream queues (``x-queue-type=stream``; option ``stream`` or ``superStream``,
:mod:`..stream_options`). Unlike the queue mode (:mod:`..queues.reader`), no message passes
through the driver and nothing depends on acks:

* the driver (Spark's long-lived source runner) learns each stream's tail with a probe
  (:mod:`.probe`: one chunk per probe, not the data) and plans batches
  ``{"streams": {stream: next offset}}`` (:mod:`.offsets`), honouring
  ``maxMessagesPerTrigger`` (fair split), Trigger.AvailableNow (tails snapshotted when the
  run starts) and ``reportLatestOffset`` (the tails, so the progress shows the lag);
* ``partitions(start, end)`` cuts the ranges into :class:`StreamRangePartition`s
  (``maxMessagesPerPartition``, ``minPartitions``);
* ``read`` runs on the executors: each partition connects and consumes its own range
  (:func:`.consumer.read_range`).

Guarantee: replaying a batch reads the same rows (an offset range of an append-only log), so
with a checkpoint and an idempotent sink (the file sink, or ``foreachBatch`` keyed by batch id)
the output is exactly-once; retention that removes needed offsets is data loss
(``failOnDataLoss``). Batch reads (``spark.read``) use :class:`AmqpStreamBatchReader`.

Where things run (lessons §1.3): ``__init__`` does no I/O; the probe connection is opened
lazily on the driver and never pickled.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Iterator

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from spark_amqp.client.failover import (Backoff, BrokerUnreachable, Failure, FailoverWindow,
                                        classify)

from ..compat import ReadAllAvailable, ReadMaxRows, ReadMinRows, SupportsTriggerAvailableNow
from ..pacing import TriggerPacer
from .offsets import StreamOffset, plan_ends, split_ranges
from ..stream_options import EARLIEST, LATEST, StreamOptions, check_spec_streams


__all__ = ["AmqpStreamOffsetReader", "AmqpStreamBatchReader", "StreamRangePartition"]

log = logging.getLogger(__name__)

#: seconds a probe waits for the first delivery before taking a stream as empty: short on a
#: trigger (a miss only delays), longer where the answer is kept (start, AvailableNow, batch)
TRIGGER_WAIT, EXACT_WAIT = 0.5, 3.0
#: after a probe that found nothing new, the next probe of a trigger waits this long (Spark
#: polls an idle query every 10 ms); a failed probe too (a fixed back-off: the failure
#: model's table, docs/architecture.md)
IDLE_PROBE_INTERVAL = 0.25
#: seconds the driver's probe goes on failing (every trigger retrying every address) before
#: the query fails; the option failoverTimeout overrides (the queue mode's default too)
DEFAULT_PROBE_FAILOVER_TIMEOUT = 300.0


@dataclass
class StreamRangePartition(InputPartition):
    """Offsets ``[start, end)`` of ``stream``, read by the executor that gets it."""

    stream: str
    start: int
    end: int

    def __post_init__(self) -> None:  # InputPartition.__init__(value) is bypassed
        self.value = None


class _Planner:
    """Driver-side state shared by the streaming and the batch reader: the probe, the list of
    streams, and how start/end specs resolve to offsets."""

    def __init__(self, options: StreamOptions, probe_factory=None):
        self.options = options
        self._probe_factory = probe_factory
        self._probe: Any = None
        self._streams: tuple[str, ...] | None = None

    def probe(self):
        if self._probe is None:
            if self._probe_factory is not None:
                self._probe = self._probe_factory(self.options)
            else:
                from .probe import StreamProbe

                self._probe = StreamProbe(self.options.uri, self.options.client_kwargs())
        return self._probe

    @property
    def current_probe(self):
        """The probe if one was made (None before the first use or after :meth:`close`)."""
        return self._probe

    def streams(self) -> tuple[str, ...]:
        if self._streams is None:
            o = self.options
            if o.super_stream is not None:
                from .probe import super_stream_partitions

                self._streams = tuple(super_stream_partitions(self.probe(), o.super_stream))
                for key, spec in (("startingOffsets", o.starting), ("endingOffsets", o.ending)):
                    if isinstance(spec, dict):
                        check_spec_streams(key, spec, self._streams)
                for key, spec in (("startingOffsetsByTimestamp", o.starting_by_timestamp),
                                  ("endingOffsetsByTimestamp", o.ending_by_timestamp)):
                    if spec is not None:
                        check_spec_streams(key, spec, self._streams, hint="")
            else:
                for s in o.streams:
                    self.probe().check_exists(s)
                self._streams = o.streams
        return self._streams

    def tail(self, stream: str, exact: bool) -> int | None:
        return self.tails((stream,), exact)[stream]

    def tails(self, streams, exact: bool) -> dict[str, int | None]:
        """The tails of ``streams``, probed at once (see :meth:`.probe.StreamProbe.tails`)."""
        return self.probe().tails(streams, EXACT_WAIT if exact else TRIGGER_WAIT)

    def resolve(self, spec: Any, default: str, what: str) -> dict[str, int]:
        """Offsets per stream for a ``startingOffsets``/``endingOffsets`` spec (None = the
        mode's ``default``), with ``startingTimestamp`` when ``what`` is "start"."""
        o = self.options
        out: dict[str, int] = {}
        earliest, latest = [], []
        for s in self.streams():
            ms = self._time_of(s, what) if spec is None else None
            if ms is not None:
                off = self.probe().at_timestamp(s, ms, EXACT_WAIT)
                if off is None and what == "start" and self._strict_start():
                    key = ("startingOffsetsByTimestamp" if o.starting_by_timestamp is not None
                           else "startingTimestamp")
                    raise ValueError(
                        f"Stream {s!r} has no chunk at or after {ms} ms (option '{key}'): its "
                        "last message is older, or it is empty. Give an earlier time, or set "
                        "startingOffsetsByTimestampStrategy=latest to start at the tail.")
                out[s] = off if off is not None else (self.tail(s, True) or 0)
                continue
            v = spec if spec is not None else default
            if isinstance(v, dict):
                v = v[s]
            if v in ("earliest", EARLIEST):
                earliest.append(s)
            elif v in ("latest", LATEST):
                latest.append(s)
            else:
                out[s] = int(v)
        if earliest:   # the streams of one kind probed at once (a super stream's partitions)
            out.update((s, f or 0) for s, f in self.probe().firsts(earliest, EXACT_WAIT).items())
        if latest:
            out.update((s, t or 0) for s, t in self.tails(latest, True).items())
        return {s: out[s] for s in self.streams()}

    def _time_of(self, stream: str, what: str) -> int | None:
        """The time (ms) a start or end is given by for ``stream``, or None."""
        o = self.options
        if what == "start":
            by, one = o.starting_by_timestamp, o.starting_timestamp_ms
        else:
            by, one = o.ending_by_timestamp, o.ending_timestamp_ms
        return by[stream] if by is not None else one

    def _strict_start(self) -> bool:
        """Kafka's ``startingOffsetsByTimestampStrategy``: ``error`` (the default with
        ``startingOffsetsByTimestamp``) fails when a stream has nothing at or after its
        time; ``latest`` starts at the tail (and ``startingTimestamp`` without the strategy
        does so, as before the strategy existed)."""
        o = self.options
        if o.starting_timestamp_strategy is not None:
            return o.starting_timestamp_strategy == "error"
        return o.starting_by_timestamp is not None

    def close(self) -> None:
        p, self._probe = self._probe, None
        if p is not None:
            p.close()


def _read(options: StreamOptions, partition: StreamRangePartition) -> Iterator:
    """The rows of one range partition. A partition that is not a range is read as empty:
    when ``partitions()`` returns none (a batch read of empty streams), PySpark still reads one
    ``InputPartition(None)`` (pyspark/sql/worker/plan_data_source_read.py)."""
    from .consumer import read_range

    if getattr(partition, "stream", None) is None:
        return iter(())
    return read_range(options, partition.stream, partition.start, partition.end)


class AmqpStreamOffsetReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("amqp").option("stream", ...)``: the stream mode's stream
    reader, planning offset ranges of stream queues (see the module doc; the queue mode's is
    :class:`..queues.reader.AmqpQueueStreamReader`).

    ``options``: validated :class:`StreamOptions` (``endingOffsets`` is refused: batch only).
    ``probe_factory``: builds the driver's probe from the options (tests pass a fake).
    ``clock``: monotonic seconds for the probe's pacing and failover window (tests pass a
    fake one; an unpickled reader gets ``time.monotonic``).
    """

    def __init__(self, options: StreamOptions, probe_factory=None,
                 clock=time.monotonic):
        ending = [k for k, v in (("endingOffsets", options.ending),
                                 ("endingTimestamp", options.ending_timestamp_ms),
                                 ("endingOffsetsByTimestamp", options.ending_by_timestamp))
                  if v is not None]
        if ending:
            raise ValueError(f"Option '{ending[0]}' of the amqp source is for batch reads "
                             "(spark.read) only; a streaming query runs until it is stopped "
                             "(use trigger(availableNow=True) to read what is there and stop).")
        self.options = options
        self._probe_factory = probe_factory
        self._clock = clock
        self._reset()

    def _reset(self) -> None:
        self._planner = _Planner(self.options, self._probe_factory)
        self._tails: dict[str, int] = {}
        self._targets: dict[str, int] | None = None
        self._next_probe = 0.0
        #: the wait after a failed probe, and how long probes may fail (failoverTimeout)
        self._retry = Backoff(IDLE_PROBE_INTERVAL, IDLE_PROBE_INTERVAL, self._clock)
        self._window = FailoverWindow(self.failover_timeout(), self._clock)
        self._stats = {"triggers": 0, "probes": 0, "planned": 0}
        o = self.options
        self._pacer = (TriggerPacer(o.min_messages_per_trigger, o.max_trigger_delay)
                       if o.min_messages_per_trigger else None)

    def __getstate__(self) -> dict:
        return {"options": self.options, "_probe_factory": self._probe_factory}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._clock = time.monotonic
        self._reset()

    # -- offsets -----------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """Where a new query starts: ``startingOffsets`` (default ``latest``) or
        ``startingTimestamp`` resolved on the broker."""
        start = self._planner.resolve(self.options.starting, "latest", "start")
        log.info("amqp stream source: new query starts at %s", start)
        return StreamOffset.make(start).to_dict()

    def getDefaultReadLimit(self):
        if self.options.max_messages_per_trigger is not None:
            return ReadMaxRows(self.options.max_messages_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Snapshot every stream's tail: this run plans nothing beyond it."""
        tails = self._planner.tails(self._planner.streams(), True)
        self._targets = {s: t if t is not None else 0 for s, t in tails.items()}
        self._tails.update(self._targets)
        log.info("amqp stream source: Trigger.AvailableNow reads up to %s", self._targets)

    def _probe_tails(self) -> None:
        now = self._clock()
        if self._targets is not None or now < self._next_probe:
            return
        changed = False
        streams = self._planner.streams()
        try:
            tails = self._planner.tails(streams, False)
        except Exception as e:  # noqa: BLE001 - a lost probe connection only delays
            if classify(e) is Failure.REFUSED:
                raise
            self._probe_failed(streams, e, now)
            return
        self._window.succeeded()
        self._stats["probes"] += len(tails)
        for s, t in tails.items():
            if t is not None and t > self._tails.get(s, -1):
                self._tails[s] = t
                changed = True
        self._next_probe = 0.0 if changed else now + IDLE_PROBE_INTERVAL

    def failover_timeout(self) -> float:
        """The ``failoverTimeout`` option (seconds), or :data:`DEFAULT_PROBE_FAILOVER_TIMEOUT`."""
        t = self.options.connection.get("failover_timeout")
        return DEFAULT_PROBE_FAILOVER_TIMEOUT if t is None else float(t)

    def _probe_failed(self, streams, e: BaseException, now: float) -> None:
        """A failed tail probe (lost connection, or no node could serve it): plan with the
        tails known so far and reconnect (every address, the nodes that could not serve last)
        at the next trigger after :data:`IDLE_PROBE_INTERVAL`; once the probes have failed for
        ``failoverTimeout`` seconds, raise :class:`~spark_amqp.client.failover.BrokerUnreachable`
        listing every address and its last error (as the queue mode)."""
        probe = self._planner.current_probe
        elapsed = self._window.failed(now)
        bound = self._window.bound
        if self._window.expired(now):
            errors = getattr(probe, "errors", None)
            if errors is not None:
                errors.record(e)
                where = f"{errors.redacted}: {errors.describe()}"
            else:
                from ...connection_options import redact_uri

                where = redact_uri(f"{type(e).__name__}: {e}")
            self._planner.close()
            raise BrokerUnreachable(
                f"amqp stream source: the tails of {list(streams)} could not be probed on any "
                f"broker address for {elapsed:.1f} s (failoverTimeout "
                f"{bound:g} s): {where}. Nothing is lost: restart the query when the broker is "
                "back, it resumes from its checkpoint; or raise failoverTimeout.") from e
        log.warning("amqp stream source: probing %s failed (%s); planning with the tails known "
                    "so far, reconnecting at the next probe (failing for %.1f s of "
                    "failoverTimeout %g s)", streams, e, elapsed, bound)
        if probe is not None:
            probe.close()  # the connection; the probe keeps its addresses' last errors
        self._retry.failed(now)
        self._next_probe = self._retry.next_attempt

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """The end of the next batch: each stream's tail (capped by the limit and by
        Trigger.AvailableNow's snapshot), or ``start`` when there is nothing new."""
        self._stats["triggers"] += 1
        st = StreamOffset.from_dict(start).as_map() if start is not None else None
        if st is None:
            st = StreamOffset.from_dict(self.initialOffset()).as_map()
        unknown = [s for s in self._planner.streams() if s not in st]
        if unknown:  # streams the checkpoint does not know: from their first offsets
            st.update((s, f or 0) for s, f in
                      self._planner.probe().firsts(unknown, EXACT_WAIT).items())
        max_rows = min_rows = None
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            max_rows = int(limit.max_rows)
        elif ReadMinRows is not None and isinstance(limit, ReadMinRows):
            min_rows = int(limit.min_rows)
            max_rows = self.options.max_messages_per_trigger
        elif limit is None and start is None:
            max_rows = self.options.max_messages_per_trigger
        self._probe_tails()
        end = plan_ends(st, self._tails, max_rows, self._targets)
        planned = sum(end[s] - st[s] for s in end)
        if self._targets is None and (self._pacer is not None or min_rows is not None):
            # pacing (never under Trigger.AvailableNow): the offsets ahead of start
            if self._pacer is None:
                self._pacer = TriggerPacer(min_rows, self.options.max_trigger_delay)
            ahead = sum(max(0, self._tails.get(s, 0) - st[s]) for s in st)
            full = max_rows is not None and planned >= max_rows
            if not self._pacer.ready(ahead, full, min_rows):
                return StreamOffset.make(st).to_dict()
        if planned and self._pacer is not None:
            self._pacer.planned()
        self._stats["planned"] += planned
        return StreamOffset.make(end).to_dict()

    def reportLatestOffset(self):
        """The tails last seen on the broker (Spark shows them as ``latestOffset`` in the
        query progress, next to the batch's end: the difference is the lag)."""
        if not self._tails:
            return None
        return StreamOffset.make(self._tails).to_dict()

    # -- planning and reading ----------------------------------------------------------------

    def partitions(self, start: dict, end: dict) -> list:
        """``[start, end)`` per stream, split by ``maxMessagesPerPartition`` and
        ``minPartitions``. A replayed batch (after a restart) gets the same partitions."""
        s = StreamOffset.from_dict(start).as_map()
        e = StreamOffset.from_dict(end).as_map()
        o = self.options
        ranges = split_ranges(s, e, o.max_messages_per_partition, o.min_partitions)
        return [StreamRangePartition(r.stream, r.start, r.end) for r in ranges]

    def read(self, partition: StreamRangePartition) -> Iterator:
        """Executor side: consume the partition's range (see :mod:`.consumer`)."""
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: a stream keeps no consumer position (the checkpoint does)."""

    def stop(self) -> None:
        probe = self._planner.current_probe
        bytes_in = probe.bytes_received if probe is not None else 0
        self._planner.close()
        log.info("amqp stream source stopped: %s, driver received %d bytes", self._stats,
                 bytes_in)


class AmqpStreamBatchReader(DataSourceReader):
    """``spark.read.format("amqp").option("stream", ...)``: the offsets between
    ``startingOffsets`` (default earliest; ``latest`` refused) or ``startingTimestamp`` and
    ``endingOffsets`` (default latest; ``earliest`` refused), read by the executors."""

    def __init__(self, options: StreamOptions, probe_factory=None):
        for key, spec, bad, word in (("startingOffsets", options.starting, LATEST, "latest"),
                                     ("endingOffsets", options.ending, EARLIEST, "earliest")):
            if spec == word or (isinstance(spec, dict) and bad in spec.values()):
                raise ValueError(
                    f"Option '{key}' of a batch read of the amqp source cannot be {word!r} "
                    f"(or {bad} in JSON), as in Spark's Kafka source: a batch read goes from "
                    "earlier offsets to later ones; use startingOffsets=earliest/JSON and "
                    "endingOffsets=latest/JSON.")
        self.options = options
        self._probe_factory = probe_factory

    def __getstate__(self) -> dict:
        return {"options": self.options, "_probe_factory": self._probe_factory}

    def partitions(self) -> list:
        """Resolve the range on the broker (driver) and split it."""
        planner = _Planner(self.options, self._probe_factory)
        try:
            start = planner.resolve(self.options.starting, "earliest", "start")
            end = planner.resolve(self.options.ending, "latest", "end")
            if isinstance(self.options.ending, dict):  # never past the tail: a reader of
                for s in end:                          # [a, b) needs an offset >= b - 1
                    end[s] = min(end[s], planner.tail(s, True) or 0)
        finally:
            planner.close()
        end = {s: max(e, start[s]) for s, e in end.items()}
        o = self.options
        ranges = split_ranges(start, end, o.max_messages_per_partition, o.min_partitions)
        log.info("amqp stream batch read: %s -> %s in %d partitions", start, end, len(ranges))
        return [StreamRangePartition(r.stream, r.start, r.end) for r in ranges]

    def read(self, partition: StreamRangePartition) -> Iterator:
        return _read(self.options, partition)
