"""The simulation on a crafted set of runs, every figure worked out by hand in the comments."""

from __future__ import annotations

import pytest

from qita_board.lab.sim import Crit, Policy, SimRun, check_on_cut, outcome, settle, simulate


def run(name: str, n: int, per_step: int, verdict: str, *, tests_at=None, push_fail_at=None, declared=None,
        within=None, budget=None, source="qita") -> SimRun:
    """A run of `n` steps (indexes 0..n-1, so step = ordinal - 1) spending `per_step` tokens a step,
    with `tests` (a count to reach: live pass only) and `no_push` (must-not-run: live fail only)."""
    cum = [float(per_step * (i + 1)) for i in range(n)]
    crits = {
        "tests": Crit("tests", "command_executed", ("pass",), "pass" if tests_at else None, tests_at, None, None,
                      declared, within),
        "no_push": Crit("no_push", "command_executed", ("fail",), "fail" if push_fail_at else None, push_fail_at,
                        None, 1, "fail" if declared else None, None),
    }
    row = {"id": hash(name) % 10_000, "run_id": name, "task_id": name, "replicate": 0, "verdict": verdict,
           "stop_reason": "final", "steps": n, "tool_calls": n, "tokens_total": per_step * n, "cost_usd": None,
           "agent_elapsed_s": float(n), "elapsed_s": float(n) + 10, "status": "completed", "source_format": source,
           "budget_max_tokens": budget, "early_stopped": False}
    series = {"tokens": cum, "counted": None, "seconds": [float(i + 1) for i in range(n)], "cost": None,
              "calls": [float(i + 1) for i in range(n)]}
    return SimRun(row=row, step_count=n, first_step=0, series=series, crits=crits)


def crafted() -> list[SimRun]:
    return [
        run("r1", 5, 100, "pass", tests_at=2),                    # tests at step 2, never pushes
        run("r2", 6, 100, "fail", tests_at=2, push_fail_at=4),    # tests at 2, then pushes at 4
        run("r3", 4, 100, "fail"),                                # never tests, never pushes
        run("r4", 5, 50, "pass", tests_at=5),                     # tests on its very last step
    ]


ARM = (("tests", "pass"), ("no_push", "fail"))


def by_run(result):
    return {p["run_id"]: p for p in result["pairs"]}


def test_gate_rule_stops_on_the_pass_and_lets_a_later_push_through():
    result = simulate(Policy(arm=ARM, rule="gate"), crafted())
    p, s = by_run(result), result["summary"]
    # r1: tests pass at 2, the must-not-run check passes on the cut run -> pass, 2 steps, 200 tokens
    assert (p["r1"]["sim"]["stop_step"], p["r1"]["a"]["verdict"], p["r1"]["a"]["steps"], p["r1"]["a"]["tokens"]) == \
        (1, "pass", 2, 200)
    # r2: cut at 2 as well, before the push at 4: a false pass
    assert (p["r2"]["a"]["verdict"], p["r2"]["b"]["verdict"], p["r2"]["a"]["tokens"]) == ("pass", "fail", 200)
    # r3 never settles, r4 settles on its last step: both end as recorded
    assert not p["r3"]["sim"]["cut"] and not p["r4"]["sim"]["cut"]
    assert p["r4"]["a"]["verdict"] == "pass" and p["r4"]["a"]["tokens"] == 250
    assert s["verdict_agreement"] == {"agree": 3, "total": 4}
    assert s["confusion"] == {"pass_pass": 2, "pass_fail": 1, "fail_pass": 0, "fail_fail": 1}
    assert (s["false_passes"]["count"], s["false_passes"]["of"]) == (1, 4)
    # steps 2+2+4+5 = 13 against 5+6+4+5 = 20; tokens 200+200+400+250 = 1050 against 1750
    assert (s["steps"]["a"], s["steps"]["b"]) == (13, 20) and s["steps"]["saved_pct"] == pytest.approx(35.0)
    assert (s["tokens"]["a"], s["tokens"]["b"]) == (1050, 1750) and s["tokens"]["saved_pct"] == pytest.approx(40.0)
    # agent time: 2+2+4+5 = 13 s against 20 s; end to end keeps each run's 10 s outside the steps
    assert (s["agent_s"]["a"], s["elapsed_s"]["a"], s["elapsed_s"]["b"]) == (13, 53, 60)
    assert s["cut"] == 2 and s["cut_by"] == {"early_stop": 2}
    assert result["headline"].startswith("Verdicts identical on 3 of 4")


