"""app/jsontext.py: JSON values as the store keeps them."""

from __future__ import annotations

import pytest

from qita_board.jsontext import nul_safe


def test_nul_safe_replaces_every_nul_in_strings_and_keys_and_leaves_the_rest():
    value = {"a\x00": ["x\x00y", {"k": "\x00"}], "n": 1, "f": 0.5, "t": True, "z": None, 3: "three"}
    assert nul_safe(value) == {"a\ufffd": ["x\ufffdy", {"k": "\ufffd"}], "n": 1, "f": 0.5, "t": True, "z": None,
                               3: "three"}
    assert value["a\x00"][0] == "x\x00y"  # the value given is not changed
    assert nul_safe("a\x00") == "a\ufffd" and nul_safe(["\x00"]) == ["\ufffd"]


def test_a_value_without_nul_comes_back_as_it_is():
    value = {"a": ["x", {"k": "v"}], 3: "three"}
    assert nul_safe(value) is value  # nothing copied: what most records are
    # a backslash before `u0000` looks like a NUL in the JSON text: walked, and kept as it is
    assert nul_safe({"text": "\\u0000"}) == {"text": "\\u0000"}
    # an integer orjson cannot write is still looked at, and kept
    assert nul_safe({"big": 2**70, "s": "\x00"}) == {"big": 2**70, "s": "\ufffd"}
    assert nul_safe({"big": 2**70}) == {"big": 2**70}


@pytest.mark.parametrize("value", [
    {"b": 1, "a": [1.5, None, True, "é 漢字"], "n": {"x": {}}},
    {1: "int key", "s": "x"},
    [2**70, "an integer past 64 bits"],
    {"lone": "\ud800 surrogate"},
    "just text",
])
def test_column_text_reads_back_as_the_standard_library_would_write_it(value):
    """The engines' JSON column text (app.db.make_engine): compact orjson, the standard
    library's json.dumps for what orjson refuses; either way it reads back as json.dumps's
    own text does, and is valid JSON to SQLite's json functions."""
    import json
    import sqlite3

    from qita_board.jsontext import column_text

    text = column_text(value)
    assert json.loads(text) == json.loads(json.dumps(value))
    assert sqlite3.connect(":memory:").execute("SELECT json_valid(?)", (text,)).fetchone() == (1,)


def test_the_engines_write_json_columns_with_column_text(tmp_path):
    from sqlalchemy import JSON, Column, Integer, MetaData, Table, insert, select, text

    from qita_board.db import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'j.db'}")
    t = Table("t", MetaData(), Column("id", Integer, primary_key=True), Column("v", JSON))
    t.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(t), [{"v": {"a": [1, 2], "b": "x"}}, {"v": [2**70]}])
        assert conn.execute(text("SELECT v FROM t ORDER BY id")).scalars().all() == ['{"a":[1,2],"b":"x"}',
                                                                                  '[1180591620717411303424]']
        assert conn.execute(select(t.c.v).order_by(t.c.id)).scalars().all() == [{"a": [1, 2], "b": "x"}, [2**70]]
    engine.dispose()


def test_scrubbing_a_value_deeper_than_pythons_stack_changes_only_real_nuls():
    # past ~1,000 levels the scrub works on the JSON text: the text "\u0000" (a backslash and
    # five characters, written "\\u0000") was rewritten too (found in review)
    from qita_board.jsontext import nul_safe

    def nest(leaf):
        value = leaf
        for _ in range(1010):
            value = {"k": value}
        return value

    def leaf(value):
        while isinstance(value, dict):
            value = value["k"]
        return value

    assert leaf(nul_safe(nest("literal \\u0000 text"))) == "literal \\u0000 text"
    assert leaf(nul_safe(nest("real \x00 nul"))) == "real \ufffd nul"
    assert leaf(nul_safe(nest("both \\\x00 x"))) == "both \\\ufffd x"
