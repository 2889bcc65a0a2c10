"""Per-step live verdicts: what the engine records, the same verdicts replayed from plain data, what cannot be live."""

from __future__ import annotations

import pytest
from qita_helpers import echo_tools, of_type, read_records, step

from qita import (
    CallableCriterion,
    CommandExecuted,
    EarlyStopConfigError,
    Engine,
    FinalAnswerContains,
    SkillTriggered,
    ToolInvoked,
    TraceWriter,
)
from qita.agents import ScriptedAgent
from qita.core import ToolCall, Trajectory
from qita.demo import run_demo
from qita.live import (
    LiveTracker,
    armed_decided,
    early_stop_step,
    live_capabilities,
    replay_live_verdicts,
    tool_call_from_data,
)

NOTE = ("note", {"text": "x"})
PUSH = ("bash", {"command": "git push origin main"})
PDF = ("skill", {"name": "pdf"})
SCRIPT = [step(NOTE), step(PUSH), step(PDF), step(final="done")]


def criteria():
    return [ToolInvoked("noted", "note"), CommandExecuted("no_push", "git push", max_count=0),
            SkillTriggered("pdf", "pdf"), FinalAnswerContains("answer", "done")]


def run(script, crits, trace_file, **kw):
    with TraceWriter(trace_file, "r") as w:
        result = Engine(ScriptedAgent(script, tools=echo_tools()), criteria=crits, trace=w, **kw).run("t")
    return result, read_records(trace_file)


def actions_of(records):
    """The recorded actions of a trace, step by step, as plain data (what a reader of any trace has)."""
    out = []
    for s in of_type(records, "step"):
        calls = []
        for action, inv in zip(s["actions"], s["tool_invocations"]):
            calls.append({"name": action["name"], "args": action["args"], "ok": inv["status"] == "ok"})
        out.append(calls)
    return out


# -- what the engine records -------------------------------------------------------------------------
def test_every_step_records_the_live_verdict_of_every_live_criterion(trace_file):
    # worked by hand: `note` at step 0 passes noted; the push at step 1 fails no_push (must not run);
    # the pdf skill at step 2 passes pdf; the final-answer criterion has no live verdict at all
    _, records = run(SCRIPT, criteria(), trace_file)
    assert [s["live_verdicts"] for s in of_type(records, "step")] == [
        {"noted": "pass", "no_push": "undecided", "pdf": "undecided"},
        {"noted": "pass", "no_push": "fail", "pdf": "undecided"},
        {"noted": "pass", "no_push": "fail", "pdf": "pass"},
        {"noted": "pass", "no_push": "fail", "pdf": "pass"},
    ]


def test_armed_or_not_the_recorded_state_is_the_same(tmp_path):
    armed = [ToolInvoked("noted", "note"), CommandExecuted("no_push", "git push", max_count=0, stop_when="fail"),
             SkillTriggered("pdf", "pdf")]
    _, smoke = run(SCRIPT, armed, tmp_path / "s.jsonl", stop_early=True)
    _, full = run(SCRIPT, criteria(), tmp_path / "f.jsonl")
    smoke_steps = [s["live_verdicts"] for s in of_type(smoke, "step")]
    assert len(smoke_steps) == 2  # cut at step 1, where the armed no_push failed
    assert smoke_steps == [s["live_verdicts"] for s in of_type(full, "step")][:2]


def test_a_run_without_live_criteria_writes_no_live_verdicts(trace_file):
    _, records = run(SCRIPT, [FinalAnswerContains("answer", "done")], trace_file)
    assert all("live_verdicts" not in s for s in of_type(records, "step"))


def test_a_live_verdict_that_raises_drops_only_that_criterion_and_is_reported(trace_file):
    def live(t):
        if len(t.tool_calls) >= 2:
            raise RuntimeError("criterion bug")
        return "undecided"

    crits = [CallableCriterion("shaky", lambda t: True, live_fn=live, polarities=["pass"]), ToolInvoked("noted", "note")]
    result, records = run(SCRIPT, crits, trace_file)
    assert result.stop_reason == "final" and result.steps == 4  # the run is not affected
    assert [s["live_verdicts"] for s in of_type(records, "step")] == [
        {"shaky": "undecided", "noted": "pass"}, {"noted": "pass"}, {"noted": "pass"}, {"noted": "pass"}]
    errors = of_type(records, "run_end")[0]["failure_report"]["live_verdict_errors"]
    assert errors == [{"criterion": "shaky", "error": "RuntimeError: criterion bug", "step": 1, "tool_call_index": 2}]


