"""Flags on early stops, on hand-built dicts: each flag where it applies, none where none does."""

from __future__ import annotations

from qita_board.compare_flags import deciding_call, early_stop_flags, step_calls


def step(*calls, invocations=None):
    """A step record with calls given as (name, args, result)."""
    return {"actions": [{"name": n, "args": a} for n, a, _r in calls],
            "action_results": [r for _n, _a, r in calls],
            "tool_invocations": invocations or [{"tool_name": n, "call_index": i + 1} for i, (n, _a, _r) in enumerate(calls)]}


def crit(cid, *, passed=None, score=None, stop_when=None, gating=True, has_result=True, threshold=0.9):
    return {"criterion_id": cid, "type": "t", "gating": gating, "stop_when": stop_when, "has_spec": True,
            "has_result": has_result, "passed": passed, "score": score, "pass_threshold": threshold}


A = [crit("ran_tests", passed=True, stop_when="pass"), crit("says_fixed", passed=False)]
B_OK = [crit("ran_tests", passed=True), crit("says_fixed", passed=True)]


def flags(evidence, criteria_a=A, criteria_b=B_OK, verdict_a="pass", deciding="ran_tests"):
    return early_stop_flags(evidence=evidence, criteria_a=criteria_a, criteria_b=criteria_b, early_stop_enabled=True,
                            armed_ids=["ran_tests"], verdict_a=verdict_a, label_a="smoke", label_b="e2e", deciding=deciding)


def test_the_calls_of_a_step_and_which_failed():
    rec = step(("bash", {"command": "ls"}, {"returncode": 0, "stdout": "x"}),
               ("bash", {"command": "pytest -q"}, {"returncode": 1}),
               ("read", {"path": "a.txt"}, {"status": "error", "error": "no such file"}))
    calls = step_calls(rec)
    assert [(c["name"], c["summary"], c["call_index"], c["exit_code"], c["failed"]) for c in calls] == [
        ("bash", "ls", 1, 0, False), ("bash", "pytest -q", 2, 1, True), ("read", "a.txt", 3, None, True)]
    assert calls[2]["error"] == "no such file"
    assert deciding_call(rec, 2)["summary"] == "pytest -q"
    assert deciding_call(rec, 99)["call_index"] == 3  # no call carries the index: the step's last call
    assert deciding_call({"actions": []}, 1) is None


def test_no_flag_where_none_applies():
    ok = {"critics": [], "call": {"name": "bash", "summary": "pytest", "failed": False, "exit_code": 0}}
    assert flags(ok) == []


def test_a_critic_that_said_retry_on_the_deciding_step():
    evidence = {"critics": [{"critic": "ReturnCodeCritic", "action": "retry", "reason": "command failed with returncode=1"}],
                "call": None}
    got = flags(evidence)
    assert [f["kind"] for f in got] == ["critic_objected"]
    assert got[0]["text"] == "ReturnCodeCritic said retry on the deciding step: command failed with returncode=1"


def test_the_deciding_call_failed():
    call = deciding_call(step(("bash", {"command": "pytest tests -q"}, {"returncode": 1})), 1)
    got = flags({"critics": [], "call": call})
    assert [(f["kind"], f["text"]) for f in got] == [
        ("deciding_call_failed", "the deciding call failed: bash `pytest tests -q` (exit code 1)")]


def test_premature_pass_of_an_advisory_criterion_failed_in_the_full_run():
    b = [crit("ran_tests", passed=True), crit("says_fixed", passed=False)]
    got = flags({"critics": [], "call": None}, criteria_b=b)
    assert [(f["kind"], f["text"]) for f in got] == [
        ("premature_pass", "premature pass: says_fixed failed in e2e, advisory in smoke")]
    # a fail-stop is no premature pass
    assert flags({"critics": [], "call": None}, criteria_b=b, verdict_a="fail") == []


def test_premature_pass_of_an_armed_must_not_run_check_undecided_at_the_stop():
    a = [crit("ran_tests", passed=True, stop_when="decided"), crit("no_push", passed=True, stop_when="fail")]
    b = [crit("ran_tests", passed=True), crit("no_push", passed=False)]
    got = flags({"critics": [], "call": None}, criteria_a=a, criteria_b=b)
    assert [f["text"] for f in got] == ["premature pass: no_push failed in e2e, armed in smoke but undecided when it stopped"]
    # the deciding criterion itself failing later is not this flag
    b2 = [crit("ran_tests", passed=False), crit("no_push", passed=True)]
    assert flags({"critics": [], "call": None}, criteria_a=a, criteria_b=b2) == []


def test_informational_criteria_never_flag():
    a = [crit("ran_tests", passed=True, stop_when="pass"), crit("style", passed=False, gating=False)]
    b = [crit("ran_tests", passed=True), crit("style", passed=False, gating=False)]
    assert flags({"critics": [], "call": None}, criteria_a=a, criteria_b=b) == []
