"""Declarative option tables of the ``amqp`` data source: one :class:`Option` entry per option
(its name as the user writes it, kind, default, bounds, one-line doc), and one
:class:`OptionTable` per mode (queue-mode source, stream-mode source, sink) built from them.
No I/O.

From a table come: the known options (:attr:`OptionTable.known`, lower-cased key -> name; an
unknown option fails the parse, :meth:`OptionTable.lower_checked`), the parsing of each entry
(:meth:`OptionTable.parse`, through :mod:`.option_values`, which builds every error message:
the option, the value given and what is allowed), the defaults (:meth:`OptionTable.default`,
which the options' dataclasses use as their field defaults) and the docs' option tables
(:meth:`OptionTable.markdown`; ``tests/spark/test_option_tables.py`` checks each table in
``docs/`` equals the one generated here).

Keys arrive lower-cased from Spark (``pyspark.sql.datasource.CaseInsensitiveDict``; lessons
§1.4): a table looks every option up by ``name.lower()``. Cross-option rules (``queue`` and
``queues`` are exclusive, ``maxTriggerDelay`` needs ``minMessagesPerTrigger``, ...) stay in
each mode's parser, which reads the values from its table.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from .option_values import (BOOLEANS, OptionErrors, parse_bool, parse_choice, parse_duration,
                            parse_float, parse_int, parse_names)

__all__ = ["Option", "OptionTable", "KINDS", "unknown_options_error", "did_you_mean",
           "snake_case"]

#: what an entry's ``kind`` means: the :mod:`.option_values` parser :meth:`Option.parse` calls,
#: or ``text`` (the string as given) and ``custom`` (parsed by the mode's own code: JSON
#: objects, offsets, URIs, ...)
KINDS = ("int", "float", "bool", "choice", "names", "duration", "text", "custom")


def snake_case(name: str) -> str:
    """``"maxBytesPerTrigger"`` -> ``"max_bytes_per_trigger"``: an option's field name."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass(frozen=True)
class Option:
    """One option: how the user writes it, what it takes, its default and its doc.

    ``name``: the documented camelCase spelling (``maxInFlight``); Spark hands it over
    lower-cased (:attr:`key`). ``kind``: one of :data:`KINDS`. ``default``: the value when the
    option is absent (None: unset). ``doc``: the docs' "meaning" cell (Markdown, one line).
    ``shown_default``: the docs' "default" cell when :attr:`default` alone says too little
    (a derived default, a unit); else it is rendered from ``default``. ``section``: which docs
    table lists it (``main`` for the page of its mode; None: listed in no generated table).

    Bounds, by kind: ``minimum``/``maximum``/``note`` (int: the range, and what the error adds
    in parentheses); ``unit`` (float: named in the error, values > 0); ``choices``/``shown``
    (choice: spellings or spelling -> value, and the spellings the error lists);
    ``spellings`` (bool: :data:`.option_values.BOOLEANS` or ``LENIENT_BOOLEANS``); ``noun``
    (names: what each comma-separated name names); ``plain`` (duration: the unit of a value
    without one, :func:`.option_values.parse_duration`: None for Spark's milliseconds,
    ``"ms"``, ``"seconds"``; every duration is held in seconds).

    ``field``: the attribute of the mode's options dataclass that holds the value (``""``:
    the name in snake case, :attr:`attr`; None: held elsewhere, e.g. the connection options
    in ``conn``). The table fills the dataclass's defaults
    (:meth:`OptionTable.field_defaults`) and parses every entry that is not ``custom`` into
    its field (:meth:`OptionTable.parse_fields`), so an option is declared once.
    """

    name: str
    kind: str
    default: Any = None
    doc: str = ""
    shown_default: Optional[str] = None
    section: Optional[str] = "main"
    minimum: int = 0
    maximum: Optional[int] = None
    note: Optional[str] = None
    unit: str = "seconds"
    choices: Union[Mapping[str, Any], Sequence[str], None] = None
    shown: Optional[Sequence[str]] = None
    spellings: Optional[Mapping[str, bool]] = None
    noun: str = ""
    plain: Optional[str] = None
    field: Optional[str] = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name}: kind {self.kind!r} is not one of {KINDS}")

    @property
    def key(self) -> str:
        """The key Spark hands over: :attr:`name` lower-cased."""
        return self.name.lower()

    @property
    def attr(self) -> Optional[str]:
        """The options dataclass's field of this option (see ``field``), or None."""
        if self.field is None:
            return None
        return self.field or snake_case(self.name)

    def parse(self, opts: Mapping[str, Any], errors: OptionErrors, default: Any = None) -> Any:
        """This option's value in ``opts`` (lower-cased keys), or ``default`` when absent.

        Raises ``errors.error`` (the :mod:`.option_values` wording) for a value outside the
        kind and bounds; ``custom`` options are not parsed here (``TypeError``).
        """
        k = self.kind
        if k == "int":
            return parse_int(opts, self.name, errors, minimum=self.minimum, maximum=self.maximum,
                             default=default, note=self.note)
        if k == "float":
            return parse_float(opts, self.name, errors, default=default, unit=self.unit)
        if k == "bool":
            return parse_bool(opts, self.name, errors, default=default, spellings=self.spellings or BOOLEANS)
        if k == "choice":
            return parse_choice(opts, self.name, errors, self.choices, default=default,
                                shown=self.shown)
        if k == "names":
            return parse_names(opts, self.name, errors, noun=self.noun, default=default)
        if k == "duration":
            return parse_duration(opts, self.name, errors, default=default, plain=self.plain,
                                  minimum=max(self.minimum, 1))
        if k == "text":
            raw = opts.get(self.key)
            return default if raw is None else raw
        raise TypeError(f"option {self.name} is parsed by its mode's own code (kind custom)")

    def default_cell(self) -> str:
        """The docs' "default" cell: :attr:`shown_default`, else ``default`` rendered."""
        if self.shown_default is not None:
            return self.shown_default
        if self.default is None:
            return "unset"
        if isinstance(self.default, bool):
            return f"`{str(self.default).lower()}`"
        if isinstance(self.default, float) and self.default.is_integer():
            return f"`{int(self.default)}`"
        return f"`{self.default}`"

    def field_default(self) -> Any:
        """The dataclass default of :attr:`attr`: :attr:`default`, in seconds for a duration
        whose plain unit is milliseconds (the table gives it as the user writes it)."""
        if self.kind == "duration" and self.plain == "ms" and self.default is not None:
            return self.default / 1000.0
        return self.default


