"""Hostile traces in real Chromium: XSS payloads in every field render inert on every page.

A trace whose every string carries a script payload is ingested; Chromium then opens
the runs list (with searches for the payloads), every run view with all `<details>`
opened and all steps loaded, the step blocks, the JSON twins, error pages, and (in
separate tests, skipped only while those routes are not in this branch) compare,
pair, upload results and the HTML export opened from disk.

Detection does not rely on the CSP alone: pages are opened once with the CSP bypassed,
so an injected script would really run and call `window.__xss`; the DOM is checked for
any `on*` attribute, `javascript:` URL, `srcdoc`, foreign script, element the board never
renders (iframe, object, embed, base, `img src=x`) or `<svg>` that is not one of the
board's own charts (`svg[class][role=img]`); and with the CSP on, any
`securitypolicyviolation` is recorded. Dialogs are recorded too.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest

from qita_board.urls import encode_run_id
from tests.conftest import write_jsonl

PAYLOADS = [
    "<script>window.__xss(1)</script>",
    "\"><img src=x onerror=window.__xss(2)>",
    "</script><script>window.__xss(3)</script>",
    "javascript:window.__xss(4)",
    "<svg onload=window.__xss(5)>",
    "' onmouseover='window.__xss(6)' x='",
    "<iframe srcdoc=\"<script>parent.__xss(7)</script>\"></iframe>",
    "<a href=\"javascript:window.__xss(8)\">x</a><details open ontoggle=window.__xss(9)>",
    "\u2028\u2029{{7*7}}${7*7}<!--",
]

def hostile_records(p: str, n: int) -> list[dict]:
    rid = p
    crit = f"{p}#crit"
    return [
        {"type": "run_start", "run_id": rid, "ts": "2025-01-01T00:00:00Z", "schema": "qita.trace/1",
         "task_id": f"{p}#task", "experiment": f"{p}#exp", "variant": f"{p}#var", "replicate": 0,
         "objective": f"{p}#objective", "agent": f"{p}#agent", "model": f"{p}#model",
         "budget": {"max_steps": 10, "max_runtime_seconds": 60, "max_tokens": 1000},
         "critics": [f"{p}#critic"], "stop_criteria": [{"name": f"{p}#stopcrit", "params": {p: p}}],
         "criteria": [{"id": crit, "type": f"{p}#type", "description": f"{p}#desc", "stop_when": "fail", "gating": True,
                       "pass_threshold": 0.9}],
         "early_stop": {"enabled": True}, "tags": [f"{p}#tag"], "metadata": {p: p}},
        {"type": "step", "run_id": rid, "step": 0, "ts": "2025-01-01T00:00:01Z", "duration_s": 1.0,
         "observation": {p: p, "list": [p]},
         "decision": {"mode": p, "rationale": f"{p}#rationale", "actions": [{"name": p, "args": {p: p}}], "final_answer": p},
         "actions": [{"name": f"{p}#action", "args": {p: p}}], "action_results": [p, {p: p}],
         "tool_invocations": [{"tool_name": p, "latency_ms": 3, "status": p, "error": p}],
         "critic_outputs": [{"critic": f"{p}#critic", "action": p, "reason": f"{p}#reason", "score": 0.5, "details": {p: p},
                             "patches": [p, {p: p}]}],
         "state_diff": {p: {"before": p, "after": f"{p}#after"}}, "tokens": {"input": 1, "output": 1, "total": 2},
         "cost_usd": 0.01, "retry": False, "live_verdicts": {crit: "fail", p: p}},
        {"type": "step", "run_id": rid, "step": 1, "ts": "2025-01-01T00:00:02Z",
         "critic_outputs": [{"critic": f"{p}#critic", "action": "stop", "reason": p, "score": 0.1, "details": {p: [p]}}]},
        {"type": "event", "run_id": rid, "step": 0, "phase": f"{p}#phase", "ok": False, "payload": {p: p}, "error": p,
         "ts": "2025-01-01T00:00:01Z"},
        {"type": "event", "run_id": rid, "phase": p, "ok": True, "payload": p},
        {"type": "criterion", "run_id": rid, "id": crit, "score": 0.2, "passed": False, "details": {p: p},
         "live_verdict": "fail", "decided_at_step": 1},
        {"type": "early_stop", "run_id": rid, "reason": "criterion_failed", "deciding_criterion": crit,
         "armed_criteria": [crit], "step": 1, "tool_call_index": 1, "elapsed_s": 2.0, "turns_remaining": 8},
        {"type": f"{p}#unknowntype", "run_id": rid, p: p},
        {"type": "run_end", "run_id": rid, "ts": "2025-01-01T00:00:03Z", "status": "completed",
         "stop_reason": f"{p}#stopreason", "stop_detail": f"{p}#detail", "final_result": f"{p}#result",
         "verdict": "fail", "failure_report": {p: p}},
    ]


HOOK = """
window.__xss = function (n) { (window.__hits = window.__hits || []).push(n); };
document.addEventListener('securitypolicyviolation', function (e) {
  (window.__csp = window.__csp || []).push(e.violatedDirective + ' ' + e.blockedURI);
});
"""

#: The DOM after rendering: anything here means trace text became markup.
DOM_PROBE = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.attributes) {
      const v = a.value.trim().toLowerCase();
      if (a.name.startsWith('on')) bad.push(el.tagName + '[' + a.name + ']');
      if ((a.name === 'href' || a.name === 'src' || a.name === 'action' || a.name === 'formaction') && v.startsWith('javascript:'))
        bad.push(el.tagName + '[' + a.name + '=javascript:]');
      if (a.name === 'srcdoc') bad.push(el.tagName + '[srcdoc]');
    }
  }
  for (const s of document.scripts) { if (!s.src || new URL(s.src).origin !== location.origin) bad.push('script:' + (s.src || 'inline')); }
  // Elements the board never renders itself, whatever their attributes.
  for (const tag of ['iframe', 'frame', 'img[src="x"]', 'object', 'embed', 'base', 'body style', 'body link',
                     'link:not([href^="/static/"])', 'body meta', 'title ~ title',
                     'meta:not([charset]):not([name="viewport"]):not([name="color-scheme"]):not([name="htmx-config"]):not([http-equiv="Content-Security-Policy"])']) {
    if (document.querySelector(tag)) bad.push('element ' + tag);
  }
  if (document.querySelectorAll('meta[http-equiv]').length > 1) bad.push('element meta[http-equiv] twice');
  // The board draws its own charts as <svg class=... role="img"> (compare bars); a payload's
  // <svg onload=...> has neither, so an <svg> without them came from trace text.
  for (const el of document.querySelectorAll('svg:not([class][role="img"])')) bad.push('element svg (not one of the board charts)');
  // Markup inside the board's svg can only come from the template: no nested svg or foreignObject.
  for (const el of document.querySelectorAll('svg svg, svg foreignObject, svg script, svg a')) bad.push('element ' + el.tagName + ' inside svg');
  return bad;
}"""

