"""AMQP 0-9-1 method classes, generated at import time from one machine-readable table.

The table is ``amqp0-9-1.tsv`` beside this file: one row per method with class/method ids,
synchronous flag, response methods, fields with wire types, and whether the method carries
content. It was derived from the seeds (0-9-1 reference [002], RabbitMQ's complete reference
[004]) and includes RabbitMQ's extensions (confirm.select, basic.nack, exchange.bind/unbind,
connection.blocked/unblocked/update-secret) and the ``access`` class RabbitMQ still accepts.

For every row a class is built with ``__slots__`` for its fields, an ``encode()`` returning the
method payload (class id, method id, arguments), ``frame_parts(channel)`` returning the whole
method frame but its frame-end octet as a tuple of bytes (the frame header packed together
with the ids and the first fixed fields), and a ``decode(buf, off, end)`` classmethod. All are
specialised Python source compiled with ``exec`` (as ``collections.namedtuple`` does):
consecutive fixed-width fields and bit runs are packed with a single ``struct`` call, a lone
octet of bits and short-string lengths index a table of one-byte ``bytes``, and decoding
builds the instance without calling ``__init__``. The generated source of a class is in its
``_source`` attribute.
Bit packing follows the 0-9-1 spec §4.2.5.2: consecutive bits share octets from the low bit up.

Access the classes as ``spec.Basic.Publish``, ``spec.Connection.Tune`` or by index through
:data:`METHODS` (``(class_id << 16) | method_id``).
"""

from __future__ import annotations

import keyword
import io
import os
import struct
from typing import Any, ClassVar

from . import values as _values
from .errors import AMQPSyntaxError, FrameError
from .properties import SPEEDUPS

__all__ = ["Method", "METHODS", "CLASSES", "CLASS_IDS", "method_class", "SPEC_TABLE_PATH"]

SPEC_TABLE_PATH = os.path.join(os.path.dirname(__file__), "amqp0-9-1.tsv")

_FIXED = {"octet": ("B", 1), "short": ("H", 2), "long": ("I", 4), "longlong": ("Q", 8),
          "timestamp": ("Q", 8)}
_DEFAULTS = {"octet": "0", "short": "0", "long": "0", "longlong": "0", "timestamp": "0",
             "bit": "False", "shortstr": "''", "longstr": "b''", "table": "None"}


