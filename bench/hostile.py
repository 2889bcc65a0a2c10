"""Hostile text for the masker: about 1 MB near-misses of every detector.

Each string almost matches a detector over and over (a secret word followed by a long
run of spaces, a prefix repeated, a header without its end …): exactly the shapes that
made backtracking patterns quadratic. `tests/app/test_hostile_text.py` serves a dozen
through the pages with a generous bound; `python -m bench.hostile` times the masker on
each, and with `--pages` every page of every one on a live board on 127.0.0.1 while
another client polls /api/health.
"""

from __future__ import annotations

import time
from typing import Iterator

SIZE = 1 << 20


def _rep(unit: str, size: int = SIZE) -> str:
    return unit * (size // len(unit) + 1)


def near_misses(size: int = SIZE) -> Iterator[tuple[str, str]]:
    """(name, text) pairs, each about `size` characters."""
    spaces = " " * size
    for word in ("password", "token", "secret", "api_key", "DB_PASSWORD", "Authorization", "Cookie", "bearer",
                 "Bearer", "--password", "aws_secret_access_key"):
        yield f"{word} + spaces", word + spaces
        yield f"{word} + tabs and newlines", word + ("\t\n" * (size // 2))
        yield f"({word} + space) repeated", _rep(word + " ", size)
        yield f"({word}=) repeated", _rep(word + "=", size)
        yield f"({word}: ') repeated", _rep(word + ": '", size)
    for unit in ("eyJa-", "eyJa.", "eyJaaaa.bbbb.", "sk-", "sk-ant-", "sk-proj-", "AKIA", "ASIA", "ghp_", "github_pat_",
                 "xoxb-", "AIza", "-----BEGIN PRIVATE KEY-----", "-----BEGIN RSA ", "-----BEGIN ", "-----END ",
                 "a://", "a://b:", "http://u:p", "://", "@", "Basic ", "Authorization: Basic ", "--", "-- ", "--a ",
                 "a=", "a_", "a.", "_password", "passpass", "key", "=", ":", "'", '"', "\\", "x",
                 "sk_live_", "rk_test_", "glpat-", "SG.", "SG.aaaaaaaaaaaaaaaa.", "-u ", "--user ", "-u a:",
                 "mysql -p", "mariadb --password ", "sshpass -p "):
        yield f"{unit!r} repeated", _rep(unit, size)
    yield "one long word run", "p" * size + "=x"
    yield "long name then password", "a" * size + "_password=x"
    yield "BEGIN header then a long body", "-----BEGIN RSA PRIVATE KEY-----" + "A" * size
    yield "BEGIN headers with bodies, no END", _rep("-----BEGIN PRIVATE KEY-----\n" + "QUJD" * 8 + "\n", size)
    yield "url scheme then a long user", "http://" + "u" * size
    yield "url user then a long password", "http://u:" + "p" * size
    yield "Authorization: Basic then a long line", "Authorization: Basic " + "Zm9v" * (size // 4)
    yield "cookie header then a long line", "Set-Cookie: " + "a=b; " * (size // 5)


def time_masker() -> list[tuple[float, str]]:
    from qita_board.secrets import Masker

    times = []
    for name, text in near_misses():
        t = time.perf_counter()
        Masker().text(text)
        times.append((time.perf_counter() - t, name))
    return sorted(times, reverse=True)


def time_pages() -> tuple[list[tuple[float, str]], float]:
    """Every near-miss as a run (objective, metadata, step, final result), each page timed on a
    live board on 127.0.0.1 while another client polls /api/health; (page times, worst health)."""
    import tempfile
    import threading
    from pathlib import Path

    import httpx
    import orjson

    from qita_board.cli import run_ingest
    from qita_board.settings import Settings
    from tests.browser.conftest import LiveServer

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(db=str(Path(tmp) / "q.db"))
        cases = list(near_misses())
        with open(Path(tmp) / "hostile.jsonl", "wb") as fh:
            for i, (_name, text) in enumerate(cases):
                for rec in ({"type": "run_start", "run_id": f"h{i}", "objective": text, "metadata": {"note": text}},
                            {"type": "step", "run_id": f"h{i}", "step": 0, "observation": text},
                            {"type": "run_end", "run_id": f"h{i}", "status": "completed", "final_result": text}):
                    fh.write(orjson.dumps(rec) + b"\n")
        run_ingest(settings, [str(Path(tmp) / "hostile.jsonl")], progress=False)
        server = LiveServer(settings).start()
        worst = [0.0]
        stop = threading.Event()

        def poll() -> None:
            with httpx.Client(base_url=server.url, timeout=60) as c:
                while not stop.is_set():
                    t = time.perf_counter()
                    c.get("/api/health")
                    worst[0] = max(worst[0], time.perf_counter() - t)
                    time.sleep(0.01)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        times = []
        try:
            with httpx.Client(base_url=server.url, timeout=120) as c:
                t = time.perf_counter()
                c.get("/", params={"limit": 200})
                times.append((time.perf_counter() - t, "runs list of every case"))
                for i, (name, _text) in enumerate(cases):
                    for url in (f"/runs/h{i}", f"/runs/h{i}/steps"):
                        t = time.perf_counter()
                        c.get(url)
                        times.append((time.perf_counter() - t, f"{url} ({name})"))
        finally:
            stop.set()
            poller.join(10)
            server.stop()
        return sorted(times, reverse=True), worst[0]


def main() -> None:
    import sys

    times = time_masker()
    print(f"{len(times)} near-miss texts of {SIZE:,} characters; slowest masking (whole text, one string):")
    for dt, name in times[:5]:
        print(f"  {dt * 1000:8.1f} ms  {name}")
    if "--pages" in sys.argv:
        pages, health = time_pages()
        print(f"pages over the same texts ({len(pages)} requests); slowest:")
        for dt, name in pages[:5]:
            print(f"  {dt * 1000:8.1f} ms  {name}")
        print(f"worst /api/health meanwhile: {health * 1000:.1f} ms")


if __name__ == "__main__":
    main()
