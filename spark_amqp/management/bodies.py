"""Request bodies of the management API: a size limit per route, read timeouts, a memory
budget, and JSON parsed where it cannot stall the broker (issue 41).

Before: any management user could send 64 MiB bodies, parsed on the broker's event loop (8
concurrent malformed 60 MB bodies stalled AMQP round trips for 8.3 s; 12 valid large ones took
the broker to 2.5 GB). Now:

- **size** (:func:`route_limits`): the routes that take bulk data (definitions import,
  publish) accept ``[management] http.max_body_size`` bytes (RabbitMQ 4.x's
  ``management.http.max_body_size``, 10,000,000; RabbitMQ 3.10 had no limit), every other
  route :data:`SMALL_BODY` (1 MiB: one object's declaration). A ``Content-Length`` above the
  limit is answered 413 before the body is read, and the connection closed; a chunked body is
  cut off at the limit the same way;
- **time**: a body that sends nothing for ``tcp.idle_timeout`` (60 s, cowboy's) gets 408;
- **memory**: bodies above :data:`INLINE_PARSE` bytes share a budget of
  :data:`BUDGET_BODIES` times ``max_body_size``; a request waits (its socket unread, so the
  bytes stay in the client) until its share is free, at most ``idle_timeout`` (then 503);
- **parsing**: a body of at most :data:`INLINE_PARSE` bytes is parsed on the loop (well under
  a millisecond); a larger one in a worker process (:mod:`.json_worker`, started on the first one), which also refuses a
  body nested deeper than :data:`MAX_DEPTH` levels or holding more than :data:`MAX_VALUES`
  values (definitions, an administrator's import, excepted), so that what comes back to the
  loop is cheap to unpickle. Errors are 400 ``bad_request`` with the reason (``not_json`` for
  unparseable JSON, as RabbitMQ).

- **memory given back**: a large body is freed into the C heap, where glibc keeps it (a
  freed block below the heap's top is not returned to the system): in the load test of issue
  41 (tests/broker/test_abuse_load.py) the broker's heap went from 9 to 19-32 MiB and stayed
  there. :data:`TRIM_DELAY` seconds after the last large body is done (none in progress), the
  reader calls glibc's ``malloc_trim(0)``, which gives the free pages back (19 -> 9 MiB);
  elsewhere than glibc nothing is done.

Arguments (of queues, exchanges, bindings, message headers) nest at most 64 levels anyway:
the AMQP codec's limit (``protocol.values.MAX_DEPTH``), checked by the broker core for both
ports (:func:`spark_amqp.broker.rules.check_arguments`).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import pickle
import sys
from typing import Any

from .http import ApiError
from .json_worker import ANSWER, REQUEST, parse_checked

__all__ = ["BodyReader", "route_limits", "INLINE_PARSE", "SMALL_BODY", "MAX_DEPTH", "MAX_VALUES",
           "BUDGET_BODIES", "TRIM_DELAY"]

log = logging.getLogger("spark_amqp.management")

#: bodies up to this many bytes are parsed on the event loop (and need no memory budget)
INLINE_PARSE = 16 * 1024
#: the body limit of every route but definitions import and publish
SMALL_BODY = 1 << 20
#: JSON nesting allowed in a body (arguments: 64, the AMQP codec's, checked by the broker)
MAX_DEPTH = 100
#: values a body may hold (definitions import excepted)
MAX_VALUES = 100_000
#: the memory budget of large bodies, in bodies of max_body_size
BUDGET_BODIES = 4
#: seconds after the last large body before the freed heap is given back (malloc_trim)
TRIM_DELAY = 1.0


def _malloc_trim():
    """glibc's ``malloc_trim`` (a callable taking the bytes to keep), None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):   # not glibc (musl has no malloc_trim)
        return None


_MALLOC_TRIM = _malloc_trim()

#: routes (method, pattern) that take bulk data up to http.max_body_size, and whether their
#: JSON may hold more than MAX_VALUES values
_LARGE = {("POST", "definitions"): True, ("POST", "definitions/{vhost}"): True,
          ("POST", "exchanges/{vhost}/{name}/publish"): False}


def route_limits(method: str, pattern: str, max_body_size: int) -> tuple[int, int | None]:
    """``(bytes, values)`` a request body of route ``pattern`` may have (values ``None`` =
    any number)."""
    many = _LARGE.get((method, pattern))
    if many is None:
        return min(SMALL_BODY, max_body_size), MAX_VALUES
    return max_body_size, None if many else MAX_VALUES


class _Budget:
    """Bytes of large bodies in memory at once (see the module docstring)."""

    def __init__(self, total: int):
        self.total = total
        self.used = 0
        self._cond: asyncio.Condition | None = None

    async def acquire(self, n: int, timeout: float) -> int:
        n = min(n, self.total)
        if self._cond is None:
            self._cond = asyncio.Condition()
        async with self._cond:
            await asyncio.wait_for(self._cond.wait_for(lambda: self.used + n <= self.total), timeout)
            self.used += n
        return n

    async def release(self, n: int) -> None:
        async with self._cond:
            self.used -= n
            self._cond.notify_all()


