"""A 3 MB observation in real Chromium: the step shows it cut; "show all" loads the first
part with a link, and the link opens the whole value, masked, on its own page."""

from __future__ import annotations

from tests.conftest import write_jsonl

KEY = "AKIAIOSFODNN7EXAMPLE"


def test_a_long_value_opens_whole_on_its_own_page(ingest, tmp_path, live_server, page):
    value = "line of output\n" * 200_000 + f"final key {KEY} end"
    ingest(write_jsonl(tmp_path / "t.jsonl", [
        {"type": "run_start", "run_id": "big", "ts": "2025-01-01T00:00:00Z"},
        {"type": "step", "run_id": "big", "step": 0, "observation": value},
    ]))
    page.goto(live_server.url + "/runs/big")
    step = page.locator("#step-0")
    step.get_by_role("button", name="show all").first.click()
    more = step.locator(".field-more")
    more.wait_for()
    assert f"of {len(value):,} characters" in more.inner_text()
    href = more.get_by_role("link").get_attribute("href")
    page.goto(live_server.url + href)
    text = page.locator("pre.pre").inner_text()
    assert text.endswith("final key [secret masked: aws-access-key …MPLE] end")
    assert KEY not in page.content()
    assert text.count("line of output") == 200_000
    assert page.errors == []
