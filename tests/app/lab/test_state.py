"""A run's lab state from its specs and step records, checked by hand."""

from __future__ import annotations

from qita_board.lab.state import run_state, signature, step_tool_calls

SPECS = [
    {"id": "tests", "type": "command_executed", "pattern": "pytest"},
    {"id": "tests_ok", "type": "command_executed", "pattern": "pytest", "require_success": True},
    {"id": "no_push", "type": "command_executed", "pattern": "git push", "max_count": 0, "stop_when": "fail"},
    {"id": "edits", "type": "tool_invoked", "tool": "edit", "min_count": 2, "max_count": 3},
    {"id": "pdf", "type": "skill_triggered", "skill": "pdf", "armable_as": "decided", "decide_within": 4},
    {"id": "report", "type": "file_exists", "path": "REPORT.md"},
]


def step(i, *calls, tokens=None, duration=1.0, **extra):
    actions = [{"name": n, "args": a} for n, a, _r in calls]
    results = [r for _n, _a, r in calls]
    return {"step": i, "tokens_total": tokens, "duration_s": duration, "cost_usd": None,
            "record": {"type": "step", "step": i, "actions": actions, "action_results": results, **extra}}


STEPS = [
    step(0, ("bash", {"command": "ls"}, {"returncode": 0}), tokens=10),
    step(1, ("bash", {"command": "pytest -q"}, {"returncode": 1}), tokens=20),
    step(2, ("edit", {"path": "a.py"}, {"ok": True}), ("edit", {"path": "b.py"}, {"ok": True})),
    step(3, ("bash", {"command": "git push"}, {"returncode": 0}), tokens=30),
    step(4, ("skill", {"name": "pdf"}, {"loaded": True}), tokens=40),
]


def by_id(state):
    return {c.id: c for c in state.criteria}


def test_decisions_replayed_from_the_recorded_calls():
    state = run_state(specs=SPECS, steps=STEPS)
    c = by_id(state)
    # calls: ls 1, pytest 2, edit 3, edit 4, push 5, skill 6
    assert (c["tests"].verdict, c["tests"].step, c["tests"].tool_call_index) == ("pass", 1, 2)
    assert c["tests_ok"].verdict is None          # pytest exited 1: it does not count
    assert (c["no_push"].verdict, c["no_push"].step, c["no_push"].tool_call_index) == ("fail", 3, 5)
    assert (c["pdf"].verdict, c["pdf"].step, c["pdf"].tool_call_index) == ("pass", 4, 6)
    assert c["edits"].verdict is None and c["edits"].polarities == ("fail",)   # 2 edits, never over 3
    assert {k: v.source for k, v in c.items()} == {"tests": "replayed", "tests_ok": "replayed", "no_push": "replayed",
                                                   "edits": "replayed", "pdf": "replayed", "report": None}
    assert state.source == "replayed" and state.first_step == 0 and state.step_count == 5


def test_what_a_check_gives_on_a_cut_run_and_what_the_specs_declare():
    c = by_id(run_state(specs=SPECS, steps=STEPS))
    assert c["no_push"].pass_from_step == 0      # must-not-run: passes on any cut before the push
    assert c["edits"].pass_from_step == 2        # its minimum of 2 edits is reached in step 2
    assert c["tests"].pass_from_step is None and c["pdf"].pass_from_step is None
    assert (c["no_push"].declared, c["pdf"].declared, c["pdf"].decide_within, c["tests"].declared) == \
        ("fail", "decided", 4, None)


def test_a_criterion_that_cannot_be_evaluated_live_says_why():
    report = by_id(run_state(specs=SPECS, steps=STEPS))["report"]
    assert report.polarities == () and report.verdict is None
    assert "file_exists" in report.reason and "cannot be armed" in report.reason


def test_cumulative_figures_and_digests():
    state = run_state(specs=SPECS, steps=STEPS)
    assert state.series["tokens"] == [10, 30, 30, 60, 100]       # step 2 recorded no tokens
    assert state.series["calls"] == [1, 2, 4, 5, 6]
    assert state.series["seconds"] == [1, 2, 3, 4, 5]
    assert state.series["cost"] is None and state.series["counted"] is None
    again = run_state(specs=[], steps=STEPS)
    assert again.signatures == state.signatures and len(set(state.signatures)) == 5
    assert signature([{"name": "bash", "args": {"command": "ls"}}]) != signature([{"name": "bash", "args": {"command": "ls -a"}}])


