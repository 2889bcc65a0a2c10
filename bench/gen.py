"""Synthetic qita traces at scale: N runs x M steps with realistic payloads.

Each step carries an observation of a few KB, a decision with actions and results,
several critic outputs, and one event per engine phase. Runs belong to experiments
with paired `smoke` / `e2e` variants (same task ids), so the compare page has pairs.
Text comes from a pre-built pool of random words, so generating 1 GB stays fast and
the output is deterministic for a given seed.

    python -m bench.gen out.jsonl --runs 20 --steps 50
    python -m bench.gen big.jsonl --target-mb 1024 --steps 1000
"""

from __future__ import annotations

import argparse
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, Iterator, Optional

import orjson

PHASES = ("DECIDE", "ACT", "REDUCE", "CRITIC", "CHECK_STOP")
CRITICS = ("progress", "safety", "loop_guard")
STOP_REASONS = ("success", "final", "budget_steps", "critic_stop", "stagnation", "early_stop", "unrecoverable_error")
TOOLS = ("read_file", "run_tests", "edit_file", "search", "shell")
WORDS = ("agent", "tool", "file", "error", "test", "passed", "failed", "patch", "diff", "module", "import",
         "function", "return", "value", "config", "retry", "timeout", "assert", "build", "result", "click",
         "window", "button", "screen", "scroll", "query", "index", "cache", "token", "model", "output")
T0 = datetime(2026, 1, 5, 9, 0, 0, tzinfo=timezone.utc)


