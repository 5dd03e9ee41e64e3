"""Values of the ``amqp`` data source's options: integers, numbers, booleans, choices and
comma-separated names parsed from Spark's option strings, and the one builder of their errors.
No I/O.

Shared by the source (queue mode :mod:`.source.queues.options`, stream mode
:mod:`.source.streams.options`), the sink (:mod:`.sink.options`) and :mod:`.connection_options`.
Each ``parse_*`` function reads one option from a mapping whose keys are lower-cased (Spark's
``CaseInsensitiveDict`` stores them so; lessons §1.4): it takes the option's documented spelling
(``maxInFlight``), looks it up lower-cased (``maxinflight``) and names it as documented in its
error. An absent option, or one whose value is None, gives ``default``. Values are read with
surrounding white space stripped; booleans and choices case-insensitively.

Errors are built by :meth:`OptionErrors.invalid`, which names the option, the value given and
what is allowed, as the caller's exception class, in one of the two wordings the parsers had
(tests and users match on them):

* with a ``subject`` (the source): ``Invalid value '0' for option 'prefetch' of the amqp
  source: allowed values are an integer >= 0.``
* without one (the sink and the connection options): ``option onReturn='drop' is not allowed;
  allowed: fail | ignore``, ``option maxInFlight='0' is not an integer in >= 1``,
  ``option mandatory='maybe' is not a boolean; allowed: true | false``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Type, Union

__all__ = ["OptionErrors", "BOOLEANS", "LENIENT_BOOLEANS", "parse_int", "parse_float",
           "parse_bool", "parse_choice", "parse_names", "parse_duration", "DURATION_UNITS"]

#: the boolean spellings of the source: ``true`` / ``false`` (any case)
BOOLEANS: Mapping[str, bool] = {"true": True, "false": False}
#: the boolean spellings of the sink: also ``1``/``yes``/``on`` and ``0``/``no``/``off``
LENIENT_BOOLEANS: Mapping[str, bool] = {
    "true": True, "1": True, "yes": True, "on": True,
    "false": False, "0": False, "no": False, "off": False}


@dataclass(frozen=True)
class OptionErrors:
    """How one parser reports a bad option value: its exception class and its wording.

    ``error``: the class raised (a ``ValueError`` subclass, e.g. the sink's
    ``SinkOptionError``). ``subject``: who owns the option, e.g. ``"the amqp source"``, for the
    source's wording; None for the sink's (see the module docstring).
    """

    error: Type[ValueError] = ValueError
    subject: Optional[str] = None

    def invalid(self, name: str, raw: Any, allowed: str, *,
                is_not: Optional[str] = None) -> ValueError:
        """The exception (returned, not raised) for value ``raw`` of option ``name``.

        Args:
            name: the option as documented (``maxInFlight``).
            raw: the value given, shown with ``repr``.
            allowed: what the option takes (``"true or false"``, ``"fail | ignore"``).
            is_not: the sink wording only: its own phrase for what ``raw`` is not, when that
                says more than ``allowed; allowed: <allowed>`` (``"an integer in >= 1"``).

        Returns:
            an instance of ``self.error``.
        """
        if self.subject is not None:
            return self.error(f"Invalid value {raw!r} for option '{name}' of {self.subject}: "
                              f"allowed values are {allowed}.")
        if is_not is None:
            return self.error(f"option {name}={raw!r} is not allowed; allowed: {allowed}")
        return self.error(f"option {name}={raw!r} is not {is_not}")


def parse_int(opts: Mapping[str, Any], key: str, errors: OptionErrors, *, minimum: int,
              maximum: Optional[int] = None, default: Optional[int] = None,
              note: Optional[str] = None) -> Optional[int]:
    """Option ``key`` as an integer in ``minimum..maximum`` (no upper bound when ``maximum`` is
    None); ``default`` when absent.

    ``note``: said in parentheses after the range in the error (a unit, what the bound is).
    Raises ``errors.error`` when the value is not a base-10 integer (``int()``'s syntax:
    ``+5``, ``1_000`` pass) or is out of range.
    """
    raw = opts.get(key.lower())
    if raw is None:
        return default
    try:
        value: Optional[int] = int(str(raw).strip())
    except ValueError:
        value = None
    if value is None or value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"{minimum}..{maximum}"
        integer = f"an integer >= {minimum}" if maximum is None else f"an integer in {bound}"
        tail = f" ({note})" if note else ""
        raise errors.invalid(key, raw, integer + tail, is_not=f"an integer in {bound}{tail}")
    return value


def parse_float(opts: Mapping[str, Any], key: str, errors: OptionErrors, *,
                default: Optional[float] = None, unit: str = "seconds") -> Optional[float]:
    """Option ``key`` as a finite number > 0 (in ``unit``, named in the error); ``default``
    when absent.

    Raises ``errors.error`` when the value is not a number (``float()``'s syntax), is not
    finite (``inf``, ``nan``) or is <= 0.
    """
    raw = opts.get(key.lower())
    if raw is None:
        return default
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise errors.invalid(key, raw, f"a number of {unit} > 0")
    return value


#: Spark's time suffixes (``JavaUtils.timeStringAsMs``, used by the Kafka source's
#: ``maxTriggerDelay``) -> seconds; no suffix means milliseconds, as there
DURATION_UNITS: Mapping[str, float] = {
    "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(opts: Mapping[str, Any], key: str, errors: OptionErrors, *,
                   default: Optional[float] = None, plain: Optional[str] = None,
                   minimum: int = 1) -> Optional[float]:
    """Option ``key`` as a duration, returned in **seconds** (the one duration type of every
    timeout and delay option); ``default`` (seconds) when absent.

    Every duration option takes Spark's syntax (``JavaUtils.timeStringAsMs``, as the Kafka
    source's ``maxTriggerDelay``): an integer and a unit of :data:`DURATION_UNITS`
    (``500ms``, ``30s``, ``15m``, ``1h``). A value without a unit is read by the option's
    ``plain`` unit, as documented for it: ``None`` (Spark's: an integer of milliseconds),
    ``"ms"`` (an integer of milliseconds >= ``minimum``, the ``...Ms`` options) or
    ``"seconds"`` (a number of seconds > 0, fractions allowed).

    Raises ``errors.error`` for another syntax, an unknown unit, or a duration that is not
    > 0; a plain number gets the wording of :func:`parse_int` / :func:`parse_float`.
    """
    raw = opts.get(key.lower())
    if raw is None:
        return default
    text = str(raw).strip().lower()
    digits = len(text) - len(text.lstrip("0123456789"))
    number, unit = text[:digits], text[digits:].strip()
    if number and unit in DURATION_UNITS:
        if int(number) <= 0:
            raise errors.invalid(key, raw, _DURATION_ALLOWED)
        return int(number) * DURATION_UNITS[unit]
    if plain == "seconds":
        return parse_float({key.lower(): raw}, key, errors)
    if plain == "ms":
        return parse_int({key.lower(): raw}, key, errors, minimum=minimum) / 1000.0
    if not number or unit or int(number) <= 0:
        raise errors.invalid(key, raw, _DURATION_ALLOWED)
    return int(number) * DURATION_UNITS["ms"]


_DURATION_ALLOWED = ("a duration > 0: an integer with a unit of " + " | ".join(DURATION_UNITS)
                     + " (e.g. 30s, 15m; no unit: ms)")


def parse_bool(opts: Mapping[str, Any], key: str, errors: OptionErrors, *, default: bool,
               spellings: Mapping[str, bool] = BOOLEANS) -> bool:
    """Option ``key`` as a boolean: one of ``spellings`` (lower-case, matched case-insensitively:
    :data:`BOOLEANS` or :data:`LENIENT_BOOLEANS`); ``default`` when absent.

    Raises ``errors.error`` for any other value (the error says "true or false" /
    "true | false" whatever the spellings).
    """
    raw = opts.get(key.lower())
    if raw is None:
        return default
    value = spellings.get(str(raw).strip().lower())
    if value is None:
        raise errors.invalid(key, raw, "true or false",
                             is_not="a boolean; allowed: true | false")
    return value


def parse_choice(opts: Mapping[str, Any], key: str, errors: OptionErrors,
                 choices: Union[Mapping[str, Any], Sequence[str]], *, default: Any = None,
                 shown: Optional[Sequence[str]] = None) -> Any:
    """Option ``key`` as one of ``choices`` (lower-case, matched case-insensitively);
    ``default`` when absent.

    ``choices``: a sequence of spellings, each its own value (the lower-cased spelling is
    returned), or a mapping spelling -> value (the value is returned). ``shown``: the
    spellings the error lists (default: all of ``choices``, in order, joined with `` | ``).
    Raises ``errors.error`` for any other value.
    """
    raw = opts.get(key.lower())
    if raw is None:
        return default
    spelling = str(raw).strip().lower()
    if spelling not in choices:
        raise errors.invalid(key, raw, " | ".join(shown if shown is not None else choices))
    return choices[spelling] if isinstance(choices, Mapping) else spelling


def parse_names(opts: Mapping[str, Any], key: str, errors: OptionErrors, *, noun: str,
                default: Optional[tuple] = None) -> Optional[tuple]:
    """Option ``key`` as comma-separated names (``"a, b"`` -> ``("a", "b")``, each stripped),
    e.g. queue or stream names; ``default`` when absent.

    ``noun``: what a name names (``"queue"``), in the errors. Raises ``errors.error`` for an
    empty name, a name listed twice, or a name over 255 UTF-8 bytes (an AMQP shortstr; that
    error shows the name rather than the whole value).
    """
    raw = opts.get(key.lower())
    if raw is None:
        return default
    names = tuple(n.strip() for n in str(raw).split(","))
    if any(not n for n in names):
        raise errors.invalid(key, raw, f"one or more non-empty {noun} names separated by commas")
    if len(set(names)) != len(names):
        raise errors.invalid(key, raw, f"distinct {noun} names (a {noun} is listed twice)")
    for n in names:
        if len(n.encode()) > 255:
            raise errors.invalid(key, n, f"{noun} names of at most 255 bytes (a shortstr)")
    return names
