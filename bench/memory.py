"""Memory per request: RSS of a board on 127.0.0.1 under 10 concurrent requests for a run of huge steps.

Issue 15 item 7: a 612 KB `.jsonl.gz` of 10 steps of 60 MB made one steps request peak
at 2.56 GB RSS. Target: +300 MB at most over the idle board for 10 concurrent requests
of each kind. The run is written as gzip (the hostile upload's shape), ingested with
`qita ingest`, and the board is started as its own process; RSS is sampled from
/proc every 10 ms while the requests run.

    python -m bench.memory                 # 10 steps of 60 MB (about 4 minutes)
    python -m bench.memory --mb 2 --steps 3 --concurrency 3   # a quick look
"""

from __future__ import annotations

import argparse
import gzip
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.common import proc_status

ROOT = Path(__file__).resolve().parent.parent
TARGET_MB = 300


def write_trace(path: Path, *, steps: int, mb: int) -> None:
    """`steps` steps whose observation is `mb` MB of text, gzip-compressed (highly: one repeated line)."""
    line = "tool output line, the same again and again\n"
    value = (line * (mb * 1024 * 1024 // len(line) + 1))[: mb * 1024 * 1024]
    with gzip.open(path, "wb", compresslevel=6) as fh:
        fh.write(orjson.dumps({"type": "run_start", "run_id": "big", "ts": "2025-01-01T00:00:00Z"}) + b"\n")
        for i in range(steps):
            fh.write(orjson.dumps({"type": "step", "run_id": "big", "step": i, "observation": value,
                                   "decision": {"rationale": f"step {i}"}}) + b"\n")
        fh.write(orjson.dumps({"type": "run_end", "run_id": "big", "status": "completed", "stop_reason": "final"}) + b"\n")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(*, steps: int, mb: int, concurrency: int) -> dict[str, Any]:
    """Peak RSS over the idle board, per kind of request, with `concurrency` at once."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "big.jsonl.gz"
        write_trace(trace, steps=steps, mb=mb)
        db = Path(tmp) / "q.db"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "QITA_MAX_LINE_BYTES": str((2 * mb + 1) * 1024 * 1024),
               "QITA_MAX_ARCHIVE_RATIO": "100000"}
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "qita_board.cli", "ingest", str(trace), "--db", str(db), "--json"],
                              env=env, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise SystemExit(f"ingest failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")
        ingest_s = time.perf_counter() - t
        port = _port()
        board = subprocess.Popen([sys.executable, "-m", "qita_board.cli", "board", "--db", str(db), "--port", str(port)],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                try:
                    if httpx.get(base + "/api/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            httpx.get(base + "/runs/big", timeout=600)  # warm: templates, caches
            kinds = {
                "steps block (/api/runs/big/steps?limit=200)": "/api/runs/big/steps?limit=200",
                "run page (/runs/big)": "/runs/big",
                "HTML export": "/runs/big/export.html",
                "field view, streamed (/api/…/field)": "/api/runs/big/steps/0/field?path=/observation",
            }
            out: dict[str, Any] = {"steps": steps, "mb": mb, "concurrency": concurrency, "ingest_s": round(ingest_s, 1),
                                   "db_mb": round(db.stat().st_size / 2**20), "results": {}}
            for name, url in kinds.items():
                time.sleep(1.0)
                idle = proc_status(board.pid, "VmRSS") or 0
                peak = [idle]
                stop = threading.Event()

                def sample() -> None:
                    while not stop.is_set():
                        peak[0] = max(peak[0], proc_status(board.pid, "VmRSS") or 0)
                        time.sleep(0.01)

                def fetch() -> None:
                    with httpx.stream("GET", base + url, timeout=3600) as r:
                        for _ in r.iter_bytes(1 << 20):
                            pass

                sampler = threading.Thread(target=sample, daemon=True)
                sampler.start()
                t = time.perf_counter()
                workers = [threading.Thread(target=fetch) for _ in range(concurrency)]
                for w in workers:
                    w.start()
                for w in workers:
                    w.join()
                took = time.perf_counter() - t
                stop.set()
                sampler.join()
                out["results"][name] = {"idle_mb": round(idle / 2**20), "peak_over_idle_mb": round((peak[0] - idle) / 2**20),
                                        "seconds": round(took, 2)}
            return out
        finally:
            board.terminate()
            board.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--mb", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args()
    res = measure(steps=args.steps, mb=args.mb, concurrency=args.concurrency)
    print(f"{res['steps']} steps of {res['mb']} MB (database {res['db_mb']} MB, ingest {res['ingest_s']} s); "
          f"{res['concurrency']} requests at once; target +{TARGET_MB} MB")
    for name, r in res["results"].items():
        flag = "ok" if r["peak_over_idle_mb"] <= TARGET_MB else "OVER"
        print(f"  {name:45s} idle {r['idle_mb']:5d} MB  peak +{r['peak_over_idle_mb']:5d} MB  {r['seconds']:7.2f} s  {flag}")


if __name__ == "__main__":
    main()
