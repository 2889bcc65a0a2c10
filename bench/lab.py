"""Policy lab benchmark: indexing, one policy over 10,000 runs, the frontier of 20 policies.

Builds once (kept under the bench folder) a database of recorded full runs: experiment
`lab-10k` with 10,000 runs and `lab-1k` with 1,000, each of 100 steps with two tool
calls a step (`bench.live_replay.synthetic_steps`) and its five criteria (a count to
reach, a must-not-run command, a bounded tool, a first-engaged skill, a skill at any
point), tokens and a duration per step, and a verdict. Then it measures:

- ingest and indexing time (`app.lab.index.index_pending`: what `qita whatif` does first,
  and the board's background indexer does batch by batch);
- one policy over the 10,000 runs through `app.lab.view.lab` with a cold cache — the
  page's and the API's path: bulk reads of the indexed state, the simulation, compare's
  summary with its intervals — and the same as the first HTTP response of `/api/lab` on
  a board started on loopback;
- the frontier of the 1,000 runs (20 candidate policies for these five criteria), cold,
  in-process and as the first response of `/api/lab/frontier`.

Targets (docs/performance.md): one policy over 10,000 runs <= 2 s; 20 policies over
1,000 runs <= 2 s.

    python -m bench.lab                      # 10,000 + 1,000 runs of 100 steps
    python -m bench.lab --runs 200 --frontier-runs 50 --steps 20 --rounds 1   # a quick look
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any, Optional

import httpx

from .common import figure, machine
from .live_replay import CRITERIA, synthetic_steps
from .server import WORK, Board, first_response

#: three criteria armed, coder_eval's rule: a fail (the push, a wrong first skill) or both passes settle it
POLICY = "arm=ran_tests:pass&arm=no_push:fail&arm=first_skill:decided&rule=gate"


def write_runs(path: Path, *, experiments: dict[str, int], steps: int, seed: int = 3) -> int:
    """Every run's records as JSON Lines; returns how many records."""
    import orjson

    rng = random.Random(seed)
    n = 0
    with open(path, "wb") as fh:
        for experiment, runs in experiments.items():
            for i in range(runs):
                rid = f"{experiment}/{i:05d}"
                recs: list[dict[str, Any]] = [{"type": "run_start", "run_id": rid, "task_id": f"t{i:05d}",
                                               "experiment": experiment, "variant": "e2e", "criteria": CRITERIA}]
                for s, calls in enumerate(synthetic_steps(rng, steps)):
                    total = rng.randint(800, 3000)
                    recs.append({"type": "step", "run_id": rid, "step": s, "duration_s": round(rng.uniform(0.5, 4), 3),
                                 "actions": [{"name": c["name"], "args": c["args"]} for c in calls],
                                 "action_results": [{k: v for k, v in c.items() if k in ("exit_code", "ok")}
                                                    for c in calls],
                                 "tokens": {"input": total - 200, "output": 200, "total": total},
                                 "cost_usd": round(total * 2e-6, 6)})
                recs.append({"type": "run_end", "run_id": rid, "status": "completed", "stop_reason": "final",
                             "verdict": "pass" if rng.random() < 0.6 else "fail"})
                for r in recs:
                    fh.write(orjson.dumps(r) + b"\n")
                n += len(recs)
    return n


def build(runs: int, frontier_runs: int, steps: int, log=print) -> tuple[Path, dict[str, Any]]:
    """The database (reused when it is already there), with its build figures."""
    db = WORK / f"lab-{runs}-{frontier_runs}-{steps}.db"
    marker = db.with_suffix(".json")
    if db.exists() and marker.exists():
        return db, json.loads(marker.read_text())
    WORK.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    trace = WORK / f"lab-{runs}-{frontier_runs}-{steps}.jsonl"
    records = write_runs(trace, experiments={"lab-10k": runs, "lab-1k": frontier_runs}, steps=steps)
    from qita_board.db import open_database
    from qita_board.ingest import Ingestor
    from qita_board.lab.index import index_pending
    from qita_board.settings import Settings

    settings = Settings(db=str(db))
    engine = open_database(settings)
    try:
        t0 = time.perf_counter()
        Ingestor(engine, settings).ingest_paths([str(trace)])
        ingest_s = time.perf_counter() - t0
        log(f"ingested {records:,} records in {ingest_s:.1f} s")
        t0 = time.perf_counter()
        indexed = index_pending(engine)
        index_s = time.perf_counter() - t0
    finally:
        engine.dispose()
    trace.unlink(missing_ok=True)
    info = {"runs": runs, "frontier_runs": frontier_runs, "steps": steps, "records": records,
            "trace_mb": None, "ingest_s": ingest_s, "indexed": indexed, "index_s": index_s,
            "db_mb": db.stat().st_size / 2**20}
    marker.write_text(json.dumps(info))
    return db, info


