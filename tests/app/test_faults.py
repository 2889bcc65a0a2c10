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
