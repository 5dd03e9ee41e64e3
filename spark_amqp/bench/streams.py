"""Stream queues: publish with confirms, then read the whole stream, on both brokers.

``python -m spark_amqp.bench.streams [--messages 300000] [--size 200] [--consumers 1,2,4]
[--brokers embedded,rabbitmq] [--url amqp://...] [--rss-mb 0]``

Per broker (the embedded broker in its own process with a data directory, so its streams are
segment files as RabbitMQ's are; RabbitMQ at ``--url``):

1. publish ``--messages`` bodies of ``--size`` bytes into a new stream with the project's
   client (publisher confirms, batches of 20,000): msgs/s;
2. read the whole stream from ``first`` with 1, 2 and 4 concurrent consumers (each on its own
   connection and thread, each reading every message: prefetch 1,000, ``basic.ack multiple``
   every 100 messages), through pika's BlockingConnection, through the project's client
   (decoded deliveries) and through the project's client in raw mode (undecoded runs of
   frames, as the Spark source reads them): deliveries/s over all consumers (wall time from
   the first basic.consume);
3. the baseline: the same messages in a classic queue, read once by one consumer with the same
   prefetch/ack pattern (a classic queue is consumed destructively: refilled for each client);
4. the broker's peak RSS sampled every 50 ms during the reads (``/proc/<pid>/status`` VmRSS;
   RabbitMQ = its ``beam.smp``); and for every read, the CPU the readers (this process) and
   the broker used, in cores (CPU-seconds per wall second, Linux ``/proc``): a
   single-threaded reader near 1.0 core is at its own ceiling, whatever the broker could give.

5. stream filtering (``--filter-values 100``; 0 skips it): a stream of ``--messages`` bodies
   published in blocks of ``--filter-block`` messages (one publish batch, confirmed before the
   next: a chunk or a few), block ``i`` with the header ``x-stream-filter-value`` = ``v{i mod
   100}``; then (a) the whole stream read with the project's client without a filter and with
   ``x-stream-filter: v7`` (deliveries received: the chunks the broker sent), and (b) the
   source's executor path (``read_range`` over all offsets, no Spark) with and without
   ``streamFilter=v7``: rows and seconds. The embedded broker runs this part in its 4.3 mode
   (RabbitMQ 3.13+ filtering: it skips the chunks whose Bloom filter cannot match); RabbitMQ
   3.10.8 has no filtering and sends every chunk (the source filters the rows itself).

6. the stream protocol (port 5552; ``--stream-url``, RabbitMQ's by default; ``--stream-url ""``
   skips it): the same stream as the rows above, read from the first offset by one reader:
   the project's stream client (:mod:`spark_amqp.client.stream`) and rstream (an independent
   asyncio client, when installed), after one untimed read (the page cache warm for all),
   first without decoding (each message's bytes), then
   decoding bodies and properties (ours with the AMQP 1.0 codec,
   :func:`spark_amqp.protocol.amqp10.decode_message`; rstream with its own,
   ``rstream.amqp_decoder``); then ``--messages`` AMQP 1.0 messages of ``--size`` bytes
   published with confirms into a new stream by each client's producer (batches of 500).
   Rows ``stream protocol read, raw|decoded, <client>`` and ``stream protocol publish+confirm,
   <client>``, printed with the ratios ours / rstream.

``--rss-mb N`` (embedded only) adds the memory check of issue 12: an N MB stream (8 KB
bodies) read from ``first`` by one consumer; printed: the broker's RSS before and its peak
during the read (a stream is read from its segment files with ``pread``, not held in memory).

Printed: one table, rows = what was measured, columns = brokers, plus embedded/RabbitMQ and
stream/classic ratios. Linux only for the RSS figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import uuid

from .common import BrokerProcess, publish_confirmed
from .cpu import cpu_seconds
from .source import DEFAULT_URL

PREFETCH = 1000
ACK_EVERY = 100


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rabbitmq_pid() -> int | None:
    """The pid of RabbitMQ's ``beam.smp`` on this machine, or None."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if b"beam.smp" in f.read() :
                        return int(d)
            except OSError:
                continue
    return None


