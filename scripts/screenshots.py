"""Take the README screenshots: every page (experiments overview, runs list, run view,
early-stopped run, compare, pair view, upload, a delete to confirm, policy lab and its
frontier) at 1280 px, and the overview and a run's retries on a 390 px phone, light and dark.

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

from qita.demo import run_demo  # noqa: E402
from qita_board.db import open_database  # noqa: E402
from qita_board.ingest import Ingestor  # noqa: E402
from qita_board.settings import Settings  # noqa: E402
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
            page.screenshot(path=str(OUT / f"experiments-{scheme}.png"))
            page.goto(server.url + "/runs")
            page.screenshot(path=str(OUT / f"runs-list-{scheme}.png"))
            early = page.locator("tr:has(.badge.early, .badge.stop-early_stop) td.run-id a").first
            early_href = early.get_attribute("href")
            plain = page.locator("tr:not(:has(.badge.early, .badge.stop-early_stop)) td.run-id a").first.get_attribute("href")
            page.goto(server.url + early_href)
            page.screenshot(path=str(OUT / f"run-early-stopped-{scheme}.png"))
            page.goto(server.url + plain)
            page.evaluate("document.getElementById('steps-section').scrollIntoView()")
            page.screenshot(path=str(OUT / f"run-view-{scheme}.png"))
            page.goto(server.url + "/compare")
            page.screenshot(path=str(OUT / f"compare-{scheme}.png"))
            # A disagreeing pair when there is one: that is what a reader opens next.
            pair = page.locator("tr.disagree a[href^='/pair'], a[href^='/pair']").first.get_attribute("href")
            page.goto(server.url + pair)
            page.screenshot(path=str(OUT / f"pair-{scheme}.png"))
            page.goto(server.url + "/upload")
            page.screenshot(path=str(OUT / f"upload-{scheme}.png"))
            page.goto(server.url + plain + "/delete")
            page.screenshot(path=str(OUT / f"delete-{scheme}.png"))
            shoot_lab(page, server, scheme)
            page.close()
            phone = browser.new_page(viewport={"width": 390, "height": 844})
            phone.emulate_media(color_scheme=scheme)
            phone.goto(server.url + "/")
            phone.screenshot(path=str(OUT / f"experiments-phone-{scheme}.png"))
            # A run with retries, filtered to the steps where a critic said retry or stop.
            phone.goto(server.url + "/runs?q=retry")
            retry = phone.locator("td.run-id a").first.get_attribute("href")
            phone.goto(server.url + retry + "?only=critic")
            phone.evaluate("document.getElementById('steps-section').scrollIntoView()")
            phone.screenshot(path=str(OUT / f"run-phone-{scheme}.png"))
            phone.close()
        browser.close()
    print("\n".join(sorted(str(p.relative_to(ROOT)) for p in OUT.glob("*.png"))))


def shoot_lab(page, server: LiveServer, scheme: str) -> None:
    """The lab with a policy that flips verdicts (the per-run table shows why), and its frontier."""
    page.goto(server.url + "/lab?arm=ran_tests:pass&arm=skill:decided&policy=1")
    page.locator("svg.frontier-chart circle").first.wait_for()
    page.screenshot(path=str(OUT / f"lab-{scheme}.png"))
    # The sticky top bar would sit on the panel once it is scrolled into view.
    page.evaluate("document.querySelector('.topbar').remove()")
    page.locator("#frontier-panel").screenshot(path=str(OUT / f"lab-frontier-{scheme}.png"))


if __name__ == "__main__":
    main()
