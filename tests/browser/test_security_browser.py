"""The board's own forms work in real Chromium under its security headers; other sites' posts do not.

Chromium sends `Origin: null` on a form post from a page whose Referrer-Policy is
no-referrer, which the cross-site guard once refused: nobody could sign in, and the
no-script upload form failed. These tests sign in, upload and post without script.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from qita_board.settings import Settings
from tests.browser.conftest import LiveServer

TOKEN = "browser-board-token-0123456789"
TRACE = b"".join(orjson.dumps(r) + b"\n" for r in [
    {"type": "run_start", "run_id": "signed/upload", "task_id": "t1"},
    {"type": "step", "run_id": "signed/upload", "step": 0, "observation": "ok"},
    {"type": "run_end", "run_id": "signed/upload", "status": "completed", "stop_reason": "final"},
])


@pytest.fixture
def token_server(tmp_path: Path):
    server = LiveServer(Settings(db=str(tmp_path / "t.db"), token=TOKEN)).start()
    yield server
    server.stop()


def test_sign_in_through_the_form_then_upload_with_the_file_picker(token_server, page):
    base = token_server.url
    page.goto(base + "/upload")
    page.set_input_files("#files", files=[{"name": "before.jsonl", "mimeType": "application/x-ndjson", "buffer": TRACE}])
    page.get_by_role("button", name="Upload").click()
    page.get_by_text("needs its token").first.wait_for()  # not signed in yet: refused, and said so
    refused = page.locator("#upload-status").inner_text()
    assert refused.startswith("Upload refused (HTTP 401): this board needs its token") and "{" not in refused  # not raw JSON
    assert refused.endswith("Sign in at /login with the board's token, then upload again.")

    page.goto(base + "/login?next=/upload")
    page.fill("#token", TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/upload")  # 303 back to where we came from: the sign-in was accepted
    assert "cross-site" not in page.content()

    page.set_input_files("#files", files=[{"name": "signed.jsonl", "mimeType": "application/x-ndjson", "buffer": TRACE}])
    page.get_by_role("button", name="Upload").click()
    result = page.locator(".upload-result")
    result.wait_for()
    assert result.locator(".runs-created a").inner_text() == "signed/upload"
    # The only console errors are the browser and htmx logging the refused upload before sign-in.
    assert [e for e in page.errors if "401" not in e] == [], page.errors


def test_wrong_token_shows_the_error_on_the_login_page(token_server, page):
    page.goto(token_server.url + "/login")
    page.fill("#token", "not-the-token")
    page.get_by_role("button", name="Sign in").click()
    assert page.locator(".error-message").inner_text() == "wrong token"


def test_the_upload_form_works_without_script(live_server, browser):
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(live_server.url + "/upload")
        page.set_input_files("#files", files=[{"name": "nojs.jsonl", "mimeType": "application/x-ndjson", "buffer": TRACE}])
        page.get_by_role("button", name="Upload").click()
        page.wait_for_url(live_server.url + "/upload/jobs/*")  # Post/Redirect/Get: a reload posts nothing
        result = page.locator(".upload-result")
        result.wait_for()
        assert result.locator(".runs-created a").inner_text() == "signed/upload"
    finally:
        context.close()


@pytest.mark.parametrize("path,fields", [("/login", {"token": TOKEN}), ("/logout", {})])
def test_a_form_on_another_site_cannot_post_to_the_board(token_server, page, path, fields):
    # A page of another site (served by Playwright, no network) with a form aimed at the board.
    inputs = "".join(f'<input name="{k}" value="{v}">' for k, v in fields.items())
    page.route("http://evil.example/**", lambda route: route.fulfill(
        content_type="text/html",
        body=f'<form method="post" action="{token_server.url}{path}">{inputs}<button>go</button></form>'))
    page.goto("http://evil.example/")
    page.get_by_role("button", name="go").click()
    page.wait_for_url(token_server.url + path)
    assert "cross-site request refused" in page.content()
    page.goto(token_server.url + "/login")
    assert page.locator("#login-state").count() == 0  # the evil form did not sign this browser in


def test_names_holding_secrets_compare_and_filter_from_their_links_and_menus(live_server, page, ingest, tmp_path):
    # the overview's compare link was a 404 and the list's menus found 0 runs for a masked name
    from qita_board.secrets import mask_text
    from tests.app.test_secrets_fields import RAW, TAG, VARIANT, secret_names
    from tests.browser.test_pages_browser import until

    secret_names(tmp_path, ingest)
    page.goto(live_server.url + "/")
    page.locator("a.compare-link").click()
    page.wait_for_url("**/compare?**")
    assert page.locator("table.pairs tbody tr").count() == 1
    assert page.locator("svg.bars").get_attribute("aria-label") == f"Totals per measure, {mask_text(VARIANT)} against e2e"
    assert not any(raw in page.content() for raw in RAW)
    page.goto(live_server.url + "/runs")
    page.select_option("select[name=variant]", mask_text(VARIANT))
    until(page, "document.querySelectorAll('table.runs tbody td.run-id').length === 1")
    assert page.locator("td.run-id").inner_text().strip() == "sn-a"
    page.select_option("select[name=variant]", "")
    page.select_option("select[name=tag]", mask_text(TAG))
    until(page, "location.search.includes('tag=')")
    until(page, "document.querySelectorAll('table.runs tbody td.run-id').length === 2")
    assert not any(raw in page.url for raw in RAW)
    assert page.errors == []
