"""Hostile traces on the pages other branches add: compare, pair, upload results, exports.

Each test skips, with the reason, only while its route answers 404 in this branch; after
the merge they must pass. The detection is the same as in test_hostile_pages.py.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from app.urls import encode_run_id
from tests.browser.test_hostile_pages import PAYLOADS, SERVER_PATH, Visitor, hostile_trace  # noqa: F401
from tests.browser.test_hostile_pages import hostile, visitor  # noqa: F401  (fixtures)


def skip_if_missing(url: str) -> httpx.Response:
    """GET `url`; skip the test when the route is not in this branch yet."""
    r = httpx.get(url, timeout=30)
    if r.status_code == 404 and "no such page" in r.text:
        route = "/" + url.split("/", 3)[-1].split("?")[0]
        if route.startswith("/runs/"):
            route = "/runs/{id}/" + route.rsplit("/", 1)[-1]
        pytest.skip(f"{route} is not in this branch yet (404): runs after the merge")
    return r


def test_compare_page_runs_no_script(hostile, live_server, visitor):
    base = live_server.url
    skip_if_missing(base + "/compare")
    visitor.visit(base + "/compare", "compare", expand=True)
    p = PAYLOADS[1]
    visitor.visit(f"{base}/compare?experiment={quote(p + '#exp')}", "compare with experiment", expand=True)
    visitor.visit(f"{base}/compare?experiment={quote(p + '#exp')}&a={quote(p + '#var')}&b={quote(PAYLOADS[0] + '#var')}",
                  "compare variants", expand=True)
    assert visitor.dialogs == []
    assert visitor.problems == []


def test_pair_view_runs_no_script(hostile, live_server, visitor):
    base = live_server.url
    a, b = PAYLOADS[0], PAYLOADS[1]
    skip_if_missing(f"{base}/pair?a={quote(a, safe='')}&b={quote(b, safe='')}")
    for x, y in [(a, b), (PAYLOADS[4], PAYLOADS[7]), (PAYLOADS[3], PAYLOADS[8])]:
        visitor.visit(f"{base}/pair?a={quote(x, safe='')}&b={quote(y, safe='')}", f"pair {x!r} {y!r}", expand=True)
    assert visitor.dialogs == []
    assert visitor.problems == []


def test_upload_result_runs_no_script(live_server, visitor, tmp_path):
    base = live_server.url
    skip_if_missing(base + "/upload")
    trace = hostile_trace(tmp_path / "<img src=x onerror=window.__xss(20)>.jsonl")
    bad = tmp_path / "bad-<svg onload=window.__xss(21)>.jsonl"
    bad.write_bytes(b'{"type":"step","run_id":"<script>window.__xss(22)</script>","step":"<b>x</b>"}\n<script>x</script>\n')
    visitor.visit(base + "/upload", "upload form")
    visitor.page.locator("input[type=file]").first.set_input_files([str(trace), str(bad)])
    submit = visitor.page.locator("form button[type=submit], form input[type=submit]").first
    if submit.count():
        submit.click()
    visitor.page.wait_for_load_state("networkidle")
    visitor.page.wait_for_timeout(1500)  # the result may be polled in by htmx
    visitor.page.wait_for_load_state("networkidle")
    visitor.open_everything()
    visitor.check("upload result")
    body = visitor.page.locator("body").inner_text()
    assert "bad-<svg onload=window.__xss(21)>.jsonl" in body  # the error names the file, as text
    assert visitor.dialogs == []
    assert visitor.problems == []


@pytest.mark.parametrize("index", [0, 1, 2, 5, 6, 7, 8])
def test_html_export_opened_from_disk_runs_no_script(hostile, live_server, visitor, tmp_path, index):
    run_id = PAYLOADS[index]
    url = f"{live_server.url}/runs/{encode_run_id(run_id)}/export.html"
    r = skip_if_missing(url)
    assert r.status_code == 200
    saved = tmp_path / f"export-{index}.html"
    saved.write_bytes(r.content)
    visitor.page.goto(saved.as_uri())
    visitor.page.wait_for_load_state("load")
    visitor.open_everything()
    # A file on disk has no CSP header: whatever protects it must be in the file itself.
    visitor.check(f"export.html {run_id!r}", body=r.text)
    assert "{{7*7}}" in visitor.page.locator("body").inner_text() or index != 8
    assert visitor.dialogs == []
    assert visitor.problems == []


def test_jsonl_export_is_not_html_and_names_no_server_path(hostile, live_server, tmp_path):
    run_id = PAYLOADS[2]
    r = skip_if_missing(f"{live_server.url}/runs/{encode_run_id(run_id)}/export.jsonl")
    assert r.status_code == 200
    assert "html" not in r.headers["content-type"]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert str(tmp_path) not in r.text and not SERVER_PATH.search(r.text)
