"""Board pages through their JSON twins (data) and their rendered HTML (templates)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from qita_board.present import STOP_REASON_LABELS
from tests.app.pages_traces import early_run, run_records, write_set
from tests.app.parsed_html import attrs, one, page, select_texts, text
from tests.conftest import write_jsonl


@pytest.fixture
def crafted(tmp_path, ingest):
    assert ingest(write_set(tmp_path / "t")).ok


def dl_pairs(el) -> dict[str, str]:
    """A <dl class="meta"> as {term: its value's text}."""
    return {text(d.dt): text(d.dd) for d in el.select("dl > div") if d.dt and d.dd}


def ids(client, query: str = "") -> list[str]:
    body = client.get("/api/runs" + query).json()
    return [r["run_id"] for r in body["data"]]


# -- runs list ---------------------------------------------------------------------------

def test_list_search_filters_sort_and_pages(crafted, client):
    # started: early-1 (s0) < a < b < c < d (s4); the default is newest first
    assert ids(client) == ["d", "c", "b", "a", "early-1"]
    assert ids(client, "?q=needle") == ["d"]                     # objective
    assert ids(client, "?q=42") == ["a"]                         # final result
    assert ids(client, "?q=ran+out&sort=run_id&order=asc") == ["b", "c"]  # stop detail
    assert ids(client, "?q=task-c") == ["c"]                     # task id
    assert ids(client, "?stop_reason=budget_steps&order=asc") == ["b", "c"]
    assert ids(client, "?verdict=fail&sort=run_id&order=asc") == ["b", "c"]
    assert ids(client, "?verdict=not_graded") == ["d"]
    assert ids(client, "?early_stopped=true") == ["early-1"]
    assert len(ids(client, "?early_stopped=false")) == 4
    assert ids(client, "?model=m2") == ["b"]
    assert ids(client, "?variant=e2e") == ["b"]
    assert ids(client, "?tag=blue") == ["a"]
    assert ids(client, "?state=finished&sort=steps") == ["c", "b", "early-1", "a", "d"]
    assert ids(client, "?sort=tokens&order=asc&limit=2") == ["d", "a"]   # 10, 20 tokens
    assert ids(client, "?sort=duration&order=asc") == ["d", "a", "early-1", "b", "c"]
    page2 = client.get("/api/runs?sort=run_id&order=asc&limit=2&offset=2").json()
    assert [r["run_id"] for r in page2["data"]] == ["c", "d"] and page2["count"] == 5


def test_a_runs_page_past_the_end_goes_to_the_last_page(crafted, client):
    # 5 runs in pages of 2: offsets 0, 2 and 4; an old link to offset 99999 showed an empty
    # table under "5 runs", with a "previous" link to another empty page.
    moved = client.get("/runs?sort=run_id&order=asc&limit=2&offset=99999", follow_redirects=False)
    assert (moved.status_code, moved.headers["location"]) == (303, "/runs?sort=run_id&order=asc&offset=4&limit=2")
    assert client.get("/runs?verdict=fail&offset=50", follow_redirects=False).headers["location"] == "/runs?verdict=fail"
    api = client.get("/api/runs?limit=2&offset=5")
    assert api.status_code == 404
    assert api.json()["error"] == "offset 5 is past the end: 5 runs match (the last page starts at offset 4)"
    assert client.get("/api/runs?limit=2&offset=4").json()["count"] == 5   # the last page itself is served


def test_list_stats_worked_by_hand(crafted, client):
    s = client.get("/api/runs").json()["stats"]
    # graded: a pass, b fail, c fail, early-1 pass on its armed criterion; d not graded
    assert (s["runs"], s["passed"], s["graded"]) == (5, 2, 4)
    assert s["pass_rate"] == pytest.approx(0.5)
    assert s["median_steps"] == 3          # 1 2 [3] 4 6
    assert s["median_tokens"] == 40        # 10 20 [40] 60 60
    assert s["median_elapsed_s"] == 20     # 5 10 [20] 30 50
    assert {r["stop_reason"]: r["count"] for r in s["stop_reasons"]} == {
        "budget_steps": 2, "final": 1, "weird_reason": 1, "early_stop": 1}
    # b and c fail on their criterion c; "ran out of steps" is how they ended, not why they failed
    assert s["top_failures"] == [{"reason": "criterion c failed", "criterion": "c", "stop_reason": None, "count": 2}]
    assert s["failing"] == 2
    filtered = client.get("/api/runs?variant=smoke").json()["stats"]
    assert (filtered["runs"], filtered["passed"], filtered["graded"]) == (4, 2, 3)


def test_list_page_keeps_the_view_in_its_links_and_htmx_gets_only_the_table(crafted, client):
    doc = page(client.get("/runs?verdict=fail&sort=steps&limit=1").text)
    assert attrs(doc, 'select[name="verdict"] option[selected]', "value") == ["fail"]
    assert attrs(doc, 'select[name="sort"] option[selected]', "value") == ["steps"]
    nxt = one(doc, "nav.pager a")                               # the first of 2 pages: only "next"
    assert text(nxt) == "next →" and nxt["hx-get"] == nxt["href"]
    query = parse_qs(urlsplit(nxt["href"]).query)               # the next-page link keeps filters
    assert (query["offset"], query["verdict"], query["sort"]) == (["1"], ["fail"], ["steps"])
    frag = page(client.get("/runs?verdict=fail", headers={"HX-Request": "true"}).text)
    assert frag.find("html") is None and frag.select("table.runs") and not frag.select("#filters")
    assert select_texts(frag, "table.runs td.run-id") == ["c", "b"]


def test_list_renders_stats_header(crafted, client):
    stats = one(client.get("/runs").text, "section.stats")
    # two variants: one pass rate each, never the mixed 50% (smoke: a, early-1 pass, c fails; e2e: b fails)
    assert "50%" not in text(stats)
    assert text(one(stats, ".by-variant > .stat-label")).startswith("pass rate per variant")
    rates = [(text(li.a), text(li.a.b), text(li.select_one(".rate")), text(li.select_one(".count")))
             for li in stats.select("ul.variant-rates > li")]
    assert sorted(rates) == [("exp / e2e", "e2e", "0%", "0 of 1"), ("exp / smoke", "smoke", "67%", "2 of 3")]
    single = one(client.get("/runs?variant=smoke").text, "section.stats")
    assert not single.select(".by-variant")
    rate = one(single, '.stat:has(> .stat-label:-soup-contains("pass rate"))')   # the one pass-rate figure
    assert (text(rate.select_one(".stat-value")), text(rate.select_one(".stat-label"))) == ("67%", "pass rate (2 of 3 graded)")
    assert select_texts(stats, "ol.failures .clip") == ["criterion c failed"] and "ran out of steps" not in text(stats)
    # the unknown stop reason is marked
    assert select_texts(stats, "ul.dist .badge.stop.stop-unknown .badge-flag") == ["unknown"]


# -- run view ----------------------------------------------------------------------------

@pytest.mark.parametrize("reason", sorted(STOP_REASON_LABELS))
def test_each_stop_reason_has_its_own_labelled_badge(reason, tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "r.jsonl", run_records("r", stop_reason=reason))).ok
    badge = one(client.get("/runs/r").text, ".run-head .ended-by .badge.stop")
    assert badge["class"] == ["badge", "stop", f"stop-{reason}"]
    assert text(badge) == STOP_REASON_LABELS[reason]


