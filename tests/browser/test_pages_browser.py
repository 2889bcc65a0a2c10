"""Board pages in real Chromium: list view in the URL, run view, lazy steps, live updates, export."""

from __future__ import annotations

import re
import time

import orjson
import pytest

from qita_board.settings import Settings
from tests.app.pages_traces import early_run, run_records, write_set
from tests.browser.conftest import LiveServer
from tests.conftest import write_jsonl


def until(page, expression: str, timeout_s: float = 20.0) -> None:
    """Wait until `expression` is true in the page (polled with evaluate: the board's CSP
    forbids the eval that page.wait_for_function uses)."""
    deadline = time.monotonic() + timeout_s
    while not _evaluate(page, expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout_s} s: {expression}")
        page.wait_for_timeout(100)


def _evaluate(page, expression: str) -> object:
    """The expression's value; false while the page is between two documents (a form sent,
    a link followed: Playwright then says the execution context was destroyed)."""
    from playwright.sync_api import Error

    try:
        return page.evaluate(expression)
    except Error as exc:
        if "Execution context was destroyed" in str(exc) or "navigat" in str(exc):
            return False
        raise


def test_list_filters_live_in_the_url_and_swap_only_the_table(live_server, page, ingest, tmp_path):
    assert ingest(write_set(tmp_path / "t")).ok
    page.goto(live_server.url + "/runs")
    assert page.locator("table.runs tbody tr").count() == 5
    page.evaluate("document.getElementById('filters').dataset.kept = 'yes'")   # gone if the page reloads
    page.select_option("select[name=verdict]", "fail")
    until(page, "location.search.includes('verdict=fail')")  # pushed by htmx
    until(page, "document.querySelectorAll('table.runs tbody tr').length === 2")
    assert page.evaluate("document.getElementById('filters').dataset.kept") == "yes"
    page.select_option("select[name=sort]", "steps")
    until(page, "location.search.includes('sort=steps')")  # pushed by htmx
    until(page, "document.querySelector('table.runs tbody td.run-id').innerText === 'c'")
    assert "2 of 4 graded" not in page.locator(".stats").inner_text()   # figures follow the filter
    page.reload()
    assert page.locator("select[name=verdict]").input_value() == "fail"
    assert [t.strip() for t in page.locator("td.run-id").all_inner_texts()] == ["c", "b"]
    page.fill("#q", "needle")
    page.select_option("select[name=verdict]", "")
    until(page, "location.search.includes('q=needle')")  # pushed by htmx
    until(page, "document.querySelectorAll('table.runs tbody td.run-id').length === 1")
    assert page.locator("td.run-id").inner_text().strip() == "d"
    assert page.errors == []


def test_back_and_forward_bring_the_filters_of_the_url_they_show(live_server, page, ingest, tmp_path):
    # htmx restored its snapshot of the page's markup: the table of ?verdict=fail under
    # controls that read "any verdict", so the next change dropped the filter unseen.
    assert ingest(write_set(tmp_path / "t")).ok
    page.goto(live_server.url + "/runs")
    page.select_option("select[name=verdict]", "fail")
    until(page, "location.search.includes('verdict=fail')")
    until(page, "document.querySelectorAll('table.runs tbody td.run-id').length === 2")
    page.select_option("select[name=sort]", "steps")
    until(page, "location.search.includes('sort=steps')")
    page.fill("#q", "needle")
    until(page, "location.search.includes('q=needle')")
    until(page, "document.querySelectorAll('table.runs tbody td.run-id').length === 0")
    page.go_back()
    until(page, "!location.search.includes('q=needle') && location.search.includes('sort=steps')")
    until(page, "document.querySelectorAll('table.runs tbody td.run-id').length === 2")
    assert (page.locator("#q").input_value(), page.locator("select[name=verdict]").input_value(),
            page.locator("select[name=sort]").input_value()) == ("", "fail", "steps")
    page.go_back()
    until(page, "location.search === '?verdict=fail'")
    until(page, "document.querySelector('select[name=sort]').value === 'started'")
    assert page.locator("select[name=verdict]").input_value() == "fail"
    page.select_option("select[name=order]", "asc")   # the next change keeps what the page shows
    until(page, "location.search.includes('order=asc')")
    assert "verdict=fail" in page.evaluate("location.search")
    until(page, "document.querySelectorAll('table.runs tbody td.run-id').length === 2")
    page.go_forward()
    until(page, "location.search.includes('sort=steps') || location.search.includes('order=asc')")
    assert page.errors == []


