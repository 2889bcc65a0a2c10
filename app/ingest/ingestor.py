"""`Ingestor`, the one ingest path: the CLI, the folder watcher and uploads all call it.

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
import logging
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Optional

from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DataError, IntegrityError, OperationalError, SQLAlchemyError

from .. import derive
from ..db import Checkpointer, describe_db_error
from ..errors import BoardError
from ..models import RUNS, SOURCES
from ..settings import Settings
from . import overwrite, reader
from .batch import ReadBatch
from .early import Early, EarlyReaders
from .lines import validate_record
from .reader import Stopped
from .sources import UPLOAD_KEY_PREFIX, Discovery, Source, discover
from .store import Applier

ProgressFn = Callable[[int], None]
log = logging.getLogger("qita.ingest")
__all__ = ["Ingestor", "IngestIssue", "IngestReport", "Stopped"]



@contextmanager
def _no_gate():
    yield

_frozen_lock = threading.Lock()
_frozen_depth = 0
_saved_threshold: Optional[tuple[int, ...]] = None
#: The collector's thresholds while an ingest runs (see `_old_objects_frozen`).
INGEST_GC_THRESHOLD = (20_000, 50, 100)


@contextmanager
def _old_objects_frozen():
    """Keep the collector off the objects that existed before an ingest, for its duration.

    An ingest holds each batch's parsed records until the batch is written, so they live
    long enough to reach the oldest generation and trigger full collections, each of which
    walked the whole process (modules, SQLAlchemy, pydantic): a tenth of the ingest time
    (docs/performance.md). Objects made during the ingest are collected as before; the
    older ones go back to the collector when the last running ingest ends.

    The youngest generation is collected every INGEST_GC_THRESHOLD allocations instead of
    every 700, meanwhile: a batch makes a row tuple per record, so the collector ran 450
    times over 106 MB (0.1 s of the writer's time) where it now runs a few times (under
    0.01 s). What an ingest makes is freed by reference counting as before; only cycles
    wait a little longer.
    """
    global _frozen_depth, _saved_threshold
    with _frozen_lock:
        if _frozen_depth == 0:
            gc.freeze()
            _saved_threshold = gc.get_threshold()
            gc.set_threshold(*INGEST_GC_THRESHOLD)
        _frozen_depth += 1
    try:
        yield
    finally:
        with _frozen_lock:
            _frozen_depth -= 1
            if _frozen_depth == 0:
                gc.unfreeze()
                if _saved_threshold is not None:
                    gc.set_threshold(*_saved_threshold)


#: Most chunks one transaction applies as one batch when the reader process has them
#: ready (16,000 lines at the default batch_lines: about 0.3 s of the writer's turn, which
#: other jobs wait for).
GROUP_CHUNKS = 8
#: ... and no more once a group spans this many bytes of the file: a group is held whole in
#: the writer, about three times its bytes (1 GB of 1,000-step runs peaked at 150 MiB in the
#: writer in groups of eight 1.9 MB chunks, at 101 MiB with this cap, at the same speed).
GROUP_BYTES = 6 * 1024 * 1024


@dataclass
class _Applied:
    """What the batches of one transaction did, settled at its end (`Ingestor._settle`)."""

    records: int = 0
    errors: list["IngestIssue"] = field(default_factory=list)
    warnings: list["IngestIssue"] = field(default_factory=list)
    created: set[str] = field(default_factory=set)
    touched: dict[str, None] = field(default_factory=dict)
    #: runs of another source the batches gave nothing (app.ingest.overwrite.Screened)
    unchanged: set[str] = field(default_factory=set)
    docs: dict[str, list[str]] = field(default_factory=dict)


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
    #: runs begun by another source that this one read again without changing anything
    #: (a file ingested from disk, then uploaded); a run changed by a later batch is not one
    unchanged: set[str] = field(default_factory=set)
    errors: list[IngestIssue] = field(default_factory=list)
    warnings: list[IngestIssue] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    #: paths given that held nothing the board can read (their error is in `errors`)
    empty: list[str] = field(default_factory=list)
    #: sources read for the first time (no earlier pass saved where it stopped in them)
    fresh: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors and not self.missing

    @property
    def runs_updated(self) -> list[str]:
        """Runs that existed and were given something new."""
        return sorted(self.run_ids - self.created)

    @property
    def runs_unchanged(self) -> list[str]:
        """Runs another source began that this one gave nothing (a run changed by a later batch is not one)."""
        return sorted(self.unchanged - self.run_ids)

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "runs": len(self.run_ids),
            "records": self.records,
            "errors": [e.to_json() for e in self.errors],
            "warnings": [w.to_json() for w in self.warnings],
            "runs_created": sorted(self.created),
            "runs_updated": self.runs_updated,
            "runs_unchanged": self.runs_unchanged,
            "nothing_found": list(self.empty),
        }


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _reload_for(src: Source) -> Optional[overwrite.Reload]:
    """A reload for a new version of a source that is its own origin: an upload, or a whole
    document (never for files of lines on disk, which may be rotated, nor for one file of a
    QitOS folder, nor for a run.json row standing in for its missing task.json).

    Only a document on disk deletes the runs its new version no longer makes: its key is
    its real path, so it is the same file; an upload's is its name, and two nights' results
    uploaded under the same names would otherwise delete each other's runs."""
    if (src.origin or src.key) != src.key:
        return None
    upload = src.key.startswith(UPLOAD_KEY_PREFIX)
    if src.kind == "document":
        return overwrite.Reload(whole=not upload, reason=src.changed)
    return overwrite.Reload() if upload else None


