"""One failure model for every path that reconnects: what an error means, how long to wait
before the next attempt, how long to go on, and the one error given up with.

Every path that rides out a broker failure uses these and keeps only its own numbers (the
table in docs/architecture.md, "The failure model"): :func:`.connection.connect` over a
host list, the source's queue mode (its connection supervisor), the stream mode's tail probe
(driver) and range reads (executors), the sink's write tasks, and the stream-protocol client.

* :func:`classify` sorts an error into one of three :class:`Failure` kinds:

  - :attr:`Failure.LOST`, a lost connection: the socket broke or timed out, the peer stopped
    sending heartbeats, a synchronous call got no reply within ``rpc_timeout``, the broker
    forced the connection closed (320 CONNECTION_FORCED: a node shutting down), or it closed
    a consumer's channel because an ack did not come within its ``consumer_timeout`` (406).
    The same request goes again on a new connection, to any node.
  - :attr:`Failure.UNAVAILABLE`, the node cannot serve now: it answered, but about its own
    state: RabbitMQ's "does not have a running local replica" (506) or "does not have a
    replica on the local node" (406) for a stream, "home node ... is down or inaccessible"
    (404) for a classic queue, 541 INTERNAL_ERROR (seen answering a stream's
    ``basic.consume`` during a re-election, and RabbitMQ's answer to a consume that timed out
    inside the broker), or a peer that is not an AMQP 0-9-1 broker
    (:class:`.errors.ProtocolMismatch`). Another node serves it, or this one a moment later;
    the node is tried last from then on (:func:`connect_avoiding`).
  - :attr:`Failure.REFUSED`, refused for good: the same answer from every node, so trying
    again only delays the error: a refused login or permission (403 ACCESS_REFUSED), vhost
    (530 NOT_ALLOWED), an untrusted certificate, every other reply code of the broker (404 of
    a queue that does not exist, 406 of an inequivalent argument, 5xx protocol errors), and
    every error that is not the connection's (a ``ValueError``, the caller's own timeouts
    such as ``ConfirmTimeout`` or a read timeout: a ``TimeoutError`` that is not a
    :class:`.errors.ConnectionLost`).

* :class:`Backoff` is the wait between attempts (``first`` seconds, doubling up to ``max``)
  and :class:`FailoverWindow` the time failures may go on (``bound`` seconds from the first
  failure in a row); both read an injected monotonic ``clock``, so tests run them on a fake
  one.
* :class:`BrokerUnreachable` is what every path raises when its window closes: its message
  names the path's bound and lists every address with its last error (:class:`AddressErrors`).

Sources: RabbitMQ docs "Clustering" (users and vhosts are cluster-wide), "Streams"
(replication), "Consumer Acknowledgements" (``consumer_timeout``); ``rabbit_channel.erl``,
``rabbit_stream_queue.erl`` and ``rabbit_amqqueue.erl`` of RabbitMQ 3.10.8 (the reply texts);
the RabbitMQ Java client's ``ConnectionFactory.newConnection(List<Address>)`` and its
automatic recovery's ``networkRecoveryInterval``. No I/O here but ``connect_fn``'s.
"""

from __future__ import annotations

import enum
import random
import ssl
import time
from typing import Any, Callable, Iterable

from .errors import ConnectionLost, ProtocolMismatch

__all__ = ["Failure", "classify", "retryable", "replica_unavailable", "Backoff", "FailoverWindow",
           "BrokerUnreachable", "AddressErrors", "address_of", "addresses_avoiding",
           "connect_avoiding", "several_addresses"]


class Failure(enum.Enum):
    """What an error means for the connection (see the module doc)."""

    #: the connection (or the consumer's channel) is gone: the same request on a new one
    LOST = "lost connection"
    #: this node cannot serve the request now: another node, or this one later
    UNAVAILABLE = "node cannot serve now"
    #: the same answer from every node: raise it
    REFUSED = "refused for good"


