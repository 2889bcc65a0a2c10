"""Server benchmark over HTTP on loopback: list, run, lazy block, compare, upload, memory.

Builds one database (cached under the bench folder) holding `--runs` runs in all:
small runs for the list, `--pairs` smoke/e2e task pairs in experiment `cmp-000` for
the compare page, and one run of `--big-steps` steps. Starts the board as a child
process (`python -m app.cli board`) on 127.0.0.1 and measures with httpx: bounded
request counts, p50 and p95, response sizes, and the server's RSS (/proc/PID/status)
before and after 20 concurrent loads of the largest run. Routes that answer 404 (not
merged yet) are reported as "skipped: route not present".

    python -m bench.server --runs 100000 --big-steps 10000 --pairs 1000 --upload-mb 100
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import quote

import httpx

from .common import figure, machine, percentile, proc_status
from .gen import generate

WORK = Path(os.environ.get("QITA_BENCH_DIR", "/tmp/qita-bench"))
ROOT = Path(__file__).resolve().parent.parent
BIG_RUN = "big-000/task-000000/smoke"
COMPARE_EXP = "cmp-000"
SKIPPED = "skipped: route not present"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_db(db: Path, *, runs: int, big_steps: int, pairs: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Generate the traces and ingest them through the board's ingest path (reused when present)."""
    marker = db.with_suffix(".json")
    want = {"runs": runs, "big_steps": big_steps, "pairs": pairs, "v": 2}
    if db.exists() and marker.exists() and json.loads(marker.read_text()).get("want") == want:
        return json.loads(marker.read_text())
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    folder = db.parent / (db.stem + "-traces")
    folder.mkdir(parents=True, exist_ok=True)
    small = max(0, runs - 2 * pairs - 1)
    t0 = time.perf_counter()
    generate(folder / "list.jsonl", runs=small, steps=1, experiments=20, obs_bytes=200, seed=1)
    generate(folder / "compare.jsonl", runs=2 * pairs, steps=3, experiments=1, obs_bytes=400, seed=2, exp_prefix="cmp-")
    generate(folder / "big.jsonl", runs=1, steps=big_steps, experiments=1, obs_bytes=2048, seed=3, exp_prefix="big-")
    gen_s = time.perf_counter() - t0
    from qita_board.db import open_database
    from qita_board.ingest import Ingestor
    from qita_board.settings import Settings

    settings = Settings(db=str(db))
    engine = open_database(settings)
    t0 = time.perf_counter()
    try:
        report = Ingestor(engine, settings).ingest_paths([str(folder)])
    finally:
        engine.dispose()
    info = {"want": want, "generate_s": gen_s, "ingest_s": time.perf_counter() - t0, "records": report.records,
            "runs": len(report.run_ids), "bytes": sum(p.stat().st_size for p in folder.iterdir())}
    marker.write_text(json.dumps(info))
    log(f"built {db}: {info['runs']} runs, {info['records']} records, {info['bytes'] / 1e6:.0f} MB of traces,"
        f" generated in {gen_s:.0f} s, ingested in {info['ingest_s']:.0f} s")
    return info


class Board:
    """The board as a child process on a free loopback port."""

    def __init__(self, db: Path, *, env: Optional[dict[str, str]] = None):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "qita_board.cli", "board", "--db", str(db), "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def __enter__(self) -> "Board":
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"board exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                if httpx.get(self.base + "/api/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("board did not start in 120 s")

    def rss(self) -> Optional[int]:
        return proc_status(self.proc.pid, "VmRSS")

    def __exit__(self, *exc: Any) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def timed(client: httpx.Client, path: str, n: int, *, headers: Optional[dict[str, str]] = None,
          warmup: int = 1) -> Optional[dict[str, Any]]:
    """GET `path` n times (after `warmup`): p50/p95 in ms, the response size; None on 404."""
    for _ in range(warmup):
        r = client.get(path, headers=headers)
        if r.status_code == 404:
            return None
        r.raise_for_status()
    times = []
    size = 0
    for _ in range(n):
        t = time.perf_counter()
        r = client.get(path, headers=headers)
        times.append((time.perf_counter() - t) * 1000)
        r.raise_for_status()
        size = len(r.content)
    return {"path": path, "n": n, "p50_ms": percentile(times, 50), "p95_ms": percentile(times, 95), "bytes": size}


def first_response(client: httpx.Client, path: str) -> Optional[dict[str, Any]]:
    """One cold GET: time to the response headers and to the whole body."""
    t = time.perf_counter()
    with client.stream("GET", path) as r:
        head = (time.perf_counter() - t) * 1000
        if r.status_code == 404:
            return None
        body = r.read()
    return {"ttfb_ms": head, "total_ms": (time.perf_counter() - t) * 1000, "bytes": len(body)}


