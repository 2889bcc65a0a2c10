"""Tables, charts and identifiers at 390 px (a phone) and 1280 px, light and dark, in real
Chromium: the lab never scrolls the page sideways and its arm controls are on screen; the
runs list shows each run's verdict, steps and tokens in the first screen width; compare's
per-task rows stay a few lines tall; a step's critic reason and score are in full; criterion
ids and types wrap between words, never inside one, and are never cut; the savings chart's
text renders at 12 px or more. Geometry only, never timings."""

from __future__ import annotations

from typing import Any

import pytest

from qita.demo import EXPERIMENT, run_demo
from tests.browser.test_lab_browser import ready
from tests.conftest import write_jsonl

SIZES = [(390, 844), (1280, 800)]
RAN_TESTS = "command_executed: ran the unit tests"
LISTED = "command_executed: listed the workspace"
REASON = "command failed with returncode 1 while running the unit tests"


def long_id_records() -> list[dict[str, Any]]:
    """Three tasks, each run as smoke and e2e, whose criteria have long ids sharing a prefix
    (as coder_eval names them) and whose first step has a critic with a long name and reason."""
    criteria = [{"id": RAN_TESTS, "type": "command_executed", "pattern": "pytest"},
                {"id": LISTED, "type": "command_executed", "pattern": "ls"}]
    recs: list[dict[str, Any]] = []
    for i, verdict in enumerate(("pass", "fail", "pass")):
        for variant in ("smoke", "e2e"):
            rid = f"long-{variant}-{i}"
            recs += [{"type": "run_start", "run_id": rid, "task_id": f"long-task-{i}", "experiment": "long-ids",
                      "variant": variant, "criteria": criteria},
                     {"type": "step", "run_id": rid, "step": 0, "actions": [{"name": "bash", "args": {"command": "ls"}}],
                      "critic_outputs": [{"critic": "ForbiddenCommandCritic", "action": "retry", "reason": REASON,
                                          "score": 0.25}]},
                     {"type": "step", "run_id": rid, "step": 1, "actions": [{"name": "bash", "args": {"command": "pytest"}}]},
                     {"type": "criterion", "run_id": rid, "id": RAN_TESTS, "score": 1.0, "passed": True},
                     {"type": "criterion", "run_id": rid, "id": LISTED, "score": 1.0 if verdict == "pass" else 0.0,
                      "passed": verdict == "pass"},
                     {"type": "run_end", "run_id": rid, "status": "completed", "verdict": verdict}]
    return recs


@pytest.fixture
def board(live_server, ingest, tmp_path):
    """The demo experiment (24 tasks, smoke and e2e) and the long-id experiment, indexed for the lab."""
    assert ingest(*run_demo(tmp_path / "demo", tasks=24), write_jsonl(tmp_path / "long.jsonl", long_id_records())).ok
    for query in (f"experiment={EXPERIMENT}&variant=e2e", "experiment=long-ids&variant=e2e", ""):
        ready(live_server.url, query)
    return live_server.url


@pytest.fixture
def open_page(browser):
    """open_page(width, height, scheme) -> a page that records CSP violations and page errors."""
    contexts = []

    def make(width: int, height: int, scheme: str = "light"):
        context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
        contexts.append(context)
        page = context.new_page()
        page.problems = []  # type: ignore[attr-defined]
        page.on("console", lambda m: page.problems.append(m.text) if "Content Security Policy" in m.text else None)
        page.on("pageerror", lambda exc: page.problems.append(str(exc)))
        return page

    yield make
    for context in contexts:
        context.close()


def page_width(page) -> list[int]:
    return page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")


# Tables wider than their place that are not in a box of their own (they would widen the page).
LOOSE_TABLES = """() => [...document.querySelectorAll('main table')].filter(t => !t.closest('.table-scroll'))
  .filter(t => t.getBoundingClientRect().right > document.documentElement.clientWidth || t.scrollWidth > t.parentElement.clientWidth + 1)
  .map(t => t.id || t.className)"""

