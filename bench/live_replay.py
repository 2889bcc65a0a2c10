"""Live-verdict benchmark: replaying recorded actions into per-step verdicts, and the engine's step cost.

`replay` times `qita.live.replay_live_verdicts` over synthetic recorded runs (the board's
path for traces without `step.live_verdicts`): N runs of S steps, two tool calls a step,
five criteria of the kinds a policy can arm (a count to reach, a must-not-run command,
a bounded tool, a first-engaged skill, a skill at any point), chosen so that most stay
undecided for long — the costly case, since a decided verdict is never asked again.

`engine` times whole engine runs of S steps with the same five criteria (none armed, so
every run goes to its budget) writing a trace, i.e. what tracking every live criterion
at every tool call adds to a step. Run it with `--qita PATH` to time another checkout's
`qita` package (e.g. one extracted with `git archive`) for a before/after figure.

`--ab DIR,DIR,...` times several checkouts' `qita` in one process instead, alternating
between them sample by sample and keeping each one's best CPU time, so that load from
other processes on a shared machine hits every checkout alike (`.` is this checkout).

    python -m bench.live_replay --runs 10000 --steps 100
    python -m bench.live_replay --runs 0 --engine-runs 20 --steps 100 [--no-criteria] [--qita /tmp/before]
    python -m bench.live_replay --runs 0 --engine-runs 5 --ab /tmp/before,. --samples 15 [--no-criteria]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import figure, machine

CRITERIA = [
    {"id": "ran_tests", "type": "command_executed", "pattern": r"^pytest", "min_count": 3},
    {"id": "no_push", "type": "command_executed", "pattern": r"^git push", "max_count": 0},
    {"id": "few_edits", "type": "tool_invoked", "tool": "edit", "max_count": 40},
    {"id": "first_skill", "type": "skill_triggered", "skill": "pdf"},
    {"id": "any_skill", "type": "skill_triggered", "skill": "docx", "policy": "any"},
]
COMMANDS = ["ls", "cat a.py", "python -m build", "grep -r x .", "pytest -q"]


def synthetic_steps(rng: random.Random, steps: int) -> list[list[dict[str, Any]]]:
    """One run's recorded actions: mostly shell commands and edits, rarely a test run or a skill."""
    out = []
    for _ in range(steps):
        calls = []
        for _ in range(2):
            roll = rng.random()
            if roll < 0.45:
                calls.append({"name": "bash", "args": {"command": rng.choice(COMMANDS[:4])}, "exit_code": 0})
            elif roll < 0.9:
                calls.append({"name": "edit", "args": {"path": "a.py"}, "ok": True})
            elif roll < 0.97:
                calls.append({"name": "bash", "args": {"command": "pytest -q"}, "exit_code": rng.choice([0, 1])})
            else:
                calls.append({"name": "skill", "args": {"name": rng.choice(["pdf", "docx", "xlsx"])}})
        out.append(calls)
    return out


def bench_replay(runs: int, steps: int, seed: int = 0) -> dict[str, float]:
    from qita.live import replay_live_verdicts

    rng = random.Random(seed)
    data = [synthetic_steps(rng, steps) for _ in range(runs)]
    started = time.perf_counter()
    decided = 0
    for run in data:
        decided += len(replay_live_verdicts(run, CRITERIA).decided)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "runs_per_s": runs / seconds, "tool_calls": runs * steps * 2,
            "decided_share": decided / (runs * len(CRITERIA))}


def bench_engine(runs: int, steps: int, seed: int = 0, with_criteria: bool = True) -> dict[str, float]:
    from qita import Engine, TraceWriter, criterion_from_spec
    from qita.agents import ScriptedAgent

    rng = random.Random(seed)
    tools = {"bash": lambda command: {"returncode": 0}, "edit": lambda path: {"ok": True},
             "skill": lambda name: {"loaded": name}}
    scripts = [[{"actions": [{"name": c["name"], "args": c["args"]} for c in step], "tokens": [10, 5]}
                for step in synthetic_steps(rng, steps)] for _ in range(runs)]
    # the spec's min/max spelled out so an older qita (min_count required for max_count=0) builds it too
    specs = [dict(c, min_count=c.get("min_count", 0 if c.get("max_count") == 0 else 1))
             if c["type"] != "skill_triggered" else c for c in CRITERIA]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        for i, script in enumerate(scripts):
            criteria = [criterion_from_spec(s) for s in specs] if with_criteria else []
            with TraceWriter(Path(tmp) / f"r{i}.jsonl", f"r{i}") as writer:
                Engine(ScriptedAgent(script, tools=tools), criteria=criteria, trace=writer, max_steps=steps).run("t")
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "steps_per_s": runs * steps / seconds}


