"""One home per rule: criteria classification (app.criteria), "did this step fail"
(app.step_failures) and the critic-action ranking (qita.engine.critic), read by every
module that needs them rather than copied."""

from __future__ import annotations

import pytest

from qita_board import compare_flags, criteria, derive, failures, step_failures, walk
from qita_board.queries import run_detail


def crit(cid, *, stop_when=None, gating=True, has_spec=True, has_result=True, passed=None, score=None, threshold=0.9):
    return {"criterion_id": cid, "stop_when": stop_when, "gating": gating, "has_spec": has_spec,
            "has_result": has_result, "passed": passed, "score": score, "pass_threshold": threshold}


def test_modules_read_the_rules_from_their_one_home():
    assert derive.armed_flags is criteria.armed_flags and derive.gating_flags is criteria.gating_flags
    assert failures.weigh is criteria.weigh
    assert compare_flags.weigh is criteria.weigh and compare_flags.failed is criteria.failed
    assert walk.step_errors is step_failures.step_errors
    assert compare_flags.result_failed is step_failures.result_failed
    from qita.engine import critic

    assert walk.ACTION_RANK is critic.ACTION_RANK is run_detail.ACTION_RANK


def test_an_early_stopped_run_is_gated_on_its_armed_criteria_the_rest_advisory():
    rows = [crit("a", stop_when="pass", score=0.95, passed=False), crit("b", passed=False), crit("i", gating=False)]
    weights = criteria.weigh(rows, early_stop_enabled=True, early_stopped=True)
    assert [(w.armed, w.advisory, w.informational) for w in weights] == [
        (True, False, False), (False, True, False), (False, False, True)]
    assert weights[0].passed is True  # armed: the score against the threshold comes first
    assert not any(criteria.weighs_against(w) for w in weights)
    assert derive.derive_verdict(rows, early_stopped=True, early_stop_enabled=True) == ("pass", "armed")


def test_the_early_stop_records_list_arms_only_with_the_switch_on():
    rows = [crit("a", passed=True), crit("b", passed=False)]
    assert criteria.armed_flags(rows, early_stop_enabled=True, armed_ids=["a"]) == [True, False]
    assert criteria.armed_flags(rows, early_stop_enabled=False, armed_ids=["a"]) == [False, False]
    assert derive.derive_verdict(rows, early_stopped=True, early_stop_enabled=True, armed_ids=["a"]) == ("pass", "armed")
    assert derive.derive_verdict(rows, early_stopped=True, early_stop_enabled=False, armed_ids=["a"]) == ("fail", "all")


def test_an_undeclared_result_is_informational_once_the_run_declares_criteria():
    rows = [crit("declared", passed=True), crit("stray", has_spec=False, passed=False)]
    assert criteria.gating_flags(rows) == [True, False]
    assert derive.derive_verdict(rows, early_stopped=False, early_stop_enabled=False) == ("pass", "all")
    shaped = failures.classify_criteria([{**r, "type": None} for r in rows], early_stop_enabled=False,
                                        early_stopped=False)
    assert [c["informational"] for c in shaped] == [False, True] and failures.failing_criteria(shaped) == []


@pytest.mark.parametrize("row, expected", [
    (crit("x", passed=False, score=0.99), True),
    (crit("x", score=0.5), True),
    (crit("x", score=0.95), False),
    (crit("x", has_result=False, passed=False), False),
])
def test_failed_is_recorded_passed_else_score_against_threshold(row, expected):
    assert criteria.failed(row) is expected


@pytest.mark.parametrize("record", [
    {"actions": [{"name": "sh"}], "action_results": [{"exit_code": 2}]},
    {"actions": [{"name": "sh"}], "action_results": [{"returncode": 1}]},
    {"actions": [{"name": "sh"}], "action_results": [{"ok": False}]},
    {"actions": [{"name": "sh"}], "action_results": [{"error": "boom"}]},
    {"actions": [{"name": "sh"}], "action_results": [{"status": "timeout"}]},
    {"actions": [{"name": "sh"}], "action_results": [{}], "tool_invocations": [{"status": "FAILED"}]},
    {"actions": [{"name": "sh"}], "action_results": [{}], "tool_invocations": [{"error": {"code": 2}}]},
])
def test_the_walk_and_the_compare_flags_agree_a_call_failed(record):
    assert step_failures.step_errors(record)
    assert [c["failed"] for c in compare_flags.step_calls(record)] == [True]


@pytest.mark.parametrize("record", [
    {"actions": [{"name": "sh"}], "action_results": [{"exit_code": 0, "status": "ok", "error": None}]},
    {"actions": [{"name": "sh"}], "action_results": [{}], "tool_invocations": [{"status": "success", "error": ""}]},
])
def test_the_walk_and_the_compare_flags_agree_a_call_succeeded(record):
    assert step_failures.step_errors(record) == []
    assert [c["failed"] for c in compare_flags.step_calls(record)] == [False]


@pytest.mark.parametrize(("passed", "weights", "threshold", "expected"), [
    ([True, False], [None, None], None, False),   # no threshold: every armed one must pass
    ([True, False], [1, 1], 0.5, True),           # half the weight passed, gate at 0.5
    ([True, False], [1, 3], 0.5, False),          # the heavy one failed: 0.25 < 0.5
    ([False, True], [1, 3], 0.75, True),          # 0.75 >= 0.75
    ([True], [0], None, False),                   # no weight at all fails closed
])
def test_the_armed_gate_is_weighted_against_the_runs_threshold(passed, weights, threshold, expected):
    assert criteria.armed_gate_passed(passed, weights, threshold) is expected


def test_an_early_stopped_run_passes_its_weighted_gate_with_one_armed_criterion_failed():
    rows = [{**crit("a", stop_when="fail", score=1.0), "weight": 1.0},
            {**crit("b", stop_when="fail", score=0.0), "weight": 1.0}]
    assert derive.derive_verdict(rows, early_stopped=True, early_stop_enabled=True) == ("fail", "armed")
    assert derive.derive_verdict(rows, early_stopped=True, early_stop_enabled=True,
                                 gate_threshold=0.5) == ("pass", "armed")
    # an armed criterion without a result weighs as not passed
    rows[1] = {**crit("b", stop_when="fail", has_result=False), "weight": 3.0}
    assert derive.derive_verdict(rows, early_stopped=True, early_stop_enabled=True,
                                 gate_threshold=0.5) == ("fail", "armed")


@pytest.mark.parametrize(("start", "expected"), [
    ({"early_stop": {"gate_threshold": 0.6}}, 0.6), ({"early_stop": {"gate_threshold": 0}}, 0.0),
    ({"early_stop": {"gate_threshold": -0.1}}, None),
    ({"early_stop": {"gate_threshold": 1.5}}, None), ({"early_stop": {"gate_threshold": True}}, None),
    ({"early_stop": None}, None), (None, None)])
def test_a_gate_threshold_is_read_only_when_it_is_a_share(start, expected):
    assert criteria.gate_threshold_of(start) == expected


def test_a_zero_threshold_in_the_early_stop_record_is_kept_not_read_as_absent():
    # coder_eval's EarlyStop.gate_threshold allows 0: every early stop passes its gate
    assert criteria.run_gate_threshold({"gate_threshold": 0.0}, {"early_stop": {"gate_threshold": 0.5}}) == 0.0
    assert criteria.run_gate_threshold({}, {"early_stop": {"gate_threshold": 0.5}}) == 0.5
    assert criteria.armed_gate_passed([False, False], [1, 1], 0.0) is True
