"""The smoke/e2e story in real Chromium: upload a zip, two clicks to the verdict, then a disagreeing pair side by side."""

from __future__ import annotations

import io
import zipfile

from tests.app.test_compare import crafted
from tests.browser.test_pages_browser import until


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
    assert headline.inner_text() == ("Verdicts identical on 3 of 4 paired runs (3 tasks), 1 not graded left out: "
                                     "agreement 75% (95% CI 30%–95%); "
                                     "smoke used 61% fewer steps, 59% fewer tokens and 64% less agent time.")
    # two bars per recorded measure: steps, tool calls (these traces' run_end does not count
    # them: the steps' actions are counted), tokens, cost, agent cost (these v1 traces do not
    # tell it apart: the whole cost), agent time, end to end
    assert page.locator("svg.bars rect").count() == 14
    # the chart shows changes, and its heading says a minus is a saving
    savings = page.get_by_role("region", name="Savings")
    assert savings.locator("h2").inner_text().startswith(
        "smoke against e2e change of the totals over paired runs (−36% is 36% less, a saving")
    assert savings.locator("text.bar-saved").first.text_content() == "−61%"  # steps: 61% fewer, as the headline says

    page.get_by_label("disagreements only").check()
    # polled from here: the board's CSP forbids the eval that wait_for_function needs
    until(page, "document.querySelectorAll('tr.pair-row').length === 1")
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
    # and back to every pair of the comparison
    page.get_by_role("link", name="← all pairs of smoke against e2e in exp").click()
    page.wait_for_url("**/compare?experiment=exp&a=smoke&b=e2e")
    assert page.locator("tr.pair-row").count() == 5
    assert page.errors == []


def test_compare_with_from_a_run_page(live_server, page, ingest, tmp_path):
    assert ingest(crafted(tmp_path / "exp.jsonl")).ok
    page.goto(live_server.url + "/runs/s-t4-0")
    page.get_by_role("button", name="side by side").click()
    page.wait_for_url("**/pair?a=s-t4-0&b=")
    assert "e-t4-0" in page.locator(".pair-side").nth(1).inner_text()
    # an id pasted with the spaces of the cell it was copied from names its run
    page.goto(live_server.url + "/runs/s-t1-1")
    page.get_by_label("compare with…").fill("  e-t1-1 ")
    page.get_by_role("button", name="side by side").click()
    page.wait_for_url("**/pair?a=s-t1-1&b=**")
    assert "e-t1-1" in page.locator(".pair-side").nth(1).inner_text()
    assert page.errors == []


def test_reviewer_story_groups_explains_and_copies_markdown(live_server, browser, ingest, tmp_path):
    """Compare shows the agreement with its interval, groups by scenario, the disagreeing
    pair explains itself (a critic said retry on the deciding step, pytest failed), and the
    Markdown summary lands on the clipboard."""
    from tests.app.test_compare_report import grouped_experiment

    assert ingest(grouped_experiment(tmp_path / "grp.jsonl")).ok
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(live_server.url + "/compare?experiment=grp&a=smoke&b=e2e")
    # 3 of 5 agree: Wilson 95% CI 23%-88%
    assert "agreement 60% (95% CI 23%–88%)" in page.locator("#headline").inner_text()
    assert "exact McNemar p = 0.5" in page.locator("#mcnemar").inner_text()
    assert "flaky" in page.locator("#flaky-note").inner_text()

    page.select_option("#group-by", "meta:scenario")
    page.get_by_role("button", name="Group").click()
    page.wait_for_url("**group=meta%3Ascenario**")
    rows = page.locator("table.groups tbody tr")
    assert rows.count() == 2
    assert rows.nth(0).locator("td").nth(0).inner_text() == "alpha"
    assert rows.nth(0).locator("td").nth(3).inner_text().startswith("2/3 · 67%")

    page.get_by_role("button", name="Copy as Markdown").click()
    page.locator("#copy-status").filter(has_text="Copied").wait_for()
    pasted = page.evaluate("navigator.clipboard.readText()")
    assert pasted.startswith("## smoke vs e2e") and "| **smoke pass** | 2 | 2 |" in pasted
    assert "exact McNemar p = 0.5" in pasted and "[side by side](" in pasted

    flagged = page.locator("tr.pair-row", has_text="r4")
    assert [t.strip() for t in flagged.locator(".flag").all_inner_texts()] == [
        "critic objected", "deciding call failed", "premature pass"]
    flagged.get_by_role("link", name="side by side").click()
    page.wait_for_url("**/pair?a=s-r4-0&b=e-r4-0")
    panel = page.locator(".deciding-panel")
    assert "Why smoke stopped at step 2" in panel.locator("h2").inner_text()
    assert "call #3 bash: pytest -q · exit code 1" in panel.locator(".deciding-evidence").inner_text()
    assert panel.locator(".pair-flags li").count() == 3
    deciding = page.locator("tr.deciding-row")
    assert deciding.count() == 1
    critics = deciding.locator("td").nth(1).locator(".pair-critics li")
    assert critics.nth(0).inner_text() == "retry ReturnCodeCritic: command failed with returncode=1 score 0.00"
    # a step row links to that step in its run
    deciding.locator("td").nth(1).get_by_role("link", name="step 2 ↗").click()
    page.wait_for_url("**/runs/s-r4-0?from=2#step-2")
    assert page.locator("#step-2").is_visible()
    assert errors == []
    context.close()