def _cold(fn) -> float:
    from qita_board.queries import cache

    cache.clear()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def in_process(db: Path, rounds: int) -> dict[str, Any]:
    """view.lab for one policy over lab-10k, and the frontier of lab-1k, each with a cold cache."""
    from sqlmodel import Session

    from qita_board.db import open_database
    from qita_board.lab import view
    from qita_board.queries.run_list import RunFilters
    from qita_board.settings import Settings

    engine = open_database(Settings(db=str(db)))
    args = view.PolicyArgs(arm=("ran_tests:pass", "no_push:fail", "first_skill:decided"), rule="gate")
    out: dict[str, Any] = {"policy_s": [], "frontier_s": []}
    try:
        for _ in range(rounds):
            with Session(engine) as s:
                out["policy_s"].append(_cold(lambda: out.__setitem__("policy", view.lab(
                    s, filters=RunFilters(experiment="lab-10k", variant="e2e"), args=args, limit=200,
                    with_frontier=False, with_calibration=False))))
            with Session(engine) as s:
                out["frontier_s"].append(_cold(lambda: out.__setitem__("frontier", view.frontier_of(
                    s, filters=RunFilters(experiment="lab-1k", variant="e2e")))))
    finally:
        engine.dispose()
    return out


def over_http(db: Path, rounds: int) -> dict[str, Any]:
    """First responses (cold caches: a fresh board each round) of the API on loopback."""
    out: dict[str, list[float]] = {"policy_ms": [], "frontier_ms": [], "page_ms": []}
    for _ in range(rounds):
        with Board(db, env={"QITA_LAB_INDEX": "false"}) as board, \
                httpx.Client(base_url=board.base, timeout=300) as client:
            for key, path in (("policy_ms", f"/api/lab?experiment=lab-10k&variant=e2e&{POLICY}"),
                              ("frontier_ms", "/api/lab/frontier?experiment=lab-1k&variant=e2e"),
                              ("page_ms", f"/lab?experiment=lab-1k&variant=e2e&{POLICY}")):
                r = first_response(client, path)
                out[key].append(r["total_ms"] if r else float("nan"))
    return out


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--frontier-runs", type=int, default=1_000)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-http", action="store_true", help="skip the loopback HTTP figures")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    print(machine())
    db, info = build(args.runs, args.frontier_runs, args.steps)
    total_runs = args.runs + args.frontier_runs
    print(figure(f"ingest {total_runs:,} runs x {args.steps} steps ({info['records']:,} records)",
                 f"{info['ingest_s']:.1f} s"))
    print(figure(f"indexing {info['indexed']:,} runs, once", f"{info['index_s']:.1f} s"))
    print(f"  ({info['indexed'] / info['index_s']:,.0f} runs/s; database {info['db_mb']:.0f} MB)")
    res = in_process(db, args.rounds)
    s = res["policy"]["summary"]
    policy_s, frontier_s = statistics.median(res["policy_s"]), statistics.median(res["frontier_s"])
    print(figure(f"one policy, {res['policy']['set']['simulated']:,} runs, cold, in-process", f"{policy_s:.2f} s",
                 "<= 2 s", policy_s <= 2))
    print(f"  ({s['cut']:,} runs cut, tokens saved {s['tokens']['saved_pct']:.0f}%, {s['false_passes']['count']} "
          f"false passes; median of {args.rounds}: {', '.join(f'{x:.2f}' for x in res['policy_s'])} s)")
    points = res["frontier"]["points"]
    print(figure(f"frontier, {len(points)} policies, {args.frontier_runs:,} runs, cold", f"{frontier_s:.2f} s",
                 "<= 2 s", frontier_s <= 2))
    out = {"machine": machine(), "build": info, "policy_s": res["policy_s"], "frontier_s": res["frontier_s"],
           "policies": len(points)}
    if not args.no_http:
        http = over_http(db, args.rounds)
        for key, label in (("policy_ms", f"GET /api/lab, one policy over {args.runs:,} runs"),
                           ("frontier_ms", f"GET /api/lab/frontier, {len(points)} policies over "
                                           f"{args.frontier_runs:,} runs"),
                           ("page_ms", f"GET /lab page over {args.frontier_runs:,} runs")):
            print(figure(f"{label}: first response, fresh board", f"{statistics.median(http[key]):.0f} ms"))
        out["http"] = http
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    return out


if __name__ == "__main__":
    main()
