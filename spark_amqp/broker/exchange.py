"""Exchanges and routing: direct, fanout, topic (``*`` / ``#``) and headers (x-match).

An exchange maps (routing key, headers) to a set of *destinations*: queues, or other
exchanges (exchange-to-exchange bindings, a RabbitMQ extension). The vhost follows exchange
destinations and alternate exchanges (see :meth:`VHost.route`).

Sources: 0-9-1 spec §3.1.3 (exchange types); RabbitMQ docs "Exchanges", "Exchange to
Exchange Bindings", "Alternate Exchanges"; headers matching as ``rabbit_exchange_type_headers``
(x-match ``all`` (default) / ``any``, and 3.10's ``all-with-x`` / ``any-with-x``; binding
arguments starting with ``x-`` are ignored unless a ``-with-x`` mode is used; a void value
matches on presence only).
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["Exchange", "Binding", "EXCHANGE_TYPES", "topic_matches"]

EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")


class Binding:
    """One binding: ``source`` exchange → ``destination`` (Queue or Exchange)."""

    __slots__ = ("source", "destination", "routing_key", "arguments", "words")

    def __init__(self, source: "Exchange", destination: Any, routing_key: str, arguments: dict):
        self.source = source
        self.destination = destination
        self.routing_key = routing_key
        self.arguments = arguments or {}
        self.words = routing_key.split(".") if routing_key else []

    @property
    def key(self) -> tuple:
        return (id(self.destination), self.routing_key, _freeze(self.arguments))


def _freeze(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return repr(v)


def topic_matches(pattern: list[str], words: list[str]) -> bool:
    """AMQP topic match of binding-key words against routing-key words.

    ``*`` matches exactly one word, ``#`` zero or more words (0-9-1 spec §3.1.3.3).
    """
    # iterative matcher with backtracking on the last '#'
    p = w = 0
    star_p = star_w = -1
    np_, nw = len(pattern), len(words)
    while w < nw:
        if p < np_ and pattern[p] == "#":
            star_p, star_w = p, w
            p += 1
            continue
        if p < np_ and (pattern[p] == "*" or pattern[p] == words[w]):
            p += 1
            w += 1
            continue
        if star_p >= 0:
            star_w += 1
            w = star_w
            p = star_p + 1
            continue
        return False
    while p < np_ and pattern[p] == "#":
        p += 1
    return p == np_


def _headers_match(args: dict, headers: dict | None) -> bool:
    mode = args.get("x-match", "all")
    if isinstance(mode, bytes):
        mode = mode.decode("utf-8", "replace")
    with_x = mode in ("all-with-x", "any-with-x")
    any_mode = mode in ("any", "any-with-x")
    headers = headers or {}
    for k, v in args.items():
        if k == "x-match" or (not with_x and k.startswith("x-")):
            continue
        if k not in headers:
            ok = False
        elif v is None:
            ok = True
        else:
            ok = _value_eq(headers[k], v)
        if any_mode:
            if ok:
                return True
        elif not ok:
            return False
    return not any_mode


X_MATCH_MODES = ("all", "any", "all-with-x", "any-with-x")


def check_binding_arguments(exchange_type: str, args: dict | None) -> None:
    """Validate headers-exchange binding arguments; RabbitMQ 3.10 answers a bad x-match with
    406 "Invalid x-match field value ...; expected all, any, all-with-x, or any-with-x"."""
    from ..protocol.errors import PreconditionFailed

    if exchange_type != "headers" or not args or "x-match" not in args:
        return
    mode = args["x-match"]
    if isinstance(mode, bytes):
        mode = mode.decode("utf-8", "replace")
    if mode not in X_MATCH_MODES:
        raise PreconditionFailed(f"Invalid x-match field value {mode!r}; expected all, any, all-with-x, or any-with-x", 50, 20)


def _value_eq(a: Any, b: Any) -> bool:
    if isinstance(a, bytes) and isinstance(b, str):
        return a == b.encode()
    if isinstance(b, bytes) and isinstance(a, str):
        return b == a.encode()
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (type(a) is type(b) and a == b)
    return a == b


class Exchange:
    """An exchange in a vhost.

    Attributes: name, type ("direct"/"fanout"/"topic"/"headers"), durable, auto_delete,
    internal, arguments (dict), bindings (list of :class:`Binding` from this exchange),
    alternate (name of the alternate exchange or None).
    """

    __slots__ = ("name", "type", "durable", "auto_delete", "internal", "arguments",
                 "bindings", "_direct", "_cache", "alternate", "had_bindings", "incoming",
                 "vhost")

    def __init__(self, vhost, name: str, type_: str, durable: bool = False, auto_delete: bool = False,
                 internal: bool = False, arguments: dict | None = None):
        self.vhost = vhost
        self.name = name
        self.type = type_
        self.durable = durable
        self.auto_delete = auto_delete
        self.internal = internal
        self.arguments = arguments or {}
        ae = self.arguments.get("alternate-exchange")
        if isinstance(ae, bytes):
            ae = ae.decode("utf-8", "replace")
        self.alternate = ae
        self.bindings: list[Binding] = []
        self.incoming: list[Binding] = []  # exchange-to-exchange bindings into this exchange
        self._direct: dict[str, list] = {}
        self._cache: dict[str, tuple] = {}
        self.had_bindings = False

    # ------------------------------------------------------------------ bindings
    def find_binding(self, destination: Any, routing_key: str, arguments: dict) -> Binding | None:
        key = (id(destination), routing_key, _freeze(arguments or {}))
        for b in self.bindings:
            if b.destination is destination and b.key == key:
                return b
        return None

    def add_binding(self, b: Binding) -> bool:
        """Add ``b`` unless an identical binding exists (a duplicate is not an error)."""
        if self.find_binding(b.destination, b.routing_key, b.arguments) is not None:
            return False
        self.bindings.append(b)
        self.had_bindings = True
        self._rebuild()
        return True

    def remove_binding(self, b: Binding) -> None:
        try:
            self.bindings.remove(b)
        except ValueError:
            return
        self._rebuild()

    def remove_destination(self, destination: Any) -> list[Binding]:
        gone = [b for b in self.bindings if b.destination is destination]
        if gone:
            self.bindings = [b for b in self.bindings if b.destination is not destination]
            self._rebuild()
        return gone

    def _rebuild(self) -> None:
        self._cache = {}
        if self.type == "direct":
            d: dict[str, list] = {}
            for b in self.bindings:
                lst = d.setdefault(b.routing_key, [])
                if b.destination not in lst:
                    lst.append(b.destination)
            self._direct = d

    # ------------------------------------------------------------------ routing
    def route(self, routing_key: str, headers_fn) -> Iterable:
        """Destinations (queues and exchanges) for ``routing_key``; ``headers_fn()`` returns
        the message headers (decoded lazily, only for headers exchanges)."""
        t = self.type
        if t == "direct":
            return self._direct.get(routing_key, ())
        if t == "fanout":
            cached = self._cache.get("")
            if cached is None:
                seen: list = []
                for b in self.bindings:
                    if b.destination not in seen:
                        seen.append(b.destination)
                cached = self._cache[""] = tuple(seen)
            return cached
        if t == "topic":
            cached = self._cache.get(routing_key)
            if cached is None:
                words = routing_key.split(".") if routing_key else []
                seen = []
                for b in self.bindings:
                    if b.destination not in seen and topic_matches(b.words, words):
                        seen.append(b.destination)
                cached = tuple(seen)
                if len(self._cache) > 10000:
                    self._cache.clear()
                self._cache[routing_key] = cached
            return cached
        if t == "headers":
            headers = headers_fn()
            seen = []
            for b in self.bindings:
                if b.destination not in seen and _headers_match(b.arguments, headers):
                    seen.append(b.destination)
            return seen
        return ()