def test_an_old_link_past_the_last_page_of_runs_opens_the_last_page(live_server, page, ingest, tmp_path):
    assert ingest(write_set(tmp_path / "t")).ok   # 5 runs: pages of 2 start at 0, 2 and 4
    page.goto(live_server.url + "/runs?sort=run_id&order=asc&limit=2&offset=99999")
    assert page.evaluate("location.search") == "?sort=run_id&order=asc&offset=4&limit=2"
    assert [t.strip() for t in page.locator("td.run-id").all_inner_texts()] == ["early-1"]
    assert page.errors == []


def test_run_view_badges_panel_lane_keys_and_expanders(live_server, page, ingest, tmp_path):
    recs = early_run()
    recs[2]["observation"] = "head " + "z" * 3000 + " TAIL-OF-OBSERVATION"
    assert ingest(write_jsonl(tmp_path / "e.jsonl", recs)).ok
    page.goto(live_server.url + "/runs/early-1")
    head = page.locator(".run-head .badges")
    assert "early stop" in head.inner_text() and "finished" in head.inner_text() and "pass" in head.inner_text()
    assert page.locator(".early-panel").is_visible()
    assert "armed criterion passed" in page.locator(".early-panel").inner_text()
    assert page.get_by_text("advisory — not gated (run stopped early)").is_visible()
    assert page.locator(".badge.informational").is_visible() and page.locator(".badge.armed").count() == 1
    assert page.locator(".gauge-track").count() == 3
    # verdict lane: click the stop mark, the step becomes current
    page.locator("a.mark.mark-stop").click()
    until(page, "document.querySelector('#step-2').classList.contains('current')")
    assert page.evaluate("location.hash") == "#step-2"
    # j / k
    page.keyboard.press("k")
    until(page, "document.querySelector('#step-1').classList.contains('current')")
    page.keyboard.press("j")
    until(page, "document.querySelector('#step-2').classList.contains('current')")
    # walking folds a step again once left; open step 1 in place (its one-line summary)
    step1 = page.locator("#step-1")
    assert step1.locator("details.step-fold").get_attribute("open") is None
    step1.locator("summary .muted").first.click()
    assert step1.locator("details.step-fold").get_attribute("open") is not None
    # expander: the rest of a long value comes from the server on demand
    assert "TAIL-OF-OBSERVATION" not in step1.inner_text()
    step1.locator(".field:has(.label:text('observation')) a.more").click()
    until(page, "document.querySelector('#step-1').innerText.includes('TAIL-OF-OBSERVATION')")
    # the event timeline loads when opened; critic outputs all listed
    assert step1.locator("table.critics tbody tr").count() == 2
    assert "critic #2" in step1.locator("table.critics").inner_text()
    assert page.errors == []


def test_steps_load_as_the_reader_scrolls(live_server, page, ingest, tmp_path):
    assert ingest(write_jsonl(tmp_path / "l.jsonl", run_records("long", steps=60))).ok
    page.goto(live_server.url + "/runs/long")
    assert page.locator("article.step").count() == 12
    for expected in (37, 60):
        page.locator(".more-steps").scroll_into_view_if_needed()
        until(page, f"document.querySelectorAll('article.step').length === {expected}")
    assert page.locator(".more-steps").count() == 0
    ids = page.eval_on_selector_all("article.step", "els => els.map(e => +e.dataset.step)")
    assert ids == list(range(60))
    # a lane mark of a step further than the first block opens the run from there
    page.goto(live_server.url + "/runs/long")
    page.locator("a.mark[data-step='45']").click()
    page.wait_for_url(re.compile(r"from=45"))
    assert page.locator("#step-45").is_visible()
    assert page.errors == []