def test_stop_badges_are_distinct():
    assert len(set(STOP_REASON_LABELS.values())) == len(STOP_REASON_LABELS)


def test_unknown_stop_reason_is_shown_as_given_and_marked(crafted, client):
    badge = one(client.get("/runs/d").text, ".run-head .ended-by .badge.stop")
    assert "stop-unknown" in badge["class"] and badge["title"] == "stop reason: weird_reason"
    assert text(badge) == "unknown weird_reason" and text(badge.select_one(".badge-flag")) == "unknown"
    assert client.get("/api/runs/d").json()["run"]["stop_reason"] == "weird_reason"


def test_state_badges(tmp_path, ingest, client, settings):
    write_jsonl(tmp_path / "s.jsonl", run_records("fin") + run_records("open", end=False))
    assert ingest(tmp_path / "s.jsonl").ok
    assert client.get("/api/runs/fin").json()["run"]["state"] == "finished"
    badge = one(client.get("/runs/fin").text, ".run-head .badge.state")
    assert badge["class"] == ["badge", "state", "state-finished"] and text(badge) == "finished"
    state = client.get("/api/runs/open").json()["run"]["state"]
    assert state in ("running", "abandoned")
    doc = page(client.get("/runs/open").text)
    badge = one(doc, ".run-head .badge.state")
    assert badge["class"] == ["badge", "state", f"state-{state}"] and text(badge) == state
    # a run still going is not said to have ended; one given up on never said why
    ended = doc.select(".run-head .ended-by")
    assert [text(e) for e in ended] == ([] if state == "running" else ["stop reason not recorded"])


