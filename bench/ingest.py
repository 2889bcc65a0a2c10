"""Ingest benchmark: our ingest against two floors on the same bytes, and peak RSS.

Both floors do the least any ingest of these records can do: each line parsed with
orjson, rows inserted with one executemany per table inside one transaction, nothing
else (no validation, no upsert, no derived fields, no search index).

- the bare floor writes to a fresh file with plain tables (same columns, no indexes,
  no constraints, no triggers): the ratio to it is the whole distance (issue 16's target);
- the schema floor writes to a database with our schema (Alembic head: indexes, the
  search table's triggers), so the ratio to it is our own per-record overhead.

The three are run interleaved (bare, schema, ours, bare, ...) `--rounds` times, and the
medians are reported: the machine is shared, and interleaving spreads its load over all
three instead of charging it to whichever ran during a busy moment.

Peak memory is measured in a child process (VmHWM of /proc/self/status), so the
parent's own allocations (the floor's row lists) never count.

    python -m bench.ingest --mb 200            # throughput + ratio
    python -m bench.ingest --mb 200 --commands # ... and `qita ingest` as a command against the floor as a script
    python -m bench.ingest --rss-mb 1024       # peak RSS while ingesting a 1 GB file
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import orjson

from .common import figure, machine
from .gen import generate

WORK = Path(os.environ.get("QITA_BENCH_DIR", "/tmp/qita-bench"))
TARGET_RATIO = 0.8  # of the bare floor (issue 16)
TARGET_RSS = 250 * 1024 * 1024


def fresh_db(folder: Path, name: str) -> Path:
    """An empty database with the board's schema (Alembic head)."""
    from qita_board.db import open_database
    from qita_board.settings import Settings

    path = folder / name
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    open_database(Settings(db=str(path))).dispose()
    return path


#: Tables the floors write (the bare floor creates them without indexes or constraints).
FLOOR_TABLES = ("runs", "steps", "critic_outputs", "events", "criteria")


def bare_db(folder: Path, name: str) -> Path:
    """A fresh file with our tables' columns only: no index, no constraint, no trigger."""
    schema = fresh_db(folder, "_schema_for_bare.db")
    src = sqlite3.connect(schema)
    cols = {t: [r[1] for r in src.execute(f"PRAGMA table_info({t})")] for t in FLOOR_TABLES}
    src.close()
    path = folder / name
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    for table, names in cols.items():
        # `runs.id` stays the rowid alias (no index of its own); every other column is plain.
        defs = ", ".join("id INTEGER PRIMARY KEY" if (table == "runs" and c == "id") else c for c in names)
        con.execute(f"CREATE TABLE {table} ({defs})")
    con.commit()
    con.close()
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
    """The board's one ingest path, as `qita ingest` runs it (`run_ingest`: the reader process
    started before the store is opened, app.ingest.early). Returns records."""
    from qita_board.cli import run_ingest
    from qita_board.settings import Settings

    report = run_ingest(Settings(db=str(db)), [str(trace)], progress=False)
    if report.errors:
        raise SystemExit(f"ingest rejected lines: {report.errors[:3]}")
    return report.records


