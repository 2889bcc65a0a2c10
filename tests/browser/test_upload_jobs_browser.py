"""The upload component in real Chromium: a queued upload says it waits, shows progress,
and its Cancel button stops it; the next upload is read as usual."""

from __future__ import annotations

import threading

import orjson
import pytest

from tests.browser.test_pages_browser import until
from tests.browser.test_upload_browser import TRACE


@pytest.fixture
def settings(tmp_path):
    from qita_board.settings import Settings

    return Settings(db=str(tmp_path / "q.db"), ingest_workers=1)


def test_a_queued_upload_shows_its_state_and_can_be_cancelled(live_server, page):
    writer = live_server.app.state.writer
    release = threading.Event()
    writer.submit("blocker", lambda job, ingestor: release.wait(60), owner="blocker")
    try:
        page.goto(live_server.url + "/upload")
        body = b"".join(orjson.dumps({"type": "run_start", "run_id": f"q{i}"}) + b"\n" for i in range(3))
        page.set_input_files("#files", files=[{"name": "queued.jsonl", "mimeType": "application/x-ndjson", "buffer": body}])
        page.get_by_role("button", name="Upload").click()
        pending = page.locator("#upload-job")
        pending.wait_for()
        assert "waiting for its turn" in pending.inner_text()
        page.get_by_role("button", name="Cancel").click()
        cancelled = page.locator("#upload-cancelled")
        cancelled.wait_for()
        assert cancelled.inner_text() == "Upload cancelled: it had not started: nothing was read"
    finally:
        release.set()
    page.set_input_files("#files", files=[{"name": "picked.jsonl", "mimeType": "application/x-ndjson", "buffer": TRACE}])
    page.get_by_role("button", name="Upload").click()
    page.locator(".upload-result .runs-created a").wait_for()
    assert page.locator(".upload-result .runs-created a").inner_text() == "browser/run"
    assert page.errors == []


def test_the_keyboard_keeps_its_place_while_an_upload_polls_and_after_cancel(live_server, page):
    # The pending component is swapped every 700 ms: the Cancel button lost the focus to
    # <body> at each poll, and after Cancel the keyboard started again from the top.
    writer = live_server.app.state.writer
    release = threading.Event()
    writer.submit("blocker", lambda job, ingestor: release.wait(60), owner="blocker")
    try:
        page.goto(live_server.url + "/upload")
        body = orjson.dumps({"type": "run_start", "run_id": "kb"}) + b"\n"
        page.set_input_files("#files", files=[{"name": "kb.jsonl", "mimeType": "application/x-ndjson", "buffer": body}])
        page.get_by_role("button", name="Upload").click()
        page.locator("#upload-cancel").focus()
        polls = page.evaluate("window.__polls = 0; document.body.addEventListener('htmx:afterSettle', "
                              "() => window.__polls++); window.__polls")
        assert polls == 0
        until(page, "window.__polls >= 2")  # swapped twice while waiting for its turn
        assert page.evaluate("document.activeElement.id") == "upload-cancel"
        page.keyboard.press("Enter")
        page.locator("#upload-cancelled").wait_for()
        until(page, "document.activeElement.id === 'upload-cancelled'")
    finally:
        release.set()
    assert page.errors == []


def test_a_running_upload_cancelled_offers_to_remove_what_it_wrote(tmp_path, browser):
    from qita_board.settings import Settings
    from tests.browser.conftest import LiveServer

    # Read in the writer's process (reader_process_bytes=0), a transaction per 20 lines: long
    # enough to be cancelled while running (a reader process finishes it in a few seconds).
    server = LiveServer(Settings(db=str(tmp_path / "c.db"), ingest_workers=1, batch_lines=20,
                                 reader_process_bytes=0)).start()
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        key = {"task_id": "t", "experiment": "x", "variant": "v"}
        old = orjson.dumps({"type": "run_start", "run_id": "old", "ts": "2026-01-01T00:00:00Z", **key}) + b"\n"
        assert page.request.post(server.url + "/api/traces?wait=true", multipart={
            "files": {"name": "old.jsonl", "mimeType": "application/x-ndjson", "buffer": old}}).ok
        body = orjson.dumps({"type": "run_start", "run_id": "big", "ts": "2026-02-01T00:00:00Z", **key}) + b"\n" + \
            b"".join(orjson.dumps({"type": "step", "run_id": "big", "step": i, "observation": "x" * 200}) + b"\n"
                     for i in range(60_000))
        page.goto(server.url + "/upload")
        page.set_input_files("#files", files=[{"name": "big.jsonl", "mimeType": "application/x-ndjson", "buffer": body}])
        page.get_by_role("button", name="Upload").click()
        page.locator("#upload-job[data-state=running]").wait_for(timeout=30_000)
        page.get_by_role("button", name="Cancel").click()
        partial = page.locator("#upload-partial")
        partial.wait_for(timeout=30_000)
        assert page.locator("#upload-cancelled").inner_text().startswith("Upload cancelled: what was read before is kept")
        assert "1 run created" in partial.inner_text()
        # what it wrote takes another run's place in comparisons: said as a finished upload says it
        replaced = page.locator("#upload-replacements")
        assert "1 run created here shares a place in comparisons with another run" in replaced.inner_text()
        assert "big takes the place of old" in replaced.inner_text()
        partial.locator("a.upload-remove").click()
        page.wait_for_url("**/uploads/*/delete")
        assert "big" in page.locator("main").inner_text()
    finally:
        page.close()
        server.stop()


