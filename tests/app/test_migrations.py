"""Upgrading an old database keeps its data: for every revision after the first, a database
is built at that revision's parent, filled through the ingest, upgraded to head, and compared.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from qita_board.db import alembic_config, make_engine, upgrade
from tests.conftest import write_jsonl


def _revisions() -> list[str]:
    script = ScriptDirectory.from_config(alembic_config(make_engine("sqlite://")))
    return [r.revision for r in reversed(list(script.walk_revisions()))]


REVISIONS = _revisions()


def _fill(conn) -> None:
    """Rows in every table, written with plain SQL valid at the first revision (a trace's worth)."""
    conn.execute(text("INSERT INTO runs (run_id, task_id, replicate, source_format, state, early_stop_enabled, has_start, "
                      "has_end, closed, early_stopped, steps, retries, objective, stop_reason) VALUES "
                      "('old-1', 'task', 0, 'qita', 'finished', 0, 1, 1, 1, 0, 2, 0, 'kept objective', 'final')"))
    pk = conn.execute(text("SELECT id FROM runs WHERE run_id = 'old-1'")).scalar()
    for step in (0, 1):
        conn.execute(text("INSERT INTO steps (run_pk, step, retry, record) VALUES (:pk, :s, 0, :rec)"),
                     {"pk": pk, "s": step, "rec": f'{{"type":"step","run_id":"old-1","step":{step}}}'})


def _snapshot(conn) -> dict:
    return {
        "runs": conn.execute(text("SELECT run_id, task_id, objective, stop_reason, steps FROM runs ORDER BY run_id")).all(),
        "steps": conn.execute(text("SELECT r.run_id, s.step, s.record FROM steps s JOIN runs r ON r.id = s.run_pk "
                                   "ORDER BY r.run_id, s.step")).all(),
    }


def test_there_is_a_first_revision():
    assert REVISIONS and REVISIONS[0].startswith("0001")


@pytest.mark.parametrize("target", REVISIONS[1:] or [pytest.param(None, marks=pytest.mark.skip(
    reason="only one migration so far: nothing to upgrade from yet"))])
def test_upgrade_from_the_previous_revision_keeps_the_data(tmp_path: Path, target):
    previous = REVISIONS[REVISIONS.index(target) - 1]
    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, previous)
    with engine.begin() as conn:
        _fill(conn)
        before = _snapshot(conn)
    upgrade(engine)
    with engine.connect() as conn:
        assert _snapshot(conn) == before
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == REVISIONS[-1]
    engine.dispose()


def test_first_revision_then_head_keeps_ingested_data(tmp_path: Path):
    """Build at 0001, ingest through the app, upgrade to head: the board still shows everything."""
    from fastapi.testclient import TestClient

    from qita_board.ingest import Ingestor
    from qita_board.main import create_app
    from qita_board.settings import Settings

    # An empty file of its own: the `settings` fixture's database is at head already.
    settings = Settings(db=str(tmp_path / "old.db"))
    engine = make_engine(settings.db_url)
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, REVISIONS[0])
    with engine.begin() as conn:
        _fill(conn)
    upgrade(engine)
    path = write_jsonl(tmp_path / "t.jsonl", [{"type": "run_start", "run_id": "new-1"},
                                              {"type": "step", "run_id": "new-1", "step": 0}])
    assert Ingestor(engine, settings).ingest_paths([str(path)]).ok
    tables = set(inspect(engine).get_table_names())
    with engine.begin() as conn:  # the runs migration 0010 indexed, and the new one, each once
        conn.execute(text("INSERT INTO run_search_fts (run_search_fts, rank) VALUES ('integrity-check', 1)"))
    engine.dispose()
    assert {"runs", "steps", "alembic_version"} <= tables
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        ids = sorted(r["run_id"] for r in c.get("/api/runs").json()["data"])
        assert ids == ["new-1", "old-1"]
        assert [r["run_id"] for r in c.get("/api/runs", params={"q": "kept objec"}).json()["data"]] == ["old-1"]
        assert c.get("/api/runs/old-1").json()["run"]["objective"] == "kept objective"
        assert c.get("/api/runs/old-1/steps").json()["count"] == 2