class Method:
    """Base class of every generated AMQP method.

    Class attributes (set per generated class):
        CLASS_ID, METHOD_ID: the wire ids; INDEX = ``(CLASS_ID << 16) | METHOD_ID``.
        NAME: ``"class.method"`` as in the spec, e.g. ``"basic.publish"``.
        synchronous: whether the sender must wait for one of ``responses``.
        responses: the response method classes (empty tuple when asynchronous).
        has_content: whether a content header and body frames follow this method.
        fields: the Python attribute names in wire order; field_types: their AMQP types.
    """

    __slots__ = ()
    CLASS_ID: ClassVar[int] = 0
    METHOD_ID: ClassVar[int] = 0
    INDEX: ClassVar[int] = 0
    NAME: ClassVar[str] = ""
    synchronous: ClassVar[bool] = False
    responses: ClassVar[tuple] = ()
    has_content: ClassVar[bool] = False
    fields: ClassVar[tuple[str, ...]] = ()
    field_types: ClassVar[tuple[str, ...]] = ()

    def encode(self) -> bytes:  # pragma: no cover - replaced per class
        """The method payload: class id, method id, arguments (bytes)."""
        raise NotImplementedError

    def frame_parts(self, channel: int) -> tuple:  # pragma: no cover - replaced per class
        """The method frame for ``channel`` without its frame-end octet, as a tuple of bytes
        (``b"".join(parts) + b"\\xce"`` is the frame). Raises AMQPSyntaxError like encode."""
        raise NotImplementedError

    def message_bytes(self, channel: int, mid: bytes, props: bytes, bhead: bytes,
                      body: bytes) -> bytes:  # pragma: no cover - replaced per class
        """``b"".join((*self.frame_parts(channel), mid, props, bhead, body, b"\\xce"))`` in
        one join: the frames of a content message whose body fits one frame (``mid`` packs
        the method's frame-end with the content header's frame header, ``bhead`` the header's
        frame-end with the body's frame header). Raises AMQPSyntaxError like encode."""
        raise NotImplementedError

    @classmethod
    def decode(cls, buf: bytes, off: int, end: int) -> "Method":  # pragma: no cover
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(_norm(getattr(self, f)) == _norm(getattr(other, f)) for f in self.fields)

    def __hash__(self) -> int:
        return hash((self.INDEX,) + tuple(_values.hash_key(_norm(getattr(self, f)))
                                          for f in self.fields))

    def __repr__(self) -> str:
        args = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.fields)
        return f"<{self.NAME}({args})>"

    def __reduce__(self):
        return (type(self), tuple(getattr(self, f) for f in self.fields))

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict, in wire order."""
        return {f: getattr(self, f) for f in self.fields}


def _norm(v: Any) -> Any:
    # tables: None and {} are the same on the wire
    return {} if v is None else v


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


def _pyname(name: str) -> str:
    n = name.replace("-", "_")
    return n + "_" if keyword.iskeyword(n) else n


def _groups(fields: list[tuple[str, str]]) -> list[tuple[str, Any]]:
    """Split fields into ('fixed', [(name, type)…]) runs, with bits inside runs, and others."""
    out: list[tuple[str, Any]] = []
    run: list[tuple[str, str]] = []
    for name, typ in fields:
        if typ in _FIXED or typ == "bit":
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
        fmt += _FIXED[typ][0]
        items.append(("v", name))
    if bits:
        fmt += "B"
        items.append(("bits", bits))
    return fmt, items


_to_bytes = _values.to_bytes


def _explain_encode_error(method: "Method", exc: Exception) -> AMQPSyntaxError:
    """Slow path after a failed encode: name the field that cannot be encoded."""
    # strings of the wrong type and bad tables raise their own AMQPSyntaxError; what
    # remains is an integer out of range (struct.error) or a short string over 255 bytes
    for name, ftype in zip(method.fields, method.field_types):
        v = getattr(method, name)
        where = f"{method.NAME} {name}"
        if ftype in _FIXED:
            try:
                struct.pack(">" + _FIXED[ftype][0], v)
            except struct.error as e:
                return AMQPSyntaxError(f"{where}={v!r} does not fit an AMQP {ftype}: {e}")
        elif ftype == "shortstr" and len(_to_bytes(v, where)) > 255:
            return AMQPSyntaxError(f"{where}: short string longer than 255 bytes")
    # e.g. a channel number outside 0..65535 for frame_parts()
    return AMQPSyntaxError(f"{method.NAME}: cannot encode: {exc}")


def _build_method(class_name: str, class_id: int, method_name: str, method_id: int,
                  synchronous: bool, fields: list[tuple[str, str]], has_content: bool,
                  structs: dict[str, struct.Struct]) -> type:
    """Build one method class; its encode/decode are generated source (see module doc)."""
    names = [_pyname(n) for n, _ in fields]
    pyfields = [(_pyname(n), t) for n, t in fields]
    full = f"{class_name}.{method_name}"
    ns: dict[str, Any] = {
        "FrameError": FrameError, "AMQPSyntaxError": AMQPSyntaxError, "struct": struct,
        "_decode_table": _values._decode_table_at, "_encode_table": _values.encode_table,
        "_u32": struct.Struct(">I").pack, "_u32f": struct.Struct(">I").unpack_from,
        "_B": _values._BYTE, "_to_bytes": _to_bytes, "_explain": _explain_encode_error,
        "_new": object.__new__,
    }
    ns["_PREFIX"] = struct.pack(">HH", class_id, method_id)

    # ------------------------------------------------------------------ __init__
    params = ", ".join(f"{n}={_DEFAULTS[t]}" for n, t in pyfields)
    init_lines = [f"def __init__(self{', ' + params if params else ''}):"]
    init_lines += [f"    self.{n} = {n}" for n, _ in pyfields] or ["    pass"]

    # ------------------------------------------------------------------ encode / decode
    enc_pre: list[str] = []     # statements before the join
    enc_parts: list[str] = []   # expressions joined into the payload
    size_terms: list[str] = ["4"]  # the payload size: class and method ids, then the fields
    first_fixed: tuple[str, list[str]] | None = None  # first group's format and arguments
    dec = ["def decode(cls, buf, off, end):", "    try:"]
    groups = _groups(pyfields)
    for gi, (kind, payload) in enumerate(groups):
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
            for f in (fmt, efmt):
                if f not in structs:
                    structs[f] = struct.Struct(f)
            ev, dv = f"_e{gi}", f"_d{gi}"
            ns[ev] = structs[efmt].pack
            ns[dv] = structs[fmt].unpack_from
            enc_parts.append(f"{ev}({', '.join(enc_args)})")
            dec.append(f"        {', '.join(dec_targets)}, = {dv}(buf, off)")
            dec.append(f"        off += {structs[fmt].size}")
            for i, (ik, iv) in enumerate(items):
                if ik == "bits":
                    for j, b in enumerate(iv):
                        dec.append(f"        {b} = _bits{i} & {1 << j} != 0")
            continue
        if gi == 0:
            enc_parts.append("_PREFIX")
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
        elif kind == "table":
            enc_pre.append(f"    _s{gi} = _encode_table(self.{n})")
            enc_parts.append(f"_s{gi}")
            size_terms.append(f"len(_s{gi})")
            dec.append(f"        {n}, off = _decode_table(buf, off, end, 0)")
        else:  # pragma: no cover - the table only uses the types above
            raise ValueError(f"unsupported field type {kind}")
    # frame_parts(channel): the whole method frame but its frame-end octet, as a tuple of
    # bytes, the frame header packed together with the ids and the first fixed fields
    hfmt = ">BHIHH" + (first_fixed[0][1:] if first_fixed else "")
    if hfmt not in structs:
        structs[hfmt] = struct.Struct(hfmt)
    ns["_h"] = structs[hfmt].pack
    # constants first so that they fold: "9 + len(_s1) + len(_s2)"
    const = sum(int(t.split(" + ")[0]) if " + " in t else int(t) if t.isdigit() else 0
                for t in size_terms)
    size = " + ".join([str(const)] + [t.split(" + ")[-1] for t in size_terms if not t.isdigit()])
    head = (f"_h(1, channel, {size}, {class_id}, {method_id}"
            + "".join(", " + a for a in (first_fixed[1] if first_fixed else [])) + ")")
    fparts = [head] + enc_parts[1:]
    tail = "mid, props, bhead, body, b'\\xce'"
    if not pyfields:
        enc = ["def encode(self):", "    return _PREFIX", "",
               "def frame_parts(self, channel):", f"    return ({head},)", "",
               "def message_bytes(self, channel, mid, props, bhead, body):",
               f"    return b''.join(({head}, {tail}))"]
    else:
        enc = ["def encode(self):", "    try:"]
        enc += ["    " + line for line in enc_pre]
        enc.append(f"        return b''.join(({', '.join(enc_parts)},))")
        enc.append("    except (struct.error, IndexError, TypeError, OverflowError) as exc:")
        enc.append("        raise _explain(self, exc) from exc")
        for sig, ret in (("frame_parts(self, channel)", f"({', '.join(fparts)},)"),
                         ("message_bytes(self, channel, mid, props, bhead, body)",
                          f"b''.join(({', '.join(fparts)}, {tail}))")):
            enc += ["", f"def {sig}:", "    try:"]
            enc += ["    " + line for line in enc_pre]
            enc.append(f"        return {ret}")
            enc.append("    except (struct.error, IndexError, TypeError, OverflowError) as exc:")
            enc.append("        raise _explain(self, exc) from exc")
    if len(dec) == 2:
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

    src = "\n".join(init_lines + [""] + enc + [""] + dec) + "\n"
    exec(compile(src, f"<amqp {full}>", "exec"), ns)

    cls = type(_camel(method_name), (Method,), {
        "__slots__": tuple(names),
        "__init__": ns["__init__"],
        "encode": ns["encode"],
        "frame_parts": ns["frame_parts"],
        "message_bytes": ns["message_bytes"],
        "decode": classmethod(ns["decode"]),
        "CLASS_ID": class_id,
        "METHOD_ID": method_id,
        "INDEX": (class_id << 16) | method_id,
        "NAME": full,
        "synchronous": synchronous,
        "has_content": has_content,
        "fields": tuple(names),
        "field_types": tuple(t for _, t in fields),
        "__qualname__": f"{_camel(class_name)}.{_camel(method_name)}",
        "__module__": __name__,
        "__doc__": f"AMQP {full} ({class_id}/{method_id}); fields: "
                   + (", ".join(f"{n}:{t}" for n, t in fields) or "none")
                   + (f"; synchronous" if synchronous else "")
                   + ("; carries content" if has_content else ""),
        "_source": src,
    })
    return cls


class _ClassNamespace:
    """Holds the methods of one AMQP class, e.g. ``spec.Basic.Publish``."""

    def __init__(self, name: str, class_id: int):
        self.NAME = name
        self.CLASS_ID = class_id

    def __repr__(self) -> str:
        return f"<AMQP class {self.NAME} ({self.CLASS_ID})>"


def _read_table() -> str:
    """The spec table's text, read as package data so it also works from a zip (--py-files)."""
    from importlib import resources

    return resources.files(__package__).joinpath("amqp0-9-1.tsv").read_text(encoding="utf-8")


