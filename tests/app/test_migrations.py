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


def test_first_revision_then_head_keeps_ingested_data(tmp_path: Path, settings):
    """Build at 0001, ingest through the app, upgrade to head: the board still shows everything."""
    from fastapi.testclient import TestClient

    from qita_board.ingest import Ingestor
    from qita_board.main import create_app

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
    engine.dispose()
    assert {"runs", "steps", "alembic_version"} <= tables
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        ids = sorted(r["run_id"] for r in c.get("/api/runs").json()["data"])
        assert ids == ["new-1", "old-1"]
        assert c.get("/api/runs/old-1").json()["run"]["objective"] == "kept objective"
        assert c.get("/api/runs/old-1/steps").json()["count"] == 2


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
    # and the trigram search answers on it as on the migrated one
    conn = __import__("sqlite3").connect(tmp_path / "new.db")
    conn.execute("INSERT INTO runs (id, run_id, replicate, source_format, state, early_stop_enabled, has_start, has_end,"
                 " closed, early_stopped, steps, retries) VALUES (1, 'r', 0, 'qita', 'finished', 0, 1, 1, 1, 0, 0, 0)")
    conn.execute("INSERT INTO run_search (run_pk, digest, text) VALUES (1, 'd', 'a needle here')")
    assert conn.execute("SELECT rowid FROM run_search_fts WHERE text LIKE '%eedl%'").fetchall() == [(1,)]
    conn.close()


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
