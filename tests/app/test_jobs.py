"""Issue 15 item 4: uploads answer at once and ingest in the background, on a fair queue,
with progress, cancel and a time budget; whatever stops a job, what it wrote stays whole."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import orjson
from fastapi.testclient import TestClient

from qita_board import tempfiles
from qita_board.jobs import FairGate, Writer
from qita_board.main import create_app
from qita_board.settings import Settings


def big_trace(run_id: str, steps: int) -> bytes:
    out = [orjson.dumps({"type": "run_start", "run_id": run_id, "ts": "2025-01-01T00:00:00Z"})]
    out += [orjson.dumps({"type": "step", "run_id": run_id, "step": i, "observation": "x" * 200}) for i in range(steps)]
    return b"\n".join(out) + b"\n"


def _wait(pred, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition never held")


def _client(tmp_path: Path, **kw) -> TestClient:
    return TestClient(create_app(Settings(db=str(tmp_path / "q.db"), **kw)), base_url="http://127.0.0.1")


def _block(writer: Writer) -> threading.Event:
    """Occupy a worker until the returned event is set."""
    release = threading.Event()
    writer.submit("blocker", lambda job, ingestor: release.wait(60), owner="blocker")
    _wait(lambda: any(j.state == "running" for j in writer._jobs.values()))
    return release


def test_upload_answers_202_while_the_writer_is_busy_and_a_queued_upload_can_be_cancelled(tmp_path):
    with _client(tmp_path, ingest_workers=1) as c:
        writer = c.app.state.writer
        release = _block(writer)
        try:
            r = c.post("/api/traces", files=[("files", ("a.jsonl", big_trace("a", 3)))])
            assert r.status_code == 202
            body = r.json()
            assert body["state"] == "queued" and body["poll"] == f"/api/jobs/{body['id']}"
            assert body["total_bytes"] == len(big_trace("a", 3)) and body["records"] == 0
            assert len(list(tempfiles.own_folder().iterdir())) == 1  # the stored upload
            cancelled = c.post(body["cancel_url"]).json()
            assert cancelled["state"] == "cancelled"
            assert list(tempfiles.own_folder().iterdir()) == []  # its files went with it
        finally:
            release.set()
        assert c.get("/api/runs").json()["count"] == 0


def test_jobs_start_round_robin_across_owners(engine, settings):
    writer = Writer(engine, settings.model_copy(update={"ingest_workers": 1}))
    order: list[str] = []
    for name, owner in [("a1", "A"), ("a2", "A"), ("a3", "A"), ("b1", "B"), ("c1", "C"), ("b2", "B")]:
        writer.submit(name, lambda job, ing, name=name: order.append(name), owner=owner)
    writer.start()
    try:
        _wait(lambda: len(order) == 6)
    finally:
        writer.stop()
    assert order == ["a1", "b1", "c1", "a2", "b2", "a3"]


def test_the_gate_is_handed_over_in_turn():
    gate = FairGate()
    turns: list[str] = []

    def worker(name: str) -> None:
        for _ in range(3):
            with gate.hold():
                turns.append(name)
                time.sleep(0.01)

    with gate.hold():
        threads = [threading.Thread(target=worker, args=(n,)) for n in "ab"]
        threads[0].start()
        time.sleep(0.05)
        threads[1].start()
        time.sleep(0.05)
    for t in threads:
        t.join(10)
    assert turns == ["a", "b", "a", "b", "a", "b"]


def test_a_small_upload_is_not_held_back_by_a_long_one(tmp_path):
    # Read in the writer's process (reader_process_bytes=0): a transaction per 20 lines keeps
    # the long job long enough to be caught running (a reader process finishes it in seconds).
    with _client(tmp_path, batch_lines=20, ingest_workers=2, reader_process_bytes=0) as c:
        long_job = c.post("/api/traces", files=[("files", ("long.jsonl", big_trace("long", 60_000)))]).json()
        _wait(lambda: c.get(long_job["poll"]).json()["records"] > 0)
        small = c.post("/api/traces", files=[("files", ("small.jsonl", big_trace("small", 2)))]).json()
        done = _wait(lambda: (j := c.get(small["poll"]).json())["state"] == "done" and j)
        still = c.get(long_job["poll"]).json()
        assert done["result"]["runs_created"] == ["small"]
        assert done["done_bytes"] == done["total_bytes"] == len(big_trace("small", 2))  # every byte, once
        assert still["state"] == "running"  # the long one is still going when the small one is done
        assert 0 < still["records"] < 60_001 and 0 < still["done_bytes"]
        c.post(long_job["cancel_url"])


def test_a_job_stopped_by_its_budget_or_cancelled_keeps_whole_batches_and_a_new_upload_resumes(tmp_path):
    body = big_trace("r", 30_000)
    with _client(tmp_path, batch_lines=50, job_budget_s=0.5) as c:
        first = c.post("/api/traces", files=[("files", ("r.jsonl", body))]).json()
        job = _wait(lambda: (j := c.get(first["poll"]).json())["state"] in ("done", "failed", "cancelled") and j)
        assert job["state"] == "failed"
        assert "stopped after its time budget of 0.5 s (QITA_JOB_BUDGET_S)" in job["error"]
        stored = c.get("/api/runs/r/steps", params={"limit": 1}).json()["count"]
        assert 0 < stored < 30_000 and (stored + 1) % 50 == 0  # whole batches of 50 lines (run_start is one)
        assert list(tempfiles.own_folder().iterdir()) == []
    with _client(tmp_path, batch_lines=50, job_budget_s=600) as c:
        again = c.post("/api/traces", params={"wait": "true"}, files=[("files", ("r.jsonl", body))]).json()
        assert again["records"] == 30_001 - (stored + 1)  # read on from the saved offset
        steps = c.get("/api/runs/r/steps", params={"limit": 200, "offset": 29_900}).json()
        assert steps["count"] == 30_000 and [s["step"] for s in steps["data"]] == list(range(29_900, 30_000))


def test_a_running_upload_is_cancelled_at_its_next_batch(tmp_path):
    with _client(tmp_path, batch_lines=20) as c:
        job = c.post("/api/traces", files=[("files", ("r.jsonl", big_trace("r", 40_000)))]).json()
        _wait(lambda: c.get(job["poll"]).json()["records"] > 0)
        c.post(job["cancel_url"])
        end = _wait(lambda: (j := c.get(job["poll"]).json())["state"] in ("done", "failed", "cancelled") and j, 10)
        assert end["state"] == "cancelled" and end["error"].startswith("what was read before is kept")
        count = c.get("/api/runs/r/steps", params={"limit": 1}).json()["count"]
        assert (count + 1) % 20 == 0 and count < 40_000
        # what it wrote is an upload of its own, which removes with it
        partial = end["result"]
        assert partial["partial"] is True and partial["runs_created"] == ["r"] and partial["records"] == count + 1
        upload = c.get(f"/api/uploads/{partial['upload_id']}").json()
        assert [r["run_id"] for r in upload["runs_created"]] == ["r"]


def test_a_cancel_after_the_upload_finished_says_it_came_too_late_and_keeps_everything(tmp_path):
    # It answered with the full result and no word about the Cancel that was pressed.
    with _client(tmp_path) as c:
        job = c.post("/api/traces", params={"wait": "true"}, files=[("files", ("f.jsonl", big_trace("f", 5)))]).json()
        poll = f"/api/jobs/{job['job']}"
        assert c.get(poll).json()["cancel_late"] is False
        late = c.post(f"/api/jobs/{job['job']}/cancel").json()
        assert late["state"] == "done" and late["cancel_late"] is True and late["error"] is None
        assert c.get(poll).json()["cancel_late"] is True
        assert c.get("/api/runs/f/steps").json()["count"] == 5
        page = c.post(f"/upload/jobs/{job['job']}/cancel").text
        assert "Cancel came too late: the upload had already been read, and all of it is kept" in page
        assert f'href="/uploads/{job["upload_id"]}/delete"' in page


def test_a_cancel_during_the_last_batch_is_late_too(tmp_path):
    # The stop is looked at between batches: one asked for during the last finds none.
    with _client(tmp_path) as c:
        writer = c.app.state.writer
        started, release = threading.Event(), threading.Event()

        def last_batch(job, ingestor):
            started.set()
            release.wait(30)
            return {"files": []}
        job = writer.submit("upload", last_batch, owner="upload:x")
        assert started.wait(30)
        assert writer.cancel(job.id) is job and job.state == "running"
        release.set()
        _wait(lambda: job.finished.is_set())
        assert job.state == "done" and job.cancel_late is True


def test_the_boards_own_jobs_are_no_uploads_to_show_or_cancel(tmp_path):
    # Job numbers come from one counter: a visitor trying /upload/jobs/1 reached the board's
    # own job (the lab's index, a sweep) and got a 500; cancelling it stopped the board's work.
    with _client(tmp_path) as c:
        writer = c.app.state.writer
        release = _block(writer)
        try:
            own = next(j for j in writer._jobs.values() if j.label == "blocker")
            page = c.get(f"/upload/jobs/{own.id}")
            assert (page.status_code, "no such upload (results are kept for a while only)" in page.text) == (404, True)
            assert c.post(f"/upload/jobs/{own.id}/cancel").status_code == 404
            refused = c.post(f"/api/jobs/{own.id}/cancel")
            assert refused.status_code == 409
            assert refused.json()["error"] == (f"job {own.id} is the board's own (blocker), not an upload: "
                                                "only an upload can be cancelled")
            assert own.state == "running" and own.stop_reason is None
            assert c.get(f"/api/jobs/{own.id}").json()["state"] == "running"   # its progress stays readable
        finally:
            release.set()
