"""The API reference in real Chromium: Swagger UI from static/ under the board's own
content security policy (FastAPI's CDN page was blank under it)."""

from __future__ import annotations


def test_the_api_reference_lists_the_boards_endpoints(live_server, page):
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(live_server.url + "/api/docs")
    page.locator(".opblock").first.wait_for(timeout=20_000)
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert "/api/compare" in [p.replace("\u200b", "") for p in paths]
    assert "/api/runs/{run_id}" in [p.replace("\u200b", "") for p in paths]
    # opening an operation and trying it talks to the board itself
    page.locator(".opblock", has_text="/api/health").first.locator(".opblock-summary").click()
    page.get_by_role("button", name="Try it out").click()
    page.get_by_role("button", name="Execute").click()
    page.locator(".response .highlight-code, .responses-table .response-col_description").first.wait_for()
    assert '"status": "ok"' in page.locator(".live-responses-table").inner_text()
    assert all(u.startswith(live_server.url) for u in requests)   # nothing from elsewhere
    assert page.errors == []
