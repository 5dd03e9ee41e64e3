"""Durable storage of the broker: sqlite3 in WAL mode with group commit.

What is stored (per vhost): durable exchanges, durable queues, bindings between durable
things, and persistent messages (delivery-mode 2) routed to durable queues - one row per
(queue, message). Acking, purging, expiring or dead-lettering such a message deletes its row.

**fsync policy.** The event loop never touches the disk. Every change (insert/delete) is
appended to an in-memory batch; once per event-loop tick the batch is handed to one writer
thread, which applies it in one transaction and commits with ``PRAGMA synchronous=FULL`` in WAL
mode (sqlite fsyncs the WAL on every commit). Only one commit is in flight; changes made
meanwhile form the next batch (group commit). Each batch has a number (a *ticket*); publisher
confirms for persistent messages in durable queues, and ``tx.commit-ok`` on transactions that
stored them, are sent only after the batch holding them has committed (``durable_ticket >=
ticket``). So a confirmed persistent message survives ``kill -9``; unconfirmed ones may be
lost, as with RabbitMQ. A message acked before its batch was written is never written.

**A failed commit** (disk full, read-only or vanished directory, I/O error) is never reported
as durable. The writer rolls the transaction back and reports the tickets of the batch as
failed (``on_commit(first, last, error)``); the broker then sends basic.nack for every publish
in it on confirm-mode channels and fails a waiting ``tx.commit`` (channel.close 506). Its new
messages are not written later either (they were nacked: the publisher is told to resend);
its deletes and metadata changes (declares, bindings, purges) are kept and retried, in order,
before the next batch and every ``retry_interval`` seconds until a commit succeeds, so a
declared queue or an ack is not forgotten because one commit failed. ``commit_failures``
counts failed commits; ``last_error`` is the latest error (``None`` once a commit succeeds).

Source: RabbitMQ "Reliability Guide" / "Publisher Confirms" (confirm after the message is
persisted to disk); sqlite docs "Write-Ahead Logging" and "PRAGMA synchronous".
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import threading
from typing import Any, Callable

from ..protocol.values import decode_table, encode_table
from .errors import StoreError

__all__ = ["MemoryStore", "SqliteStore", "StoreError"]

log = logging.getLogger("spark_amqp.broker.store")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS exchanges (vhost TEXT, name TEXT, type TEXT, auto_delete INT,
    internal INT, arguments BLOB, PRIMARY KEY (vhost, name));
CREATE TABLE IF NOT EXISTS queues (vhost TEXT, name TEXT, auto_delete INT, arguments BLOB,
    PRIMARY KEY (vhost, name));
CREATE TABLE IF NOT EXISTS bindings (vhost TEXT, source TEXT, destination TEXT, dest_kind TEXT,
    routing_key TEXT, arguments BLOB,
    PRIMARY KEY (vhost, source, destination, dest_kind, routing_key, arguments));
CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, vhost TEXT, queue TEXT,
    exchange TEXT, routing_key TEXT, props BLOB, body BLOB, redelivered INT, delivery_count INT);
CREATE INDEX IF NOT EXISTS messages_queue ON messages (vhost, queue, id);
"""


def _open_error(path: str, exc: BaseException) -> StoreError:
    text = str(exc)
    low = text.lower()
    if isinstance(exc, OSError) or "readonly" in low or "read-only" in low or "unable to open" in low:
        return StoreError(
            f"cannot open the broker store {path} for writing ({text}): the data directory and "
            "its files must be writable by the broker (is the filesystem mounted read-only, or "
            "are the permissions wrong?)")
    if "full" in low or "i/o" in low:
        return StoreError(f"cannot use the broker store {path} ({text}): free disk space / check "
                          "the disk, then start again")
    return StoreError(
        f"the broker store {path} is corrupt or truncated ({text}); the broker does not start "
        "with missing data: restore broker.sqlite3 and broker.sqlite3-wal from a backup, or "
        "move them away to start with an empty store (their messages are then lost)")


def _tbl(d: dict | None) -> bytes:
    return encode_table(d or {})


def _untbl(b: bytes) -> dict:
    return decode_table(bytes(b), 0, len(b))[0] if b else {}