def test_run_written_while_open_updates_live_then_stops(browser, tmp_path):
    from qita.writer import TraceWriter

    folder = tmp_path / "watch"
    folder.mkdir()
    settings = Settings(db=str(tmp_path / "live.db"), watch=[str(folder)], live_poll_s=0.5, abandon_after_s=120)
    server = LiveServer(settings).start()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        w = TraceWriter(folder / "run.jsonl", "live-1")
        w.write("run_start", task_id="t", budget={"max_steps": 5})
        w.write("step", step=0, observation="first", critic_outputs=[{"critic": "c", "action": "continue", "score": 0.5}])
        page.goto(server.url + "/runs")
        until(page, "document.body.innerText.includes('live-1')")
        page.goto(server.url + "/runs/live-1")
        assert page.locator("#live.live-on").count() == 1
        page.locator("#step-0 details.raw > summary").click()
        assert page.locator("#step-0 details.raw").get_attribute("open") is not None
        w.write("step", step=1, observation="second", critic_outputs=[{"critic": "c", "action": "retry", "score": 0.2}])
        page.wait_for_selector("#step-1", timeout=20000)
        assert page.locator("#step-0 details.raw").get_attribute("open") is not None   # what was opened stays open
        assert page.locator("a.mark").count() == 2
        # the retry written while the page was open is a step worth a look: counted, and n reaches it
        until(page, "document.getElementById('walk-marks').dataset.flagged === '1'")
        assert page.locator("#walk-count-critic").inner_text() == "(1)"
        assert page.locator("#walk-what").inner_text() == "1 step worth a look"
        until(page, "!document.querySelector('#walk-nav .walk-next').disabled")
        page.evaluate("window.scrollTo(0, 0)")
        page.locator("body").press("n")
        until(page, "location.hash === '#step-1'")
        w.write("run_end", status="completed", stop_reason="critic_stop", steps=2)
        page.wait_for_selector("#live.live-off", timeout=20000)
        assert "critic stop" in page.locator(".run-head .badges").inner_text()
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.wait_for_timeout(1500)          # three poll intervals: none may happen now
        assert not [u for u in requests if "/live" in u]
        assert page.locator("#step-0 details.raw").get_attribute("open") is not None
        # the poll's URL opened by itself (copied from the network panel, say) is the run page
        page.goto(server.url + "/runs/live-1/live?stamp=x")
        assert page.url == server.url + "/runs/live-1"
        assert page.locator("#step-1").count() == 1
        assert errors == []
    finally:
        page.close()
        server.stop()


def test_silent_run_turns_abandoned(browser, tmp_path):
    folder = tmp_path / "watch"
    folder.mkdir()
    write_jsonl(folder / "r.jsonl", run_records("quiet", steps=1, end=False))
    settings = Settings(db=str(tmp_path / "q.db"), watch=[str(folder)], live_poll_s=0.5, abandon_after_s=2)
    server = LiveServer(settings).start()
    page = browser.new_page()
    try:
        page.goto(server.url + "/runs")
        until(page, "document.body.innerText.includes('quiet')")
        page.goto(server.url + "/runs/quiet")
        page.wait_for_selector(".run-head .state-abandoned", timeout=20000)
        page.wait_for_selector("#live.live-off")
    finally:
        page.close()
        server.stop()


