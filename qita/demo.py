"""`run_demo`: the demo experiment `demo-early-stop-ab`, smoke vs e2e from one task file.

Every task of `qita.demo_tasks` runs twice with the same criteria: in `smoke` early stop
is switched on (the task's key criterion is armed), in `e2e` the run goes to its natural
end. Agents are scripted and tools simulated, so apart from timestamps and durations the
traces are the same on every call with the same arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Union

from .agents.scripted import ScriptedAgent, SimulatedTools
from .core import Task, TaskBudget
from .criteria import criterion_from_spec
from .demo_tasks import EXPERIMENT, MODELS, DemoTask, build_tasks
from .engine import Engine, RunResult
from .engine.critic import Critic, ForbiddenCommandCritic, ReturnCodeCritic
from .engine.stop_criteria import FinalResultCriteria, StagnationCriteria
from .writer import TraceWriter

VARIANTS = ("smoke", "e2e")

#: Simulated seconds per tool call, so the demo's durations look like real runs'.
TOOL_SECONDS = {"bash": 1.2, "read_file": 0.15, "write_file": 0.2, "skill": 0.6, "search": 0.8}


class SimClock:
    """A monotonic clock that only moves when the simulated agent or a tool 'spends' time."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def _timed(fn: Any, clock: SimClock, seconds: float) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        clock.advance(seconds)
        return fn(*args, **kwargs)

    return call


class ProgressCritic(Critic):
    """Scores each step by the share of its tool calls that succeeded; never changes the run."""

    name = "ProgressCritic"

    def evaluate(self, state, decision, results):
        if not results:
            return {"action": "continue", "reason": "no tool calls this step", "score": 1.0 if decision.is_final
                    else 0.5, "details": {"mode": decision.mode}}
        ok = sum(1 for r in results if not (isinstance(r, dict) and (r.get("status") == "error"
                                                                      or r.get("returncode", 0) != 0)))
        return {"action": "continue", "reason": f"{ok}/{len(results)} tool calls succeeded",
                "score": round(ok / len(results), 3), "details": {"ok": ok, "calls": len(results)}}


_CRITICS = {"ReturnCodeCritic": ReturnCodeCritic, "ForbiddenCommandCritic": ForbiddenCommandCritic,
            "ProgressCritic": ProgressCritic}


def demo_engine(task: DemoTask, variant: str, replicate: int, writer: Any = None) -> tuple[Engine, Task]:
    """The engine and task for one run of the demo (exposed so tests can run single tasks)."""
    tools = SimulatedTools(**task.fixtures)
    script = [dict(entry) for entry in task.script]
    if replicate:
        # A replicate differs the way a resampled model would: same path, slightly different usage.
        for entry in script:
            if entry.get("tokens"):
                entry["tokens"] = [entry["tokens"][0] + 37 * replicate, entry["tokens"][1] + 11 * replicate]
    # An agent past its script still spends tokens thinking; a stalled agent is not free.
    idle = {"rationale": "Still looking for a lead; nothing new to try.", "actions": [], "tokens": [700, 45]}
    clock = SimClock()
    timed_tools = {name: _timed(fn, clock, TOOL_SECONDS.get(name, 0.5)) for name, fn in tools.as_tools().items()}
    agent = ScriptedAgent(script, tools=timed_tools, model=task.model, name="scripted-coder",
                          price_per_1k=MODELS[task.model], exhausted=idle)
    scripted_decide = agent.decide

    def decide(state: Any, observation: Any) -> Any:
        # Model latency: reading the prompt plus generating the answer.
        decision = scripted_decide(state, observation)
        usage = getattr(decision, "usage", None)
        clock.advance(0.6 + ((usage.input / 5000 + usage.output / 40) if usage else 1.0))
        return decision

    agent.decide = decide  # type: ignore[method-assign]
    stop_criteria = None
    if task.stagnation:
        stop_criteria = [FinalResultCriteria(), StagnationCriteria(max_stagnant_steps=task.stagnation)]
    engine = Engine(
        agent, [_CRITICS[name]() for name in task.critics], stop_criteria,
        criteria=[criterion_from_spec(spec) for spec in task.criteria], stop_early=(variant == "smoke"),
        trace=writer, experiment=EXPERIMENT, variant=variant, replicate=replicate,
        tags=[*task.tags, variant], metadata={"scenario": task.scenario, "whole_story": task.whole_story},
        clock=clock,
    )
    budget = TaskBudget(max_steps=task.max_steps, max_tokens=task.max_tokens)
    return engine, Task(id=task.id, objective=task.objective, budget=budget)


def run_id_for(task_id: str, variant: str, replicate: int) -> str:
    return f"{EXPERIMENT}.{variant}.{task_id}.r{replicate}"


def run_demo(out_dir: Union[str, Path], tasks: int = 24, seed: int = 0) -> list[Path]:
    """Run the demo experiment and return the trace files written (one JSONL per run).

    Files go to `out_dir/demo-early-stop-ab/<variant>/<task>.r<replicate>.jsonl`; an
    existing file of the same run is replaced, so running the demo twice does not
    duplicate runs.
    """
    out = Path(out_dir) / EXPERIMENT
    paths: list[Path] = []
    for variant in VARIANTS:
        for task in build_tasks(tasks, seed):
            for replicate in range(task.replicates):
                path = out / variant / f"{task.id}.r{replicate}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.unlink(missing_ok=True)
                with TraceWriter(path, run_id_for(task.id, variant, replicate)) as writer:
                    engine, demo_task = demo_engine(task, variant, replicate, writer)
                    engine.run(demo_task)
                paths.append(path)
    return paths


def run_demo_results(tasks: int = 24, seed: int = 0) -> dict[tuple[str, str, int], RunResult]:
    """Run the experiment without writing traces; results keyed by (variant, task id, replicate)."""
    results = {}
    for variant in VARIANTS:
        for task in build_tasks(tasks, seed):
            for replicate in range(task.replicates):
                engine, demo_task = demo_engine(task, variant, replicate)
                results[(variant, task.id, replicate)] = engine.run(demo_task)
    return results


if __name__ == "__main__":  # pragma: no cover - a quick look without the board
    import sys
    import tempfile

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="qita-demo-"))
    for p in run_demo(target):
        print(p)