SERVER_PATH = re.compile(r"/(?:work|root|home|tmp|var|usr|etc)/[A-Za-z0-9_.-]+")


def hostile_trace(path: Path) -> Path:
    records = [r for i, p in enumerate(PAYLOADS) for r in hostile_records(p, i)]
    return write_jsonl(path, records)


def run_url(base: str, run_id: str, suffix: str = "") -> str:
    return f"{base}/runs/{encode_run_id(run_id)}{suffix}"


class Visitor:
    """Opens pages in a CSP-bypassing context and collects every sign of executed or injected markup."""

    def __init__(self, browser, tmp_path: Path, *, bypass_csp: bool = True):
        self.context = browser.new_context(bypass_csp=bypass_csp, viewport={"width": 1280, "height": 900})
        self.context.add_init_script(HOOK)
        self.page = self.context.new_page()
        self.dialogs: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.problems: list[str] = []
        self.tmp_path = tmp_path

    def check(self, label: str, body: str | None = None) -> None:
        page = self.page
        hits = page.evaluate("window.__hits || []")
        csp = page.evaluate("window.__csp || []")
        dom = page.evaluate(DOM_PROBE)
        body = body if body is not None else page.content()
        if hits:
            self.problems.append(f"{label}: script ran {hits}")
        if csp:
            self.problems.append(f"{label}: CSP violations {csp}")
        if dom:
            self.problems.append(f"{label}: injected markup {sorted(set(dom))}")
        self.check_paths(label, body)

    def check_paths(self, label: str, body: str) -> None:
        if str(self.tmp_path) in body or SERVER_PATH.search(body.replace("/static/", "")):
            found = SERVER_PATH.search(body)
            self.problems.append(f"{label}: server path in the page ({found.group(0) if found else self.tmp_path})")

    def open_everything(self) -> None:
        """Open every closed <details>, then load every lazily loaded step block."""
        page = self.page
        for _ in range(10):
            closed = page.evaluate("""() => { let n = 0; for (const d of document.querySelectorAll('details:not([open])')) {
                const s = d.querySelector(':scope > summary'); if (s) { s.click(); n++; } else { d.open = true; } } return n; }""")
            more = page.locator("[hx-get*='/steps']:visible, .more-steps a:visible, .more-steps button:visible")
            if more.count():
                more.first.click()
            page.wait_for_load_state("networkidle")
            if not closed and not more.count():
                break
        page.mouse.move(200, 200)
        page.keyboard.press("j")

    def visit(self, url: str, label: str, *, expand: bool = False) -> None:
        response = self.page.goto(url)
        assert response is not None
        self.page.wait_for_load_state("networkidle")
        if expand:
            self.open_everything()
        self.check(label)

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def hostile(ingest, settings, tmp_path):
    """The hostile trace ingested into the test's database; returns the run ids."""
    report = ingest(hostile_trace(tmp_path / "hostile.jsonl"))
    assert report.ok, [str(e) for e in report.errors]
    return list(PAYLOADS)