def replica_unavailable(e: BaseException) -> bool:
    """The node answered a stream's consume that its replica is not running (506
    RESOURCE_ERROR "does not have a running local replica") or that it has none (406
    PRECONDITION_FAILED "does not have a replica on the local node";
    ``rabbit_stream_queue:consume/3`` of RabbitMQ 3.10.8, seen while a stopped node's
    replicas restart, right after ``start_app``, and during a re-election), or it answered
    541 INTERNAL_ERROR (seen answering a range read's ``basic.consume`` right after kill -9 of
    the stream's leader). One of the :attr:`Failure.UNAVAILABLE` answers."""
    from ..protocol.errors import InternalError, PreconditionFailed, ResourceError

    if isinstance(e, InternalError):
        return True
    if not isinstance(e, (PreconditionFailed, ResourceError)):
        return False
    text = _reply_text(e)
    return "local replica" in text or "replica on the local node" in text


def _reply_text(e: BaseException) -> str:
    return str(getattr(e, "reply_text", "") or e)


def classify(e: BaseException) -> Failure:
    """The :class:`Failure` kind of ``e`` (see the module doc for the rules and their
    sources). Never raises."""
    from ..protocol.errors import AccessRefused, AMQPError, ConnectionForced, NotAllowed, NotFound
    from ..protocol.errors import PreconditionFailed

    if isinstance(e, AMQPError):
        if isinstance(e, (AccessRefused, NotAllowed)):
            return Failure.REFUSED
        if isinstance(e, ConnectionForced):
            return Failure.LOST
        if replica_unavailable(e):
            return Failure.UNAVAILABLE
        text = _reply_text(e)
        if isinstance(e, NotFound) and "down or inaccessible" in text:
            return Failure.UNAVAILABLE   # a classic queue's home node is down
        if isinstance(e, PreconditionFailed) and "acknowledgement" in text \
                and "timed out" in text:
            return Failure.LOST          # consumer_timeout: the channel is closed, requeued
        return Failure.REFUSED
    if isinstance(e, ProtocolMismatch):
        return Failure.UNAVAILABLE
    if isinstance(e, ssl.SSLCertVerificationError):
        return Failure.REFUSED
    if isinstance(e, TimeoutError) and not isinstance(e, ConnectionLost):
        return Failure.REFUSED           # the caller's own wait ran out, not the connection
    if isinstance(e, (OSError, EOFError)):
        return Failure.LOST
    return Failure.REFUSED


def retryable(e: BaseException) -> bool:
    """``classify(e)`` is :attr:`Failure.LOST` or :attr:`Failure.UNAVAILABLE`: another
    attempt (on a new connection) may succeed."""
    return classify(e) is not Failure.REFUSED


class Backoff:
    """The wait between attempts: ``first`` seconds after the first failure, doubling after
    each further one, up to ``max`` seconds (``first == max``: a fixed interval).

    :meth:`failed` schedules the next attempt (:attr:`next_attempt`, ``clock`` time) and
    returns the wait; :meth:`due` says whether it has come; :meth:`reset` (after a success)
    starts again from ``first``. ``clock``: monotonic seconds (tests pass a fake one).
    """

    def __init__(self, first: float, max: float,  # noqa: A002 - the field's name
                 clock: Callable[[], float] = time.monotonic):
        if not 0 <= first <= max:
            raise ValueError(f"Backoff needs 0 <= first <= max seconds, got {first}, {max}")
        self.first = float(first)
        self.max = float(max)
        self._clock = clock
        #: seconds the next failure waits
        self.delay = self.first
        #: ``clock`` time at which the next attempt may go (0.0: at once)
        self.next_attempt = 0.0

    def failed(self, now: float | None = None) -> float:
        """An attempt failed at ``now`` (default: the clock's time): the next one goes
        :attr:`delay` seconds later, and the delay doubles (up to :attr:`max`). Returns the
        wait, seconds."""
        now = self._clock() if now is None else now
        wait = self.delay
        self.next_attempt = now + wait
        self.delay = min(wait * 2, self.max)
        return wait

    def due(self, now: float | None = None) -> bool:
        """The wait after the last failure has passed."""
        return self.next_attempt <= (self._clock() if now is None else now)

    def left(self, now: float | None = None) -> float:
        """Seconds until the next attempt may go (0.0 when it may go now)."""
        return max(0.0, self.next_attempt - (self._clock() if now is None else now))

    def retry_now(self, now: float | None = None) -> None:
        """Let the next attempt go at once (the delay is unchanged)."""
        self.next_attempt = self._clock() if now is None else now

    def reset(self) -> None:
        """An attempt worked: the next failure waits :attr:`first` again."""
        self.delay = self.first
        self.next_attempt = 0.0