class MemoryStore:
    """The store of an in-memory broker (``data_dir=None``): nothing is written.

    Same interface as :class:`SqliteStore`; every ticket is immediately durable.
    """

    durable = False

    def __init__(self):
        self.current_ticket = 0
        self.durable_ticket = 0
        self.next_id = 1
        self.bytes_added = 0  # message body bytes handed to add_message (disk alarm pacing)

    def add_message(self, vhost: str, queue: str, msg) -> int:
        return 0

    def delete_message(self, store_id: int) -> None:
        pass

    def delete_queue_messages(self, vhost: str, queue: str) -> None:
        pass

    def add_sync(self, fds: list) -> int:
        """fsync the file descriptors ``fds`` (stream segments, :mod:`.stream`) in the next
        batch; returns its ticket."""
        return 0

    def save_exchange(self, vhost, x) -> None:
        pass

    def delete_exchange(self, vhost, name) -> None:
        pass

    def save_queue(self, vhost, q) -> None:
        pass

    def delete_queue(self, vhost, name) -> None:
        pass

    def save_binding(self, vhost, source, destination, dest_kind, routing_key, arguments) -> None:
        pass

    def delete_binding(self, vhost, source, destination, dest_kind, routing_key, arguments) -> None:
        pass

    def flush(self) -> None:
        pass

    def load(self) -> dict[str, Any]:
        return {"exchanges": [], "queues": [], "bindings": [], "messages": []}

    def close(self) -> None:
        pass