# For each element of `selector`, on how many lines each occurrence of `word` is drawn.
WORD_LINES = """([selector, word]) => [...document.querySelectorAll(selector)].flatMap(el => {
  const out = [], walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    for (let i = n.data.indexOf(word); i >= 0; i = n.data.indexOf(word, i + 1)) {
      const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + word.length);
      out.push(new Set([...r.getClientRects()].map(x => Math.round(x.top))).size);
    }
  }
  return out; })"""

# Elements of `selector` whose content is cut: wider than their box, or ending in an ellipsis.
CUT = """(selector) => [...document.querySelectorAll(selector)].filter(el => getComputedStyle(el).display !== 'none')
  .filter(el => el.scrollWidth > el.clientWidth + 1 || (getComputedStyle(el).textOverflow === 'ellipsis' && el.scrollWidth > el.clientWidth))
  .map(el => el.textContent.trim().slice(0, 40))"""


def word_lines(page, selector: str, word: str) -> list[int]:
    return page.evaluate(WORD_LINES, [selector, word])


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_lab_never_scrolls_the_page_at_390_and_its_arm_controls_are_on_screen(board, open_page, scheme):
    page = open_page(390, 844, scheme)
    for url in ("/lab", f"/lab?experiment={EXPERIMENT}&variant=e2e", "/lab?experiment=long-ids&variant=e2e"):
        page.goto(board + url)
        page.locator("svg.frontier-chart").wait_for()
        assert page_width(page) == [390, 390], f"{url} scrolls the page sideways: {page_width(page)}"
        assert page.evaluate(LOOSE_TABLES) == [], url
        for table in ("#savings", "table.lab-pairs", "table.lab-criteria"):
            assert page.locator(table).evaluate("t => !!t.closest('.table-scroll')"), f"{url}: {table}"
        # the policy form's main control: each criterion's arm select, on screen beside its criterion
        arm = page.locator("table.lab-criteria select[name=arm]").first
        arm.scroll_into_view_if_needed()
        box = arm.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, f"{url}: arm select at {box}"
        # the per-run table scrolls in its box with the run column fixed
        scroller = page.locator("table.lab-pairs").locator("xpath=..")
        first = page.locator("table.lab-pairs tbody tr:first-child td:first-child")
        first.scroll_into_view_if_needed()
        before = first.bounding_box()["x"]
        scroller.evaluate("b => { b.scrollLeft = 300 }")
        assert scroller.evaluate("b => b.scrollLeft") > 0
        assert first.bounding_box()["x"] == before
    assert page.problems == []