def test_a_finished_upload_s_job_page_counts_every_byte(live_server, page):
    """The job page of a finished upload says it read all of it: the first batch's bytes
    were once left out (a finished 10 MB upload said 6.9 MB)."""
    body = b"".join(orjson.dumps({"type": "step", "run_id": "counted", "step": i, "observation": "o" * 200}) + b"\n"
                    for i in range(5000))  # three batches of 2,000 lines
    page.goto(live_server.url + "/upload")
    page.set_input_files("#files", files=[{"name": "counted.jsonl", "mimeType": "application/x-ndjson", "buffer": body}])
    page.get_by_role("button", name="Upload").click()
    page.locator(".upload-result .runs-created a").wait_for()
    page.goto(f"{live_server.url}/jobs/1")  # the first job of this board
    text = page.locator("main").inner_text()
    assert f"upload of counted.jsonl: done — {len(body):,} of {len(body):,} bytes, 5,000 records" in text
    assert page.errors == []


def test_without_javascript_a_pending_upload_reloads_its_progress_and_can_be_cancelled(live_server, browser):
    writer = live_server.app.state.writer
    release = threading.Event()
    writer.submit("blocker", lambda job, ingestor: release.wait(60), owner="blocker")
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto(live_server.url + "/upload")
        body = orjson.dumps({"type": "run_start", "run_id": "nojs"}) + b"\n"
        page.set_input_files("#files", files=[{"name": "nojs.jsonl", "mimeType": "application/x-ndjson", "buffer": body}])
        with page.expect_navigation():
            page.get_by_role("button", name="Upload").click()
        assert "waiting for its turn" in page.locator("#upload-job").inner_text()
        job_url = page.locator("#upload-job").get_attribute("hx-get")
        # the page moves itself to the job's address, which keeps reloading while it waits
        page.wait_for_url(f"**{job_url}", timeout=10_000)
        refresh = page.locator("meta[http-equiv=refresh]")
        assert refresh.count() == 1 and refresh.get_attribute("content") == f"2;url={job_url}"
        with page.expect_navigation():
            page.get_by_role("button", name="Cancel").click()
        assert page.locator("#upload-cancelled").inner_text() == "Upload cancelled: it had not started: nothing was read"
        assert page.locator("meta[http-equiv=refresh]").count() == 0   # done: no more reloads
    finally:
        release.set()
        context.close()


def test_a_cancel_pressed_after_the_upload_finished_says_it_came_too_late(live_server, page):
    # The page's last poll showed the upload still queued, but it finished before Cancel
    # reached the board: the result came back with no word about the Cancel.
    writer = live_server.app.state.writer
    release = threading.Event()
    writer.submit("blocker", lambda job, ingestor: release.wait(60), owner="blocker")
    try:
        page.goto(live_server.url + "/upload")
        page.set_input_files("#files", files=[{"name": "late.jsonl", "mimeType": "application/x-ndjson",
                                                "buffer": TRACE}])
        page.get_by_role("button", name="Upload").click()
        page.locator("#upload-job").wait_for()
        # the page's polls go unanswered from here, so it still shows the queued upload
        page.route("**/upload/jobs/*", lambda route: route.abort() if route.request.method == "GET"
                   else route.continue_())
    finally:
        release.set()
    job = max((j for j in writer._jobs.values() if j.is_upload), key=lambda j: j.id)
    assert job.finished.wait(30) and job.state == "done"
    page.get_by_role("button", name="Cancel").click()
    late = page.locator("#upload-cancel-late")
    late.wait_for()
    assert late.inner_text() == ("Cancel came too late: the upload had already been read, and all of it is kept"
                                 " — remove what it added….")
    assert page.locator(".upload-result .runs-created a").inner_text() == "browser/run"
    # only what the aborted polls logged
    assert [e for e in page.errors if "ERR_FAILED" not in e and "htmx:" not in e] == []
