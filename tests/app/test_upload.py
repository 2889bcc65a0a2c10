"""Uploads through POST /api/traces and the /upload form: formats, rejected lines, idempotence, limits."""

from __future__ import annotations

import gzip
import io
import os
import zipfile
from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient

from qita_board.main import create_app
from qita_board.settings import Settings
from tests.app.pages_traces import run_records
from tests.app.test_coder_eval import smoke_e2e_results


def lines(*records) -> bytes:
    return b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\n" for r in records)


GOOD = lines(
    {"type": "run_start", "run_id": "up/1", "task_id": "t1", "criteria": [{"id": "c1"}]},
    b"{this is not json",
    {"type": "criterion", "run_id": "up/1", "id": "c1", "score": 1.0},
    {"type": "criterion", "run_id": "up/1", "score": 0.5},
    {"type": "run_end", "run_id": "up/1", "status": "completed", "stop_reason": "final", "steps": 1},
)


def post(client, *files, **params):
    params.setdefault("wait", "true")
    return client.post("/api/traces", params=params, files=[("files", f) for f in files])


def test_jsonl_upload_keeps_good_lines_and_names_bad_ones(client):
    r = post(client, ("runs.jsonl", GOOD))
    assert r.status_code == 200
    body = r.json()
    assert body["runs_created"] == ["up/1"] and body["runs_updated"] == []
    assert len(body["rejected"]) == 2
    assert body["rejected"][0].startswith("runs.jsonl:2: invalid JSON")
    assert body["rejected"][1] == "runs.jsonl:4: missing field 'id'"
    run = client.get("/api/runs/up%2F1").json()["run"]
    assert run["verdict"] == "pass" and run["state"] == "finished"


@pytest.mark.parametrize(("name", "data", "warnings"), [
    ("zero.jsonl", b"", [{"file": "zero.jsonl", "line": None, "message": "empty file: no records"}]),
    ("blank.jsonl", b"\n\r\n\n",
     [{"file": "blank.jsonl", "line": None, "message": "no records: the file holds only blank lines"}]),
])
def test_a_first_upload_of_a_file_without_records_is_not_called_nothing_new(client, name, data, warnings):
    # it was never uploaded before: "Nothing new … uploaded before" was not true of it
    body = post(client, (name, data)).json()
    assert (body["records"], body["unchanged"], body["errors"], body["warnings"]) == (0, False, [], warnings)
    again = post(client, (name, data)).json()
    assert (again["records"], again["unchanged"]) == (0, True)


def test_a_file_of_blank_lines_beside_a_trace_is_named_as_holding_no_records(client):
    # one of several files, it went unmentioned while an empty one had its warning
    good = b"".join(orjson.dumps(r) + b"\n" for r in run_records("with-blanks"))
    body = post(client, ("good.jsonl", b"\n" + good + b"\n\n"), ("blank.jsonl", b" \n\t\n\n")).json()
    assert body["runs_created"] == ["with-blanks"] and body["errors"] == []
    assert body["warnings"] == [{"file": "blank.jsonl", "line": None,
                                 "message": "no records: the file holds only blank lines"}]
    # a file whose only line was refused is named by its error, not also as blank
    body = post(client, ("bad.jsonl", b"\n{not json\n")).json()
    assert [e["line"] for e in body["errors"]] == [2] and body["warnings"] == []


def test_a_coder_eval_zip_uploaded_twice_is_nothing_new(client, tmp_path):
    # its task.json is a document source, read whole or not at all: the second time, not
    import io
    import zipfile

    from tests.app.test_coder_eval_schema import task, write

    root = tmp_path / "night"
    path = write(root, task("t1"))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.write(path, path.relative_to(tmp_path).as_posix())
    first = post(client, ("night.zip", buf.getvalue())).json()
    assert first["runs_created"] == ["night/v/t1/00"] and first["unchanged"] is False
    again = post(client, ("night.zip", buf.getvalue())).json()
    assert (again["records"], again["runs_created"], again["unchanged"]) == (0, [], True)


