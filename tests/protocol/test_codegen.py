"""The checked-in generated modules (spark_amqp/protocol/methods.py from the method table,
tables.py and property_codec.py from codegen_values.py) are what the generators write:
regenerate with ``python -m spark_amqp.protocol.codegen``."""

from __future__ import annotations

import pickle

from spark_amqp.protocol import codegen, codegen_values, methods, properties, spec, values


def test_regenerating_gives_the_checked_in_modules():
    files = codegen.generated_files()
    assert {p.name for p in files} == {"methods.py", "tables.py", "property_codec.py"}
    for path, source in files.items():
        assert source == path.read_text(encoding="utf-8"), (
            f"spark_amqp/protocol/{path.name} is stale: run python -m spark_amqp.protocol.codegen")
    assert codegen.main(["--check"]) == 0


def test_the_codec_runs_the_checked_in_code_not_code_compiled_at_import():
    """properties.py and values.py used to exec() generated source at every import; now the
    field-table codec and the properties' codec come from their checked-in files."""
    assert values.encode_table.__code__.co_filename == str(codegen_values.TABLES_PATH)
    assert values._decode_table_at.__code__.co_filename == str(codegen_values.TABLES_PATH)
    assert properties.py_decode_properties.__code__.co_filename == str(
        codegen_values.PROPERTIES_PATH)
    assert properties.py_encode.__code__.co_filename == str(codegen_values.PROPERTIES_PATH)
    assert properties.BasicProperties.__init__.__code__.co_filename == str(
        codegen_values.PROPERTIES_PATH)


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
    assert codegen.main(["--check"]) == 0   # the other generated modules were left as they are
