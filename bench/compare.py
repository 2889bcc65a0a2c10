"""Compare benchmark over HTTP on loopback: statistics and grouping at 1,000 and 10,000 pairs.

For each size, one database holds `2 * pairs` runs (smoke / e2e of experiment `cmp-000`,
early stops, critics and criteria from `bench.gen`), built once and kept under the bench
folder. Each round starts a fresh board (cold caches) and measures the first response of
the compare page grouped by tag, then the same page again (the comparison cached until a
run changes), then the JSON twin and a page sorted differently. Three rounds; medians.

    python -m bench.compare --pairs 1000 10000
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from .common import figure, machine
from .gen import generate
from .server import WORK, Board, first_response, timed

PATH = "/compare?experiment=cmp-000&a=smoke&b=e2e&group=tag"


def build(pairs: int) -> Path:
    """A database with `pairs` smoke/e2e pairs (reused when it is already there)."""
    db = WORK / f"compare-{pairs}.db"
    marker = db.with_suffix(".json")
    if db.exists() and marker.exists():
        return db
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    trace = WORK / f"compare-{pairs}.jsonl"
    generate(trace, runs=2 * pairs, steps=3, experiments=1, obs_bytes=200, seed=2, exp_prefix="cmp-")
    from qita_board.db import open_database
    from qita_board.ingest import Ingestor
    from qita_board.settings import Settings

    settings = Settings(db=str(db))
    engine = open_database(settings)
    t0 = time.perf_counter()
    try:
        Ingestor(engine, settings).ingest_paths([str(trace)])
    finally:
        engine.dispose()
    marker.write_text(json.dumps({"pairs": pairs, "ingest_s": time.perf_counter() - t0}))
    return db


def measure(pairs: int, rounds: int = 3) -> dict[str, Any]:
    db = build(pairs)
    firsts, warm, api, resorted = [], [], [], []
    for _ in range(rounds):
        with Board(db) as board, httpx.Client(base_url=board.base, timeout=120) as client:
            first = first_response(client, PATH)
            firsts.append(first["total_ms"])
            warm.append(timed(client, PATH, 5, warmup=0)["p50_ms"])
            api.append(timed(client, PATH.replace("/compare", "/api/compare"), 3, warmup=0)["p50_ms"])
            resorted.append(timed(client, PATH + "&sort=savings", 3, warmup=0)["p50_ms"])
    return {"pairs": pairs, "first_ms": statistics.median(firsts), "firsts_ms": firsts,
            "cached_ms": statistics.median(warm), "api_cached_ms": statistics.median(api),
            "resorted_ms": statistics.median(resorted)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    print(json.dumps(machine()))
    targets = {1000: 150, 10000: 300}
    for n in args.pairs:
        res = measure(n, args.rounds)
        print(json.dumps(res))
        target = targets.get(n)
        for label, key in (("first response (cold board)", "first_ms"), ("same page again (cached)", "cached_ms"),
                           ("JSON twin (cached)", "api_cached_ms"), ("sorted by savings (cached)", "resorted_ms")):
            value = res[key]
            print(figure(f"compare {n:,} pairs by tag: {label}", f"{value:.0f} ms",
                         f"<= {target} ms" if target else "", value <= target if target else None))


if __name__ == "__main__":
    main()