def test_0018_moves_indexing_from_the_insert_trigger_to_the_search_module_and_back(tmp_path: Path):
    """Below 0018 the insert trigger indexes each search row; from 0018 on the search module
    does it in bulk and must not when the trigger is there (migration 0010 indexes the runs
    it finds through that module): either way each row is in the index once."""
    from qita_board import search
    from qita_board.ingest import Ingestor
    from qita_board.settings import Settings

    settings = Settings(db=str(tmp_path / "old.db"))

    def check(conn) -> None:
        conn.execute(text("INSERT INTO run_search_fts (run_search_fts, rank) VALUES ('integrity-check', 1)"))

    def triggers(conn) -> list[str]:
        return [n for (n,) in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                                "AND tbl_name = 'run_search' ORDER BY name"))]

    engine = make_engine(settings.db_url)
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0017")
    path = write_jsonl(tmp_path / "t.jsonl", [{"type": "run_start", "run_id": "before", "objective": "aardvark"}])
    assert Ingestor(engine, settings).ingest_paths([str(path)]).ok
    with engine.begin() as conn:
        assert triggers(conn) == ["run_search_fts_ad", "run_search_fts_ai"]
        check(conn)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0018")
    path = write_jsonl(tmp_path / "u.jsonl", [{"type": "run_start", "run_id": "after", "objective": "pangolin"}])
    assert Ingestor(engine, settings).ingest_paths([str(path)]).ok
    with engine.begin() as conn:
        assert triggers(conn) == ["run_search_fts_ad"]
        check(conn)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0017")
    with engine.begin() as conn:
        assert triggers(conn) == ["run_search_fts_ad", "run_search_fts_ai"]
        search.insert_rows(conn, [{"run_pk": 1, "digest": "x", "text": "okapi"}])
        check(conn)
        for q, pk in (("aardvark", 1), ("pangolin", 2), ("okapi", 1)):
            hits = conn.execute(text("SELECT s.run_pk FROM run_search_fts f JOIN run_search s ON s.id = f.rowid "
                                     "WHERE run_search_fts MATCH :q"), {"q": search.trigram_query(q)}).scalars().all()
            assert set(hits) == {pk}, q
    engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_steps_stored_before_0015_get_their_tool_calls_counted(backend, tmp_path, request):
    """Migration 0015 counts the calls of steps stored before it by the reader's rule:
    actions, else decision.actions, else tool_invocations; none listed is None."""
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else f"sqlite:///{tmp_path / 'm.db'}"
    engine = make_engine(url)
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0014")
    records = {
        0: {"actions": [{"name": "a"}, {"name": "b"}], "tool_invocations": [{}]},  # 2: actions first
        1: {"actions": [], "decision": {"actions": [{"name": "c"}]}},               # 1: empty actions skipped
        2: {"tool_invocations": [{}, {}, {}]},                                       # 3: QitOS
        3: {"observation": "nothing called"},                                        # None
        4: {"tool_invocations": "not a list"},                                       # 0 (present, not a list)
    }
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO runs (run_id, task_id, replicate, source_format, state, early_stop_enabled, "
                          "has_start, has_end, closed, early_stopped, steps, retries) "
                          "VALUES ('r', 'r', 0, 'qita', 'finished', false, true, true, false, false, 5, 0)"))
        pk = conn.execute(text("SELECT id FROM runs")).scalar()
        for n, body in records.items():
            conn.execute(text("INSERT INTO steps (run_pk, step, retry, record) VALUES (:pk, :n, false, :r)"),
                         {"pk": pk, "n": n, "r": orjson.dumps({"type": "step", "run_id": "r", "step": n, **body}).decode()})
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
    with engine.connect() as conn:
        got = dict(conn.execute(text("SELECT step, tool_calls FROM steps")).all())
    engine.dispose()
    assert got == {0: 2, 1: 1, 2: 3, 3: None, 4: 0}
    from qita_board.ingest.rows import step_tool_calls

    assert {n: step_tool_calls(body) for n, body in records.items()} == got  # the reader's rule, the same