class OptionTable:
    """The options of one mode (queue-mode source, stream-mode source or sink).

    Args:
        options: the entries, in the docs' order; names unique case-insensitively.
        errors: how bad values are reported (the mode's exception class and wording).
        unknown: builds the exception for a list of unknown lower-cased keys (sorted), given
            this table (for the list of known options).
    """

    def __init__(self, options: Iterable[Option], errors: OptionErrors,
                 unknown: Callable[[list[str], "OptionTable"], Exception]):
        self.options: tuple[Option, ...] = tuple(options)
        self.errors = errors
        self._unknown = unknown
        self._by_key = {o.key: o for o in self.options}
        if len(self._by_key) != len(self.options):
            raise ValueError("an option is listed twice")
        #: lower-cased key -> documented name, for every option of the table
        self.known: dict[str, str] = {o.key: o.name for o in self.options}

    def __getitem__(self, name: str) -> Option:
        return self._by_key[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._by_key

    def default(self, name: str) -> Any:
        """The default of option ``name`` (as the user writes it)."""
        return self[name].default

    @property
    def fields(self) -> dict[str, Option]:
        """The options dataclass's field -> its entry, for every entry that has a field (the
        first entry of a field shared by two spellings, e.g. ``queue``/``queues``)."""
        out: dict[str, Option] = {}
        for o in self.options:
            if o.attr is not None:
                out.setdefault(o.attr, o)
        return out

    def field_defaults(self, cls: type) -> type:
        """Class decorator (under ``@dataclass``): give every annotated field of ``cls`` that
        an entry names its default from the table (:meth:`Option.field_default`; a field the
        class body sets keeps its own). Raises ``TypeError`` when an entry names a field that
        ``cls`` does not declare: the table and the dataclass cannot drift apart."""
        names: set[str] = set()
        for base in reversed(cls.__mro__):
            names.update(getattr(base, "__annotations__", {}))
        missing = sorted(a for a in self.fields if a not in names)
        if missing:
            raise TypeError(f"{cls.__name__} does not declare the field(s) {missing} that its "
                            "option table names")
        own = cls.__dict__.get("__annotations__", {})
        for attr, o in self.fields.items():
            if attr in own and attr not in cls.__dict__:
                value = o.field_default()
                if isinstance(value, (dict, list, set)):
                    value = dataclasses.field(default_factory=lambda v=value: type(v)(v))
                setattr(cls, attr, value)
        return cls

    def parse_fields(self, opts: Mapping[str, Any], skip: Iterable[str] = ()) -> dict[str, Any]:
        """``{field: value}`` of every entry that has a field and is not ``custom``, parsed by
        the entry (its table default when absent), but the fields in ``skip`` (those the mode's
        parser derives from several options). The mode's parser passes it to its dataclass
        with what it parsed itself."""
        skip = set(skip)
        return {a: o.parse(opts, self.errors, o.field_default())
                for a, o in self.fields.items() if o.kind != "custom" and a not in skip}
    def parse(self, opts: Mapping[str, Any], name: str, **kw: Any) -> Any:
        """Option ``name`` of ``opts`` (lower-cased keys), parsed by its entry; its table
        default (:meth:`Option.field_default`) when absent unless ``default=`` is given (a
        default derived from other options)."""
        option = self[name]
        return option.parse(opts, self.errors, kw.get("default", option.field_default()))

    def lower_checked(self, opts: Mapping[Any, Any], accepted: Iterable[str] = ()) -> dict:
        """``opts`` with lower-cased keys, after checking that every key is an option of this
        table or one of ``accepted`` (lower-cased keys accepted and ignored).

        Raises the exception of ``unknown`` (given at construction) naming the unknown keys.
        """
        o = {str(k).lower(): v for k, v in opts.items()}
        extra = set(accepted)
        bad = sorted(k for k in o if k not in self._by_key and k not in extra)
        if bad:
            raise self._unknown(bad, self)
        return o

    def markdown(self, section: str = "main") -> str:
        """The docs' table of the options of ``section``: ``| option | meaning | default |``,
        one row per option, in table order (``|`` in a cell is escaped)."""
        rows = ["| option | meaning | default |", "|---|---|---|"]
        for o in self.options:
            if o.section == section:
                cells = (f"`{o.name}`", o.doc, o.default_cell())
                rows.append("| " + " | ".join(c.replace("|", "\\|").replace("\\\\|", "\\|")
                                              for c in cells) + " |")
        return "\n".join(rows) + "\n"


def did_you_mean(keys: Iterable[str], known: Mapping[str, str]) -> str:
    """`` (did you mean 'maxMessagesPerTrigger'?)`` for the unknown ``keys`` (lower-cased, as
    Spark hands them) that are close to a known option (``known``: lower-cased key -> the
    docs' spelling), or "" when none is. Closeness is :func:`difflib.get_close_matches`'s
    (ratio >= 0.6), as click's "Did you mean" of the command line uses; with several unknown
    keys each suggestion names the key it is for."""
    import difflib

    pairs = []
    for key in keys:
        match = difflib.get_close_matches(str(key).lower(), list(known), n=1, cutoff=0.6)
        if match:
            pairs.append((key, known[match[0]]))
    if not pairs:
        return ""
    if len(pairs) == 1 and len(list(keys)) == 1:
        return f" (did you mean {pairs[0][1]!r}?)"
    return " (did you mean " + ", ".join(f"{good!r} for {bad!r}" for bad, good in pairs) + "?)"


def unknown_options_error(what: str, hint: Callable[[list[str]], str] = lambda keys: ""
                          ) -> Callable[[list[str], OptionTable], ValueError]:
    """The source's ``unknown`` for :class:`OptionTable`: ``Unknown option(s) 'a', 'b' for
    {what} (did you mean 'A'?); known options: <every name, sorted>.{hint(keys)}`` as a
    ``ValueError`` (the suggestion: :func:`did_you_mean`).

    ``hint``: a sentence (with a leading space) for the unknown keys, or "" (e.g. naming the
    other mode whose options they are)."""
    def build(keys: list[str], table: OptionTable) -> ValueError:
        return ValueError(f"Unknown option(s) {', '.join(repr(u) for u in keys)} for {what}"
                          f"{did_you_mean(keys, table.known)}; "
                          f"known options: {', '.join(sorted(table.known.values()))}."
                          f"{hint(keys)}")
    return build
