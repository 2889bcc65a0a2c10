"""Daily use in real Chromium: every page at 390 px (a phone) and 1280 px, light and dark, with
no sideways page scroll and its key values in view; steps that land below the sticky bar; the
step filter and n / p; the skip link past the lane; the experiments overview; delete and the
replacement warning."""

from __future__ import annotations

import orjson
import pytest

from tests.app.pages_traces import run_records, write_set
from tests.app.test_walk import walk_records
from tests.browser.test_pages_browser import until
from tests.conftest import write_jsonl

SIZES = [(390, 844), (1280, 900)]
RETRIES = (100, 150, 250)


def long_run(run_id: str = "long-1", steps: int = 300) -> list[dict]:
    """A 300-step run whose critics say retry at steps 100, 150 and 250 only."""
    outs = [[{"critic": "rc", "action": "retry" if i in RETRIES else "continue",
              "reason": f"returncode 1 at {i}" if i in RETRIES else "fine", "score": 0.1 if i in RETRIES else 0.9}]
            for i in range(steps)]
    return run_records(run_id, steps=steps, experiment="exp", variant="smoke", critic_outputs=outs)


@pytest.fixture
def board(live_server, ingest, tmp_path, page):
    """The crafted five runs (two variants of `exp`, run a with an e2e twin), the walk run and
    a 300-step run; one more run uploaded through the API so /uploads has an entry."""
    twin = run_records("a-e2e", experiment="exp", variant="e2e", criteria=[{"id": "c"}],
                       results=[{"id": "c", "score": 1.0, "passed": True}], second=7)
    twin[0]["task_id"] = "task-a"                                            # run a's e2e twin
    assert ingest(write_set(tmp_path / "set"), write_jsonl(tmp_path / "w.jsonl", walk_records()),
                  write_jsonl(tmp_path / "l.jsonl", long_run()), write_jsonl(tmp_path / "t.jsonl", twin)).ok
    body = b"".join(orjson.dumps(r) + b"\n" for r in run_records("uploaded-1", experiment="exp", variant="e2e"))
    r = page.request.post(live_server.url + "/api/traces?wait=true", multipart={
        "files": {"name": "up.jsonl", "mimeType": "application/x-ndjson", "buffer": body}})
    assert r.ok
    return {"upload_id": r.json()["upload_id"], "job": r.json()["job"]}


