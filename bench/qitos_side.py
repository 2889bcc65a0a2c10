"""Side by side on one QitOS run folder: the whole run in one page, against our run page.

The "whole run in one page" approach is emulated by a small stdlib HTTP server in this
module: on every request it reads the run folder (manifest, every step, every event)
and answers one HTML page with all of it embedded as JSON, for the browser to render.
Ours is the board's `/runs/{id}` after ingesting the same folder, which sends the run
header and the first block of steps and loads the rest on demand.

    python -m bench.qitos_side /path/to/qitos_run_folder
"""

from __future__ import annotations

import argparse
import html
import json
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

import httpx

from .common import figure, machine
from .server import WORK, Board, first_response, timed


def whole_run_page(folder: Path) -> bytes:
    """One page embedding the manifest, all steps and all events as JSON (the one-page approach)."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    data: dict[str, Any] = {"manifest": manifest}
    for name in ("steps", "events"):
        path = folder / f"{name}.jsonl"
        rows = []
        if path.exists():
            with open(path, encoding="utf-8") as fh:
                rows = [json.loads(line) for line in fh if line.strip()]
        data[name] = rows
    # json.dumps' default ASCII escaping and "</" escaping, as a page embedding JSON must do.
    blob = json.dumps(data, indent=1).replace("</", "<\\/")
    title = html.escape(str(manifest.get("run_id", "run")))
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
            f"<div id='app'></div><script id='run-data' type='application/json'>{blob}</script></body></html>")
    return page.encode("utf-8")


class _Handler(BaseHTTPRequestHandler):
    folder: Path

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        body = whole_run_page(self.folder)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class WholeRunServer:
    """The one-page server on a free loopback port, in a thread."""

    def __init__(self, folder: Path):
        handler = type("Handler", (_Handler,), {"folder": folder})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "WholeRunServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def compare(folder: Path, *, n: int = 10) -> dict[str, Any]:
    """Bytes and time to first response of both approaches on the same run."""
    from qita_board.db import open_database
    from qita_board.ingest import Ingestor
    from qita_board.settings import Settings

    out: dict[str, Any] = {"folder": folder.name,
                           "disk_bytes": sum(p.stat().st_size for p in folder.iterdir() if p.is_file())}
    WORK.mkdir(parents=True, exist_ok=True)
    with WholeRunServer(folder) as srv, httpx.Client(base_url=srv.base, timeout=60) as c:
        out["theirs_cold"] = first_response(c, "/")
        out["theirs"] = timed(c, "/", n)
    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        db = Path(tmp) / "side.db"
        settings = Settings(db=str(db))
        engine = open_database(settings)
        try:
            report = Ingestor(engine, settings).ingest_paths([str(folder)])
        finally:
            engine.dispose()
        run_id = sorted(report.run_ids)[0]
        path = f"/runs/{quote(run_id, safe='')}"
        with Board(db) as board, httpx.Client(base_url=board.base, timeout=60) as c:
            out["ours_cold"] = first_response(c, path)
            out["ours"] = timed(c, path, n)
    return out


def report(res: dict[str, Any]) -> None:
    print(f"run folder: {res['folder']} ({res['disk_bytes'] / 1e6:.2f} MB on disk)")
    for who, label in (("theirs", "whole run in one page"), ("ours", "qita board /runs/{id}")):
        cold, warm = res[f"{who}_cold"], res[who]
        print(figure(f"{label}: bytes sent", f"{warm['bytes'] / 1e6:.3f} MB"))
        print(figure(f"{label}: first response, cold (first byte)", f"{cold['ttfb_ms']:.1f} ms"))
        print(figure(f"{label}: full response p50 / p95", f"{warm['p50_ms']:.1f} / {warm['p95_ms']:.1f} ms"))
    print(figure("bytes ratio (one page / ours)", f"{res['theirs']['bytes'] / max(1, res['ours']['bytes']):.1f}x"))


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    print(f"machine: {machine()}")
    res = compare(a.folder, n=a.n)
    report(res)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(res, indent=2, default=str))
    return res


if __name__ == "__main__":
    main()
