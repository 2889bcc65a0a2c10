"""The runs list's search in real Chromium: a critic's reason and a tool's error find their
run as the user types; a masked secret's characters find nothing, and no page shows them."""

from __future__ import annotations

from tests.browser.test_pages_browser import until
from tests.conftest import write_jsonl

KEY = "AKIAIOSFODNN7EXAMPLE"


def test_typing_finds_critic_reasons_and_errors_but_never_a_masked_key(live_server, page, ingest, tmp_path):
    assert ingest(write_jsonl(tmp_path / "t.jsonl", [
        {"type": "run_start", "run_id": "walker", "objective": "fix the bug"},
        {"type": "step", "run_id": "walker", "step": 0, "actions": [{"name": "run_pytest", "args": {}}],
         "action_results": [{"error": "ModuleNotFoundError: zebra"}],
         "critic_outputs": [{"critic": "verifier", "action": "retry", "reason": "pytest returncode was 1"}]},
        {"type": "run_end", "run_id": "walker", "status": "completed", "stop_reason": "final"},
        {"type": "run_start", "run_id": "leaky", "objective": f"deploy with {KEY}"},
        {"type": "run_end", "run_id": "leaky", "status": "completed", "stop_reason": "final"},
    ])).ok
    page.goto(live_server.url + "/runs")
    rows = "document.querySelectorAll('table.runs tbody td.run-id')"
    until(page, f"{rows}.length === 2")
    for q, found in (("returncode", ["walker"]), ("zebra", ["walker"]), ("AKIAIOSF", []), ("deploy", ["leaky"]),
                     ("run_end", [])):  # the end records' framing ("type": "run_end") found every run
        page.fill("#q", q)
        until(page, f"new URLSearchParams(location.search).get('q') === {q!r}")  # active search, pushed by htmx
        until(page, f"{rows}.length === {len(found)}")
        assert [t.strip() for t in page.locator("td.run-id").all_inner_texts()] == found, q
    # the list shows the objective masked, never the key
    assert KEY not in page.content()
    assert page.errors == []


def test_a_nul_in_the_search_finds_nothing(live_server, page, ingest, tmp_path):
    # typed or pasted, a NUL reaches q as %00; SQLite's LIKE read "%\0%" as "%" (every run)
    assert ingest(write_jsonl(tmp_path / "t.jsonl", [
        {"type": "run_start", "run_id": "one", "objective": "anything"},
        {"type": "run_end", "run_id": "one", "status": "completed", "stop_reason": "final"}])).ok
    page.goto(live_server.url + "/runs")
    page.locator("table.runs tbody td.run-id").first.wait_for()
    page.fill("#q", "\x00e")
    until(page, "new URLSearchParams(location.search).get('q') === '\\u0000e'")
    until(page, "document.querySelectorAll('table.runs tbody td.run-id').length === 0")
    assert page.errors == []


def test_a_pasted_query_longer_than_the_board_takes_is_cut_to_it_not_refused(live_server, page, ingest, tmp_path):
    # the board takes 500 characters; the box let 600 through and the list answered a bare 400
    assert ingest(write_jsonl(tmp_path / "t.jsonl", [
        {"type": "run_start", "run_id": "one", "objective": "anything"},
        {"type": "run_end", "run_id": "one", "status": "completed", "stop_reason": "final"}])).ok
    page.goto(live_server.url + "/runs")
    page.fill("#q", "x" * 600)
    until(page, "(new URLSearchParams(location.search).get('q') || '').length === 500")
    until(page, "document.querySelector('#runs-results, table.runs') !== null")
    assert page.locator("#q").input_value() == "x" * 500
    assert page.errors == []