def _load(text: str):
    methods: dict[int, type] = {}
    classes: dict[str, _ClassNamespace] = {}
    by_name: dict[str, type] = {}
    responses: dict[type, list[str]] = {}
    structs: dict[str, struct.Struct] = {}
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
                    fields.append((n, t))
            cname, cid = row["class_name"], int(row["class_id"])
            mname, mid = row["method_name"], int(row["method_id"])
            cls = _build_method(cname, cid, mname, mid, row["synchronous"] == "y", fields,
                                row["has_content"] == "y", structs)
            ns = classes.setdefault(cname, _ClassNamespace(cname, cid))
            setattr(ns, _camel(mname), cls)
            methods[cls.INDEX] = cls
            by_name[cls.NAME] = cls
            if row["response_methods"] != "-":
                responses[cls] = [f"{cname}.{r}" for r in row["response_methods"].split(",")]
    for cls, names in responses.items():
        cls.responses = tuple(by_name[n] for n in names)
    return methods, classes, by_name


METHODS, _CLASSES, METHODS_BY_NAME = _load(_read_table())
CLASSES = _CLASSES
CLASS_IDS = {ns.CLASS_ID: name for name, ns in _CLASSES.items()}

Connection = _CLASSES["connection"]
Channel = _CLASSES["channel"]
Access = _CLASSES["access"]
Exchange = _CLASSES["exchange"]
Queue = _CLASSES["queue"]
Basic = _CLASSES["basic"]
Confirm = _CLASSES["confirm"]
Tx = _CLASSES["tx"]


_WIRE_CODES = {"bit": 0, "octet": 1, "short": 2, "long": 3, "longlong": 4, "timestamp": 4,
               "shortstr": 5, "longstr": 6, "table": 7}


def _install_decoders(speedups) -> None:
    """Make every method class's ``decode`` the compiled one of ``speedups`` (the same
    results and errors, see ``_speedups.pyx``), or the generated pure-Python one when it is
    ``None``. The pure-Python one stays as ``_py_decode``, the compiled one's fallback."""
    for cls in METHODS.values():
        if "_py_decode" not in cls.__dict__:
            cls._py_decode = cls.__dict__["decode"]
            cls._wire = tuple(_WIRE_CODES[t] for t in cls.field_types)
        cls.decode = cls._py_decode if speedups is None else classmethod(speedups.decode_method)
    if speedups is not None:
        speedups.setup_methods(_values._decode_table_at)


_install_decoders(SPEEDUPS)


def method_class(class_id: int, method_id: int) -> type:
    """Look up a method class by ids; raises CommandInvalid-free KeyError when unknown.

    The frame decoder turns an unknown id into the right typed error.
    """
    return METHODS[(class_id << 16) | method_id]
