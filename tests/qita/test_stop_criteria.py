"""Built-in stop criteria, the replace-the-default rule, budgets, and every reachable StopReason."""

import pytest
from qita_helpers import echo_tools, of_type, read_records, step

from qita import (
    AgentState,
    Decision,
    Engine,
    FinalResultCriteria,
    MaxRuntimeCriteria,
    MaxStepsCriteria,
    MaxTokensCriteria,
    StagnationCriteria,
    StopCriteria,
    StopReason,
    Task,
    TaskBudget,
    TraceWriter,
)
from qita.agents import ScriptedAgent
from qita.harness import resolve_family_preset

NOTE = ("note", {"text": "x"})


def agent(script, **kw):
    return ScriptedAgent(script, tools=echo_tools(), **kw)


# -- each built-in on its own -------------------------------------------------------------------
def test_final_result_criteria_unit():
    c = FinalResultCriteria()
    assert c.should_stop(AgentState(final_result=None), 1, {}) == (False, None, None)
    assert c.should_stop(AgentState(final_result=""), 1, {})[0] is False
    stop, reason, _ = c.should_stop(AgentState(final_result="42"), 1, {})
    assert stop and reason == StopReason.FINAL


def test_max_steps_criteria_unit():
    c = MaxStepsCriteria(max_steps=15)
    assert c.should_stop(None, 14, {})[0] is False
    assert c.should_stop(None, 15, {})[:2] == (True, StopReason.BUDGET_STEPS)


def test_max_runtime_criteria_unit():
    c = MaxRuntimeCriteria(max_runtime_seconds=120.0)
    assert c.should_stop(None, 3, {"elapsed_seconds": 120.0})[0] is False
    assert c.should_stop(None, 3, {"elapsed_seconds": 120.5})[:2] == (True, StopReason.BUDGET_TIME)


def test_max_tokens_criteria_unit():
    c = MaxTokensCriteria(max_tokens=500_000)
    assert c.should_stop(None, 3, {"total_tokens": 500_000})[0] is False
    assert c.should_stop(None, 3, {"total_tokens": 500_001})[:2] == (True, StopReason.BUDGET_TOKENS)


def test_stagnation_criteria_unit_counts_unchanged_checks():
    c = StagnationCriteria(max_stagnant_steps=3)
    s = AgentState(phase="p")
    # first check records the signature; the 2nd, 3rd and 4th are stagnant; the 4th stops
    assert [c.should_stop(s, i, {})[0] for i in range(1, 5)] == [False, False, False, True]
    c.reset()
    assert c.should_stop(s, 1, {})[0] is False


def test_stagnation_resets_when_the_signature_changes():
    c = StagnationCriteria(max_stagnant_steps=2)
    phases = ["a", "a", "b", "b", "b"]
    out = [c.should_stop(AgentState(phase=p), i, {})[0] for i, p in enumerate(phases)]
    assert out == [False, False, False, False, True]


def test_stagnation_with_custom_signature_fn():
    c = StagnationCriteria(max_stagnant_steps=1, signature_fn=lambda s: (s.final_result, getattr(s, "cursor", None)))
    a = AgentState(phase="x")
    a.cursor = 1
    b = AgentState(phase="y")  # phase differs, but the custom signature ignores it
    b.cursor = 1
    assert c.should_stop(a, 1, {})[0] is False
    assert c.should_stop(b, 2, {})[:2] == (True, StopReason.STAGNATION)


# -- through the engine -------------------------------------------------------------------
def test_final_result_is_the_default_and_only_criterion(trace_file):
    with TraceWriter(trace_file, "r") as w:
        result = Engine(agent([step(NOTE), step(final="done"), step(NOTE)]), trace=w).run("t")
    assert result.stop_reason == StopReason.FINAL and result.steps == 2 and result.final_result == "done"
    start = of_type(read_records(trace_file), "run_start")[0]
    assert start["stop_criteria"] == [{"name": "FinalResultCriteria", "params": {}}]


def test_passing_stop_criteria_replaces_the_default():
    # No FinalResultCriteria in the list: the final answer at step 0 does not end the run.
    script = [step(final="early answer")] + [step(NOTE)] * 10
    result = Engine(agent(script), stop_criteria=[MaxStepsCriteria(max_steps=4)], max_steps=50).run("t")
    assert result.stop_reason == StopReason.BUDGET_STEPS and result.steps == 4
    assert result.final_result == "early answer"


def test_including_final_result_criteria_keeps_the_final_stop():
    script = [step(NOTE), step(final="ok")] + [step(NOTE)] * 5
    result = Engine(agent(script), stop_criteria=[FinalResultCriteria(), StagnationCriteria(9)]).run("t")
    assert result.stop_reason == StopReason.FINAL and result.steps == 2


