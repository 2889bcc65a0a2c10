"""Board pages through their JSON twins (data) and their rendered HTML (templates)."""

from __future__ import annotations

import re

import pytest

from app.present import STOP_REASON_LABELS
from tests.app.pages_traces import early_run, run_records, write_set
from tests.conftest import write_jsonl


@pytest.fixture
def crafted(tmp_path, ingest):
    assert ingest(write_set(tmp_path / "t")).ok


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
    html = client.get("/runs?verdict=fail&sort=steps&limit=1").text
    assert '<option value="fail" selected>' in html
    assert "offset=1" in html and "verdict=fail" in html and "sort=steps" in html   # next-page link keeps filters
    frag = client.get("/runs?verdict=fail", headers={"HX-Request": "true"}).text
    assert "<html" not in frag and 'class="runs ' in frag and 'id="filters"' not in frag
    assert frag.count('class="run-id"') == 2


def test_list_renders_stats_header(crafted, client):
    html = client.get("/runs").text
    stats = html[html.index('class="stats"'):html.index('class="runs ')]
    # two variants: one pass rate each, never the mixed 50% (smoke: a, early-1 pass, c fails; e2e: b fails)
    assert "50%" not in stats and "pass rate per variant" in stats
    assert re.search(r"exp / <b>smoke</b></a> <span class=\"rate\">67%</span> <span class=\"count\">2 of 3</span>", stats)
    assert re.search(r"exp / <b>e2e</b></a> <span class=\"rate\">0%</span> <span class=\"count\">0 of 1</span>", stats)
    one = client.get("/runs?variant=smoke").text
    assert "67%" in one and "2 of 3 graded" in one and "pass rate per variant" not in one
    assert "criterion c failed" in stats and "ran out of steps" not in stats
    assert "unknown" in stats   # the unknown stop reason is marked


# -- run view ----------------------------------------------------------------------------

@pytest.mark.parametrize("reason", sorted(STOP_REASON_LABELS))
def test_each_stop_reason_has_its_own_labelled_badge(reason, tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "r.jsonl", run_records("r", stop_reason=reason))).ok
    html = client.get("/runs/r").text
    badge = re.search(r'<span class="badge stop stop-([a-z_]+)"[^>]*>(.*?)</span>', html, re.S)
    assert badge.group(1) == reason
    assert badge.group(2).strip() == STOP_REASON_LABELS[reason]


def test_stop_badges_are_distinct():
    assert len(set(STOP_REASON_LABELS.values())) == len(STOP_REASON_LABELS)


def test_unknown_stop_reason_is_shown_as_given_and_marked(crafted, client):
    html = client.get("/runs/d").text
    head = html[html.index('class="run-head"'):]
    assert "stop-unknown" in head and "weird_reason" in head and ">unknown<" in head
    assert client.get("/api/runs/d").json()["run"]["stop_reason"] == "weird_reason"


def test_state_badges(tmp_path, ingest, client, settings):
    write_jsonl(tmp_path / "s.jsonl", run_records("fin") + run_records("open", end=False))
    assert ingest(tmp_path / "s.jsonl").ok
    assert client.get("/api/runs/fin").json()["run"]["state"] == "finished"
    assert "state-finished" in client.get("/runs/fin").text
    state = client.get("/api/runs/open").json()["run"]["state"]
    assert state in ("running", "abandoned")
    assert f'state state-{state}">{state}<' in client.get("/runs/open").text


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

    html = client.get("/runs/early-1").text
    assert "3 of 10 (30%)" in html and "60 of 100 (60%)" in html
    panel = html[html.index('class="panel early-panel"'):html.index('aria-label="Criteria"')]
    for text in ("armed criterion passed", "smoke", "#1", "12.5 s", ">7<"):
        assert text in panel
    rows = {m.group(1): m.group(0) for m in re.finditer(r"<tr[^>]*>\s*<td><b>(\w+)</b>.*?</tr>", html, re.S)}
    assert "advisory — not gated (run stopped early)" in rows["e2e"]
    assert "advisory" not in rows["smoke"] and "armed" in rows["smoke"]
    assert "informational" in rows["style"] and "advisory —" not in rows["style"]
    assert "gated on armed criteria only" in html


