"""Unit tests of the option values shared by the amqp source and sink (``spark.option_values``):
what each parser accepts and returns, and the two wordings of its error (no Spark, no broker)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_amqp.spark.option_values import (BOOLEANS, LENIENT_BOOLEANS, OptionErrors,
                                            parse_bool, parse_choice, parse_float, parse_int,
                                            parse_names)

SETTINGS = settings(max_examples=300, deadline=None)


class MyError(ValueError):
    pass


SOURCE = OptionErrors(MyError, subject="the amqp source")   # the source's wording
SINK = OptionErrors(MyError)                                # the sink's wording
BOTH = pytest.mark.parametrize("errors", [SOURCE, SINK], ids=["source", "sink"])

#: white space int(), float() and str.strip() all drop around a value
padding = st.text(alphabet=" \t\n\r\x0b\x0c", max_size=3)


def _reference_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


# -- the error builder ----------------------------------------------------------------------

def test_the_two_wordings_to_the_byte():
    e = SOURCE.invalid("prefetch", "-1", "an integer >= 0")
    assert type(e) is MyError
    assert str(e) == ("Invalid value '-1' for option 'prefetch' of the amqp source: "
                      "allowed values are an integer >= 0.")
    assert str(SINK.invalid("onReturn", "drop", "fail | ignore")) == \
        "option onReturn='drop' is not allowed; allowed: fail | ignore"
    # the sink wording's own phrase replaces "allowed; allowed: ..."; the source's ignores it
    assert str(SINK.invalid("maxInFlight", "0", "an integer >= 1",
                            is_not="an integer in >= 1")) == \
        "option maxInFlight='0' is not an integer in >= 1"
    assert str(SOURCE.invalid("x", "0", "an integer >= 1", is_not="an integer in >= 1")) == \
        "Invalid value '0' for option 'x' of the amqp source: allowed values are an integer >= 1."
    assert OptionErrors().error is ValueError and OptionErrors().subject is None


@SETTINGS
@given(name=st.text(min_size=1, max_size=20), raw=st.text(max_size=20),
       allowed=st.text(min_size=1, max_size=30), subject=st.none() | st.text(min_size=1))
def test_an_error_names_the_option_the_value_and_what_is_allowed(name, raw, allowed, subject):
    e = OptionErrors(MyError, subject).invalid(name, raw, allowed)
    assert isinstance(e, MyError)
    assert name in str(e) and repr(raw) in str(e) and allowed in str(e)


# -- integers -------------------------------------------------------------------------------

@SETTINGS
@given(minimum=st.integers(-10, 10), span=st.none() | st.integers(0, 70000),
       value=st.integers(-100, 100000), left=padding, right=padding,
       plus=st.booleans())
def test_int_accepts_exactly_the_integers_in_range(minimum, span, value, left, right, plus):
    maximum = None if span is None else minimum + span
    raw = f"{left}{'+' if plus and value >= 0 else ''}{value}{right}"
    opts = {"maxinflight": raw}
    if value < minimum or (maximum is not None and value > maximum):
        with pytest.raises(MyError) as ei:
            parse_int(opts, "maxInFlight", SINK, minimum=minimum, maximum=maximum)
        bound = f">= {minimum}" if maximum is None else f"{minimum}..{maximum}"
        assert str(ei.value) == f"option maxInFlight={raw!r} is not an integer in {bound}"
    else:
        assert parse_int(opts, "maxInFlight", SINK, minimum=minimum, maximum=maximum) == value


@SETTINGS
@given(raw=st.text(max_size=12))
def test_int_refuses_what_int_refuses(raw):
    expected = _reference_int(raw.strip())
    opts = {"prefetch": raw}
    if expected is None or expected < 0:
        with pytest.raises(MyError, match="option 'prefetch' of the amqp source"):
            parse_int(opts, "prefetch", SOURCE, minimum=0)
    else:
        assert parse_int(opts, "prefetch", SOURCE, minimum=0) == expected


@BOTH
def test_int_absent_or_none_gives_the_default_and_the_key_is_looked_up_lower_cased(errors):
    assert parse_int({}, "maxInFlight", errors, minimum=1) is None
    assert parse_int({}, "maxInFlight", errors, minimum=1, default=7) == 7
    assert parse_int({"maxinflight": None}, "maxInFlight", errors, minimum=1, default=7) == 7
    assert parse_int({"maxinflight": " 9 "}, "maxInFlight", errors, minimum=1, default=7) == 9
    # the keys are lower-cased by the caller (Spark): a camelCase key is not looked at
    assert parse_int({"maxInFlight": "9"}, "maxInFlight", errors, minimum=1, default=7) == 7
    with pytest.raises(MyError):   # an empty value is a bad value, not an absent option
        parse_int({"maxinflight": ""}, "maxInFlight", errors, minimum=1, default=7)


def test_int_errors_with_a_maximum_and_a_note():
    opts = {"heartbeat": "70000"}
    with pytest.raises(MyError) as ei:
        parse_int(opts, "heartbeat", SINK, minimum=0, maximum=65535, note="seconds")
    assert str(ei.value) == "option heartbeat='70000' is not an integer in 0..65535 (seconds)"
    with pytest.raises(MyError) as ei:
        parse_int(opts, "heartbeat", SOURCE, minimum=0, maximum=65535, note="seconds")
    assert str(ei.value) == ("Invalid value '70000' for option 'heartbeat' of the amqp source: "
                             "allowed values are an integer in 0..65535 (seconds).")
    with pytest.raises(MyError) as ei:
        parse_int({"prefetch": "x"}, "prefetch", SOURCE, minimum=1)
    assert str(ei.value).endswith("allowed values are an integer >= 1.")


# -- numbers --------------------------------------------------------------------------------

@SETTINGS
@given(value=st.floats(allow_nan=True, allow_infinity=True), left=padding, right=padding)
def test_float_accepts_exactly_the_finite_numbers_above_zero(value, left, right):
    raw = f"{left}{value!r}{right}"
    opts = {"readtimeout": raw}
    if math.isfinite(value) and value > 0:
        assert parse_float(opts, "readTimeout", SOURCE) == value
    else:
        with pytest.raises(MyError) as ei:
            parse_float(opts, "readTimeout", SOURCE)
        assert str(ei.value) == (f"Invalid value {raw!r} for option 'readTimeout' of the amqp "
                                 "source: allowed values are a number of seconds > 0.")


@BOTH
def test_float_default_unit_and_bad_text(errors):
    assert parse_float({}, "connectionTimeout", errors) is None
    assert parse_float({}, "connectionTimeout", errors, default=5.0) == 5.0
    assert parse_float({"connectiontimeout": "1e-3"}, "connectionTimeout", errors) == 0.001
    for bad in ("", "soon", "0", "-0.0", "nan", "-inf", "1,5"):
        with pytest.raises(MyError, match="connectionTimeout"):
            parse_float({"connectiontimeout": bad}, "connectionTimeout", errors)
    with pytest.raises(MyError) as ei:
        parse_float({"t": "0"}, "t", SINK, unit="milliseconds")
    assert str(ei.value) == "option t='0' is not allowed; allowed: a number of milliseconds > 0"


# -- booleans -------------------------------------------------------------------------------

@SETTINGS
@given(spelling=st.sampled_from(sorted(LENIENT_BOOLEANS)), left=padding, right=padding,
       upper=st.lists(st.booleans(), min_size=5, max_size=5))
def test_bool_spellings_in_any_case(spelling, left, right, upper):
    cased = "".join(c.upper() if u else c for c, u in zip(spelling, upper + [False] * 9))
    opts = {"declare": f"{left}{cased}{right}"}
    assert parse_bool(opts, "declare", SINK, default=None,
                      spellings=LENIENT_BOOLEANS) is LENIENT_BOOLEANS[spelling]
    if spelling in BOOLEANS:
        assert parse_bool(opts, "declare", SOURCE, default=None) is BOOLEANS[spelling]
    else:   # the source's booleans are true/false only
        with pytest.raises(MyError) as ei:
            parse_bool(opts, "declare", SOURCE, default=None)
        assert str(ei.value) == (f"Invalid value {opts['declare']!r} for option 'declare' of "
                                 "the amqp source: allowed values are true or false.")


def test_bool_default_and_sink_wording():
    assert parse_bool({}, "durable", SOURCE, default=True) is True
    assert parse_bool({"durable": None}, "durable", SOURCE, default=False) is False
    assert parse_bool({"includeheaders": "FALSE"}, "includeHeaders", SOURCE, default=True) is False
    with pytest.raises(MyError) as ei:
        parse_bool({"mandatory": "maybe"}, "mandatory", SINK, default=False,
                   spellings=LENIENT_BOOLEANS)
    assert str(ei.value) == "option mandatory='maybe' is not a boolean; allowed: true | false"
    with pytest.raises(MyError):
        parse_bool({"mandatory": ""}, "mandatory", SINK, default=False,
                   spellings=LENIENT_BOOLEANS)


# -- choices --------------------------------------------------------------------------------

def test_choice_from_a_sequence_returns_the_lower_cased_spelling():
    modes = ("fail", "ignore")
    assert parse_choice({}, "onReturn", SINK, modes, default="fail") == "fail"
    assert parse_choice({"onreturn": " IGNORE "}, "onReturn", SINK, modes) == "ignore"
    with pytest.raises(MyError) as ei:
        parse_choice({"onreturn": "drop"}, "onReturn", SINK, modes)
    assert str(ei.value) == "option onReturn='drop' is not allowed; allowed: fail | ignore"
    with pytest.raises(MyError) as ei:
        parse_choice({"onreturn": "drop"}, "onReturn", SOURCE, modes)
    assert str(ei.value) == ("Invalid value 'drop' for option 'onReturn' of the amqp source: "
                             "allowed values are fail | ignore.")


def test_choice_from_a_mapping_returns_the_value_and_lists_what_is_shown():
    table = {"1": 1, "transient": 1, "non-persistent": 1, "2": 2, "persistent": 2}
    shown = ("1", "transient", "2", "persistent")
    assert parse_choice({"deliverymode": "Non-Persistent"}, "deliveryMode", SINK, table,
                        shown=shown) == 1
    assert parse_choice({"deliverymode": "2"}, "deliveryMode", SINK, table, shown=shown) == 2
    assert parse_choice({}, "deliveryMode", SINK, table, shown=shown) is None
    with pytest.raises(MyError) as ei:
        parse_choice({"deliverymode": "3"}, "deliveryMode", SINK, table, shown=shown)
    assert str(ei.value) == ("option deliveryMode='3' is not allowed; allowed: "
                             "1 | transient | 2 | persistent")
    with pytest.raises(MyError) as ei:   # without shown: every spelling, in order
        parse_choice({"deliverymode": "3"}, "deliveryMode", SINK, table)
    assert str(ei.value).endswith("allowed: 1 | transient | non-persistent | 2 | persistent")


@SETTINGS
@given(choices=st.lists(st.text(alphabet="abcxyz-_0", min_size=1, max_size=6), min_size=1,
                        max_size=5, unique=True),
       raw=st.text(alphabet="abcxyzABC-_0 ", max_size=8))
def test_choice_accepts_exactly_the_listed_spellings(choices, raw):
    opts = {"messageid": raw}
    if raw.strip().lower() in choices:
        assert parse_choice(opts, "messageId", SINK, tuple(choices)) == raw.strip().lower()
    else:
        with pytest.raises(MyError) as ei:
            parse_choice(opts, "messageId", SINK, tuple(choices))
        assert str(ei.value).endswith("allowed: " + " | ".join(choices))


# -- comma-separated names ------------------------------------------------------------------

def test_names_split_strip_and_refuse_empty_repeated_or_long_names():
    assert parse_names({}, "queues", SOURCE, noun="queue") is None
    assert parse_names({}, "queues", SOURCE, noun="queue", default=()) == ()
    assert parse_names({"queues": " a , b ,c"}, "queues", SOURCE, noun="queue") == \
        ("a", "b", "c")
    assert parse_names({"stream": "é" * 127}, "stream", SOURCE, noun="stream") == ("é" * 127,)
    with pytest.raises(MyError) as ei:
        parse_names({"queues": "a,,b"}, "queues", SOURCE, noun="queue")
    assert str(ei.value) == ("Invalid value 'a,,b' for option 'queues' of the amqp source: "
                             "allowed values are one or more non-empty queue names separated "
                             "by commas.")
    with pytest.raises(MyError) as ei:
        parse_names({"stream": "a, a"}, "stream", SINK, noun="stream")
    assert str(ei.value) == ("option stream='a, a' is not allowed; allowed: distinct stream "
                             "names (a stream is listed twice)")
    long = "é" * 128   # 256 UTF-8 bytes: the error shows that name, not the whole value
    with pytest.raises(MyError) as ei:
        parse_names({"queue": f"ok,{long}"}, "queue", SOURCE, noun="queue")
    assert str(ei.value) == (f"Invalid value {long!r} for option 'queue' of the amqp source: "
                             "allowed values are queue names of at most 255 bytes (a shortstr).")


@SETTINGS
@given(names=st.lists(st.text(alphabet="abé-. ", max_size=4), min_size=1, max_size=5))
def test_names_accept_exactly_distinct_non_empty_shortstrs(names):
    raw = ",".join(names)
    stripped = [n.strip() for n in names]
    ok = (all(stripped) and len(set(stripped)) == len(stripped)
          and all(len(n.encode()) <= 255 for n in stripped))
    if ok:
        assert parse_names({"queues": raw}, "queues", SOURCE, noun="queue") == tuple(stripped)
    else:
        with pytest.raises(MyError, match="option 'queues'"):
            parse_names({"queues": raw}, "queues", SOURCE, noun="queue")


def test_one_duration_type_in_seconds_whatever_a_plain_number_means():
    """Every timeout and delay option is a duration held in seconds: Spark's syntax (an integer
    and a unit) everywhere, and a value without a unit in the option's documented plain unit
    (Spark's milliseconds, the ...Ms options' milliseconds, or seconds)."""
    from spark_amqp.spark.option_values import parse_duration

    def d(raw, plain):
        return parse_duration({"t": raw}, "t", SOURCE, plain=plain)

    for plain in (None, "ms", "seconds"):
        assert d("30s", plain) == 30.0 and d("500ms", plain) == 0.5 and d("2m", plain) == 120.0
        assert parse_duration({}, "t", SOURCE, default=7.0, plain=plain) == 7.0
        for bad in ("0s", "3 weeks", "-1s", "1.5s"):
            with pytest.raises(MyError, match="option 't'"):
                d(bad, plain)
    assert d("1500", None) == 1.5                       # Spark's: milliseconds
    assert d("1500", "ms") == 1.5                       # confirmTimeoutMs=1500
    assert d("1.5", "seconds") == 1.5 and d("1e-3", "seconds") == 0.001
    with pytest.raises(MyError, match="an integer >= 1"):
        d("1.5", "ms")                                  # the ...Ms options: integers
    with pytest.raises(MyError, match=r"a number of seconds > 0"):
        d("soon", "seconds")
    with pytest.raises(MyError, match=r"us \| ms \| s"):
        d("soon", None)
