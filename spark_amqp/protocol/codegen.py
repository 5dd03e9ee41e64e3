"""Generates :mod:`.methods`, the AMQP 0-9-1 method classes, from the method table.

The table is ``amqp0-9-1.tsv`` beside this file: one row per method with class/method ids,
synchronous flag, response methods, fields with wire types, and whether the method carries
content. It was derived from the seeds (0-9-1 reference [002], RabbitMQ's complete reference
[004]) and includes RabbitMQ's extensions (confirm.select, basic.nack, exchange.bind/unbind,
connection.blocked/unblocked/update-secret) and the ``access`` class RabbitMQ still accepts.

For every row a class is written with ``__slots__`` and annotations for its fields, a typed
``__init__``, an ``encode()`` returning the method payload (class id, method id, arguments),
``frame_parts(channel)`` returning the whole method frame but its frame-end octet as a tuple
of bytes (the frame header packed together with the ids and the first fixed fields),
``message_bytes(...)`` (content methods; the others inherit :class:`.method_base.Method`'s)
and a ``decode(buf, off, end)`` classmethod, each specialised to the
method's fields: consecutive fixed-width fields and bit runs are packed with a single
``struct`` call, a lone octet of bits and short-string lengths index a table of one-byte
``bytes``, and decoding builds the instance without calling ``__init__``.
Bit packing follows the 0-9-1 spec §4.2.5.2: consecutive bits share octets from the low bit up.

The output is checked in (``spark_amqp/protocol/methods.py``), so that importing the codec
compiles nothing; so are the field-table codec and the basic properties' codec that
:mod:`.codegen_values` generates (``tables.py``, ``property_codec.py``).
``tests/protocol/test_codegen.py`` checks that regenerating gives the same files. After
changing the table or a generator, run::

    python -m spark_amqp.protocol.codegen          # rewrites the stale generated modules
    python -m spark_amqp.protocol.codegen --check  # exit status 1 when one is stale
"""

from __future__ import annotations

import argparse
import io
import keyword
import struct
import sys
from pathlib import Path
from typing import Any

from .method_base import FIXED_TYPES

__all__ = ["TABLE_PATH", "MODULE_PATH", "read_table", "parse_table", "render_methods",
           "build_method", "generated_files", "main"]

TABLE_PATH = Path(__file__).with_name("amqp0-9-1.tsv")
MODULE_PATH = Path(__file__).with_name("methods.py")

_DEFAULTS = {"octet": "0", "short": "0", "long": "0", "longlong": "0", "timestamp": "0",
             "bit": "False", "shortstr": "''", "longstr": "b''", "table": "None"}
#: the Python type of each AMQP type, as annotated (the encoders also take bytes for shortstr
#: and str for longstr, see values.to_bytes)
_PYTYPES = {"octet": "int", "short": "int", "long": "int", "longlong": "int",
            "timestamp": "int", "bit": "bool", "shortstr": "str", "longstr": "bytes",
            "table": "dict[str, Any] | None"}


def camel(name: str) -> str:
    """``"start-ok"`` → ``"StartOk"``."""
    return "".join(part.capitalize() for part in name.split("-"))


def pyname(name: str) -> str:
    """A field's Python name: ``"no-wait"`` → ``"no_wait"``, keywords get a trailing ``_``."""
    n = name.replace("-", "_")
    return n + "_" if keyword.iskeyword(n) else n


def read_table() -> str:
    """The method table's text."""
    return TABLE_PATH.read_text(encoding="utf-8")


def parse_table(text: str) -> list[dict[str, Any]]:
    """The table's rows: class_name, class_id, method_name, method_id, synchronous (bool),
    responses (method names in the same class), fields ([(name, type)]), has_content."""
    rows = []
    with io.StringIO(text) as fh:
        header = fh.readline().rstrip("\n").split("\t")
        for line in fh:
            line = line.rstrip("\n")
            if not line:
                continue
            row = dict(zip(header, line.split("\t")))
            fields = []
            if row["fields"] != "-":
                for item in row["fields"].split(","):
                    n, t = item.split(":")
                    if t not in _DEFAULTS:
                        raise ValueError(f"{row['class_name']}.{row['method_name']}: unknown "
                                         f"field type {t!r}")
                    fields.append((n, t))
            rows.append({
                "class_name": row["class_name"], "class_id": int(row["class_id"]),
                "method_name": row["method_name"], "method_id": int(row["method_id"]),
                "synchronous": row["synchronous"] == "y",
                "responses": [] if row["response_methods"] == "-"
                else row["response_methods"].split(","),
                "fields": fields, "has_content": row["has_content"] == "y",
            })
    return rows


