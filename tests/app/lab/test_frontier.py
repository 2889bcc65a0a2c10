"""Candidate policies, their place on the frontier, and the recommended one, by hand."""

from __future__ import annotations

import pytest

from qita_board.lab.frontier import candidates, chart, frontier, min_steps_for, recommend
from qita_board.lab.sim import Policy
from tests.app.lab.test_sim import crafted

CATALOGUE = [
    {"id": "tests", "live": True, "polarities": ["pass"], "declared": {}},
    {"id": "no_push", "live": True, "polarities": ["fail"], "declared": {"fail": 3}},
    {"id": "skill", "live": True, "polarities": ["fail", "pass"], "declared": {}},
    {"id": "report", "live": False, "polarities": [], "declared": {}, "reason": "end-state"},
]


def test_the_candidates():
    got = candidates(CATALOGUE, min_steps=3, declared=True)
    plain = [p for p in got if p.min_steps is None]
    assert [p.label for p in plain] == [
        "tests:pass", "no_push:fail", "skill:fail", "skill:pass", "skill:decided",
        "tests:pass + skill:pass",                       # every one that can pass
        "no_push:fail + skill:fail",                     # every one that can fail
        "tests:pass + no_push:fail + skill:decided",     # all, each in its polarity
        "as each run declares", "as each run declares without no_push"]
    # each again with at least 3 steps; the end-state criterion is never armed
    assert len(got) == 2 * len(plain) and all(p.min_steps == 3 for p in got if p not in plain)
    assert not any("report" in p.label for p in got)


def test_an_informational_criterion_is_never_a_candidate():
    # gating: false never gates (the trace format), so arming it would let it decide verdicts
    catalogue = [*CATALOGUE[:2], {"id": "listed", "live": True, "polarities": ["pass"], "declared": {}, "gating": False}]
    got = candidates(catalogue, min_steps=3, declared=False)
    assert got and not any("listed" in p.label for p in got)


def test_min_steps_tried_is_half_the_median_length():
    assert min_steps_for(crafted()) == 2          # lengths 5, 6, 4, 5: median 5 -> 2 (at least 2)


def point(label, saved, fp, ff=0, armed=1, graded=10, min_steps=None):
    return {"label": label, "saved_pct": saved, "graded": graded, "armed_count": armed,
            "false_passes": {"count": fp}, "false_fails": {"count": ff}, "policy": {"min_steps": min_steps}}


def test_the_recommended_policy_saves_most_without_a_false_pass():
    points = [point("a", 60, 1), point("b", 40, 0, ff=2), point("c", 40, 0, ff=0), point("d", 10, 0)]
    assert recommend(points)["label"] == "c"           # b and c save as much; c fails fewer runs that passed
    assert recommend([point("a", 60, 1), point("z", 0, 0)]) is None


def test_the_frontier_of_the_crafted_runs():
    catalogue = [{"id": "tests", "live": True, "polarities": ["pass"], "declared": {}},
                 {"id": "no_push", "live": True, "polarities": ["fail"], "declared": {}}]
    f = frontier(crafted(), catalogue, measure="steps")
    by = {p["label"]: p for p in f["points"]}
    # tests alone: r1 and r2 cut at step 2 (r2 a false pass): 2+2+4+5 = 13 of 20 steps
    assert by["tests:pass"]["saved_pct"] == pytest.approx(35.0) and by["tests:pass"]["false_passes"]["count"] == 1
    # no_push alone: r2 cut at 4: 18 of 20 steps, no false pass
    assert by["no_push:fail"]["saved_pct"] == pytest.approx(10.0) and by["no_push:fail"]["false_passes"]["count"] == 0
    best = f["recommended"]
    assert best["label"] == "no_push:fail"
    # no false pass in 4 graded runs: the one-sided 95% bound is 1 - 0.05^(1/4)
    assert best["false_passes"]["upper"] == pytest.approx(1 - 0.05 ** 0.25)
    dots = {d["label"]: d for d in f["chart"]["dots"]}
    assert dots["no_push:fail"]["recommended"] and dots["no_push:fail"]["cy"] > dots["tests:pass"]["cy"]


def test_chart_geometry():
    points = [{**point("x", 50, 0), "index": 0, "recommended": True, "efficient": True,
               "false_passes": {"count": 0, "rate": 0.0}},
              {**point("y", 100, 2), "index": 1, "recommended": False, "efficient": True,
               "false_passes": {"count": 2, "rate": 0.2}}]
    c = chart(points)
    # x from 56 to 544 over 0..20%; y from 16 (100%) to 260 (0%)
    assert [(d["cx"], d["cy"]) for d in c["dots"]] == [(56.0, 138.0), (544.0, 16.0)]
    assert c["path"] == "56.0,138.0 544.0,16.0"
    assert Policy(arm=(("a", "pass"),), min_steps=3, max_tokens=1000).label == "a:pass, at least 3 steps, cap 1000 tokens"
