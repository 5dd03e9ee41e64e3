"""A pool of clients that misbehave on every port of a broker (issue 41's load test,
tests/broker/test_abuse_load.py), run as a script in its own process so that its work does not
share the test process's GIL with the clients whose round trips are measured::

    python tests/broker/abuse_clients.py --host 127.0.0.1 --amqp 5672 --http 15672 \\
        --stream 5552 --seconds 12

It prints ``ready`` once every held socket is open, then, after ``--seconds``, one line of
JSON: per kind of abuse, how many sockets it opened, how many the broker closed (``closed``)
and the seconds they were held before that (``held_max``), and for HTTP the statuses the
broker answered (``statuses``). Only the standard library: the bytes are written by hand.

What each kind does (a socket the broker closes is opened again until the time is up):

- AMQP (``--amqp``): ``amqp_idle`` connects and says nothing; ``amqp_trickle`` sends the
  protocol header and then a method frame one byte every 0.5 s (a handshake that never ends);
  ``amqp_2gib`` sends the protocol header and a frame header announcing 2 GiB; ``amqp_garbage``
  sends up to 300 random bytes.
- Management HTTP (``--http``): ``http_idle`` says nothing; ``http_half`` sends half a request
  (line and some headers); ``http_trickle`` sends a request's headers a byte every 0.5 s;
  ``http_huge`` announces a 2 GiB body; ``http_large`` (two loops) sends ~9.5 MB bodies (malformed JSON,
  and valid JSON of 1.5 million values) to the publish route; ``http_deep`` sends JSON nested
  100,000 deep; ``http_badauth`` sends two or non-ASCII ``Authorization`` headers.
- Stream protocol (``--stream``): ``stream_idle``, ``stream_trickle`` (a frame one byte every
  0.5 s), ``stream_2gib`` (a frame size of 2 GiB), ``stream_garbage``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import random
import sys
import time

AMQP_HEADER = b"AMQP\x00\x00\x09\x01"
#: connection.start-ok's frame header (type 1, channel 0, 256 bytes), then its first bytes
AMQP_TRICKLE = AMQP_HEADER + b"\x01\x00\x00\x00\x00\x01\x00" + b"\x00\x0a\x00\x0b" + b"\x00" * 64
AMQP_2GIB = AMQP_HEADER + b"\x01\x00\x00\x80\x00\x00\x00"
#: a stream-protocol frame of 64 bytes: peer properties (key 0x0011, version 1), correlation 1
STREAM_TRICKLE = b"\x00\x00\x00\x40\x00\x11\x00\x01\x00\x00\x00\x01" + b"\x00" * 60
STREAM_2GIB = b"\x80\x00\x00\x00\x00\x11\x00\x01"

#: (kind, sockets held at once) of the kinds that hold their sockets
HELD = {"amqp_idle": 20, "amqp_trickle": 10, "http_idle": 20, "http_half": 10, "http_trickle": 5,
        "stream_idle": 20, "stream_trickle": 10}
#: kinds that open, misbehave and close in a loop: (the pause between two rounds in s, loops)
CHURN = {"amqp_2gib": (0.05, 1), "amqp_garbage": (0.05, 1), "http_huge": (0.1, 1),
         "http_large": (0.0, 2), "http_deep": (0.1, 1), "http_badauth": (0.1, 1),
         "stream_2gib": (0.05, 1), "stream_garbage": (0.05, 1)}


class Abusers:
    """The pool: ``ports`` = {"amqp": port, "http": port, "stream": port} (a missing one is not
    attacked); :meth:`run` for ``seconds``; :attr:`stats` per kind."""

    def __init__(self, host: str, ports: dict, seconds: float, auth: str = "guest:guest",
                 kinds: set | None = None):
        self.host = host
        self.kinds = kinds
        self.ports = ports
        self.seconds = seconds
        self.auth = "Basic " + base64.b64encode(auth.encode()).decode()
        self.stats: dict = {}
        self.rng = random.Random(41)
        self.deadline = 0.0
        self.ready = 0
        self.held_total = 0
        self._ready_event: asyncio.Event | None = None
        # ~9.5 MB bodies, made once: under http.max_body_size (10 MB) so that they are read
        self.malformed = b'{"properties": {}, "routing_key": "k", "payload": "' + b"x" * 9_500_000
        self.many = (b'{"properties": {"headers": {"h": [' + b",".join([b"0"] * 1_500_000) +
                     b']}}, "routing_key": "k", "payload": "", "payload_encoding": "string"}')
        self.deep = b"[" * 100_000 + b"]" * 100_000

    def _attacks(self, kind: str) -> bool:
        return kind.split("_")[0] in self.ports and (self.kinds is None or kind in self.kinds)

    def _stat(self, kind: str) -> dict:
        return self.stats.setdefault(kind, {"opened": 0, "closed": 0, "held_max": 0.0, "errors": 0,
                                            "statuses": {}})

    def _left(self) -> float:
        return self.deadline - time.monotonic()

    async def _open(self, kind: str):
        port = self.ports[kind.split("_")[0]]
        r, w = await asyncio.wait_for(asyncio.open_connection(self.host, port), 5)
        self._stat(kind)["opened"] += 1
        return r, w

    async def _until_closed(self, kind: str, r, t0: float, dribble: bytes = b"", w=None,
                            until: float | None = None) -> bytes:
        """Read (and write ``dribble`` a byte every 0.5 s) until the broker closes the socket or
        the time is up (``until``, a monotonic time; default: the end of the run); what was read."""
        got = b""
        i = 0
        until = self.deadline if until is None else until
        while time.monotonic() < until:
            left = until - time.monotonic()
            try:
                d = await asyncio.wait_for(r.read(65536), min(0.5, max(0.01, left)))
            except asyncio.TimeoutError:
                if dribble and w is not None and i < len(dribble):
                    try:
                        w.write(dribble[i:i + 1])
                        i += 1
                    except (OSError, RuntimeError):
                        break
                continue
            except (OSError, ConnectionError):
                d = b""
            if not d:
                st = self._stat(kind)
                st["closed"] += 1
                st["held_max"] = max(st["held_max"], round(time.monotonic() - t0, 2))
                return got
            got += d
        return got

    async def _held(self, kind: str) -> None:
        """One slot of a holding kind: open, misbehave until closed, open again."""
        first = True
        while self._left() > 0:
            try:
                r, w = await self._open(kind)
            except (OSError, asyncio.TimeoutError):
                self._stat(kind)["errors"] += 1
                await asyncio.sleep(0.1)
                continue
            if first:
                first = False
                self.ready += 1
                if self.ready == self.held_total:
                    self._ready_event.set()
            t0 = time.monotonic()
            dribble = b""
            if kind == "amqp_trickle":
                dribble = AMQP_TRICKLE
            elif kind == "stream_trickle":
                dribble = STREAM_TRICKLE
            elif kind == "http_trickle":
                dribble = (f"GET /api/overview HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {self.auth}\r\n"
                           f"X-Slow: " + "y" * 200 + "\r\n\r\n").encode()
            elif kind == "http_half":
                w.write(b"GET /api/overview HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + self.auth.encode())
            got = await self._until_closed(kind, r, t0, dribble, w)
            if kind.startswith("http_") and got.startswith(b"HTTP/1."):
                self._status(kind, got)
            w.close()

    def _status(self, kind: str, data: bytes) -> None:
        try:
            code = data.split(b" ", 2)[1].decode()
        except (IndexError, UnicodeDecodeError):
            code = "?"
        st = self._stat(kind)["statuses"]
        st[code] = st.get(code, 0) + 1

    def _http(self, method: str, path: str, headers: list, body: bytes = b"", length: int | None = None) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"] + [f"{k}: {v}" for k, v in headers]
        if body or length is not None:
            lines.append(f"Content-Length: {length if length is not None else len(body)}")
        lines.append("Connection: close")
        return "\r\n".join(lines).encode("utf-8", "surrogateescape") + b"\r\n\r\n" + body

    async def _churn(self, kind: str, pause: float, rounds: int | None = None) -> None:
        """A churning kind: open, send the bad bytes, read until closed, again (at most
        ``rounds`` times)."""
        n = 0
        publish = "/api/exchanges/%2F/amq.default/publish"
        json_auth = [("Authorization", self.auth), ("Content-Type", "application/json")]
        while self._left() > 0 and (rounds is None or n < rounds):
            n += 1
            if kind == "amqp_2gib":
                data = AMQP_2GIB
            elif kind == "stream_2gib":
                data = STREAM_2GIB
            elif kind in ("amqp_garbage", "stream_garbage"):
                data = bytes(self.rng.randrange(256) for _ in range(self.rng.randint(1, 300)))
                if kind == "amqp_garbage" and n % 2:
                    data = AMQP_HEADER + data
            elif kind == "http_huge":
                data = self._http("POST", publish, json_auth, length=2 << 30)
            elif kind == "http_large":
                data = self._http("POST", publish, json_auth, self.malformed if n % 2 else self.many)
            elif kind == "http_deep":
                data = self._http("POST", publish, json_auth, self.deep)
            else:  # http_badauth: two Authorization headers, or one with bytes outside ASCII
                hdrs = [("Authorization", self.auth)] * 2 if n % 2 else \
                    [("Authorization", "Basic \udcff\udcfe")]
                data = self._http("GET", "/api/overview", hdrs)
            try:
                r, w = await self._open(kind)
            except (OSError, asyncio.TimeoutError):
                self._stat(kind)["errors"] += 1
                await asyncio.sleep(0.1)
                continue
            t0 = time.monotonic()
            try:
                w.write(data)
                await asyncio.wait_for(w.drain(), 30)
                # the answer is waited for after the end of the run too (10 s more); a 2 GiB
                # body is refused at once or never (RabbitMQ 3.10 has no limit: 5 s)
                now = time.monotonic()
                until = now + 5 if kind == "http_huge" else max(self.deadline, now) + 10
                got = await self._until_closed(kind, r, t0, until=until)
            except (OSError, ConnectionError, asyncio.TimeoutError):
                got = b""
            if kind.startswith("http_"):
                if got.startswith(b"HTTP/1."):
                    self._status(kind, got)
                else:
                    self._stat(kind)["statuses"]["none"] = self._stat(kind)["statuses"].get("none", 0) + 1
            w.close()
            if pause:
                await asyncio.sleep(pause)

    async def run(self) -> dict:
        """Attack until ``seconds`` have passed since every held socket was opened; the stats."""
        self._ready_event = asyncio.Event()
        self.deadline = time.monotonic() + self.seconds + 30   # moved once all are held
        held = [(k, n) for k, n in HELD.items() if self._attacks(k)]
        self.held_total = sum(n for _, n in held)
        tasks = [asyncio.create_task(self._held(k)) for k, n in held for _ in range(n)]
        if self.held_total:
            await asyncio.wait_for(self._ready_event.wait(), 30)
        self.deadline = time.monotonic() + self.seconds
        print("ready", flush=True)
        tasks += [asyncio.create_task(self._churn(k, pause)) for k, (pause, n) in CHURN.items()
                  if self._attacks(k) for _ in range(n)]
        await asyncio.gather(*tasks)
        return self.stats


def main(argv: list | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--amqp", type=int)
    p.add_argument("--http", type=int)
    p.add_argument("--stream", type=int)
    p.add_argument("--seconds", type=float, default=12.0)
    p.add_argument("--kinds", help="comma-separated kinds to run (default: all)")
    a = p.parse_args(argv)
    ports = {k: v for k, v in (("amqp", a.amqp), ("http", a.http), ("stream", a.stream)) if v}
    abusers = Abusers(a.host, ports, a.seconds, kinds=set(a.kinds.split(",")) if a.kinds else None)
    stats = asyncio.run(abusers.run())
    print(json.dumps(stats, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