@pytest.mark.parametrize("width,height", SIZES)
def test_criterion_ids_and_types_wrap_between_words_and_are_never_cut(board, open_page, width, height):
    page = open_page(width, height)
    page.goto(board + "/lab?experiment=long-ids&variant=e2e")
    page.locator("svg.frontier-chart").wait_for()
    ids = ["table.lab-criteria tbody td:first-child", "table.calibration-criterion_id tbody td:first-child"]
    types = ["table.lab-criteria tbody td:nth-child(3)", "table.calibration-type tbody td:first-child",
             "table.calibration-criterion_id tbody td:nth-child(2)"]
    for selector in ids:
        assert page.evaluate(CUT, selector + " .ident") == [], selector
        assert page.locator(selector, has_text=RAN_TESTS).count() == 1, selector       # the whole id, not cut
        assert set(word_lines(page, selector, "command_executed:")) == {1}, selector
    for selector in types:
        assert set(word_lines(page, selector, "command_executed")) == {1}, selector
    # the run page's criteria table and the pair view's
    page.goto(board + "/runs/long-e2e-0")
    assert set(word_lines(page, "table.run-criteria tbody td:nth-child(2)", "command_executed")) == {1}
    assert set(word_lines(page, "table.run-criteria tbody td:first-child", "command_executed:")) == {1}
    page.goto(board + "/pair?a=long-smoke-0&b=long-e2e-0")
    assert page.locator("table.pair-criteria").count() == 2
    assert set(word_lines(page, "table.pair-criteria tbody td:first-child", "command_executed:")) == {1}
    assert set(word_lines(page, "table.pair-criteria tbody td:first-child .muted", "command_executed")) == {1}
    assert page_width(page) == [width, width]
    assert page.problems == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_runs_list_shows_each_runs_verdict_steps_and_tokens_in_the_first_screen(board, open_page, scheme):
    page = open_page(390, 844, scheme)
    page.goto(board + "/runs")
    heads = [page.locator(f"table.runs thead th:nth-child({i})").inner_text().strip() for i in (1, 3, 4, 5)]
    assert heads == ["run", "verdict", "steps", "tokens"]
    rows = page.locator("table.runs tbody tr")
    assert rows.count() >= 20
    for i in range(20):
        row = rows.nth(i)
        for cell in ("td.run-id", "td.verdict-cell", "td:nth-child(4)", "td:nth-child(5)"):
            box = row.locator(cell).bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390, f"row {i}: {cell} off the first screen ({box})"
        assert row.locator("td.run-id").evaluate("td => td.scrollWidth <= td.clientWidth")
    # the sticky run column leaves room for the rest
    assert page.locator("table.runs thead th:first-child").bounding_box()["width"] <= 0.4 * 390
    # nothing cut: numbers, badges (verdict, state, stop reason), ids
    assert page.evaluate(CUT, "table.runs tbody td.num") == []
    assert page.evaluate(CUT, "table.runs tbody td .badge") == []
    assert page.evaluate(CUT, "table.runs tbody td.run-id") == []
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(board + "/runs")
    assert page.evaluate(CUT, "table.runs tbody td.num") == []
    assert page.evaluate(CUT, "table.runs tbody td .badge") == []
    assert page_width(page) == [1280, 1280]
    assert page.problems == []


@pytest.mark.parametrize("width,height", SIZES)
def test_compare_per_task_rows_stay_a_few_lines_tall(board, open_page, width, height):
    page = open_page(width, height)
    page.goto(board + f"/compare?experiment={EXPERIMENT}&a=smoke&b=e2e")
    links = page.locator("table.pairs a.pair-link")
    assert links.count() >= 20
    # "side by side" on one line, its column as wide as the link
    assert set(word_lines(page, "table.pairs td:last-child", "side by side")) == {1}
    heights = page.evaluate("[...document.querySelectorAll('table.pairs tbody tr.pair-row')].map(r => r.getBoundingClientRect().height)")
    assert max(heights) < 120, f"rows up to {max(heights)} px tall at {width} px"
    assert page_width(page) == [width, width]
    assert page.problems == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width,height", SIZES)
def test_a_steps_critic_reason_and_score_are_in_full_view(board, open_page, width, height, scheme):
    page = open_page(width, height, scheme)
    page.goto(board + "/runs/long-e2e-0")
    critic = page.locator("#step-0 section.critic")
    critic.scroll_into_view_if_needed()
    section = critic.bounding_box()
    row = critic.locator("table.critics tbody tr").first
    for cell in ("td:nth-child(1)", "td:nth-child(3)", "td:nth-child(4)"):         # name, reason, score
        box = row.locator(cell).bounding_box()
        assert box["x"] >= section["x"] and box["x"] + box["width"] <= section["x"] + section["width"] + 1, \
            f"{cell} outside the critic section at {width} px: {box} / {section}"
        assert box["x"] + box["width"] <= width
    assert row.locator("td:nth-child(3)").inner_text() == REASON
    assert "0.25" in row.locator("td:nth-child(4)").inner_text()
    assert page.evaluate(CUT, "#step-0 table.critics td") == []
    assert set(word_lines(page, "#step-0 table.critics td:first-child", "ForbiddenCommandCritic")) == {1}
    assert page_width(page) == [width, width]
    assert page.problems == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width,height", SIZES)