def _pages(board) -> list[tuple[str, list[str]]]:
    """Every page, with what must be in view on it."""
    up = board["upload_id"]
    return [
        ("/", ["h1", ".experiment .compare-link", ".experiment .headline-small", ".variants th[scope=row] a"]),
        ("/runs", ["#q", ".stats", "table.runs tbody tr:first-child td.run-id a"]),
        ("/runs/early-1", ["h1.run-title", ".run-head .verdict", ".run-head .ended-by", ".early-panel"]),
        ("/runs/walk%2F1", ["h1.run-title", ".failed-on, .run-head .verdict", ".lane-panel"]),
        ("/runs/long-1?from=150", ["#step-150 .step-head", "#step-150 .step-why"]),
        ("/runs/long-1/steps?offset=0&limit=5", ["#step-0 .step-head"]),
        ("/runs/early-1/steps/0/field?path=/decision", ["h1", ".long-full"]),
        ("/runs/walk%2F1/steps/4/events", ["h1", "ol.timeline li"]),
        ("/runs/early-1/delete", ["h1", "#confirm-delete", "#row-counts"]),
        ("/compare", ["#headline", ".confusion", "table.pairs tbody tr:first-child td:first-child"]),
        ("/pair?a=a", [".pair-grid", "table.pair-steps"]),
        ("/upload", ["#drop-zone", "#upload-button"]),
        ("/uploads", ["table.uploads tbody tr:first-child td:first-child a"]),
        (f"/uploads/{up}", ["h1", ".danger-link"]),
        (f"/uploads/{up}/delete", ["h1", "#confirm-delete"]),
        (f"/upload/jobs/{board['job']}", [".upload-result"]),
        (f"/jobs/{board['job']}", [".job, main"]),
        ("/runs/early-1/field?path=/criteria/smoke", ["h1", ".long-full"]),
        ("/login", ["h1", "#token"]),
        ("/runs/no-such-run", [".error-message", "#experiments-list"]),
        ("/compare?experiment=exp&a=smoke&b=nosuch", [".error-message", "#valid-variants"]),
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width,height", SIZES)
def test_every_page_fits_the_screen_with_its_key_values_in_view(board, browser, live_server, width, height, scheme):
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        for url, selectors in _pages(board):
            page.goto(live_server.url + url)
            sizes = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            assert sizes[0] <= sizes[1] == width, f"{url} scrolls sideways at {width} px ({scheme}): {sizes}"
            for sel in selectors:
                el = page.locator(sel).first
                el.scroll_into_view_if_needed()
                box = el.bounding_box()
                assert el.is_visible() and box, f"{url}: {sel} not visible at {width} px"
                assert box["x"] >= 0 and box["x"] + min(box["width"], 40) <= width, f"{url}: {sel} off screen at {width} px"
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert (background == "rgb(15, 18, 22)") == (scheme == "dark"), f"{url}: {background} in {scheme}"
        assert errors == []
    finally:
        context.close()


def test_narrow_tables_scroll_in_their_box_with_the_first_column_fixed(board, browser, live_server):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        page.goto(live_server.url + "/runs")
        box = page.locator(".table-scroll").first
        assert box.evaluate("b => b.scrollWidth > b.clientWidth")            # the table is wider than the phone
        # headers do not overlap each other
        heads = [page.locator(f"table.runs thead th:nth-child({i})").bounding_box() for i in (1, 3, 4, 5)]
        for left, right in zip(heads, heads[1:]):
            assert left["x"] + left["width"] <= right["x"] + 1
        first = page.locator("table.runs tbody tr:first-child td.run-id")
        before = first.bounding_box()["x"]
        box.evaluate("b => { b.scrollLeft = 300 }")
        page.wait_for_timeout(100)
        assert first.bounding_box()["x"] == before                            # the run column stays
    finally:
        context.close()


def _bar_bottom(page) -> float:
    return page.evaluate("document.querySelector('.topbar').getBoundingClientRect().bottom")


def _head_top(page, step: int) -> float:
    return page.evaluate(f"document.querySelector('#step-{step} .step-head').getBoundingClientRect().top")


@pytest.mark.parametrize("width,height", SIZES)
def test_a_step_jumped_to_lands_below_the_sticky_bar(board, browser, live_server, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        page.goto(live_server.url + "/runs/long-1?from=100#step-105")        # a link to a step
        until(page, "!!document.querySelector('#step-105.current')")
        assert _head_top(page, 105) >= _bar_bottom(page)
        page.keyboard.press("j")                                               # the keys
        until(page, "!!document.querySelector('#step-106.current')")
        assert _bar_bottom(page) <= _head_top(page, 106) < height
        page.goto(live_server.url + "/runs/early-1")
        page.locator("a.mark.mark-stop").click()                              # a lane mark
        until(page, "!!document.querySelector('#step-2.current')")
        assert _head_top(page, 2) >= _bar_bottom(page)
        assert page.locator("#step-2 details.step-fold").get_attribute("open") is not None
    finally:
        context.close()


def _current(page) -> str:
    return page.evaluate("(document.querySelector('article.step.current') || {id: ''}).id")


def test_n_and_p_walk_the_steps_worth_a_look_and_the_filter_shows_only_them(board, page, live_server):
    page.goto(live_server.url + "/runs/walk%2F1")
    assert page.locator("#steps-section").get_attribute("data-flagged") == "1 2 3 4"
    for expected in ("step-1", "step-2", "step-3", "step-4", "step-4"):    # the last one stays
        page.keyboard.press("n")
        until(page, f"(document.querySelector('article.step.current') || {{}}).id === '{expected}'")
    page.keyboard.press("p")
    until(page, "document.querySelector('article.step.current').id === 'step-3'")
    # walking opened each step in place and folded the one left behind
    assert page.locator("#step-3 details.step-fold").get_attribute("open") is not None
    assert page.locator("#step-4 details.step-fold").get_attribute("open") is None
    # the filter: only the steps where a critic said retry or stop
    page.get_by_label("a critic said retry or stop").check()
    page.wait_for_url("**only=critic**")
    assert [a.get_attribute("id") for a in page.locator("article.step").all()] == ["step-1", "step-3"]
    assert "(2 of 6)" in page.locator("#steps-count").inner_text()
    page.keyboard.press("n")
    until(page, "(document.querySelector('article.step.current') || {}).id === 'step-1'")
    page.keyboard.press("n")
    until(page, "(document.querySelector('article.step.current') || {}).id === 'step-3'")
    # Back: all six steps again, and the box unticked as the address says (Chrome ticked it
    # again from what was picked before the filter was sent)
    page.go_back()
    until(page, "!location.search.includes('only=')")
    assert page.locator("article.step").count() == 6
    assert not page.get_by_label("a critic said retry or stop").is_checked()
    assert page.errors == []


def test_the_step_filter_by_keyboard_keeps_its_focus_on_the_box(board, page, live_server):
    # Space ticks a box and the page loads filtered: the focus fell to the top of the page,
    # so the next Space scrolled it instead of ticking the box off again.
    page.goto(live_server.url + "/runs/walk%2F1")
    box = page.get_by_label("a critic said retry or stop")
    box.focus()
    page.keyboard.press("Space")
    page.wait_for_url("**only=critic**")
    until(page, "document.activeElement && document.activeElement.value === 'critic'")
    assert [a.get_attribute("id") for a in page.locator("article.step").all()] == ["step-1", "step-3"]
    page.keyboard.press("n")  # a ticked box types nothing: n still walks
    until(page, "(document.querySelector('article.step.current') || {}).id === 'step-1'")
    page.get_by_label("a critic said retry or stop").focus()
    page.keyboard.press("Space")  # and off again
    until(page, "!location.search.includes('only=')")
    until(page, "document.querySelectorAll('article.step').length === 6")
    until(page, "document.activeElement && document.activeElement.value === 'critic' && !document.activeElement.checked")
    assert page.errors == []


@pytest.mark.parametrize("width,height", SIZES)
def test_a_300_step_run_jumps_straight_to_its_retries(board, browser, live_server, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        page.goto(live_server.url + "/runs/long-1")
        # folded: the first step in full, the next ones one line each
        assert page.locator("article.step details.step-fold[open]").count() == 1
        line = page.locator("#step-5 .step-head").bounding_box()["height"]
        assert line < (80 if width < 500 else 40)
        with page.expect_navigation():
            page.keyboard.press("n")                        # step 100 is not loaded yet: the page opens there
        assert page.url.endswith("?from=100#step-100")
        until(page, "!!document.querySelector('#step-100.current')")
        assert _head_top(page, 100) >= _bar_bottom(page)
        assert "returncode 1 at 100" in page.locator("#step-100 .step-why").inner_text()
        with page.expect_navigation():
            page.keyboard.press("n")
        assert page.url.endswith("?from=150#step-150")
        until(page, "!!document.querySelector('#step-150.current')")
        with page.expect_navigation():
            page.keyboard.press("p")
        until(page, "!!document.querySelector('#step-100.current')")
    finally:
        context.close()


def test_the_skip_link_passes_the_lane_in_one_key(board, page, live_server):
    page.goto(live_server.url + "/runs/long-1")
    assert page.locator(".lane a.mark").count() == 300
    skip = page.locator(".skip-lane")
    assert skip.bounding_box()["width"] <= 1                                 # out of sight until reached
    # the element just before the lane in tab order, then one Tab: the skip link
    page.evaluate("""() => { const all = [...document.querySelectorAll('a[href], button, input, select, [tabindex]')]
        .filter(e => e.tabIndex >= 0 && !e.disabled && e.offsetParent !== null);
        const i = all.indexOf(document.querySelector('.skip-lane')); all[i - 1].focus(); }""")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-lane"
    assert skip.bounding_box()["width"] > 50 and "300 marks" in skip.inner_text()
    page.keyboard.press("Enter")
    until(page, "document.activeElement.id === 'steps-section'")
    page.keyboard.press("Tab")
    assert page.evaluate("!document.activeElement.closest('.lane')")          # past the 300 marks
    assert _head_top(page, 0) > 0
    assert page.errors == []


def test_overview_leads_to_the_comparison(board, browser, live_server):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        page.goto(live_server.url + "/")
        exp = page.locator(".experiment", has=page.locator("h2 a", has_text="exp"))
        headline = exp.locator(".headline-small").inner_text()
        assert headline.startswith("Verdicts identical on")
        rows = {r.get_attribute("data-variant"): r.inner_text() for r in exp.locator("tr.variant-row").all()}
        # smoke: a and early-1 pass, c fails, d is not graded, long-1 and walk/1 have no criteria
        assert "67%" in rows["smoke"] and "2 · 1 · 0" in rows["smoke"]
        exp.locator(".compare-link").click()
        page.wait_for_url("**/compare?experiment=exp&a=smoke&b=e2e")
        assert page.locator("#headline").inner_text() == headline
        page.locator("nav a", has_text="Runs").click()
        page.wait_for_url("**/runs")
    finally:
        context.close()


def test_delete_a_wrongly_uploaded_run_from_its_page(board, browser, live_server):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        page.goto(live_server.url + "/runs/uploaded-1")
        assert page.locator(".from-upload").inner_text() == f"from upload #{board['upload_id']}"
        page.locator(".delete-link").click()
        page.wait_for_url("**/runs/uploaded-1/delete")
        assert "steps 2" in page.locator("#row-counts").inner_text()
        # each run's cells are read in full on the phone: the task was cut to a letter a line
        # and the steps column was off-screen, in a table that scrolled sideways
        cells = page.locator("table.delete-runs tbody tr").first.locator("td")
        assert cells.all_inner_texts() == ["uploaded-1", "exp / e2e", "task-uploaded-1", "2"]
        labels = cells.evaluate_all("tds => tds.map(td => getComputedStyle(td, '::before').content)")
        assert labels == ["none", '"experiment / variant: "', '"task: "', '"steps: "']
        for i in range(4):
            box = cells.nth(i).bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["height"] < 30
        page.locator("#confirm-delete").click()
        page.locator("#delete-done").wait_for()
        assert "Removed 1 run" in page.locator("#delete-done").inner_text()
        assert page.goto(live_server.url + "/runs/uploaded-1").status == 404
        assert page.goto(live_server.url + "/runs/a").status == 200                     # the others stay
    finally:
        context.close()


def test_the_upload_result_warns_of_a_run_taking_anothers_place(board, page, live_server):
    recs = run_records("a-again", experiment="exp", variant="smoke", second=30)
    recs[0]["task_id"] = "task-a"                                            # the task of run a, later
    page.goto(live_server.url + "/upload")
    page.set_input_files("#files", files=[{"name": "again.jsonl", "mimeType": "application/x-ndjson",
                                            "buffer": b"".join(orjson.dumps(r) + b"\n" for r in recs)}])
    page.get_by_role("button", name="Upload").click()
    warning = page.locator("#upload-replacements")
    warning.wait_for()
    text = warning.inner_text()
    assert "a-again takes the place of a" in text and "exp / smoke" in text
    assert page.errors == []


def test_a_failed_runs_header_reads_in_dark_at_390(board, browser, live_server):
    context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark")
    page = context.new_page()
    try:
        page.goto(live_server.url + "/runs/c")
        badges = page.locator(".run-head .badges").inner_text()
        assert badges.index("fail") < badges.index("ended by")
        # the stop reason in the neutral colour (--neutral-bg), the verdict in the failing one (--bad-bg)
        stop = page.locator(".run-head .ended-by .badge")
        assert stop.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(35, 42, 51)"
        verdict = page.locator(".run-head .badges .verdict")
        assert verdict.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(59, 21, 18)"
    finally:
        context.close()


def _box(page, selector: str) -> dict:
    return page.evaluate(f"(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect();"
                         " return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, height: r.height}; })()")


def _csp_watch(page) -> list[str]:
    seen: list[str] = []
    page.on("console", lambda m: seen.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda exc: seen.append(str(exc)))
    return seen


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_previous_and_next_buttons_walk_a_300_step_run_by_touch_and_keyboard(board, browser, live_server, scheme):
    """On a phone the buttons beside the walk filter do what n / p do: the retries of a
    300-step run (100, 150, 250), opening the run from a step not loaded yet."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, color_scheme=scheme)
    page = context.new_page()
    problems = _csp_watch(page)
    try:
        page.goto(live_server.url + "/runs/long-1")
        nav = page.locator("#walk-nav")
        prev = nav.get_by_role("button", name="previous step worth a look")
        nxt = nav.get_by_role("button", name="next step worth a look")
        assert nav.is_visible() and prev.is_visible() and nxt.is_visible()
        assert prev.inner_text() == "‹ previous" and nxt.inner_text() == "next ›"
        assert "3 steps worth a look" in nav.inner_text()
        # next to the walk filter, on the screen, big enough for a thumb
        form, bar = _box(page, "form.step-filter"), _box(page, "#walk-nav")
        assert 0 <= bar["top"] - form["bottom"] < 24
        for button in (prev, nxt):
            box = button.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["height"] >= 40
        with page.expect_navigation():
            nxt.tap()                                            # step 100 is not loaded: the run opens there
        assert page.url.endswith("?from=100#step-100")
        until(page, "!!document.querySelector('#step-100.current')")
        assert "returncode 1 at 100" in page.locator("#step-100 .step-why").inner_text()
        # the buttons stay in view under the top bar, the step lands below both
        top, bar = _bar_bottom(page), _box(page, "#walk-nav")
        assert top - 1 <= bar["top"] and bar["bottom"] <= 844
        assert _head_top(page, 100) >= bar["bottom"]
        # the keyboard: the button pressed has the focus again, Enter presses it
        until(page, "document.activeElement === document.querySelector('#walk-nav .walk-next')")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert page.url.endswith("?from=150#step-150")
        until(page, "!!document.querySelector('#step-150.current')")
        with page.expect_navigation():
            page.locator("#walk-nav .walk-prev").tap()
        assert page.url.endswith("?from=100#step-100")
        until(page, "!!document.querySelector('#step-100.current')")
        # nothing worth a look before step 100: previous stays there
        page.locator("#walk-nav .walk-prev").tap()
        assert _current(page) == "step-100" and page.url.endswith("?from=100#step-100")

        # filtered to the critics' retries, every one is loaded: the buttons walk in place
        page.goto(live_server.url + "/runs/long-1?only=critic")
        assert [a.get_attribute("id") for a in page.locator("article.step").all()] == ["step-100", "step-150", "step-250"]
        for expected in ("step-100", "step-150", "step-250", "step-250"):
            page.locator("#walk-nav .walk-next").tap()
            until(page, f"(document.querySelector('article.step.current') || {{}}).id === '{expected}'")
        bar = _box(page, "#walk-nav")
        assert bar["top"] >= _bar_bottom(page) - 1 and bar["bottom"] <= 844
        page.locator("#walk-nav .walk-prev").focus()
        page.keyboard.press("Enter")
        until(page, "(document.querySelector('article.step.current') || {}).id === 'step-150'")
        assert page.evaluate("document.activeElement.className") == "walk-prev"
        assert problems == []
    finally:
        context.close()


@pytest.mark.parametrize("width,height", SIZES)
def test_a_run_opened_past_its_last_step_shows_its_notice_on_load(board, browser, live_server, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    problems = _csp_watch(page)
    try:
        for url in ("/runs/long-1?from=9999", "/runs/long-1?from=9999#step-9999", "/runs/long-1?from=9999&only=critic",
                    "/runs/early-1?from=9999"):
            page.goto(live_server.url + url)
            notice = page.locator("#steps-notice")
            assert "there is no step 9999 or later" in notice.inner_text(), url
            box = _box(page, "#steps-notice")
            # below the sticky bars (the top bar, and the previous / next bar when it is stuck under it)
            covered = page.evaluate("""Math.max(document.querySelector('.topbar').getBoundingClientRect().bottom,
                ...[...document.querySelectorAll('#walk-nav')].map(n => n.getBoundingClientRect().bottom))""")
            assert box["top"] >= covered - 1, f"{url}: the notice is under the sticky bars ({box['top']} < {covered})"
            assert box["bottom"] <= height, f"{url}: the notice is below the fold at {width} px ({box})"
        assert problems == []
    finally:
        context.close()


def test_a_delete_page_left_open_refuses_to_delete_the_newer_upload_that_took_its_number(live_server, page):
    import httpx

    def upload(name: str, run_id: str) -> int:
        body = b"".join(orjson.dumps(r) + b"\n" for r in run_records(run_id))
        r = httpx.post(live_server.url + "/api/traces", params={"wait": "true"}, files=[("files", (name, body))],
                       headers={"Origin": live_server.url}, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()["upload_id"]

    uid = upload("first.jsonl", "first-run")
    page.goto(f"{live_server.url}/uploads/{uid}/delete")
    assert page.locator("#confirm-delete").inner_text() == f"Delete upload #{uid} (1 run)"
    # meanwhile, in another tab: that upload is deleted and a new one gets its number
    assert httpx.delete(f"{live_server.url}/api/uploads/{uid}", headers={"Origin": live_server.url}).status_code == 200
    assert upload("innocent.jsonl", "innocent-run") == uid
    page.locator("#confirm-delete").click()
    page.wait_for_load_state()
    assert "is not the upload the delete page showed" in page.locator("main").inner_text()
    assert httpx.get(f"{live_server.url}/api/runs/innocent-run").status_code == 200


@pytest.mark.parametrize("run_id", ["new\nline", "carriage\r\nreturn"])
def test_a_run_whose_id_holds_a_line_break_is_deleted_from_its_page(live_server, page, ingest, tmp_path, run_id):
    # The browser sends the confirmation's line breaks as CRLF (form data newline
    # normalization): the board refused it as an id that does not match, and the run stayed.
    from qita_board.urls import encode_run_id
    from tests.conftest import write_jsonl

    assert ingest(write_jsonl(tmp_path / "nl.jsonl", run_records(run_id) + run_records("other"))).ok
    url = live_server.url + "/runs/" + encode_run_id(run_id)
    page.goto(url + "/delete")
    page.locator("#confirm-delete").click()
    page.locator("#delete-done").wait_for()
    assert "Removed 1 run" in page.locator("#delete-done").inner_text()
    assert page.goto(url).status == 404
    assert page.goto(live_server.url + "/runs/other").status == 200


def test_back_after_a_delete_shows_the_run_gone_not_the_page_as_it_was(board, page, live_server):
    # Chromium kept the run page (back-forward cache, then its HTTP cache) and Back showed the
    # deleted run with its steps as if nothing had happened (seen in an audit).
    page.goto(live_server.url + "/runs/uploaded-1")
    assert page.locator(".from-upload").is_visible()
    page.locator(".delete-link").click()
    page.wait_for_url("**/runs/uploaded-1/delete")
    page.locator("#confirm-delete").click()
    page.locator("#delete-done").wait_for()
    response = page.go_back()
    while page.url != live_server.url + "/runs/uploaded-1":     # past the delete page's own entries
        response = page.go_back()
    assert response is not None and response.status == 404
    assert page.locator(".from-upload").count() == 0
    assert "uploaded-1" in page.locator("main").inner_text()
