"""Opt-in early stop: polarities, `decided`, guardrails, fail-open, verdict rule, default-off."""

import pytest
from qita_helpers import echo_tools, of_type, read_records, step

from qita import (
    CallableCriterion,
    CommandExecuted,
    EarlyStopConfigError,
    Engine,
    FinalAnswerContains,
    SkillTriggered,
    StopReason,
    ToolInvoked,
    TraceWriter,
    criterion_from_spec,
)
from qita.agents import ScriptedAgent
from qita.core import ToolCall, Trajectory

NOTE = ("note", {"text": "x"})


def run(script, criteria, trace_file=None, stop_early=True, max_steps=10, critics=(), run_id="r"):
    agent = ScriptedAgent(script, tools=echo_tools())
    if trace_file is None:
        return Engine(agent, list(critics), criteria=criteria, stop_early=stop_early, max_steps=max_steps).run("t"), []
    with TraceWriter(trace_file, run_id) as w:
        result = Engine(agent, list(critics), criteria=criteria, stop_early=stop_early, max_steps=max_steps,
                        trace=w).run("t")
    return result, read_records(trace_file)


def traj(*calls):
    return Trajectory(tool_calls=[ToolCall(index=i + 1, step=i, name=n, args=a) for i, (n, a) in enumerate(calls)])


# -- live verdicts --------------------------------------------------------------------------------------
def test_skill_first_engagement_live_verdicts():
    c = SkillTriggered("s", "pdf")
    assert c.live_verdict(traj(NOTE)) == "undecided"
    assert c.live_verdict(traj(NOTE, ("skill", {"name": "pdf"}))) == "pass"
    assert c.live_verdict(traj(("skill", {"name": "docx"}), ("skill", {"name": "pdf"}))) == "fail"


def test_command_count_bounds_live_verdicts():
    at_least_two = CommandExecuted("c", r"^pytest", min_count=2)
    one = traj(("bash", {"command": "pytest -q"}))
    two = traj(("bash", {"command": "pytest -q"}), ("bash", {"command": "pytest tests"}))
    assert at_least_two.live_verdict(one) == "undecided" and at_least_two.live_verdict(two) == "pass"
    at_most_one = CommandExecuted("c", r"^pytest", min_count=0, max_count=1)
    assert at_most_one.live_verdict(one) == "undecided" and at_most_one.live_verdict(two) == "fail"
    must_not = CommandExecuted("c", r"git push", min_count=0, max_count=0)
    assert must_not.live_verdict(traj(NOTE)) == "undecided"
    assert must_not.live_verdict(traj(("bash", {"command": "git push"}))) == "fail"
    assert must_not.check(traj(NOTE)).passed is True


def test_max_count_zero_alone_is_the_must_not_run_form():
    # docs/engine.md: `CommandExecuted(id, pattern, max_count=0)` is must-not-run, no min_count needed
    must_not = CommandExecuted("no_push", r"git push", max_count=0, stop_when="fail")
    assert (must_not.min_count, must_not.max_count) == (0, 0)
    assert must_not.live_stop_polarities == frozenset({"fail"})
    assert must_not.live_verdict(traj(("bash", {"command": "ls"}))) == "undecided"
    assert must_not.live_verdict(traj(("bash", {"command": "git push -f"}))) == "fail"
    assert must_not.check(traj(("bash", {"command": "ls"}))).passed is True
    assert must_not.check(traj(("bash", {"command": "git push"}))).passed is False
    assert ToolInvoked("t", "rm", max_count=0).min_count == 0
    assert CommandExecuted("c", "x", max_count=3).min_count == 1  # an upper bound above 0 still needs one
    with pytest.raises(ValueError, match="min_count <= max_count"):
        CommandExecuted("c", "x", min_count=1, max_count=0)
    _engine([must_not])  # armable for fail
    # the spec form the docs show, and a description that says what is required
    spec = criterion_from_spec({"id": "no_rm", "type": "command_executed", "pattern": "rm -rf", "max_count": 0})
    assert (spec.min_count, spec.max_count) == (0, 0)
    assert spec.description == "no command matching 'rm -rf' ran"
    assert ToolInvoked("t", "rm", max_count=0).description == "tool 'rm' was never invoked"
    assert CommandExecuted("c", "x").description == "command matching 'x' ran"