def test_the_savings_chart_text_renders_at_12_px_or_more(board, open_page, width, height, scheme):
    page = open_page(width, height, scheme)
    page.goto(board + f"/compare?experiment={EXPERIMENT}&a=smoke&b=e2e")
    chart = page.locator("svg.bars")
    chart.scroll_into_view_if_needed()
    texts = page.evaluate("""() => { const svg = document.querySelector('svg.bars').getBoundingClientRect();
      return [...document.querySelectorAll('svg.bars text')].map(t => { const r = t.getBoundingClientRect();
        return {cls: t.getAttribute('class'), text: t.textContent, px: parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a,
                height: r.height, inside: r.left >= svg.left - 1 && r.right <= svg.right + 1}; }); }""")
    assert {t["cls"] for t in texts} == {"bar-label", "bar-saved", "bar-ci", "bar-value"}
    for t in texts:
        assert t["px"] >= 12 and t["height"] >= 12, f"{t['cls']} {t['text']!r} renders at {t['px']:.1f} px ({t['height']:.1f} tall)"
        assert t["inside"], f"{t['text']!r} runs out of the chart"
    assert page_width(page) == [width, width]
    assert page.problems == []


def test_ungraded_variants_and_long_failure_reasons_read_on_a_phone(live_server, page, ingest, tmp_path):
    # Finished runs without criteria are "not graded", not "no verdict yet"; a failure reason
    # cut with "…" on a phone can be read whole from its title.
    from tests.app.pages_traces import run_records
    from tests.conftest import write_jsonl

    long_id = "command_executed_with_a_name_long_enough_to_be_cut_on_a_phone"
    recs = [r for i in range(2) for r in run_records(f"ng-{i}", experiment="plain", variant="v1")]
    for i in range(2):
        recs += run_records(f"f-{i}", experiment="graded", variant="v", criteria=[{"id": long_id}],
                            results=[{"id": long_id, "score": 0.0, "passed": False}])
    assert ingest(write_jsonl(tmp_path / "p.jsonl", recs)).ok
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url + "/")
    row = page.locator("section[aria-label='Experiment plain'] tr.variant-row[data-variant='v1'] td.pass-rate")
    assert row.inner_text().strip() == "— not graded: none of its runs has a pass, fail or error"
    page.goto(live_server.url + "/runs?experiment=graded")
    reason = page.locator("ol.failures li .clip").first
    assert long_id in reason.get_attribute("title")
    assert reason.get_attribute("title") == reason.text_content()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.errors == []


@pytest.mark.parametrize("width,height", SIZES)
def test_compare_with_long_variant_names_stop_reasons_and_metadata_keys_fits_the_screen(live_server, page, ingest,
                                                                                         tmp_path, width, height):
    # Variant names as teams write them (a model and a setting, 45 characters), a long stop
    # reason and a long metadata key: the confusion matrix, the stop-reason columns and the
    # group-by select each widened the page (1,067 px at 390).
    a, b = "claude-opus-4-1-20250805-baseline-no-critic", "claude-opus-4-1-20250805-with-critic-and-stop"
    reason = "custom_stop_reason_written_by_a_team_without_any_spaces_at_all_in_it"
    recs: list[dict[str, Any]] = []
    for i in range(3):
        for variant, verdict in ((a, "pass"), (b, "fail" if i else "pass")):
            rid = f"{variant}-{i}"
            recs += [{"type": "run_start", "run_id": rid, "task_id": f"t{i}", "experiment": "names",
                      "variant": variant, "metadata": {"a_rather_long_metadata_key_name_for_grouping_runs_by": i}},
                     {"type": "run_end", "run_id": rid, "status": "completed", "stop_reason": reason, "verdict": verdict}]
    assert ingest(write_jsonl(tmp_path / "names.jsonl", recs)).ok
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{live_server.url}/compare?experiment=names&a={a}&b={b}")
    assert page.locator("table.confusion").count() == 1
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # the matrix's cells are on screen, or in a box that scrolls by itself
    cell = page.locator("table.confusion td").last.bounding_box()
    box = page.locator("table.confusion").evaluate("t => t.parentElement.getBoundingClientRect().right")
    assert cell["x"] + cell["width"] <= width or box <= width
    assert page.errors == []


