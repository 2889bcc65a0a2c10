"""Issue 15 item 5: SIGTERM and SIGINT stop `qita ingest`, `qita board --watch` and a board
with an upload running, within 5 s, with every batch whole; running again completes the
data with no duplicate and no lost record (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
from sqlalchemy import create_engine, text

from tests.conftest import ROOT

STEPS = 100_000
BATCH = 1000


def _trace(path: Path, run_id: str = "big") -> Path:
    with open(path, "wb") as fh:
        fh.write(orjson.dumps({"type": "run_start", "run_id": run_id, "ts": "2025-01-01T00:00:00Z"}) + b"\n")
        for i in range(STEPS):
            fh.write(orjson.dumps({"type": "step", "run_id": run_id, "step": i, "observation": f"obs {i}"}) + b"\n")
        fh.write(orjson.dumps({"type": "run_end", "run_id": run_id, "status": "completed", "stop_reason": "final"}) + b"\n")
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'q.db'}"
    return request.getfixturevalue("pg_url")


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QITA_BATCH_LINES": str(BATCH)}
    env.pop("QITA_TOKEN", None)
    return env


def _cli(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "qita_board.cli", *args], cwd=cwd, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _steps(url: str) -> int:
    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM steps")).scalar_one()
    except Exception:
        return 0
    finally:
        eng.dispose()


def _until(pred, timeout=120.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} never held")


def _stop(proc: subprocess.Popen, sig: int) -> float:
    started = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return time.monotonic() - started


def _complete(url: str, path: Path, cwd: Path) -> None:
    """Ingest again and check the result equals a clean ingest: every step once, derived figures right."""
    done = subprocess.run([sys.executable, "-m", "qita_board.cli", "ingest", str(path), "--db", url, "--json"], cwd=cwd,
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            assert conn.execute(text("SELECT count(*), count(DISTINCT step), min(step), max(step) FROM steps")).one() \
                == (STEPS, STEPS, 0, STEPS - 1)
            assert conn.execute(text("SELECT steps, state FROM runs WHERE run_id = 'big'")).one() == (STEPS, "finished")
    finally:
        eng.dispose()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_qita_ingest_stops_within_5_s_and_a_rerun_completes(tmp_path, db_url, sig):
    path = _trace(tmp_path / "big.jsonl")
    proc = _cli("ingest", str(path), "--db", db_url, cwd=tmp_path)
    _until(lambda: _steps(db_url) > 0 or proc.poll() is not None, what="ingest started")
    assert proc.poll() is None, "the ingest finished before it could be stopped: make the trace bigger"
    took = _stop(proc, sig)
    err = proc.stderr.read()
    assert took < 5, took
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and "stopped: every batch written before the signal is kept" in err
    kept = _steps(db_url)
    assert 0 < kept < STEPS and (kept + 1) % BATCH == 0  # whole batches only (run_start is in the first)
    _complete(db_url, path, tmp_path)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _board(tmp_path: Path, db_url: str, *args: str) -> tuple[subprocess.Popen, str]:
    port = _port()
    proc = _cli("board", "--db", db_url, "--port", str(port), *args, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read())
        try:
            return httpx.get(base + "/api/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    _until(up, what="board up")
    return proc, base


@pytest.mark.parametrize("sig", [signal.SIGTERM])
def test_board_watching_a_folder_stops_within_5_s_and_a_rerun_completes(tmp_path, db_url, sig):
    folder = tmp_path / "runs"
    folder.mkdir()
    proc, _base = _board(tmp_path, db_url, "--watch", str(folder))
    path = _trace(folder / "big.jsonl")
    _until(lambda: _steps(db_url) > 0, what="watch pass started")
    took = _stop(proc, sig)
    err = proc.stderr.read()
    assert took < 5, took
    assert "Traceback" not in err, err
    assert _steps(db_url) < STEPS
    _complete(db_url, path, tmp_path)


def test_ctrl_c_stops_an_idle_board_with_status_130_and_no_other_word(tmp_path):
    # uvicorn shuts down, then sends the SIGINT it caught again to the handler it found
    url = f"sqlite:///{tmp_path / 'q.db'}"
    proc, _base = _board(tmp_path, url)
    took = _stop(proc, signal.SIGINT)
    err = proc.stderr.read()
    assert took < 5, took
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" not in err and "Aborted" not in err, err


def test_board_with_an_upload_running_stops_within_5_s_leaving_no_temporary_files(tmp_path, db_url):
    from qita_board import tempfiles

    proc, base = _board(tmp_path, db_url)
    path = _trace(tmp_path / "big.jsonl")
    with open(path, "rb") as fh:
        job = httpx.post(base + "/api/traces", files={"files": ("big.jsonl", fh)}, timeout=120).json()
    _until(lambda: httpx.get(base + job["poll"], timeout=5).json()["records"] > 0, what="upload ingest started")
    folder = tempfiles.base() / str(proc.pid)
    assert folder.is_dir() and any(folder.iterdir())  # the stored upload
    took = _stop(proc, signal.SIGTERM)
    err = proc.stderr.read()
    assert took < 5, took
    assert "Traceback" not in err and "CancelledError" not in err, err
    assert not folder.exists()
    kept = _steps(db_url)
    assert kept < STEPS and (kept + 1) % BATCH == 0