class TextPool:
    """Random word text, sliced out of one long pre-built string (cheap at any volume)."""

    def __init__(self, rng: random.Random, size: int = 1 << 18):
        self.rng = rng
        self.text = " ".join(rng.choice(WORDS) for _ in range(size // 5))

    def take(self, n: int) -> str:
        start = self.rng.randrange(0, max(1, len(self.text) - n))
        return self.text[start:start + n]


def _ts(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def run_records(*, run_id: str, task_id: str, experiment: str, variant: str, steps: int, rng: random.Random,
                pool: TextPool, obs_bytes: int = 2048, start: datetime = T0) -> Iterator[dict]:
    """Every record of one run, in write order: run_start, steps with events, criteria, run_end."""
    early = variant == "smoke"
    yield {
        "type": "run_start", "run_id": run_id, "schema": "qita.trace/1", "ts": _ts(start), "task_id": task_id,
        "experiment": experiment, "variant": variant, "replicate": 0,
        "objective": f"Fix the failing test in {task_id}: " + pool.take(160),
        "agent": "bench-agent", "model": rng.choice(("gpt-x", "claude-y", "local-z")),
        "budget": {"max_steps": max(steps, 1) * 2, "max_runtime_seconds": 3600.0, "max_tokens": 10_000_000},
        "critics": list(CRITICS), "stop_criteria": [{"name": "final_result", "params": {}}],
        "criteria": [
            {"id": "tests_pass", "type": "command", "description": "the test suite passes",
             "stop_when": "decided" if early else None, "gating": True, "pass_threshold": 0.9},
            {"id": "style", "type": "llm_judge", "description": "the patch is tidy", "stop_when": None,
             "gating": False, "pass_threshold": 0.5},
        ],
        "early_stop": {"enabled": early}, "tags": [variant, f"exp:{experiment}"],
        "metadata": {"generator": "bench.gen"},
    }
    t = start
    tok_total = 0
    for i in range(steps):
        dur = round(rng.uniform(0.2, 4.0), 3)
        tokens = {"input": rng.randint(500, 4000), "output": rng.randint(50, 600)}
        tokens["total"] = tokens["input"] + tokens["output"]
        tok_total += tokens["total"]
        tool = rng.choice(TOOLS)
        action = {"name": tool, "args": {"path": f"src/mod_{rng.randint(0, 99)}.py", "query": pool.take(40)}}
        outs = []
        for c in CRITICS:
            act = "continue"
            roll = rng.random()
            if roll < 0.03:
                act = "retry"
            elif roll < 0.035:
                act = "stop"
            outs.append({"critic": c, "action": act, "reason": pool.take(80), "score": round(rng.random(), 3),
                         "details": {"signals": [pool.take(20), pool.take(20)], "window": rng.randint(1, 10)}})
        step_ts = _ts(t)
        yield {
            "type": "step", "run_id": run_id, "step": i, "ts": step_ts, "duration_s": dur,
            "observation": {"screen": pool.take(obs_bytes), "cwd": "/workspace", "files": [pool.take(24) for _ in range(4)]},
            "decision": {"mode": "tool", "rationale": pool.take(300), "actions": [action], "final_answer": None},
            "actions": [action],
            "action_results": [{"status": "ok", "stdout": pool.take(400)}],
            "tool_invocations": [{"tool_name": tool, "latency_ms": rng.randint(5, 900), "status": "ok", "error": None}],
            "critic_outputs": outs,
            "state_diff": {"step": {"before": i, "after": i + 1}},
            "tokens": tokens, "cost_usd": round(tokens["total"] * 2e-6, 6), "retry": False,
        }
        for ph in PHASES:
            t += timedelta(milliseconds=rng.randint(1, 200))
            yield {"type": "event", "run_id": run_id, "step": i, "phase": ph, "ok": True,
                   "payload": {"note": pool.take(120)}, "error": None, "ts": _ts(t)}
        t += timedelta(seconds=dur)
    passed = rng.random() < 0.6
    score = round(rng.uniform(0.9, 1.0) if passed else rng.uniform(0.0, 0.85), 3)
    yield {"type": "criterion", "run_id": run_id, "id": "tests_pass", "score": score, "passed": passed,
           "details": {"ran": 42}, "live_verdict": "pass" if passed else "fail",
           "decided_at_step": max(0, steps - 1)}
    yield {"type": "criterion", "run_id": run_id, "id": "style", "score": round(rng.random(), 3), "passed": None,
           "details": None, "live_verdict": None, "decided_at_step": None}
    reason = "early_stop" if early and rng.random() < 0.5 else rng.choice(STOP_REASONS[:5])
    if reason == "early_stop":
        yield {"type": "early_stop", "run_id": run_id, "reason": "criterion_passed" if passed else "criterion_failed",
               "deciding_criterion": "tests_pass", "armed_criteria": ["tests_pass"], "step": max(0, steps - 1),
               "tool_call_index": 1, "elapsed_s": (t - start).total_seconds(), "turns_remaining": steps}
    yield {"type": "run_end", "run_id": run_id, "ts": _ts(t), "status": "completed", "stop_reason": reason,
           "stop_detail": None if passed else "tests_pass: " + pool.take(60),
           "final_result": pool.take(200), "verdict": None, "steps": steps,
           "tokens": {"input": None, "output": None, "total": tok_total},
           "cost_usd": round(tok_total * 2e-6, 6), "elapsed_s": (t - start).total_seconds(), "failure_report": {}}


def plan(runs: int, experiments: int, exp_prefix: str = "exp-") -> Iterator[tuple[str, str, str, str]]:
    """(run_id, task_id, experiment, variant) for `runs` runs: tasks paired smoke/e2e per experiment."""
    for n in range(runs):
        pair, variant = divmod(n, 2)
        exp = f"{exp_prefix}{pair % max(1, experiments):03d}"
        task = f"task-{pair // max(1, experiments):06d}"
        yield f"{exp}/{task}/{'smoke' if variant == 0 else 'e2e'}", task, exp, ("smoke" if variant == 0 else "e2e")


def write_traces(fh: IO[bytes], *, runs: int, steps: int, experiments: int = 4, obs_bytes: int = 2048, seed: int = 7,
                 target_bytes: Optional[int] = None, exp_prefix: str = "exp-") -> tuple[int, int]:
    """Write runs to `fh`; stop early once `target_bytes` is reached. Returns (bytes, records)."""
    rng = random.Random(seed)
    pool = TextPool(rng)
    written = records = 0
    for k, (rid, task, exp, variant) in enumerate(plan(runs, experiments, exp_prefix)):
        start = T0 + timedelta(minutes=k)
        for rec in run_records(run_id=rid, task_id=task, experiment=exp, variant=variant, steps=steps,
                               rng=rng, pool=pool, obs_bytes=obs_bytes, start=start):
            line = orjson.dumps(rec) + b"\n"
            fh.write(line)
            written += len(line)
            records += 1
        if target_bytes is not None and written >= target_bytes:
            break
    return written, records


def generate(path: Path, *, runs: int = 20, steps: int = 50, experiments: int = 4, obs_bytes: int = 2048,
             seed: int = 7, target_mb: Optional[float] = None, exp_prefix: str = "exp-") -> tuple[int, int]:
    """Write a trace file; with `target_mb`, as many runs as it takes to reach that size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    target = int(target_mb * 1024 * 1024) if target_mb else None
    with open(path, "wb", buffering=1 << 20) as fh:
        return write_traces(fh, runs=runs if target is None else 10**9, steps=steps, experiments=experiments,
                            obs_bytes=obs_bytes, seed=seed, target_bytes=target, exp_prefix=exp_prefix)


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--experiments", type=int, default=4)
    ap.add_argument("--obs-bytes", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--target-mb", type=float, default=None, help="keep adding runs until the file reaches this size")
    a = ap.parse_args(argv)
    size, n = generate(a.out, runs=a.runs, steps=a.steps, experiments=a.experiments, obs_bytes=a.obs_bytes,
                       seed=a.seed, target_mb=a.target_mb)
    print(f"wrote {a.out}: {size / 1e6:.1f} MB, {n} records")


if __name__ == "__main__":
    main()