@pytest.mark.parametrize("width", [320, 375])
def test_the_upload_page_fits_small_phones(live_server, page, width):
    # the file picker's label was 7 px wider than a 375 px screen
    page.set_viewport_size({"width": width, "height": 700})
    page.goto(live_server.url + "/upload")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.locator("#files").bounding_box()["x"] + page.locator("#files").bounding_box()["width"] <= width


@pytest.mark.parametrize("width", [320, 390])
def test_the_overview_of_three_variants_with_a_long_name_fits_the_screen(live_server, page, ingest, tmp_path, width):
    # the variant picker's selects were as wide as the longest name (1,036 px page at 390)
    long = "claude-sonnet-4-with-extended-thinking-and-skills-enabled-max-turns-50-temperature-0.7-retry-3"
    recs: list[dict[str, Any]] = []
    for variant in ("smoke", "e2e", long):
        recs += [{"type": "run_start", "run_id": f"{variant}-0", "task_id": "t0", "experiment": "three",
                  "variant": variant},
                 {"type": "run_end", "run_id": f"{variant}-0", "status": "completed", "stop_reason": "final",
                  "verdict": "pass"}]
    assert ingest(write_jsonl(tmp_path / "three.jsonl", recs)).ok
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(live_server.url + "/")
    pick = page.locator("form.compare-pick")
    assert pick.count() == 1
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for select in ("select[name=a]", "select[name=b]"):
        box = pick.locator(select).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
    pick.locator("select[name=b]").select_option(long)
    pick.get_by_role("button", name="Compare").click()
    page.wait_for_url("**/compare?**")
    assert page.evaluate("new URL(location.href).searchParams.get('b')") == long
    assert page.errors == []


def test_figures_of_any_size_fit_the_run_page_and_a_negative_limit_draws_no_bar(live_server, page, ingest, tmp_path):
    # 1e308 written out in full widened the run page to 2,957 px at 1280, and a budget of
    # -5 steps drew "3 of -5" with a full bar (browser audit)
    recs = [{"type": "run_start", "run_id": "huge", "task_id": "t", "budget": {"max_steps": -5,
                                                                            "max_runtime_seconds": 1e308}},
            {"type": "step", "run_id": "huge", "step": 0, "cost_usd": 1e308, "duration_s": 1e308,
             "critic_outputs": [{"critic": "c", "action": "continue", "score": 1e308}]},
            {"type": "run_end", "run_id": "huge", "status": "completed", "stop_reason": "final", "cost_usd": 1e308,
             "elapsed_s": 1e308, "steps": 3}]
    assert ingest(write_jsonl(tmp_path / "huge.jsonl", recs)).ok
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(live_server.url + "/runs/huge")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    head = page.locator(".run-head").inner_text()
    assert "$1.0e+308" in head and "2.8e+304 h" in head
    steps = page.locator(".run-head .gauge", has_text="steps")
    assert steps.locator(".gauge-track").count() == 0 and "(no limit)" in steps.inner_text()
    assert page.errors == []


