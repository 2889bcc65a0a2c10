"""Each critic action from the seed's table, critic naming, ordering and critic exceptions."""

from qita_helpers import echo_tools, of_type, read_records, step

from qita import Critic, Engine, StopReason, TraceWriter
from qita.agents import ScriptedAgent


class Fixed(Critic):
    """Returns the same verdict on chosen steps, continue elsewhere."""

    def __init__(self, name, action, on_steps=(0,), reason="because"):
        self.name = name
        self.action = action
        self.on_steps = set(on_steps)
        self.reason = reason
        self.seen = []

    def evaluate(self, state, decision, results):
        self.seen.append(state.step)
        if state.step in self.on_steps:
            return {"action": self.action, "reason": self.reason, "score": 0.25, "details": {"step": state.step}}
        return {"action": "continue", "score": 1.0}


SCRIPT = [step(("note", {"text": "a"})), step(("note", {"text": "b"})), step(final="answer")]


def run(critics, trace_file, script=SCRIPT, **kw):
    agent = ScriptedAgent(script, tools=echo_tools())
    with TraceWriter(trace_file, "run-1") as w:
        result = Engine(agent, critics, trace=w, **kw).run("do it")
    return result, read_records(trace_file)


def test_continue_accepts_the_step_and_the_run_proceeds(trace_file):
    result, records = run([Fixed("c", "continue")], trace_file)
    assert result.stop_reason == StopReason.FINAL
    assert result.steps == 3
    steps = of_type(records, "step")
    assert [s["critic_outputs"][0]["action"] for s in steps] == ["continue"] * 3
    assert not any(s["retry"] for s in steps)


def test_stop_sets_critic_stop_and_ends_the_run(trace_file):
    result, records = run([Fixed("halt", "stop", on_steps=(1,), reason="unsafe")], trace_file)
    assert result.state.stop_reason == StopReason.CRITIC_STOP
    assert result.state.stop_reason == "critic_stop"
    assert result.steps == 2
    end = of_type(records, "run_end")[0]
    assert end["stop_reason"] == "critic_stop" and end["stop_detail"] == "unsafe"
    assert end["final_result"] is None
    # the run's tool calls, counted from the steps it wrote
    assert end["tool_calls"] == sum(len(s["actions"]) for s in of_type(records, "step"))


def test_retry_reexecutes_with_the_same_observation_and_next_step_index(trace_file):
    result, records = run([Fixed("again", "retry", on_steps=(0,))], trace_file)
    steps = of_type(records, "step")
    # 3 script entries, one of them spent on the retry: step indexes 0,1,2 with step 1 flagged.
    assert [s["step"] for s in steps] == [0, 1, 2]
    assert [s["retry"] for s in steps] == [False, True, False]
    assert steps[1]["observation"] == steps[0]["observation"]
    assert steps[2]["observation"] != steps[0]["observation"]
    assert result.stop_reason == StopReason.FINAL


def test_retry_tells_the_agent_why(trace_file):
    seen = []

    class Watching(ScriptedAgent):
        def decide(self, state, observation):
            seen.append(state.retry_feedback)
            return super().decide(state, observation)

    agent = Watching(SCRIPT, tools=echo_tools())
    Engine(agent, [Fixed("again", "retry", on_steps=(0,), reason="try harder")]).run("x")
    assert seen[0] is None
    assert seen[1] == {"critic": "again", "reason": "try harder", "step": 0}
    assert seen[2] is None


def test_retry_discards_a_final_answer_the_critic_rejected(trace_file):
    script = [step(final="wrong"), step(final="right")]
    result, _ = run([Fixed("check", "retry", on_steps=(0,))], trace_file, script=script)
    assert result.final_result == "right"
    assert result.steps == 2


def test_retried_steps_count_against_the_step_budget(trace_file):
    result, records = run([Fixed("again", "retry", on_steps=(0, 1, 2, 3))], trace_file, max_steps=3)
    assert result.stop_reason == StopReason.BUDGET_STEPS
    assert [s["retry"] for s in of_type(records, "step")] == [False, True, True]