def concurrent_loads(board: Board, path: str, n: int = 20) -> dict[str, Any]:
    """RSS of the server before and after `n` simultaneous loads of `path`."""
    before = board.rss()
    errors: list[str] = []
    sizes: list[int] = []

    def one() -> None:
        try:
            r = httpx.get(board.base + path, timeout=300)
            sizes.append(len(r.content))
            if r.status_code != 200:
                errors.append(str(r.status_code))
        except httpx.HTTPError as exc:
            errors.append(type(exc).__name__)

    threads = [threading.Thread(target=one) for _ in range(n)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    time.sleep(0.5)
    after = board.rss()
    return {"n": n, "before": before, "after": after, "growth": (after or 0) - (before or 0), "wall_s": wall,
            "errors": errors, "bytes": max(sizes or [0])}


def upload(board: Board, path: Path) -> Optional[dict[str, Any]]:
    """POST the file to /api/traces (multipart field `files`) and wait for its job; None when absent."""
    probe = httpx.post(board.base + "/api/traces", files=[], timeout=30)
    if probe.status_code == 404:
        return None
    before = board.rss()
    t = time.perf_counter()
    with open(path, "rb") as fh:
        r = httpx.post(board.base + "/api/traces", files={"files": (path.name, fh, "application/x-ndjson")}, timeout=600)
    accepted = (time.perf_counter() - t) * 1000
    out: dict[str, Any] = {"status": r.status_code, "accepted_ms": accepted, "bytes": path.stat().st_size,
                           "rss_before": before}
    try:
        body = r.json()
    except ValueError:
        body = {}
    job = body.get("job") or body.get("job_id") or (body.get("id") if "state" in body else None)
    job_id = job.get("id") if isinstance(job, dict) else job
    if job_id is not None:
        deadline = time.time() + 900
        while time.time() < deadline:
            j = httpx.get(f"{board.base}/api/jobs/{job_id}", timeout=30).json()
            if j.get("state") in ("done", "failed"):
                out["job_state"] = j.get("state")
                break
            time.sleep(0.5)
    out["done_ms"] = (time.perf_counter() - t) * 1000
    out["rss_after"] = board.rss()
    return out


PARTS = ("list", "run", "compare", "memory", "upload")


def run_bench(db: Path, *, n: int, runs: int, big_steps: int, upload_mb: float, memory_rounds: int = 1,
              parts: tuple[str, ...] = PARTS, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every server figure (or the chosen `parts`) against a running board on `db`."""
    res: dict[str, Any] = {}
    rid = quote(BIG_RUN, safe="")
    deep = max(0, runs - 50)
    with Board(db) as board, httpx.Client(base_url=board.base, timeout=120) as c:
        res["rss_start"] = board.rss()
        if "list" in parts:
            res["overview"] = timed(c, "/", n)
            res["list_first"] = timed(c, "/runs", n)
            res["list_filtered"] = timed(c, "/runs?experiment=exp-001&verdict=fail", n)
            res["list_search"] = timed(c, "/runs?q=task-00042", n)
            res["list_search_common"] = timed(c, "/runs?q=smoke", n)
            res["list_deep"] = timed(c, f"/runs?offset={deep}", n)
            res["list_api_first"] = timed(c, "/api/runs", n)
            res["list_api_search"] = timed(c, "/api/runs?q=task-00042", n)
        if "run" in parts:
            res["run_first_cold"] = first_response(c, f"/runs/{rid}")
            res["run_first"] = timed(c, f"/runs/{rid}", max(5, n // 2))
            res["run_block"] = timed(c, f"/runs/{rid}/steps?offset={big_steps // 2}&limit=25", n,
                                     headers={"HX-Request": "true"})
        if "compare" in parts:
            res["compare"] = timed(c, f"/compare?experiment={COMPARE_EXP}&a=smoke&b=e2e", max(5, n // 2))
        if "memory" in parts:
            # Several rounds: a leak grows every round, allocator retention stops growing after the first.
            rounds = [concurrent_loads(board, f"/runs/{rid}", 20) for _ in range(max(1, memory_rounds))]
            res["memory"] = rounds[0]
            res["memory_rounds"] = [r["after"] for r in rounds]
        if upload_mb and "upload" in parts:
            up = WORK / f"upload-{upload_mb:g}mb.jsonl"
            if not up.exists() or up.stat().st_size < upload_mb * 1024 * 1024 * 0.98:
                generate(up, steps=500, target_mb=upload_mb, seed=11, exp_prefix="up-")
            res["upload"] = upload(board, up)
        res["rss_end"] = board.rss()
    return res


def report(res: dict[str, Any], runs: int, big_steps: int, pairs: int, log: Callable[[str], None] = print) -> None:
    def lat(key: str, label: str, target_ms: Optional[float] = None, target_kb: Optional[float] = None) -> None:
        r = res.get(key)
        if r is None:
            log(f"{label:<48} {SKIPPED}")
            return
        met = None if target_ms is None else r["p50_ms"] <= target_ms
        log(figure(f"{label} p50", f"{r['p50_ms']:.1f} ms", f"<= {target_ms:g} ms" if target_ms else "", met))
        log(figure(f"{label} p95", f"{r['p95_ms']:.1f} ms"))
        kb_met = None if target_kb is None else r["bytes"] <= target_kb * 1024
        log(figure(f"{label} size", f"{r['bytes'] / 1024:.1f} KB", f"<= {target_kb:g} KB" if target_kb else "", kb_met))

    if "overview" in res:
        lat("overview", f"experiments overview, {runs:,} runs", 30)
    if "list_first" in res:
        lat("list_first", f"list page, {runs:,} runs, first page", 30)
        lat("list_filtered", "list page, filtered (experiment+verdict)", 30)
        lat("list_search", "list page, search q= (rare)", 30)
        lat("list_search_common", "list page, search q= (common)", 30)
        lat("list_deep", "list page, deep page (offset N-50)", 30)
        lat("list_api_first", "list JSON /api/runs, first page", 30)
        lat("list_api_search", "list JSON /api/runs, search q= (rare)", 30)
    cold = res.get("run_first_cold")
    if cold:
        log(figure(f"run page {big_steps:,} steps, cold: first byte", f"{cold['ttfb_ms']:.1f} ms"))
    if "run_first" in res:
        lat("run_first", f"run page, {big_steps:,} steps, first response", 50, 200)
        lat("run_block", "run page, one lazily loaded block", 30)
    if "compare" in res:
        lat("compare", f"compare page, {pairs:,} pairs", 200)
    m = res.get("memory")
    if m:
        log(figure("RSS growth, 20 concurrent loads of largest run", f"{m['growth'] / 2**20:.1f} MiB", "<= 50 MiB",
                   m["growth"] <= 50 * 2**20))
        log(figure("  RSS before / after", f"{(m['before'] or 0) / 2**20:.0f} / {(m['after'] or 0) / 2**20:.0f} MiB"))
        log(figure("  wall time of the 20 loads", f"{m['wall_s']:.2f} s"))
        if len(res.get("memory_rounds") or []) > 1:
            log(figure("  RSS after each round", " / ".join(f"{(v or 0) / 2**20:.0f}" for v in res["memory_rounds"]) + " MiB"))
        if m["errors"]:
            log(f"  errors: {m['errors'][:5]}")
    if "upload" in res:
        up = res["upload"]
        if up is None:
            log(f"{'upload':<48} {SKIPPED}")
        else:
            log(figure(f"upload {up['bytes'] / 2**20:.0f} MiB: request answered", f"{up['accepted_ms']:.0f} ms"))
            log(figure("upload: ingested (job done)", f"{up['done_ms'] / 1000:.1f} s ({up.get('job_state', '?')})"))
            if up.get("rss_after") and up.get("rss_before"):
                log(figure("upload: server RSS growth", f"{(up['rss_after'] - up['rss_before']) / 2**20:.0f} MiB"))


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description="server latency, sizes and memory over loopback HTTP")
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--big-steps", type=int, default=10_000)
    ap.add_argument("--pairs", type=int, default=1000)
    ap.add_argument("--n", type=int, default=30, help="timed requests per figure")
    ap.add_argument("--upload-mb", type=float, default=100, help="0: skip the upload")
    ap.add_argument("--memory-rounds", type=int, default=1, help="rounds of 20 concurrent loads (plateau check)")
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {','.join(PARTS)}")
    ap.add_argument("--db", type=Path, default=None)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    db = a.db or WORK / f"server-{a.runs}-{a.big_steps}-{a.pairs}.db"
    out: dict[str, Any] = {"machine": machine()}
    print(f"machine: {out['machine']}")
    out["build"] = build_db(db, runs=a.runs, big_steps=a.big_steps, pairs=a.pairs)
    out["results"] = run_bench(db, n=a.n, runs=a.runs, big_steps=a.big_steps, upload_mb=a.upload_mb,
                               memory_rounds=a.memory_rounds, parts=tuple(a.only.split(",")))
    report(out["results"], a.runs, a.big_steps, a.pairs)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(out, indent=2, default=str))
    return out


if __name__ == "__main__":
    main()