def _groups(fields: list[tuple[str, str]]) -> list[tuple[str, Any]]:
    """Split fields into ('fixed', [(name, type)…]) runs, with bits inside runs, and others."""
    out: list[tuple[str, Any]] = []
    run: list[tuple[str, str]] = []
    for name, typ in fields:
        if typ in FIXED_TYPES or typ == "bit":
            run.append((name, typ))
        else:
            if run:
                out.append(("fixed", run))
                run = []
            out.append((typ, name))
    if run:
        out.append(("fixed", run))
    return out


def _fixed_layout(run: list[tuple[str, str]]):
    """Return (struct format, items) where items are ('v', name) or ('bits', [names])."""
    fmt = ">"
    items: list[tuple[str, Any]] = []
    bits: list[str] = []
    for name, typ in run:
        if typ == "bit":
            bits.append(name)
            if len(bits) == 8:
                fmt += "B"
                items.append(("bits", bits))
                bits = []
            continue
        if bits:
            fmt += "B"
            items.append(("bits", bits))
            bits = []
        fmt += FIXED_TYPES[typ][0]
        items.append(("v", name))
    if bits:
        fmt += "B"
        items.append(("bits", bits))
    return fmt, items


def _method_source(row: dict[str, Any], structs: set[str]) -> list[str]:
    """The functions of one method class, unindented; the struct formats used go to
    ``structs`` (module-level ``_pack_<fmt>`` / ``_unpack_<fmt>``)."""
    class_name, class_id = row["class_name"], row["class_id"]
    method_name, method_id = row["method_name"], row["method_id"]
    pyfields = [(pyname(n), t) for n, t in row["fields"]]
    names = [n for n, _ in pyfields]
    full = f"{class_name}.{method_name}"
    prefix = repr(struct.pack(">HH", class_id, method_id))

    # ------------------------------------------------------------------ __init__
    params = "".join(f", {n}: {_PYTYPES[t]} = {_DEFAULTS[t]}" for n, t in pyfields)
    init = [f"def __init__(self{params}) -> None:"]
    init += [f"    self.{n} = {n}" for n in names] or ["    pass"]

    # ------------------------------------------------------------------ encode / decode
    enc_pre: list[str] = []     # statements before the join
    enc_parts: list[str] = []   # expressions joined into the payload
    size_terms: list[str] = ["4"]  # the payload size: class and method ids, then the fields
    first_fixed: tuple[str, list[str]] | None = None  # first group's format and arguments
    qual = f"{camel(class_name)}.{camel(method_name)}"
    dec = ["@classmethod", f"def decode(cls, buf: bytes, off: int, end: int) -> {qual}:",
           "    try:"]
    for gi, (kind, payload) in enumerate(_groups(pyfields)):
        if kind == "fixed" and gi > 0 and len(payload) <= 8 and all(t == "bit" for _, t in payload):
            # a lone octet of bits: index the one-byte table instead of calling struct
            bits = [b for b, _ in payload]
            enc_parts.append("_B[" + " | ".join(
                f"({1 << j} if self.{b} else 0)" for j, b in enumerate(bits)) + "]")
            size_terms.append("1")
            dec.append("        _bits = buf[off]")
            dec.append("        off += 1")
            for j, b in enumerate(bits):
                dec.append(f"        {b} = _bits & {1 << j} != 0")
            continue
        if kind == "fixed":
            fmt, items = _fixed_layout(payload)
            enc_args = []
            dec_targets = []
            for i, (ik, iv) in enumerate(items):
                if ik == "v":
                    enc_args.append(f"self.{iv}")
                    dec_targets.append(iv)
                else:
                    enc_args.append("(" + " | ".join(
                        f"({1 << j} if self.{b} else 0)" for j, b in enumerate(iv)) + ")")
                    dec_targets.append(f"_bits{i}")
            efmt = fmt
            size_terms.append(str(struct.calcsize(fmt)))
            if gi == 0:  # fold the class and method ids into the first pack
                first_fixed = (fmt, list(enc_args))
                efmt = ">HH" + fmt[1:]
                enc_args = [str(class_id), str(method_id)] + enc_args
            structs.update((fmt, efmt))
            enc_parts.append(f"_pack_{efmt[1:]}({', '.join(enc_args)})")
            dec.append(f"        {', '.join(dec_targets)}, = _unpack_{fmt[1:]}(buf, off)")
            dec.append(f"        off += {struct.calcsize(fmt)}")
            for i, (ik, iv) in enumerate(items):
                if ik == "bits":
                    for j, b in enumerate(iv):
                        dec.append(f"        {b} = _bits{i} & {1 << j} != 0")
            continue
        if gi == 0:
            enc_parts.append(prefix)
        n = payload
        if kind == "shortstr":
            enc_pre.append(f"    _s{gi} = self.{n}")
            enc_pre.append(f"    _s{gi} = _s{gi}.encode() if _s{gi}.__class__ is str "
                           f"else _to_bytes(_s{gi}, '{full} {n}')")
            enc_parts.append(f"_B[len(_s{gi})]")  # IndexError when longer than 255
            enc_parts.append(f"_s{gi}")
            size_terms.append(f"1 + len(_s{gi})")
            # running past ``end`` is caught by the final ``off != end`` check, or (when the
            # bytes beyond are not UTF-8) in the UnicodeDecodeError handler below
            dec.append("        _e = off + 1 + buf[off]")
            dec.append(f"        {n} = buf[off + 1:_e].decode()")
            dec.append("        off = _e")
        elif kind == "longstr":
            enc_pre.append(f"    _s{gi} = self.{n}")
            enc_pre.append(f"    if _s{gi}.__class__ is not bytes:")
            enc_pre.append(f"        _s{gi} = _to_bytes(_s{gi}, '{full} {n}')")
            enc_parts.append(f"_u32(len(_s{gi}))")
            enc_parts.append(f"_s{gi}")
            size_terms.append(f"4 + len(_s{gi})")
            dec.append("        _e = off + 4 + _u32f(buf, off)[0]")
            dec.append("        if _e > end:")
            dec.append(f"            raise FrameError('{full} {n}: long string runs past the end of the frame')")
            dec.append(f"        {n} = buf[off + 4:_e]")
            dec.append("        off = _e")
        else:  # table
            enc_pre.append(f"    _s{gi} = _encode_table(self.{n})")
            enc_parts.append(f"_s{gi}")
            size_terms.append(f"len(_s{gi})")
            dec.append(f"        {n}, off = _decode_table(buf, off, end, 0)")
    # frame_parts(channel): the whole method frame but its frame-end octet, as a tuple of
    # bytes, the frame header packed together with the ids and the first fixed fields
    hfmt = ">BHIHH" + (first_fixed[0][1:] if first_fixed else "")
    structs.add(hfmt)
    # constants first so that they fold: "9 + len(_s1) + len(_s2)"
    const = sum(int(t.split(" + ")[0]) if " + " in t else int(t) if t.isdigit() else 0
                for t in size_terms)
    size = " + ".join([str(const)] + [t.split(" + ")[-1] for t in size_terms if not t.isdigit()])
    head = (f"_pack_{hfmt[1:]}(1, channel, {size}, {class_id}, {method_id}"
            + "".join(", " + a for a in (first_fixed[1] if first_fixed else [])) + ")")
    fparts = [head] + enc_parts[1:]
    tail = "mid, props, bhead, body, b'\\xce'"
    sig_parts = "frame_parts(self, channel: int) -> tuple[bytes, ...]"
    sig_msg = ("message_bytes(self, channel: int, mid: bytes, props: bytes, bhead: bytes, "
               "body: bytes) -> bytes")
    if not pyfields:
        enc = ["def encode(self) -> bytes:", f"    return {prefix}", "",
               f"def {sig_parts}:", f"    return ({head},)"]
        if row["has_content"]:
            enc += ["", f"def {sig_msg}:", f"    return b''.join(({head}, {tail}))"]
    else:
        enc = ["def encode(self) -> bytes:", "    try:"]
        enc += ["    " + line for line in enc_pre]
        enc.append(f"        return b''.join(({', '.join(enc_parts)},))")
        enc.append("    except (struct.error, IndexError, TypeError, OverflowError) as exc:")
        enc.append("        raise _explain(self, exc) from exc")
        variants = [(sig_parts, f"({', '.join(fparts)},)")]
        if row["has_content"]:  # the others use Method.message_bytes (over frame_parts)
            variants.append((sig_msg, f"b''.join(({', '.join(fparts)}, {tail}))"))
        for sig, ret in variants:
            enc += ["", f"def {sig}:", "    try:"]
            enc += ["    " + line for line in enc_pre]
            enc.append(f"        return {ret}")
            enc.append("    except (struct.error, IndexError, TypeError, OverflowError) as exc:")
            enc.append("        raise _explain(self, exc) from exc")
    if len(dec) == 3:
        dec.append("        pass")
    dec.append("    except (struct.error, IndexError) as exc:")
    dec.append(f"        raise FrameError('truncated or malformed {full} method frame') from exc")
    dec.append("    except UnicodeDecodeError as exc:")
    dec.append("        if _e > end:")
    dec.append(f"            raise FrameError('{full}: a short string runs past the end of the frame') from exc")
    dec.append(f"        raise AMQPSyntaxError('{full}: short string is not valid UTF-8') from exc")
    dec.append("    if off != end:")
    dec.append(f"        raise FrameError('{full} method frame: ' + ('%d unexpected trailing bytes' % (end - off) if off < end else 'truncated'))")
    dec.append("    o = _new(cls)")
    dec += [f"    o.{n} = {n}" for n in names]
    dec.append("    return o")
    return init + [""] + enc + [""] + dec