class RssPeak:
    """Max VmRSS (MB) of ``pid`` sampled every 50 ms while the block runs."""

    def __init__(self, pid: int | None):
        self.pid = pid
        self.peak_kb = 0
        self._stop = threading.Event()

    def __enter__(self) -> "RssPeak":
        if self.pid:
            self._t = threading.Thread(target=self._run, daemon=True)
            self._t.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, _rss_kb(self.pid))
            self._stop.wait(0.05)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self.pid:
            self._t.join()
            self.peak_kb = max(self.peak_kb, _rss_kb(self.pid))

    @property
    def mb(self) -> float:
        return self.peak_kb / 1024


class CpuShare:
    """CPU used during the block by this process (the readers' threads) and by the broker
    process ``pid``, as shares of one core over the block's wall time: which side of a read is
    saturated (a share near 1.0 of a single-threaded reader is its ceiling)."""

    def __init__(self, pid: int | None):
        self.pid = pid

    def __enter__(self) -> "CpuShare":
        self._t0, self._r0 = time.perf_counter(), time.process_time()
        self._b0 = cpu_seconds(self.pid)
        return self

    def __exit__(self, *exc) -> None:
        wall = max(time.perf_counter() - self._t0, 1e-9)
        self.reader = (time.process_time() - self._r0) / wall
        self.broker = (cpu_seconds(self.pid) - self._b0) / wall if self.pid else float("nan")


def publish(url: str, queue: str, n: int, body: bytes) -> float:
    """Publish ``n`` copies of ``body`` to ``queue`` with confirms; seconds taken."""
    return publish_confirmed(url, queue, n, body)


def read_ours(url: str, queue: str, n: int, args: dict | None, start: threading.Barrier,
              raw: bool = False) -> None:
    """Read ``n`` messages of ``queue`` with the project's client (prefetch/ack as above);
    ``raw``: in raw mode (``Channel.set_raw_deliveries``: runs of undecoded frames, as the
    Spark source's readers take them)."""
    from ..client import connect
    from ..protocol.raw_deliveries import RawDeliveries

    with connect(url) as c:
        ch = c.channel()
        ch.basic_qos(PREFETCH)
        if raw:
            ch.set_raw_deliveries(True)
        start.wait()
        ch.basic_consume(queue, arguments=args)
        got = acked = 0
        deadline = time.monotonic() + 600
        while got < n:
            batch = ch.drain(None, 1.0)
            if not batch:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"read {got} of {n} messages")
                continue
            got += sum(x.count if type(x) is RawDeliveries else 1 for x in batch) if raw \
                else len(batch)
            if got - acked >= ACK_EVERY:
                last = batch[-1]
                ch.basic_ack(last.last_tag if type(last) is RawDeliveries else last.delivery_tag,
                             multiple=True)
                acked = got


def read_pika(url: str, queue: str, n: int, args: dict | None, start: threading.Barrier) -> None:
    """Read ``n`` messages of ``queue`` with pika's BlockingConnection (ack every 100)."""
    import pika

    c = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = c.channel()
        ch.basic_qos(prefetch_count=PREFETCH)
        count = [0]

        def on(ch_, method, _props, _body) -> None:
            count[0] += 1
            if count[0] % ACK_EVERY == 0:
                ch_.basic_ack(method.delivery_tag, multiple=True)

        start.wait()
        ch.basic_consume(queue, on, arguments=args)
        deadline = time.monotonic() + 600
        while count[0] < n:
            c.process_data_events(time_limit=0.1)
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {count[0]} of {n} messages")
    finally:
        c.close()


def read_raw(url: str, queue: str, n: int, args: dict | None, start: threading.Barrier) -> None:
    """:func:`read_ours` in raw mode."""
    read_ours(url, queue, n, args, start, raw=True)


READERS = {"pika": read_pika, "spark-amqp client": read_ours, "spark-amqp raw": read_raw}


