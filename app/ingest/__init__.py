"""The one ingest path: the CLI, the folder watcher and uploads all call `Ingestor`.

Files are streamed line by line and applied in batches, one transaction each; the
source's byte offset is saved in the same transaction, so a killed ingest resumes
where its last committed batch ended and never duplicates a record. A file that grew
is read from its saved offset (after checking the bytes before it are unchanged);
one that shrank or changed is read again from the start, which is harmless because
every record is written by its natural key.
"""

from __future__ import annotations

import gc
import hashlib
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from .. import derive
from ..db import describe_db_error
from ..errors import BoardError
from ..models import RUNS, SOURCES
from ..settings import Settings
from . import overwrite
from .lines import ENTRY_ERRORS, LimitExceeded, iter_items, open_stream, validate_record
from .sources import UPLOAD_KEY_PREFIX, Discovery, Source, discover
from .store import Applier

ProgressFn = Callable[[int], None]


class _CommitFailed(Exception):
    """A batch's commit raised one of the reading errors' types (ENTRY_ERRORS), inside the
    read loop: carried past its handlers so it is not reported as a stream error."""


class Stopped(Exception):
    """The ingest was told to stop (cancel, time budget, a stop signal): the batch being
    built was not written; every batch before it was, with its file offset. `report` is
    what those batches did (set by `Ingestor.ingest_discovery`)."""

    report: Optional["IngestReport"] = None


#: Lines read between two looks at the stop flag (a look is a call; a line costs ~10 µs).
STOP_CHECK_LINES = 64


@contextmanager
def _no_gate():
    yield

_frozen_lock = threading.Lock()
_frozen_depth = 0


@contextmanager
def _old_objects_frozen():
    """Keep the collector off the objects that existed before an ingest, for its duration.

    An ingest holds each batch's parsed records until the batch is written, so they live
    long enough to reach the oldest generation and trigger full collections, each of which
    walked the whole process (modules, SQLAlchemy, pydantic): a tenth of the ingest time
    (docs/performance.md). Objects made during the ingest are collected as before; the
    older ones go back to the collector when the last running ingest ends.
    """
    global _frozen_depth
    with _frozen_lock:
        if _frozen_depth == 0:
            gc.freeze()
        _frozen_depth += 1
    try:
        yield
    finally:
        with _frozen_lock:
            _frozen_depth -= 1
            if _frozen_depth == 0:
                gc.unfreeze()


@dataclass
class IngestIssue:
    """A rejected line (or file) or a warning, named `FILE:LINE: message`."""

    file: str
    line: Optional[int]
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}" if self.line is not None else f"{self.file}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "message": self.message}


@dataclass
class IngestReport:
    """What one ingest call did."""

    files: int = 0
    records: int = 0
    run_ids: set[str] = field(default_factory=set)
    created: set[str] = field(default_factory=set)
    errors: list[IngestIssue] = field(default_factory=list)
    warnings: list[IngestIssue] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    #: paths given that held nothing the board can read (their error is in `errors`)
    empty: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.missing

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "runs": len(self.run_ids),
            "records": self.records,
            "errors": [e.to_json() for e in self.errors],
            "warnings": [w.to_json() for w in self.warnings],
            "runs_created": sorted(self.created),
            "runs_updated": sorted(self.run_ids - self.created),
            "nothing_found": list(self.empty),
        }


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _reload_for(src: Source) -> Optional[overwrite.Reload]:
    """A reload for a new version of an uploaded source that is its own origin (never for
    files on disk, which may be rotated, nor for one file of a QitOS folder)."""
    own = (src.origin or src.key) == src.key
    return overwrite.Reload() if own and src.key.startswith(UPLOAD_KEY_PREFIX) else None


