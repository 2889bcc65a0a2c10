"""The `qita` command line, run as a user would: exit codes, JSON summary, bad lines, help."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from tests.conftest import ROOT, write_jsonl

from .test_ingest import EXAMPLE


def qita(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("QITA_DB", None)
    return subprocess.run([sys.executable, "-m", "qita_board.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


def test_ingest_json_summary_and_exit_0(tmp_path):
    db = tmp_path / "q.db"
    r = qita("ingest", str(EXAMPLE), "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    summary = orjson.loads(r.stdout)
    assert {k: summary[k] for k in ("files", "runs", "records", "errors")} == {"files": 1, "runs": 1, "records": 10, "errors": []}
    again = orjson.loads(qita("ingest", str(EXAMPLE), "--db", str(db), "--json").stdout)
    assert (again["runs"], again["records"]) == (0, 0)


def test_qitos_runs_report_four_runs(tmp_path, qitos_runs):
    r = qita("ingest", str(qitos_runs), "--db", str(tmp_path / "q.db"), "--json")
    assert r.returncode == 0, r.stderr
    summary = orjson.loads(r.stdout)
    assert summary["runs"] == 4 and summary["errors"] == []


def test_bad_lines_exit_1_name_each_line_and_keep_the_rest(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [
        {"type": "run_start", "run_id": "r"}, b"not json", {"type": "step", "run_id": "r", "step": 0}, b"[]"])
    r = qita("ingest", str(path), "--db", str(tmp_path / "q.db"))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith(f"{path}:2: invalid JSON")
    assert lines[1] == f"{path}:4: not a JSON object (got an array)"
    assert "2 records from 1 file: 1 run (1 new), 2 rejected" in r.stdout
    js = orjson.loads(qita("ingest", str(path), "--db", str(tmp_path / "other.db"), "--json").stdout)
    assert [(e["line"], e["file"]) for e in js["errors"]] == [(2, str(path)), (4, str(path))]


def test_a_copy_of_an_ingested_file_says_its_runs_are_unchanged(tmp_path):
    recs = [{"type": t, "run_id": rid, **extra} for rid in ("a", "b") for t, extra in (
        ("run_start", {}), ("step", {"step": 0}), ("run_end", {"status": "completed", "stop_reason": "final"}))]
    first, copy = write_jsonl(tmp_path / "first.jsonl", recs), write_jsonl(tmp_path / "copy.jsonl", recs)
    db = str(tmp_path / "q.db")
    assert qita("ingest", str(first), "--db", db).stdout.strip() == "6 records from 1 file: 2 runs (2 new), 0 rejected"
    r = qita("ingest", str(copy), "--db", db)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.strip() == ("6 records from 1 file: 0 runs (0 new), 0 rejected; "
                                "2 runs already stored from another source, unchanged")


def test_usage_errors_exit_2(tmp_path):
    r = qita("ingest", str(tmp_path / "missing.jsonl"), "--db", str(tmp_path / "q.db"))
    assert r.returncode == 2 and "no such file or folder" in r.stderr
    assert qita("ingest").returncode == 2


def test_globs_are_expanded(tmp_path):
    for name in ("a", "b"):
        write_jsonl(tmp_path / f"{name}.jsonl", [{"type": "run_start", "run_id": name}])
    js = orjson.loads(qita("ingest", str(tmp_path / "*.jsonl"), "--db", str(tmp_path / "q.db"), "--json").stdout)
    assert (js["files"], js["runs"]) == (2, 2)


def test_db_from_environment(tmp_path):
    env_db = tmp_path / "env.db"
    r = subprocess.run([sys.executable, "-m", "qita_board.cli", "ingest", str(EXAMPLE), "--json"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "QITA_DB": str(env_db)}, timeout=120)
    assert r.returncode == 0 and env_db.exists()


@pytest.mark.parametrize("command", ["ingest", "board", "demo"])
def test_every_command_has_help_with_an_example(command):
    r = qita(command, "--help")
    assert r.returncode == 0 and "Example:" in r.stdout and "qita " + command in r.stdout


def test_board_refuses_a_public_address_without_a_token(tmp_path):
    r = qita("board", "--db", str(tmp_path / "q.db"), "--host", "0.0.0.0", "--port", "9")
    assert r.returncode == 2
    assert "refusing to listen on 0.0.0.0 without a token" in r.stderr


def test_unwritable_database_is_a_clear_error_not_a_traceback(tmp_path):
    r = qita("ingest", str(EXAMPLE), "--db", str(tmp_path / "no" / "such" / "dir" / "q.db"))
    assert r.returncode == 1
    assert r.stderr.startswith("error: ") and "Traceback" not in r.stderr


def test_ingest_into_a_database_at_head_loads_neither_alembic_nor_the_pages(tmp_path):
    """`qita ingest` starts in about half a second: a database at the newest revision opens
    without Alembic, and the ingest imports nothing of the pages, the comparison or numpy."""
    db = tmp_path / "q.db"
    assert qita("ingest", str(EXAMPLE), "--db", str(db)).returncode == 0
    script = ("import sys\nfrom qita_board.cli import main\n"
              f"try:\n    main(['ingest', {str(EXAMPLE)!r}, '--db', {str(db)!r}], standalone_mode=False)\n"
              "except SystemExit:\n    pass\n"
              "print(sorted({m.split('.')[0] for m in sys.modules} & {'alembic', 'numpy', 'fastapi', 'jinja2', 'uvicorn'}"
              " | {m for m in sys.modules if m in ('qita_board.compare', 'qita_board.stats', 'qita_board.render')}))")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_the_quick_exit_still_runs_exit_handlers_and_flushes_output(tmp_path, qitos_runs):
    """As the `qita` program the ingest ends with os._exit after the exit handlers: the
    archive's unpacked folder is gone and the JSON summary arrives whole."""
    import zipfile

    archive = tmp_path / "runs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(qitos_runs.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(qitos_runs.parent))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    env.pop("QITA_DB", None)
    r = subprocess.run([sys.executable, "-m", "qita_board.cli", "ingest", str(archive), "--db", str(tmp_path / "q.db"),
                        "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert orjson.loads(r.stdout)["runs"] == 4
    assert (tmp / "qita-board").is_dir()  # the unpacked archive was there
    assert list((tmp / "qita-board").iterdir()) == []