class SqliteStore(MemoryStore):
    """sqlite3-backed store in ``data_dir/broker.sqlite3`` (see the module docstring).

    ``on_commit(first, last, error)`` is called *in the writer thread* after each commit
    attempt of the batches with tickets ``first..last``: ``error`` is ``None`` when they are
    durable, else the exception that failed the commit. The broker forwards it to its loop with
    ``call_soon_threadsafe`` and advances ``durable_ticket`` there (after nacking a failed
    batch's publishes), so no channel can confirm a failed ticket in between. Without
    ``on_commit`` the writer advances ``durable_ticket`` itself, on success only.
    ``retry_interval`` (seconds) paces retries of a failed batch's deletes and metadata.
    Raises :class:`StoreError` (naming the file) from the constructor when the store is
    corrupt or truncated (``PRAGMA quick_check``) or the directory is not writable.
    """

    durable = True

    def __init__(self, data_dir: str, on_commit: Callable[[int, int, BaseException | None], None] | None = None,
                 retry_interval: float = 1.0):
        super().__init__()
        self.path = os.path.join(data_dir, "broker.sqlite3")
        db = None
        try:
            os.makedirs(data_dir, exist_ok=True)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            # every page of an existing store is checked (a truncated or damaged file fails
            # here, not later with part of the data silently missing); O(file size)
            problems = [r[0] for r in db.execute("PRAGMA quick_check(5)")]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError("integrity check failed: " + "; ".join(problems))
            db.executescript(_SCHEMA)
            row = db.execute("SELECT MAX(id) FROM messages").fetchone()
        except (sqlite3.Error, OSError) as exc:
            if db is not None:
                db.close()
            raise _open_error(self.path, exc) from None
        self.db = db
        self.next_id = (row[0] or 0) + 1
        self.on_commit = on_commit
        self.retry_interval = retry_interval
        self.commit_failures = 0
        self.last_error: BaseException | None = None
        self._lock = threading.Lock()
        self._adds: dict[int, tuple] = {}      # id -> row, pending in the open batch
        self._dels: list[tuple] = []           # (id,) pending deletes
        self._ops: list[tuple[str, tuple]] = []  # metadata statements, in order
        self._syncs: list = []                 # stream segment files to fsync
        self._inflight = False
        self._cond = threading.Condition(self._lock)
        self._closed = False
        self._queue: list = []
        self._carry: tuple[list, list] | None = None  # (ops, dels) of failed batches, retried first
        self._thread = threading.Thread(target=self._writer, name="spark-amqp-store", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- batch building (loop)
    def _dirty(self) -> int:
        return self.current_ticket + 1

    def add_message(self, vhost: str, queue: str, msg) -> int:
        sid = self.next_id
        self.next_id += 1
        msg.store_id = sid
        self.bytes_added += len(msg.body)
        self._adds[sid] = (sid, vhost, queue, msg.exchange, msg.routing_key, msg.props_raw,
                           msg.body, int(msg.redelivered), msg.delivery_count)
        return self.current_ticket + 1

    def add_sync(self, fds: list) -> int:
        """fsync the file descriptors ``fds`` (stream segment files, written by the loop with
        ``os.pwrite``) in the writer thread, before the commit of the next batch; returns the
        ticket of that batch (a publisher confirm waits for it)."""
        self._syncs.extend(fds)
        return self.current_ticket + 1

    def delete_message(self, store_id: int) -> None:
        if self._adds.pop(store_id, None) is None:
            self._dels.append((store_id,))

    def delete_queue_messages(self, vhost: str, queue: str) -> None:
        self._ops.append(("DELETE FROM messages WHERE vhost=? AND queue=?", (vhost, queue)))
        self._adds = {k: v for k, v in self._adds.items() if not (v[1] == vhost and v[2] == queue)}

    def save_exchange(self, vhost, x) -> None:
        self._ops.append(("INSERT OR REPLACE INTO exchanges VALUES (?,?,?,?,?,?)",
                          (vhost, x.name, x.type, int(x.auto_delete), int(x.internal), _tbl(x.arguments))))

    def delete_exchange(self, vhost, name) -> None:
        self._ops.append(("DELETE FROM exchanges WHERE vhost=? AND name=?", (vhost, name)))
        self._ops.append(("DELETE FROM bindings WHERE vhost=? AND (source=? OR (destination=? AND dest_kind='exchange'))",
                          (vhost, name, name)))

    def save_queue(self, vhost, q) -> None:
        self._ops.append(("INSERT OR REPLACE INTO queues VALUES (?,?,?,?)",
                          (vhost, q.name, int(q.auto_delete), _tbl(q.arguments))))

    def delete_queue(self, vhost, name) -> None:
        self._ops.append(("DELETE FROM queues WHERE vhost=? AND name=?", (vhost, name)))
        self._ops.append(("DELETE FROM bindings WHERE vhost=? AND destination=? AND dest_kind='queue'", (vhost, name)))
        self.delete_queue_messages(vhost, name)

    def save_binding(self, vhost, source, destination, dest_kind, routing_key, arguments) -> None:
        self._ops.append(("INSERT OR REPLACE INTO bindings VALUES (?,?,?,?,?,?)",
                          (vhost, source, destination, dest_kind, routing_key, _tbl(arguments))))

    def delete_binding(self, vhost, source, destination, dest_kind, routing_key, arguments) -> None:
        self._ops.append(("DELETE FROM bindings WHERE vhost=? AND source=? AND destination=? AND dest_kind=? "
                          "AND routing_key=? AND arguments=?",
                          (vhost, source, destination, dest_kind, routing_key, _tbl(arguments))))

    def flush(self) -> None:
        """Hand the open batch to the writer thread (called once per loop tick)."""
        if not (self._adds or self._dels or self._ops or self._syncs):
            return
        self.current_ticket += 1
        batch = (self.current_ticket, list(self._adds.values()), self._dels, self._ops, self._syncs)
        self._adds, self._dels, self._ops, self._syncs = {}, [], [], []
        with self._cond:
            self._queue.append(batch)
            self._cond.notify()

    # ---------------------------------------------------------------- writer thread
    def _writer(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    if self._carry is not None:
                        # a failed batch's deletes/metadata wait to be retried
                        if not self._cond.wait(self.retry_interval):
                            break
                    else:
                        self._cond.wait()
                if not self._queue and self._closed and self._carry is None:
                    return
                batches, self._queue = self._queue, []
                closing = self._closed
            if not batches:
                self._commit([])  # retry of the carried-over changes alone
                if closing and self._carry is not None:
                    ops, dels = self._carry
                    log.error("store closed with %d metadata changes and %d deletes not written: %s",
                              len(ops), len(dels), self.last_error)
                    return
                continue
            error = self._commit(batches)
            first, last = batches[0][0], batches[-1][0]
            cb = self.on_commit
            if cb is None:
                if error is None:
                    self.durable_ticket = last
            else:
                try:
                    cb(first, last, error)
                except Exception:  # loop closed
                    pass

    def _commit(self, batches: list) -> BaseException | None:
        """One transaction: carried-over changes first, then ``batches`` in order. Returns
        None when committed, else the error (the changes to retry are carried over)."""
        db = self.db
        carry = self._carry
        try:
            # stream segment files (written by the loop with pwrite) first: a confirm of a
            # stream message waits for this batch's ticket
            for fd in {fd for b in batches for fd in b[4]}:
                try:
                    os.fsync(fd)
                except OSError as exc:
                    if exc.errno != errno.EBADF:   # EBADF: closed meanwhile (stream deleted)
                        raise
            db.execute("BEGIN")
            if carry is not None:
                ops, dels = carry
                for sql, params in ops:
                    db.execute(sql, params)
                if dels:
                    db.executemany("DELETE FROM messages WHERE id=?", dels)
            for _, adds, dels, ops, _syncs in batches:
                # metadata first in order; purges/deletes of queues precede later adds
                for sql, params in ops:
                    db.execute(sql, params)
                if adds:
                    db.executemany("INSERT OR REPLACE INTO messages VALUES (?,?,?,?,?,?,?,?,?)", adds)
                if dels:
                    db.executemany("DELETE FROM messages WHERE id=?", dels)
            db.execute("COMMIT")
        except Exception as exc:  # disk full, read-only directory, I/O error
            try:
                db.execute("ROLLBACK")
            except Exception:
                pass
            self.commit_failures += 1
            first_failure = self.last_error is None
            self.last_error = exc
            n_adds = sum(len(b[1]) for b in batches)
            if first_failure:
                log.error("store commit failed (%s: %s) in %s; %d new messages are not stored and "
                          "their publishes are nacked; deletes and metadata changes are retried every "
                          "%gs", type(exc).__name__, exc, self.path, n_adds, self.retry_interval)
            elif self.commit_failures % 30 == 0:
                log.warning("store commits still failing (%d failures so far): %s: %s",
                            self.commit_failures, type(exc).__name__, exc)
            ops = list(carry[0]) if carry is not None else []
            dels = list(carry[1]) if carry is not None else []
            for _, _adds, bdels, bops, _syncs in batches:
                ops.extend(bops)
                dels.extend(bdels)
            self._carry = (ops, dels) if (ops or dels) else None
            return exc
        if self.last_error is not None:
            log.warning("store commits succeed again after %d failures", self.commit_failures)
            self.last_error = None
        self._carry = None
        return None

    # ---------------------------------------------------------------- recovery / close
    def load(self) -> dict[str, Any]:
        """Everything stored: dict of lists of rows (dicts) for exchanges, queues, bindings,
        and messages (ordered by id)."""
        try:
            return self._load()
        except sqlite3.Error as exc:
            raise _open_error(self.path, exc) from None

    def _load(self) -> dict[str, Any]:
        db = self.db
        out: dict[str, Any] = {}
        out["exchanges"] = [dict(vhost=v, name=n, type=t, auto_delete=bool(a), internal=bool(i), arguments=_untbl(g))
                            for v, n, t, a, i, g in db.execute("SELECT * FROM exchanges")]
        out["queues"] = [dict(vhost=v, name=n, auto_delete=bool(a), arguments=_untbl(g))
                         for v, n, a, g in db.execute("SELECT * FROM queues")]
        out["bindings"] = [dict(vhost=v, source=s, destination=d, dest_kind=k, routing_key=r, arguments=_untbl(g))
                           for v, s, d, k, r, g in db.execute("SELECT * FROM bindings")]
        out["messages"] = db.execute("SELECT * FROM messages ORDER BY id").fetchall()
        return out

    def close(self) -> None:
        """Write everything pending, stop the writer thread and close the database."""
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=30)
        try:
            self.db.close()
        except Exception:  # pragma: no cover
            pass
