"""Real-browser fixtures: a live board on a loopback port and Debian's chromium via Playwright.

The browser is never downloaded: Playwright drives /usr/bin/chromium (installed by the
project's setup). Every page records console errors, page errors and any script the
page should not have run (see `page.script_runs`).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

CHROMIUM = os.environ.get("QITA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """A board served by uvicorn on 127.0.0.1 in a thread."""

    def __init__(self, settings):
        import uvicorn

        from qita_board.main import create_app

        self.settings = settings
        self.app = create_app(settings)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("live server did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def live_server(settings) -> Iterator[LiveServer]:
    server = LiveServer(settings).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip(f"Debian chromium not installed at {CHROMIUM} (the test setup installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A fresh page; `page.errors` collects console errors and uncaught exceptions."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.errors = []  # type: ignore[attr-defined]
    pg.on("pageerror", lambda exc: pg.errors.append(f"pageerror: {exc}"))
    pg.on("console", lambda msg: pg.errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    yield pg
    context.close()