def _method_class(row: dict[str, Any], structs: set[str]) -> list[str]:
    """One method class, nested in its AMQP class (indented by 4)."""
    full = f"{row['class_name']}.{row['method_name']}"
    pyfields = [(pyname(n), t) for n, t in row["fields"]]
    doc = (f"AMQP {full} ({row['class_id']}/{row['method_id']}); fields: "
           + (", ".join(f"{n}:{t}" for n, t in row["fields"]) or "none")
           + ("; synchronous" if row["synchronous"] else "")
           + ("; carries content" if row["has_content"] else ""))
    names = tuple(n for n, _ in pyfields)
    out = [f"    class {camel(row['method_name'])}(Method):",
           f'        """{doc}"""',
           "",
           f"        __slots__ = {names!r}",
           *[f"        {n}: {_PYTYPES[t]}" for n, t in pyfields],
           f"        CLASS_ID = {row['class_id']}",
           f"        METHOD_ID = {row['method_id']}",
           f"        INDEX = {(row['class_id'] << 16) | row['method_id']}",
           f"        NAME = {full!r}",
           f"        synchronous = {row['synchronous']}",
           f"        has_content = {row['has_content']}",
           f"        fields = {names!r}",
           f"        field_types = {tuple(t for _, t in row['fields'])!r}",
           ""]
    out += [("        " + line) if line else "" for line in _method_source(row, structs)]
    return out


