"""The board's temporary files: one folder per process, removed on exit and, after a crash, at the next start.

Uploads are stored under `<temp>/qita-board/<pid>/` until their ingest ends, and archive
folders that must be unpacked (QitOS and coder_eval layouts) too. Every path removes
what it made; a board killed with -9 leaves its folder behind, and the next board or
`qita ingest` to start removes every folder whose process is gone (`remove_stale`).
Folders of the older layout (`qita-zip-*`, `qita-upload-*` directly in the temp folder)
are removed once a day old: their process cannot be told.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from pathlib import Path

OLD_PREFIXES = ("qita-zip-", "qita-upload-")
OLD_AGE_S = 24 * 3600


def base() -> Path:
    return Path(tempfile.gettempdir()) / "qita-board"


def own_folder() -> Path:
    """This process's folder (made on first use, removed at exit)."""
    folder = base() / str(os.getpid())
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        atexit.register(shutil.rmtree, folder, True)
    return folder


def remove_own() -> None:
    """Remove this process's folder (the board's shutdown; atexit does it again harmlessly)."""
    shutil.rmtree(base() / str(os.getpid()), ignore_errors=True)


def make_dir(prefix: str) -> str:
    """A new private folder inside this process's folder."""
    return tempfile.mkdtemp(prefix=prefix, dir=own_folder())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Remove the folders of processes that are gone (and old-layout ones a day old); their names."""
    removed: list[str] = []
    root = base()
    if root.is_dir():
        for entry in root.iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid() and not _alive(int(entry.name)):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry.name)
    now = time.time()
    try:
        old = list(Path(tempfile.gettempdir()).iterdir())
    except OSError:
        old = []
    for entry in old:
        if entry.name.startswith(OLD_PREFIXES):
            try:
                if now - entry.stat().st_mtime > OLD_AGE_S:
                    shutil.rmtree(entry, ignore_errors=True)
                    removed.append(entry.name)
            except OSError:
                continue
    return removed
