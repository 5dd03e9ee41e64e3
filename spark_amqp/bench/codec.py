"""Codec benchmark: our sans-IO codec vs pika's codec on the same messages, in one process.

Run: ``python -m spark_amqp.bench.codec [--seconds 0.3] [--repeat 7]``

Messages (the issue's "Speed" section):

* publish: ``basic.publish(exchange="amq.direct", routing_key="orders.created")`` + content
  header (content-type ``application/json``, delivery-mode 2, two headers ``{"x-source":
  "bench", "x-attempt": 3}``) + a 200-byte body;
* deliver: ``basic.deliver(consumer_tag, delivery_tag, redelivered=False, exchange,
  routing_key)`` with the same content.

Encode = build the method object and marshal method + header + body frames to bytes (the
properties object is built once, as a caller passes it in; nothing per-message is cached).
Ours: :func:`spark_amqp.protocol.encode_message`; a further row, ours only, is the
client's publish path, :class:`spark_amqp.protocol.publish.PublishEncoder` (the method frame
cached per exchange and routing key, the properties encoded per message); pika: ``pika.frame.Method(...).marshal()
+ pika.frame.Header(...).marshal() + pika.frame.Body(...).marshal()``.

Decode = bytes of one message → a fully decoded message (method fields, every property, the
header table values, the body). Ours: ``Decoder.feed(one message's bytes)`` → one
``ContentMessage``; pika: ``pika.frame.decode_frame`` over the same bytes until the three
frames are out (the way pika's connection consumes its buffer). A second "ours" decode row
feeds 64 KiB socket-sized reads holding many messages, as the client and broker do.
Two more rows, ours only, are the Spark source's halves: the driver's raw-mode decoder cutting
the deliveries out of 64 KiB reads as undecoded runs (``Decoder.raw_channels``), and the
executors' column-wise decode of a partition's deliver frames (``deliver_columns``).

The codec's compiled fast paths are used when built (``make venv`` builds them);
``SPARK_AMQP_PURE_PYTHON=1`` measures the pure-Python code.

Figures are messages per CPU-second of the benchmarking thread (``time.thread_time``; robust
against other load on the machine), best of ``--repeat`` alternating runs of ``--seconds``.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import pika
import pika.frame
import pika.spec

from spark_amqp.protocol import BasicProperties, Decoder, encode_message, properties, spec
from spark_amqp.protocol.publish import PublishEncoder

BODY = bytes(range(200))
HEADERS = {"x-source": "bench", "x-attempt": 3}
EXCHANGE = "amq.direct"
ROUTING_KEY = "orders.created"
FRAME_MAX = 131072


def _rate(fn, n_inner: int, seconds: float) -> float:
    """msgs per CPU-second of one run of about ``seconds``; ``fn(n)`` processes n messages.

    CPU time of this thread (``time.thread_time``) is used, not wall time, so that other
    processes competing for the cores do not distort the figures (both codecs are measured
    the same way, alternately, in the same process).
    """
    clock = time.thread_time
    count = 0
    t0 = clock()
    while True:
        fn(n_inner)
        count += n_inner
        dt = clock() - t0
        if dt >= seconds:
            return count / dt


def _best(pairs, seconds: float, repeat: int):
    """Alternate ours/pika runs ``repeat`` times; keep the best figure of each."""
    best = [0.0] * len(pairs)
    for _ in range(repeat):
        for i, (fn, n_inner) in enumerate(pairs):
            best[i] = max(best[i], _rate(fn, n_inner, seconds))
    return best


# ----------------------------------------------------------------------------- ours

def ours_props():
    return BasicProperties(content_type="application/json", delivery_mode=2, headers=HEADERS)


def ours_encode_publish(n: int, props=None) -> None:
    props = props or _OURS_PROPS
    Publish = spec.Basic.Publish
    for _ in range(n):
        encode_message(1, Publish(0, EXCHANGE, ROUTING_KEY, False, False), props, BODY, FRAME_MAX)


def ours_encode_publish_cached(n: int) -> None:
    """The client's publish path: the method frame cached, properties encoded per message."""
    props = _OURS_PROPS
    encode = PublishEncoder(1, FRAME_MAX).encode
    for _ in range(n):
        encode(BODY, EXCHANGE, ROUTING_KEY, props, False)