@pytest.mark.parametrize("width,height", SIZES)
def test_compare_with_a_long_unbroken_experiment_name_fits_the_screen(live_server, page, ingest, tmp_path,
                                                                       width, height):
    # An experiment named as a tool may name it (a path with underscores, no space in 150
    # characters): the chooser's "Choose two groups: variant smoke of experiment …" line
    # widened the page past 390 px and past 1280 px.
    name = "nightly_" + "x" * 60 + "_coder_eval_results_" + "y" * 60
    recs: list[dict[str, Any]] = []
    for i in range(2):
        for variant, verdict in (("smoke", "pass"), ("e2e", "fail" if i else "pass")):
            rid = f"{variant}-{i}"
            recs += [{"type": "run_start", "run_id": rid, "task_id": f"t{i}", "experiment": name, "variant": variant},
                     {"type": "run_end", "run_id": rid, "status": "completed", "verdict": verdict}]
    assert ingest(write_jsonl(tmp_path / "long-name.jsonl", recs)).ok
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{live_server.url}/compare?experiment={name}&a=smoke&b=e2e")
    assert name in page.locator("details.compare-chooser summary").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.locator("details.compare-chooser summary").click()   # open, its forms fit too
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # and every other page that names the experiment
    for path in (f"/lab?experiment={name}&variant=e2e", "/", f"/runs?experiment={name}",
                 "/pair?a=smoke-1&b=e2e-1", "/runs/smoke-1"):
        page.goto(live_server.url + path)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, path
    assert page.errors == []


def test_a_run_page_and_its_compare_with_form_fit_a_320_px_screen(live_server, page, ingest, tmp_path):
    # the "compare with…" run id box is 40 characters wide: every run page was 343 px at 320
    recs = [{"type": "run_start", "run_id": "lone", "task_id": "t"},
            {"type": "step", "run_id": "lone", "step": 0, "thought": "look around"},
            {"type": "run_end", "run_id": "lone", "status": "completed", "stop_reason": "final"}]
    assert ingest(write_jsonl(tmp_path / "lone.jsonl", recs)).ok
    page.set_viewport_size({"width": 320, "height": 700})
    for path in ("/runs/lone", "/pair?a=lone"):   # the pair page without a twin asks for the other run
        page.goto(live_server.url + path)
        box = page.locator("form.compare-with input[name=b]").bounding_box()
        assert box["x"] + box["width"] <= 320, path
        assert page.evaluate("document.documentElement.scrollWidth") <= 320, path


def test_the_pair_page_wraps_a_long_deciding_criterion_at_390(live_server, ingest, tmp_path, open_page):
    # "stopped at step 0: … (deciding criterion …)" and "Why smoke stopped …" did not wrap: a
    # 650 px page (found by a browser audit)
    long_id = "file_contains:src/services/authentication/middleware/token_refresh_handler.py"
    recs: list[dict[str, Any]] = []
    for variant in ("smoke", "e2e"):
        rid = f"ovf-{variant}"
        recs += [{"type": "run_start", "run_id": rid, "task_id": "ovf", "experiment": "ovf", "variant": variant,
                  "criteria": [{"id": long_id, "type": "file_contains", "stop_when": "pass"}],
                  "early_stop": {"enabled": variant == "smoke"}},
                 {"type": "step", "run_id": rid, "step": 0, "actions": [{"name": "bash", "args": {"command": "ls"}}]},
                 {"type": "criterion", "run_id": rid, "id": long_id, "score": 1.0, "passed": True}]
        if variant == "smoke":
            recs.append({"type": "early_stop", "run_id": rid, "reason": "criterion_passed", "deciding_criterion": long_id,
                         "armed_criteria": [long_id], "step": 0, "tool_call_index": 1, "elapsed_s": 1.0,
                         "turns_remaining": 3})
        recs.append({"type": "run_end", "run_id": rid, "status": "completed",
                     "stop_reason": "early_stop" if variant == "smoke" else "final"})
    assert ingest(write_jsonl(tmp_path / "ovf.jsonl", recs)).ok
    page = open_page(390, 844)
    page.goto(live_server.url + "/pair?a=ovf-smoke&b=ovf-e2e")
    assert long_id in page.locator(".early-note").first.inner_text()
    assert long_id in page.locator(".deciding-panel").inner_text()
    assert page_width(page) == [390, 390], page_width(page)
    assert page.problems == []