def test_the_grouping_and_the_pairs_sort_keep_each_other_in_the_url(live_server, page, ingest, tmp_path):
    from urllib.parse import parse_qs, urlsplit

    from tests.app.test_compare_report import grouped_experiment

    assert ingest(grouped_experiment(tmp_path / "grp.jsonl")).ok

    def query() -> dict:
        return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}

    page.goto(live_server.url + "/compare?experiment=grp&a=smoke&b=e2e&group=stop_reason")
    page.select_option("select[name=sort]", "savings")
    until(page, "location.search.includes('sort=savings')")  # pushed by htmx
    assert query()["group"] == "stop_reason"
    page.reload()
    assert page.locator("table.groups tbody tr").count() > 0   # the grouping survived the reload
    # stop reasons by their labels, as everywhere else (the raw code stays in the title)
    cells = page.locator("table.groups tbody td.clip")
    assert cells.locator(".badge.stop").count() == cells.count()
    assert "budget_steps" not in cells.all_inner_texts() and "final" not in cells.all_inner_texts()
    assert page.locator("table.groups thead").inner_text().count("disagreements") == 1
    page.get_by_label("disagreements only").check()
    until(page, "location.search.includes('only=disagree')")
    page.select_option("#group-by", "meta:scenario")
    page.get_by_role("button", name="Group").click()
    page.wait_for_url("**group=meta%3Ascenario**")
    assert (query()["sort"], query()["only"]) == ("savings", "disagree")
    assert page.locator("select[name=sort]").input_value() == "savings"
    assert page.locator("tr.pair-row").count() == page.locator("tr.pair-row.disagree").count() > 0
    assert page.errors == []


def test_compare_with_from_a_run_without_a_twin_asks_for_the_other_run(live_server, page, ingest, tmp_path):
    from tests.app.pages_traces import run_records
    from tests.conftest import write_jsonl

    recs = run_records("alone", experiment=None, variant=None) + run_records("lonely", experiment="solo", variant="v")
    recs += run_records("other", experiment=None, variant=None)
    assert ingest(write_jsonl(tmp_path / "alone.jsonl", recs)).ok
    page.goto(live_server.url + "/runs/alone")
    field = page.get_by_label("compare with…")
    assert field.get_attribute("required") is not None   # no experiment: no twin to default to
    page.get_by_role("button", name="side by side").click()
    assert page.evaluate("location.pathname") == "/runs/alone"   # the browser asks for the id first
    # a run of an experiment with no other variant: the 404 offers the same form
    page.goto(live_server.url + "/runs/lonely")
    page.get_by_role("button", name="side by side").click()
    page.wait_for_url("**/pair?a=lonely&b=")
    assert "this run has no twin" in page.locator(".error-message").inner_text()
    page.locator("#pair-with input[name=b]").fill("other")
    page.locator("#pair-with").get_by_role("button", name="side by side").click()
    page.wait_for_url("**/pair?a=lonely&b=other")
    assert "other" in page.locator(".pair-side").nth(1).inner_text()
    # the run beside itself is no comparison: the same form asks for another run
    page.goto(live_server.url + "/pair?a=lonely&b=lonely")
    assert "the same run twice" in page.locator(".error-message").inner_text()
    page.locator("#pair-with input[name=b]").fill("alone")
    page.locator("#pair-with").get_by_role("button", name="side by side").click()
    page.wait_for_url("**/pair?a=lonely&b=alone")


