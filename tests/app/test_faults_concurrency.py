"""50 concurrent readers while the watcher and uploads write: no 5xx, no errors, no lock timeouts.

Writes go through the board's single writer queue; readers use their own connections
(SQLite WAL), so neither waits on the other long enough to fail.
"""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import orjson

from qita_board.settings import Settings
from tests.browser.conftest import LiveServer

READERS, REQUESTS_EACH = 50, 10
WRITES = 30


def _line(obj: dict) -> bytes:
    return orjson.dumps(obj) + b"\n"


def test_fifty_readers_while_the_watcher_and_uploads_write(tmp_path: Path):
    folder = tmp_path / "watched"
    folder.mkdir()
    (folder / "seed.jsonl").write_bytes(_line({"type": "run_start", "run_id": "seed"}) + _line({"type": "step", "run_id": "seed", "step": 0}))
    server = LiveServer(Settings(db=str(tmp_path / "q.db"), watch=[str(folder)], batch_lines=20)).start()
    problems: list[str] = []
    counts = {"reads": 0, "uploads": 0}
    lock = threading.Lock()
    try:
        base = server.url
        paths = ["/", "/api/runs", "/runs/seed", "/api/runs/seed", "/api/runs/seed/steps", "/runs/seed/steps?offset=0",
                 "/?q=live", "/api/runs?sort=steps"]

        def reader(i: int) -> None:
            with httpx.Client(base_url=base, timeout=60) as c:
                for n in range(REQUESTS_EACH):
                    path = paths[(i + n) % len(paths)]
                    try:
                        r = c.get(path)
                        if r.status_code >= 500:
                            problems.append(f"GET {path}: {r.status_code} {r.text[:200]}")
                    except httpx.HTTPError as exc:
                        problems.append(f"GET {path}: {type(exc).__name__}")
                    with lock:
                        counts["reads"] += 1

        def writer() -> None:
            live = folder / "live.jsonl"
            with httpx.Client(base_url=base, timeout=60) as c:
                for n in range(WRITES):
                    with open(live, "ab") as fh:
                        if n == 0:
                            fh.write(_line({"type": "run_start", "run_id": "live"}))
                        fh.write(_line({"type": "step", "run_id": "live", "step": n}))
                    body = _line({"type": "run_start", "run_id": f"up-{n}"}) + _line({"type": "step", "run_id": f"up-{n}", "step": 0})
                    try:
                        r = c.post("/api/traces", files=[("files", (f"up-{n}.jsonl", body, "application/octet-stream"))])
                        if r.status_code >= 500:
                            problems.append(f"POST upload: {r.status_code} {r.text[:200]}")
                        elif r.status_code < 400:
                            counts["uploads"] += 1
                    except httpx.HTTPError as exc:
                        problems.append(f"POST upload: {type(exc).__name__}")

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(READERS)] + [threading.Thread(target=writer)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        assert problems == []
        assert counts["reads"] == READERS * REQUESTS_EACH
        # the watcher caught up with every appended step (one final pass is queued by the change)
        for _ in range(300):
            if httpx.get(f"{base}/api/runs/live/steps", params={"limit": 200}).json().get("count") == WRITES:
                break
            threading.Event().wait(0.1)
        assert httpx.get(f"{base}/api/runs/live/steps", params={"limit": 200}).json()["count"] == WRITES
        if counts["uploads"]:
            assert counts["uploads"] == WRITES
    finally:
        server.stop()