@pytest.fixture
def visitor(browser, tmp_path):
    v = Visitor(browser, tmp_path)
    yield v
    v.close()


def test_hostile_trace_runs_no_script_on_list_run_views_and_steps(hostile, live_server, visitor, tmp_path):
    base = live_server.url
    visitor.visit(base + "/", "experiments")
    visitor.visit(base + "/runs", "list")
    listed = visitor.page.locator("body").inner_text()
    assert "<script>window.__xss(1)</script>" in listed  # shown as text, not run
    assert "{{7*7}}" in listed and "${7*7}" in listed
    for p in hostile:
        visitor.visit(f"{base}/runs?q={quote(p[:60])}", f"search {p!r}")
    for p in hostile:
        visitor.visit(run_url(base, p), f"run {p!r}", expand=True)
        text = visitor.page.locator("body").inner_text()
        assert f"{p}#objective".strip() in text or p.strip() in text
        visitor.visit(run_url(base, p, "/steps"), f"steps {p!r}", expand=True)
        visitor.visit(run_url(base, p, "?format=json"), f"json {p!r}")
        visitor.visit(f"{base}/api/runs/{encode_run_id(p)}/steps", f"api steps {p!r}")
        visitor.visit(run_url(base, p, "/delete"), f"delete confirmation {p!r}")
    # filters echo their values back in forms and error messages
    p = hostile[1]
    visitor.visit(f"{base}/runs?experiment={quote(p + '#exp')}&tag={quote(p + '#tag')}&model={quote(p)}", "filters")
    visitor.visit(f"{base}/runs?early_stopped={quote(p)}", "bad filter value (error page)")
    visitor.visit(f"{base}/runs/{quote(hostile[0] + 'nope', safe='')}", "missing run (error page)")
    assert visitor.dialogs == []
    assert visitor.problems == []


def test_hostile_trace_with_csp_on_records_no_violation(hostile, live_server, browser, tmp_path):
    v = Visitor(browser, tmp_path, bypass_csp=False)
    try:
        v.visit(live_server.url + "/", "experiments (CSP on)")
        v.visit(live_server.url + "/runs", "list (CSP on)")
        for p in hostile:
            v.visit(run_url(live_server.url, p), f"run {p!r} (CSP on)", expand=True)
        assert v.dialogs == []
        assert v.problems == []
    finally:
        v.close()


def test_run_id_payload_is_the_visible_title_not_markup(hostile, live_server, visitor):
    visitor.visit(run_url(live_server.url, PAYLOADS[1]), "title")
    assert visitor.page.locator("h1.run-title").inner_text() == "run " + PAYLOADS[1]
    assert visitor.page.locator("img[src='x']").count() == 0


def test_a_blank_experiment_is_filed_under_none_with_working_links(live_server, page, ingest, tmp_path):
    # An experiment named "" had an empty heading link on the overview, a compare link that
    # answered 400, and a variant link whose `?experiment=` listed the runs of every experiment.
    recs = []
    for rid, exp, var in (("e1", "", "smoke"), ("e2", "", "e2e"), ("o1", "other", "e2e")):
        recs += [{"type": "run_start", "run_id": rid, "experiment": exp, "variant": var, "task_id": "t"},
                 {"type": "run_end", "run_id": rid, "status": "completed", "stop_reason": "final"}]
    assert ingest(write_jsonl(tmp_path / "blank.jsonl", recs)).ok
    page.goto(live_server.url + "/")
    links = page.locator("main a")
    assert all(t.strip() for t in links.all_inner_texts())
    assert page.locator("main a[href*='/compare?experiment=&']").count() == 0
    page.locator("main a[href='/runs?experiment=%28none%29&variant=e2e']").first.click()
    page.wait_for_url("**/runs?experiment=%28none%29&variant=e2e")
    assert [t.strip() for t in page.locator("td.run-id").all_inner_texts()] == ["e2"]
    assert page.errors == []