def _qita_modules() -> list[str]:
    return [m for m in sys.modules if m == "qita" or m.startswith("qita.")]


def ab_engine(folders: list[str], runs: int, steps: int, samples: int, with_criteria: bool) -> dict[str, float]:
    """Best CPU seconds per checkout for `runs` engine runs, samples alternating between checkouts."""
    original = {m: sys.modules[m] for m in _qita_modules()}
    try:
        return _alternate(folders, runs, steps, samples, with_criteria)
    finally:
        # the caller's own qita comes back, whichever checkout was timed last
        for name in _qita_modules():
            del sys.modules[name]
        sys.modules.update(original)


def _alternate(folders: list[str], runs: int, steps: int, samples: int, with_criteria: bool) -> dict[str, float]:
    import importlib

    loaded: dict[str, dict[str, Any]] = {}
    for folder in folders:
        # each checkout's qita is imported once and kept as its own set of modules
        for name in _qita_modules():
            del sys.modules[name]
        path = str(Path(folder).resolve())
        sys.path.insert(0, path)
        importlib.import_module("qita.agents")
        loaded[folder] = {m: sys.modules[m] for m in _qita_modules()}
        sys.path.remove(path)
    best = {folder: float("inf") for folder in folders}
    for i in range(samples):
        for folder in folders if i % 2 == 0 else folders[::-1]:
            for name in _qita_modules():
                del sys.modules[name]
            sys.modules.update(loaded[folder])
            started = time.process_time()
            bench_engine(runs, steps, with_criteria=with_criteria)
            best[folder] = min(best[folder], time.process_time() - started)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10_000, help="runs to replay (0: skip the replay figure)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--engine-runs", type=int, default=0, help="engine runs to time (0: skip)")
    parser.add_argument("--no-criteria", action="store_true", help="time the engine runs without criteria")
    parser.add_argument("--qita", help="a folder holding another `qita` package to time instead of this one")
    parser.add_argument("--ab", help="folders holding `qita` packages (comma-separated, `.` for this one) to time "
                                     "against each other in CPU time")
    parser.add_argument("--samples", type=int, default=15, help="alternating samples per checkout with --ab")
    args = parser.parse_args(argv)
    if args.ab:
        print(machine())
        folders = [str(Path(__file__).resolve().parents[1]) if f == "." else f for f in args.ab.split(",")]
        best = ab_engine(folders, args.engine_runs or 5, args.steps, args.samples, not args.no_criteria)
        label = "no criteria" if args.no_criteria else "5 criteria"
        for folder, seconds in best.items():
            print(figure(f"engine {label}, {folder}", f"{(args.engine_runs or 5) * args.steps / seconds:,.0f} "
                         f"steps per CPU-s (best of {args.samples})"))
        return
    if args.qita:
        sys.path.insert(0, args.qita)
        for name in [m for m in sys.modules if m == "qita" or m.startswith("qita.")]:
            del sys.modules[name]
    import qita

    print(machine())
    print(f"qita from {Path(qita.__file__).parent}")
    if args.runs:
        r = bench_replay(args.runs, args.steps)
        print(figure(f"replay {args.runs:,} runs x {args.steps} steps, 5 criteria", f"{r['seconds']:.2f} s"))
        print(figure("replay throughput", f"{r['runs_per_s']:,.0f} runs/s"))
        print(figure("criteria decided by the end of a run", f"{r['decided_share']:.0%}"))
    if args.engine_runs:
        e = bench_engine(args.engine_runs, args.steps, with_criteria=not args.no_criteria)
        label = "no criteria" if args.no_criteria else "5 criteria"
        print(figure(f"engine {args.engine_runs} runs x {args.steps} steps, {label}, traced",
                     f"{e['seconds']:.2f} s"))
        print(figure("engine throughput", f"{e['steps_per_s']:,.0f} steps/s"))


if __name__ == "__main__":
    main()
