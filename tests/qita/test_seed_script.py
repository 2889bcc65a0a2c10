"""A script written only from the seed document's examples, with imports changed to `from qita import ...`."""

from typing import Any, Dict, Optional, Tuple

from qita_helpers import step

from qita import (
    Critic,
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
)
from qita.agents import ScriptedAgent
from qita.harness import resolve_family_preset


class VerificationCritic(Critic):
    """Stop the run if the verification command returned a non-zero exit code."""

    def evaluate(self, state: Any, decision: Decision[Any], results: list[Any]) -> Dict[str, Any]:
        for result in results:
            if isinstance(result, dict):
                returncode = int(result.get("returncode", 0))
                if returncode != 0:
                    return {"action": "retry", "reason": f"command failed with returncode={returncode}", "score": 0.0}
        return {"action": "continue", "score": 1.0}


class MinEvidenceCriteria(StopCriteria):
    """Stop only after at least N evidence items have been collected."""

    def __init__(self, min_evidence: int = 3):
        self.min_evidence = min_evidence

    def should_stop(self, state: Any, step_count: int, runtime_info: Optional[Dict[str, Any]] = None
                    ) -> Tuple[bool, Optional[StopReason], Optional[str]]:
        evidence = getattr(state, "evidence", [])
        final_result = getattr(state, "final_result", None)
        if final_result and len(evidence) >= self.min_evidence:
            return True, StopReason.FINAL, f"evidence={len(evidence)} >= min={self.min_evidence}"
        return False, None, None


def make_agent():
    def bash(command):
        return {"returncode": 1 if command == "verify --strict" else 0, "stdout": command}

    script = [
        step(("bash", {"command": "verify --strict"}), evidence=["e1"]),  # critic asks for a retry
        step(("bash", {"command": "verify"}), evidence=["e2"]),
        step(final="draft answer"),  # final, but only 2 evidence items: MinEvidence keeps going
        step(("bash", {"command": "collect"}), evidence=["e3"]),
        step(final="answer with evidence"),
    ] + [step(("bash", {"command": "idle"}))] * 5
    return ScriptedAgent(script, tools={"bash": bash})


def test_seed_examples_run_with_qita_imports():
    agent = make_agent()
    result = agent.run(task="...", max_steps=10, critics=[VerificationCritic()],
                       stop_criteria=[MinEvidenceCriteria(min_evidence=3), MaxRuntimeCriteria(max_runtime_seconds=300.0),
                                      StagnationCriteria(max_stagnant_steps=4,
                                                         signature_fn=lambda s: (s.final_result,
                                                                                 getattr(s, "cursor", None)))],
                       return_state=True)
    # step 0 is sent back by the critic, step 1 (the retry) passes, step 2 answers with only
    # 2 evidence items so MinEvidence keeps going, step 3 collects the third while the draft
    # answer is still set -> FINAL after 4 steps, before the second answer is ever given
    assert result.state.stop_reason == "final"
    assert result.state.final_result == "draft answer"
    assert result.steps == 4
    if result.state.stop_reason == "final":
        outcome = "Done: " + result.state.final_result
    elif result.state.stop_reason == "budget_steps":
        outcome = "partial"
    else:
        outcome = "other"
    assert outcome == "Done: draft answer"


def test_seed_task_budget_example():
    task = Task(id="research-001", objective="Summarize the article at the given URL.",
                budget=TaskBudget(max_steps=15, max_runtime_seconds=180.0, max_tokens=8192))
    agent = ScriptedAgent([step(("bash", {"command": "fetch"}), tokens=(3000, 1000))] * 20,
                          tools={"bash": lambda command: {"returncode": 0}})
    result = agent.run(task=task, return_state=True)
    # 4000 tokens a step: 8000 after two steps is not over 8192, 12000 after three is
    assert result.state.stop_reason == "budget_tokens" and result.steps == 3


def test_seed_engine_example_and_builtin_constructors():
    preset = resolve_family_preset("qwen")
    criteria = [FinalResultCriteria(), MaxStepsCriteria(max_steps=15), MaxRuntimeCriteria(max_runtime_seconds=120.0),
                MaxTokensCriteria(max_tokens=preset.recommended_max_tokens or 500_000),
                StagnationCriteria(max_stagnant_steps=3)]
    agent = ScriptedAgent([step(final="ok")])
    engine = Engine(agent=agent, critics=[VerificationCritic()], stop_criteria=criteria)
    result = engine.run("my task")
    assert result.state.stop_reason == StopReason.FINAL and result.final_result == "ok"
    assert agent.run(task="...", max_steps=10, critics=[VerificationCritic()]) == "ok"  # without return_state