def concurrent_read(reader, url: str, queue: str, n: int, consumers: int, args: dict | None) -> float:
    """Deliveries/s of ``consumers`` readers each reading ``n`` messages (threads)."""
    start = threading.Barrier(consumers + 1)
    errors: list = []

    def run() -> None:
        try:
            reader(url, queue, n, args, start)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            start.abort()

    threads = [threading.Thread(target=run) for _ in range(consumers)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return consumers * n / (time.perf_counter() - t0)


def _cpu_rows(out: dict, label: str, cpu: CpuShare) -> None:
    out[f"{label}: reader CPU (cores)"] = cpu.reader
    out[f"{label}: broker CPU (cores)"] = cpu.broker


def _cpu_text(cpu: CpuShare) -> str:
    return f"   CPU: readers {cpu.reader:.2f} cores, broker {cpu.broker:.2f} cores"


def bench_broker(url: str, pid: int | None, n: int, size: int, consumer_counts: list[int],
                 stream_url: str | None = None, amqp_reads: bool = True) -> dict:
    """Every figure for one broker: {row label: value}. ``stream_url``: the broker's
    ``rabbitmq-stream://`` URL for the stream-protocol rows (None: none); ``amqp_reads``:
    False leaves out the AMQP 0-9-1 reads (items 2-3)."""
    from ..client import connect

    body = b"x" * size
    out: dict = {}
    stream = f"bench-stream-{uuid.uuid4().hex[:8]}"
    classic = f"bench-classic-{uuid.uuid4().hex[:8]}"
    with connect(url) as c:
        ch = c.channel()
        ch.queue_declare(stream, durable=True, arguments={"x-queue-type": "stream"})
        ch.queue_declare(classic, durable=True)
    peak = RssPeak(pid)
    try:
        out["publish with confirms into the stream (msgs/s)"] = n / publish(url, stream, n, body)
        with peak:
            for client, reader in (READERS.items() if amqp_reads else ()):
                for k in consumer_counts:
                    with CpuShare(pid) as cpu:
                        rate = concurrent_read(reader, url, stream, n, k,
                                               {"x-stream-offset": "first"})
                    out[f"stream read, {k} consumer(s), {client} (deliveries/s)"] = rate
                    _cpu_rows(out, f"stream read, {k} consumer(s), {client}", cpu)
                    print(f"  {client:<18} stream  x{k}: {rate:>10,.0f} deliveries/s"
                          f"{_cpu_text(cpu)}", flush=True)
                publish(url, classic, n, body)
                with CpuShare(pid) as cpu:
                    rate = concurrent_read(reader, url, classic, n, 1, None)
                out[f"classic queue read, 1 consumer, {client} (deliveries/s)"] = rate
                _cpu_rows(out, f"classic queue read, 1 consumer, {client}", cpu)
                print(f"  {client:<18} classic x1: {rate:>10,.0f} deliveries/s{_cpu_text(cpu)}",
                      flush=True)
            if stream_url:
                out.update(bench_stream_protocol(stream_url, stream, n, size, pid))
        if pid:
            out["broker peak RSS during the reads (MB)"] = peak.mb
    finally:
        with connect(url) as c:
            ch = c.channel()
            ch.queue_delete(stream)
            ch.queue_delete(classic)
    return out


SP = "stream protocol"


def bench_stream_protocol(stream_url: str, stream: str, n: int, size: int,
                          pid: int | None) -> dict:
    """The stream-protocol rows (item 6): reads of ``stream`` (``n`` messages) by the project's
    client and rstream, without and with decoding, then confirmed publishes of ``n`` AMQP 1.0
    messages of ``size`` bytes by each client's producer into a new stream."""
    from ..client.stream import connect
    from ..protocol.amqp10 import Message, decode_message, encode_message
    from .stream_protocol import (have_rstream, ours_publish, ours_read, rstream_publish,
                                  rstream_read)

    out: dict = {}
    # an untimed read first: the first reader of a stream reads its segment files from disk,
    # the others from the page cache (seen: 0.7x for whichever reader came first)
    ours_read(stream_url, stream, n)
    runs = [("spark-amqp", False, lambda: ours_read(stream_url, stream, n)[0])]
    if have_rstream():
        runs.append(("rstream", False, lambda: rstream_read(stream_url, stream, n)[0]))
    runs.append(("spark-amqp", True,
                 lambda: ours_read(stream_url, stream, n, decode=True,
                                   decoder=decode_message)[0]))
    if have_rstream():
        runs.append(("rstream", True, lambda: rstream_read(stream_url, stream, n,
                                                           decode=True)[0]))
    else:
        print("  (rstream is not installed: its rows are left out)", flush=True)
    for client, decode, run in runs:
        what = "decoded" if decode else "raw"
        with CpuShare(pid) as cpu:
            rate = n / run()
        label = f"{SP} read, {what}, {client}"
        out[f"{label} (msgs/s)"] = rate
        _cpu_rows(out, label, cpu)
        print(f"  {SP} read ({what}), {client}: {rate:>10,.0f} msgs/s{_cpu_text(cpu)}",
              flush=True)
    message = encode_message(Message(b"x" * size))
    messages = [message] * n
    publishers = [("spark-amqp", ours_publish)]
    if have_rstream():
        publishers.append(("rstream", rstream_publish))
    for client, pub in publishers:
        target = f"bench-sp-{uuid.uuid4().hex[:8]}"
        with connect(stream_url) as c:
            c.create_stream(target)
        try:
            with CpuShare(pid) as cpu:
                rate = n / pub(stream_url, target, messages)
        finally:
            with connect(stream_url) as c:
                c.delete_stream(target, missing_ok=True)
        label = f"{SP} publish+confirm, {client}"
        out[f"{label} (msgs/s)"] = rate
        _cpu_rows(out, label, cpu)
        print(f"  {SP} publish with confirms, {client}: {rate:>10,.0f} msgs/s{_cpu_text(cpu)}",
              flush=True)
    return out


def _stream_protocol_ratios(results: dict) -> None:
    """ours / rstream for each stream-protocol row, per broker."""
    for b, r in results.items():
        for what in ("read, raw", "read, decoded", "publish+confirm"):
            ours = r.get(f"{SP} {what}, spark-amqp (msgs/s)")
            theirs = r.get(f"{SP} {what}, rstream (msgs/s)")
            if ours and theirs:
                print(f"{b}: {SP} {what}: spark-amqp / rstream = {ours / theirs:.2f}x")


def publish_filtered(url: str, queue: str, n: int, size: int, values: int, block: int) -> float:
    """Publish ``n`` bodies of ``size`` bytes in blocks of ``block`` (each one publish batch,
    confirmed before the next), block ``i`` with ``x-stream-filter-value`` = ``v{i % values}``;
    seconds taken."""
    from ..client import connect
    from ..protocol import BasicProperties

    body = b"f" * size
    t0 = time.perf_counter()
    with connect(url) as c:
        ch = c.channel()
        ch.confirm_select()
        i = left = 0
        left = n
        while left:
            k = min(left, block)
            props = BasicProperties(headers={"x-stream-filter-value": f"v{i % values}"})
            ch.publish_batch([(body, "", queue, props)] * k)
            res = ch.wait_for_confirms(timeout=300)
            if res.nacked:
                raise RuntimeError(f"{len(res.nacked)} publishes to {queue} nacked")
            left -= k
            i += 1
    return time.perf_counter() - t0


def read_filtered(url: str, queue: str, args: dict, wanted: int, value: str | None) -> tuple:
    """Read ``queue`` from ``first`` with consumer ``args`` until ``wanted`` messages with
    filter value ``value`` (any message when None) arrived, then 0.5 s more: (deliveries
    received, seconds to the last wanted one)."""
    from ..client import connect

    with connect(url) as c:
        ch = c.channel()
        ch.basic_qos(PREFETCH)
        t0 = time.perf_counter()
        ch.basic_consume(queue, arguments={"x-stream-offset": "first", **args})
        got = hits = 0
        took = None
        deadline = time.monotonic() + 600
        quiet_until = None
        while True:
            batch = ch.drain(None, 0.1)
            now = time.monotonic()
            if batch:
                got += len(batch)
                for d in batch:
                    if value is None or (d.properties.headers or {}).get("x-stream-filter-value") == value:
                        hits += 1
                ch.basic_ack(batch[-1].delivery_tag, multiple=True)
            if took is None and hits >= wanted:
                took = time.perf_counter() - t0
                quiet_until = now + 0.5
            if quiet_until is not None and now > quiet_until:
                return got, took
            if now > deadline:
                raise TimeoutError(f"filtered read got {hits} of {wanted}")


def source_read(url: str, queue: str, n: int, stream_filter: str | None) -> tuple:
    """The source's executor path over offsets [0, n): (rows, seconds)."""
    from ..spark.source.streams.consumer import read_range
    from ..spark.source.streams.options import parse_stream_options

    opts = {"uri": url, "stream": queue}
    if stream_filter:
        opts["streamFilter"] = stream_filter
    options = parse_stream_options(opts)
    t0 = time.perf_counter()
    rows = sum(b.num_rows for b in read_range(options, queue, 0, n))
    return rows, time.perf_counter() - t0


def bench_filter(url: str, n: int, size: int, values: int, block: int) -> dict:
    """The stream-filtering rows for one broker: {row label: value}."""
    from ..client import connect

    stream = f"bench-filter-{uuid.uuid4().hex[:8]}"
    with connect(url) as c:
        c.channel().queue_declare(stream, durable=True, arguments={"x-queue-type": "stream"})
    out: dict = {}
    try:
        publish_filtered(url, stream, n, size, values, block)
        blocks = -(-n // block)
        wanted = sum(min(block, n - i * block) for i in range(7, blocks, values))
        got, took = read_filtered(url, stream, {}, n, None)
        out["filter: no filter, client read, deliveries"] = got
        out["filter: no filter, client read, s"] = took
        got_f, took_f = read_filtered(url, stream, {"x-stream-filter": "v7"}, wanted, "v7")
        out[f"filter: v7 (1 value in {values}), client read, deliveries"] = got_f
        out[f"filter: v7 (1 value in {values}), client read, s"] = took_f
        out[f"filter: v7, share of the stream delivered (%)"] = 100.0 * got_f / got
        rows, secs = source_read(url, stream, n, None)
        out["filter: source read_range, no filter, rows"] = rows
        out["filter: source read_range, no filter, s"] = secs
        rows_f, secs_f = source_read(url, stream, n, "v7")
        if rows_f != wanted:
            raise RuntimeError(f"read_range with streamFilter=v7 returned {rows_f} rows, "
                               f"expected {wanted}")
        out["filter: source read_range, streamFilter=v7, rows"] = rows_f
        out["filter: source read_range, streamFilter=v7, s"] = secs_f
        print(f"  filter v7: {got_f:,} of {got:,} deliveries ({100.0 * got_f / got:.1f}%), "
              f"client {took_f:.2f}s vs {took:.2f}s; read_range {rows_f:,} rows in "
              f"{secs_f:.2f}s vs {rows:,} in {secs:.2f}s", flush=True)
    finally:
        with connect(url) as c:
            c.channel().queue_delete(stream)
    return out


def rss_check(mb: int) -> tuple[float, float, float]:
    """(stream MB, broker RSS MB before the read, peak RSS MB during it) for an ``mb`` MB stream
    on the embedded broker (data directory in a temporary directory)."""
    size = 8192
    n = mb * 1024 * 1024 // size
    with tempfile.TemporaryDirectory(prefix="bench-streams-") as d, BrokerProcess(data_dir=d) as b:
        from ..client import connect

        q = "rss-stream"
        with connect(b.url) as c:
            c.channel().queue_declare(q, durable=True, arguments={"x-queue-type": "stream"})
        publish(b.url, q, n, b"y" * size)
        before = _rss_kb(b.pid) / 1024
        with RssPeak(b.pid) as peak:
            concurrent_read(read_ours, b.url, q, n, 1, {"x-stream-offset": "first"})
        on_disk = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)
        return on_disk / 2 ** 20, before, peak.mb


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("SPARK_AMQP_RABBITMQ_URL", DEFAULT_URL),
                    help="RabbitMQ's AMQP URI")
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=200, help="body bytes")
    ap.add_argument("--consumers", default="1,2,4", help="comma-separated concurrent reader counts")
    ap.add_argument("--brokers", default="embedded,rabbitmq")
    ap.add_argument("--filter-values", type=int, default=100,
                    help="stream filtering rows: distinct filter values (0: skip them)")
    ap.add_argument("--filter-block", type=int, default=300,
                    help="messages per published block (one filter value each)")
    ap.add_argument("--skip-reads", action="store_true",
                    help="only the stream filtering rows (items 1-4 skipped)")
    ap.add_argument("--stream-url", default=os.environ.get(
        "SPARK_AMQP_RABBITMQ_STREAM_URL", "rabbitmq-stream://guest:guest@127.0.0.1:5552/%2F"),
        help="RabbitMQ's rabbitmq-stream:// URL for the stream-protocol rows ('' skips them)")
    ap.add_argument("--skip-amqp-reads", action="store_true",
                    help="leave out the AMQP 0-9-1 reads (items 2-3): the stream-protocol rows "
                         "only, after the 0-9-1 publish")
    ap.add_argument("--rss-mb", type=int, default=0,
                    help="also read an N MB stream on the embedded broker and report its RSS")
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.consumers.split(",")]
    brokers = args.brokers.split(",")
    print(f"messages={args.messages:,} body={args.size}B prefetch={PREFETCH} ack every {ACK_EVERY}")
    results: dict[str, dict] = {}
    for name in brokers:
        print(f"{name}:", flush=True)
        results[name] = {}
        if name == "embedded":
            if not args.skip_reads:
                with tempfile.TemporaryDirectory(prefix="bench-streams-") as d, \
                        BrokerProcess(data_dir=d) as b:
                    results[name] = bench_broker(b.url, b.pid, args.messages, args.size, counts,
                                                 getattr(b, "stream_url", None),
                                                 not args.skip_amqp_reads)
            if args.filter_values:   # RabbitMQ 3.13+ filtering: the 4.3 mode
                with tempfile.TemporaryDirectory(prefix="bench-streams-") as d, \
                        BrokerProcess(data_dir=d, rabbitmq_version="4.3") as b:
                    results[name].update(bench_filter(b.url, args.messages, args.size,
                                                      args.filter_values, args.filter_block))
        else:
            if not args.skip_reads:
                results[name] = bench_broker(args.url, rabbitmq_pid(), args.messages, args.size,
                                             counts, args.stream_url or None,
                                             not args.skip_amqp_reads)
            if args.filter_values:
                results[name].update(bench_filter(args.url, args.messages, args.size,
                                                  args.filter_values, args.filter_block))
    rows = list(dict.fromkeys(k for r in results.values() for k in r))
    head = f"{'':<62}" + "".join(f"{b:>14}" for b in brokers)
    both = "embedded" in results and "rabbitmq" in results
    print()
    print(head + ("   embedded/RabbitMQ" if both else ""))
    for row in rows:
        fmt = ",.2f" if row.endswith((", s", "(%)", "(cores)")) else ",.0f"
        line = f"{row:<62}" + "".join(f"{results[b].get(row, float('nan')):>14{fmt}}" for b in brokers)
        if both and row in results["embedded"] and row in results["rabbitmq"]:
            line += f"   {results['embedded'][row] / results['rabbitmq'][row]:>8.2f}x"
        print(line)
    for b in brokers:
        r = results[b]
        for client in READERS:
            s = r.get(f"stream read, 1 consumer(s), {client} (deliveries/s)")
            c = r.get(f"classic queue read, 1 consumer, {client} (deliveries/s)")
            if s and c:
                print(f"{b}: stream / classic-queue read, 1 consumer, {client}: {s / c:.2f}x")
    _stream_protocol_ratios(results)
    if args.rss_mb:
        disk, before, peak = rss_check(args.rss_mb)
        print(f"embedded broker, a {disk:,.0f} MB stream read from first: RSS {before:,.0f} MB before, "
              f"peak {peak:,.0f} MB during the read")
    return 0


if __name__ == "__main__":
    sys.exit(main())
