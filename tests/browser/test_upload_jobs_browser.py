"""The upload component in real Chromium: a queued upload says it waits, shows progress,
and its Cancel button stops it; the next upload is read as usual."""

from __future__ import annotations

import threading

import orjson
import pytest

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
        assert cancelled.inner_text() == "Upload cancelled: cancelled before it started"
    finally:
        release.set()
    page.set_input_files("#files", files=[{"name": "picked.jsonl", "mimeType": "application/x-ndjson", "buffer": TRACE}])
    page.get_by_role("button", name="Upload").click()
    page.locator(".upload-result .runs-created a").wait_for()
    assert page.locator(".upload-result .runs-created a").inner_text() == "browser/run"
    assert page.errors == []