def test_steps_carry_every_critic_output_with_names(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "e.jsonl", early_run())).ok
    steps = client.get("/api/runs/early-1/steps").json()
    assert steps["count"] == 3
    outs = steps["data"][1]["critic_outputs"]
    assert [o["name"] for o in outs] == ["judge", "critic #2"]
    assert [o["action"] for o in outs] == ["retry", "continue"]
    html = client.get("/runs/early-1").text
    step1 = html[html.index('id="step-1"'):html.index('id="step-2"')]
    assert step1.count("<tr><td class=\"critic-name\">") == 2 and "critic #2" in step1 and "nameless" in step1
    lane = re.findall(r'class="mark mark-(\w+)', html[html.index('class="lane"'):])
    assert lane[:3] == ["continue", "retry", "stop"]


def test_lazy_steps_pages(tmp_path, ingest, client, settings):
    assert ingest(write_jsonl(tmp_path / "long.jsonl", run_records("long", steps=60))).ok
    html = client.get("/runs/long").text
    # a short first block, then full blocks of page_steps as the reader scrolls
    assert (html.count("<article"), settings.first_page_steps, settings.page_steps) == (12, 12, 25)
    assert 'hx-get="/runs/long/steps?offset=12&amp;limit=25"' in html and 'hx-trigger="revealed"' in html
    block = client.get("/api/runs/long/steps?offset=50&limit=25").json()
    assert [s["step"] for s in block["data"]] == list(range(50, 60)) and block["count"] == 60
    frag = client.get("/runs/long/steps?offset=50&limit=25", headers={"HX-Request": "true"}).text
    assert frag.count("<article") == 10 and "more-steps" not in frag
    # opening the run from a lane mark far down renders from that step
    html = client.get("/runs/long?from=40").text
    assert re.findall(r'<article[^>]*id="step-(\d+)"', html)[0] == "40" and "earlier steps" in html


def test_long_values_are_cut_and_loaded_on_demand(tmp_path, ingest, client):
    big = "<b>x</b>" * 5000
    recs = run_records("big", steps=1)
    recs[1]["observation"] = {"text": big, "k/ey": ["a", "b"]}
    assert ingest(write_jsonl(tmp_path / "b.jsonl", recs)).ok
    html = client.get("/runs/big").text
    assert len(html) < 30_000 and "<b>x</b>" not in html
    assert 'hx-get="/runs/big/steps/0/field?path=%2Fobservation"' in html
    full = client.get("/runs/big/steps/0/field?path=/observation/text", headers={"HX-Request": "true"}).text
    assert full.count("&lt;b&gt;x&lt;/b&gt;") == 5000 and "<b>" not in full
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
        assert 'hx-trigger="every 2000ms"' in html
    assert client.get(f"/runs/lv/live?stamp={stamp}").status_code == 204
    write_jsonl(path, run_records("lv", steps=3))   # a third step and the run_end
    assert ingest(path).ok
    frag = client.get("/runs/lv/live", params={"stamp": stamp, "after": 1}, headers={"HX-Request": "true"})
    assert frag.status_code == 200
    assert re.findall(r'<article[^>]*id="step-(\d+)"', frag.text) == ["2"]
    assert 'hx-swap-oob="beforeend:#steps"' in frag.text
    assert 'id="live"' in frag.text and "hx-trigger" not in frag.text.split('id="run-header"')[0]  # polling stops


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
        assert len(html) < 200_000
        assert html.count("<article") == r["steps"]
        assert "final answer" in html[html.index('class="run-head"'):]   # the stop badge: final
        for s in steps["data"]:
            for i, o in enumerate(s["critic_outputs"]):
                assert o["name"] == (o["critic"] or f"critic #{i + 1}")
        thoughts = [x for s in steps["data"] for x in s["extras"] if x["label"] == "thought"]
        assert thoughts and all(isinstance(t["value"], str) for t in thoughts)
        assert 'class="label">thought<' in html
    coding = next(r["run_id"] for r in runs if "coding" in r["run_id"])
    html = client.get(f"/runs/{coding}").text
    assert "critic #1" in html and "react_reflection_pass" in html