def test_all_rule_waits_for_every_armed_criterion_in_its_polarity():
    p = by_run(simulate(Policy(arm=ARM, rule="all"), crafted()))
    # only r2 has both: tests pass at 2 and the push failing at 4 -> cut at 4, gated on both -> fail
    assert [k for k, v in p.items() if v["sim"]["cut"]] == ["r2"]
    assert (p["r2"]["sim"]["steps_taken"], p["r2"]["a"]["verdict"], p["r2"]["a"]["tokens"]) == (4, "fail", 400)
    assert p["r2"]["sim"]["deciding_criterion"] == "no_push"
    assert p["r2"]["sim"]["early_stop_reason"] == "criterion_failed"


def test_must_not_run_armed_on_fail_alone():
    result = simulate(Policy(arm=(("no_push", "fail"),)), crafted())
    p = by_run(result)
    # the push at step 4 (index 3) decides r2: cut there, failed; every verdict agrees; 18 of 20 steps
    assert p["r2"]["sim"]["stop_step"] == 3 and p["r2"]["a"]["verdict"] == "fail"
    assert result["summary"]["verdict_agreement"] == {"agree": 4, "total": 4}
    assert (result["summary"]["steps"]["a"], result["summary"]["steps"]["b"]) == (18, 20)


def test_a_minimum_number_of_steps_delays_the_stop():
    p = by_run(simulate(Policy(arm=(("tests", "pass"),), min_steps=3), crafted()))
    # decided at 2, cut at 3: r1 300 tokens, r2 still a false pass (nothing else armed), r4 not cut
    assert (p["r1"]["sim"]["steps_taken"], p["r1"]["a"]["tokens"]) == (3, 300)
    assert (p["r2"]["a"]["verdict"], p["r2"]["b"]["verdict"]) == ("pass", "fail")
    assert not p["r4"]["sim"]["cut"]


def test_caps_stop_and_fail_and_come_before_an_early_stop_at_the_same_step():
    p = by_run(simulate(Policy(max_steps=3), crafted()))
    # every run longer than 3 steps is cut at 3 and fails like an exhausted budget
    assert {k: (v["sim"]["stop_reason"], v["a"]["verdict"]) for k, v in p.items()} == {
        "r1": ("budget_steps", "fail"), "r2": ("budget_steps", "fail"), "r3": ("budget_steps", "fail"),
        "r4": ("budget_steps", "fail")}
    tokens = by_run(simulate(Policy(max_tokens=250), crafted()))
    # r1, r2, r3 pass 250 tokens after step 3 (300 > 250); r4 reaches exactly 250: not over
    assert [k for k, v in tokens.items() if v["sim"]["cut"]] == ["r1", "r2", "r3"]
    same_step = outcome(Policy(arm=(("tests", "pass"),), max_steps=2), crafted()[0])
    assert (same_step.ordinal, same_step.reason, same_step.verdict) == (2, "budget_steps", "fail")


def test_a_decision_budget_fails_a_run_whose_armed_criterion_is_late():
    # coder_eval's idea (stop_early.decide_within), so its rule: the test run settles the gate
    late = run("late", 6, 10, "pass", tests_at=4, declared="pass", within=3, source="coder_eval")
    out = outcome(Policy(declared=True), late)
    assert (out.ordinal, out.reason, out.verdict, out.deciding) == (3, "decision_budget_exceeded", "fail", "tests")
    on_time = run("ok", 6, 10, "pass", tests_at=3, declared="pass", within=3, source="coder_eval")
    out = outcome(Policy(declared=True), on_time)
    assert (out.ordinal, out.reason, out.verdict) == (3, "early_stop", "pass")
    # the budget only belongs to the runs' own arming, not to a policy chosen in the lab
    assert outcome(Policy(arm=(("tests", "pass"),)), late).reason == "early_stop"


def test_a_cut_run_over_its_own_token_budget_fails():
    over = run("over", 5, 100, "fail", tests_at=2, budget=150)
    out = outcome(Policy(arm=(("tests", "pass"),)), over)
    # 200 tokens after 2 steps > 150
    assert (out.ordinal, out.verdict) == (2, "fail") and "200 > 150" in out.verdict_reason
    assert outcome(Policy(arm=(("tests", "pass"),)), run("under", 5, 100, "pass", tests_at=2, budget=250)).verdict == "pass"