def test_counted_tokens_follow_the_budgets_buckets():
    steps = [step(0, tokens=100)]
    steps[0]["record"]["tokens"] = {"input": 80, "output": 20, "total": 100, "cache_read": 50, "cache_write": 10}
    state = run_state(specs=[], steps=steps, tokens_counted=["uncached_input", "output"])
    assert state.series["counted"] == [40]       # uncached 80 - 50 - 10 = 20, plus 20 output


def test_recorded_live_verdicts_win_and_cover_criteria_only_code_can_evaluate():
    steps = [dict(s, record=dict(s["record"])) for s in STEPS]
    for s in steps:
        i = s["step"]
        s["record"]["live_verdicts"] = {"tests": "pass" if i >= 1 else "undecided",
                                        "custom": "fail" if i >= 2 else "undecided"}
    c = by_id(run_state(specs=[*SPECS, {"id": "custom", "type": "callable"}], steps=steps))
    # the engine's verdict, with the replay's call index when they agree
    assert (c["tests"].source, c["tests"].verdict, c["tests"].step, c["tests"].tool_call_index) == \
        ("recorded", "pass", 1, 2)
    assert (c["custom"].source, c["custom"].verdict, c["custom"].step, c["custom"].tool_call_index) == \
        ("recorded", "fail", 2, None)
    # criteria the engine did not record are replayed
    assert c["no_push"].source == "replayed"


def test_tool_calls_in_every_spelling():
    qitos = {"tool_invocations": [{"tool_name": "Bash", "parameters": {"command": "ls"}, "result_status": "error",
                                   "error_message": "boom"}]}
    assert step_tool_calls(qitos) == qitos["tool_invocations"]
    rec = {"decision": {"actions": [{"name": "bash", "args": {"cmd": "x"}}]},
           "action_results": [{"status": "error", "returncode": 2}],
           "tool_invocations": [{"tool_name": "bash", "status": "ok", "error": None}]}
    # the invocation's status is the call's own; the result's exit code beside it
    assert step_tool_calls(rec) == [{"name": "bash", "args": {"cmd": "x"}, "status": "ok", "exit_code": 2}]


def test_series_pack_and_unpack_without_loss():
    from qita_board.lab.state import pack_series, unpack_series

    series = {"tokens": [10.0, 30.0], "counted": None, "seconds": [0.5, 1.25], "cost": None, "calls": [1.0, 3.0]}
    back = unpack_series(pack_series(series, 2), 2)
    assert {k: (list(v) if v is not None else None) for k, v in back.items()} == series
    assert unpack_series(b"", 2) == {k: None for k in series} and unpack_series(b"\0" * 7, 2)["tokens"] is None


def test_a_negative_value_never_makes_a_total_go_down():
    state = run_state(specs=[], steps=[step(0, tokens=10, duration=2.0), step(1, tokens=-5, duration=-1.0),
                                       step(2, tokens=5, duration=1.0)])
    assert state.series["tokens"] == [10, 10, 15] and state.series["seconds"] == [2, 2, 3]


def test_a_criterion_weight_and_the_gate_threshold_are_kept():
    from qita_board.criteria import gate_threshold_of

    specs = [{"id": "tests", "type": "command_executed", "pattern": "pytest", "weight": 2},
             {"id": "guard", "type": "command_executed", "pattern": "curl", "max_count": 0, "weight": -1},
             {"id": "plain", "type": "command_executed", "pattern": "ls"}]
    state = run_state(specs=specs, steps=[], gate_threshold=0.6)
    assert [c.weight for c in state.criteria] == [2.0, None, None]   # a negative weight weighs nothing it says
    assert state.gate_threshold == 0.6
    assert run_state(specs=specs, steps=[], gate_threshold=1.5).gate_threshold is None
    assert gate_threshold_of({"early_stop": {"enabled": False, "gate_threshold": 0.6}}) == 0.6
    assert gate_threshold_of({"early_stop": {"enabled": True}}) is None and gate_threshold_of(None) is None