def ours_encode_deliver(n: int) -> None:
    props = _OURS_PROPS
    Deliver = spec.Basic.Deliver
    for i in range(n):
        encode_message(1, Deliver("amq.ctag-bench", i + 1, False, EXCHANGE, ROUTING_KEY),
                       props, BODY, FRAME_MAX)


def ours_decode(wire: bytes):
    def run(n: int) -> None:
        for _ in range(n):
            _DEC.feed(wire)
    return run


def ours_decode_batched(wire: bytes, per_read: int = 65536):
    msgs_per_read = max(1, per_read // len(wire))
    chunk = wire * msgs_per_read

    def run(n: int) -> None:
        feed = _DEC.feed
        for _ in range(max(1, n // msgs_per_read)):
            feed(chunk)
    return run, msgs_per_read


def ours_scan_raw_batched(deliver_wire, per_read: int = 65536):
    """Raw mode (the Spark source's driver): deliveries cut as undecoded runs, 64 KiB reads.
    ``deliver_wire(tag)``: one delivery's bytes (a run needs consecutive delivery tags)."""
    msgs_per_read = max(1, per_read // len(deliver_wire(1)))
    chunk = b"".join(deliver_wire(t) for t in range(1, msgs_per_read + 1))
    dec = Decoder(FRAME_MAX)
    dec.raw_channels.add(1)

    def run(n: int) -> None:
        feed = dec.feed
        for _ in range(max(1, n // msgs_per_read)):
            feed(chunk)
    return run, msgs_per_read


def ours_deliver_columns(wire: bytes, per_part: int = 1000):
    """The source's executors: a partition's deliver frames decoded column-wise."""
    from ..protocol.raw_deliveries import deliver_columns_fast

    part = wire * per_part

    def run(n: int) -> None:
        for _ in range(max(1, n // per_part)):
            deliver_columns_fast(part, per_part, True)
    return run, per_part


# ----------------------------------------------------------------------------- pika

def pika_props():
    return pika.spec.BasicProperties(content_type="application/json", delivery_mode=2,
                                     headers=HEADERS)


def pika_encode_publish(n: int) -> None:
    props = _PIKA_PROPS
    Method, Header, Body, Publish = (pika.frame.Method, pika.frame.Header, pika.frame.Body,
                                     pika.spec.Basic.Publish)
    blen = len(BODY)
    for _ in range(n):
        b"".join((Method(1, Publish(0, EXCHANGE, ROUTING_KEY, False, False)).marshal(),
                  Header(1, blen, props).marshal(), Body(1, BODY).marshal()))


def pika_encode_deliver(n: int) -> None:
    props = _PIKA_PROPS
    Method, Header, Body, Deliver = (pika.frame.Method, pika.frame.Header, pika.frame.Body,
                                     pika.spec.Basic.Deliver)
    blen = len(BODY)
    for i in range(n):
        b"".join((Method(1, Deliver("amq.ctag-bench", i + 1, False, EXCHANGE,
                                    ROUTING_KEY)).marshal(),
                  Header(1, blen, props).marshal(), Body(1, BODY).marshal()))


def pika_decode(wire: bytes):
    decode_frame = pika.frame.decode_frame

    def run(n: int) -> None:
        for _ in range(n):
            buf = wire
            frames = []
            while buf:
                used, frame = decode_frame(buf)
                frames.append(frame)
                buf = buf[used:]
    return run


# ----------------------------------------------------------------------------- checks

def check_equivalence() -> None:
    """Both codecs produce the same bytes and decode each other's output the same way."""
    ours = encode_message(1, spec.Basic.Publish(0, EXCHANGE, ROUTING_KEY), ours_props(), BODY,
                          FRAME_MAX)
    theirs = b"".join((pika.frame.Method(1, pika.spec.Basic.Publish(0, EXCHANGE, ROUTING_KEY))
                       .marshal(), pika.frame.Header(1, len(BODY), pika_props()).marshal(),
                       pika.frame.Body(1, BODY).marshal()))
    assert ours == theirs, "ours and pika's encodings differ"
    [msg] = Decoder().feed(theirs)
    assert msg.properties == ours_props() and msg.body == BODY
    assert msg.properties.headers == HEADERS
    assert PublishEncoder(1, FRAME_MAX).encode(BODY, EXCHANGE, ROUTING_KEY, ours_props()) == ours


_OURS_PROPS = ours_props()
_PIKA_PROPS = pika_props()
_DEC = Decoder()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=0.3, help="duration of one run (s)")
    ap.add_argument("--repeat", type=int, default=7,
                    help="alternating runs per figure; the best is kept (robust to other load)")
    args = ap.parse_args(argv)
    check_equivalence()

    pub_wire = encode_message(1, spec.Basic.Publish(0, EXCHANGE, ROUTING_KEY), _OURS_PROPS,
                              BODY, FRAME_MAX)
    del_wire = encode_message(1, spec.Basic.Deliver("amq.ctag-bench", 12345, False, EXCHANGE,
                                                    ROUTING_KEY), _OURS_PROPS, BODY, FRAME_MAX)
    s, r = args.seconds, args.repeat
    rows = []
    for label, ours_fn, pika_fn in (
        ("encode publish", ours_encode_publish, pika_encode_publish),
        ("encode deliver", ours_encode_deliver, pika_encode_deliver),
        ("decode publish", ours_decode(pub_wire), pika_decode(pub_wire)),
        ("decode deliver", ours_decode(del_wire), pika_decode(del_wire)),
    ):
        o, p = _best([(ours_fn, 1000), (pika_fn, 1000)], s, r)
        rows.append((label, o, p))
    batched = [("encode publish, method cached",
                _best([(ours_encode_publish_cached, 1000)], s, r)[0])]
    for label, wire in (("decode publish, 64 KiB reads", pub_wire),
                        ("decode deliver, 64 KiB reads", del_wire)):
        fn, per = ours_decode_batched(wire)
        batched.append((label, _best([(fn, per * 4)], s, r)[0]))
    def deliver_wire(tag: int) -> bytes:
        return encode_message(1, spec.Basic.Deliver("amq.ctag-bench", tag, False, EXCHANGE,
                                                     ROUTING_KEY), _OURS_PROPS, BODY, FRAME_MAX)

    for label, (fn, per) in (("raw scan deliver, 64 KiB reads", ours_scan_raw_batched(deliver_wire)),
                             ("deliver frames to columns", ours_deliver_columns(del_wire))):
        batched.append((label, _best([(fn, per * 4)], s, r)[0]))

    print(f"spark-amqp codec vs pika {pika.__version__} — Python {platform.python_version()} "
          f"({platform.python_implementation()}), {platform.machine()}")
    print("spark-amqp codec: " + ("compiled twins (spark_amqp/protocol/_*.pyx)"
                                  if properties.SPEEDUPS is not None else
                                  "pure Python (SPARK_AMQP_PURE_PYTHON=1 or the twins not built)"))
    print(f"message: {len(pub_wire)} bytes on the wire (publish), {len(del_wire)} (deliver); "
          f"200-byte body, content-type + delivery-mode 2 + 2 headers")
    print()
    print("msgs per CPU-second, best of", r, "alternating runs of", s, "s")
    print(f"{'operation':<32}{'ours msgs/s':>14}{'pika msgs/s':>14}{'ratio':>9}")
    for label, o, p in rows:
        print(f"{label:<32}{o:>14,.0f}{p:>14,.0f}{o / p:>8.2f}x")
    for label, o in batched:
        print(f"{label:<32}{o:>14,.0f}{'-':>14}{'':>9}")
    worst = min(o / p for _, o, p in rows)
    print()
    print(f"lowest ratio: {worst:.2f}x (target >= 5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