def test_back_shows_each_forms_controls_as_its_address_says(live_server, page, ingest, tmp_path):
    # The group-by menu and the lab's policy form are plain GET forms: Back from the page a
    # form loaded showed the earlier page with the later page's choices in its controls
    # (the browser restores what was picked), so the menu said "stop reason" over ungrouped pairs.
    from tests.app.test_compare_report import grouped_experiment

    assert ingest(grouped_experiment(tmp_path / "grp.jsonl")).ok
    page.goto(live_server.url + "/compare?experiment=grp&a=smoke&b=e2e")
    assert page.locator("table.groups").count() == 0
    page.select_option("#group-by", "stop_reason")
    page.get_by_role("button", name="Group").click()
    page.wait_for_url("**group=stop_reason**")
    page.locator("table.groups").wait_for()
    page.go_back()
    page.wait_for_url("**/compare?experiment=grp&a=smoke&b=e2e")
    assert page.locator("table.groups").count() == 0
    assert page.locator("#group-by").input_value() == ""
    page.go_forward()
    page.wait_for_url("**group=stop_reason**")
    assert page.locator("#group-by").input_value() == "stop_reason"

    page.goto(live_server.url + "/lab?experiment=grp&variant=e2e")
    arms = page.locator("select[name=arm]")
    before = arms.evaluate_all("els => els.map(e => e.value)")
    cap = page.get_by_label("step cap")
    assert cap.input_value() == ""
    cap.fill("3")
    page.get_by_role("button", name="Simulate").click()
    page.wait_for_url("**max_steps=3**")
    assert page.get_by_label("step cap").input_value() == "3"
    page.go_back()
    page.wait_for_url("**/lab?experiment=grp&variant=e2e")
    assert page.get_by_label("step cap").input_value() == ""
    assert arms.evaluate_all("els => els.map(e => e.value)") == before
    assert page.errors == []



def test_an_old_link_past_the_last_page_of_pairs_opens_the_last_page(live_server, page, ingest, tmp_path):
    # five pairs (see tests.app.test_compare.crafted) in pages of 2: the last page is pair 5
    assert ingest(crafted(tmp_path / "exp.jsonl")).ok
    page.goto(live_server.url + "/compare?experiment=exp&a=smoke&b=e2e&limit=2&offset=99999")
    page.wait_for_url("**offset=4")
    assert page.locator("p.pairs-pager").inner_text().startswith("rows 5–5 of 5")
    assert page.locator("tr.pair-row").count() == 1
    page.get_by_role("link", name="‹ previous 2").click()
    until(page, "location.search.includes('offset=2')")
    until(page, "document.querySelectorAll('tr.pair-row').length === 2")
    assert page.errors == []


def test_the_pairs_as_sorted_and_filtered_download_as_csv(live_server, page, ingest, tmp_path):
    # The export links ignored "disagreements only" and the sort: the CSV held every pair
    # by task whatever the table showed.
    import csv
    import io

    from tests.app.test_compare_report import grouped_experiment

    assert ingest(grouped_experiment(tmp_path / "grp.jsonl")).ok
    page.goto(live_server.url + "/compare?experiment=grp&a=smoke&b=e2e")
    assert page.locator(".pairs-csv").count() == 0          # the one above is every pair by task
    page.get_by_label("disagreements only").check()
    link = page.locator(".pairs-csv")
    link.wait_for()
    assert page.locator(".pairs-export").inner_text() == "CSV of these 2 pairs (disagreements only, sorted by task)"
    rows = list(csv.DictReader(io.StringIO(page.request.get(live_server.url + link.get_attribute("href")).text())))
    assert [(r["task_id"], r["replicate"], r["agree"]) for r in rows] == [("r1", "1", "no"), ("r4", "0", "no")]
    page.get_by_label("disagreements only").uncheck()
    page.select_option("select[name=sort]", "disagreement")
    until(page, "document.querySelector('.pairs-export') && "
                "document.querySelector('.pairs-export').innerText.includes('5 pairs')")
    rows = list(csv.DictReader(io.StringIO(page.request.get(live_server.url + link.get_attribute("href")).text())))
    assert [r["agree"] for r in rows] == ["no", "no", "yes", "yes", "yes"]
    assert page.errors == []
