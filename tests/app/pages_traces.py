"""Crafted traces for the page tests: a small, hand-countable set of runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from tests.conftest import write_jsonl

TS = "2026-03-01T10:00:{:02d}+00:00"


def run_records(run_id: str, *, steps: int = 2, stop_reason: Optional[str] = "final", experiment: str = "exp",
                variant: str = "smoke", model: str = "m1", tags: Optional[list[str]] = None, tokens: int = 10,
                elapsed: float = 10.0, criteria: Optional[list[dict[str, Any]]] = None,
                results: Optional[list[dict[str, Any]]] = None, early: Optional[dict[str, Any]] = None,
                budget: Optional[dict[str, Any]] = None, objective: str = "do the thing", second: int = 0,
                final_result: Optional[str] = None, stop_detail: Optional[str] = None,
                critic_outputs: Optional[list[list[dict[str, Any]]]] = None, end: bool = True) -> list[dict[str, Any]]:
    """A run: run_start, `steps` steps of `tokens` tokens each, criterion results, early_stop, run_end."""
    recs: list[dict[str, Any]] = [{
        "type": "run_start", "run_id": run_id, "ts": TS.format(second), "task_id": f"task-{run_id}",
        "experiment": experiment, "variant": variant, "model": model, "agent": "agent-a", "objective": objective,
        "tags": tags or [], "criteria": criteria or [], "budget": budget or {},
        "early_stop": {"enabled": early is not None},
    }]
    for i in range(steps):
        outs = (critic_outputs[i] if critic_outputs and i < len(critic_outputs)
                else [{"critic": "judge", "action": "continue", "reason": f"ok {i}", "score": 0.5}])
        recs.append({"type": "step", "run_id": run_id, "step": i, "observation": f"obs {i}",
                     "decision": {"mode": "act", "rationale": f"because {i}", "actions": [{"name": "look", "args": {"i": i}}]},
                     "actions": [{"name": "look", "args": {"i": i}}], "action_results": [f"res {i}"],
                     "critic_outputs": outs, "tokens": {"input": tokens, "output": 0, "total": tokens},
                     "state_diff": {"k": {"before": i, "after": i + 1}}})
    for r in results or []:
        recs.append({"type": "criterion", "run_id": run_id, **r})
    if early is not None:
        recs.append({"type": "early_stop", "run_id": run_id, **early})
    if end:
        recs.append({"type": "run_end", "run_id": run_id, "status": "completed", "stop_reason": stop_reason,
                     "final_result": final_result, "stop_detail": stop_detail, "steps": steps,
                     "tokens": {"input": tokens * steps, "output": 0, "total": tokens * steps},
                     "elapsed_s": elapsed})
    return recs


def early_run(run_id: str = "early-1") -> list[dict[str, Any]]:
    """An early-stopped run: `smoke` armed (stop_when pass), `e2e` gating but not armed,
    `style` informational."""
    return run_records(
        run_id, steps=3, stop_reason="early_stop", budget={"max_steps": 10, "max_tokens": 100, "max_runtime_seconds": 40},
        criteria=[{"id": "smoke", "type": "test", "stop_when": "pass", "pass_threshold": 0.8},
                  {"id": "e2e", "type": "test"},
                  {"id": "style", "type": "lint", "gating": False}],
        results=[{"id": "smoke", "score": 0.9, "passed": True}, {"id": "e2e", "score": 0.1, "passed": False},
                 {"id": "style", "score": 1.0, "passed": True}],
        early={"reason": "criterion_passed", "deciding_criterion": "smoke", "armed_criteria": ["smoke"], "step": 2,
               "tool_call_index": 1, "elapsed_s": 12.5, "turns_remaining": 7},
        critic_outputs=[[{"critic": "judge", "action": "continue", "score": 0.3}],
                        [{"critic": "judge", "action": "retry", "reason": "again", "score": 0.4},
                         {"action": "continue", "reason": "nameless", "score": 0.6}],
                        [{"critic": "judge", "action": "stop", "reason": "done", "score": 0.95}]],
        tokens=20, elapsed=20.0)


def write_set(folder: Path) -> Path:
    """Five runs whose figures the tests work out by hand (see test_pages.py)."""
    recs: list[dict[str, Any]] = []
    # a: pass, 2 steps x 10 tokens, 10 s ; b: fail, 4 steps x 10, 30 s ; c: fail, 6 steps x 10, 50 s
    recs += run_records("a", steps=2, elapsed=10, criteria=[{"id": "c"}], results=[{"id": "c", "score": 1.0, "passed": True}],
                        tags=["blue"], final_result="the answer is 42", second=1)
    recs += run_records("b", steps=4, elapsed=30, stop_reason="budget_steps", criteria=[{"id": "c"}],
                        results=[{"id": "c", "score": 0.0, "passed": False}], stop_detail="ran out of steps", second=2,
                        model="m2", variant="e2e")
    recs += run_records("c", steps=6, elapsed=50, stop_reason="budget_steps", criteria=[{"id": "c"}],
                        results=[{"id": "c", "score": 0.0, "passed": False}], stop_detail="ran out of steps", second=3)
    # d: not graded (no criteria), 1 step, 5 s, unknown stop reason
    recs += run_records("d", steps=1, elapsed=5, stop_reason="weird_reason", second=4, objective="find the needle")
    # early-1: early stopped, 3 steps x 20 tokens, 20 s, passes on its armed criterion
    recs += early_run()
    return write_jsonl(folder / "set.jsonl", recs)
