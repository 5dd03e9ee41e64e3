"""JSON parsing with limits, run in a worker process for large request bodies (issue 41).

CPython's ``json`` decoder holds the GIL for the whole parse: 10 MB of ``[{},{},...]`` took
~0.3 s, and a thread would stall the broker's event loop as much as parsing on it. So the
management API sends a body above :data:`~.bodies.INLINE_PARSE` bytes to one worker process
(:class:`~.bodies.JsonParser`), which parses it, checks its nesting depth and number of values,
and sends back either the value (pickled: the loop only unpickles a value whose size the
limits bound) or a reason to refuse it. Only the standard library is imported here, so the
worker starts in a fraction of a second.

The worker is ``python -m spark_amqp.management.json_worker``, spoken to over its stdin and
stdout (not :mod:`multiprocessing`, whose spawn and forkserver modes import the parent's
``__main__`` script again in the child: a script that starts a broker without a main guard
started a second broker). Request: ``!QII`` (body length, max depth, max values or 0 = any)
then the body; answer: ``!Q`` length then the pickle of :func:`parse_checked`'s result. It
exits when its stdin closes, so it never outlives the broker.
"""

from __future__ import annotations

import json
import pickle
import struct
import sys
from typing import Any

__all__ = ["check_shape", "parse_checked", "REQUEST", "ANSWER"]

REQUEST = struct.Struct("!QII")
ANSWER = struct.Struct("!Q")


def check_shape(value: Any, max_depth: int, max_values: int | None) -> str | None:
    """Why ``value`` (parsed JSON) is too deep or too big, or ``None`` when it is not.

    Depth counts containers: ``{"a": [1]}`` is 2 deep. Every object, array, string, number,
    boolean and null counts as one value (object keys do not). Iterative, so any depth is safe.
    """
    stack = [(value, 1)]
    n = 0
    while stack:
        v, d = stack.pop()
        n += 1
        if max_values is not None and n > max_values:
            return f"the JSON body holds more than {max_values} values"
        if isinstance(v, dict):
            if d > max_depth:
                return f"the JSON body is nested deeper than {max_depth} levels"
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            if d > max_depth:
                return f"the JSON body is nested deeper than {max_depth} levels"
            stack.extend((x, d + 1) for x in v)
    return None


def parse_checked(raw: bytes, max_depth: int, max_values: int | None) -> tuple[bool, Any]:
    """``(True, value)`` for a JSON text within the limits, else ``(False, reason)``; never
    raises for bad input (RabbitMQ's reason for unparseable JSON is ``not_json``)."""
    try:
        value = json.loads(raw)
    except RecursionError:
        return False, f"the JSON body is nested deeper than {max_depth} levels"
    except (ValueError, UnicodeDecodeError):
        return False, "not_json"
    why = check_shape(value, max_depth, max_values)
    return (False, why) if why else (True, value)


def main() -> None:
    """The worker's loop (see the module docstring)."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = inp.read(REQUEST.size)
        if len(head) < REQUEST.size:
            return
        n, depth, values = REQUEST.unpack(head)
        raw = inp.read(n)
        if len(raw) < n:
            return
        data = pickle.dumps(parse_checked(raw, depth, values or None), 5)
        out.write(ANSWER.pack(len(data)) + data)
        out.flush()


if __name__ == "__main__":
    main()