class FailoverWindow:
    """How long failures in a row may go on: ``bound`` seconds from the first of them
    (``failoverTimeout``; 0 = no second round). :meth:`failed` starts the window (once) and
    returns the seconds since it started; :meth:`expired` says whether ``bound`` has passed;
    :meth:`succeeded` closes it. ``clock``: monotonic seconds (tests pass a fake one).
    """

    def __init__(self, bound: float, clock: Callable[[], float] = time.monotonic):
        if not bound >= 0:
            raise ValueError(f"a failover window needs a bound >= 0 seconds, got {bound}")
        self.bound = float(bound)
        self._clock = clock
        #: ``clock`` time of the first failure in a row, None while things work
        self.failing_since: float | None = None

    def failed(self, now: float | None = None) -> float:
        """A failure at ``now`` (default: the clock's time): starts the window when it is
        not open yet; returns the seconds since it started."""
        now = self._clock() if now is None else now
        if self.failing_since is None:
            self.failing_since = now
        return now - self.failing_since

    def elapsed(self, now: float | None = None) -> float:
        """Seconds since the first failure in a row (0.0 when none)."""
        if self.failing_since is None:
            return 0.0
        return (self._clock() if now is None else now) - self.failing_since

    def left(self, now: float | None = None) -> float:
        """Seconds until the window closes (``bound`` when it is not open)."""
        return max(0.0, self.bound - self.elapsed(now))

    def expired(self, now: float | None = None) -> bool:
        """The window is open and ``bound`` seconds have passed since it opened."""
        return self.failing_since is not None and self.elapsed(now) >= self.bound

    def succeeded(self) -> None:
        """Things work again: the next failure opens a new window."""
        self.failing_since = None


class BrokerUnreachable(ConnectionLost, ConnectionError):
    """No broker address could be reached (or served) within the failover window of the path
    that raises it: :func:`.connection.connect` (as its subclass
    :class:`.connection.AllAddressesFailed`), the source's queue mode (the query fails),
    the stream mode's probe (the query fails) and range reads (the task fails; Spark may
    retry it). The message names the bound and lists every address with its last error; the
    last error is the ``__cause__``. An ``OSError`` (a :class:`.errors.ConnectionLost` and a
    ``ConnectionError``); picklable (Spark ships it between processes).

    Attributes:
        errors: ``{"host:port": exception}``, the last error of every address tried (empty
            when the raiser keeps them as text only, in the message).
    """

    def __init__(self, message: str, errors: dict | None = None):
        super().__init__(message)   # one argument: OSError(a, b) would read a as an errno
        self.errors = dict(errors or {})

    def __reduce__(self):
        # rebuilt from its text and the errors' texts (their classes may not unpickle)
        return _rebuild, (type(self), str(self),
                          {a: str(e) for a, e in self.errors.items()})


def _rebuild(cls: type, text: str, errors: dict) -> "BrokerUnreachable":
    err = BrokerUnreachable.__new__(cls)
    BrokerUnreachable.__init__(err, text, {a: ConnectionLost(e) for a, e in errors.items()})
    return err


# -- addresses ------------------------------------------------------------------------------

