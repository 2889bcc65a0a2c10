"""Reading the first large file while the command that ingests it is still starting.

`qita ingest` spends its first second importing the board's database layer (SQLAlchemy,
the SQLModel models, pydantic-settings: 1.2 s of a 7 s ingest of 106 MB on the slow
machine of docs/performance.md), with the second core idle. The reading side imports
without that layer (app.ingest), so `run_ingest` forks the reader process of the first
source that would get one (app.ingest.reader.use_process) before importing the rest: the
child reads, checks and builds rows while the writer's modules load.

The writer takes the process over when it reaches that source only if it would have
started the same one: the same saved offset of the source (read here from the SQLite
file with the standard library, compared with what the writer then reads through the
store), the same row encoding and the same `final`. Otherwise the process is stopped and
the writer reads as it always does: starting early never changes what is read, only when.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from typing import Any, Callable, Optional
from urllib.parse import quote, unquote

from . import reader
from .sources import Discovery, Source

#: Chunks an early reader may build before the writer takes the first (the usual bound is
#: `reader.AHEAD`): about a second of reading on a slow machine, the time the writer's
#: imports take, at 0.2–0.4 MB a chunk once pickled (its texts stay in the file). Only for a
#: reader that sends texts by position (`reader.by_position`): one that sends them holds up
#: to 8 MB a chunk, and 16 of those made its child 110 MB larger.
EARLY_AHEAD = 16

#: What the reader process needs of a source's saved state (app.ingest.reader.read_chunks).
_PREV_FIELDS = ("offset", "lines", "content_hash", "size", "mtime")
_SAVED = 'SELECT "offset", lines, content_hash, size, mtime FROM ingest_sources WHERE path = ?'


def sqlite_path(url: str) -> Optional[str]:
    """The file of a SQLite URL as SQLAlchemy reads it, ":memory:" for a database in memory,
    None for another database or a URL with options (nothing is started early then)."""
    scheme, sep, rest = url.partition(":///")
    if not sep:
        return ":memory:" if url in ("sqlite://", "sqlite+pysqlite://") else None
    if scheme not in ("sqlite", "sqlite+pysqlite") or "?" in rest:
        return None
    return unquote(rest) or ":memory:"  # as SQLAlchemy decodes it


def saved_states(path: str, keys: list[str]) -> Optional[dict[str, dict[str, Any]]]:
    """The saved state of each source among `keys` the database at `path` holds ({} for a
    file not yet made), or None when it cannot be read (nothing is started early then)."""
    if path == ":memory:":
        return {}
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            # A pipe or a device: opening it read-only blocks (a FIFO waits for a writer, and
            # no stop signal reaches Python meanwhile); the store reports what it is.
            return None
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    try:
        # The name's bytes, escaped: a name that is not UTF-8 cannot be quoted as text.
        uri = "file:" + quote(os.fsencode(os.path.abspath(path))) + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=1)
        try:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ingest_sources'").fetchone():
                return {}
            out: dict[str, dict[str, Any]] = {}
            for key in keys:
                row = conn.execute(_SAVED, (key,)).fetchone()
                if row is not None:
                    out[key] = dict(zip(_PREV_FIELDS, row))
            return out
        finally:
            conn.close()
    except (sqlite3.Error, ValueError):
        return None


def same_start(a: Optional[dict[str, Any]], b: Optional[dict[str, Any]]) -> bool:
    """Whether a reader given saved state `a` reads what one given `b` reads."""
    if not (a and a["offset"]) or not (b and b["offset"]):
        return not (a and a["offset"]) and not (b and b["offset"])
    return all(a[k] == b[k] for k in ("offset", "lines", "content_hash"))


class Early:
    """A reader process started before the writer could start it, with what it was started on."""

    __slots__ = ("process", "prev", "stat", "encode", "final")

    def __init__(self, process: reader.ReaderProcess, prev: Optional[dict[str, Any]], stat: os.stat_result, *,
                 encode: bool, final: bool):
        self.process = process
        self.prev = prev
        #: the file's size and time taken before the child began to read: what the writer
        #: saves with the pass (a stat taken later could name bytes the child never saw)
        self.stat = stat
        self.encode = encode
        self.final = final


class EarlyReaders:
    """The reader processes started early, by source key; whatever is not taken is stopped by `close`."""

    def __init__(self) -> None:
        self.by_key: dict[str, Early] = {}

    def pop(self, key: str) -> Optional[Early]:
        return self.by_key.pop(key, None)

    @staticmethod
    def fits(early: Early, saved: Optional[dict[str, Any]], *, encode: bool, final: bool) -> bool:
        """Whether the writer, with `saved` in hand, would have started `early`'s process."""
        return early.encode == encode and early.final == final and same_start(early.prev, saved)

    @staticmethod
    def adopt(early: Early, saved: Optional[dict[str, Any]], *, encode: bool, final: bool,
              stop: Optional[Callable[[], bool]]) -> Optional[reader.ReaderProcess]:
        """`early`'s process if the writer would have started the same one, else None (and it is stopped)."""
        if EarlyReaders.fits(early, saved, encode=encode, final=final):
            early.process.stop = stop
            return early.process
        early.process.close()
        return None

    def close(self) -> None:
        while self.by_key:
            _key, early = self.by_key.popitem()
            early.process.close()

    def __enter__(self) -> "EarlyReaders":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def start(found: Discovery, settings: Any, *, final: bool = True) -> EarlyReaders:
    """Fork the reader of the first source in `found` that would be read in a process of
    its own, if its database is a SQLite file (JSON values then go to it as text)."""
    out = EarlyReaders()
    path = sqlite_path(settings.db_url)
    candidates = [s for s in found.sources if _could_use_process(s)]
    if path is None or not candidates:
        return out
    states = saved_states(path, [s.key for s in candidates])
    if states is None:
        return out
    for src in candidates:
        try:
            st = os.stat(src.path)
        except OSError:
            continue  # the writer reports it
        prev = states.get(src.key)
        if prev is not None and prev["size"] == st.st_size and prev["mtime"] == st.st_mtime and prev["content_hash"]:
            continue  # unchanged since the last pass: the writer skips it
        if not reader.use_process(src, prev, st.st_size, settings):
            continue
        try:
            ahead = EARLY_AHEAD if reader.by_position(src, prev) else reader.AHEAD
            process = reader.ReaderProcess(src, prev, settings=settings, final=final, encode=True, ahead=ahead)
        except OSError:
            return out  # no fork: the writer tries again, and reads the file itself if it cannot
        out.by_key[src.key] = Early(process, prev, st, encode=True, final=final)
        break
    return out


def _could_use_process(src: Source) -> bool:
    return src.produce is None and src.open is None and src.transform is None and src.finish is None
