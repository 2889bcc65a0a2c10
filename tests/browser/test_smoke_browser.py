"""The runs list and a run view open in real Chromium with no script errors."""

from __future__ import annotations

from tests.conftest import write_jsonl


def test_list_and_run_view_render_in_chromium(live_server, page, ingest, tmp_path):
    write_jsonl(tmp_path / "t.jsonl", [
        {"type": "run_start", "run_id": "r/1", "task_id": "t1", "criteria": [{"id": "c1"}]},
        {"type": "step", "run_id": "r/1", "step": 0, "critic_outputs": [
            {"critic": "alpha", "action": "retry", "reason": "try again", "score": 0.2},
            {"critic": "beta", "action": "continue", "reason": "fine", "score": 0.9}]},
        {"type": "criterion", "run_id": "r/1", "id": "c1", "score": 1.0, "passed": True},
        {"type": "run_end", "run_id": "r/1", "status": "completed", "stop_reason": "final"},
    ])
    assert ingest(tmp_path / "t.jsonl").ok
    page.goto(live_server.url + "/runs")
    link = page.get_by_role("link", name="r/1")
    assert link.is_visible()
    link.click()
    page.wait_for_url("**/runs/r%2F1")
    critic_rows = page.locator("article#step-0 table.critics tbody tr")
    assert critic_rows.count() == 2
    assert critic_rows.nth(0).inner_text().startswith("alpha")
    assert "final answer" in page.locator(".run-head .badges").inner_text()
    assert page.errors == []