def throughput(trace: Path, *, rounds: int = 3) -> dict[str, Any]:
    """Bare floor, schema floor and ours on the same file, interleaved `rounds` times; medians and ratios."""
    size = trace.stat().st_size
    out: dict[str, Any] = {"bytes": size, "rounds": rounds}
    times: dict[str, list[float]] = {"bare": [], "floor": [], "ours": []}
    # CPU seconds of this process beside the wall clock: on a shared machine the wall
    # clock also counts waiting for a core and for the disk.
    cpu: dict[str, list[float]] = {"bare": [], "floor": [], "ours": []}
    # ... and the reader process's (app.ingest.reader), reaped by the time the ingest returns:
    # the ingest is bound by whichever of the two has more to do.
    reader_cpu: dict[str, list[float]] = {"bare": [], "floor": [], "ours": []}
    records: dict[str, int] = {}
    ratios: dict[str, list[float]] = {"bare": [], "floor": []}
    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        folder = Path(tmp)
        for _ in range(rounds):
            for name, make, fn in (("bare", bare_db, floor_ingest), ("floor", fresh_db, floor_ingest),
                                   ("ours", fresh_db, our_ingest)):
                db = make(folder, f"{name}.db")
                t0, c0, r0 = time.perf_counter(), time.process_time(), _children_cpu()
                records[name] = fn(trace, db)
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
                reader_cpu[name].append(_children_cpu() - r0)
            # The ratio of this round's neighbours: ours against the floors run just before it.
            for name in ratios:
                ratios[name].append(times[name][-1] / times["ours"][-1])
    for name, ts in times.items():
        med = statistics.median(ts)
        out[name] = {"seconds": med, "all_seconds": ts, "records": records[name], "mb_s": size / 1e6 / med,
                     "records_s": records[name] / med, "cpu_seconds": statistics.median(cpu[name]),
                     "all_cpu_seconds": cpu[name], "reader_cpu_seconds": statistics.median(reader_cpu[name]),
                     "all_reader_cpu_seconds": reader_cpu[name]}
    # Speed ratio ours/floor = floor seconds / our seconds; the median over rounds.
    out["ratio_bare"] = statistics.median(ratios["bare"])
    out["ratio"] = statistics.median(ratios["floor"])
    out["cpu_ratio_bare"] = out["bare"]["cpu_seconds"] / out["ours"]["cpu_seconds"]
    return out


#: The bare floor as a program of its own: Python's start and its few imports included.
FLOOR_SCRIPT = ("import sys;from pathlib import Path;from bench.ingest import floor_ingest;"
                "floor_ingest(Path(sys.argv[1]), Path(sys.argv[2]))")


def qita_command() -> list[str]:
    """The `qita` program of this interpreter's environment (`python -m qita_board.cli` without one)."""
    script = Path(sys.executable).parent / "qita"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "qita_board.cli"]


def commands(trace: Path, *, rounds: int = 3) -> dict[str, Any]:
    """`qita ingest` as a user runs it (a new process into a new file) against the bare floor
    as a script of its own, interleaved `rounds` times: what issue 16 timed, start-up and
    exit included, which the in-process figures leave out."""
    size = trace.stat().st_size
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("QITA_DB", None)
    times: dict[str, list[float]] = {"bare": [], "ours": []}
    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        folder = Path(tmp)
        for _ in range(rounds):
            db = bare_db(folder, "bare-script.db")
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", FLOOR_SCRIPT, str(trace), str(db)], env=env, cwd=root, check=True)
            times["bare"].append(time.perf_counter() - t0)
            db = folder / "ours-command.db"
            for suffix in ("", "-wal", "-shm"):
                Path(str(db) + suffix).unlink(missing_ok=True)
            t0 = time.perf_counter()
            done = subprocess.run([*qita_command(), "ingest", str(trace), "--db", str(db), "--json"], env=env,
                                  cwd=root, check=True, capture_output=True)
            times["ours"].append(time.perf_counter() - t0)
            records = json.loads(done.stdout)["records"]
    ratios = [b / o for b, o in zip(times["bare"], times["ours"])]
    return {"bytes": size, "rounds": rounds, "bare": times["bare"], "ours": times["ours"], "records": records,
            "ratio_bare": statistics.median(ratios)}


