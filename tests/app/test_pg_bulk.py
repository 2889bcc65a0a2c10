"""PostgreSQL ingest through COPY (app.ingest.pg_bulk): the same rows as SQLite, idempotent, resumable.

Each test ingests the same bytes into a SQLite file and a fresh PostgreSQL database
and compares every stored row (ids and clock times aside). Needs QITA_TEST_POSTGRES_URL.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from sqlalchemy import select

from bench.gen import generate
from qita_board.db import open_database
from qita_board.errors import BoardError
from qita_board.ingest import Ingestor, pg_bulk
from qita_board.models import CRITERIA, CRITICS, EARLY, EVENTS, RUNS, SOURCES, STEPS
from qita_board.settings import Settings

pytestmark = pytest.mark.postgres

#: Columns that hold the row's id or the wall-clock time of the ingest, not the trace.
VOLATILE = {"id", "updated_at", "last_seen_at", "created_at", "origin"}


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return (value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)).isoformat()
    return value


def dump(engine) -> dict[str, list]:
    """Every stored row of the ingest tables, run keys as run ids, sorted."""
    out: dict[str, list] = {}
    with engine.connect() as conn:
        run_ids = dict(conn.execute(select(RUNS.c.id, RUNS.c.run_id)).all())
        for table in (RUNS, STEPS, CRITICS, EVENTS, CRITERIA, EARLY):
            cols = [c for c in table.c if c.name not in VOLATILE]
            rows = []
            for row in conn.execute(select(*cols)).mappings():
                row = {k: _plain(v) for k, v in row.items()}
                if "run_pk" in row:
                    row["run_pk"] = run_ids[row["run_pk"]]
                rows.append(orjson.dumps(row, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS))
            out[table.name] = sorted(rows)
    return out


def trace(path: Path) -> Path:
    """Generated runs, plus the awkward lines: a NUL escape, a repeated event, a re-written step."""
    generate(path, runs=3, steps=40, experiments=1, obs_bytes=600)
    extra = [
        {"type": "run_start", "run_id": "odd", "objective": "tab\there, back\\slash, new\nline, nul \x00 end"},
        {"type": "step", "run_id": "odd", "step": 0, "ts": "2026-01-05T09:00:01Z", "observation": "a\x00b",
         "critic_outputs": [{"critic": "c\tx", "action": "continue", "score": 0.5, "details": {"k\x00": [1, "\\N"]}}]},
        {"type": "event", "run_id": "odd", "step": 0, "phase": "ACT", "ok": True, "payload": "\\N"},
        {"type": "event", "run_id": "odd", "step": 0, "phase": "ACT", "ok": True, "payload": "\\N"},
        {"type": "step", "run_id": "odd", "step": 1, "critic_outputs": [{"critic": "a", "action": "stop"},
                                                                       {"critic": "b", "action": "continue"}]},
        # step 1 again: the later record wins, with its single critic output
        {"type": "step", "run_id": "odd", "step": 1, "critic_outputs": [{"critic": "z", "action": "warn", "score": 1}]},
        {"type": "criterion", "run_id": "odd", "id": "done", "score": 1.5},
        {"type": "run_end", "run_id": "odd", "status": "finished", "stop_reason": "final", "score": 0.25},
    ]
    with open(path, "ab") as fh:
        for rec in extra:
            fh.write(orjson.dumps(rec) + b"\n")
    return path


def ingest(settings: Settings, *paths: Path):
    engine = open_database(settings)
    try:
        report = Ingestor(engine, settings).ingest_paths([str(p) for p in paths])
        return report, dump(engine)
    finally:
        engine.dispose()


@pytest.fixture
def sqlite(tmp_path: Path) -> Settings:
    return Settings(db=str(tmp_path / "qita.db"), batch_lines=50)


def test_copy_path_is_taken_and_stores_what_sqlite_stores(pg_settings: Settings, sqlite: Settings, tmp_path: Path,
                                                           monkeypatch):
    path = trace(tmp_path / "t.jsonl")
    calls: list[tuple[str, str | None]] = []
    real = pg_bulk.write
    monkeypatch.setattr(pg_bulk, "write", lambda conn, table, *a, **k: (calls.append((table, k.get("on_conflict"))),
                                                                        real(conn, table, *a, **k))[1])
    pg_report, pg_rows = ingest(pg_settings, path)
    lite_report, lite_rows = ingest(sqlite, path)
    assert {t for t, _ in calls} == {"steps", "critic_outputs", "events"}
    assert pg_report.records == lite_report.records > 0
    assert [w.to_json() for w in pg_report.warnings] == [w.to_json() for w in lite_report.warnings]
    assert [e.to_json() for e in pg_report.errors] == [e.to_json() for e in lite_report.errors] == []
    assert pg_rows == lite_rows
    assert len(pg_rows["steps"]) == 3 * 40 + 2 and len(pg_rows["critic_outputs"]) > 3 * 40


def test_reingest_changes_nothing_and_a_rewritten_file_replaces_its_steps(pg_settings: Settings, sqlite: Settings,
                                                                           tmp_path: Path):
    path = trace(tmp_path / "t.jsonl")
    _, first = ingest(pg_settings, path)
    # Forget the source: the whole file is read again, every key is stored already.
    engine = open_database(pg_settings)
    with engine.begin() as conn:
        conn.execute(SOURCES.delete())
    engine.dispose()
    report, again = ingest(pg_settings, path)
    assert report.errors == [] and again == first
    # The file changes before its saved offset: it is read again from the start; the changed
    # step replaces the stored one (critic outputs too), everything else stays as it was.
    lines = path.read_bytes().splitlines(keepends=True)
    changed = [orjson.loads(x) for x in lines]
    i = next(i for i, r in enumerate(changed) if r["type"] == "step" and r["step"] == 3)
    changed[i]["critic_outputs"] = [{"critic": "only", "action": "stop", "score": 0.0}]
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in changed))
    pg_report, pg_rows = ingest(pg_settings, path)
    _, lite_rows = ingest(sqlite, path)
    # A new version of the file for PostgreSQL, a first read for SQLite: the one warning
    # (on the run, too) is the only difference (app.ingest.overwrite).
    run_id = changed[i]["run_id"]
    said = [w.message for w in pg_report.warnings if "new version" in w.message]
    assert said == [f"run {run_id!r}: 1 record(s) of the new version of {path} replaced what its earlier version "
                    "stored (step 3)"]

    def without_warnings(rows: dict) -> dict:
        runs = [orjson.loads(r) for r in rows["runs"]]
        assert sum(bool(r["warnings"]) and said[0] in r["warnings"] for r in runs) <= 1
        return {**rows, "runs": sorted(orjson.dumps({**r, "warnings": [w for w in r["warnings"] or [] if w not in said]
                                                     or None}, option=orjson.OPT_SORT_KEYS) for r in runs)}

    assert without_warnings(pg_rows) == without_warnings(lite_rows)
    assert pg_rows["steps"] == lite_rows["steps"] and pg_rows["events"] == first["events"]


def test_a_failed_batch_leaves_the_offset_of_the_last_committed_one_and_a_rerun_completes(
        pg_settings: Settings, sqlite: Settings, tmp_path: Path, monkeypatch):
    path = trace(tmp_path / "t.jsonl")
    size = path.stat().st_size
    real, seen = pg_bulk._copy, []

    def failing(cur, table, cols, rows):
        seen.append(table)
        if len(seen) == 8:  # inside the third batch, after some of its rows were copied
            raise psycopg.OperationalError("server closed the connection")
        return real(cur, table, cols, rows)

    monkeypatch.setattr(pg_bulk, "_copy", failing)
    engine = open_database(pg_settings)
    with pytest.raises(BoardError, match="cannot write to the database"):
        Ingestor(engine, pg_settings).ingest_paths([str(path)])
    with engine.connect() as conn:
        offset, lines = conn.execute(select(SOURCES.c.offset, SOURCES.c.lines)).one()
        stored = conn.execute(select(STEPS.c.id)).all()
    engine.dispose()
    assert 0 < offset < size and lines == 100  # the two batches of 50 lines before, nothing of the third
    assert 0 < len(stored) < 3 * 40
    monkeypatch.setattr(pg_bulk, "_copy", real)
    # The rerun starts from the saved offset and ends with what SQLite stores from one pass.
    _, pg_rows = ingest(pg_settings, path)
    _, lite_rows = ingest(sqlite, path)
    assert pg_rows == lite_rows
    engine = open_database(pg_settings)
    with engine.connect() as conn:
        assert conn.execute(select(SOURCES.c.offset)).scalar_one() == size
    engine.dispose()


def test_appended_lines_are_read_from_the_offset(pg_settings: Settings, sqlite: Settings, tmp_path: Path):
    full = trace(tmp_path / "full.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "grow.jsonl"
    path.write_bytes(b"".join(full[: len(full) // 2]))
    ingest(pg_settings, path)
    path.write_bytes(b"".join(full))
    _, pg_rows = ingest(pg_settings, path)
    _, lite_rows = ingest(sqlite, path)
    assert pg_rows == lite_rows


def _orphans(engine) -> int:
    """Rows of the tables without a foreign key on PostgreSQL (migration 0016) whose run is gone."""
    from sqlalchemy import text

    with engine.connect() as conn:
        return sum(conn.execute(text(f"SELECT count(*) FROM {t} x WHERE NOT EXISTS "
                                     "(SELECT 1 FROM runs r WHERE r.id = x.run_pk)")).scalar()
                   for t in ("steps", "critic_outputs", "events"))


def _steps_of(run_id: str, first: int, n: int) -> list[dict[str, Any]]:
    return [{"type": "step", "run_id": run_id, "step": i, "critic_outputs": [{"critic": "c", "action": "continue"}]}
            for i in range(first, first + n)]


def test_a_delete_waits_for_the_ingest_writing_to_its_run_and_leaves_no_rows_behind(pg_settings: Settings,
                                                                                   tmp_path: Path, monkeypatch):
    import threading
    import time

    from qita_board import removal
    from qita_board.ingest.store import Applier

    engine = open_database(pg_settings)
    try:
        first = tmp_path / "a.jsonl"
        first.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in _steps_of("r", 0, 3)))
        Ingestor(engine, pg_settings).ingest_paths([str(first)])
        # the second ingest stops inside its transaction, holding run r, until released
        held, release = threading.Event(), threading.Event()
        real = Applier._hold_runs

        def hold_then_wait(self, conn, run_ids, created):
            real(self, conn, run_ids, created)
            held.set()
            release.wait(10)

        monkeypatch.setattr(Applier, "_hold_runs", hold_then_wait)
        second = tmp_path / "b.jsonl"
        second.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in _steps_of("r", 3, 3)))
        writer = threading.Thread(target=lambda: Ingestor(engine, pg_settings).ingest_paths([str(second)]))
        writer.start()
        assert held.wait(10)
        took: list[float] = []

        def delete_run() -> None:
            start = time.monotonic()
            with engine.begin() as conn:
                removal.execute(conn, removal.plan_runs(conn, run_ids=["r"]))
            took.append(time.monotonic() - start)

        deleter = threading.Thread(target=delete_run)
        deleter.start()
        time.sleep(0.5)
        assert deleter.is_alive()  # waiting for the run the ingest holds
        release.set()
        writer.join(10)
        deleter.join(10)
        assert took and took[0] >= 0.5
        with engine.connect() as conn:
            assert conn.execute(select(RUNS.c.id)).all() == []  # the run and everything written to it
        assert _orphans(engine) == 0
    finally:
        engine.dispose()


def test_an_ingest_waits_for_a_delete_of_its_run_and_writes_to_a_new_one(pg_settings: Settings, tmp_path: Path):
    import threading
    import time

    from qita_board import removal

    engine = open_database(pg_settings)
    try:
        first = tmp_path / "a.jsonl"
        first.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in _steps_of("r", 0, 3)))
        ingestor = Ingestor(engine, pg_settings)
        ingestor.ingest_paths([str(first)])  # the ingestor now remembers run r's key
        with engine.connect() as conn:
            old_pk = conn.execute(select(RUNS.c.id)).scalar()
        conn = engine.connect()
        trans = conn.begin()
        removal.execute(conn, removal.plan_runs(conn, run_ids=["r"]))  # deleted, not yet committed
        second = tmp_path / "b.jsonl"
        second.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in _steps_of("r", 3, 2)))
        done: list[Any] = []
        writer = threading.Thread(target=lambda: done.append(ingestor.ingest_paths([str(second)])))
        writer.start()
        time.sleep(0.5)
        assert writer.is_alive()  # waiting for the delete
        trans.commit()
        conn.close()
        writer.join(10)
        assert done and done[0].ok
        with engine.connect() as c:
            runs = c.execute(select(RUNS.c.id, RUNS.c.run_id, RUNS.c.steps)).all()
            steps = sorted(n for (n,) in c.execute(select(STEPS.c.step)))
        assert len(runs) == 1 and runs[0].id != old_pk and runs[0].run_id == "r"
        assert steps == [3, 4] and runs[0].steps == 2  # only what came after the delete, in a new run
        assert _orphans(engine) == 0
    finally:
        engine.dispose()
