"""Figures of the whole store kept on disk across restarts, beside a SQLite database.

A 10,000-pair comparison takes the better part of a second to compute and a few tens of
milliseconds to read back (docs/performance.md). The in-memory cache (app.queries.cache.data_cached)
is lost when the board restarts; this keeps the warmed comparisons in `<database>.cache/`,
each file named by what it holds and valid for one data version of the store, so a board
started on an unchanged database answers its first visitor from disk. Only for SQLite
files (a PostgreSQL store is shared by several boards; they keep their own memory caches).

Files are written whole under a temporary name and renamed, so a reader never sees half a
file; a file that cannot be read is ignored and computed again. At most MAX_FILES are kept.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from typing import Any, Callable, Optional

import orjson
from sqlalchemy.engine import Engine

MAX_FILES = 64
_lock = threading.Lock()
_stamp: Optional[str] = None


def code_stamp() -> str:
    """A digest of the code that computes what is cached: a board upgraded to code that
    computes differently never reads an older board's files."""
    global _stamp
    if _stamp is None:
        here = os.path.dirname(os.path.abspath(__file__))
        digest = hashlib.sha256()
        for name in ("compare.py", "compare_flags.py", "criteria.py", "step_failures.py",
                     os.path.join("queries", "comparison.py"), "stats.py", "diskcache.py", "jsontext.py"):
            try:
                with open(os.path.join(here, name), "rb") as fh:
                    digest.update(fh.read())
            except OSError:
                digest.update(name.encode())
        _stamp = digest.hexdigest()[:16]
    return _stamp


def folder_for(engine: Engine) -> Optional[str]:
    """`<database file>.cache`, or None for an in-memory database or another backend."""
    url = engine.url
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return os.path.abspath(url.database) + ".cache"


def _name(key: tuple, version: tuple) -> str:
    text = repr((key, version, code_stamp())).encode()
    return hashlib.sha256(text).hexdigest()[:40] + ".json"


def load_or_compute(engine: Engine, *, key: tuple, version: tuple, compute: Callable[[], Any]) -> Any:
    """The value stored for (key, data version), else `compute()` stored for next time."""
    folder = folder_for(engine)
    if folder is None:
        return compute()
    path = os.path.join(folder, _name(key, version))
    try:
        with open(path, "rb") as fh:
            return orjson.loads(fh.read())
    except (OSError, orjson.JSONDecodeError):
        pass
    value = compute()
    try:
        data = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str)
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        _prune(folder)
    except OSError:
        pass  # a cache that cannot be written is only a cache
    return value


def _prune(folder: str) -> None:
    with _lock:
        try:
            entries = sorted((e for e in os.scandir(folder) if e.name.endswith((".json", ".tmp"))),
                             key=lambda e: e.stat().st_mtime)
        except OSError:
            return
        for e in entries[:-MAX_FILES] if len(entries) > MAX_FILES else []:
            try:
                os.unlink(e.path)
            except OSError:
                pass
