"""Ingest benchmark: our ingest against the raw floor on the same bytes, and peak RSS.

The floor is the least any ingest into this schema can do: each line parsed with
orjson, rows inserted with one executemany per table inside one transaction, nothing
else (no validation, no upsert, no derived fields). It writes to a database with the
same schema and indexes as ours, so the ratio measures our overhead only.

Peak memory is measured in a child process (VmHWM of /proc/self/status), so the
parent's own allocations (the floor's row lists) never count.

    python -m bench.ingest --mb 200            # throughput + ratio
    python -m bench.ingest --rss-mb 1024       # peak RSS while ingesting a 1 GB file
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import orjson

from .common import figure, machine, proc_status
from .gen import generate

WORK = Path(os.environ.get("QITA_BENCH_DIR", "/tmp/qita-bench"))
TARGET_RATIO = 0.5
TARGET_RSS = 250 * 1024 * 1024


def fresh_db(folder: Path, name: str) -> Path:
    """An empty database with the board's schema (Alembic head)."""
    from app.db import open_database
    from app.settings import Settings

    path = folder / name
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    open_database(Settings(db=str(path))).dispose()
    return path


def floor_ingest(trace: Path, db: Path) -> int:
    """The raw floor: orjson per line, one executemany per table, one transaction. Returns records."""
    runs: dict[str, tuple] = {}
    steps: list[tuple] = []
    critics: list[tuple] = []
    events: list[tuple] = []
    criteria: list[tuple] = []
    n = 0
    pks: dict[str, int] = {}
    with open(trace, "rb") as fh:
        for raw in fh:
            rec = orjson.loads(raw)
            n += 1
            rid = rec["run_id"]
            pk = pks.setdefault(rid, len(pks) + 1)
            t = rec["type"]
            if t == "step":
                steps.append((pk, rec["step"], rec.get("ts"), raw))
                for i, o in enumerate(rec.get("critic_outputs") or ()):
                    critics.append((pk, rec["step"], i, o.get("critic"), o.get("action"), o.get("reason"), o.get("score")))
            elif t == "event":
                events.append((pk, rec.get("step"), rec.get("phase"), rec.get("ts"), str(n), raw))
            elif t == "criterion":
                criteria.append((pk, rec["id"], rec.get("score")))
            elif t in ("run_start", "run_end"):
                runs[rid] = (pk, rid)
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    with con:
        con.executemany("INSERT INTO runs (id, run_id, replicate, source_format, early_stop_enabled, has_start, has_end,"
                        " closed, state, early_stopped, steps, retries) VALUES (?, ?, 0, 'qita', 0, 1, 1, 0, 'finished', 0, 0, 0)",
                        list(runs.values()))
        con.executemany("INSERT INTO steps (run_pk, step, ts, retry, record) VALUES (?, ?, ?, 0, ?)", steps)
        con.executemany("INSERT INTO critic_outputs (run_pk, step, idx, critic, action, effective_action, reason, score)"
                        " VALUES (?, ?, ?, ?, ?, 'continue', ?, ?)", critics)
        con.executemany("INSERT INTO events (run_pk, step, phase, ts, digest, record) VALUES (?, ?, ?, ?, ?, ?)", events)
        con.executemany("INSERT INTO criteria (run_pk, criterion_id, position, gating, pass_threshold, has_spec,"
                        " has_result, score) VALUES (?, ?, 0, 1, 0.9, 0, 1, ?)", criteria)
    con.close()
    return n


def our_ingest(trace: Path, db: Path) -> int:
    """The board's one ingest path, as `qita ingest` runs it. Returns records."""
    from app.db import open_database
    from app.ingest import Ingestor
    from app.settings import Settings

    settings = Settings(db=str(db))
    engine = open_database(settings)
    try:
        report = Ingestor(engine, settings).ingest_paths([str(trace)])
    finally:
        engine.dispose()
    if report.errors:
        raise SystemExit(f"ingest rejected lines: {report.errors[:3]}")
    return report.records