# -- the same verdicts from plain data ---------------------------------------------------------------
def test_replay_from_recorded_actions_equals_what_the_engine_recorded(trace_file):
    _, records = run(SCRIPT, criteria(), trace_file)
    specs = of_type(records, "run_start")[0]["criteria"]
    replay = replay_live_verdicts(actions_of(records), specs)
    assert replay.steps == [s["live_verdicts"] for s in of_type(records, "step")]
    assert {cid: (d.verdict, d.step, d.tool_call_index) for cid, d in replay.decided.items()} == \
        {"noted": ("pass", 0, 1), "no_push": ("fail", 1, 2), "pdf": ("pass", 2, 3)}
    assert set(replay.not_live) == {"answer"}


def test_replay_equals_the_engine_on_every_demo_run(tmp_path):
    # the scripted demo covers pass, fail, must-not-run, counts and skills across 48 runs
    paths = run_demo(tmp_path, tasks=24)
    compared = 0
    for path in paths:
        records = read_records(path)
        recorded = [s.get("live_verdicts") for s in of_type(records, "step")]
        replay = replay_live_verdicts(actions_of(records), of_type(records, "run_start")[0]["criteria"])
        assert replay.steps == recorded, path.name
        compared += len(recorded)
    assert compared > 200


def test_the_smoke_policy_replayed_over_e2e_stops_where_smoke_stopped(tmp_path):
    # deterministic agents: e2e's first steps are smoke's, so the armed-only rule applied to
    # e2e's verdicts finds smoke's early-stop step (or nothing earlier than smoke's last step)
    paths = run_demo(tmp_path, tasks=24)
    runs = {}
    for path in paths:
        records = read_records(path)
        start = of_type(records, "run_start")[0]
        runs[(start["variant"], start["task_id"], start["replicate"])] = records
    early_pairs = 0
    for (variant, task, rep), smoke in runs.items():
        if variant != "smoke":
            continue
        e2e = runs[("e2e", task, rep)]
        stop_when = {c["id"]: c["stop_when"] for c in of_type(smoke, "run_start")[0]["criteria"] if c["stop_when"]}
        simulated = early_stop_step([s["live_verdicts"] for s in of_type(e2e, "step")], stop_when)
        early = of_type(smoke, "early_stop")
        if early:
            early_pairs += 1
            assert simulated == early[0]["step"], task
        else:
            assert simulated is None or simulated >= of_type(smoke, "run_end")[0]["steps"] - 1, task
    assert early_pairs >= 5


def test_recorded_call_data_maps_to_tool_calls():
    assert tool_call_from_data({"name": "bash", "args": {"command": "ls"}}, 1, 0).succeeded
    assert not tool_call_from_data({"name": "bash", "ok": False}, 1, 0).succeeded
    assert not tool_call_from_data({"tool_name": "Bash", "status": "error"}, 1, 0).succeeded
    assert not tool_call_from_data({"name": "bash", "error": "timed out"}, 1, 0).succeeded
    assert not tool_call_from_data({"name": "bash", "exit_code": 2}, 1, 0).succeeded
    assert not tool_call_from_data({"tool_name": "Bash", "result_status": "error"}, 1, 0).succeeded  # coder_eval's spelling
    assert not tool_call_from_data({"tool_name": "Bash", "error_message": "no result observed"}, 1, 0).succeeded
    call = tool_call_from_data({"tool_name": "Bash", "parameters": {"command": "pytest"}, "returncode": 0}, 3, 1)
    assert (call.name, call.args, call.index, call.step, call.succeeded) == ("Bash", {"command": "pytest"}, 3, 1, True)


def test_a_recorded_call_without_a_result_neither_failed_nor_succeeded():
    # coder_eval's record of a call it saw issued but never saw run (the call an early stop latched on)
    unseen = {"tool_name": "Bash", "parameters": {"command": "pytest -q"}, "result_status": "unknown",
              "error_message": "no result observed", "execution_started_at": None}
    call = tool_call_from_data(unseen, 1, 0)
    assert call.status == "unknown" and not call.succeeded
    # an exit code, ok: false or a failing status is a result: those still fail
    assert tool_call_from_data({**unseen, "exit_code": 1}, 1, 0).status == "error"
    assert tool_call_from_data({**unseen, "ok": False}, 1, 0).status == "error"
    specs = [{"id": "ran", "type": "command_executed", "pattern": "pytest"},
             {"id": "green", "type": "command_executed", "pattern": "pytest", "require_success": True}]
    # counted as issued; never as a success
    assert replay_live_verdicts([[unseen]], specs).steps == [{"ran": "pass", "green": "undecided"}]


