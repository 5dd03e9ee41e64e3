"""Model test of the stream reader: a Spark-like driver loop over AmqpQueueMicroBatchStream with a raw-mode fake consumer (runs mixed with
single deliveries, several consumers sharing one channel's tags), random connection losses and
process crashes. Invariants: an acked message is in a committed batch; nothing is lost; a
message is read twice only as a redelivery."""
import pickle

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spark_amqp.spark.source.queues.options import parse_source_options
from spark_amqp.spark.source.queues.micro_batch_stream import AmqpQueueMicroBatchStream
from spark_amqp.spark.source.queues.offsets import SourceOffset
from source_fakes import FakeClock
from source_rawfake import RawBroker

QS = ["a", "b"]


class Sim:
    def __init__(self, seed, max_rows):
        self.broker = RawBroker(QS, seed)
        self.opts = {"queues": ",".join(QS), "prefetch": "0"}
        if max_rows:
            self.opts["maxMessagesPerTrigger"] = str(max_rows)
            self.opts["maxMessagesPerPartition"] = "3"
        self.limit = ReadMaxRows(max_rows) if max_rows else ReadAllAvailable()
        self.offset_log, self.commit_log = [], []
        self.committed = set()
        self.sink = []  # (queue, body, redelivered)
        self.clock = FakeClock()
        self.published = 0
        self.new_reader()

    def new_reader(self):
        o = parse_source_options(self.opts)
        self.r = AmqpQueueMicroBatchStream(o, consumer_factory=self.broker.factory, clock=self.clock)
        self.initial = self.r.initialOffset()

    def start_of(self, n):
        return self.offset_log[n - 1] if n > 0 else self.initial

    def run_batch(self, n):
        rows = []
        for p in self.r.partitions(self.start_of(n), self.offset_log[n]):
            p = pickle.loads(pickle.dumps(p))
            for b in self.r.read(p):
                rows += b.to_pylist()
        return rows

    def check(self):
        for q in QS:
            for body in self.broker.acked[q]:
                assert (q, body) in self.committed, f"acked before commit: {q} {body}"

    def trigger(self, crash_before_commit=False):
        self.clock.advance(30.0)  # past any reconnect back-off (at most 30 s)
        n = len(self.offset_log)
        start = self.start_of(n)
        end = self.r.latestOffset(start, self.limit)
        self.check()
        if end == start:
            return
        assert SourceOffset.from_dict(end).to_dict() == end  # canonical
        self.offset_log.append(end)
        if n > 0:
            self.r.commit(self.offset_log[n - 1])  # cleanUpLastExecutedMicroBatch
            self.check()
        rows = self.run_batch(n)
        if crash_before_commit:
            self.crash()
            return
        self.finish(n, rows)

    def finish(self, n, rows):
        self.sink += [(x["queue"], x["body"], x["redelivered"]) for x in rows]
        self.committed |= {(x["queue"], x["body"]) for x in rows}
        self.commit_log.append(self.offset_log[n])
        self.check()

    def crash(self):
        for c in self.broker.consumers:
            c.kill()
        self.new_reader()
        n = len(self.offset_log)
        if len(self.commit_log) == n - 1:  # re-run the uncommitted batch
            rows = self.run_batch(n - 1)
            self.finish(n - 1, rows)
        elif n:
            self.r.commit(self.offset_log[-1])
        self.check()

    def publish(self, q, k):
        for _ in range(k):
            self.broker.publish(q, b"m%d" % self.published)
            self.published += 1


op = st.one_of(
    st.tuples(st.just("pub"), st.sampled_from(QS), st.integers(1, 15)),
    st.tuples(st.just("trigger")),
    st.tuples(st.just("trigger")),
    st.tuples(st.just("trigger_crash")),
    st.tuples(st.just("kill")),
    st.tuples(st.just("ack_fail")),
    st.tuples(st.just("crash")),
)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 10**6), st.sampled_from([None, 4, 7]), st.lists(op, max_size=30))
def test_reader_ack_after_commit_and_no_loss(seed, max_rows, ops):
    s = Sim(seed, max_rows)
    for o in ops:
        if o[0] == "pub":
            s.publish(o[1], o[2])
        elif o[0] == "trigger":
            s.trigger()
        elif o[0] == "trigger_crash":
            s.trigger(crash_before_commit=True)
        elif o[0] == "ack_fail":  # the next basic.ack fails (channel closed under it)
            if s.broker.consumers:
                s.broker.consumers[-1].fail_next_ack = True
        elif o[0] == "kill":
            if s.broker.consumers:
                s.broker.consumers[-1].kill()
        else:
            s.crash()
    for _ in range(200):
        s.trigger()
        if all(not s.broker.ready[q] for q in QS) and all(
                not c.unacked.get(q) for c in s.broker.consumers for q in QS if c.is_open):
            break
    s.trigger()
    got = {b for _, b, _ in s.sink}
    assert got == {b"m%d" % i for i in range(s.published)}
    seen = set()
    for q, b, red in s.sink:
        if (q, b) in seen:
            assert red, f"{q} {b} read twice without redelivered"
        seen.add((q, b))
    assert sum(len(v) for v in s.broker.acked.values()) >= s.published