def test_same_file_twice_changes_nothing(client):
    first = post(client, ("runs.jsonl", GOOD)).json()
    before = client.get("/api/runs/up%2F1").json()
    second = post(client, ("runs.jsonl", GOOD)).json()
    assert first["records"] == 3
    assert second["records"] == 0 and second["runs_created"] == [] and second["runs_updated"] == []
    assert second["rejected"] == [] and second["unchanged"] is True
    assert client.get("/api/runs/up%2F1").json() == before
    assert client.get("/api/runs").json()["count"] == 1


def test_files_of_one_name_in_one_upload_are_told_apart_and_a_second_upload_is_nothing_new(client):
    # coder_eval names every task's file task.json: two in one upload were taken for two
    # versions of one file, so the same upload again said both runs were updated.
    from tests.app.test_coder_eval_schema import task

    smoke, e2e = orjson.dumps(task("t1", "smoke")), orjson.dumps(task("t1", "e2e", status="FAILURE", score=0.0))
    other = lines({"type": "run_start", "run_id": "other"}, b"[1]")
    files = [("task.json", smoke), ("task.json", e2e), ("t.jsonl", GOOD), ("t.jsonl", other), ("task.json", b"{"),
             ("run.json", b"{}"), ("run.json", b"{}")]
    body = post(client, *files).json()
    assert [f["name"] for f in body["files"]] == ["task.json", "task (2).json", "t.jsonl", "t (2).jsonl",
                                                  "task (3).json", "run.json", "run (2).json"]
    # a numbered name is still what it was: a second run.json is a summary too
    assert [e.split(": ", 1)[1].startswith("coder_eval's run.json summarizes") for e in body["rejected"]
            if e.startswith("run")] == [True, True]
    assert [run.split("/", 1)[1] for run in sorted(body["runs_created"]) if "/t1/" in run] == [
        "e2e/t1/00", "smoke/t1/00"]
    assert "up/1" in body["runs_created"] and "other" in body["runs_created"]
    # each message names the file it is about
    assert "t (2).jsonl:2: not a JSON object (got an array)" in body["rejected"]
    assert [e for e in body["rejected"] if e.startswith("task (3).json: ")] != []
    again = post(client, *files[:5]).json()  # (a summary given alone is refused every time: not "nothing new")
    assert (again["records"], again["runs_created"], again["runs_updated"], again["unchanged"]) == (0, [], [], True)


def test_several_files_at_once_gzip_and_error_labels_never_show_server_paths(client):
    gz = gzip.compress(lines({"type": "run_start", "run_id": "gz-run"}, b"[1]",
                             {"type": "run_end", "run_id": "gz-run", "status": "completed"}))
    r = post(client, ("a.jsonl", GOOD), ("b.jsonl.gz", gz), ("notes.txt", b"hello"))
    body = r.json()
    assert sorted(body["runs_created"]) == ["gz-run", "up/1"]
    assert "b.jsonl.gz:2: not a JSON object (got an array)" in body["rejected"]
    assert "notes.txt: rejected: not a trace file (expected .jsonl, .jsonl.gz, .zip or a coder_eval task.json)" in body["rejected"]
    assert not any("/tmp" in e or "qita-upload" in e for e in body["rejected"])


def test_client_filename_is_only_a_label(client, tmp_path):
    r = post(client, ("../../etc/evil.jsonl", GOOD))
    assert r.json()["runs_created"] == ["up/1"]
    assert r.json()["rejected"][0].startswith("evil.jsonl:2:")