def address_of(conn: Any) -> str | None:
    """``host:port`` of the address an open connection uses, or None."""
    from .uri import format_address

    p = getattr(conn, "params", None)
    if p is None or not getattr(p, "host", None):
        return None
    return format_address(p.host, p.port)


def several_addresses(uri: str, kwargs: dict | None = None) -> bool:
    """True when the URI (with ``connect()`` keywords ``kwargs``, e.g. ``addresses``) names
    more than one broker address. False for a URI that does not parse (it fails elsewhere,
    with its own error)."""
    from .uri import parse_uri

    try:
        return len(parse_uri(uri).replace(**(kwargs or {})).address_list()) > 1
    except (ValueError, TypeError):
        return False


def addresses_avoiding(addresses: Iterable, avoid: set, shuffle: bool = True) -> list:
    """``addresses`` (``(host, port)`` pairs) with those in ``avoid`` (``"host:port"``) last,
    each group shuffled when ``shuffle`` (a new random order per connection, as ``connect``
    does)."""
    from .uri import format_address

    addrs = list(addresses)
    good = [a for a in addrs if format_address(*a) not in avoid]
    bad = [a for a in addrs if format_address(*a) in avoid]
    if shuffle:
        random.shuffle(good)
        random.shuffle(bad)
    return good + bad


def connect_avoiding(connect_fn: Callable, uri: str, kwargs: dict, avoid: set) -> Any:
    """``connect_fn(uri, **kwargs)`` with the addresses in ``avoid`` (``"host:port"``: nodes
    that answered :attr:`Failure.UNAVAILABLE`) tried after the others (each group shuffled
    unless ``shuffle_addresses`` is false). With no address to avoid, or a single address,
    the call is unchanged. ``connect_fn``: :func:`.connection.connect` or one with its
    signature (the stream-protocol client's)."""
    if not avoid:
        return connect_fn(uri, **kwargs)
    from .uri import parse_uri

    params = parse_uri(uri).replace(**kwargs)
    addrs = params.address_list()
    if len(addrs) < 2:
        return connect_fn(uri, **kwargs)
    order = addresses_avoiding(addrs, avoid, params.shuffle_addresses)
    return connect_fn(uri, **{**kwargs, "addresses": tuple(order), "shuffle_addresses": False})


class AddressErrors:
    """The last error of every broker address (``{"host:port": text}``), for the message of
    a :class:`BrokerUnreachable`. ``uri``/``kwargs``: as given to ``connect``."""

    def __init__(self, uri: str, kwargs: dict):
        from .uri import format_address, parse_uri

        try:
            params = parse_uri(uri).replace(**{k: v for k, v in kwargs.items()
                                               if k != "rpc_timeout"})
            self.addresses = [format_address(*a) for a in params.address_list()]
            self.redacted = params.redacted_uri(all_addresses=True)
        except Exception:  # noqa: BLE001 - validated at load(); never fail while failing
            self.addresses, self.redacted = [], "(the URI)"
        self.last: dict[str, str] = {}

    def record(self, e: BaseException, conn: Any = None) -> None:
        """Keep ``e`` as the last error of the address ``conn`` used, or of every address a
        :class:`BrokerUnreachable` lists (or of the only address)."""
        from .uri import redact_uri

        per = getattr(e, "errors", None)
        if isinstance(per, dict) and per:
            for a, err in per.items():
                self.last[a] = redact_uri(f"{type(err).__name__}: {err}")
            return
        where = address_of(conn) if conn is not None else None
        if where is None and len(self.addresses) == 1:
            where = self.addresses[0]
        if where is not None:
            self.last[where] = redact_uri(f"{type(e).__name__}: {e}")

    def describe(self) -> str:
        """``h1:p1: <last error>; h2:p2: <last error>; ...`` over every address."""
        names = self.addresses + [a for a in self.last if a not in self.addresses]
        return "; ".join(f"{a}: {self.last.get(a, 'no error recorded')}" for a in names)