_HEADER = '''\
# Generated by `python -m spark_amqp.protocol.codegen` from amqp0-9-1.tsv: do not edit.
# tests/protocol/test_codegen.py checks that regenerating gives this file.
"""The AMQP 0-9-1 method classes, one per row of ``amqp0-9-1.tsv`` (see :mod:`.codegen`).

Use them through :mod:`.spec` (``spec.Basic.Publish``, ``spec.METHODS``).
"""

from __future__ import annotations

import struct
from typing import Any

from . import values as _values
from .errors import AMQPSyntaxError, FrameError
from .method_base import AmqpClass, Method
from .method_base import explain_encode_error as _explain

_decode_table = _values._decode_table_at
_encode_table = _values.encode_table
_to_bytes = _values.to_bytes
_B = _values._BYTE
_u32 = struct.Struct(">I").pack
_u32f = struct.Struct(">I").unpack_from
_new = object.__new__
'''


def render_methods(text: str) -> str:
    """The source of :mod:`.methods` for the table ``text``."""
    rows = parse_table(text)
    structs: set[str] = set()
    classes: dict[str, list[str]] = {}
    class_ids: dict[str, int] = {}
    for row in rows:
        cname = row["class_name"]
        class_ids.setdefault(cname, row["class_id"])
        body = classes.setdefault(cname, [])
        body += [""] + _method_class(row, structs)
    out = [_HEADER]
    for fmt in sorted(structs):
        out.append(f"_S_{fmt[1:]} = struct.Struct({fmt!r})")
        out.append(f"_pack_{fmt[1:]} = _S_{fmt[1:]}.pack")
        out.append(f"_unpack_{fmt[1:]} = _S_{fmt[1:]}.unpack_from")
    for cname, body in classes.items():
        out += ["", "",
                f"class {camel(cname)}(AmqpClass):",
                f'    """The methods of AMQP class {cname} ({class_ids[cname]})."""',
                "",
                f"    NAME = {cname!r}",
                f"    CLASS_ID = {class_ids[cname]}"]
        out += body
    out += ["", "", "# the response methods of the synchronous methods"]
    for row in rows:
        if row["responses"]:
            c = camel(row["class_name"])
            resp = ", ".join(f"{c}.{camel(r)}" for r in row["responses"])
            out.append(f"{c}.{camel(row['method_name'])}.responses = ({resp},)")
    out += ["", "#: every method class, in the table's order",
            "ALL_METHODS: tuple[type[Method], ...] = ("]
    out += [f"    {camel(r['class_name'])}.{camel(r['method_name'])}," for r in rows]
    out += [")", "#: the AMQP classes, in the table's order",
            "ALL_CLASSES: tuple[type[AmqpClass], ...] = ("]
    out += [f"    {camel(c)}," for c in classes]
    out += [")", ""]
    return "\n".join(out)


