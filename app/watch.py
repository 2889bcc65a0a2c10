"""Folder watcher: while the board serves, new and appended trace files are ingested.

Changes are noticed with watchfiles and turned into ingest passes on the writer queue.
A pass skips unchanged files by size and mtime, and reads grown files from their saved
offset, so re-scanning the folder is cheap. Lines still being written wait (final=False).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Optional

from .jobs import Writer

log = logging.getLogger("qita.watch")


class Watcher:
    """Watches folders on a thread; every change queues one ingest pass."""

    def __init__(self, writer: Writer, folders: list[str], *, idle_s: float = 5.0):
        self.writer = writer
        self.folders = folders
        self.idle_s = idle_s
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._pending = threading.Event()
        #: files refused by a pass, kept across passes until they change (Ingestor.refused)
        self._refused: dict[str, Any] = {}

    def start(self) -> None:
        if not self.folders or self._thread is not None:
            return
        self._queue_pass()
        self._thread = threading.Thread(target=self._loop, name="qita-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1)
            self._thread = None

    def _queue_pass(self) -> None:
        if self._pending.is_set():
            return  # one queued pass will see every change made before it runs
        self._pending.set()

        def job(_job, ingestor):
            self._pending.clear()
            ingestor.refused = self._refused
            return ingestor.ingest_paths(list(self.folders), final=False)

        self.writer.submit("watch", job, owner="watch")

    def _loop(self) -> None:
        from watchfiles import watch

        try:
            for changes in watch(*self.folders, stop_event=self._stop, debounce=200, step=50,
                                 yield_on_timeout=True, rust_timeout=int(self.idle_s * 1000), raise_interrupt=False):
                if self._stop.is_set():
                    return
                # On a timeout (no change) a pass still runs: it sweeps silent runs to abandoned.
                self._queue_pass()
        except Exception:  # the board keeps serving even if the watcher dies
            log.exception("folder watcher stopped")