def _too_large(limit: int, setting: str) -> ApiError:
    return ApiError(413, "payload_too_large", f"Exceeded HTTP request body size limit of {limit} bytes "
                                              f"for this route ({setting})")


class BodyReader:
    """Reads and parses request bodies for one :class:`~.server.ManagementServer` (see the
    module docstring). ``limits`` is the broker config's
    :class:`~spark_amqp.broker.config.ManagementLimits`. ``await close()`` stops the worker."""

    def __init__(self, limits):
        self.limits = limits
        self.budget = _Budget(max(BUDGET_BODIES * limits.max_body_size, SMALL_BODY))
        self._worker: asyncio.subprocess.Process | None = None
        self._lock: asyncio.Lock | None = None
        self._no_worker = False
        self._trim: asyncio.TimerHandle | None = None

    def _trim_later(self) -> None:
        """Give the freed heap back :data:`TRIM_DELAY` s after the last large body (debounced)."""
        if _MALLOC_TRIM is None:
            return
        if self._trim is not None:
            self._trim.cancel()
        self._trim = asyncio.get_running_loop().call_later(TRIM_DELAY, self._trim_now)

    def _trim_now(self) -> None:
        self._trim = None
        if self.budget.used == 0:
            _MALLOC_TRIM(0)

    async def read(self, request, limit: int) -> bytes:
        """The body of ``request`` (at most ``limit`` bytes). Raises :class:`ApiError` 413 (too
        large; the connection is then closed), 408 (a pause longer than idle_timeout), 503
        (no memory budget within idle_timeout)."""
        setting = "[management] http.max_body_size" if limit == self.limits.max_body_size else "one object's declaration"
        n = request.content_length
        if n is not None and n > limit:
            raise _too_large(limit, setting)
        idle = self.limits.idle_timeout / 1000.0 or None
        want = n if n is not None else limit
        held = 0
        if want > INLINE_PARSE:
            try:
                held = await self.budget.acquire(want, idle)
            except asyncio.TimeoutError:
                raise ApiError(503, "service_unavailable", "too many large request bodies in progress; "
                                                           "retry later", {"Retry-After": "5"}) from None
        try:
            chunks, got = [], 0
            while True:
                try:
                    chunk = await asyncio.wait_for(request.content.readany(), idle)
                except asyncio.TimeoutError:
                    raise ApiError(408, "request_timeout", f"no byte of the request body for "
                                   f"{idle:g} s ([management] tcp.idle_timeout)") from None
                if not chunk:
                    break
                got += len(chunk)
                if got > limit:
                    raise _too_large(limit, setting)
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            if held:
                await self.budget.release(held)
                self._trim_later()

    async def parse(self, raw: bytes, max_values: int | None) -> Any:
        """The JSON value of ``raw`` (see the module docstring); 400 ``bad_request`` when it
        is not JSON or breaks a limit, 503 when the worker process died (retry)."""
        if len(raw) <= INLINE_PARSE or self._no_worker:
            ok, value = parse_checked(raw, MAX_DEPTH, max_values)
        else:
            ok, value = await self._parse_in_worker(raw, max_values)
        if not ok:
            raise ApiError(400, "bad_request", value)
        return value

    async def _parse_in_worker(self, raw: bytes, max_values: int | None) -> tuple[bool, Any]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:   # one body at a time: the worker answers in order
            try:
                w = self._worker
                if w is None or w.returncode is not None:
                    w = self._worker = await asyncio.create_subprocess_exec(
                        sys.executable, "-m", "spark_amqp.management.json_worker",
                        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
            except OSError as exc:   # no processes here: parse on the loop (and say so once)
                log.warning("management API: cannot start a JSON parser process (%s); large request "
                            "bodies are parsed on the broker's event loop", exc)
                self._no_worker = True
                return parse_checked(raw, MAX_DEPTH, max_values)
            try:
                w.stdin.write(REQUEST.pack(len(raw), MAX_DEPTH, max_values or 0))
                w.stdin.write(raw)
                await w.stdin.drain()
                n = ANSWER.unpack(await w.stdout.readexactly(ANSWER.size))[0]
                return pickle.loads(await w.stdout.readexactly(n))
            except (OSError, asyncio.IncompleteReadError, pickle.UnpicklingError):
                self._worker = None
                if w.returncode is None:
                    w.kill()
                raise ApiError(503, "service_unavailable", "the JSON parser process ended; retry",
                               {"Retry-After": "1"}) from None
            except BaseException:   # cancelled mid-answer: the pipe is out of step, start afresh
                self._worker = None
                if w.returncode is None:
                    w.kill()
                raise

    async def close(self) -> None:
        """Stop the worker process (it also exits by itself when the broker's end closes)."""
        if self._trim is not None:
            self._trim.cancel()
            self._trim = None
        w, self._worker = self._worker, None
        if w is not None and w.returncode is None:
            w.stdin.close()
            try:
                await asyncio.wait_for(w.wait(), 2.0)
            except asyncio.TimeoutError:
                w.kill()
                await w.wait()