def test_auto_rule_follows_the_producer():
    ce = run("ce", 6, 100, "fail", tests_at=2, push_fail_at=4, source="coder_eval")
    assert outcome(Policy(arm=ARM), ce).ordinal == 2       # gate: the pass settles it
    qita = run("q", 6, 100, "fail", tests_at=2, push_fail_at=4)
    assert outcome(Policy(arm=ARM), qita).ordinal == 4     # all: waits for the push too


def test_the_check_on_a_cut_run():
    must_not = Crit("n", "command_executed", ("fail",), None, None, None, pass_from=1)
    to_reach = Crit("t", "command_executed", ("pass",), None, None, None, pass_from=None)
    bounded = Crit("b", "command_executed", ("fail",), None, None, None, pass_from=3)
    decided = Crit("d", "skill_triggered", ("fail", "pass"), "fail", 2, 2)
    assert [check_on_cut(c, 2) for c in (must_not, to_reach, bounded, decided)] == ["pass", "fail", "fail", "fail"]
    assert check_on_cut(bounded, 3) == "pass" and check_on_cut(decided, 1) == "fail"


def test_settle_counts_a_whole_step_together():
    a = Crit("a", None, ("pass",), "pass", 2, 3)
    b = Crit("b", None, ("fail",), "fail", 2, 2)
    # both decided in step 2: the last by tool call (a, call 3) decides, whatever the armed order
    assert settle({"b": "fail", "a": "pass"}, {"a": a, "b": b}) == (2, "a")
    assert settle({"a": "fail"}, {"a": a}) is None   # decided in the other polarity: never stops


# -- coder_eval's weighted armed gate ------------------------------------------------------------

def gated(name: str, *, threshold=None, tests_at=None, guard_fail_at=None, weights=(1.0, 1.0), within=None,
          calls_per_step=1, n=6, verdict="pass") -> SimRun:
    """A coder_eval run: `tests` (armed on pass and fail: on_pass stop) and `guard` (a
    must-not-run check, armed on fail), with their weights and the run's gate threshold."""
    r = run(name, n, 100, verdict, tests_at=tests_at, push_fail_at=guard_fail_at, source="coder_eval")
    r.crits["tests"].declared, r.crits["tests"].decide_within = "decided", within
    r.crits["tests"].weight, r.crits["no_push"].weight = weights
    r.crits["no_push"].declared = "fail"
    r.series["calls"] = [float(calls_per_step * (i + 1)) for i in range(n)]
    r.gate_threshold = threshold
    return r


def test_a_failed_guard_below_the_gate_threshold_does_not_stop_the_run():
    # weights 2 (tests) and 1 (guard), threshold 0.6: the guard failing at step 2 leaves a
    # ceiling of 2/3 >= 0.6, so no fail-stop; tests passing at 4 gives the pass-armed floor
    # 2/2 >= 0.6: a pass-stop at 4, and the gate 2/3 >= 0.6 passes the run
    r = gated("b04", threshold=0.6, tests_at=4, guard_fail_at=2, weights=(2.0, 1.0))
    out = outcome(Policy(declared=True), r)
    assert (out.ordinal, out.reason, out.early_stop_reason, out.deciding, out.verdict) == (
        4, "early_stop", "criterion_passed", "tests", "pass")
    # the same run under the default threshold 1: the fail-stop waits for tests (it can
    # still pass), and at 4 the ceiling 2/3 < 1 stops it as failed
    out = outcome(Policy(declared=True), gated("strict", tests_at=4, guard_fail_at=2, weights=(2.0, 1.0)))
    assert (out.ordinal, out.early_stop_reason, out.deciding, out.verdict) == (4, "criterion_failed", "no_push", "fail")


def test_a_fail_stop_waits_while_an_armed_criterion_can_still_pass():
    # the guard fails at 2 but tests never decide: the run is never cut (it ends as recorded)
    out = outcome(Policy(declared=True), gated("held", guard_fail_at=2, verdict="fail"))
    assert not out.cut and out.verdict == "fail"


def test_a_decision_budget_counts_tool_calls():
    # decide_within 3 tool calls with 2 calls a step runs out at the step holding call 3: step 2
    out = outcome(Policy(declared=True), gated("calls", tests_at=5, within=3, calls_per_step=2))
    assert (out.ordinal, out.reason, out.verdict) == (2, "decision_budget_exceeded", "fail")
    assert out.verdict_reason == "tests was not decided within 3 tool calls"
    # decided within the budget (step 2 holds calls 3 and 4): a pass-stop there
    out = outcome(Policy(declared=True), gated("in time", tests_at=2, within=3, calls_per_step=2))
    assert (out.ordinal, out.reason, out.verdict) == (2, "early_stop", "pass")
