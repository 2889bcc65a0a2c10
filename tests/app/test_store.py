"""The store: models and migrations agree, connection settings, packaging of templates."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlmodel import SQLModel

import qita_board.models  # noqa: F401
from qita_board.models import include_name, include_object
from tests.conftest import ROOT


@pytest.mark.both_backends
def test_models_and_migrations_agree(engine):
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "render_as_batch": True,
                                                     "include_name": include_name,
                                                     "include_object": include_object(engine.dialect.name)})
        diff = compare_metadata(ctx, SQLModel.metadata)
    assert diff == []


@pytest.mark.both_backends
def test_the_bulk_tables_keep_their_foreign_keys_on_sqlite_only(engine):
    """Migration 0016: on PostgreSQL steps, critic outputs and events have no foreign key to
    runs (the writer holds the runs instead); every other table keeps its keys."""
    insp = inspect(engine)
    referring = {t for t in insp.get_table_names() for fk in insp.get_foreign_keys(t) if fk["referred_table"] == "runs"}
    bulk = {"steps", "critic_outputs", "events"}
    assert {"criteria", "early_stops", "run_tags", "run_search", "upload_runs", "lab_runs"} <= referring
    assert (referring & bulk) == (set() if engine.dialect.name == "postgresql" else bulk)
    # the comparison filter hides exactly those keys, and only on PostgreSQL
    fk = next(iter(SQLModel.metadata.tables["steps"].foreign_key_constraints))
    assert include_object("postgresql")(fk, fk.name, "foreign_key_constraint", False, None) is False
    assert include_object("sqlite")(fk, fk.name, "foreign_key_constraint", False, None) is True
    other = next(iter(SQLModel.metadata.tables["criteria"].foreign_key_constraints))
    assert include_object("postgresql")(other, other.name, "foreign_key_constraint", False, None) is True


def test_the_comparison_skips_only_the_search_index(engine):
    """The filter hides the FTS5 table and its shadow tables, and nothing else."""
    with engine.connect() as conn:
        tables = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'"))}
    skipped = {t for t in tables if not include_name(t, "table", {})}
    assert "run_search_fts" in skipped and "run_search_fts_data" in skipped
    assert all(t == "run_search_fts" or t.startswith("run_search_fts_") for t in skipped)
    assert include_name("run_search", "table", {}) and include_name("run_search_ftsx", "table", {})


def test_sqlite_runs_with_wal_busy_timeout_and_foreign_keys(engine):
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() >= 5000


def test_list_filters_are_indexed(engine):
    indexed = set()
    for ix in inspect(engine).get_indexes("runs"):
        indexed.update(ix["column_names"])
    for col in ("experiment", "variant", "task_id", "state", "stop_reason", "verdict", "started_at"):
        assert col in indexed, col


def clean_copy(dest: Path) -> Path:
    """The checkout's files without what builds leave behind (a stale build/ folder would put
    modules that no longer exist into the wheel): the tracked files, else the tree without
    build products."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, timeout=60)
    if listed.returncode == 0 and listed.stdout:
        for name in filter(None, listed.stdout.decode().split("\0")):
            src = ROOT / name
            if src.is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / name)
    else:
        shutil.copytree(ROOT, dest, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__"))
    return dest


def test_a_plain_install_ships_every_module_templates_static_and_migrations_and_no_app_package(tmp_path):
    out = tmp_path / "wheel"
    src = clean_copy(tmp_path / "src")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    names = zipfile.ZipFile(next(out.glob("*.whl"))).namelist()
    assert "qita_board/templates/base.html" in names
    assert "qita_board/static/app.css" in names and "qita_board/static/vendor/htmx-2.0.11.min.js" in names
    assert "qita_board/migrations/env.py" in names
    assert any(n.startswith("qita_board/migrations/versions/0001") for n in names)
    assert "qita/format.py" in names
    # every module of the app/ folder, subpackages too, under the unique import name
    app_modules = {f"qita_board/{p.relative_to(ROOT / 'app').as_posix()}" for p in (ROOT / "app").rglob("*.py")}
    assert app_modules <= set(names), sorted(app_modules - set(names))
    # and no top-level `app` package, which would collide with other FastAPI projects
    assert not [n for n in names if n.split("/")[0] == "app"]


def test_an_ingest_checkpoints_the_wal_in_the_background_and_gives_the_connections_their_default_back(
        tmp_path, migrated_sqlite, monkeypatch):
    """app.db.Checkpointer: the ingest's commits skip SQLite's own checkpoint (a copy and an
    fsync every 4 MB), a thread of its own checkpoints instead, so the WAL stays a fraction
    of what was written, and every connection has SQLite's default back afterwards."""
    import orjson

    from qita_board import db as db_module
    from qita_board.db import Checkpointer, open_database
    from qita_board.ingest import Ingestor
    from tests.conftest import fresh_sqlite

    monkeypatch.setattr(db_module, "CHECKPOINT_WAL_BYTES", 256 * 1024)
    made: list[Checkpointer] = []
    real_init = Checkpointer.__init__

    def spy(self, *a, **k):
        real_init(self, *a, **k)
        made.append(self)

    monkeypatch.setattr(Checkpointer, "__init__", spy)
    real_nudge = Checkpointer.nudge
    gave_up: list[Checkpointer] = []

    def nudge_then_wait(self):
        # Each checkpoint asked for is waited for: whether the thread gets a core before the
        # next commit is the machine's business (on a busy one the WAL grew past the trace).
        before = self.checkpoints
        asked = os.path.exists(self.wal) and os.path.getsize(self.wal) >= db_module.CHECKPOINT_WAL_BYTES
        real_nudge(self)
        deadline = time.monotonic() + 10
        while asked and not gave_up and self.checkpoints == before:
            if time.monotonic() > deadline:
                gave_up.append(self)  # a thread that never checkpoints: the asserts below say so
            time.sleep(0.002)

    monkeypatch.setattr(Checkpointer, "nudge", nudge_then_wait)
    settings = fresh_sqlite(migrated_sqlite, tmp_path).model_copy(update={"batch_lines": 200, "reader_process_bytes": 0})
    trace = tmp_path / "t.jsonl"
    with open(trace, "wb") as fh:
        for i in range(6000):
            fh.write(orjson.dumps({"type": "step", "run_id": f"r{i % 3}", "step": i, "observation": "o" * 1500}) + b"\n")
    engine = open_database(settings)
    try:
        assert Ingestor(engine, settings).ingest_paths([str(trace)]).ok
        wal = Path(str(settings.db) + "-wal")
        assert len(made) == 1 and made[0].checkpoints >= 3
        # reused after each checkpoint: without them it holds every page written, more than
        # the trace itself (16.4 MB here against 9.4 MB); with them 3.5 MB
        assert wal.stat().st_size < trace.stat().st_size
        for _ in range(3):  # whichever pooled connection comes back
            with engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == db_module.AUTOCHECKPOINT_PAGES
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM steps").scalar() == 6000
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    finally:
        engine.dispose()
    assert not any(t.name == "qita-checkpoint" for t in __import__("threading").enumerate())