def test_a_run_that_ended_without_a_stop_reason_is_not_said_to_be_ended_by_one(tmp_path, ingest, client):
    # it read "ended by no stop reason"
    assert ingest(write_jsonl(tmp_path / "q.jsonl", run_records("quiet", stop_reason=None))).ok
    assert client.get("/api/runs/quiet").json()["run"]["stop_reason"] is None
    doc = page(client.get("/runs/quiet").text)
    assert text(one(doc, ".run-head .ended-by")) == "stop reason not recorded"
    assert "stop-none" in one(doc, ".run-head .ended-by .badge.stop")["class"]


def test_gauges_early_stop_panel_and_markers(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "e.jsonl", early_run())).ok
    data = client.get("/api/runs/early-1").json()
    # 3 of 10 steps, 60 of 100 tokens, 20 of 40 s
    assert data["budget"]["steps"]["fraction"] == pytest.approx(0.3)
    assert data["budget"]["tokens"]["fraction"] == pytest.approx(0.6)
    assert data["budget"]["time"]["fraction"] == pytest.approx(0.5)
    assert data["early_stop"]["deciding_criterion"] == "smoke" and data["early_stop"]["turns_remaining"] == 7
    crit = {c["id"]: c for c in data["criteria"]}
    assert crit["smoke"]["armed"] and not crit["smoke"]["advisory"]
    assert crit["e2e"]["advisory"] and not crit["e2e"]["armed"]
    assert crit["style"]["informational"] and not crit["style"]["advisory"]
    assert data["run"]["verdict"] == "pass" and data["run"]["gated_on"] == "armed"

    doc = page(client.get("/runs/early-1").text)
    gauges = select_texts(doc, ".run-head .gauges .gauge-text")
    assert "3 of 10 (30%)" in gauges and "60 of 100 (60%)" in gauges
    panel = dl_pairs(one(doc, "section.early-panel"))
    assert (panel["reason"], panel["deciding criterion"], panel["tool call"]) == ("armed criterion passed", "smoke", "tool call #1")
    assert (panel["elapsed"], panel["steps avoided (upper bound)"]) == ("12.5 s", "7")
    rows = {text(tr.td.b): tr for tr in doc.select('section[aria-label="Criteria"] tbody tr:not(.criterion-details)')}
    assert select_texts(rows["e2e"], ".badge.advisory") == ["advisory — not gated (run stopped early)"]
    assert not rows["smoke"].select(".badge.advisory") and text(one(rows["smoke"], ".badge.armed")).startswith("armed")
    assert select_texts(rows["style"], ".badge.informational") == ["informational"]
    assert not rows["style"].select(".badge.advisory")
    assert text(one(doc, ".run-head .gated")) == "gated on armed criteria only"


def test_steps_carry_every_critic_output_with_names(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "e.jsonl", early_run())).ok
    steps = client.get("/api/runs/early-1/steps").json()
    assert steps["count"] == 3
    outs = steps["data"][1]["critic_outputs"]
    assert [o["name"] for o in outs] == ["judge", "critic #2"]
    assert [o["action"] for o in outs] == ["retry", "continue"]
    doc = page(client.get("/runs/early-1").text)
    critics = one(doc, "#step-1 table.critics")
    assert select_texts(critics, "td.critic-name") == ["judge", "critic #2"]
    assert [text(tr.select("td")[2]) for tr in critics.select("tbody tr")][1] == "nameless"   # the reason column
    lane = [cls[1] for cls in attrs(doc, "ol.lane a.mark", "class")]
    assert lane == ["mark-continue", "mark-retry", "mark-stop"]