def test_tool_invoked_live_and_final():
    c = ToolInvoked("t", "skill")
    assert c.live_verdict(traj(NOTE)) == "undecided"
    assert c.live_verdict(traj(("skill", {"name": "a"}))) == "pass"
    assert c.check(traj(NOTE)).score == 0.0 and c.check(traj(("skill", {}))).score == 1.0


# -- through the engine ------------------------------------------------------------------------------------
SKILL_AT_1 = [step(NOTE), step(("skill", {"name": "pdf"})), step(NOTE), step(NOTE), step(final="done")]


def test_stop_on_pass(trace_file):
    result, records = run(SKILL_AT_1, [SkillTriggered("sk", "pdf", stop_when="pass")], trace_file, max_steps=10)
    assert result.stop_reason == StopReason.EARLY_STOP and result.steps == 2
    es = of_type(records, "early_stop")
    assert len(es) == 1
    assert es[0]["reason"] == "criterion_passed" and es[0]["deciding_criterion"] == "sk"
    assert es[0]["armed_criteria"] == ["sk"] and es[0]["step"] == 1
    assert es[0]["tool_call_index"] == 2  # note at step 0 was call 1, the skill call is call 2
    assert es[0]["turns_remaining"] == 8  # budget 10 minus 2 steps taken
    assert es[0]["elapsed_s"] >= 0
    end = of_type(records, "run_end")[0]
    assert end["stop_reason"] == "early_stop" and end["verdict"] == "pass" and end["steps"] == 2
    crit = of_type(records, "criterion")[0]
    assert crit["live_verdict"] == "pass" and crit["decided_at_step"] == 1 and crit["passed"] is True


def test_stop_on_fail(trace_file):
    script = [step(("bash", {"command": "ls"})), step(("bash", {"command": "git push origin"})), step(final="ok")]
    c = CommandExecuted("no_push", r"git push", min_count=0, max_count=0, stop_when="fail")
    result, records = run(script, [c], trace_file)
    assert result.stop_reason == StopReason.EARLY_STOP and result.steps == 2
    assert of_type(records, "early_stop")[0]["reason"] == "criterion_failed"
    assert result.verdict == "fail"


def test_pass_armed_criterion_that_fails_does_not_stop():
    # armed for pass, decided fail (wrong skill first): the run goes on to its natural end
    script = [step(("skill", {"name": "docx"})), step(NOTE), step(final="done")]
    result, _ = run(script, [SkillTriggered("sk", "pdf", stop_when="pass")])
    assert result.stop_reason == StopReason.FINAL and result.steps == 3 and result.verdict == "fail"


def test_decided_stops_on_either_polarity():
    passing = [step(("skill", {"name": "pdf"})), step(NOTE), step(final="d")]
    failing = [step(("skill", {"name": "docx"})), step(NOTE), step(final="d")]
    r1, _ = run(passing, [SkillTriggered("sk", "pdf", stop_when="decided")])
    r2, _ = run(failing, [SkillTriggered("sk", "pdf", stop_when="decided")])
    assert (r1.stop_reason, r1.steps, r1.verdict, r1.early_stop["reason"]) == ("early_stop", 1, "pass", "criterion_passed")
    assert (r2.stop_reason, r2.steps, r2.verdict, r2.early_stop["reason"]) == ("early_stop", 1, "fail", "criterion_failed")


def test_stops_only_when_every_armed_criterion_is_decided(trace_file):
    script = [step(("skill", {"name": "pdf"})), step(NOTE), step(("bash", {"command": "pytest"})), step(NOTE),
              step(final="d")]
    criteria = [SkillTriggered("sk", "pdf", stop_when="pass"), CommandExecuted("tests", "pytest", stop_when="pass")]
    result, records = run(script, criteria, trace_file)
    assert result.steps == 3
    es = of_type(records, "early_stop")[0]
    assert es["deciding_criterion"] == "tests" and es["armed_criteria"] == ["sk", "tests"]
    assert {c["id"]: c["decided_at_step"] for c in of_type(records, "criterion")} == {"sk": 0, "tests": 2}


