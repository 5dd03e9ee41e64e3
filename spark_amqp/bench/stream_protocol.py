"""Stream-protocol readers and publishers for the benchmarks: the project's client
(:mod:`spark_amqp.client.stream`) and rstream (an independent asyncio client, optional: the
``rstream`` package), over the same stream.

Each reader reads ``n`` messages from the first offset and returns ``(seconds, result)``:

* ``decode=False``: every message as bytes (rstream: its callback gets each message's bytes;
  ours: :meth:`~spark_amqp.protocol.stream.chunk.Chunk.messages` of each chunk, counted);
* ``decode=True``: every message decoded to its body and properties (rstream with its own
  AMQP 1.0 decoder, ``rstream.amqp_decoder``; ours with ``decoder``, a callable
  ``bytes -> object`` such as the project's AMQP 1.0 message decoder).

``keep=True`` returns the ``[(offset, message)]`` read (the tests compare the clients with it).
Each publisher publishes ``messages`` (bytes) with confirms and returns the seconds taken.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable
from urllib.parse import unquote, urlsplit

__all__ = ["ours_read", "ours_publish", "rstream_read", "rstream_publish", "have_rstream",
           "url_parts"]


def have_rstream() -> bool:
    """Whether the optional ``rstream`` package is installed."""
    try:
        import rstream  # noqa: F401
    except ImportError:
        return False
    return True


def url_parts(url: str) -> dict:
    """host, port, username, password, vhost of a ``rabbitmq-stream://`` URL."""
    u = urlsplit(url)
    vhost = unquote(u.path[1:]) if u.path not in ("", "/") else "/"
    return {"host": u.hostname or "127.0.0.1", "port": u.port or 5552,
            "username": unquote(u.username or "guest"),
            "password": unquote(u.password or "guest"), "vhost": vhost}


def ours_read(url: str, stream: str, n: int, decode: bool = False,
              decoder: Callable[[bytes], Any] | None = None, keep: bool = False,
              credit: int = 10, offset: Any = "first") -> tuple:
    """Read ``n`` messages of ``stream`` with the project's client: (seconds, kept)."""
    from ..client.stream import connect

    kept: list = []
    with connect(url) as client:
        t0 = time.perf_counter()
        with client.consumer(stream, offset, credit=credit) as c:
            got = 0
            deadline = time.monotonic() + 600
            while got < n:
                chunk = c.next_chunk(timeout=1.0)
                if chunk is None:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"read {got} of {n} messages of {stream}")
                    continue
                msgs = chunk.messages()
                if decode:
                    msgs = [decoder(m) for m in msgs]  # type: ignore[misc]
                if keep:
                    kept.extend(zip(range(chunk.chunk_id, chunk.chunk_id + len(msgs)), msgs))
                got += len(msgs)
        return time.perf_counter() - t0, kept


def ours_publish(url: str, stream: str, messages: list, batch_size: int = 500,
                 name: str | None = None) -> float:
    """Publish ``messages`` with confirms with the project's client: seconds."""
    from ..client.stream import connect

    with connect(url) as client:
        t0 = time.perf_counter()
        with client.producer(stream, name=name, batch_size=batch_size) as p:
            p.send_batch(messages)
            r = p.wait_for_confirms(600)
            if not r.ok:
                raise RuntimeError(f"{len(r.errors)} publishes refused: {list(r.errors.items())[:5]}")
        return time.perf_counter() - t0


def rstream_read(url: str, stream: str, n: int, decode: bool = False, keep: bool = False,
                 credit: int = 10) -> tuple:
    """Read ``n`` messages of ``stream`` from the first offset with rstream: (seconds, kept)."""
    return asyncio.run(_rstream_read(url, stream, n, decode, keep, credit))


async def _rstream_read(url: str, stream: str, n: int, decode: bool, keep: bool,
                        credit: int) -> tuple:
    import rstream

    kept: list = []
    done = asyncio.Event()
    count = [0]

    def on_message(msg, ctx) -> None:
        if keep:
            kept.append((ctx.offset, msg))
        count[0] += 1
        if count[0] >= n:
            done.set()

    consumer = rstream.Consumer(**url_parts(url))
    await consumer.start()
    try:
        t0 = time.perf_counter()
        await consumer.subscribe(
            stream, on_message, initial_credit=credit,
            decoder=rstream.amqp_decoder if decode else None,
            offset_specification=rstream.ConsumerOffsetSpecification(rstream.OffsetType.FIRST,
                                                                     None))
        await asyncio.wait_for(done.wait(), 600)
        return time.perf_counter() - t0, kept
    finally:
        await consumer.close()


def rstream_publish(url: str, stream: str, messages: list, batch_size: int = 500) -> float:
    """Publish ``messages`` (bytes) with confirms with rstream's producer: seconds."""
    return asyncio.run(_rstream_publish(url, stream, messages, batch_size))


async def _rstream_publish(url: str, stream: str, messages: list, batch_size: int) -> float:
    import rstream

    confirmed = [0]
    errors: list = []
    done = asyncio.Event()
    n = len(messages)

    def on_confirm(status) -> None:
        if status.is_confirmed:
            confirmed[0] += 1
        else:
            errors.append(status)
        if confirmed[0] + len(errors) >= n:
            done.set()

    async with rstream.Producer(**url_parts(url)) as producer:
        t0 = time.perf_counter()
        for i in range(0, n, batch_size):
            await producer.send_batch(stream, messages[i:i + batch_size],
                                      on_publish_confirm=on_confirm)
        await asyncio.wait_for(done.wait(), 600)
        took = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"rstream: {len(errors)} publishes not confirmed")
    return took