def test_command_filters_tool_success_and_exclusions():
    steps = [[{"tool_name": "Bash", "parameters": {"command": "pytest -q"}, "exit_code": 1}],
             [{"name": "shell", "args": {"cmd": "pytest --collect-only"}, "exit_code": 0}],
             [{"name": "Bash", "args": {"command": "pytest -q"}, "exit_code": 0}]]
    specs = [
        {"id": "any_shell", "type": "command_executed", "pattern": "pytest", "min_count": 3},
        {"id": "only_bash", "type": "command_executed", "pattern": "pytest", "tool": "Bash", "min_count": 2},
        {"id": "green", "type": "command_executed", "pattern": "pytest", "require_success": True, "min_count": 2,
         "exclude_pattern": "--collect-only"},
        {"id": "weight_is_ignored", "type": "tool_invoked", "tool": "shell", "weight": 2.0, "stop_when": None},
    ]
    # any_shell: 3 pytest commands by step 2 (Bash counts: shell tools match in any case);
    # only_bash: the 2nd Bash call is step 2; green: the only successful, not excluded run is step 2 -> 1 < 2
    assert replay_live_verdicts(steps, specs).steps == [
        {"any_shell": "undecided", "only_bash": "undecided", "green": "undecided", "weight_is_ignored": "undecided"},
        {"any_shell": "undecided", "only_bash": "undecided", "green": "undecided", "weight_is_ignored": "pass"},
        {"any_shell": "pass", "only_bash": "pass", "green": "undecided", "weight_is_ignored": "pass"},
    ]


# -- what cannot be live, and arming ------------------------------------------------------------------
def test_criteria_that_cannot_be_evaluated_live_say_why():
    caps = live_capabilities([
        {"id": "report", "type": "file_exists", "path": "REPORT.md"},
        {"id": "answer", "type": "final_answer_contains", "text": "42"},
        {"id": "bad", "type": "command_executed", "pattern": "(unclosed"},
        {"id": "no-pattern", "type": "command_executed"},
        {"id": "wordy", "type": "command_executed", "pattern": "x", "min_count": "two"},
        {"id": "push", "type": "command_executed", "pattern": "git push", "max_count": 0},
        {"id": "sk", "type": "skill_triggered", "skill": "pdf"},
        {"type": "tool_invoked", "tool": "edit"},
    ])
    assert not caps["report"].live and "not observable step by step" in caps["report"].reason
    assert "file_exists" in caps["report"].reason
    assert not caps["answer"].live and "final answer can change until the run ends" in caps["answer"].reason
    # why a spec cannot be built, in words (it read "invalid spec: error: missing ), ...")
    assert not caps["bad"].live and caps["bad"].reason == (
        "invalid spec: its pattern is not a regular expression (missing ), unterminated subpattern at position 0)")
    assert caps["no-pattern"].reason == "invalid spec: a command_executed criterion spec needs 'pattern'"
    assert caps["wordy"].reason.startswith("invalid spec: a field of the wrong type (")
    assert caps["push"].polarities == ("fail",) and caps["sk"].polarities == ("fail", "pass")
    assert caps["criterion-7"].polarities == ("pass",)  # a spec without an id is named by its position


def test_arming_refusals_are_the_engines_guardrail():
    caps = live_capabilities([{"id": "report", "type": "file_exists"},
                              {"id": "push", "type": "command_executed", "pattern": "git push", "max_count": 0},
                              {"id": "sk", "type": "skill_triggered", "skill": "pdf", "policy": "any"}])
    assert "cannot be armed" in caps["report"].arming_refusal("pass")
    assert "not ['pass']" in caps["push"].arming_refusal("pass") and caps["push"].arming_refusal("fail") is None
    assert "not ['fail']" in caps["sk"].arming_refusal("decided") and caps["sk"].arming_refusal("pass") is None
    assert "stop_when must be one of" in caps["sk"].arming_refusal("sometimes")
    # the engine refuses the same arming with the same words
    with pytest.raises(EarlyStopConfigError) as refused:
        Engine(ScriptedAgent([]), criteria=[CommandExecuted("push", "git push", max_count=0, stop_when="pass")],
               stop_early=True)
    assert str(refused.value) == caps["push"].arming_refusal("pass")