def test_lazy_steps_pages(tmp_path, ingest, client, settings):
    assert ingest(write_jsonl(tmp_path / "long.jsonl", run_records("long", steps=60))).ok
    doc = page(client.get("/runs/long").text)
    # a short first block, then full blocks of page_steps as the reader scrolls
    assert (len(doc.select("#steps > article")), settings.first_page_steps, settings.page_steps) == (12, 12, 25)
    more = one(doc, "#steps > div.more-steps")
    assert (more["hx-get"], more["hx-trigger"]) == ("/runs/long/steps?offset=12&limit=25", "revealed")
    block = client.get("/api/runs/long/steps?offset=50&limit=25").json()
    assert [s["step"] for s in block["data"]] == list(range(50, 60)) and block["count"] == 60
    frag = page(client.get("/runs/long/steps?offset=50&limit=25", headers={"HX-Request": "true"}).text)
    assert len(frag.select("article")) == 10 and not frag.select(".more-steps")
    # opening the run from a lane mark far down renders from that step
    doc = page(client.get("/runs/long?from=40").text)
    assert attrs(doc, "#steps > article", "id")[0] == "step-40"
    assert text(one(doc, "p.earlier a.earlier-link")) == "↑ earlier steps"


def test_long_values_are_cut_and_loaded_on_demand(tmp_path, ingest, client):
    big = "<b>x</b>" * 5000
    recs = run_records("big", steps=1)
    recs[1]["observation"] = {"text": big, "k/ey": ["a", "b"]}
    assert ingest(write_jsonl(tmp_path / "b.jsonl", recs)).ok
    html = client.get("/runs/big").text
    # about the bytes (size; the value never as raw markup): substring checks are right here
    assert len(html) < 30_000 and "<b>x</b>" not in html
    observation = one(html, "#step-0 .field:has(> .label:-soup-contains(observation))")
    assert attrs(observation, "a.more", "hx-get") == ["/runs/big/steps/0/field?path=%2Fobservation"]
    full = client.get("/runs/big/steps/0/field?path=/observation/text", headers={"HX-Request": "true"}).text
    # escaped, never raw markup: about the bytes; then the reader sees the value whole
    assert full.count("&lt;b&gt;x&lt;/b&gt;") == 5000 and "<b>" not in full
    assert page(full).get_text().strip() == big
    assert client.get("/api/runs/big/steps/0/field?path=/observation/k~1ey/1").json()["value"] == "b"
    assert client.get("/api/runs/big/steps/0/field?path=observation").status_code == 400
    assert client.get("/api/runs/big/steps/0/field?path=/observation/~2").status_code == 400
    assert client.get("/api/runs/big/steps/0/field?path=/nope").status_code == 404
    assert client.get("/api/runs/big/steps/0/field?path=/observation/k~1ey/9").status_code == 404
    assert client.get("/api/runs/big/steps/7/field?path=/observation").status_code == 404
    assert client.get("/api/runs/big/steps/0/field?path=/../../etc/passwd").status_code == 404


def test_live_poll_answers_204_until_the_run_changes(tmp_path, ingest, client):
    path = tmp_path / "live.jsonl"
    recs = run_records("lv", steps=2, end=False)
    write_jsonl(path, recs)
    assert ingest(path, final=False).ok
    html = client.get("/runs/lv").text
    stamp = client.get("/api/runs/lv").json()["live"]["stamp"]
    if client.get("/api/runs/lv").json()["run"]["state"] == "running":
        assert one(html, "#live")["hx-trigger"] == "every 2000ms"
    assert client.get(f"/runs/lv/live?stamp={stamp}", headers={"HX-Request": "true"}).status_code == 204
    assert client.get(f"/api/runs/lv/live?stamp={stamp}").status_code == 204
    # opened by itself (a link, a reload), the poll's URL is the run page it is a part of
    plain = client.get(f"/runs/lv/live?stamp={stamp}", follow_redirects=False)
    assert (plain.status_code, plain.headers["location"]) == (303, "/runs/lv")
    write_jsonl(path, run_records("lv", steps=3))   # a third step and the run_end
    assert ingest(path).ok
    frag = client.get("/runs/lv/live", params={"stamp": stamp, "after": 1}, headers={"HX-Request": "true"})
    assert frag.status_code == 200
    doc = page(frag.text)
    assert attrs(doc, 'div[hx-swap-oob="beforeend:#steps"] > article', "id") == ["step-2"]   # only the new step
    assert not doc.select('article:not([hx-swap-oob="beforeend:#steps"] > article)')
    live = one(doc, "#live")
    assert "live-off" in live["class"] and not live.has_attr("hx-trigger")   # polling stops


