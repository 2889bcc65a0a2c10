"""Faults: kill -9 in the middle of an ingest, a read-only file system, a full disk.

The disk tests mount a small tmpfs inside the test's folder (the test machines run the
suite as root); where mounting is not allowed they skip with that reason.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from tests.conftest import ROOT

RUNS, STEPS_PER_RUN, PAD = 40, 900, 1200  # 36,000 steps of ~1.3 KB: ~48 MB (read in a reader process, ~1 s)


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    env.pop("QITA_TOKEN", None)
    return env


def _cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qita_board.cli", *args], cwd=cwd, env=_env(**env), capture_output=True,
                          text=True, timeout=600)


def _big_trace(path: Path) -> Path:
    pad = "p" * PAD
    with open(path, "wb") as fh:
        for r in range(RUNS):
            rid = f"big-{r:03d}"
            fh.write(orjson.dumps({"type": "run_start", "run_id": rid, "ts": "2025-01-01T00:00:00Z"}) + b"\n")
        for s in range(STEPS_PER_RUN):
            for r in range(RUNS):
                fh.write(orjson.dumps({"type": "step", "run_id": f"big-{r:03d}", "step": s, "observation": pad,
                                       "tokens": {"input": 2, "output": 1, "total": 3}}) + b"\n")
        for r in range(RUNS):
            fh.write(orjson.dumps({"type": "run_end", "run_id": f"big-{r:03d}", "status": "completed",
                                   "stop_reason": "final"}) + b"\n")
    return path


def _counts(db: Path) -> dict:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {
            "integrity": conn.execute("PRAGMA integrity_check").fetchone()[0],
            "runs": conn.execute("SELECT count(*) FROM runs").fetchone()[0],
            "steps": conn.execute("SELECT count(*) FROM steps").fetchone()[0],
            "per_run": dict(conn.execute("SELECT r.run_id, count(s.id) FROM runs r LEFT JOIN steps s ON s.run_pk = r.id "
                                         "GROUP BY r.run_id").fetchall()),
            "derived": dict(conn.execute("SELECT run_id, steps FROM runs").fetchall()),
            "dupes": conn.execute("SELECT count(*) FROM (SELECT run_pk, step FROM steps GROUP BY run_pk, step "
                                  "HAVING count(*) > 1)").fetchone()[0],
            "ended": conn.execute("SELECT count(*) FROM runs WHERE has_end").fetchone()[0],
        }
    finally:
        conn.close()


def _steps_committed(db: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return conn.execute("SELECT count(*) FROM steps").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def test_kill_9_mid_ingest_leaves_a_consistent_database_and_rerun_completes(tmp_path: Path):
    trace = _big_trace(tmp_path / "big.jsonl")
    total_steps = RUNS * STEPS_PER_RUN
    db = tmp_path / "killed.db"
    proc = subprocess.Popen([sys.executable, "-m", "qita_board.cli", "ingest", str(trace), "--db", str(db), "--json"],
                            cwd=tmp_path, env=_env(QITA_BATCH_LINES="500"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        seen = 0
        for _ in range(6000):
            seen = _steps_committed(db)
            if seen > 0 or proc.poll() is not None:
                break
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    after_kill = _counts(db)
    assert 0 < after_kill["steps"] < total_steps  # really killed in the middle
    assert after_kill["integrity"] == "ok"
    assert after_kill["dupes"] == 0
    # Every committed batch left its runs' derived figures matching their rows.
    assert after_kill["derived"] == after_kill["per_run"]

    rerun = _cli("ingest", str(trace), "--db", str(db), "--json", cwd=tmp_path, QITA_BATCH_LINES="500")
    assert rerun.returncode == 0, rerun.stderr
    clean_db = tmp_path / "clean.db"
    clean = _cli("ingest", str(trace), "--db", str(clean_db), "--json", cwd=tmp_path, QITA_BATCH_LINES="500")
    assert clean.returncode == 0, clean.stderr
    resumed, fresh = _counts(db), _counts(clean_db)
    assert resumed["steps"] == fresh["steps"] == total_steps
    assert resumed["runs"] == fresh["runs"] == RUNS
    assert resumed["ended"] == RUNS
    assert resumed["per_run"] == fresh["per_run"] == {f"big-{r:03d}": STEPS_PER_RUN for r in range(RUNS)}
    assert resumed["derived"] == resumed["per_run"]
    assert resumed["dupes"] == 0 and resumed["integrity"] == "ok"


@contextmanager
def _tmpfs(folder: Path, size: str):
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or 'not permitted'}): disk fault test skipped")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _small(path: Path, run_id: str = "r") -> Path:
    path.write_bytes(orjson.dumps({"type": "run_start", "run_id": run_id}) + b"\n"
                     + orjson.dumps({"type": "step", "run_id": run_id, "step": 0}) + b"\n")
    return path


def test_read_only_file_system_gives_one_clear_line(tmp_path: Path):
    trace = _small(tmp_path / "t.jsonl")
    with _tmpfs(tmp_path / "ro", "8m") as mnt:
        db = mnt / "q.db"
        assert _cli("ingest", str(trace), "--db", str(db), cwd=tmp_path).returncode == 0
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        ingest = _cli("ingest", str(_small(tmp_path / "t2.jsonl", "r2")), "--db", str(db), cwd=tmp_path)
        board = _cli("board", "--db", str(db), "--port", "1", cwd=tmp_path)
    for proc in (ingest, board):
        assert proc.returncode == 1
        assert proc.stderr.strip() == "error: cannot open database: the database is on a read-only file system"
        assert "Traceback" not in proc.stderr + proc.stdout


def test_full_disk_gives_one_clear_line_and_keeps_what_was_committed(tmp_path: Path):
    trace = _big_trace(tmp_path / "big.jsonl")
    with _tmpfs(tmp_path / "full", "2m") as mnt:
        db = mnt / "q.db"
        proc = _cli("ingest", str(trace), "--db", str(db), cwd=tmp_path, QITA_BATCH_LINES="200")
        assert proc.returncode == 1
        assert proc.stderr.strip() == "error: cannot write to the database: the disk is full"
        assert "Traceback" not in proc.stderr + proc.stdout
        counts = _counts(db)
    assert counts["integrity"] == "ok"
    assert counts["dupes"] == 0
    assert counts["derived"] == counts["per_run"]


def test_missing_database_folder_is_a_clear_error(tmp_path: Path):
    proc = _cli("ingest", str(_small(tmp_path / "t.jsonl")), "--db", str(tmp_path / "nowhere" / "q.db"), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "error: database folder does not exist: nowhere"


# -- a batch the database refuses costs its own file, not the pass ---------------------------

#: A trigger stands for a record the database refuses for its own sake (a constraint, a
#: value out of a column's range): SQLite reports RAISE(ABORT) as a constraint failure.
POISON = ("CREATE TRIGGER poison BEFORE INSERT ON steps WHEN NEW.ts = 'poison' "
          "BEGIN SELECT RAISE(ABORT, 'poisoned step'); END")


def _lines(path: Path, *records: dict) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def _poisoned_db(tmp_path: Path) -> Path:
    db = tmp_path / "q.db"
    assert _cli("ingest", str(_small(tmp_path / "seed.jsonl", "seed")), "--db", str(db), cwd=tmp_path).returncode == 0
    conn = sqlite3.connect(db)
    conn.execute(POISON)
    conn.commit()
    conn.close()
    return db


def test_a_batch_the_database_refuses_fails_its_own_file_and_the_other_files_land(tmp_path: Path):
    db = _poisoned_db(tmp_path)
    # Batches of two lines: lines 1-2 land, the batch of lines 3-4 is refused, line 5 is never read.
    poison = _lines(tmp_path / "a-poison.jsonl", {"type": "run_start", "run_id": "p"}, {"type": "step", "run_id": "p", "step": 0},
                    {"type": "step", "run_id": "p", "step": 1, "ts": "poison"}, {"type": "step", "run_id": "p", "step": 2},
                    {"type": "step", "run_id": "p", "step": 3})
    good = _small(tmp_path / "b-good.jsonl", "g")
    proc = _cli("ingest", str(poison), str(good), "--db", str(db), "--json", cwd=tmp_path, QITA_BATCH_LINES="2")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    report = orjson.loads(proc.stdout)
    assert report["errors"] == [{"file": str(poison), "line": 3, "message": (
        "not stored, with the rest of the file: the database refused the batch of lines 3 to 4 (poisoned step); "
        "the lines before it are kept")}]
    counts = _counts(db)
    assert counts["integrity"] == "ok"
    assert counts["per_run"] == {"seed": 1, "p": 1, "g": 1}


def test_a_refused_batch_in_a_file_read_by_its_own_process_stops_that_process(tmp_path: Path):
    db = _poisoned_db(tmp_path)
    trace = _big_trace(tmp_path / "big.jsonl")
    with open(trace, "ab") as fh:  # the last batch is refused
        fh.write(orjson.dumps({"type": "step", "run_id": "big-000", "step": 99999, "ts": "poison"}) + b"\n")
    lines = RUNS * (STEPS_PER_RUN + 2) + 1
    proc = _cli("ingest", str(trace), "--db", str(db), "--json", cwd=tmp_path, QITA_READER_PROCESS_BYTES="1")
    assert proc.returncode == 1
    (error,) = orjson.loads(proc.stdout)["errors"]
    assert error["file"] == str(trace)
    assert error["message"].startswith("not stored, with the rest of the file: the database refused the batch of lines ")
    assert error["message"].endswith(f" to {lines} (poisoned step); the lines before it are kept")
    counts = _counts(db)
    assert counts["integrity"] == "ok" and counts["dupes"] == 0
    assert 0 < counts["steps"] - 1 < RUNS * STEPS_PER_RUN  # the batches before it, and the seed's step


def test_a_refused_file_is_not_read_again_by_the_watcher_until_it_changes(tmp_path: Path):
    from qita_board.db import open_database
    from qita_board.ingest import Ingestor
    from qita_board.settings import Settings

    db = _poisoned_db(tmp_path)
    folder = tmp_path / "watched"
    folder.mkdir()
    poison = _lines(folder / "p.jsonl", {"type": "run_start", "run_id": "p"}, {"type": "step", "run_id": "p", "step": 0, "ts": "poison"})
    settings = Settings(db=str(db))
    engine = open_database(settings)
    refused: dict = {}

    def watch_pass():
        ingestor = Ingestor(engine, settings)
        ingestor.refused = refused
        return ingestor.ingest_paths([str(folder)], final=False)

    try:
        first = watch_pass()
        assert [(e.file, e.line) for e in first.errors] == [(str(poison), 1)]
        for _ in range(3):  # unchanged: not read, not reported again, pass after pass
            assert watch_pass().errors == [] and len(refused) == 1
        with open(poison, "ab") as fh:  # it changed: read again from where its last batch landed
            fh.write(orjson.dumps({"type": "step", "run_id": "p", "step": 1}) + b"\n")
        assert [(e.file, e.line) for e in watch_pass().errors] == [(str(poison), 1)]
        conn = sqlite3.connect(db)
        conn.execute("DROP TRIGGER poison")
        conn.commit()
        conn.close()
        os.utime(poison, ns=(time.time_ns(), time.time_ns() + 10**9))
        last = watch_pass()
        assert last.errors == [] and last.records == 3 and refused == {}
    finally:
        engine.dispose()
    assert _counts(db)["per_run"] == {"seed": 1, "p": 2}


def test_a_bug_met_while_storing_one_file_is_reported_on_it_and_logged(ingest, engine, tmp_path: Path, monkeypatch, caplog):
    from qita_board.ingest import store

    apply = store.Applier.apply

    def failing(self, conn, batch, **kw):
        if "bug" in batch.runs:
            raise KeyError("a secret path /etc/x")
        return apply(self, conn, batch, **kw)

    monkeypatch.setattr(store.Applier, "apply", failing)
    bug = _small(tmp_path / "a.jsonl", "bug")
    good = _small(tmp_path / "b.jsonl", "g")
    report = ingest(bug, good)
    assert [(e.file, e.line, e.message) for e in report.errors] == [(str(bug), 1, (
        "not stored, with the rest of the file: an internal error stopped the batch of lines 1 to 2 "
        "(the board's log has the details)"))]
    assert report.created == {"g"}
    assert any(r.levelname == "ERROR" and r.exc_info and "a.jsonl" in r.getMessage() for r in caplog.records)
