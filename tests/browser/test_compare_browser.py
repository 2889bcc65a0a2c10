"""The smoke/e2e story in real Chromium: upload a zip, two clicks to the verdict, then a disagreeing pair side by side."""

from __future__ import annotations

import io
import zipfile

from tests.app.test_compare import crafted


def test_upload_zip_then_compare_then_pair(live_server, page, tmp_path):
    trace = crafted(tmp_path / "exp.jsonl")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.write(trace, "experiment/exp.jsonl")
    page.goto(live_server.url + "/upload")
    page.set_input_files("#files", files=[{"name": "smoke-e2e.zip", "mimeType": "application/zip", "buffer": buf.getvalue()}])
    page.get_by_role("button", name="Upload").click()
    page.locator(".upload-result").wait_for()
    assert page.locator(".runs-created a").count() == 13

    page.get_by_role("navigation").get_by_role("link", name="Compare").click()  # click 1
    headline = page.locator("#headline")
    assert headline.inner_text() == ("Verdicts identical on 3 of 4 paired tasks (1 not graded left out); "
                                     "smoke used 61% fewer steps, 59% fewer tokens and 64% less agent time.")
    # two bars per recorded measure: steps, tokens, cost, agent time, end to end (these
    # traces record no tool-call count)
    assert page.locator("svg.bars rect").count() == 10

    page.get_by_label("disagreements only").check()
    page.wait_for_function("document.querySelectorAll('tr.pair-row').length === 1")
    row = page.locator("tr.pair-row.disagree")
    assert "t1" in row.inner_text()
    row.get_by_role("link", name="side by side").click()  # click 2
    page.wait_for_url("**/pair?a=s-t1-1&b=e-t1-1")
    assert page.locator(".not-run-label").count() == 5
    assert page.locator(".not-run-label").first.inner_text() == "not run by smoke"
    assert page.locator(".stop-mark").inner_text().strip() == "■ smoke stopped here"
    assert page.locator(".pair-side").count() == 2
    assert page.locator(".pair-side").nth(0).locator(".badge.armed").count() == 1
    assert page.locator(".pair-side").nth(0).locator(".badge.advisory").count() == 1
    assert page.errors == []


def test_compare_with_from_a_run_page(live_server, page, ingest, tmp_path):
    assert ingest(crafted(tmp_path / "exp.jsonl")).ok
    page.goto(live_server.url + "/runs/s-t4-0")
    page.get_by_role("button", name="side by side").click()
    page.wait_for_url("**/pair?a=s-t4-0&b=")
    assert "e-t4-0" in page.locator(".pair-side").nth(1).inner_text()
    assert page.errors == []