# -- QitOS runs --------------------------------------------------------------------------

def test_qitos_runs_show_every_step_critic_thought_and_stay_light(qitos_runs, ingest, client):
    assert ingest(qitos_runs).ok
    runs = client.get("/api/runs").json()["data"]
    assert len(runs) == 4
    for r in runs:
        rid = r["run_id"]
        steps = client.get(f"/api/runs/{rid}/steps?limit=200").json()
        assert steps["count"] == r["steps"] > 0
        html = client.get(f"/runs/{rid}").text
        assert len(html) < 200_000                                # the bytes: a substring-free size check
        doc = page(html)
        assert len(doc.select("#steps > article")) == r["steps"]
        assert text(one(doc, ".run-head .ended-by .badge.stop")) == "final answer"
        for s in steps["data"]:
            for i, o in enumerate(s["critic_outputs"]):
                assert o["name"] == (o["critic"] or f"critic #{i + 1}")
        thoughts = [x for s in steps["data"] for x in s["extras"] if x["label"] == "thought"]
        assert thoughts and all(isinstance(t["value"], str) for t in thoughts)
        assert "thought" in select_texts(doc, "#steps article .field > .label")
    coding = next(r["run_id"] for r in runs if "coding" in r["run_id"])
    doc = page(client.get(f"/runs/{coding}").text)
    assert "critic #1" in select_texts(doc, "td.critic-name")
    assert any("react_reflection_pass" in t for t in select_texts(doc, "#steps table.critics td"))


def test_templates_stay_those_the_process_started_with():
    # A template changed on disk must not be picked up by a board running older code
    # (its context lacks what the new template reads: 500s until a restart).
    from qita_board.render import make_templates

    assert make_templates().env.auto_reload is False


def test_a_critic_action_the_engine_does_not_know_is_shown_as_given_and_flagged(tmp_path, ingest, client):
    # docs/trace-format.md: any other value is shown as given and counts as continue
    outputs = [[{"critic": "odd", "action": "escalate", "reason": "r"}, {"critic": "plain", "action": "retry"}]]
    assert ingest(write_jsonl(tmp_path / "a.jsonl", run_records("acts", steps=1, critic_outputs=outputs))).ok
    doc = page(client.get("/runs/acts").text)
    odd, plain = doc.select("article#step-0 table.critics tbody tr td .badge.action")
    assert text(odd) == "unknown escalate" and text(odd.select_one(".badge-flag")) == "unknown"
    assert odd["class"] == ["badge", "action", "action-continue", "action-unknown"]
    assert odd["title"] == "escalate — not continue, stop or retry: the run acts on it as continue"
    assert (text(plain), plain["class"], plain.get("title")) == ("retry", ["badge", "action", "action-retry"], None)


def test_head_answers_as_get_without_a_body(crafted, client):
    # link checkers and monitors ask with HEAD: FastAPI's GET routes answered 405
    for url in ("/", "/runs?verdict=fail", "/api/runs", "/runs/a", "/compare", "/static/app.css"):
        get, head = client.get(url), client.head(url)
        assert (head.status_code, head.content) == (get.status_code, b""), url
        assert get.status_code == 200 and head.headers["content-type"] == get.headers["content-type"], url
    assert client.head("/runs/no-such-run").status_code == 404
    assert client.post("/runs").status_code == 405   # other methods are as before


def test_a_median_between_two_runs_is_shown_as_it_is(ingest, client, tmp_path):
    # 8,372.5 tokens read "8,372": an even count's median falls between two runs
    from tests.app.pages_traces import run_records
    from tests.conftest import write_jsonl

    recs = []
    for rid, total in (("m1", 8372), ("m2", 8373)):
        run = run_records(rid)
        run[-1]["tokens"] = {"input": total, "output": 0, "total": total}
        recs += run
    assert ingest(write_jsonl(tmp_path / "m.jsonl", recs)).ok
    assert client.get("/api/runs").json()["stats"]["median_tokens"] == 8372.5
    shown = client.get("/runs").text
    assert '<span class="stat-value">8,372.5</span><span class="stat-label">median tokens</span>' in shown
