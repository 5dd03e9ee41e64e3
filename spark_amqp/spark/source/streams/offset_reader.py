"""The stream mode's offset reader: the driver's view of the streams' offsets (the
:class:`..offset_reader.OffsetReader` of the stream mode; Kafka's ``KafkaOffsetReader``).

It owns the driver's probe (a :class:`.probe.TailProbe`, :class:`.probe.StreamProbe` unless
tests pass a fake: one chunk per probe, never the data), the list of streams (a super stream's
partitions are found once), how start/end specs resolve to offsets (``startingOffsets``,
``endingOffsets``, timestamps), the tails last seen, Trigger.AvailableNow's snapshot of them,
pacing, and what a failed probe does, on the client's failure model
(:mod:`spark_amqp.client.failover`): plan with the tails known so far, probe again through
every address at the next trigger after :data:`IDLE_PROBE_INTERVAL`, and raise
``BrokerUnreachable`` once the probes have failed for ``failoverTimeout`` seconds (default
:data:`DEFAULT_PROBE_FAILOVER_TIMEOUT`). Time comes from an injected ``clock`` (tests pass a
fake one); the probe's own waits for deliveries are real time.

Offsets are ``{"streams": {stream: next offset}}`` (:mod:`.offsets`); a batch is planned from
the tails with :func:`.offsets.plan_ends` (``maxMessagesPerTrigger`` split fairly).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from spark_amqp.client.failover import (Backoff, BrokerUnreachable, Failure, FailoverWindow,
                                        classify)

from ..pacing import TriggerPacer
from ..read_limits import Limits
from .offsets import StreamOffset, plan_ends
from .options import EARLIEST, LATEST, StreamOptions, check_spec_streams
from .probe import TailProbe

__all__ = ["StreamOffsetReader", "TRIGGER_WAIT", "EXACT_WAIT", "IDLE_PROBE_INTERVAL",
           "DEFAULT_PROBE_FAILOVER_TIMEOUT"]

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


class StreamOffsetReader:
    """The stream mode's driver side (see the module doc); an
    :class:`..offset_reader.OffsetReader`, also used by the batch reader (:meth:`resolve`).

    ``options``: validated :class:`.options.StreamOptions`. ``probe_factory``: builds the
    driver's probe from the options (tests pass a fake :class:`.probe.TailProbe`).
    ``clock``: monotonic seconds for the probe's pacing and failover window. Nothing connects
    here.

    Readable state: :attr:`tails` (the tails last seen), :attr:`targets`
    (Trigger.AvailableNow's snapshot, else None), :attr:`pacer`, :attr:`stats`.
    """

    def __init__(self, options: StreamOptions,
                 probe_factory: Callable[[StreamOptions], TailProbe] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.options = options
        self._probe_factory = probe_factory
        self._clock = clock
        self._probe: TailProbe | None = None
        self._streams: tuple[str, ...] | None = None
        self.tails: dict[str, int] = {}
        self.targets: dict[str, int] | None = None
        self._next_probe = 0.0
        #: the wait after a failed probe, and how long probes may fail (failoverTimeout)
        self._retry = Backoff(IDLE_PROBE_INTERVAL, IDLE_PROBE_INTERVAL, clock)
        self._window = FailoverWindow(self.failover_timeout(), clock)
        self.stats = {"triggers": 0, "probes": 0, "planned": 0}
        o = options
        self.pacer = (TriggerPacer(o.min_messages_per_trigger, o.max_trigger_delay, clock)
                      if o.min_messages_per_trigger else None)

    # -- the probe and the streams -------------------------------------------------------------

    def probe(self) -> TailProbe:
        """The driver's probe, made at first use."""
        if self._probe is None:
            if self._probe_factory is not None:
                self._probe = self._probe_factory(self.options)
            else:
                from .probe import StreamProbe

                self._probe = StreamProbe(self.options.uri, self.options.client_kwargs())
        return self._probe

    @property
    def current_probe(self) -> TailProbe | None:
        """The probe if one was made (None before the first use or after :meth:`close`)."""
        return self._probe

    def streams(self) -> tuple[str, ...]:
        """The streams read: the option ``stream``'s (each checked to exist), or the
        partitions of ``superStream`` (found once); the offset specs are checked against
        them."""
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
        """The tail of one stream (see :meth:`probe_tails`)."""
        return self.probe_tails((stream,), exact)[stream]

    def probe_tails(self, streams, exact: bool) -> dict[str, int | None]:
        """The tails of ``streams``, probed at once (see :meth:`.probe.StreamProbe.tails`);
        ``exact``: wait :data:`EXACT_WAIT` for an empty stream, else :data:`TRIGGER_WAIT`."""
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
            out.update((s, t or 0) for s, t in self.probe_tails(latest, True).items())
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

    # -- OffsetReader --------------------------------------------------------------------------

    def initial_offset(self) -> dict:
        """Where a new query starts: ``startingOffsets`` (default ``latest``) or
        ``startingTimestamp`` resolved on the broker."""
        start = self.resolve(self.options.starting, "latest", "start")
        log.info("amqp stream source: new query starts at %s", start)
        return StreamOffset.make(start).to_dict()

    def prepare_available_now(self) -> None:
        """Snapshot every stream's tail: this run plans nothing beyond it."""
        tails = self.probe_tails(self.streams(), True)
        self.targets = {s: t if t is not None else 0 for s, t in tails.items()}
        self.tails.update(self.targets)
        log.info("amqp stream source: Trigger.AvailableNow reads up to %s", self.targets)

    def latest_available(self) -> dict | None:
        """The tails last seen on the broker (Spark shows them as ``latestOffset`` in the
        query progress, next to the batch's end: the difference is the lag)."""
        if not self.tails:
            return None
        return StreamOffset.make(self.tails).to_dict()

    def next_end(self, start: dict | None, limits: Limits) -> dict:
        """The end of the next batch: each stream's tail (capped by ``limits.max_rows`` and by
        Trigger.AvailableNow's snapshot), or ``start`` when there is nothing new (or pacing
        waits)."""
        self.stats["triggers"] += 1
        st = StreamOffset.from_dict(start).as_map() if start is not None else None
        if st is None:
            st = StreamOffset.from_dict(self.initial_offset()).as_map()
        unknown = [s for s in self.streams() if s not in st]
        if unknown:  # streams the checkpoint does not know: from their first offsets
            st.update((s, f or 0) for s, f in self.probe().firsts(unknown, EXACT_WAIT).items())
        max_rows, min_rows = limits.max_rows, limits.min_rows
        self._probe_tails()
        end = plan_ends(st, self.tails, max_rows, self.targets)
        planned = sum(end[s] - st[s] for s in end)
        if self.targets is None and (self.pacer is not None or min_rows is not None):
            # pacing (never under Trigger.AvailableNow): the offsets ahead of start
            if self.pacer is None:
                self.pacer = TriggerPacer(min_rows, self.options.max_trigger_delay, self._clock)
            ahead = sum(max(0, self.tails.get(s, 0) - st[s]) for s in st)
            full = max_rows is not None and planned >= max_rows
            if not self.pacer.ready(ahead, full, min_rows):
                return StreamOffset.make(st).to_dict()
        if planned and self.pacer is not None:
            self.pacer.planned()
        self.stats["planned"] += planned
        return StreamOffset.make(end).to_dict()

    def _probe_tails(self) -> None:
        """Probe the tails (unless Trigger.AvailableNow's snapshot holds, or the last probe
        found nothing new less than :data:`IDLE_PROBE_INTERVAL` ago)."""
        now = self._clock()
        if self.targets is not None or now < self._next_probe:
            return
        changed = False
        streams = self.streams()
        try:
            tails = self.probe_tails(streams, False)
        except Exception as e:  # noqa: BLE001 - a lost probe connection only delays
            if classify(e) is Failure.REFUSED:
                raise
            self._probe_failed(streams, e, now)
            return
        self._window.succeeded()
        self.stats["probes"] += len(tails)
        for s, t in tails.items():
            if t is not None and t > self.tails.get(s, -1):
                self.tails[s] = t
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
        probe = self._probe
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
            self.close()
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

    def commit(self, end: dict) -> None:
        """Nothing to do: a stream keeps no consumer position (the checkpoint does)."""

    def close(self, fast: bool = False) -> None:
        """Close the probe's connection."""
        p, self._probe = self._probe, None
        if p is not None:
            p.close()