def test_early_stopped_verdict_gates_on_armed_only_and_marks_the_rest_advisory(trace_file):
    criteria = [SkillTriggered("sk", "pdf", stop_when="pass"), FinalAnswerContains("ans", "done")]
    result, records = run(SKILL_AT_1, criteria, trace_file)
    assert result.stop_reason == StopReason.EARLY_STOP
    crit = {c["id"]: c for c in of_type(records, "criterion")}
    assert crit["ans"]["passed"] is False and crit["ans"]["advisory"] is True  # still graded, just advisory
    assert crit["sk"]["advisory"] is False
    assert result.verdict == "pass"


def test_naturally_completed_run_gates_on_the_full_set():
    # the armed criterion is never decided, so the run completes; the unarmed criterion fails it
    script = [step(NOTE), step(final="nothing")]
    criteria = [SkillTriggered("sk", "pdf", stop_when="pass", policy="any"), FinalAnswerContains("ans", "done")]
    result, _ = run(script, criteria)
    assert result.stop_reason == StopReason.FINAL and result.verdict == "fail"
    criteria = [SkillTriggered("sk2", "pdf", policy="any"), FinalAnswerContains("ans", "nothing")]
    result, _ = run([step(("skill", {"name": "pdf"})), step(final="nothing")], criteria, stop_early=False)
    assert result.verdict == "pass"


def test_non_gating_criterion_never_gates_a_natural_run():
    criteria = [FinalAnswerContains("ans", "done"), FinalAnswerContains("style", "please", gating=False)]
    result, _ = run([step(final="done")], criteria, stop_early=False)
    assert result.verdict == "pass" and result.criteria["style"].passed is False


def test_no_criteria_is_not_graded():
    result, _ = run([step(final="done")], [], stop_early=False)
    assert result.verdict == "not_graded"


def test_natural_stop_at_the_deciding_step_wins_over_early_stop():
    # the skill is triggered on the last step the budget allows: nothing was saved, so no early stop
    result, _ = run(SKILL_AT_1, [SkillTriggered("sk", "pdf", stop_when="pass")], max_steps=2)
    assert result.stop_reason == StopReason.BUDGET_STEPS and result.early_stop is None


def test_early_stop_wins_over_a_critic_retry():
    from qita import ReturnCodeCritic
    script = [step(("bash", {"command": "pytest", "returncode": 1})), step(NOTE), step(final="d")]
    result, _ = run(script, [CommandExecuted("t", "pytest", stop_when="pass")], critics=[ReturnCodeCritic()])
    assert result.stop_reason == StopReason.EARLY_STOP and result.steps == 1


# -- guardrails -----------------------------------------------------------------------------------------
def _engine(criteria, stop_early=True):
    return Engine(ScriptedAgent([step(final="x")], tools=echo_tools()), criteria=criteria, stop_early=stop_early)


def test_arming_an_end_state_criterion_is_an_error():
    with pytest.raises(EarlyStopConfigError, match="cannot be decided mid-run"):
        _engine([FinalAnswerContains("a", "x", stop_when="pass")])


def test_arming_a_polarity_the_criterion_cannot_decide_is_an_error():
    with pytest.raises(EarlyStopConfigError, match="fail"):
        _engine([ToolInvoked("t", "skill", stop_when="fail")])
    with pytest.raises(EarlyStopConfigError, match="pass"):
        _engine([CommandExecuted("c", "git push", min_count=0, max_count=0, stop_when="pass")])


def test_decided_needs_both_polarities():
    with pytest.raises(EarlyStopConfigError):
        _engine([ToolInvoked("t", "skill", stop_when="decided")])
    with pytest.raises(EarlyStopConfigError):
        _engine([SkillTriggered("s", "pdf", policy="any", stop_when="decided")])
    _engine([SkillTriggered("s", "pdf", stop_when="decided")])  # first-engagement decides both: fine


def test_stop_early_with_nothing_armed_is_an_error():
    with pytest.raises(EarlyStopConfigError, match="no criterion is armed"):
        _engine([ToolInvoked("t", "skill")])
    with pytest.raises(EarlyStopConfigError):
        _engine([])