def test_unknown_action_counts_as_continue_and_is_recorded_as_given(trace_file):
    result, records = run([Fixed("odd", "escalate", on_steps=(0, 1, 2))], trace_file)
    assert result.stop_reason == StopReason.FINAL and result.steps == 3
    assert of_type(records, "step")[0]["critic_outputs"][0]["action"] == "escalate"


def test_every_critic_runs_in_order_and_is_named(trace_file):
    first, second = Fixed("first", "retry", on_steps=(0,)), Fixed("second", "stop", on_steps=(0,))
    result, records = run([first, second], trace_file)
    outputs = of_type(records, "step")[0]["critic_outputs"]
    assert [o["critic"] for o in outputs] == ["first", "second"]
    assert [o["action"] for o in outputs] == ["retry", "stop"]
    assert outputs[0]["reason"] == "because" and outputs[0]["score"] == 0.25 and outputs[0]["details"] == {"step": 0}
    # stop outranks retry even when the retry came first
    assert result.stop_reason == StopReason.CRITIC_STOP and result.steps == 1


def test_critic_default_name_is_the_class_name(trace_file):
    class ScoreOnly(Critic):
        def evaluate(self, state, decision, results):
            return {"action": "continue", "score": 0.5}

    _, records = run([ScoreOnly()], trace_file)
    assert of_type(records, "run_start")[0]["critics"] == ["ScoreOnly"]
    assert of_type(records, "step")[0]["critic_outputs"][0]["critic"] == "ScoreOnly"


def test_a_critic_that_raises_is_recorded_and_does_not_crash_the_run(trace_file):
    class Broken(Critic):
        name = "broken"

        def evaluate(self, state, decision, results):
            raise KeyError("oops")

    later = Fixed("later", "continue")
    result, records = run([Broken(), later], trace_file)
    assert result.stop_reason == StopReason.FINAL and result.steps == 3
    assert later.seen == [0, 1, 2]  # critics after the broken one still ran
    out = of_type(records, "step")[0]["critic_outputs"][0]
    assert out["critic"] == "broken" and out["action"] == "continue"
    assert "KeyError" in out["reason"] and out["details"]["raised"] is True
    end = of_type(records, "run_end")[0]
    assert len(end["failure_report"]["critic_errors"]) == 3
    critic_events = [e for e in of_type(records, "event") if e["phase"] == "CRITIC"]
    assert critic_events and all(e["ok"] is False for e in critic_events)


def test_action_ranking_stop_over_retry_over_continue():
    from qita.engine.critic import ACTION_RANK, effective_action, strongest_action

    assert ACTION_RANK["stop"] > ACTION_RANK["retry"] > ACTION_RANK["continue"]
    assert [effective_action(a) for a in ("stop", "retry", "continue", "STOP", None, 42, ["stop"])] == \
        ["stop", "retry", "continue", "continue", "continue", "continue", "continue"]
    assert strongest_action(["continue", "retry", "weird"]) == "retry"
    assert strongest_action(["retry", "stop", "continue"]) == "stop"
    assert strongest_action(["anything"]) == "continue"
    assert strongest_action([]) is None


def test_critic_patches_are_written_beside_the_verdict_and_other_keys_under_extra(trace_file):
    class Patching(Critic):
        name = "patcher"

        def evaluate(self, state, decision, results):
            if state.step == 0:
                return {"action": "retry", "reason": "wrong file", "score": 0.1,
                        "patches": [{"file": "calc.py", "diff": "-a - b\n+a + b"}], "confidence": "high"}
            return {"action": "continue", "score": 1.0}

    result, records = run([Patching()], trace_file)
    steps = of_type(records, "step")
    first = steps[0]["critic_outputs"][0]
    assert first["patches"] == [{"file": "calc.py", "diff": "-a - b\n+a + b"}]
    assert first["extra"] == {"confidence": "high"}   # not a place of its own: kept under extra
    assert "patches" not in steps[1]["critic_outputs"][0]  # no patches proposed, none written
    assert steps[1]["retry"] is True and result.stop_reason == StopReason.FINAL