#: How a whole document's saved digest begins: its own bytes, what it depends on
#: (Source.context) and its reading (Source.reading), hashed apart so a new pass can say
#: which of them changed; a digest without it was saved by an earlier version of the board.
_DOC_DIGEST = "d1"


def _document_digest(src: Source) -> str:
    """The saved digest of a whole document: 22 + 20 + 20 hex digits after `_DOC_DIGEST`
    (the column holds 64), one part per thing that makes its records."""
    with open(src.path, "rb") as fh:
        own = hashlib.sha256(fh.read(64 * 1024 * 1024)).hexdigest()
    context = hashlib.sha256(src.context() if src.context is not None else b"").hexdigest()
    reading = hashlib.sha256(src.reading.encode()).hexdigest()
    return _DOC_DIGEST + own[:22] + context[:20] + reading[:20]


def _document_change(saved: str, digest: str) -> Optional[str]:
    """Why a pass reads a document it read before: None for a new version of it, else the
    reason the same bytes are read again (what they depend on, or their reading, changed)."""
    if not saved.startswith(_DOC_DIGEST) or len(saved) != len(digest):
        # an earlier board's digest, of everything at once: the reading changed at least
        return "this version of qita board reads it anew"
    if saved[2:24] != digest[2:24]:
        return None
    if saved[24:44] != digest[24:44]:
        return "the run.json or experiment.json of its results folder changed"
    return "this version of qita board reads it anew"


class Refused(Exception):
    """Storing one batch of a source failed for that batch's own sake: the database refused
    its rows (a constraint, a value it cannot hold) or storing them hit a bug. That source
    stops there, its earlier batches kept; the pass goes on with the next source. A
    database that cannot be written at all (locked, full, gone) still ends the pass."""

    def __init__(self, line: Optional[int], message: str):
        super().__init__(message)
        self.line = line
        self.message = message


