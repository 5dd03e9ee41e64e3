"""The checked-in method classes (spark_amqp/protocol/methods.py) are what the generator
writes from the method table: regenerate with ``python -m spark_amqp.protocol.codegen``."""

from __future__ import annotations

import pickle

from spark_amqp.protocol import codegen, methods, spec


def test_regenerating_gives_the_checked_in_module():
    source = codegen.render_methods(codegen.read_table())
    assert source == codegen.MODULE_PATH.read_text(encoding="utf-8"), (
        "spark_amqp/protocol/methods.py is stale: run python -m spark_amqp.protocol.codegen")
    assert codegen.main(["--check"]) == 0


def test_every_row_of_the_table_is_a_class_with_its_fields():
    rows = codegen.parse_table(codegen.read_table())
    assert len(rows) == len(methods.ALL_METHODS) == len(spec.METHODS) == 66
    for row, cls in zip(rows, methods.ALL_METHODS):
        assert cls.NAME == f"{row['class_name']}.{row['method_name']}"
        assert (cls.CLASS_ID, cls.METHOD_ID) == (row["class_id"], row["method_id"])
        assert cls.field_types == tuple(t for _, t in row["fields"])
        assert cls.__slots__ == cls.fields
        # the fields are annotated (type checkers see them)
        assert set(cls.__annotations__) >= set(cls.fields)
        assert spec.CLASSES[row["class_name"]].__dict__[codegen.camel(row["method_name"])] is cls
    assert spec.Connection.Start.responses == (spec.Connection.StartOk,)
    assert spec.Basic.Publish.responses == ()


def test_methods_pickle_by_their_qualified_name():
    m = spec.Basic.Publish(0, "ex", "rk", True, False)
    assert type(m).__qualname__ == "Basic.Publish"
    assert pickle.loads(pickle.dumps(m)) == m


def test_a_stale_module_is_reported(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "methods.py"
    stale.write_text("# old\n", encoding="utf-8")
    monkeypatch.setattr(codegen, "MODULE_PATH", stale)
    assert codegen.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err
    assert codegen.main([]) == 0
    assert stale.read_text(encoding="utf-8") == codegen.render_methods(codegen.read_table())
