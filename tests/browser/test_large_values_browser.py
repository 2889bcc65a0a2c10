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


def test_show_all_works_on_every_value_of_a_large_step_one_after_another(ingest, tmp_path, live_server, page):
    # A record over the large-record mark (256 KiB) whose "show all" values (the observation,
    # a dict, and the raw record) are answered whole. The first used to keep the
    # one-at-a-time gate of large records, so the second never answered (nor any later one:
    # the board ran out of threads).
    # (no spaces: the preview cuts a string at a word when it can, here at 16 KiB)
    parts = {name: f"{name}-" + "x" * 100_000 + f"-end-of-{name}" for name in ("alpha", "beta", "gamma")}
    ingest(write_jsonl(tmp_path / "t.jsonl", [
        {"type": "run_start", "run_id": "wide", "ts": "2025-01-01T00:00:00Z"},
        {"type": "step", "run_id": "wide", "step": 0, "observation": parts},
    ]))
    page.goto(live_server.url + "/runs/wide")
    step = page.locator("#step-0")
    step.locator("details.raw > summary").click()
    buttons = step.get_by_role("button", name="show all")
    assert buttons.count() == 2
    for left in (1, 0):
        buttons.first.click()
        page.wait_for_function("n => document.querySelectorAll('#step-0 a.more').length === n", arg=left)
    shown = step.inner_text()
    assert all(shown.count(f"-end-of-{name}") == 2 for name in parts)  # the observation, and in the raw record
    assert page.errors == []