class Ingestor:
    """Reads sources into the store. One instance per writer (it caches run keys)."""

    def __init__(self, engine: Engine, settings: Settings, *, progress: Optional[ProgressFn] = None,
                 gate: Optional[Callable[[], Any]] = None, stop: Optional[Callable[[], bool]] = None):
        self.engine = engine
        self.settings = settings
        self.applier = Applier(engine)
        self.progress = progress
        #: taken around every write transaction (the board's writer: one write at a time, in turn)
        self.gate = gate or _no_gate
        #: polled between lines and before every write: True ends the ingest with `Stopped`
        self.stop = stop
        #: records written so far (progress)
        self.records_done = 0

    def check_stop(self) -> None:
        if self.stop is not None and self.stop():
            raise Stopped()

    # -- entry points -----------------------------------------------------------------
    def ingest_paths(self, paths: list[str], *, final: bool = True, closed: bool = False,
                     key_prefix: Optional[str] = None, labels: Optional[list[str]] = None) -> IngestReport:
        """Ingest files, folders, archives and globs; see `discover` for keys and labels."""
        found = discover(paths, key_prefix=key_prefix, labels=labels, settings=self.settings)
        try:
            return self.ingest_discovery(found, final=final, closed=closed)
        finally:
            found.remove_temporary()

    def ingest_discovery(self, found: Discovery, *, final: bool = True, closed: bool = False) -> IngestReport:
        """Ingest already-discovered sources."""
        report = IngestReport(missing=list(found.missing), empty=list(found.empty))
        for label, line, message in found.errors:
            report.errors.append(IngestIssue(label, line, message))
        with _old_objects_frozen():
            try:
                for src in found.sources:
                    self.check_stop()
                    report.files += 1
                    self.ingest_source(src, report, final=final, closed=closed)
            except Stopped as exc:
                exc.report = report  # what the committed batches did: an upload remembers it
                raise
        self.sweep()
        if report.created:
            self.analyze(len(report.created))
        return report

    def analyze(self, created: int) -> None:
        """Refresh SQLite's planner statistics after a pass that added many runs.

        Without them SQLite picks the index of the least selective filter (at 100,000
        runs, `verdict` over `experiment`: 80 ms instead of 1 ms for a filtered list
        page). A sampled ANALYZE takes about 10 ms; PostgreSQL keeps its own statistics.
        """
        if self.engine.dialect.name != "sqlite":
            return
        try:
            with self.gate(), self.engine.begin() as conn:
                total = conn.execute(select(func.count()).select_from(RUNS)).scalar_one()
                if created >= 1000 or created * 10 >= total:
                    conn.exec_driver_sql("PRAGMA analysis_limit=1000")
                    conn.exec_driver_sql("ANALYZE")
        except SQLAlchemyError:
            pass  # statistics are an optimisation: never fail an ingest over them

    def sweep(self) -> None:
        """Mark runs that went silent as abandoned."""
        try:
            with self.gate(), self.engine.begin() as conn:
                derive.sweep_abandoned(conn, now=_now(), abandon_after_s=self.settings.abandon_after_s)
        except SQLAlchemyError as exc:
            raise BoardError(f"cannot write to the database: {describe_db_error(exc)}", status=503) from exc

    # -- one source ---------------------------------------------------------------------
    def ingest_source(self, src: Source, report: IngestReport, *, final: bool = True, closed: bool = False) -> None:
        try:
            if src.produce is not None:
                self._ingest_document(src, report, closed=closed)
            else:
                self._ingest_lines(src, report, final=final, closed=closed)
            if src.finish is not None:
                extra = src.finish()
                if extra:
                    self._commit(src, report, [(r, None, src.label, 0) for r in extra], None, closed=closed)
        except (OperationalError, SQLAlchemyError) as exc:
            self.applier.forget()
            raise BoardError(f"cannot write to the database: {describe_db_error(exc)}", status=503) from exc
        except OSError as exc:
            report.errors.append(IngestIssue(src.label, None, f"cannot read file: {exc.strerror or type(exc).__name__}"))

    def _source_row(self, key: str) -> Optional[Any]:
        with self.engine.connect() as conn:
            return conn.execute(select(SOURCES).where(SOURCES.c.path == key)).mappings().first()

    def _save_source(self, conn, src: Source, **values: Any) -> None:
        values["updated_at"] = _now()
        exists = conn.execute(select(SOURCES.c.id).where(SOURCES.c.path == src.key)).first()
        if exists:
            conn.execute(update(SOURCES).where(SOURCES.c.id == exists[0]).values(**values))
        else:
            conn.execute(SOURCES.insert().values(path=src.key, kind=src.kind, **values))

    def _commit(self, src: Source, report: IngestReport, batch: list, source_values: Optional[dict[str, Any]],
                *, closed: bool, run_warnings: Optional[dict[str, list[str]]] = None, end_of_pass: bool = False) -> None:
        """Apply one batch and record the source's progress, atomically. `end_of_pass`: the
        last batch of a pass that read the whole source (a reload of a new version ends then)."""
        self.check_stop()
        try:
            with self.gate(), self.engine.begin() as conn:
                touched: set[str] = set()
                screened: list[tuple[str, int, str, str]] = []
                replacing: frozenset[str] = frozenset()
                # Records read, whether applied or screened out as equal or refused (the report counts reading).
                read = len(batch)
                report.records += read
                self.records_done += read
                if batch:
                    origin, origin_label = src.origin or src.key, src.origin_label or src.label
                    if src.reload is not None:
                        src.reload.meet(conn, batch, origin=origin)
                    # A reload emptied its runs already: there is nothing of theirs to compare.
                    rewrite = src.rewrite and src.reload is None
                    batch, screened, known, replacing = overwrite.screen(conn, batch, origin=origin,
                                                                         label=origin_label, rewrite=rewrite)
                    for rid, pk in known.items():
                        self.applier.remember_run(rid, pk)
                if screened:
                    by_run_screened: dict[str, list[str]] = {}
                    for label, line, message, run_id in screened:
                        report.warnings.append(IngestIssue(label, line or None, message))
                        by_run_screened.setdefault(run_id, []).append(message)
                    for rid, msgs in by_run_screened.items():
                        self.applier.add_warnings(conn, rid, msgs)
                if batch:
                    touched, created, warnings = self.applier.apply(conn, batch, source_format=src.source_format,
                                                                    closed=closed, replacing=replacing)
                    overwrite.claim(conn, sorted(touched), origin=origin, label=origin_label)
                    report.created |= created
                    report.run_ids |= touched
                    by_run: dict[str, list[str]] = {}
                    for label, line, message, run_id in warnings:
                        report.warnings.append(IngestIssue(label, line or None, message))
                        by_run.setdefault(run_id, []).append(message)
                    for rid, msgs in (run_warnings or {}).items():
                        by_run.setdefault(rid, []).extend(msgs)
                    for rid, msgs in by_run.items():
                        self.applier.add_warnings(conn, rid, msgs)
                    self.applier.recompute(conn, touched, abandon_after_s=self.settings.abandon_after_s)
                if end_of_pass and src.reload is not None:
                    self._finish_reload(conn, src, report)
                if source_values is not None:
                    self._save_source(conn, src, **source_values)
        except SQLAlchemyError:
            self.applier.forget()
            raise

    def _finish_reload(self, conn: Any, src: Source, report: IngestReport) -> None:
        """The end of a pass over a new version of an upload: a warning for each run whose
        content it changed (app.ingest.overwrite.Reload)."""
        label = src.origin_label or src.label
        said = src.reload.finish(conn, label=label)
        src.reload = None
        for where, _line, message, rid in said:
            report.warnings.append(IngestIssue(where, None, message))
            self.applier.add_warnings(conn, rid, [message])

    def _ingest_document(self, src: Source, report: IngestReport, *, closed: bool) -> None:
        st = os.stat(src.path)
        prev = self._source_row(src.key)
        with open(src.path, "rb") as fh:
            digest = hashlib.sha256(fh.read(64 * 1024 * 1024)).hexdigest()
        if prev is not None and prev["content_hash"] == digest:
            return
        src.rewrite = prev is not None and bool(prev["content_hash"])
        src.reload = _reload_for(src) if src.rewrite else None
        assert src.produce is not None  # a document source always has its producer
        records, errors = src.produce()
        for line, message in errors:
            report.errors.append(IngestIssue(src.label, line, message))
        batch = []
        for rec in records:
            rec, err, warns = validate_record(rec)
            if err:
                report.errors.append(IngestIssue(src.label, None, err))
            else:
                for w in warns:
                    report.warnings.append(IngestIssue(src.label, None, w))
                batch.append((rec, None, src.label, 0))
        self._commit(src, report, batch, {"size": st.st_size, "mtime": st.st_mtime, "content_hash": digest,
                                          "offset": st.st_size, "lines": 0}, closed=closed, end_of_pass=True)
        if self.progress:
            self.progress(st.st_size)

    def _open(self, src: Source):
        if src.open is not None:
            return src.open()
        return open_stream(src.path, gz=src.kind == "gz", max_decompressed=self.settings.max_archive_bytes,
                           max_ratio=self.settings.max_archive_ratio)

    def _ingest_lines(self, src: Source, report: IngestReport, *, final: bool, closed: bool) -> None:
        st = src.stamp or os.stat(src.path)
        prev = self._source_row(src.key)
        if prev is not None and prev["size"] == st.st_size and prev["mtime"] == st.st_mtime and prev["content_hash"]:
            if self.progress:
                self.progress(st.st_size)
            return  # unchanged since the last pass
        if st.st_size == 0 and final and prev is None:
            report.warnings.append(IngestIssue(src.label, None, "empty file: no records"))
        hasher = hashlib.sha256()
        start_offset = start_line = 0
        src.rewrite, src.reload = False, None  # per pass (a watched source is read again and again)
        fh = self._open(src)
        try:
            if prev is not None and prev["offset"] and prev["content_hash"]:
                # Resume only if the bytes already read are still the same.
                remaining = prev["offset"]
                try:
                    while remaining > 0:
                        chunk = fh.read(min(remaining, 1 << 20))
                        if not chunk:
                            break
                        hasher.update(chunk)
                        remaining -= len(chunk)
                except ENTRY_ERRORS:
                    remaining = 1
                if remaining == 0 and hasher.hexdigest() == prev["content_hash"]:
                    start_offset, start_line = prev["offset"], prev["lines"]
                else:
                    fh.close()
                    fh = self._open(src)
                    hasher = hashlib.sha256()
                    src.rewrite = True  # read before, and its bytes changed: a new version
                    src.reload = _reload_for(src)
            self._read_loop(src, fh, report, start_offset, start_line, hasher, st, final=final, closed=closed)
        finally:
            fh.close()

    def _read_loop(self, src: Source, fh, report: IngestReport, offset: int, line: int, hasher, st,
                   *, final: bool, closed: bool) -> None:
        batch: list[tuple[dict[str, Any], Optional[bytes], str, int]] = []
        run_warnings: dict[str, list[str]] = {}
        consumed_offset, consumed_line = offset, line
        digest = hasher.copy()
        reported = offset
        gz = src.kind == "gz"
        stop = self.stop
        tick = 0

        def source_values(done: bool) -> dict[str, Any]:
            # mtime is saved only after a complete pass: it is what lets the next pass skip
            # an unchanged file without reading it.
            return {"size": st.st_size, "mtime": st.st_mtime if done else None,
                    "content_hash": digest.hexdigest(), "offset": consumed_offset, "lines": consumed_line}

        try:
            for item in iter_items(fh, start_offset=offset, start_line=line, max_line_bytes=self.settings.max_line_bytes,
                                   final=final, transform=src.transform, hasher=hasher):
                tick += 1
                if stop is not None and tick >= STOP_CHECK_LINES:
                    tick = 0
                    if stop():
                        raise Stopped()
                if item.error:
                    report.errors.append(IngestIssue(src.label, item.line, item.error))
                if item.record is not None:
                    batch.append((item.record, item.raw, src.label, item.line))
                    if item.warnings:
                        for w in item.warnings:
                            report.warnings.append(IngestIssue(src.label, item.line, w))
                        run_warnings.setdefault(item.record["run_id"], []).extend(
                            f"{src.label.rsplit('/', 1)[-1]}:{item.line}: {w}" for w in item.warnings)
                if item.pending or item.more:
                    continue
                # iter_items hashes exactly the consumed lines, so this is the digest of [0, end).
                consumed_offset, consumed_line = item.end, item.line
                digest = hasher.copy()
                if len(batch) >= self.settings.batch_lines:
                    try:
                        # A reload saves its offset only at its end: stopped half way, the
                        # next pass is a reload again, never a file that merely grew.
                        self._commit(src, report, batch, None if src.reload is not None else source_values(False),
                                     closed=closed, run_warnings=run_warnings)
                    except ENTRY_ERRORS as exc:
                        # Not a reading error: carried past the handlers below, which are
                        # for the stream (a ValueError from the writer is not "cannot decompress").
                        raise _CommitFailed() from exc
                    batch = []
                    run_warnings = {}
                    if self.progress and not gz:
                        self.progress(consumed_offset - reported)
                        reported = consumed_offset
        except _CommitFailed as exc:
            # the batch was rolled back; the error is the writer's, raised as it was
            cause = exc.__cause__
            assert cause is not None  # raised only `from` the writer's error
            raise cause from None
        except LimitExceeded as exc:
            # A limit of the stream, not of a line: named by file only.
            report.errors.append(IngestIssue(src.label, None, str(exc)))
        except ENTRY_ERRORS as exc:
            report.errors.append(IngestIssue(src.label, consumed_line + 1, f"cannot decompress: {exc}"))
        self._commit(src, report, batch, source_values(True), closed=closed, run_warnings=run_warnings,
                     end_of_pass=True)
        if self.progress:
            self.progress((consumed_offset - reported) if not gz else st.st_size)
