"""Remove and replace: deleting a run or an upload removes its records and nothing else (on
SQLite and PostgreSQL), with a confirmation step and the token where writes need one; the
upload result warns when a new run takes another's place in comparisons; `qita delete`."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from qita_board.main import create_app
from qita_board.models import RUNS
from qita_board.removal import child_tables
from tests.app.pages_traces import TS, early_run, run_records
from tests.app.parsed_html import attrs, one, page, select_texts
from tests.app.parsed_html import text as shown
from tests.conftest import ROOT, write_jsonl

pytestmark = pytest.mark.both_backends

TOKEN = "delete-token-0123456789"
SAME_SITE = {"origin": "http://127.0.0.1", "sec-fetch-site": "same-origin"}


def two_experiments() -> list[dict]:
    """alpha and beta, each with smoke and e2e runs of tasks t1 and t2: steps, critic outputs,
    events, criteria, early-stop records and tags in every run."""
    recs = []
    for exp in ("alpha", "beta"):
        for task, second in (("t1", 0), ("t2", 10)):
            for variant, passed in (("smoke", True), ("e2e", task == "t1")):
                rid = f"{exp}-{variant}-{task}"
                run = early_run(rid) if variant == "smoke" else run_records(
                    rid, steps=4, criteria=[{"id": "c"}], results=[{"id": "c", "score": 1.0 if passed else 0.0,
                                                                    "passed": passed}])
                for r in run:
                    if r["type"] == "run_start":
                        r.update(experiment=exp, variant=variant, task_id=task, tags=[exp, variant],
                                 ts=TS.format(second + (1 if variant == "e2e" else 0)))
                run.insert(2, {"type": "event", "run_id": rid, "step": 0, "phase": "ACT", "ok": True})
                recs += run
    return recs


def snapshot(engine, *, excluding: str) -> dict:
    """Every row of every run but one, in every table that holds rows of runs."""
    with engine.connect() as conn:
        pk = conn.execute(select(RUNS.c.id).where(RUNS.c.run_id == excluding)).scalar()
        out = {"runs": [tuple(r) for r in conn.execute(select(RUNS).where(RUNS.c.id != pk).order_by(RUNS.c.id))]}
        for table in child_tables():
            out[table.name] = sorted((tuple(str(v) for v in r) for r in conn.execute(
                select(table).where(table.c.run_pk != pk))), key=repr)
    return out


@pytest.fixture
def loaded(tmp_path, ingest):
    report = ingest(write_jsonl(tmp_path / "two.jsonl", two_experiments()))
    assert report.ok and len(report.created) == 8


def test_deleting_one_run_removes_its_rows_and_nothing_else(loaded, client, engine):
    victim = "alpha-e2e-t2"
    before = snapshot(engine, excluding=victim)
    beta_compare = client.get("/api/compare?experiment=beta&a=smoke&b=e2e").json()
    beta_overview = [e for e in client.get("/api/experiments").json()["experiments"] if e["experiment"] == "beta"]
    plan = client.get(f"/api/runs/{victim}/delete").json()
    assert plan["dry_run"] is True and [r["run_id"] for r in plan["runs"]] == [victim]
    # worked out from the trace: 4 steps with one critic output each, 1 event, 1 criterion, 2 tags
    search_rows = {"run_search"}  # its searchable texts (app.search), checked below
    assert {k: v for k, v in plan["rows"].items() if v and k not in search_rows} == {
        "runs": 1, "steps": 4, "critic_outputs": 4, "events": 1, "criteria": 1, "run_tags": 2}
    # its fields and critic texts, read in one transaction that created it, are one search row
    assert plan["rows"]["run_search"] == 1
    assert client.get(f"/api/runs/{victim}").status_code == 200          # a dry run removes nothing

    done = client.delete(f"/api/runs/{victim}")
    assert done.status_code == 200 and done.json()["dry_run"] is False
    assert {k: v for k, v in done.json()["removed"].items() if v} == {k: v for k, v in plan["rows"].items() if v}
    assert client.get(f"/api/runs/{victim}").status_code == 404
    with engine.connect() as conn:
        for table in child_tables():       # no row of it is left anywhere
            assert conn.execute(text(f"SELECT count(*) FROM {table.name} t WHERE NOT EXISTS "
                                     "(SELECT 1 FROM runs r WHERE r.id = t.run_pk)")).scalar() == 0, table.name
    assert snapshot(engine, excluding=victim) == before                 # every other run's rows untouched
    assert client.get("/api/compare?experiment=beta&a=smoke&b=e2e").json() == beta_compare
    assert [e for e in client.get("/api/experiments").json()["experiments"] if e["experiment"] == "beta"] == beta_overview
    alpha = client.get("/api/compare?experiment=alpha&a=smoke&b=e2e").json()["summary"]
    assert alpha["paired"] == 1 and alpha["only_a"] == ["t2"]
    assert client.get("/api/runs?q=alpha-e2e-t2").json()["count"] == 0  # gone from the search too
    assert client.delete(f"/api/runs/{victim}").status_code == 404


def test_a_deleted_run_can_be_ingested_again(loaded, client, tmp_path):
    assert client.delete("/api/runs/beta-smoke-t1").status_code == 200
    again = client.post("/api/traces", params={"wait": "true"}, files=[("files", ("again.jsonl", write_jsonl(
        tmp_path / "again.jsonl", early_run("beta-smoke-t1")).read_bytes()))])
    assert again.status_code == 200 and again.json()["runs_created"] == ["beta-smoke-t1"]
    assert client.get("/api/runs/beta-smoke-t1").json()["run"]["steps"] == 3


def test_the_page_asks_first_and_the_form_must_confirm(loaded, client):
    asked = client.get("/runs/alpha-smoke-t1/delete")
    assert asked.status_code == 200
    doc = page(asked.text)
    assert attrs(doc, 'form input[name="confirm"]', "value") == ["alpha-smoke-t1"]
    assert "early_stops 1" in select_texts(doc, "#row-counts .tag")
    assert attrs(client.get("/runs/alpha-smoke-t1").text, "a.delete-link", "href") == ["/runs/alpha-smoke-t1/delete"]
    refused = client.post("/runs/alpha-smoke-t1/delete", data={"confirm": "something else"}, headers=SAME_SITE)
    assert refused.status_code == 400 and client.get("/api/runs/alpha-smoke-t1").status_code == 200
    done = client.post("/runs/alpha-smoke-t1/delete", data={"confirm": "alpha-smoke-t1"}, headers=SAME_SITE)
    assert done.status_code == 200 and 'id="delete-done"' in done.text and "Removed 1 run" in done.text
    assert client.get("/api/runs/alpha-smoke-t1").status_code == 404


def test_deletes_need_the_token_when_the_board_has_one(settings, tmp_path):
    settings = settings.model_copy(update={"token": TOKEN})
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        c.post("/api/traces", params={"wait": "true"}, files=[("files", ("r.jsonl", write_jsonl(tmp_path / "r.jsonl", early_run("x")).read_bytes()))],
               headers={"authorization": f"Bearer {TOKEN}"})
        assert c.get("/runs/x/delete").status_code == 200           # reading what would go is open
        assert "sign in" in c.get("/runs/x/delete").text
        assert c.delete("/api/runs/x").status_code == 401
        assert c.post("/runs/x/delete", data={"confirm": "x"}, headers=SAME_SITE).status_code == 401
        cross = c.post("/runs/x/delete", data={"confirm": "x"},
                       headers={"origin": "http://evil.example", "authorization": f"Bearer {TOKEN}"})
        assert cross.status_code == 403
        assert c.get("/api/runs/x").status_code == 200
        assert c.delete("/api/runs/x", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert c.get("/api/runs/x").status_code == 404


def _upload(client, name: str, records: list[dict]) -> dict:
    body = b"".join(orjson.dumps(r) + b"\n" for r in records)
    r = client.post("/api/traces", params={"wait": "true"}, files=[("files", (name, body))])
    assert r.status_code == 200, r.text
    return r.json()


def test_deleting_an_upload_removes_the_runs_it_created_and_keeps_the_others(client):
    first = _upload(client, "first.jsonl", run_records("u-1") + run_records("u-2"))
    assert first["runs_created"] == ["u-1", "u-2"] and first["upload_id"]
    # the second upload adds an event to u-1 (which it did not create) and creates u-3
    second = _upload(client, "second.jsonl", [{"type": "event", "run_id": "u-1", "step": None, "phase": "NOTE"}]
                     + run_records("u-3"))
    assert second["runs_created"] == ["u-3"] and second["runs_updated"] == ["u-1"]
    record = client.get(f"/api/uploads/{second['upload_id']}").json()
    assert [r["run_id"] for r in record["runs_created"]] == ["u-3"]
    assert [r["run_id"] for r in record["runs_updated"]] == ["u-1"]
    plan = client.get(f"/api/uploads/{second['upload_id']}/delete").json()
    assert [r["run_id"] for r in plan["runs"]] == ["u-3"] and [r["run_id"] for r in plan["kept"]] == ["u-1"]
    assert plan["sources_forgotten"] == ["upload:second.jsonl"]

    done = client.delete(f"/api/uploads/{second['upload_id']}")
    assert done.status_code == 200 and done.json()["removed"]["runs"] == 1
    assert client.get("/api/runs/u-3").status_code == 404
    assert {r["run_id"] for r in client.get("/api/runs").json()["data"]} == {"u-1", "u-2"}
    assert client.get(f"/api/uploads/{second['upload_id']}").status_code == 404
    assert client.get(f"/api/uploads/{first['upload_id']}").status_code == 200
    # its source was forgotten: the same file again reads it again
    again = _upload(client, "second.jsonl", [{"type": "event", "run_id": "u-1", "step": None, "phase": "NOTE"}]
                    + run_records("u-3"))
    assert again["runs_created"] == ["u-3"] and not again["unchanged"]


def test_the_upload_page_and_its_confirmation(client):
    up = _upload(client, "page.jsonl", run_records("p-1"))
    uid = up["upload_id"]
    record = page(client.get(f"/uploads/{uid}").text)
    assert "page.jsonl" in select_texts(record, "code")
    assert attrs(record, "a.danger-link", "href") == [f"/uploads/{uid}/delete"]
    assert attrs(client.get("/runs/p-1").text, "a.from-upload", "href") == [f"/uploads/{uid}"]   # the run names its upload
    assert f"/uploads/{uid}" in attrs(client.get("/uploads").text, "table a", "href")
    confirm = client.get(f"/uploads/{uid}/delete").text
    assert attrs(confirm, 'form input[name="confirm"]', "value") == [str(uid)]
    (stamp,) = attrs(confirm, 'form input[name="stamp"]', "value")
    done = client.post(f"/uploads/{uid}/delete", data={"confirm": str(uid), "stamp": stamp}, headers=SAME_SITE)
    assert done.status_code == 200 and client.get("/api/runs/p-1").status_code == 404
    assert client.get("/api/uploads/99999").status_code == 404


def test_upload_result_warns_when_a_new_run_takes_another_runs_place(client):
    old = run_records("old-run", experiment="exp", variant="smoke", second=1)
    old[0]["task_id"] = "task-9"
    _upload(client, "old.jsonl", old)
    new = run_records("new-run", experiment="exp", variant="smoke", second=5)
    new[0]["task_id"] = "task-9"
    result = _upload(client, "new.jsonl", new)
    assert result["replacements"] == [{"run_id": "new-run", "others": ["old-run"], "kept": "new-run", "experiment": "exp",
                                       "variant": "smoke", "task_id": "task-9", "replicate": 0}]
    # an older run uploaded later is the one set aside, and the warning says so
    older = run_records("older-run", experiment="exp", variant="smoke", second=0)
    older[0]["task_id"] = "task-9"
    body = b"".join(orjson.dumps(r) + b"\n" for r in older)
    html = client.post("/upload", files=[("files", ("older.jsonl", body))], headers=SAME_SITE).text
    warning = html[html.index('id="upload-replacements"'):]
    assert "older-run" in warning and "is set aside" in warning and "new-run" in warning and "(newer) keeps its place" in warning
    # no warning for a run in another variant or with another task
    other = run_records("other-run", experiment="exp", variant="e2e", second=9)
    other[0]["task_id"] = "task-9"
    assert _upload(client, "other.jsonl", other)["replacements"] == []


def qita(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("QITA_DB", None)
    return subprocess.run([sys.executable, "-m", "qita_board.cli", *args], capture_output=True, text=True, env=env, timeout=120)


def test_qita_delete_dry_run_then_delete(loaded, settings, engine):
    db = settings.db
    before = snapshot(engine, excluding="beta-e2e-t1")
    dry = qita("delete", "beta-e2e-t1", "--db", db, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would delete run beta-e2e-t1 (4 steps)" in dry.stdout and "4 steps" in dry.stdout
    with engine.connect() as conn:
        assert conn.execute(select(RUNS.c.id).where(RUNS.c.run_id == "beta-e2e-t1")).first() is not None
    missing = qita("delete", "beta-e2e-t1", "nope", "--db", db)
    assert missing.returncode == 1 and "no run with id 'nope': nothing deleted" in missing.stderr
    done = qita("delete", "beta-e2e-t1", "--db", db, "--json")
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["removed"]["runs"] == 1
    assert snapshot(engine, excluding="beta-e2e-t1") == before
    with engine.connect() as conn:
        assert conn.execute(select(RUNS.c.id).where(RUNS.c.run_id == "beta-e2e-t1")).first() is None
    usage = qita("delete", "--db", db)
    assert usage.returncode == 2 and "name run ids, or one --upload ID" in usage.stderr


def test_a_delete_page_left_open_does_not_delete_a_newer_upload_given_the_same_number(client):
    # SQLite gives a deleted last row's number to the next row: upload #N deleted in one tab,
    # a new upload becomes #N, and the first tab's form named only N.
    up = _upload(client, "first.jsonl", run_records("first-run"))
    uid = up["upload_id"]
    (stale,) = attrs(client.get(f"/uploads/{uid}/delete").text, 'form input[name="stamp"]', "value")
    assert client.delete(f"/api/uploads/{uid}").status_code == 200
    again = _upload(client, "innocent.jsonl", run_records("innocent-run"))
    if again["upload_id"] != uid:
        pytest.skip("this database never gives a number twice (PostgreSQL's sequences): nothing to mix up")
    refused = client.post(f"/uploads/{uid}/delete?format=json", data={"confirm": str(uid), "stamp": stale},
                          headers=SAME_SITE)
    assert refused.status_code == 409
    assert refused.json()["error"] == (f"upload #{uid} is not the upload the delete page showed: that one was deleted, "
                                       "and its number now names a newer upload. Nothing was deleted.")
    assert client.get("/api/runs/innocent-run").status_code == 200
    # without the stamp the form is not a confirmation at all
    assert client.post(f"/uploads/{uid}/delete", data={"confirm": str(uid)}, headers=SAME_SITE).status_code == 400
    assert client.get("/api/runs/innocent-run").status_code == 200


def test_the_delete_page_counts_every_run_an_upload_created_past_those_it_lists(client, monkeypatch):
    from qita_board import removal

    monkeypatch.setattr(removal, "SHOWN", 2)
    up = _upload(client, "five.jsonl", [r for i in range(5) for r in run_records(f"five-{i}")])
    doc = page(client.get(f"/uploads/{up['upload_id']}/delete").text)
    assert len(doc.select("table.delete-runs tbody tr")) == 2
    assert shown(one(doc, "#more-runs")) == "… and 3 more runs, not listed here."
    assert shown(one(doc, "#confirm-delete")) == f"Delete upload #{up['upload_id']} (5 runs)"