def test_schema_head_is_alembics_head():
    """`SCHEMA_HEAD` lets a database at head open without Alembic: it must name the real head."""
    from qita_board.db import SCHEMA_HEAD

    script = ScriptDirectory.from_config(alembic_config(make_engine("sqlite://")))
    assert script.get_current_head() == SCHEMA_HEAD == REVISIONS[-1]


def _contents(path: Path) -> dict:
    """Every row of every table, shadow tables included, and the schema text."""
    import sqlite3

    from qita_board.db import schema_sql

    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name")]
        rows = {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables}
        return {"schema": schema_sql(conn), "rows": rows}
    finally:
        conn.close()


def test_the_schema_file_is_what_the_migrations_build(tmp_path: Path):
    """migrations/sqlite_head.sql, which new SQLite files get at once, is the migrations'
    schema; after a new migration, scripts/sqlite_schema.py writes it again."""
    from qita_board.db import SQLITE_HEAD_SQL
    from scripts.sqlite_schema import build

    assert build() == SQLITE_HEAD_SQL.read_text(encoding="utf-8"), "run: python scripts/sqlite_schema.py"


def test_a_new_sqlite_file_gets_the_same_database_as_the_migrations_build(tmp_path: Path):
    from qita_board.db import at_head, create_at_head

    by_migrations = make_engine(f"sqlite:///{tmp_path / 'migrated.db'}")
    cfg = alembic_config(by_migrations)
    with by_migrations.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
    by_migrations.dispose()
    at_once = make_engine(f"sqlite:///{tmp_path / 'new.db'}")
    assert create_at_head(at_once) and at_head(at_once)
    assert not create_at_head(at_once)  # not empty any more: left alone
    at_once.dispose()
    migrated, new = _contents(tmp_path / "migrated.db"), _contents(tmp_path / "new.db")
    assert new["schema"] == migrated["schema"]
    assert new["rows"] == migrated["rows"]
    assert "run_search_fts_config" in new["rows"]  # FTS5's own tables, made by its CREATE VIRTUAL TABLE
    # and the trigram index answers on it as on the migrated one, its rows added by the
    # search module in bulk (migration 0018) and removed by the delete trigger
    from qita_board import search

    for name in ("new.db", "migrated.db"):
        engine = make_engine(f"sqlite:///{tmp_path / name}")
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO runs (id, run_id, replicate, source_format, state, early_stop_enabled,"
                                 " has_start, has_end, closed, early_stopped, steps, retries)"
                                 " VALUES (1, 'r', 0, 'qita', 'finished', 0, 1, 1, 1, 0, 0, 0)")
            search.insert_rows(conn, [{"run_pk": 1, "digest": "d", "text": "a needle here"},
                                      {"run_pk": 1, "digest": "e", "text": "and hay"}])
            search.insert_rows(conn, [{"run_pk": 1, "digest": "d", "text": "a needle here"}])  # held already
        with engine.begin() as conn:
            assert conn.exec_driver_sql("SELECT rowid FROM run_search_fts WHERE run_search_fts MATCH '\"eed\"'"
                                        ).fetchall() == [(1,)], name
            conn.exec_driver_sql("DELETE FROM run_search WHERE id = 1")
            assert conn.exec_driver_sql("SELECT rowid FROM run_search_fts WHERE run_search_fts MATCH '\"eed\"'"
                                        ).fetchall() == [], name
            # the index holds exactly the rows of its content table, each once
            conn.exec_driver_sql("INSERT INTO run_search_fts (run_search_fts, rank) VALUES ('integrity-check', 1)")
        engine.dispose()


def test_a_file_that_holds_tables_is_migrated_not_overwritten(tmp_path: Path):
    import sqlite3

    from qita_board.db import create_at_head

    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE mine (x)")
    conn.commit()
    conn.close()
    engine = make_engine(f"sqlite:///{path}")
    assert not create_at_head(engine)
    engine.dispose()
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["mine"]
    conn.close()


def test_a_database_behind_head_is_upgraded_and_one_at_head_is_left_alone(tmp_path: Path):
    from qita_board.db import at_head

    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    assert not at_head(engine)  # no alembic_version table yet
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, REVISIONS[-2])
    assert not at_head(engine)
    upgrade(engine)
    assert at_head(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == REVISIONS[-1]
    engine.dispose()