@contextmanager
def _fenced(label: str, first: Optional[int], last: Optional[int]):
    """Turn a failure to store the batch of lines `first`..`last` of `label` (None: a
    document's records) into `Refused`; stops, read errors and an unusable database pass."""
    what = "its records" if first is None else (
        f"the batch of line {first}" if last is None or last <= first else f"the batch of lines {first} to {last}")
    try:
        yield
        return
    except (IntegrityError, DataError) as exc:
        why = f"the database refused {what} ({describe_db_error(exc)})"
    except (Stopped, OSError, SQLAlchemyError, MemoryError):
        raise
    except Exception:
        # A bug met on this file's data: the log has the traceback; the page gets no text
        # of the exception (it may quote the trace or a path).
        log.exception("storing a batch of %s failed", label)
        why = f"an internal error stopped {what} (the board's log has the details)"
    if first is None:
        raise Refused(None, f"not stored: {why}")
    raise Refused(first, f"not stored, with the rest of the file: {why}"
                         + ("; the lines before it are kept" if first > 1 else ""))


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
        #: reader processes started before the pass (`ingest_discovery(early=...)`), by source key
        self._early: Optional[EarlyReaders] = None
        self._checkpointer: Optional[Checkpointer] = None
        #: source key -> (size, mtime) of a file whose batch was `Refused`: the folder
        #: watcher passes one dict to each pass's Ingestor, so a refused file is not read
        #: and refused again every few seconds, only once it changes
        self.refused: Optional[dict[str, Any]] = None

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

    def ingest_discovery(self, found: Discovery, *, final: bool = True, closed: bool = False,
                         early: Optional[EarlyReaders] = None) -> IngestReport:
        """Ingest already-discovered sources (`early`: reader processes started for them
        before this writer existed, app.ingest.early; those not taken are stopped)."""
        report = IngestReport(missing=list(found.missing), empty=list(found.empty))
        for label, line, message in found.errors:
            report.errors.append(IngestIssue(label, line, message))
        self._early = early
        with _old_objects_frozen(), self._checkpointing():
            try:
                for src in found.sources:
                    self.check_stop()
                    report.files += 1
                    self.ingest_source(src, report, final=final, closed=closed)
            except Stopped as exc:
                exc.report = report  # what the committed batches did: an upload remembers it
                raise
            finally:
                self._early = None
                if early is not None:
                    early.close()
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
        if self.refused and src.key in self.refused and self._refusal_stamp(src) == self.refused[src.key]:
            return  # refused by an earlier pass, and unchanged since (`refused`)
        try:
            if src.produce is not None:
                self._ingest_document(src, report, closed=closed)
            else:
                self._ingest_lines(src, report, final=final, closed=closed)
            if src.finish is not None:
                extra = src.finish()
                if extra:
                    batch = self._new_batch(src)
                    for rec in extra:
                        batch.add(rec, None, 0)
                    with _fenced(src.label, None, None):
                        self._commit(src, report, batch.close(), None, closed=closed)
        except Refused as exc:
            self.applier.forget()
            report.errors.append(IngestIssue(src.label, exc.line, exc.message))
            self._remember_refused(src)
        except (OperationalError, SQLAlchemyError) as exc:
            self.applier.forget()
            raise BoardError(f"cannot write to the database: {describe_db_error(exc)}", status=503) from exc
        except OSError as exc:
            report.errors.append(IngestIssue(src.label, None, f"cannot read file: {exc.strerror or type(exc).__name__}"))
        else:
            if self.refused:
                self.refused.pop(src.key, None)

    def _remember_refused(self, src: Source) -> None:
        if self.refused is None:
            return
        stamp = self._refusal_stamp(src)
        if stamp is not None:
            self.refused[src.key] = stamp

    @staticmethod
    def _refusal_stamp(src: Source) -> Any:
        """What must change before a refused source is read again: a file's size and mtime; a
        document's digest, which covers the files it is read with (run.json, experiment.json)."""
        if src.open is not None:
            return None  # an archive's entry: its archive is read whole again anyway
        try:
            if src.produce is not None:
                return _document_digest(src)
            st = src.stamp or os.stat(src.path)
        except OSError:
            return None
        return (st.st_size, st.st_mtime)

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

    def _new_batch(self, src: Source) -> ReadBatch:
        return ReadBatch(src.label, encode=self.applier.encode())

    @contextmanager
    def _transaction(self):
        """One write transaction, in the writer's turn; anything that ends it early (a
        database error, a stop, a reader that failed) forgets the cached run keys: the runs
        they name may have been rolled back with it. During a pass over a source, SQLite
        checkpoints in the background (app.db.Checkpointer)."""
        self.check_stop()
        checkpointer = self._checkpointer
        try:
            with self.gate():
                if checkpointer is None:
                    with self.engine.begin() as conn:
                        yield conn
                    return
                with self.engine.connect() as conn:
                    with checkpointer.writing(conn):
                        with conn.begin():
                            yield conn
                checkpointer.nudge()
        except BaseException:
            self.applier.forget()
            raise

    @contextmanager
    def _checkpointing(self):
        """Background checkpoints for the duration of an ingest (SQLite files only)."""
        if self._checkpointer is not None:  # an ingest inside an ingest: the outer one's
            yield
            return
        self._checkpointer = Checkpointer.for_engine(self.engine)
        try:
            yield
        finally:
            checkpointer, self._checkpointer = self._checkpointer, None
            if checkpointer is not None:
                checkpointer.close()

    def _commit(self, src: Source, report: IngestReport, batch: ReadBatch, source_values: Optional[dict[str, Any]],
                *, closed: bool, run_warnings: Optional[dict[str, list[str]]] = None, end_of_pass: bool = False) -> None:
        """Apply one batch and record the source's progress, atomically. `end_of_pass`: the
        last batch of a pass that read the whole source (a reload of a new version ends then)."""
        done = _Applied()
        with self._transaction() as conn:
            self._apply(conn, src, batch, run_warnings, closed=closed, done=done)
            self._settle(conn, src, done, source_values, end_of_pass=end_of_pass)
        self._count(report, done)

    def _count(self, report: IngestReport, done: "_Applied") -> None:
        """Count what a committed transaction did and what it said (a stopped one, rolled
        back, did nothing: its lines are read, and reported, again by the next pass)."""
        report.errors += done.errors
        report.warnings += done.warnings
        report.records += done.records
        self.records_done += done.records
        report.created |= done.created
        report.run_ids |= done.touched.keys()
        report.unchanged |= done.unchanged

    def _apply(self, conn: Any, src: Source, batch: ReadBatch,
               run_warnings: Optional[dict[str, list[str]]], *, closed: bool, done: "_Applied") -> None:
        """Apply one batch inside an open transaction (the overwrite rule first); what it
        touched is recomputed when the transaction settles (`_settle`)."""
        screened: list[tuple[str, int, str, str]] = []
        replacing: frozenset[str] = frozenset()
        # Records read, whether applied or screened out as equal or refused (the report counts reading).
        done.records += batch.records
        origin, origin_label = src.origin or src.key, src.origin_label or src.label
        if batch.runs:
            if src.reload is not None:
                src.reload.meet(conn, batch, origin=origin)
            # A reload emptied its runs already: there is nothing of theirs to compare.
            rewrite = src.rewrite and src.reload is None
            said = overwrite.screen(conn, batch, origin=origin, label=origin_label, rewrite=rewrite, reason=src.changed)
            screened, replacing = said.warnings, said.replacing
            done.unchanged |= said.unchanged
            for rid, pk in said.known.items():
                self.applier.remember_run(rid, pk)
        if screened:
            by_run_screened: dict[str, list[str]] = {}
            for label, line, message, run_id in screened:
                done.warnings.append(IngestIssue(label, line or None, message))
                by_run_screened.setdefault(run_id, []).append(message)
            for rid, msgs in by_run_screened.items():
                self.applier.add_warnings(conn, rid, msgs)
        if not batch.runs:
            return
        touched, created, warnings = self.applier.apply(conn, batch, source_format=src.source_format,
                                                        closed=closed, replacing=replacing)
        overwrite.claim(conn, sorted(touched), origin=origin, label=origin_label)
        done.created |= created
        by_run: dict[str, list[str]] = {}
        for label, line, message, run_id in warnings:
            done.warnings.append(IngestIssue(label, line or None, message))
            by_run.setdefault(run_id, []).append(message)
        for rid, msgs in (run_warnings or {}).items():
            by_run.setdefault(rid, []).extend(msgs)
        for rid, msgs in by_run.items():
            self.applier.add_warnings(conn, rid, msgs)
        done.touched.update(dict.fromkeys(touched))
        for rid, doc in batch.docs.items():
            done.docs.setdefault(rid, []).append(doc)

    def _settle(self, conn: Any, src: Source, done: "_Applied",
                source_values: Optional[dict[str, Any]], *, end_of_pass: bool) -> None:
        """The end of a transaction: derived fields and search texts of the runs its batches
        touched, a reload's warnings at the end of its pass, the source's progress."""
        if done.touched:
            self.applier.recompute(conn, done.touched, abandon_after_s=self.settings.abandon_after_s,
                                   docs={rid: "\n".join(docs) for rid, docs in done.docs.items()},
                                   created=done.created)
        if end_of_pass and src.reload is not None:
            self._finish_reload(conn, src, done)
        if source_values is not None:
            self._save_source(conn, src, **source_values)

    def _finish_reload(self, conn: Any, src: Source, done: "_Applied") -> None:
        """The end of a pass over a new version of an upload: a warning for each run whose
        content it changed (app.ingest.overwrite.Reload)."""
        label = src.origin_label or src.label
        said = src.reload.finish(conn, label=label, origin=src.origin or src.key)
        src.reload = None
        for where, _line, message, rid in said:
            done.warnings.append(IngestIssue(where, None, message))
            self.applier.add_warnings(conn, rid, [message])

    def _ingest_document(self, src: Source, report: IngestReport, *, closed: bool) -> None:
        st = os.stat(src.path)
        prev = self._source_row(src.key)
        if prev is None:
            report.fresh += 1
        digest = _document_digest(src)
        if prev is not None and prev["content_hash"] == digest:
            return
        src.rewrite = prev is not None and bool(prev["content_hash"])
        src.changed = _document_change(prev["content_hash"], digest) if src.rewrite else None
        src.reload = _reload_for(src) if src.rewrite else None
        assert src.produce is not None  # a document source always has its producer
        src.notes.clear()
        records, errors = src.produce()
        for line, message in errors:
            report.errors.append(IngestIssue(src.label, line, message))
        # What the producer said of a run it kept: listed with the upload and kept on the run.
        run_warnings: dict[str, list[str]] = {}
        for run_id, message in src.notes:
            report.warnings.append(IngestIssue(src.label, None, message))
            run_warnings.setdefault(run_id, []).append(message)
        batch = self._new_batch(src)
        for rec in records:
            rec, err, warns = validate_record(rec)
            if err:
                report.errors.append(IngestIssue(src.label, None, err))
            else:
                for w in warns:
                    report.warnings.append(IngestIssue(src.label, None, w))
                batch.add(rec, None, 0)
        with _fenced(src.label, None, None):
            self._commit(src, report, batch.close(), {"size": st.st_size, "mtime": st.st_mtime, "content_hash": digest,
                                              "offset": st.st_size, "lines": 0}, closed=closed, end_of_pass=True,
                         run_warnings=run_warnings)
        if self.progress:
            self.progress(st.st_size)

    def _ingest_lines(self, src: Source, report: IngestReport, *, final: bool, closed: bool) -> None:
        early = self._early.pop(src.key) if self._early is not None else None
        try:
            self._ingest_lines_from(src, report, early, final=final, closed=closed)
        finally:
            if early is not None:
                early.process.close()  # not taken, or done with: the child is collected either way

    def _ingest_lines_from(self, src: Source, report: IngestReport, early: Optional[Early], *, final: bool,
                           closed: bool) -> None:
        prev = self._source_row(src.key) if early is not None else None
        if early is not None and not EarlyReaders.fits(early, dict(prev) if prev is not None else None,
                                                       encode=self.applier.encode(), final=final):
            # Its stat stands for the file only if its process is taken: another ingest may
            # have read the file since, and a stat from before that, saved over what that
            # one saved, would have the next pass read the whole file again.
            early.process.close()
            early = None
        if early is not None:
            st = src.stamp or early.stat
        else:
            st = src.stamp or os.stat(src.path)
            prev = self._source_row(src.key)
        if prev is None:
            report.fresh += 1
        if prev is not None and prev["size"] == st.st_size and prev["mtime"] == st.st_mtime and prev["content_hash"]:
            if self.progress:
                self.progress(st.st_size)
            return  # unchanged since the last pass
        if st.st_size == 0 and final and prev is None:
            report.warnings.append(IngestIssue(src.label, None, "empty file: no records"))
        records, errors = report.records, len(report.errors)
        self._read_lines(src, report, early, prev, st, final=final, closed=closed)
        if (final and prev is None and st.st_size and src.transform is None and report.records == records
                and len(report.errors) == errors):
            # Among other files that were read, one of blank lines only went unmentioned
            # while an empty one had its warning (seen in an audit).
            report.warnings.append(IngestIssue(src.label, None, "no records: the file holds only blank lines"))

    def _read_lines(self, src: Source, report: IngestReport, early: Optional[Early], prev: Any, st: os.stat_result,
                    *, final: bool, closed: bool) -> None:
        src.rewrite, src.reload, src.changed = False, None, None  # per pass (a watched source is read again and again)
        saved = dict(prev) if prev is not None else None
        encode = self.applier.encode()
        if reader.use_process(src, saved, st.st_size, self.settings):
            try:
                process = (EarlyReaders.adopt(early, saved, encode=encode, final=final, stop=self.stop)
                           if early is not None else None)
                if process is None:
                    process = reader.ReaderProcess(src, saved, settings=self.settings, final=final, encode=encode,
                                                   stop=self.stop)
            except OSError as exc:  # no fork (out of memory or processes): read it here
                log.warning("cannot start a reader process for %s (%s); reading it here", src.label, exc)
            else:
                try:
                    self._commit_chunks(src, report, process, st, final=final, closed=closed)
                    return
                except reader.ReaderFailed as exc:
                    # A bug or a killed child: what it read is committed with its offsets; the
                    # rest is read here, from the saved offset (a reload goes on where it was).
                    log.warning("reading %s in a process of its own failed; reading it here: %s", src.label, exc)
                    reload = src.reload
                    prev = self._source_row(src.key)
                    saved = dict(prev) if prev is not None else None
                    if reload is not None:
                        chunks = reader.read_chunks(src, None, settings=self.settings, final=final, encode=encode,
                                                    stop=self.stop)
                        self._commit_chunks(src, report, chunks, st, final=final, closed=closed, reload=reload)
                        return
        chunks = reader.read_chunks(src, saved, settings=self.settings, final=final, encode=encode, stop=self.stop)
        self._commit_chunks(src, report, chunks, st, final=final, closed=closed)

    def _commit_chunks(self, src: Source, report: IngestReport, chunks: Iterable[reader.Chunk], st: Any, *,
                       final: bool, closed: bool, reload: Optional[overwrite.Reload] = None) -> None:
        """Commit a pass's chunks in order with the source's offset (`reload`: go on with a
        reload another reader began).

        A transaction takes one chunk, and up to GROUP_CHUNKS (within GROUP_BYTES) when the
        reader process has them ready, applied as one batch: a writer that falls behind its reader commits, and
        screens, claims and recomputes its runs, once for several chunks (per chunk that
        was 6 ms of Python and a commit; a third of the writer's time at one per 2,000
        lines), while one that keeps up commits each chunk as it comes."""
        gz = src.kind == "gz"
        reported: Optional[int] = None
        ready = getattr(chunks, "ready", None)
        iterator = iter(chunks)
        try:
            chunk = next(iterator, None)
            while chunk is not None:
                group = [chunk]
                while (not chunk.last and ready is not None and len(group) < GROUP_CHUNKS
                       and chunk.offset - group[0].start < GROUP_BYTES and ready()):
                    chunk = next(iterator)
                    group.append(chunk)
                if reported is None:
                    # from where the pass began (its first chunk's bytes count too)
                    reported = group[0].start
                    if reload is not None:
                        src.rewrite, src.reload = True, reload
                    elif group[0].rewrite:
                        src.rewrite = True  # read before, and its bytes changed: a new version
                        src.reload = _reload_for(src)
                done = _Applied()
                run_warnings: dict[str, list[str]] = {}
                for c in group:
                    for line, message, is_error in c.issues:
                        (done.errors if is_error else done.warnings).append(IngestIssue(src.label, line, message))
                    for rid, msgs in c.run_warnings.items():
                        run_warnings.setdefault(rid, []).extend(msgs)
                batch = group[0].batch if len(group) == 1 else ReadBatch.merged([c.batch for c in group])
                with _fenced(src.label, group[0].first_line, chunk.line), self._transaction() as conn:
                    self._apply(conn, src, batch, run_warnings, closed=closed, done=done)
                    # mtime is saved only after a complete pass: it is what lets the next pass
                    # skip an unchanged file without reading it. A reload saves its offset only
                    # at its end: stopped half way, the next pass is a reload again, never a
                    # file that merely grew.
                    values = {"size": st.st_size, "mtime": st.st_mtime if chunk.last else None,
                              "content_hash": chunk.digest, "offset": chunk.offset, "lines": chunk.line}
                    self._settle(conn, src, done, values if chunk.last or src.reload is None else None,
                                 end_of_pass=chunk.last)
                self._count(report, done)
                if self.progress and not gz:
                    self.progress(chunk.offset - reported)
                reported = chunk.offset
                chunk = None if chunk.last else next(iterator, None)
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()
        if self.progress and gz:
            self.progress(st.st_size)