def qitos_zip(qitos_runs: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for folder in sorted(qitos_runs.iterdir())[:2]:
            for f in folder.rglob("*"):
                if f.is_file():
                    zf.write(f, f"runs/{f.relative_to(qitos_runs)}")
    return buf.getvalue()


def test_zip_of_qitos_run_folders(client, qitos_runs):
    body = post(client, ("qitos.zip", qitos_zip(qitos_runs))).json()
    assert len(body["runs_created"]) == 2
    assert all(e.startswith("qitos.zip/") for e in body["rejected"])
    again = post(client, ("qitos.zip", qitos_zip(qitos_runs))).json()
    assert again["runs_created"] == [] and again["records"] == 0


def test_zip_of_coder_eval_results(client, tmp_path):
    folder = smoke_e2e_results(tmp_path)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in folder.rglob("*"):
            if f.is_file():
                zf.write(f, str(f.relative_to(tmp_path)))
    body = post(client, ("results.zip", buf.getvalue())).json()
    assert sorted(body["runs_created"]) == ["ce-run-1/e2e/activate/00", "ce-run-1/smoke/activate/00"]
    s = client.get("/api/compare").json()["summary"]
    assert s["paired"] == 1 and s["confusion"]["pass_fail"] == 1 and s["early_stop_disagree"] == 1


def test_zip_entries_never_land_outside(client, tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../escape.jsonl", GOOD)
        zf.writestr("/abs.jsonl", GOOD)
        zf.writestr("ok/inner.jsonl", GOOD)
    body = post(client, ("evil.zip", buf.getvalue())).json()
    assert body["runs_created"] == ["up/1"]
    skipped = [e for e in body["rejected"] if "points outside the archive" in e]
    assert len(skipped) == 2
    assert any(e.startswith("evil.zip/ok/inner.jsonl:2:") for e in body["rejected"])


@pytest.fixture
def small_client(tmp_path):
    settings = Settings(db=str(tmp_path / "small.db"), max_upload_bytes=4096, max_archive_bytes=2048)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        yield c


def test_upload_over_the_limit_is_a_clear_413(small_client):
    r = post(small_client, ("big.jsonl", b"x" * 5000))
    assert r.status_code == 413
    assert "upload too large" in r.json()["error"] and "4,096" in r.json()["error"]
    assert small_client.get("/api/runs").json()["count"] == 0


def test_streamed_body_without_length_is_cut_at_the_limit(small_client):
    boundary = "XyZ"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.jsonl\"\r\n\r\n").encode()

    def chunks():
        yield head
        for _ in range(10):
            yield b"y" * 1000
        yield f"\r\n--{boundary}--\r\n".encode()

    r = small_client.post("/api/traces", content=chunks(),
                          headers={"content-type": f"multipart/form-data; boundary={boundary}"})
    assert r.status_code == 413


def test_archive_decompressed_limit(small_client):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a.jsonl", GOOD + b" " * 10000 + b"\n")
    assert len(buf.getvalue()) < 4096
    body = post(small_client, ("bomb.zip", buf.getvalue())).json()
    want = f"declares {len(GOOD) + 10001} bytes, more than the limit of 2048 bytes: skipped"
    assert any(want in e for e in body["rejected"])


def test_empty_and_wrong_requests(client):
    assert client.post("/api/traces", data={"x": "1"}).status_code == 415
    r = client.post("/api/traces", files=[("files", ("", b""))])
    assert r.status_code == 400 and "no file" in r.json()["error"]


def test_wait_false_returns_a_job_to_poll(client):
    r = post(client, ("runs.jsonl", GOOD), wait="false")
    assert r.status_code == 202
    job_id = r.json()["id"]
    job = client.get(f"/api/jobs/{job_id}").json()
    for _ in range(100):
        if job["state"] == "done":
            break
        job = client.get(f"/api/jobs/{job_id}").json()
    assert job["state"] == "done" and job["result"]["runs_created"] == ["up/1"]


def test_form_post_renders_links_and_rejected_lines(client):
    r = client.post("/upload", files=[("files", ("runs.jsonl", GOOD))], headers={"HX-Request": "true"})
    assert r.status_code == 200 and "<html" not in r.text
    assert 'href="/runs/up%2F1"' in r.text
    assert "runs.jsonl:2: invalid JSON" in r.text
    full = client.post("/upload", files=[("files", ("runs.jsonl", GOOD))])
    assert "<html" in full.text and "Nothing new" in full.text


def test_cross_site_upload_is_refused(client):
    r = client.post("/api/traces", files=[("files", ("runs.jsonl", GOOD))], headers={"Origin": "http://evil.example"})
    assert r.status_code == 403
    assert client.get("/api/runs").json()["count"] == 0


def test_upload_temp_files_are_removed(client, monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    post(client, ("runs.jsonl", GOOD))
    assert not [p for p in os.listdir(tmp_path) if p.startswith("qita-upload-")]


def test_an_uploads_record_keeps_its_rejected_lines_and_warnings(client):
    # The rejected lines lived only in the job, which the board forgets: /uploads/N listed
    # the runs and not which lines were left out.
    warn = lines({"type": "run_start", "run_id": "up/w", "replicate": "x"},
                 {"type": "run_end", "run_id": "up/w", "status": "completed"})
    body = post(client, ("runs.jsonl", GOOD), ("w.jsonl", warn), ("notes.txt", b"hello")).json()
    record = client.get(f"/api/uploads/{body['upload_id']}").json()
    assert record["errors"] == [
        {"file": "notes.txt", "line": None,
         "message": "rejected: not a trace file (expected .jsonl, .jsonl.gz, .zip or a coder_eval task.json)"},
        {"file": "runs.jsonl", "line": 2, "message": body["errors"][1]["message"]},
        {"file": "runs.jsonl", "line": 4, "message": "missing field 'id'"}]
    assert record["errors"] == body["errors"] and record["warnings"] == body["warnings"] != []
    assert record["reported"] is True and record["more_errors"] == 0
    page = client.get(f"/uploads/{body['upload_id']}").text
    assert "<code>runs.jsonl:4: missing field &#39;id&#39;</code>" in page
    shown = body["warnings"][0]["message"].replace("'", "&#39;")
    assert "Rejected (3)" in page and f"⚠ w.jsonl:1: {shown}" in page


def test_the_upload_form_answers_with_the_jobs_address(client):
    # Without script: Post/Redirect/Get, so a reload never posts the files again; with htmx
    # the job's address is pushed, so a reload or Back shows the result again.
    r = client.post("/upload", files=[("files", ("runs.jsonl", GOOD))], follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/upload/jobs/")
    assert "runs.jsonl:2: invalid JSON" in client.get(r.headers["location"]).text
    h = client.post("/upload", files=[("files", ("again.jsonl", GOOD))], headers={"HX-Request": "true"})
    job = h.headers["HX-Push-Url"]
    assert job.startswith("/upload/jobs/") and job != r.headers["location"]
    assert "again.jsonl:2: invalid JSON" in client.get(job).text


def test_trace_lines_saved_as_json_are_read_as_trace_lines(client):
    # "trace.json" holding JSON Lines was refused as "a JSON document, not JSON Lines".
    body = post(client, ("trace.json", b"\xef\xbb\xbf" + GOOD), ("config.json", b'{"a": 1}')).json()
    assert body["runs_created"] == ["up/1"]
    assert [(e["file"], e["line"]) for e in body["errors"]] == [("config.json", None), ("trace.json", 2), ("trace.json", 4)]
    assert body["errors"][0]["message"].startswith("not a trace: a JSON document, not JSON Lines")


def test_a_browser_gone_mid_upload_is_no_error_of_the_boards(tmp_path, monkeypatch, caplog):
    # A reload or a closed tab mid-upload logged "unhandled error on /upload" with two
    # tracebacks; the stored part was left to the start-up sweep.
    import asyncio
    import logging
    import tempfile

    from starlette.requests import Request

    from qita_board.errors import BoardError
    from qita_board.uploads import receive_files

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    head = b'--XyZ\r\nContent-Disposition: form-data; name="files"; filename="a.jsonl"\r\n\r\n{"type"'
    messages = [{"type": "http.request", "body": head, "more_body": True}, {"type": "http.disconnect"}]

    async def receive():
        return messages.pop(0)

    request = Request({"type": "http", "method": "POST", "path": "/upload", "headers": [
        (b"content-type", b"multipart/form-data; boundary=XyZ")]}, receive)
    with caplog.at_level(logging.DEBUG), pytest.raises(BoardError) as err:
        asyncio.run(receive_files(request, max_bytes=1 << 20))
    assert (err.value.message, err.value.status) == (
        "the upload was cut off before all of it arrived: nothing was read", 400)
    assert not [p for p in os.listdir(tmp_path) if p.startswith("qita-upload-")]
