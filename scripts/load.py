"""Bounded load test for the board: a fixed number of requests per endpoint, loopback only.

Without --url it builds a temporary database from the demo experiment and serves it on
a free 127.0.0.1 port; with --url it targets a board you started (still loopback only:
this is a measuring tool, not a way to load someone else's server). For each endpoint
it sends --requests requests from --concurrency threads and prints p50/p95/max latency
and the error count. Exit status 1 when any request failed.

    PYTHONPATH=. python scripts/load.py --requests 400 --concurrency 16
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def serve_demo(tasks: int) -> tuple[str, object]:
    """A board on the demo data, on a free loopback port; returns (url, server)."""
    import socket

    import uvicorn

    from qita.demo import run_demo
    from qita_board.cli import run_ingest
    from qita_board.main import create_app
    from qita_board.settings import Settings

    folder = Path(tempfile.mkdtemp(prefix="qita-load-"))
    settings = Settings(db=str(folder / "load.db"))
    run_ingest(settings, [str(f) for f in run_demo(folder / "traces", tasks=tasks)], progress=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


def measure(url: str, path: str, requests: int, concurrency: int) -> dict:
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()

    def one(client: httpx.Client) -> None:
        nonlocal errors
        t0 = time.perf_counter()
        try:
            ok = client.get(path).status_code < 400
        except httpx.HTTPError:
            ok = False
        dt = time.perf_counter() - t0
        with lock:
            latencies.append(dt)
            errors += not ok

    with httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_connections=concurrency)) as client:
        start = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            for _ in range(requests):
                pool.submit(one, client)
        wall = time.perf_counter() - start
    return {"path": path, "n": len(latencies), "errors": errors, "p50_ms": percentile(latencies, 0.5) * 1000,
            "p95_ms": percentile(latencies, 0.95) * 1000, "max_ms": max(latencies) * 1000,
            "mean_ms": statistics.fmean(latencies) * 1000, "rps": len(latencies) / wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="a board on a loopback address (default: serve the demo data here)")
    ap.add_argument("--requests", type=int, default=300, help="requests per endpoint (bounded, max 5000)")
    ap.add_argument("--concurrency", type=int, default=16, help="concurrent requests (max 64)")
    ap.add_argument("--tasks", type=int, default=24, help="demo tasks when serving the demo")
    args = ap.parse_args()
    if not 1 <= args.requests <= 5000 or not 1 <= args.concurrency <= 64:
        ap.error("--requests must be 1..5000 and --concurrency 1..64")
    server = None
    if args.url:
        host = urlsplit(args.url).hostname or ""
        if host not in LOOPBACK:
            ap.error(f"refusing to load {host}: loopback addresses only")
        url = args.url.rstrip("/")
    else:
        url, server = serve_demo(args.tasks)
    runs = httpx.get(url + "/api/runs", params={"limit": 1}).json()["data"]
    rid = runs[0]["run_id"] if runs else "none"
    from qita_board.urls import encode_run_id

    seg = encode_run_id(rid)
    paths = ["/", "/runs", "/api/runs", "/runs?q=smoke", f"/runs/{seg}", f"/api/runs/{seg}", f"/runs/{seg}/steps", "/api/health"]
    print(f"{args.requests} requests per endpoint, concurrency {args.concurrency}, {url}")
    print(f"{'endpoint':<40} {'n':>5} {'err':>4} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'req/s':>7}")
    failed = 0
    for path in paths:
        r = measure(url, path, args.requests, args.concurrency)
        failed += r["errors"]
        shown = path.replace(seg, "{id}")
        print(f"{shown:<40} {r['n']:>5} {r['errors']:>4} {r['p50_ms']:>8.1f} {r['p95_ms']:>8.1f} {r['max_ms']:>8.1f} {r['rps']:>7.0f}")
    if server is not None:
        server.should_exit = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
