"""Hostile traces on compare (with a filled pairs table), pair, upload results and
warnings, the login page's errors, exports and JSON twins, in real Chromium. The detection
is the same as in test_hostile_pages_browser.py.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import httpx
import pytest

from qita_board.paths import TEMPLATES
from qita_board.urls import encode_run_id
from tests.browser.test_hostile_pages_browser import PAYLOADS, SERVER_PATH, Visitor, hostile, hostile_trace, visitor  # noqa: F401  # noqa: F401  (fixtures)
from tests.conftest import write_jsonl

#: One experiment, two variants, a task per payload in each: so the compare table has rows.
EXPERIMENT = PAYLOADS[0] + "#pairs"
VARIANT_A, VARIANT_B = PAYLOADS[1] + "#va", PAYLOADS[4] + "#vb"


def fetch(url: str) -> httpx.Response:
    """GET `url`; the route must exist (a 404 "no such page" fails the test, never skips it)."""
    r = httpx.get(url, timeout=30)
    assert not (r.status_code == 404 and "no such page" in r.text), f"no route for {url}"
    return r


def _paired_records() -> list[dict]:
    records: list[dict] = []
    for i, p in enumerate(PAYLOADS):
        for variant, verdict, steps in ((VARIANT_A, "pass" if i % 2 else "fail", 2), (VARIANT_B, "pass", 4)):
            rid = f"{p}#{variant[-2:]}"
            records.append({"type": "run_start", "run_id": rid, "ts": "2025-01-01T00:00:00Z", "task_id": p,
                            "experiment": EXPERIMENT, "variant": variant, "replicate": 0, "objective": p,
                            "tags": [p]})
            for n in range(steps):
                records.append({"type": "step", "run_id": rid, "step": n, "observation": p,
                                "critic_outputs": [{"critic": p, "action": "continue", "reason": p, "score": 0.5}],
                                "tokens": {"input": 1, "output": 1, "total": 2}})
            records.append({"type": "run_end", "run_id": rid, "ts": "2025-01-01T00:00:09Z", "status": "completed",
                            "stop_reason": f"{p}#stop", "stop_detail": p, "final_result": p, "verdict": verdict,
                            "elapsed_s": 1.5})
    return records


@pytest.fixture
def hostile_pairs(ingest, tmp_path):
    """Runs with payloads in task ids, variants, experiment and stop reasons, paired across two variants."""
    report = ingest(write_jsonl(tmp_path / "pairs.jsonl", _paired_records()))
    assert report.ok, [str(e) for e in report.errors]


def test_compare_table_and_its_pair_links_run_no_script(hostile_pairs, live_server, visitor):
    base = live_server.url
    fetch(base + "/compare")
    query = f"experiment={quote(EXPERIMENT, safe='')}&a={quote(VARIANT_A, safe='')}&b={quote(VARIANT_B, safe='')}"
    visitor.visit(f"{base}/compare?{query}", "compare table", expand=True)
    own_charts = visitor.page.locator("svg.bars").count()  # the board's own svg, which the detector must let be
    rows = visitor.page.locator("table.pairs tbody tr.pair-row").count()
    table_text = visitor.page.locator("table.pairs").inner_text()
    links = visitor.page.locator("a.pair-link").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    for sort in ("savings", "disagreement"):
        visitor.visit(f"{base}/compare?{query}&sort={sort}", f"compare sorted by {sort}", expand=True)
    visitor.visit(f"{base}/compare?{query}&only=disagree", "compare disagreements only", expand=True)
    # The table as htmx loads it (a fragment), opened as a document of its own.
    visitor.page.set_extra_http_headers({"HX-Request": "true"})
    visitor.visit(f"{base}/compare?{query}&sort=savings", "compare table fragment")
    visitor.page.set_extra_http_headers({})
    for href in links:
        visitor.visit(base + href, f"pair from the table {href}", expand=True)
    assert visitor.dialogs == []
    assert visitor.problems == []
    assert own_charts == 1
    assert rows == len(links) == len(PAYLOADS)  # every payload task is paired and listed
    assert all(p.strip() in table_text for p in PAYLOADS[:8])  # as text


def test_login_page_errors_run_no_script(live_server, visitor):
    base = live_server.url
    for p in PAYLOADS:
        visitor.visit(f"{base}/login?next={quote('/' + p, safe='')}", f"login next={p!r}")
        visitor.page.fill("#token", p)
        visitor.page.locator("form.login-form button[type=submit]").click()
        visitor.page.wait_for_load_state("networkidle")
        assert visitor.page.locator(".error-message").count() == 1  # this board has no token: an error, as text
        visitor.check(f"login error next={p!r}")
    assert visitor.dialogs == []
    assert visitor.problems == []


def test_no_template_embeds_json_in_a_script_or_attribute():
    # JSON inside HTML (<script type="application/json">, |tojson, data-*='{...}') would need
    # escaping against </script>, <!-- and U+2028/U+2029; none exists, and any new one must
    # come with that escaping and a hostile test. The static htmx-config meta is no trace data.
    json_in_attribute = re.compile(r"""=\s*["'][^"'>]*\{\{[^}]*\|\s*(?:json|tojson)""")
    for path in sorted(TEMPLATES.glob("*.html")):
        text = path.read_text(encoding="utf-8")
        assert "application/json" not in text and "tojson" not in text, path.name
        assert not json_in_attribute.search(text), path.name


def test_json_twins_are_never_html(hostile, live_server):
    # Payloads (incl. U+2028, </script>) in JSON twins: served as JSON with nosniff, never rendered as a page.
    base = live_server.url
    for url in [f"{base}/api/runs/{encode_run_id(PAYLOADS[2])}", f"{base}/runs/{encode_run_id(PAYLOADS[8])}?format=json",
                f"{base}/api/pair?a={quote(PAYLOADS[0], safe='')}&b={quote(PAYLOADS[8], safe='')}",
                f"{base}/compare?format=json"]:
        r = httpx.get(url, timeout=30)
        assert r.status_code == 200, url
        assert r.headers["content-type"].startswith("application/json") and r.headers["x-content-type-options"] == "nosniff"
        assert "<html" not in r.text


def test_compare_page_runs_no_script(hostile, live_server, visitor):
    base = live_server.url
    fetch(base + "/compare")
    visitor.visit(base + "/compare", "compare", expand=True)
    p = PAYLOADS[1]
    visitor.visit(f"{base}/compare?experiment={quote(p + '#exp')}", "compare with experiment", expand=True)
    visitor.visit(f"{base}/compare?experiment={quote(p + '#exp')}&a={quote(p + '#var')}&b={quote(PAYLOADS[0] + '#var')}",
                  "compare variants", expand=True)
    assert visitor.dialogs == []
    assert visitor.problems == []


def test_pair_view_runs_no_script(hostile, live_server, visitor):
    base = live_server.url
    a, b = PAYLOADS[0], PAYLOADS[1]
    fetch(f"{base}/pair?a={quote(a, safe='')}&b={quote(b, safe='')}")
    for x, y in [(a, b), (PAYLOADS[4], PAYLOADS[7]), (PAYLOADS[3], PAYLOADS[8])]:
        visitor.visit(f"{base}/pair?a={quote(x, safe='')}&b={quote(y, safe='')}", f"pair {x!r} {y!r}", expand=True)
    assert visitor.dialogs == []
    assert visitor.problems == []


def test_upload_result_runs_no_script(live_server, visitor, tmp_path):
    base = live_server.url
    fetch(base + "/upload")
    trace = hostile_trace(tmp_path / "<img src=x onerror=window.__xss(20)>.jsonl")
    bad = tmp_path / "bad-<svg onload=window.__xss(21)>.jsonl"
    bad.write_bytes(b'{"type":"step","run_id":"<script>window.__xss(22)</script>","step":"<b>x</b>"}\n<script>x</script>\n')
    empty = tmp_path / "empty-<img src=x onerror=window.__xss(23)>.jsonl"
    empty.write_bytes(b"")
    blank = tmp_path / "blank-<img src=x onerror=window.__xss(24)>.jsonl"
    blank.write_bytes(b"\n  \r\n\n")
    visitor.visit(base + "/upload", "upload form")
    visitor.page.locator("input[type=file]").first.set_input_files([str(trace), str(bad), str(empty), str(blank)])
    submit = visitor.page.locator("form button[type=submit], form input[type=submit]").first
    if submit.count():
        submit.click()
    visitor.page.wait_for_load_state("networkidle")
    visitor.page.wait_for_timeout(1500)  # the result may be polled in by htmx
    visitor.page.wait_for_load_state("networkidle")
    visitor.open_everything()
    visitor.check("upload result")
    body = visitor.page.locator("body").inner_text()
    assert "bad-<svg onload=window.__xss(21)>.jsonl" in body  # the error names the file, as text
    assert "empty-<img src=x onerror=window.__xss(23)>.jsonl: empty file: no records" in body  # the warning too
    assert "blank-<img src=x onerror=window.__xss(24)>.jsonl: no records: the file holds only blank lines" in body
    assert visitor.dialogs == []
    assert visitor.problems == []


@pytest.mark.parametrize("index", [0, 1, 2, 5, 6, 7, 8])
def test_html_export_opened_from_disk_runs_no_script(hostile, live_server, visitor, tmp_path, index):
    run_id = PAYLOADS[index]
    url = f"{live_server.url}/runs/{encode_run_id(run_id)}/export.html"
    r = fetch(url)
    assert r.status_code == 200
    saved = tmp_path / f"export-{index}.html"
    saved.write_bytes(r.content)
    visitor.page.goto(saved.as_uri())
    visitor.page.wait_for_load_state("load")
    visitor.open_everything()
    # A file on disk has no CSP header: whatever protects it must be in the file itself.
    visitor.check(f"export.html {run_id!r}", body=r.text)
    assert "{{7*7}}" in visitor.page.locator("body").inner_text() or index != 8
    assert visitor.dialogs == []
    assert visitor.problems == []


def test_jsonl_export_is_not_html_and_names_no_server_path(hostile, live_server, tmp_path):
    run_id = PAYLOADS[2]
    r = fetch(f"{live_server.url}/runs/{encode_run_id(run_id)}/export.jsonl")
    assert r.status_code == 200
    assert "html" not in r.headers["content-type"]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert str(tmp_path) not in r.text and not SERVER_PATH.search(r.text)


def test_the_markup_detector_tells_the_boards_charts_from_injected_markup(page):
    from tests.browser.test_hostile_pages_browser import DOM_PROBE

    own = '<main><svg class="bars" role="img" aria-label="&lt;svg onload=x&gt;"><rect class="bar-a"></rect></svg></main>'
    page.set_content(own)
    assert page.evaluate(DOM_PROBE) == []
    for injected, found in [('<svg><rect></rect></svg>', "element svg (not one of the board charts)"),
                            ('<svg class="bars" role="img"><foreignObject></foreignObject></svg>', "element foreignObject inside svg"),
                            ('<img src="x">', 'element img[src="x"]'),
                            ('<p title="x" onclick="1">t</p>', "P[onclick]"),
                            ('<iframe></iframe>', "element iframe")]:
        page.set_content(own + injected)
        assert found in page.evaluate(DOM_PROBE), injected


def test_a_variant_that_opens_an_override_does_not_reverse_the_words_after_it(live_server, page, ingest, tmp_path):
    # "smoke\u202e" + " pass" once read "smokessap" in the confusion matrix: the board's own
    # word must read left to right, its letters laid out in order on the screen
    recs = []
    for variant, verdict in (("smoke\u202e", "pass"), ("e2e", "fail")):
        recs += [{"type": "run_start", "run_id": f"{variant}-1", "experiment": "bidi", "variant": variant,
                  "task_id": "t"},
                 {"type": "run_end", "run_id": f"{variant}-1", "status": "completed", "verdict": verdict}]
    assert ingest(write_jsonl(tmp_path / "b.jsonl", recs)).ok
    page.goto(f"{live_server.url}/compare?experiment=bidi&a={quote(recs[0]['variant'])}&b=e2e")
    lefts = page.evaluate("""() => {
        const th = [...document.querySelectorAll('table.confusion tbody th, table tbody th')]
            .find(t => t.textContent.startsWith('smoke') && t.textContent.endsWith(' pass'));
        const node = th.firstChild, text = node.textContent, at = text.lastIndexOf('pass');
        return [...'pass'].map((_, i) => {
            const r = document.createRange(); r.setStart(node, at + i); r.setEnd(node, at + i + 1);
            return r.getBoundingClientRect().left; });
    }""")
    assert lefts == sorted(lefts) and len(set(lefts)) == 4
    # the list's filter sends the name as written, and finds its run
    page.goto(f"{live_server.url}/runs?experiment=bidi")
    page.select_option("select[name=variant]", value=recs[0]["variant"])
    page.wait_for_url("**variant=smoke%E2%80%AE**")
    page.wait_for_function("document.querySelectorAll('#runs-table tbody tr, table.runs tbody tr').length === 1")
    assert page.errors == []


def test_an_override_inside_a_json_key_or_value_does_not_turn_the_blocks_quotes_around(live_server, page, ingest,
                                                                                        tmp_path):
    # {"key\u202e": "val\u202e"} read `"key"lav" :"`: the override ran on over the block's own
    # quotes and colon. The control is written as its JSON escape, and the block reads in order.
    recs = [{"type": "run_start", "run_id": "bidi-json"},
            {"type": "step", "run_id": "bidi-json", "step": 0, "observation": {"key\u202e": "val\u202e", "n": 1}},
            {"type": "run_end", "run_id": "bidi-json", "status": "completed", "stop_reason": "final"}]
    assert ingest(write_jsonl(tmp_path / "bj.jsonl", recs)).ok
    page.goto(f"{live_server.url}/runs/bidi-json")
    block = page.locator("#step-0 .field:has(.label:text('observation')) pre")
    assert '"key\\u202e": "val\\u202e"' in block.inner_text()
    assert "\u202e" not in block.inner_text()
    # the line's characters lie left to right on the screen
    lefts = block.evaluate("""pre => {
        const node = [...pre.childNodes].find(n => n.nodeType === 3 && n.textContent.includes('key'));
        const at = node.textContent.indexOf('"key'), line = node.textContent.slice(at, node.textContent.indexOf('\\n', at));
        return [...line].map((_, i) => {
            const r = document.createRange(); r.setStart(node, at + i); r.setEnd(node, at + i + 1);
            return r.getBoundingClientRect().left; });
    }""")
    assert lefts == sorted(lefts)
    assert page.errors == []