def test_export_html_opens_offline_with_no_request(live_server, page, ingest, tmp_path, browser):
    assert ingest(write_jsonl(tmp_path / "e.jsonl", early_run())).ok
    page.goto(live_server.url + "/runs/early-1")
    with page.expect_download() as dl:
        page.get_by_role("link", name="export HTML").click()
    saved = tmp_path / "export.html"
    dl.value.save_as(saved)
    context = browser.new_context(offline=True)
    offline = context.new_page()
    requests: list[str] = []
    offline.on("request", lambda r: requests.append(r.url))
    offline.goto(saved.as_uri())
    assert requests == [saved.as_uri()]           # the file itself, nothing else
    assert offline.locator("article.step").count() == 3
    assert offline.get_by_text("advisory — not gated (run stopped early)").is_visible()
    assert "early stop" in offline.locator(".run-head .badges").inner_text()
    context.close()


@pytest.mark.parametrize(("run_id", "saved"), [("..", "run"), ("运行 1", "运行 1"), ("a/b", "a_b")])
def test_exports_save_under_the_run_id(live_server, page, ingest, tmp_path, run_id, saved):
    # Chromium's own reading of Content-Disposition: a run id of dots once saved as "html"
    assert ingest(write_jsonl(tmp_path / "d.jsonl", run_records(run_id, steps=1))).ok
    page.goto(live_server.url + "/runs")
    page.get_by_role("link", name=run_id, exact=True).click()
    for ext in ("html", "jsonl"):
        with page.expect_download() as dl:
            page.get_by_role("link", name=f"export {ext.upper()}").click()
        assert dl.value.suggested_filename == f"{saved}.{ext}"


@pytest.mark.parametrize("run_id", ["a/b/../c", "50% #1 ?x=y", "..", "ünï/cödé ✓"])
def test_runs_with_unusual_ids_open(live_server, page, ingest, tmp_path, run_id):
    assert ingest(write_jsonl(tmp_path / "u.jsonl", run_records(run_id, steps=30))).ok
    page.goto(live_server.url + "/runs")
    page.get_by_role("link", name=run_id, exact=True).click()
    page.wait_for_selector("article.step")
    assert page.locator("h1.run-title").inner_text().endswith(run_id)
    page.locator(".more-steps").scroll_into_view_if_needed()       # lazy steps use the same id
    until(page, "document.querySelectorAll('article.step').length === 30")
    page.locator("#step-0 .field:has(.label:text('thought'))").count()
    assert page.errors == []


def test_a_run_id_typed_with_its_slashes_into_the_address_bar_opens_the_run(live_server, page, ingest, tmp_path):
    # coder_eval's run ids hold slashes ("<stamp>/<variant>/<task>/<NN>"), and pages show them so
    run_id = "2026-11-02_10-15-00/smoke/t03-fix-and-push/00"
    assert ingest(write_jsonl(tmp_path / "s.jsonl", run_records(run_id, steps=3))).ok
    page.goto(f"{live_server.url}/runs/{run_id}")
    page.wait_for_selector("article.step")
    assert page.locator("h1.run-title").inner_text().endswith(run_id)
    assert page.errors == []
    page.goto(f"{live_server.url}/runs/2026-11-02_10-15-00/smoke/t03-fix-and-push/01")
    assert page.locator("#nearest-runs a").first.inner_text() == run_id   # the 404 names the nearest ids