def test_max_steps_from_the_budget_stops_with_budget_steps():
    result = Engine(agent([step(NOTE)] * 20), max_steps=3).run("t")
    assert result.stop_reason == "budget_steps" and result.steps == 3


def test_final_answer_on_the_last_allowed_step_reports_final():
    result = Engine(agent([step(NOTE), step(final="just in time")]), max_steps=2).run("t")
    assert result.stop_reason == StopReason.FINAL


def test_tokens_budget_stops_with_budget_tokens():
    # 3 steps of 60+40=100 tokens: 100, 200, 300 > 250 -> stops after the third step
    script = [step(NOTE, tokens=(60, 40))] * 10
    result = Engine(agent(script), max_tokens=250).run("t")
    assert result.stop_reason == StopReason.BUDGET_TOKENS
    assert result.steps == 3 and result.tokens == {"input": 180, "output": 120, "total": 300}


def test_runtime_info_carries_elapsed_and_total_tokens():
    seen = []

    class Spy(StopCriteria):
        def should_stop(self, state, step_count, runtime_info=None):
            seen.append((step_count, runtime_info["total_tokens"], runtime_info["elapsed_seconds"] >= 0))
            return False, None, None

    Engine(agent([step(NOTE, tokens=(7, 3))] * 5), stop_criteria=[Spy()], max_steps=3).run("t")
    assert seen == [(1, 10, True), (2, 20, True), (3, 30, True)]


def test_runtime_budget_stops_with_budget_time():
    class SlowClock(StopCriteria):
        """Stands in for wall time: pretends each step took an hour (no real waiting)."""

        def should_stop(self, state, step_count, runtime_info=None):
            info = dict(runtime_info, elapsed_seconds=3600.0 * step_count)
            return MaxRuntimeCriteria(max_runtime_seconds=7200.0).should_stop(state, step_count, info)

    result = Engine(agent([step(NOTE)] * 9), stop_criteria=[SlowClock()]).run("t")
    assert result.stop_reason == StopReason.BUDGET_TIME and result.steps == 3


def test_task_budget_overrides_constructor_defaults(trace_file):
    task = Task(id="research-001", objective="Summarise.", budget=TaskBudget(max_steps=2, max_runtime_seconds=180.0,
                                                                              max_tokens=8192))
    with TraceWriter(trace_file, "r") as w:
        result = Engine(agent([step(NOTE)] * 9), max_steps=7, max_tokens=100_000, trace=w).run(task)
    assert result.stop_reason == StopReason.BUDGET_STEPS and result.steps == 2
    start = of_type(read_records(trace_file), "run_start")[0]
    assert start["budget"] == {"max_steps": 2, "max_runtime_seconds": 180.0, "max_tokens": 8192}
    assert start["task_id"] == "research-001"


def test_task_budget_none_fields_keep_the_defaults():
    task = Task(id="t", objective="o", budget=TaskBudget(max_tokens=1_000_000))
    result = Engine(agent([step(NOTE)] * 9), max_steps=4).run(task)
    assert result.steps == 4 and result.stop_reason == StopReason.BUDGET_STEPS


def test_task_budget_overrides_agent_run_max_steps():
    task = Task(id="t", objective="o", budget=TaskBudget(max_steps=2))
    result = agent([step(NOTE)] * 9).run(task=task, max_steps=6, return_state=True)
    assert result.steps == 2


def test_stagnation_through_the_engine():
    # the phase never changes and there is no final answer: checks 1..4 see the same
    # signature, the 4th check (after step index 3) is the 3rd stagnant one
    script = [step(NOTE, set={"phase": "same"})] * 10
    result = Engine(agent(script), stop_criteria=[FinalResultCriteria(), StagnationCriteria(max_stagnant_steps=3)]
                    ).run("t")
    assert result.stop_reason == StopReason.STAGNATION and result.steps == 4


# -- the other StopReason values ------------------------------------------------------------------
def test_success_set_by_the_agent():
    script = [step(NOTE), step(NOTE, stop_reason="success"), step(NOTE)]
    result = Engine(agent(script)).run("t")
    assert result.state.stop_reason == StopReason.SUCCESS and result.steps == 2


def test_agent_condition_from_should_stop():
    script = [step(NOTE), step(NOTE, set={"notes": {"give_up": True}}), step(NOTE)]
    result = Engine(agent(script)).run("t")
    assert result.stop_reason == StopReason.AGENT_CONDITION and result.steps == 2


def test_env_terminal():
    class Env:
        def is_terminal(self, state, results):
            return any(isinstance(r, dict) and r.get("stdout") == "ran shutdown" for r in results)

    script = [step(NOTE), step(("bash", {"command": "shutdown"})), step(NOTE)]
    result = Engine(agent(script), env=Env()).run("t")
    assert result.stop_reason == StopReason.ENV_TERMINAL and result.steps == 2


