"""The exchanges, queues and super stream the job reads and writes (client calls, no Spark)."""

from __future__ import annotations

from .data import ALERTS_EXCHANGE, DEFAULT_PARTITIONS, FLIGHTS_EXCHANGE


def declare_topology(uri: str, queue: str, alerts_queue: str, purge: bool,
                     flights_exchange: str = FLIGHTS_EXCHANGE,
                     alerts_exchange: str = ALERTS_EXCHANGE) -> None:
    """Declare the flights and alerts topic exchanges and the two queues bound to them.

    ``flights.#`` → ``queue``; ``delay.#`` → ``alerts_queue``. With ``purge`` the queues are
    emptied first (a demo run starts from scratch).
    """
    from spark_amqp.client import connect

    with connect(uri) as conn:
        ch = conn.channel()
        ch.exchange_declare(flights_exchange, exchange_type="topic", durable=True)
        ch.exchange_declare(alerts_exchange, exchange_type="topic", durable=True)
        for q, ex, key in ((queue, flights_exchange, "flights.#"),
                           (alerts_queue, alerts_exchange, "delay.#")):
            ch.queue_declare(q, durable=True)
            ch.queue_bind(q, ex, routing_key=key)
            if purge:
                ch.queue_purge(q)


def declare_alerts(uri: str, alerts_queue: str, alerts_exchange: str = ALERTS_EXCHANGE,
                   purge: bool = False) -> None:
    """Declare the alerts topic exchange and, unless ``alerts_queue`` is ``""``, that durable
    queue bound to it with ``delay.#`` (emptied only with ``purge``). Idempotent; run by every
    mode, so the job's alerts are never published to an exchange with nothing bound (RabbitMQ
    drops such messages: "Publishers", unroutable messages)."""
    from spark_amqp.client import connect

    with connect(uri) as conn:
        ch = conn.channel()
        ch.exchange_declare(alerts_exchange, exchange_type="topic", durable=True)
        if alerts_queue:
            ch.queue_declare(alerts_queue, durable=True)
            ch.queue_bind(alerts_queue, alerts_exchange, routing_key="delay.#")
            if purge:
                ch.queue_purge(alerts_queue)


def declare_super_stream_fresh(uri: str, name: str, partitions: int = DEFAULT_PARTITIONS) -> list[str]:
    """Delete super stream ``name`` (its exchange and every partition stream ``NAME-i`` that
    exists, so the source finds no stale partition) and declare it anew with ``partitions``
    partitions (:func:`spark_amqp.client.streams.declare_super_stream`, the topology of
    ``rabbitmq-streams add_super_stream``). Returns the partition names. A ``--demo`` starts
    from scratch: a stream cannot be purged. Raises the broker's errors (e.g. 406 when the
    broker has no stream queues)."""
    from spark_amqp.client import connect
    from spark_amqp.client.streams import declare_super_stream
    from spark_amqp.protocol.errors import NotFound

    with connect(uri) as conn:
        i = 0
        while True:
            ch = conn.channel()  # a 404 closes the channel: one per passive declare
            try:
                ch.queue_declare(f"{name}-{i}", passive=True)
            except NotFound:
                break
            ch.queue_delete(f"{name}-{i}")
            ch.close()
            i += 1
        ch = conn.channel()
        ch.exchange_delete(name)
        return declare_super_stream(ch, name, partitions)


def delete_topology(uri: str, queues: list[str], exchanges: list[str],
                    super_stream: str | None = None) -> list[str]:
    """Delete what the job declared: the ``queues`` (their messages with them), the
    ``exchanges`` and, with ``super_stream``, its exchange and every partition stream
    ``NAME-i`` that exists. Names that do not exist (or are ``""``) are skipped. Returns the
    names deleted, queues first. ``--delete-topology``: a run against a RabbitMQ leaves
    nothing behind."""
    from spark_amqp.client import connect
    from spark_amqp.protocol.errors import NotFound

    deleted = []
    with connect(uri) as conn:
        def exists(kind: str, name: str) -> bool:
            ch = conn.channel()  # a 404 closes the channel: one per passive declare
            try:
                if kind == "queue":
                    ch.queue_declare(name, passive=True)
                else:
                    ch.exchange_declare(name, passive=True)
            except NotFound:
                return False
            ch.close()
            return True

        streams = []
        if super_stream:
            i = 0
            while exists("queue", f"{super_stream}-{i}"):
                streams.append(f"{super_stream}-{i}")
                i += 1
        ch = conn.channel()
        for q in [*queues, *streams]:
            if q and (q in streams or exists("queue", q)):
                ch.queue_delete(q)
                deleted.append(q)
        for x in [*exchanges, *([super_stream] if super_stream else [])]:
            if x and not x.startswith("amq.") and exists("exchange", x):
                ch.exchange_delete(x)
                deleted.append(x)
    return deleted


def delete_job_topology(uri: str, args) -> list[str]:
    """``--delete-topology``: :func:`delete_topology` of the command line's ``args``: its
    ``alerts_queue`` and ``alerts_exchange``, then the flights' ``queue`` and ``exchange`` in
    the queue mode or the ``super_stream`` with ``stream`` (the mode's own names only), logged
    on the job's logger. Returns the names deleted."""
    import logging

    stream = bool(args.stream)
    deleted = delete_topology(uri, [*([] if stream else [args.queue]), args.alerts_queue],
                              [*([] if stream else [args.exchange]), args.alerts_exchange],
                              args.super_stream if stream else None)
    logging.getLogger("flight_delays").info(
        "--delete-topology: deleted %s", ", ".join(repr(n) for n in deleted) or "nothing")
    return deleted


def queue_depth(uri: str, queue: str) -> int:
    """Messages ready in ``queue`` (passive ``queue.declare``'s message-count)."""
    from spark_amqp.client import connect

    with connect(uri) as conn:
        return conn.channel().queue_declare(queue, passive=True).message_count