def test_early_stop_step_follows_each_polarity():
    steps = [{"a": "undecided", "b": "undecided"}, {"a": "fail", "b": "undecided"}, {"a": "fail", "b": "pass"}]
    assert early_stop_step(steps, {"a": "fail"}) == 1
    assert early_stop_step(steps, {"a": "pass"}) is None          # decided, but in the other polarity
    assert early_stop_step(steps, {"a": "decided", "b": "pass"}) == 2   # every armed criterion must be decided
    assert early_stop_step(steps, {"c": "decided"}) is None        # a criterion the steps do not hold never decides
    assert early_stop_step(steps, {}) is None and not armed_decided(steps[2], {})


def test_verdicts_latch_and_the_tracker_reads_only_new_calls():
    flaky_answers = iter(["pass", "fail", "undecided"])
    flaky = CallableCriterion("flaky", lambda t: True, live_fn=lambda t: next(flaky_answers), polarities=["pass", "fail"])
    count = CommandExecuted("two", "x", min_count=2)
    tracker = LiveTracker([flaky, count, FinalAnswerContains("answer", "y")])
    traj = Trajectory()
    for i in range(3):
        traj.tool_calls.append(ToolCall(index=i + 1, step=i, name="bash", args={"command": "x"}))
        tracker.observe(traj, i, i + 1)
    assert tracker.verdicts() == {"flaky": "pass", "two": "pass"}  # the first decided verdict is kept
    assert (tracker.decided["two"].step, tracker.decided["two"].tool_call_index) == (1, 2)
    # a trajectory changed other than by appending is read again from the start
    traj.tool_calls[:] = [ToolCall(index=1, step=0, name="bash", args={"command": "y"})]
    assert count.live_verdict(traj) == "undecided"
    traj.tool_calls.append(ToolCall(index=2, step=1, name="bash", args={"command": "x"}))
    traj.tool_calls.append(ToolCall(index=3, step=1, name="bash", args={"command": "x"}))
    assert count.live_verdict(traj) == "pass"


def test_the_example_in_docs_engine_runs_as_documented():
    import re

    from qita_helpers import ROOT

    doc = (ROOT / "docs" / "engine.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "replay_live_verdicts(" in b)
    namespace: dict = {}
    exec(block, namespace)
    replay = namespace["replay"]
    assert replay.steps == [{"no_rm": "undecided", "ls": "pass", "pdf": "undecided"},
                            {"no_rm": "fail", "ls": "pass", "pdf": "undecided"}]
    assert {k: (d.verdict, d.step, d.tool_call_index) for k, d in replay.decided.items()} == \
        {"ls": ("pass", 0, 1), "no_rm": ("fail", 1, 2)}
    assert list(replay.not_live) == ["report"] and "end-state check" in replay.not_live["report"]
    assert early_stop_step(replay.steps, {"no_rm": "fail"}) == 1


# -- against a real coder_eval experiment (read from ../shared at test time) ----------------------------
def _coder_eval_run(task_json):
    """A coder_eval task result as (steps of plain tool calls, command_executed specs by description)."""
    import json

    data = json.loads(task_json.read_text(encoding="utf-8"))
    steps, turn = [], None
    for iteration in data["iterations"]:
        for command in iteration["commands"]:
            if command["assistant_turn_index"] != turn or not steps:
                steps.append([])
                turn = command["assistant_turn_index"]
            steps[-1].append(command)  # tool_name / parameters / result_status / error_message, as written
    specs = [{"id": c["description"], "type": "command_executed", "pattern": c["command_pattern"], "tool": c["tool_name"],
              "min_count": c["min_count"], "max_count": c["max_count"], "require_success": c["require_success"]}
             for c in data["task_config"]["resolved"]["success_criteria"] if c["type"] == "command_executed"]
    return data, steps, specs


def test_replay_decides_where_coder_eval_decided_live():
    # coder_eval's own early_stop records say which criterion decided, how, and at which tool
    # call; replaying the commands it recorded must decide that criterion at that same call
    from qita_helpers import ROOT

    results = ROOT.parent / "shared" / "traces" / "coder_eval-runs" / "2026-11-02_10-15-00"
    if not results.is_dir():
        pytest.skip(f"coder_eval results not found at {results}")
    checked = 0
    for task_json in sorted(results.glob("smoke/*/*/task.json")):
        data, steps, specs = _coder_eval_run(task_json)
        early = data.get("early_stop")
        if not early or early["reason"] not in ("criterion_passed", "criterion_failed"):
            continue
        decided = replay_live_verdicts(steps, specs).decided[early["deciding_criterion_description"]]
        assert decided.verdict == ("pass" if early["reason"] == "criterion_passed" else "fail"), task_json
        assert decided.tool_call_index == early["tool_call_index"], task_json
        checked += 1
    assert checked == 8  # t01 (two replicates), t02, t03, t05, t06, t08, t09; t04 hit its decision budget
