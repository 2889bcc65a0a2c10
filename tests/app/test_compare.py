"""Compare figures on a crafted smoke/e2e experiment; every expected number is worked out by hand below."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from tests.app.parsed_html import attrs, one, page, select_texts, text
from tests.conftest import write_jsonl

pytestmark = pytest.mark.both_backends


def run_records(run_id: str, task: str, variant: str, rep: int, *, passed: Optional[bool], early: Optional[str] = None,
                steps: int, tokens: int, elapsed: float, cost: Optional[float], ts: str = "2026-01-01T10:00:00Z",
                experiment: str = "exp", tags: Optional[list[str]] = None, step_records: bool = False,
                finished: bool = True) -> list[dict[str, Any]]:
    """One run: graded on criterion c1 (score 1 = pass) unless passed is None (no criteria: not graded)."""
    start = {"type": "run_start", "run_id": run_id, "ts": ts, "experiment": experiment, "variant": variant,
             "task_id": task, "replicate": rep, "early_stop": {"enabled": early is not None}, "tags": tags or [],
             "criteria": [] if passed is None else [
                 {"id": "c1", "type": "skill_triggered", "description": "loads the skill", "stop_when": "decided"},
                 {"id": "c2", "type": "file_exists", "description": "writes the file"}]}
    out: list[dict[str, Any]] = [start]
    if step_records:
        out += [{"type": "step", "run_id": run_id, "step": i, "actions": [{"name": f"tool{i}", "args": {}}],
                 "tokens": {"total": 10}} for i in range(steps)]
    if passed is not None:
        out.append({"type": "criterion", "run_id": run_id, "id": "c1", "score": 1.0 if passed else 0.0})
        out.append({"type": "criterion", "run_id": run_id, "id": "c2", "score": 1.0 if passed else 0.0})
    if early:
        out.append({"type": "early_stop", "run_id": run_id, "reason": early, "deciding_criterion": "c1",
                    "armed_criteria": ["c1"], "step": steps - 1, "turns_remaining": 5})
    if finished:
        out.append({"type": "run_end", "run_id": run_id, "status": "completed", "ts": ts,
                    "stop_reason": "early_stop" if early else "final", "steps": steps, "tokens": {"total": tokens},
                    "elapsed_s": elapsed, "cost_usd": cost})
    return out


def crafted(path: Path) -> Path:
    """smoke (a) vs e2e (b) of experiment `exp`.

    pair        smoke                               e2e            agree
    t1 #0       pass, stopped early (passed)        pass           yes
    t1 #1       pass, stopped early (passed)        fail           NO  (pass-stop that misses a later failure)
    t2 #0       fail, ran to the end                fail (latest)  yes (an older e2e run of t2 #0 passed: set aside)
    t3 #0       not graded (no criteria)            pass           left out
    t4 #0       fail, stopped early (failed)        fail           yes
    t5 #0       pass                                —              only in smoke
    t6 #0       —                                   fail           only in e2e
    """
    recs: list[dict[str, Any]] = []
    recs += run_records("s-t1-0", "t1", "smoke", 0, passed=True, early="criterion_passed", steps=2, tokens=200, elapsed=1.5, cost=0.02)
    recs += run_records("e-t1-0", "t1", "e2e", 0, passed=True, steps=6, tokens=600, elapsed=6.0, cost=0.06)
    recs += run_records("s-t1-1", "t1", "smoke", 1, passed=True, early="criterion_passed", steps=3, tokens=300, elapsed=2.5, cost=0.03, step_records=True)
    recs += run_records("e-t1-1", "t1", "e2e", 1, passed=False, steps=8, tokens=800, elapsed=8.0, cost=0.08, step_records=True)
    recs += run_records("s-t2-0", "t2", "smoke", 0, passed=False, steps=5, tokens=500, elapsed=5.0, cost=None)
    recs += run_records("e-t2-0-old", "t2", "e2e", 0, passed=True, steps=99, tokens=9900, elapsed=99.0, cost=0.99, ts="2025-12-31T10:00:00Z")
    recs += run_records("e-t2-0", "t2", "e2e", 0, passed=False, steps=5, tokens=500, elapsed=5.0, cost=0.05)
    recs += run_records("s-t3-0", "t3", "smoke", 0, passed=None, steps=1, tokens=100, elapsed=1.0, cost=0.01)
    recs += run_records("e-t3-0", "t3", "e2e", 0, passed=True, steps=4, tokens=400, elapsed=4.0, cost=0.04)
    recs += run_records("s-t4-0", "t4", "smoke", 0, passed=False, early="criterion_failed", steps=2, tokens=250, elapsed=2.0, cost=0.02)
    recs += run_records("e-t4-0", "t4", "e2e", 0, passed=False, steps=10, tokens=1000, elapsed=10.0, cost=0.10)
    recs += run_records("s-t5-0", "t5", "smoke", 0, passed=True, steps=1, tokens=10, elapsed=1.0, cost=0.01)
    recs += run_records("e-t6-0", "t6", "e2e", 0, passed=False, steps=1, tokens=10, elapsed=1.0, cost=0.01)
    return write_jsonl(path, recs)


@pytest.fixture
def experiment(ingest, tmp_path):
    report = ingest(crafted(tmp_path / "exp.jsonl"))
    assert report.ok, report.errors
    return report


def test_summary_figures_by_hand(client, experiment):
    data = client.get("/api/compare", params={"experiment": "exp", "a": "smoke", "b": "e2e"}).json()
    s = data["summary"]
    assert s["paired"] == 5  # t1#0, t1#1, t2#0, t3#0, t4#0
    assert s["only_a"] == ["t5"] and s["only_b"] == ["t6"]
    assert s["not_graded"] == 1  # t3: smoke has no criteria
    assert s["verdict_agreement"] == {"agree": 3, "total": 4}  # t1#0, t2#0, t4#0 of the 4 graded
    assert s["confusion"] == {"pass_pass": 1, "pass_fail": 1, "fail_pass": 0, "fail_fail": 2}
    assert s["early_stopped_a"] == 3  # t1#0, t1#1, t4#0
    assert s["early_stop_agree"] == 2 and s["early_stop_disagree"] == 1
    # steps: smoke 2+3+5+1+2 = 13, e2e 6+8+5+4+10 = 33 (the set-aside old t2 run's 99 is not counted)
    assert (s["steps"]["a"], s["steps"]["b"]) == (13, 33)
    assert s["steps"]["saved_pct"] == pytest.approx(100 * 20 / 33)
    # tokens: 200+300+500+100+250 = 1350 vs 600+800+500+400+1000 = 3300
    assert (s["tokens"]["a"], s["tokens"]["b"]) == (1350, 3300)
    assert s["tokens"]["saved_pct"] == pytest.approx(100 * 1950 / 3300)
    # elapsed: 1.5+2.5+5+1+2 = 12 vs 33
    assert s["elapsed_s"]["a"] == pytest.approx(12.0) and s["elapsed_s"]["b"] == pytest.approx(33.0)
    assert s["elapsed_s"]["saved_pct"] == pytest.approx(100 * 21 / 33)
    # cost: t2's smoke run has none, so t2 is left out of cost: 0.02+0.03+0.01+0.02 = 0.08 vs 0.06+0.08+0.04+0.10 = 0.28
    assert s["cost_usd"]["a"] == pytest.approx(0.08) and s["cost_usd"]["b"] == pytest.approx(0.28)
    assert s["cost_usd"]["saved_pct"] == pytest.approx(100 * 0.20 / 0.28)
    assert (s["cost_usd"]["pairs"], s["cost_usd"]["missing"]) == (4, 1)
    assert data["duplicates"]["b"] == [{"task_id": "t2", "replicate": 0, "run_id": "e-t2-0-old", "kept_run_id": "e-t2-0"}]
    # qita traces do not tell the agent's time from the run's: agent time is elapsed (12 vs 33 s)
    assert s["agent_s"]["a"] == pytest.approx(12.0) and s["agent_s"]["b"] == pytest.approx(33.0)
    # Wilson 95% for 3 of 4: (0.75 + 1.96²/8) / (1 + 1.96²/4) -+ 1.96 sqrt(0.75·0.25/4 + 1.96²/64) / (1 + 1.96²/4)
    # = 0.6275 -+ 0.3269 -> 30%-95%; the graded pairs hold 3 tasks (t1 twice, t2, t4)
    assert data["headline"] == ("Verdicts identical on 3 of 4 paired runs (3 tasks), 1 not graded left out: "
                                "agreement 75% (95% CI 30%–95%); "
                                "smoke used 61% fewer steps, 59% fewer tokens and 64% less agent time.")


def test_pairs_list_both_sides(client, experiment):
    data = client.get("/api/compare", params={"experiment": "exp", "a": "smoke", "b": "e2e"}).json()
    pairs = {(p["task_id"], p["replicate"]): p for p in data["pairs"]}
    assert sorted(pairs) == [("t1", 0), ("t1", 1), ("t2", 0), ("t3", 0), ("t4", 0)]
    p = pairs[("t1", 1)]
    assert p["agree"] is False
    assert p["a"] == {**p["a"], "run_id": "s-t1-1", "verdict": "pass", "stop_reason": "early_stop",
                      "early_stop_reason": "criterion_passed", "steps": 3, "tokens": 300, "elapsed_s": 2.5, "cost_usd": 0.03}
    assert p["b"] == {**p["b"], "run_id": "e-t1-1", "verdict": "fail", "stop_reason": "final", "early_stop_reason": None,
                      "steps": 8, "tokens": 800}
    assert pairs[("t3", 0)]["agree"] is None and pairs[("t3", 0)]["a"]["verdict"] == "not_graded"
    assert pairs[("t2", 0)]["b"]["run_id"] == "e-t2-0"


def test_disagreements_only_and_sorting(client, experiment):
    base = {"experiment": "exp", "a": "smoke", "b": "e2e"}
    only = client.get("/api/compare", params={**base, "only": "disagree"}).json()
    assert [(p["task_id"], p["replicate"]) for p in only["pairs"]] == [("t1", 1)]
    assert only["summary"]["paired"] == 5  # the filter narrows the table, not the figures
    first = client.get("/api/compare", params={**base, "sort": "disagreement"}).json()["pairs"]
    assert [p["agree"] for p in first] == [False, None, True, True, True]
    # steps saved per pair: t1#0 4/6=67%, t1#1 5/8=62.5%, t2#0 0%, t3#0 3/4=75%, t4#0 8/10=80%
    by_saving = client.get("/api/compare", params={**base, "sort": "savings"}).json()["pairs"]
    assert [(p["task_id"], p["replicate"]) for p in by_saving] == [("t4", 0), ("t3", 0), ("t1", 0), ("t1", 1), ("t2", 0)]


def test_default_comparison_prefers_smoke_and_e2e(client, experiment, ingest, tmp_path):
    write_jsonl(tmp_path / "other.jsonl", run_records("o1", "t1", "alpha", 0, passed=True, steps=1, tokens=1, elapsed=1,
                                                        cost=0, experiment="aaa")
                + run_records("o2", "t1", "beta", 0, passed=True, steps=1, tokens=1, elapsed=1, cost=0, experiment="aaa"))
    ingest(tmp_path / "other.jsonl")
    data = client.get("/api/compare").json()
    assert data["groups"] == {"a": {"kind": "variant", "value": "smoke", "experiment": "exp"},
                              "b": {"kind": "variant", "value": "e2e", "experiment": "exp"}}


def test_nothing_to_compare_shows_the_chooser(client):
    data = client.get("/api/compare").json()
    assert data["groups"] is None
    r = client.get("/compare")
    chooser = one(r.text, "details.compare-chooser")
    assert r.status_code == 200 and text(chooser.summary) == "Choose two groups" and chooser.has_attr("open")
    assert text(one(r.text, "p.empty")).startswith("Nothing to compare yet")


def test_half_given_groups_are_a_clear_400(client, experiment):
    r = client.get("/api/compare", params={"a_experiment": "exp"})
    assert r.status_code == 400 and "b_experiment" in r.json()["error"]


def test_two_experiments_and_two_tags(client, ingest, tmp_path):
    recs = (run_records("x1", "t1", None, 0, passed=True, steps=2, tokens=20, elapsed=2, cost=0.2, experiment="X", tags=["fast"])
            + run_records("x2", "t2", None, 0, passed=False, steps=2, tokens=20, elapsed=2, cost=0.2, experiment="X", tags=["fast"])
            + run_records("y1", "t1", None, 0, passed=False, steps=4, tokens=40, elapsed=4, cost=0.4, experiment="Y", tags=["slow"])
            + run_records("y2", "t2", None, 0, passed=False, steps=8, tokens=80, elapsed=8, cost=0.8, experiment="Y", tags=["slow"]))
    assert ingest(write_jsonl(tmp_path / "xy.jsonl", recs)).ok
    for params in ({"a_experiment": "X", "b_experiment": "Y"}, {"a_tag": "fast", "b_tag": "slow"}):
        s = client.get("/api/compare", params=params).json()["summary"]
        assert s["paired"] == 2
        assert s["confusion"] == {"pass_pass": 0, "pass_fail": 1, "fail_pass": 0, "fail_fail": 1}
        assert (s["steps"]["a"], s["steps"]["b"]) == (4, 12)
        assert s["steps"]["saved_pct"] == pytest.approx(100 * 8 / 12)
    # a pair of two experiments links back to their comparison
    doc = page(client.get("/pair", params={"a": "x1", "b": "y1"}).text)
    assert attrs(doc, "p.pair-back a", "href") == ["/compare?a_experiment=X&b_experiment=Y"]
    assert select_texts(doc, "p.pair-back a") == ["← all pairs of experiment X against Y"]


def test_the_chooser_starts_at_two_different_groups_and_the_pager_keeps_the_page_size(client, ingest, tmp_path):
    recs = []
    for i in range(5):
        recs += run_records(f"x{i}", f"t{i}", None, 0, passed=True, steps=2, tokens=20, elapsed=2, cost=0.2, experiment="X", tags=["fast"])
        recs += run_records(f"y{i}", f"t{i}", None, 0, passed=True, steps=3, tokens=30, elapsed=3, cost=0.3, experiment="Y", tags=["slow"])
    assert ingest(write_jsonl(tmp_path / "c.jsonl", recs)).ok
    doc = page(client.get("/compare", params={"a_tag": "fast", "b_tag": "slow"}).text)
    chosen = {s["name"]: one(s, "option[selected]")["value"] for s in doc.select("details.compare-chooser select")
              if s.find("option", selected=True)}
    assert (chosen["a_experiment"], chosen["b_experiment"]) == ("X", "Y")      # not X and X: that is a 400
    assert (chosen["a_tag"], chosen["b_tag"]) == ("fast", "slow")
    doc = page(client.get("/compare", params={"a_experiment": "X", "b_experiment": "Y", "limit": 2}).text)
    nxt = one(doc, "p.pairs-pager a")
    assert "limit=2" in nxt["href"] and "offset=2" in nxt["href"] and nxt["hx-push-url"] == "true"
    assert one(doc, '#pair-controls input[name="limit"]')["value"] == "2"


def test_a_run_with_both_tags_is_never_paired_with_itself(client, ingest, tmp_path):
    # x1 carries both tags: comparing `fast` with `slow` would pair it with itself (1 of 1
    # agreeing). It is left out of both sides and named; x2/y2 still pair on task t2.
    recs = (run_records("x1", "t1", None, 0, passed=True, steps=2, tokens=20, elapsed=2, cost=0.2, tags=["fast", "slow"])
            + run_records("x2", "t2", None, 0, passed=True, steps=2, tokens=20, elapsed=2, cost=0.2, tags=["fast"])
            + run_records("y2", "t2", None, 0, passed=False, steps=8, tokens=80, elapsed=8, cost=0.8, tags=["slow"]))
    assert ingest(write_jsonl(tmp_path / "both.jsonl", recs)).ok
    data = client.get("/api/compare", params={"a_tag": "fast", "b_tag": "slow"}).json()
    assert [(p["a"]["run_id"], p["b"]["run_id"]) for p in data["pairs"]] == [("x2", "y2")]
    assert data["in_both"] == ["x1"] and data["summary"]["in_both"] == 1
    assert data["summary"]["only_a"] == [] and data["summary"]["only_b"] == []
    doc = page(client.get("/compare", params={"a_tag": "fast", "b_tag": "slow"}).text)
    assert attrs(doc, "#in-both a.tag", "href") == ["/runs/x1"]


def test_duplicates_started_at_the_same_moment_keep_the_one_written_last(client, ingest, tmp_path):
    # ties of the start time go to the run stored last, which is the one the file wrote last
    names = [f"dup-{c}" for c in "qwertyuiop"]  # not in sorted order, so a set's order would show
    recs = [r for n in names for r in run_records(n, "t1", "smoke", 0, passed=True, steps=2, tokens=20, elapsed=2, cost=0.2)]
    recs += run_records("e", "t1", "e2e", 0, passed=True, steps=2, tokens=20, elapsed=2, cost=0.2)
    assert ingest(write_jsonl(tmp_path / "dups.jsonl", recs)).ok
    data = client.get("/api/compare", params={"experiment": "exp", "a": "smoke", "b": "e2e"}).json()
    assert data["pairs"][0]["a"]["run_id"] == names[-1]
    assert {d["run_id"] for d in data["duplicates"]["a"]} == set(names[:-1])


def test_unfinished_run_counts_as_not_graded_and_zero_b_gives_null_savings(client, ingest, tmp_path):
    recs = (run_records("s1", "t1", "smoke", 0, passed=True, steps=0, tokens=0, elapsed=0, cost=0)
            + run_records("e1", "t1", "e2e", 0, passed=True, steps=0, tokens=0, elapsed=0, cost=0, finished=False))
    assert ingest(write_jsonl(tmp_path / "u.jsonl", recs), closed=False).ok
    s = client.get("/api/compare", params={"experiment": "exp", "a": "smoke", "b": "e2e"}).json()["summary"]
    assert s["paired"] == 1 and s["not_graded"] == 1
    assert s["verdict_agreement"] == {"agree": 0, "total": 0}
    assert s["steps"] == {**s["steps"], "a": 0, "b": 0, "saved_pct": None}


def test_page_shows_headline_matrix_bars_and_links_to_pairs(client, experiment):
    r = client.get("/compare", params={"experiment": "exp", "a": "smoke", "b": "e2e"})
    assert r.status_code == 200
    doc = page(r.text)
    assert text(one(doc, "#headline")).startswith("Verdicts identical on 3 of 4 paired runs (3 tasks)")
    # the chart shows changes (a saving is negative): the heading says so, never "saved" over a minus
    heading = text(one(doc, 'section[aria-label="Savings"] h2'))
    assert heading.startswith("smoke against e2e change of the totals over paired runs (−36% is 36% less, a saving")
    assert "saved" not in heading
    bars = one(doc, 'section[aria-label="Savings"] svg.bars')
    assert bars.select("rect.bar-a") and len(bars.select("rect.bar-a")) == len(bars.select("rect.bar-b"))
    early = {text(tr.th): text(tr.td) for tr in doc.select('section[aria-label="Early stop"] table.early-breakdown tr')}
    # t1 #1: smoke stopped on a pass, e2e failed; the count also takes an e2e error, and says so
    assert early["stopped early and disagreed — 1 stopped on a pass that e2e later failed or errored"] == "1"
    assert "/pair?a=s-t1-1&b=e-t1-1" in attrs(doc, "table.pairs tr.pair-row a.pair-link", "href")
    fragment = page(client.get("/compare", params={"experiment": "exp", "a": "smoke", "b": "e2e", "only": "disagree"},
                               headers={"HX-Request": "true"}).text)
    assert fragment.find("html") is None and len(fragment.select("tr.pair-row")) == 1
    assert fragment.select("tr.pair-row.disagree")


def test_each_bar_shows_its_change_inside_its_interval_in_one_sign(client, experiment):
    import re

    summary = client.get("/api/compare", params={"experiment": "exp", "a": "smoke", "b": "e2e"}).json()["summary"]
    doc = page(client.get("/compare", params={"experiment": "exp", "a": "smoke", "b": "e2e"}).text)
    shown = 0
    assert select_texts(doc, "svg.bars text.bar-label")[0] == "steps"
    bars = doc.select("svg.bars text.bar-saved")
    cis = {t.find_previous("text", class_="bar-saved"): t for t in doc.select("svg.bars text.bar-ci")}
    sign = {"−": -1, "+": 1, "": 1}
    for saved in bars:
        m = re.fullmatch(r"([−+]?)(\d+)%", text(saved))
        assert m, text(saved)
        point = sign[m.group(1)] * int(m.group(2))
        ci = cis.get(saved)
        if ci is None:
            continue
        m2 = re.fullmatch(r"CI ([−+]?)(\d+)%…([−+]?)(\d+)%", ci.find(string=True, recursive=False).strip())
        assert m2, text(ci)
        low, high = sign[m2.group(1)] * int(m2.group(2)), sign[m2.group(3)] * int(m2.group(4))
        assert low <= point <= high
        shown += 1
    steps = summary["steps"]
    # steps: the change is minus the saving, its interval minus the saving's, reversed
    assert text(bars[0]) == f"−{round(steps['saved_pct'])}%"
    assert shown >= 1


def test_pair_view_aligns_steps_and_marks_what_smoke_did_not_run(client, experiment):
    data = client.get("/api/pair", params={"a": "s-t1-1", "b": "e-t1-1"}).json()
    assert data["a"]["run"]["run_id"] == "s-t1-1" and data["b"]["run"]["run_id"] == "e-t1-1"
    assert data["stop_a"] == 2  # the early_stop record's step (3 steps: 0, 1, 2)
    rows = data["steps"]
    assert [r["step"] for r in rows] == list(range(8))
    assert [r["not_run_by_a"] for r in rows] == [False, False, False, True, True, True, True, True]
    assert rows[2]["stop_here"] is True and rows[2]["a"]["actions"] == ["tool2"]
    armed = {c["id"]: c for c in data["a"]["criteria"]}
    assert armed["c1"]["armed"] is True and armed["c2"]["advisory"] is True
    doc = page(client.get("/pair", params={"a": "s-t1-1", "b": "e-t1-1"}).text)
    steps = doc.select('section[aria-label="Steps side by side"] table.pair-steps tbody tr')
    assert [tr["id"] for tr in steps if "not-run" in tr["class"]] == [f"pair-step-{n}" for n in range(3, 8)]
    assert select_texts(doc, "tr.not-run .not-run-label") == ["not run by smoke"] * 5
    assert [tr["id"] for tr in steps if "stop-here" in tr["class"]] == ["pair-step-2"]
    assert select_texts(doc, "tr#pair-step-2 .stop-mark") == ["■ smoke stopped here"]
    assert attrs(doc, "p.pair-back a", "href") == ["/compare?experiment=exp&a=smoke&b=e2e"]


def test_pair_without_b_finds_the_twin(client, experiment):
    data = client.get("/api/pair", params={"a": "s-t4-0"}).json()
    assert data["b"]["run"]["run_id"] == "e-t4-0"
    assert client.get("/api/pair", params={"a": "s-t5-0"}).status_code == 404
    assert client.get("/api/pair", params={"a": "nope", "b": "e-t4-0"}).status_code == 404
    same = client.get("/api/pair", params={"a": "s-t4-0", "b": "s-t4-0"})
    assert (same.status_code, same.json()["error"]) == (400, "that is the same run twice: give b another run's id")
    # an id pasted with spaces around it (a copied cell) is the run it names; spaces alone ask for the twin
    pasted = client.get("/api/pair", params={"a": "s-t1-1", "b": "  e-t1-1\t"}).json()
    assert pasted["b"]["run"]["run_id"] == "e-t1-1"
    assert client.get("/api/pair", params={"a": "s-t4-0", "b": "   "}).json()["b"]["run"]["run_id"] == "e-t4-0"


def test_one_variant_named_compares_it_with_the_experiments_other_variant(client, ingest, tmp_path):
    from tests.conftest import write_jsonl

    recs = []
    for variant in ("smoke", "e2e"):
        rid = f"{variant}-t"
        recs += [{"type": "run_start", "run_id": rid, "experiment": "E1", "variant": variant, "task_id": "t"},
                 {"type": "run_end", "run_id": rid, "status": "completed", "stop_reason": "final", "steps": 2}]
    ingest(write_jsonl(tmp_path / "e.jsonl", recs))
    body = client.get("/api/compare", params={"experiment": "E1", "a": "smoke"}).json()
    assert (body["groups"]["a"]["value"], body["groups"]["b"]["value"], body["summary"]["paired"]) == ("smoke", "e2e", 1)
    body = client.get("/api/compare", params={"experiment": "E1", "b": "smoke"}).json()
    assert (body["groups"]["a"]["value"], body["groups"]["b"]["value"]) == ("e2e", "smoke")


def test_a_page_of_pairs_past_the_end_goes_to_the_last_page(client, experiment):
    # Five pairs (t1 #0, t1 #1, t2 #0, t3 #0, t4 #0; t5 and t6 ran on one side only) in pages
    # of 2 start at 0, 2 and 4. An old link to offset 99999 said "rows 0–99999 of 5".
    base = {"experiment": "exp", "a": "smoke", "b": "e2e"}
    assert client.get("/api/compare", params=base).json()["pairs_total"] == 5
    moved = client.get("/compare", params={**base, "sort": "savings", "limit": 2, "offset": 99999}, follow_redirects=False)
    assert (moved.status_code, moved.headers["location"]) == (
        303, "/compare?experiment=exp&a=smoke&b=e2e&sort=savings&limit=2&offset=4")
    # one pair disagrees (t1 #1): its only page starts at 0, and the address then names no offset
    moved = client.get("/compare", params={**base, "only": "disagree", "offset": 5}, follow_redirects=False)
    assert moved.headers["location"] == "/compare?experiment=exp&a=smoke&b=e2e&only=disagree"
    api = client.get("/api/compare", params={**base, "limit": 2, "offset": 5})
    assert api.status_code == 404
    assert api.json()["error"] == "offset 5 is past the end: 5 pairs (the last page starts at offset 4)"
    assert client.get("/api/compare", params={**base, "only": "disagree", "offset": 1}).json()["error"] == (
        "offset 1 is past the end: 1 pair disagree (the last page starts at offset 0)")
    last = client.get("/api/compare", params={**base, "limit": 2, "offset": 4}).json()
    assert len(last["pairs"]) == 1 and last["pairs_offset"] == 4     # the last page itself is served


def test_a_saving_below_zero_reads_with_a_minus_sign(client, ingest, tmp_path):
    # smoke took 6 steps where e2e took 4: a saving of (4 - 6) / 4 = -50%, shown "−50%" (U+2212)
    # as compare's changes read, not "-50%"
    recs = (run_records("s", "t1", "smoke", 0, passed=True, steps=6, tokens=60, elapsed=6, cost=0.6)
            + run_records("e", "t1", "e2e", 0, passed=True, steps=4, tokens=40, elapsed=4, cost=0.4))
    assert ingest(write_jsonl(tmp_path / "more.jsonl", recs)).ok
    doc = page(client.get("/compare", params={"experiment": "exp", "a": "smoke", "b": "e2e"}).text)
    row = text(one(doc, "tr.pair-row"))
    assert "−50%" in row and "-50%" not in row


def test_whole_percent_figures_carry_a_true_minus_sign():
    from qita_board.present import fmt_whole

    assert [fmt_whole(v) for v in (-49.6, -0.4, 0, 12.5, 13.5, None, float("nan"))] == [
        "−50", "0", "0", "12", "14", "—", "—"]   # halves to even, as Python's round