def test_task_validation_failed(trace_file):
    class Picky(ScriptedAgent):
        def validate_task(self, task):
            return "objective must mention a file" if "file" not in task.objective else None

    with TraceWriter(trace_file, "r") as w:
        result = Engine(Picky([step(NOTE)], tools=echo_tools()), trace=w).run("do something")
    assert result.stop_reason == StopReason.TASK_VALIDATION_FAILED and result.steps == 0
    assert result.status == "failed"
    end = of_type(read_records(trace_file), "run_end")[0]
    assert end["status"] == "failed" and end["stop_detail"] == "objective must mention a file"


def test_env_capability_mismatch():
    task = Task(id="t", objective="o", required_tools=["bash", "browser"])
    result = Engine(agent([step(NOTE)])).run(task)
    assert result.stop_reason == StopReason.ENV_CAPABILITY_MISMATCH and result.steps == 0
    assert "browser" in result.stop_detail


def test_state_stop_reason_is_set_after_a_preflight_failure_too():
    # "written to state.stop_reason at the end of every run": the runs refused before a step included
    class Picky(ScriptedAgent):
        def validate_task(self, task):
            return "no"

    class BrokenInit(ScriptedAgent):
        def init_state(self, task, **kw):
            raise RuntimeError("cannot start")

    cases = [
        (Engine(Picky([step(NOTE)])), "t", StopReason.TASK_VALIDATION_FAILED),
        (Engine(agent([step(NOTE)])), "   ", StopReason.TASK_VALIDATION_FAILED),
        (Engine(agent([step(NOTE)])), Task(id="t", objective="o", required_tools=["browser"]),
         StopReason.ENV_CAPABILITY_MISMATCH),
        (Engine(BrokenInit([step(NOTE)])), "t", StopReason.UNRECOVERABLE_ERROR),
    ]
    for engine, task, expected in cases:
        result = engine.run(task)
        assert result.state is not None, expected
        assert result.state.stop_reason == expected == result.stop_reason
        assert result.state.task.objective == (task.objective if isinstance(task, Task) else task)
        assert result.steps == 0


def test_unrecoverable_error_when_decide_raises(trace_file):
    with TraceWriter(trace_file, "r") as w:
        result = Engine(agent([step(NOTE), {"raise": "model endpoint gone"}]), trace=w).run("t")
    assert result.stop_reason == StopReason.UNRECOVERABLE_ERROR and result.status == "error"
    assert result.steps == 2
    end = of_type(read_records(trace_file), "run_end")[0]
    assert end["status"] == "error" and "model endpoint gone" in end["stop_detail"]
    assert end["failure_report"]["errors"][0]["phase"] == "DECIDE"


def test_a_failing_tool_is_a_result_not_an_error():
    def boom():
        raise OSError("disk full")

    a = ScriptedAgent([step(("boom", {})), step(final="recovered")], tools={"boom": boom})
    result = Engine(a).run("t")
    assert result.stop_reason == StopReason.FINAL
    assert result.failure_report == {"tool_errors": 1}


def test_stop_reason_is_set_on_every_run_and_is_a_str():
    result = Engine(agent([step(final="x")])).run("t")
    assert isinstance(result.state.stop_reason, str) and result.state.stop_reason == "final"


def test_plain_decision_final_sets_final_result():
    class Tiny:
        def init_state(self, task, **kw):
            return AgentState(task=task)

        def decide(self, state, observation):
            return Decision.final(41 + 1)

        def reduce(self, state, observation, decision):
            return state

    result = Engine(Tiny()).run("answer")
    assert result.final_result == 42 and result.stop_reason == StopReason.FINAL


def test_resolve_family_preset_gives_recommended_max_tokens():
    preset = resolve_family_preset("qwen")
    criterion = MaxTokensCriteria(max_tokens=preset.recommended_max_tokens or 500_000)
    assert criterion.max_tokens > 0
    assert resolve_family_preset("no-such-family").recommended_max_tokens is None


@pytest.mark.parametrize("value", ["success", "final", "budget_steps", "budget_time", "budget_tokens", "critic_stop",
                                   "stagnation", "agent_condition", "env_terminal", "task_validation_failed",
                                   "env_capability_mismatch", "unrecoverable_error", "early_stop"])
def test_stop_reason_values(value):
    assert StopReason(value) == value and StopReason(value).value == value


def test_a_later_final_decision_replaces_an_earlier_answer():
    script = [step(final="first"), step(final="second")]
    result = Engine(agent(script), stop_criteria=[MaxStepsCriteria(2)]).run("t")
    assert result.final_result == "second"
