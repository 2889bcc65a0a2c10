"""The board on PostgreSQL: the ingest and API scenarios again, NUL text, and two boards on one server.

Every test here needs QITA_TEST_POSTGRES_URL (a server where the user may create
databases); without it they are skipped with that reason. Each test gets a fresh
database (fixture `pg_url` in tests/conftest.py).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from qita_board.ingest import Ingestor
from qita_board.main import create_app
from qita_board.settings import Settings
from tests.app.test_bad_input import CASES, MAX_ARCHIVE, MAX_LINE, Case, check_issues, check_kept, end, lines, start, step, write_case
from tests.conftest import ROOT, write_jsonl

# "stamp" (live polling) digests last_seen_at, the wall-clock time the run was read.
VOLATILE = {"id", "updated_at", "last_seen_at", "created_at", "stamp"}


def _client(settings: Settings) -> TestClient:
    return TestClient(create_app(settings), base_url="http://127.0.0.1")


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_corpus_on_postgres(pg_url: str, tmp_path: Path, monkeypatch, case: Case):
    settings = Settings(db=pg_url, max_line_bytes=MAX_LINE, max_archive_bytes=MAX_ARCHIVE, batch_lines=50)
    write_case(case, tmp_path)
    monkeypatch.chdir(tmp_path)  # labels are the paths as given: the bare file names, as the CLI test
    with _client(settings) as c:
        report = Ingestor(c.app.state.engine, settings).ingest_paths([case.filename])
        check_issues(case, [e.to_json() for e in report.errors], case.filename)
        assert [(w.line, w.message) for w in report.warnings] == case.warnings
        check_kept(c, case)


def test_nul_characters_are_stored_on_postgres(pg_settings: Settings, tmp_path: Path):
    path = write_jsonl(tmp_path / "nul.jsonl", [
        {"type": "run_start", "run_id": "nul", "objective": "a\x00b", "tags": ["t\x00"], "metadata": {"k\x00": "v\x00"}},
        {"type": "step", "run_id": "nul", "step": 0, "observation": "x\x00y",
         "critic_outputs": [{"critic": "c\x00", "action": "stop", "reason": "r\x00", "details": {"d\x00": 1}}]},
        {"type": "event", "run_id": "nul", "phase": "P\x00", "payload": "\x00"},
        {"type": "run_end", "run_id": "nul", "status": "completed", "stop_reason": "final", "final_result": "\x00done"},
    ])
    with _client(pg_settings) as c:
        report = Ingestor(c.app.state.engine, pg_settings).ingest_paths([str(path)])
        assert report.ok, [str(e) for e in report.errors]
        run = c.get("/api/runs/nul").json()["run"]
        assert run["objective"] == "a\ufffdb"
        assert run["final_result"] == "\ufffddone"
        steps = c.get("/api/runs/nul/steps").json()
        assert steps["count"] == 1
        assert steps["data"][0]["critic_outputs"][0]["reason"] == "r\ufffd"
        assert c.get("/runs/nul").status_code == 200


def _demo_files(tmp_path: Path) -> list[str]:
    from qita.demo import run_demo

    return [str(f) for f in run_demo(tmp_path / "demo", tasks=6)]


def test_postgres_and_sqlite_answer_the_api_alike(pg_settings: Settings, tmp_path: Path):
    files = _demo_files(tmp_path)
    sqlite_settings = Settings(db=str(tmp_path / "q.db"), batch_lines=50)
    answers = []
    for s in (sqlite_settings, pg_settings):
        with _client(s) as c:
            first = Ingestor(c.app.state.engine, s).ingest_paths(files)
            again = Ingestor(c.app.state.engine, s).ingest_paths(files)
            assert first.ok and again.records == 0  # a second pass adds nothing
            listing = c.get("/api/runs", params={"limit": 500, "sort": "run_id", "order": "asc"}).json()
            one = listing["data"][0]["run_id"]
            answers.append({
                "list": _strip(listing["data"]),
                "stats": listing["stats"],
                "count": listing["count"],
                "search": [r["run_id"] for r in c.get("/api/runs", params={"q": "smoke", "sort": "run_id"}).json()["data"]],
                "variant": c.get("/api/runs", params={"variant": "e2e"}).json()["count"],
                "run": _strip(c.get(f"/api/runs/{one}").json()),
                "steps": _strip(c.get(f"/api/runs/{one}/steps", params={"limit": 200}).json()),
            })
    assert answers[0]["count"] > 0 and answers[0]["variant"] > 0
    assert answers[1]["stats"] == answers[0]["stats"]
    assert answers[1] == answers[0]


def test_stats_break_count_ties_by_reason_with_nulls_last(any_settings: Settings, tmp_path: Path):
    # Two failed runs for each of six reasons (one of them none at all): equal counts, so only
    # the second sort key decides which five make the top failures, and in which order.
    reasons = ["zeta", None, "alpha", "eps", "Delta", "gamma"]
    records = []
    for i, reason in enumerate(reasons * 2):
        rid = f"tie-{i}"
        end_rec = {"type": "run_end", "run_id": rid, "status": "completed", "verdict": "fail"}
        if reason is not None:
            end_rec["stop_reason"] = reason
        records += [{"type": "run_start", "run_id": rid}, end_rec]
    path = write_jsonl(tmp_path / "ties.jsonl", records)
    with _client(any_settings) as c:
        assert Ingestor(c.app.state.engine, any_settings).ingest_paths([str(path)]).ok
        stats = c.get("/api/runs").json()["stats"]
    # Code-point order puts the capital D first; the reason-less pair goes last and falls off the top five.
    assert [{"reason": f["reason"], "count": f["count"]} for f in stats["top_failures"]] == [
        {"reason": r, "count": 2} for r in ["Delta", "alpha", "eps", "gamma", "zeta"]]
    assert stats["stop_reasons"] == [{"stop_reason": r, "count": 2} for r in ["Delta", "alpha", "eps", "gamma", "zeta", None]]


def test_hostile_and_secret_text_render_escaped_and_masked_on_postgres(pg_settings: Settings, tmp_path: Path):
    payload = "<script>window.__xss(1)</script>"
    path = write_jsonl(tmp_path / "h.jsonl", [
        {"type": "run_start", "run_id": payload, "objective": "key AKIAIOSFODNN7EXAMPLE"},
        {"type": "step", "run_id": payload, "step": 0, "observation": {payload: payload}},
    ])
    with _client(pg_settings) as c:
        assert Ingestor(c.app.state.engine, pg_settings).ingest_paths([str(path)]).ok
        from qita_board.urls import encode_run_id

        body = c.get(f"/runs/{encode_run_id(payload)}").text
        assert payload not in body and "&lt;script&gt;window.__xss(1)&lt;/script&gt;" in body
        assert "AKIAIOSFODNN7EXAMPLE" not in body and "[secret masked: aws-access-key …MPLE]" in body


def test_boards_starting_together_migrate_once(pg_settings: Settings):
    from qita_board.db import open_database

    errors: list[BaseException] = []

    def opener():
        try:
            open_database(pg_settings).dispose()
        except BaseException as exc:  # noqa: BLE001 (collected for the assertion)
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []


def test_unreachable_server_gives_a_clear_error(tmp_path: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    trace = write_jsonl(tmp_path / "t.jsonl", [{"type": "run_start", "run_id": "r"}])
    proc = subprocess.run([sys.executable, "-m", "qita_board.cli", "ingest", str(trace), "--db",
                           f"postgresql+psycopg://postgres@127.0.0.1:{port}/test"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("error: cannot open database: cannot reach the database server "
                                   "(is it running, and is the address right?)")


# -- two boards, one server -------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_board(db: str, port: int, cwd: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QITA_ABANDON_AFTER_S": "3600"}
    return subprocess.Popen([sys.executable, "-m", "qita_board.cli", "board", "--db", db, "--port", str(port), *extra],
                            cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_up(proc: subprocess.Popen, url: str) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            raise AssertionError(f"board exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(url + "/api/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("board did not answer")


def _wait_for(fn, what: str):
    for _ in range(600):
        value = fn()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"gave up waiting for {what}")


def test_two_boards_on_one_postgres_serve_the_same_data_while_one_ingests(pg_url: str, tmp_path: Path):
    folder = tmp_path / "watched"
    folder.mkdir()
    pa, pb = _free_port(), _free_port()
    a = _start_board(pg_url, pa, tmp_path, "--watch", str(folder))
    b = _start_board(pg_url, pb, tmp_path)
    url_a, url_b = f"http://127.0.0.1:{pa}", f"http://127.0.0.1:{pb}"
    try:
        _wait_up(a, url_a)
        _wait_up(b, url_b)
        trace = folder / "live.jsonl"
        trace.write_bytes(lines(start("shared-1"), step("shared-1", 0), step("shared-1", 1)))
        # B never ingests: it sees what A wrote, through the shared server.
        _wait_for(lambda: httpx.get(f"{url_b}/api/runs/shared-1/steps").json().get("count") == 2, "B to see 2 steps")
        with open(trace, "ab") as fh:
            fh.write(lines(*(step("shared-1", n) for n in range(2, 40)), end("shared-1"), start("shared-2"), step("shared-2", 0)))
        errors: list[str] = []

        def read_b():
            for _ in range(40):
                for path in ("/api/runs", "/", "/runs/shared-1", "/api/runs/shared-1/steps?limit=200"):
                    r = httpx.get(url_b + path, timeout=30)
                    if r.status_code >= 500:
                        errors.append(f"{path}: {r.status_code}")

        readers = [threading.Thread(target=read_b) for _ in range(3)]
        for t in readers:
            t.start()
        _wait_for(lambda: httpx.get(f"{url_b}/api/runs/shared-2").status_code == 200
                  and httpx.get(f"{url_b}/api/runs/shared-1").json()["run"]["steps"] == 40, "B to see the appended records")
        for t in readers:
            t.join(300)
        assert errors == []
        for path in ("/api/runs?sort=run_id", "/api/runs/shared-1", "/api/runs/shared-1/steps?limit=200", "/api/runs/shared-2"):
            ja = httpx.get(url_a + path).json()
            jb = httpx.get(url_b + path).json()
            ja.pop("version", None), jb.pop("version", None)
            assert ja == jb, path
        assert httpx.get(f"{url_b}/api/runs?sort=run_id&order=asc").json()["count"] == 2
        run1 = httpx.get(f"{url_b}/api/runs/shared-1").json()["run"]
        assert run1["state"] == "finished" and run1["stop_reason"] == "final"
    finally:
        for proc in (a, b):
            proc.terminate()
        for proc in (a, b):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