def throughput(trace: Path, *, repeat: int = 1) -> dict[str, Any]:
    """Floor and ours on the same file (best of `repeat`), MB/s, records/s and the ratio."""
    size = trace.stat().st_size
    out: dict[str, Any] = {"bytes": size}
    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        folder = Path(tmp)
        for name, fn in (("floor", floor_ingest), ("ours", our_ingest)):
            best = None
            for _ in range(repeat):
                db = fresh_db(folder, f"{name}.db")
                t0 = time.perf_counter()
                records = fn(trace, db)
                dt = time.perf_counter() - t0
                best = dt if best is None else min(best, dt)
            out[name] = {"seconds": best, "records": records, "mb_s": size / 1e6 / best, "records_s": records / best}
    out["ratio"] = out["ours"]["mb_s"] / out["floor"]["mb_s"]
    return out


def peak_rss(trace: Path) -> dict[str, Any]:
    """Ingest `trace` in a child process and report its peak RSS (VmHWM) and time."""
    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        db = Path(tmp) / "rss.db"
        code = ("import json,sys,time;from pathlib import Path;from bench.ingest import fresh_db,our_ingest;"
                "from bench.common import proc_status;db=fresh_db(Path(sys.argv[2]),'rss.db');"
                "base=proc_status('self','VmRSS');t=time.perf_counter();n=our_ingest(Path(sys.argv[1]),db);"
                "print(json.dumps({'records':n,'seconds':time.perf_counter()-t,'hwm':proc_status('self','VmHWM'),"
                "'base':base}))")
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        res = subprocess.run([sys.executable, "-c", code, str(trace), str(db.parent)], capture_output=True, text=True,
                             env=env, check=True)
        data = json.loads(res.stdout.strip().splitlines()[-1])
    data["bytes"] = trace.stat().st_size
    return data


def ensure_trace(mb: float, *, steps: int = 1000) -> Path:
    """A generated trace of about `mb` MB under the bench folder (reused when already there)."""
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"ingest-{mb:g}mb-{steps}s.jsonl"
    if not path.exists() or path.stat().st_size < mb * 1024 * 1024 * 0.98:
        generate(path, steps=steps, target_mb=mb)
    return path


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description="ingest throughput against the floor, and peak RSS")
    ap.add_argument("--mb", type=float, default=100, help="size of the throughput trace (0: skip)")
    ap.add_argument("--steps", type=int, default=1000, help="steps per generated run")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rss-mb", type=float, default=0, help="size of the peak-RSS trace (1024 for the 1 GB figure; 0: skip)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"machine": machine()}
    print(f"machine: {result['machine']}")
    if a.mb:
        trace = ensure_trace(a.mb, steps=a.steps)
        t = throughput(trace, repeat=a.repeat)
        result["throughput"] = t
        print(f"trace: {trace} ({t['bytes'] / 1e6:.1f} MB, {t['ours']['records']} records)")
        for name in ("floor", "ours"):
            r = t[name]
            print(figure(f"ingest {name}: MB/s", f"{r['mb_s']:.1f}"))
            print(figure(f"ingest {name}: records/s", f"{r['records_s']:,.0f}"))
        print(figure("ingest ratio ours/floor", f"{t['ratio'] * 100:.0f}%", ">= 50%", t["ratio"] >= TARGET_RATIO))
    if a.rss_mb:
        trace = ensure_trace(a.rss_mb, steps=a.steps)
        r = peak_rss(trace)
        result["rss"] = r
        print(f"trace: {trace} ({r['bytes'] / 1e6:.1f} MB, {r['records']} records, {r['seconds']:.0f} s,"
              f" {r['bytes'] / 1e6 / r['seconds']:.1f} MB/s)")
        print(figure(f"peak RSS ingesting {r['bytes'] / 2**20:.0f} MiB", f"{r['hwm'] / 2**20:.0f} MiB", "< 250 MiB",
                     r["hwm"] < TARGET_RSS))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(result, indent=2, default=str))
    return result


if __name__ == "__main__":
    main()