def test_counts_of_one_read_in_the_singular(live_server, page, tmp_path):
    # "1 records", "1 graded pairs", "1 steps" (found by a browser audit)
    recs = []
    for variant in ("smoke", "e2e"):
        recs += [{"type": "run_start", "run_id": f"{variant}-1", "task_id": "t", "experiment": "one", "variant": variant},
                 {"type": "step", "run_id": f"{variant}-1", "step": 0, "actions": [{"name": "ls", "args": {}}]},
                 {"type": "run_end", "run_id": f"{variant}-1", "status": "completed", "verdict": "pass",
                  "stop_reason": "final", "tool_calls": 1}]
    page.goto(live_server.url + "/upload")
    page.set_input_files("#files", files=[{"name": "one.jsonl", "mimeType": "application/x-ndjson",
                                            "buffer": orjson.dumps(recs[0]) + b"\n"}])
    page.get_by_role("button", name="Upload").click()
    page.locator(".upload-result").wait_for()
    assert page.locator(".upload-result h2").first.inner_text() == "Upload read: 1 file, 1 record"
    page.goto(live_server.url + "/upload")
    page.set_input_files("#files", files=[{"name": "all.jsonl", "mimeType": "application/x-ndjson",
                                            "buffer": b"".join(orjson.dumps(r) + b"\n" for r in recs[1:])}])
    page.get_by_role("button", name="Upload").click()
    page.locator(".upload-result").wait_for()
    page.goto(live_server.url + "/compare?experiment=one&a=smoke&b=e2e")
    assert page.locator("section:has(table.confusion) h2 .muted").inner_text().startswith("1 graded pair (1 task)")
    page.goto(live_server.url + "/pair?a=smoke-1&b=e2e-1")
    assert page.locator(".pair-side p.muted").first.inner_text().startswith("1 step · 1 tool call · tokens unknown · ")
    assert page.errors == []


def test_the_icon_a_browser_asks_for_unlinked_is_the_boards(live_server, page):
    # A JSON or Markdown twin links no icon, so a browser asks /favicon.ico (it was a 404).
    response = page.goto(live_server.url + "/favicon.ico")
    assert (response.status, response.headers["content-type"]) == (200, "image/svg+xml")
    assert page.locator("svg rect").get_attribute("fill") == "#0b5cad"  # drawn as the pages' own icon
    assert page.errors == []


def test_a_run_that_ended_without_saying_why_reads_so(live_server, page, ingest, tmp_path):
    assert ingest(write_jsonl(tmp_path / "q.jsonl", run_records("quiet", stop_reason=None)
                              + run_records("said", stop_reason="budget_steps"))).ok
    page.goto(live_server.url + "/runs/quiet")
    assert " ".join(page.locator(".run-head .ended-by").inner_text().split()) == "stop reason not recorded"
    page.goto(live_server.url + "/runs/said")
    assert " ".join(page.locator(".run-head .ended-by").inner_text().split()) == "ended by step budget"
    assert page.errors == []


def test_leaving_the_search_box_adds_no_second_history_entry(live_server, page, ingest, tmp_path):
    # the box's change event on blur sent the same address again: Back stayed on ?q=needle
    assert ingest(write_set(tmp_path / "t")).ok
    page.goto(live_server.url + "/runs")
    page.locator("#q").click()
    page.keyboard.type("needle")
    until(page, "location.search.includes('q=needle')")
    until(page, "document.querySelectorAll('table.runs tbody td.run-id').length === 1")
    entries = page.evaluate("history.length")
    page.keyboard.press("Tab")
    page.wait_for_timeout(800)   # longer than the search's 300 ms pause
    assert page.evaluate("history.length") == entries
    page.go_back()
    until(page, "!location.search.includes('q=')")
    until(page, "document.querySelectorAll('table.runs tbody td.run-id').length === 5")
    assert page.errors == []


def test_paging_by_keyboard_keeps_the_focus_on_the_pager(live_server, page, ingest, tmp_path):
    # Enter on "next →" swapped the table and its pager: the focus fell to <body>
    assert ingest(write_set(tmp_path / "t")).ok
    page.goto(live_server.url + "/runs?sort=run_id&order=asc&limit=2")
    page.locator(".pager a", has_text="next →").focus()
    page.keyboard.press("Enter")
    until(page, "location.search.includes('offset=2')")
    until(page, "document.activeElement && document.activeElement.textContent.trim() === 'next →'")
    page.keyboard.press("Enter")                     # the last page: no "next", "previous" takes it
    until(page, "location.search.includes('offset=4')")
    until(page, "document.activeElement && document.activeElement.textContent.trim() === '← previous'")
    assert [t.strip() for t in page.locator("td.run-id").all_inner_texts()] == ["early-1"]
    assert page.errors == []
