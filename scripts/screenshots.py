"""Take the README screenshots: every page (runs list, run view, early-stopped run, compare,
pair view, upload), light and dark.

Usage: PYTHONPATH=. python scripts/screenshots.py [QITOS_RUNS_FOLDER]
Builds a throwaway board from the demo experiment (plus QitOS runs when given) and saves
PNGs into docs/screenshots/ with Debian's chromium.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.db import open_database  # noqa: E402
from app.ingest import Ingestor  # noqa: E402
from app.settings import Settings  # noqa: E402
from qita.demo import run_demo  # noqa: E402
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, LiveServer  # noqa: E402

OUT = ROOT / "docs" / "screenshots"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(db=str(Path(tmp) / "shots.db"))
        paths = [str(p) for p in run_demo(Path(tmp) / "traces", tasks=12)]
        paths += sys.argv[1:]
        engine = open_database(settings)
        Ingestor(engine, settings).ingest_paths(paths)
        engine.dispose()
        server = LiveServer(settings).start()
        try:
            shoot(server)
        finally:
            server.stop()


def shoot(server: LiveServer) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for scheme in ("light", "dark"):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.emulate_media(color_scheme=scheme)
            page.goto(server.url + "/")
            page.screenshot(path=str(OUT / f"runs-list-{scheme}.png"))
            early = page.locator("tr:has(.badge.early, .badge.stop-early_stop) td.run-id a").first
            early_href = early.get_attribute("href")
            plain = page.locator("tr:not(:has(.badge.early, .badge.stop-early_stop)) td.run-id a").first.get_attribute("href")
            page.goto(server.url + early_href)
            page.screenshot(path=str(OUT / f"run-early-stopped-{scheme}.png"))
            page.goto(server.url + plain)
            page.locator("article.step").first.scroll_into_view_if_needed()
            page.screenshot(path=str(OUT / f"run-view-{scheme}.png"))
            page.goto(server.url + "/compare")
            page.screenshot(path=str(OUT / f"compare-{scheme}.png"))
            # A disagreeing pair when there is one: that is what a reader opens next.
            pair = page.locator("tr.disagree a[href^='/pair'], a[href^='/pair']").first.get_attribute("href")
            page.goto(server.url + pair)
            page.screenshot(path=str(OUT / f"pair-{scheme}.png"))
            page.goto(server.url + "/upload")
            page.screenshot(path=str(OUT / f"upload-{scheme}.png"))
            page.close()
        browser.close()
    print("\n".join(sorted(str(p.relative_to(ROOT)) for p in OUT.glob("*.png"))))


if __name__ == "__main__":
    main()