def _children_cpu() -> float:
    """CPU seconds of the reaped child processes so far (user and system)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def peak_rss(trace: Path) -> dict[str, Any]:
    """Ingest `trace` in a child process and report its peak RSS (VmHWM) and time."""
    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        db = Path(tmp) / "rss.db"
        # The reader process (app.ingest.reader) is a child of the ingesting process: its peak
        # is the largest ru_maxrss of the children it reaped, reported beside the writer's.
        code = ("import json,sys,time,resource;from pathlib import Path;from bench.ingest import fresh_db,our_ingest;"
                "from bench.common import proc_status;db=fresh_db(Path(sys.argv[2]),'rss.db');"
                "base=proc_status('self','VmRSS');t=time.perf_counter();n=our_ingest(Path(sys.argv[1]),db);"
                "print(json.dumps({'records':n,'seconds':time.perf_counter()-t,'hwm':proc_status('self','VmHWM'),"
                "'reader_hwm':resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024,'base':base}))")
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
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (bare, schema, ours); medians reported")
    ap.add_argument("--rss-mb", type=float, default=0, help="size of the peak-RSS trace (1024 for the 1 GB figure; 0: skip)")
    ap.add_argument("--commands", action="store_true",
                    help="also time `qita ingest` as a command against the bare floor as a script (start-up and exit"
                         " included)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"machine": machine()}
    print(f"machine: {result['machine']}")
    if a.mb:
        trace = ensure_trace(a.mb, steps=a.steps)
        t = throughput(trace, rounds=a.rounds)
        result["throughput"] = t
        print(f"trace: {trace} ({t['bytes'] / 1e6:.1f} MB, {t['ours']['records']} records)")
        print(f"median of {t['rounds']} interleaved rounds (bare floor, schema floor, ours)")
        for name, title in (("bare", "bare floor"), ("floor", "schema floor"), ("ours", "ours")):
            r = t[name]
            print(figure(f"ingest {title}: MB/s", f"{r['mb_s']:.1f}"))
            print(figure(f"ingest {title}: records/s", f"{r['records_s']:,.0f}"))
            print(f"    seconds per round: {', '.join(f'{x:.2f}' for x in r['all_seconds'])}"
                  f"  (CPU: {', '.join(f'{x:.2f}' for x in r['all_cpu_seconds'])})")
            if any(r["all_reader_cpu_seconds"]):
                print(f"    reader process CPU per round: {', '.join(f'{x:.2f}' for x in r['all_reader_cpu_seconds'])}")
        print(figure("ingest ratio ours/bare floor", f"{t['ratio_bare'] * 100:.0f}%", ">= 80%",
                     t["ratio_bare"] >= TARGET_RATIO))
        print(figure("ingest ratio ours/schema floor", f"{t['ratio'] * 100:.0f}%"))
        print(figure("ingest CPU ratio ours/bare floor", f"{t['cpu_ratio_bare'] * 100:.0f}%"))
        if a.commands:
            c = commands(trace, rounds=a.rounds)
            result["commands"] = c
            print(f"as programs, median of {c['rounds']} interleaved rounds (bare floor script, qita ingest)")
            for name, title in (("bare", "bare floor script"), ("ours", "qita ingest")):
                print(f"    {title}: seconds per round: {', '.join(f'{x:.2f}' for x in c[name])}")
            print(figure("ingest ratio qita ingest/bare floor script", f"{c['ratio_bare'] * 100:.0f}%", ">= 80%",
                         c["ratio_bare"] >= TARGET_RATIO))
    if a.rss_mb:
        trace = ensure_trace(a.rss_mb, steps=a.steps)
        r = peak_rss(trace)
        result["rss"] = r
        print(f"trace: {trace} ({r['bytes'] / 1e6:.1f} MB, {r['records']} records, {r['seconds']:.0f} s,"
              f" {r['bytes'] / 1e6 / r['seconds']:.1f} MB/s)")
        print(figure(f"peak RSS ingesting {r['bytes'] / 2**20:.0f} MiB (writer)", f"{r['hwm'] / 2**20:.0f} MiB",
                     "< 250 MiB", r["hwm"] < TARGET_RSS))
        print(figure("peak RSS of its reader process", f"{r['reader_hwm'] / 2**20:.0f} MiB"))
        both = r["hwm"] + r["reader_hwm"]
        print(figure("writer + reader (an upper bound: the fork shares pages)", f"{both / 2**20:.0f} MiB",
                     "< 250 MiB", both < TARGET_RSS))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(result, indent=2, default=str))
    return result


if __name__ == "__main__":
    main()