def build_method(class_name: str, class_id: int, method_name: str, method_id: int,
                 fields: list[tuple[str, str]], synchronous: bool = False,
                 has_content: bool = False) -> type:
    """A method class for one table row that is not in the table, compiled from the
    generated source (for tests of the generator: bit runs and field mixes the table lacks).
    ``fields``: ``[(name, AMQP type)]``; raises ValueError for an unknown type."""
    header = ("class_name\tclass_id\tmethod_name\tmethod_id\tsynchronous\t"
              "response_methods\tfields\thas_content\n")
    row = "\t".join([class_name, str(class_id), method_name, str(method_id),
                     "y" if synchronous else "n", "-",
                     ",".join(f"{n}:{t}" for n, t in fields) or "-",
                     "y" if has_content else "n"])
    ns: dict[str, Any] = {"__name__": f"{__package__}._built", "__package__": __package__}
    exec(compile(render_methods(header + row + "\n"), "<amqp generated method>", "exec"), ns)
    return ns["ALL_METHODS"][0]


def generated_files() -> dict[Path, str]:
    """Every checked-in generated module and the source it must hold: :mod:`.methods` (from
    the method table), :mod:`.tables` and :mod:`.property_codec` (:mod:`.codegen_values`)."""
    from .codegen_values import (PROPERTIES_PATH, TABLES_PATH, render_properties,
                                 render_tables)
    from .properties import PROPERTIES

    return {MODULE_PATH: render_methods(read_table()), TABLES_PATH: render_tables(),
            PROPERTIES_PATH: render_properties(PROPERTIES)}


def main(argv: list[str] | None = None) -> int:
    """Rewrite the generated modules (``--check``: only compare; exit 1 when one is stale)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="exit with status 1 when a generated module differs from what would "
                         "be written")
    args = ap.parse_args(argv)
    stale = 0
    for path, source in generated_files().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == source:
            continue
        if args.check:
            print(f"{path} is stale: run python -m spark_amqp.protocol.codegen",
                  file=sys.stderr)
            stale = 1
        else:
            path.write_text(source, encoding="utf-8")
            print(f"wrote {path}")
    return stale


if __name__ == "__main__":
    sys.exit(main())