def test_invalid_stop_when_value_is_an_error():
    with pytest.raises(ValueError):
        ToolInvoked("t", "skill", stop_when="sometimes")


def test_guardrail_errors_come_before_any_trace_is_written(trace_file):
    with pytest.raises(EarlyStopConfigError):
        Engine(ScriptedAgent([step(final="x")]), criteria=[FinalAnswerContains("a", "x", stop_when="fail")],
               stop_early=True, trace_path=trace_file)
    assert not trace_file.exists()


def test_agent_run_raises_the_guardrail_too():
    with pytest.raises(EarlyStopConfigError):
        ScriptedAgent([step(final="x")]).run(task="t", criteria=[], stop_early=True)


# -- fail open ------------------------------------------------------------------------------------------
def test_a_live_verdict_that_raises_fails_open_to_a_full_run(trace_file):
    def live(t):
        if t.tool_calls:
            raise RuntimeError("watcher bug")
        return "undecided"

    crit = CallableCriterion("c", lambda t: True, live_fn=live, polarities=["pass"], stop_when="pass")
    result, records = run(SKILL_AT_1, [crit], trace_file)
    assert result.stop_reason == StopReason.FINAL and result.steps == 5
    assert not of_type(records, "early_stop")
    end = of_type(records, "run_end")[0]
    assert end["failure_report"]["early_stop_fail_open"]["criterion"] == "c"
    assert "watcher bug" in end["failure_report"]["early_stop_fail_open"]["error"]
    fail_events = [e for e in of_type(records, "event") if e["phase"] == "EARLY_STOP"]
    assert len(fail_events) == 1 and fail_events[0]["ok"] is False
    assert end["verdict"] == "pass"  # graded on the full set, like any natural run


def test_a_live_verdict_returning_nonsense_also_fails_open():
    crit = CallableCriterion("c", lambda t: True, live_fn=lambda t: "maybe", polarities=["pass"], stop_when="pass")
    result, _ = run(SKILL_AT_1, [crit])
    assert result.stop_reason == StopReason.FINAL and "early_stop_fail_open" in result.failure_report


def test_callable_criterion_can_be_armed_and_graded():
    crit = CallableCriterion("two_calls", lambda t: (len(t.tool_calls) / 4, {"calls": len(t.tool_calls)}),
                             live_fn=lambda t: "pass" if len(t.tool_calls) >= 2 else "undecided",
                             polarities=["pass"], stop_when="pass", pass_threshold=0.5)
    result, _ = run(SKILL_AT_1, [crit])
    assert result.steps == 2
    assert result.criteria["two_calls"].score == 0.5 and result.criteria["two_calls"].passed is True


# -- default off ----------------------------------------------------------------------------------------
VOLATILE = {"ts", "duration_s", "elapsed_s", "latency_ms"}


def _stable(records):
    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in VOLATILE}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x
    return [clean(r) for r in records]


def test_default_off_is_the_same_trace_as_without_the_feature(tmp_path):
    script = [step(("skill", {"name": "pdf"})), step(NOTE), step(final="done")]
    plain = [SkillTriggered("sk", "pdf"), FinalAnswerContains("ans", "done")]
    armed_but_off = [SkillTriggered("sk", "pdf", stop_when="decided"), FinalAnswerContains("ans", "done")]
    r0, base = run(script, plain, tmp_path / "a.jsonl", stop_early=False)
    agent = ScriptedAgent(script, tools=echo_tools())
    with TraceWriter(tmp_path / "b.jsonl", "r") as w:
        r1 = Engine(agent, criteria=armed_but_off, trace=w, max_steps=10).run("t")  # stop_early left at default
    other = read_records(tmp_path / "b.jsonl")
    assert r0.steps == r1.steps == 3 and r1.stop_reason == StopReason.FINAL
    assert not of_type(other, "early_stop")
    # the only difference is the declared stop_when in the spec itself
    other_start = other[0]
    assert [c["stop_when"] for c in other_start["criteria"]] == ["decided", None]
    for c in other_start["criteria"]:
        c["stop_when"] = None
    assert _stable(base) == _stable(other)
    assert base[0]["early_stop"] == {"enabled": False}
