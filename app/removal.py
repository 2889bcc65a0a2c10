"""Remove and replace: uploads remembered, runs that take another's place, and deletes.

- Every upload through the board is remembered (`uploads`, `upload_runs`): its files,
  the source keys they were read as, the runs it created and the runs it added to.
- A run an upload creates takes another's place in comparisons when it has the same
  experiment, variant, task and replicate: compare keeps the latest of them (app.compare).
  The upload result names both (`replacements`).
- Deleting a run removes its row and every row that hangs off it (each table with a
  `run_pk`), and nothing else. Deleting an upload deletes the runs it created; runs it
  only added records to stay (they existed before it) and are listed as kept. In both
  cases the source records of the uploads that created the deleted runs are forgotten,
  so uploading the same file again reads it again. Files read from disk (`qita ingest`,
  a watched folder) keep theirs: a deleted run does not come back from a file that has
  not changed.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any, Iterable, Optional, Sequence

from sqlalchemy import delete, func, or_, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import SQLModel

from . import compare
from .models import RUNS, SOURCES, UPLOAD_RUNS, UPLOADS
from .search import escape_like

log = logging.getLogger("qita.removal")

#: Runs named per deleted upload or per replacement warning in one answer, at most.
SHOWN = 1000
_CHUNK = 500


def child_tables() -> list[Any]:
    """Every table holding rows of a run (a `run_pk` column), children first."""
    return [t for t in reversed(SQLModel.metadata.sorted_tables) if "run_pk" in t.c and t is not RUNS]


def _chunks(values: list[Any], size: int = _CHUNK) -> Iterable[list[Any]]:
    for i in range(0, len(values), size):
        yield values[i:i + size]


# -- uploads remembered ----------------------------------------------------------------------

#: Rejected lines (and warnings) an upload's record keeps: the result lists at most 1,000
#: bad lines a file; what is past this many is counted.
KEPT_ISSUES = 2000


def upload_report(errors: Sequence[Any], warnings: Sequence[Any]) -> dict[str, Any]:
    """The rejected lines and warnings an upload's record keeps ({file, line, message} each)."""
    return {"errors": [e.to_json() for e in errors[:KEPT_ISSUES]], "more_errors": max(0, len(errors) - KEPT_ISSUES),
            "warnings": [w.to_json() for w in warnings[:KEPT_ISSUES]],
            "more_warnings": max(0, len(warnings) - KEPT_ISSUES)}


def record_upload(conn: Connection, *, files: list[dict[str, Any]], labels: list[str], records: int,
                  created: Iterable[str], touched: Iterable[str],
                  report: Optional[dict[str, Any]] = None) -> Optional[int]:
    """Remember one upload, what it reported and the runs it created or added to; None when
    it touched no run."""
    touched = sorted(set(touched))
    if not touched:
        return None
    created = set(created)
    upload_id = conn.execute(UPLOADS.insert().values(
        created_at=datetime.now(timezone.utc), files=files, records=records, report=report,
        source_keys=[f"upload:{label}" for label in labels])).inserted_primary_key[0]
    for chunk in _chunks(touched):
        rows = conn.execute(select(RUNS.c.id, RUNS.c.run_id).where(RUNS.c.run_id.in_(chunk))).all()
        if rows:
            conn.execute(UPLOAD_RUNS.insert(), [{"upload_id": upload_id, "run_pk": pk, "created": rid in created}
                                                for pk, rid in rows])
    return upload_id


def upload_of(conn: Connection, *, run_pk: int) -> Optional[dict[str, Any]]:
    """The upload that created a run (its id and when), or None when it came another way."""
    row = conn.execute(select(UPLOADS.c.id, UPLOADS.c.created_at, UPLOADS.c.files)
                       .select_from(UPLOAD_RUNS.join(UPLOADS, UPLOADS.c.id == UPLOAD_RUNS.c.upload_id))
                       .where(UPLOAD_RUNS.c.run_pk == run_pk, UPLOAD_RUNS.c.created.is_(True))
                       .order_by(UPLOADS.c.id.desc()).limit(1)).mappings().first()
    return dict(row) if row else None


def list_uploads(conn: Connection, *, limit: int = 100) -> list[dict[str, Any]]:
    """The latest uploads with how many runs each created and added to."""
    created = func.sum(UPLOAD_RUNS.c.created.cast(RUNS.c.steps.type))
    counts = select(UPLOAD_RUNS.c.upload_id, func.count().label("n"), created.label("c")) \
        .group_by(UPLOAD_RUNS.c.upload_id).subquery()
    rows = conn.execute(select(UPLOADS.c.id, UPLOADS.c.created_at, UPLOADS.c.files, UPLOADS.c.records, counts.c.n, counts.c.c)
                        .select_from(UPLOADS.outerjoin(counts, counts.c.upload_id == UPLOADS.c.id))
                        .order_by(UPLOADS.c.id.desc()).limit(limit)).all()
    return [{"id": i, "created_at": at, "files": files or [], "records": rec, "runs": int(n or 0),
             "runs_created": int(c or 0)} for i, at, files, rec, n, c in rows]


# -- replacement warning ---------------------------------------------------------------------

_PAIR_COLUMNS = [RUNS.c.id, RUNS.c.run_id, RUNS.c.task_id, RUNS.c.replicate, RUNS.c.experiment, RUNS.c.variant,
                 RUNS.c.started_at]


def replacements(conn: Connection, *, run_ids: Iterable[str]) -> list[dict[str, Any]]:
    """For each of `run_ids` that shares experiment, variant, task and replicate with another
    run: both runs, and which one comparisons keep (the latest, as app.compare pairs them)."""
    out: list[dict[str, Any]] = []
    for chunk in _chunks(sorted(set(run_ids))):
        new = [dict(r) for r in conn.execute(select(*_PAIR_COLUMNS).where(
            RUNS.c.run_id.in_(chunk), RUNS.c.experiment.is_not(None), RUNS.c.variant.is_not(None))).mappings()]
        if not new:
            continue
        tasks = sorted({r["task_id"] or r["run_id"] for r in new})
        experiments = sorted({r["experiment"] for r in new})
        others = [dict(r) for r in conn.execute(select(*_PAIR_COLUMNS).where(
            RUNS.c.experiment.in_(experiments),
            or_(RUNS.c.task_id.in_(tasks), RUNS.c.run_id.in_(tasks)))).mappings()]
        groups: dict[tuple, list[dict[str, Any]]] = {}
        for r in others:
            groups.setdefault((r["experiment"], r["variant"], *compare.pair_key(r)), []).append(r)
        for r in sorted(new, key=lambda r: r["run_id"]):
            key = (r["experiment"], r["variant"], *compare.pair_key(r))
            group = groups.get(key, [])
            if len(group) < 2:
                continue
            kept_rows, _dropped = compare.index_runs(group)
            kept = kept_rows[compare.pair_key(r)]["run_id"]
            out.append({"run_id": r["run_id"], "others": sorted(g["run_id"] for g in group if g["run_id"] != r["run_id"]),
                        "kept": kept, "experiment": r["experiment"], "variant": r["variant"],
                        "task_id": key[2], "replicate": key[3]})
            if len(out) >= SHOWN:
                return out
    return out


# -- what a delete removes ---------------------------------------------------------------------

def _run_rows(conn: Connection, pks: list[int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for chunk in _chunks(pks):
        rows += [dict(r) for r in conn.execute(select(RUNS.c.id, RUNS.c.run_id, RUNS.c.experiment, RUNS.c.variant,
                                                      RUNS.c.task_id, RUNS.c.replicate, RUNS.c.steps)
                                               .where(RUNS.c.id.in_(chunk))).mappings()]
    return sorted(rows, key=lambda r: r["run_id"])


def _counts(conn: Connection, pks: list[int]) -> dict[str, int]:
    counts: dict[str, int] = {"runs": len(pks)}
    for table in child_tables():
        n = 0
        for chunk in _chunks(pks):
            n += conn.execute(select(func.count()).select_from(table).where(table.c.run_pk.in_(chunk))).scalar_one()
        counts[str(table.name)] = int(n)
    return counts


def _upload_sources_of(conn: Connection, pks: list[int]) -> list[str]:
    """The source keys of the uploads that created these runs."""
    keys: set[str] = set()
    for chunk in _chunks(pks):
        for value in conn.execute(select(UPLOADS.c.source_keys).select_from(
                UPLOAD_RUNS.join(UPLOADS, UPLOADS.c.id == UPLOAD_RUNS.c.upload_id))
                .where(UPLOAD_RUNS.c.run_pk.in_(chunk), UPLOAD_RUNS.c.created.is_(True))).scalars():
            keys.update(k for k in value or [] if isinstance(k, str))
    return sorted(keys)


def _describe(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("run_id", "experiment", "variant", "task_id", "replicate", "steps")}


def plan_runs(conn: Connection, *, run_ids: list[str]) -> dict[str, Any]:
    """What deleting `run_ids` removes: the runs, the rows of each table, and the ids not found."""
    found: dict[str, int] = {}
    # No run id holds NUL, and PostgreSQL refuses one as a parameter: such ids are not found.
    for chunk in _chunks(sorted({r for r in run_ids if "\x00" not in r})):
        found.update({rid: pk for pk, rid in conn.execute(select(RUNS.c.id, RUNS.c.run_id).where(RUNS.c.run_id.in_(chunk)))})
    pks = sorted(found.values())
    return {"runs": [_describe(r) for r in _run_rows(conn, pks)], "rows": _counts(conn, pks),
            "missing": sorted(set(run_ids) - set(found)), "sources_forgotten": _upload_sources_of(conn, pks),
            "_pks": pks}


def get_upload(conn: Connection, *, upload_id: int) -> Optional[dict[str, Any]]:
    """One upload: its files and the runs it created (that a delete removes) and added to (kept)."""
    row = conn.execute(select(UPLOADS).where(UPLOADS.c.id == upload_id)).mappings().first()
    if row is None:
        return None
    links = conn.execute(select(UPLOAD_RUNS.c.run_pk, UPLOAD_RUNS.c.created)
                         .where(UPLOAD_RUNS.c.upload_id == upload_id)).all()
    created = [pk for pk, c in links if c]
    kept = [pk for pk, c in links if not c]
    report = row["report"] if isinstance(row["report"], dict) else {}
    return {"id": row["id"], "created_at": row["created_at"], "files": row["files"] or [], "records": row["records"],
            "source_keys": row["source_keys"] or [],
            # (none kept by uploads recorded before migration 0019: `reported` is false)
            "reported": bool(report), "errors": report.get("errors") or [], "more_errors": report.get("more_errors") or 0,
            "warnings": report.get("warnings") or [], "more_warnings": report.get("more_warnings") or 0,
            "runs_created": [_describe(r) for r in _run_rows(conn, created)][:SHOWN],
            "runs_updated": [_describe(r) for r in _run_rows(conn, kept)][:SHOWN],
            "created_count": len(created), "updated_count": len(kept), "_created_pks": sorted(created)}


def upload_stamp(upload: dict[str, Any]) -> str:
    """What tells one upload from a later one given its number: SQLite gives a deleted last
    upload's number to the next one, so a delete page left open would otherwise delete an
    upload nobody confirmed."""
    created = upload.get("created_at")
    return created.isoformat() if isinstance(created, datetime) else str(created)


def plan_upload(conn: Connection, *, upload_id: int) -> Optional[dict[str, Any]]:
    """What deleting an upload removes: the runs it created with all their rows; the runs it
    only added to are kept and listed."""
    upload = get_upload(conn, upload_id=upload_id)
    if upload is None:
        return None
    pks = upload.pop("_created_pks")
    return {"upload": upload, "runs": upload["runs_created"], "kept": upload["runs_updated"],
            "rows": _counts(conn, pks), "missing": [],
            "sources_forgotten": sorted(set(upload["source_keys"]) | set(_upload_sources_of(conn, pks))), "_pks": pks}


# -- the delete itself ---------------------------------------------------------------------------

def _forget_sources(conn: Connection, keys: list[str]) -> int:
    gone = 0
    for key in keys:
        prefix = escape_like(key) + "/%"
        gone += conn.execute(delete(SOURCES).where(or_(SOURCES.c.path == key,
                                                       SOURCES.c.path.like(prefix, escape="\\")))).rowcount or 0
    return gone


def delete_runs(conn: Connection, pks: list[int]) -> dict[str, int]:
    """Delete these runs and every row that hangs off them, in `conn`'s transaction; rows
    removed by table."""
    removed = {"runs": 0}
    if conn.dialect.name == "postgresql":
        # Before their rows: an ingest writing to one of these runs holds it FOR KEY SHARE
        # until it commits (app.ingest.store.Applier._hold_runs), and steps, critic outputs
        # and events have no foreign key to stop their rows outliving the run (migration 0016).
        for chunk in _chunks(pks):
            conn.execute(select(RUNS.c.id).where(RUNS.c.id.in_(chunk)).with_for_update()).all()
    for table in child_tables():
        n = 0
        for chunk in _chunks(pks):
            n += conn.execute(delete(table).where(table.c.run_pk.in_(chunk))).rowcount or 0
        removed[str(table.name)] = n
    for chunk in _chunks(pks):
        removed["runs"] += conn.execute(delete(RUNS).where(RUNS.c.id.in_(chunk))).rowcount or 0
    return removed


def execute(conn: Connection, plan: dict[str, Any], *, upload_id: Optional[int] = None) -> dict[str, Any]:
    """Carry out a plan in `conn`'s transaction: the runs' rows (children first), the runs,
    the forgotten sources and, for an upload, its record. Returns what was removed."""
    removed = delete_runs(conn, plan["_pks"])
    removed["ingest_sources"] = _forget_sources(conn, plan["sources_forgotten"])
    if upload_id is not None:
        removed["uploads"] = conn.execute(delete(UPLOADS).where(UPLOADS.c.id == upload_id)).rowcount or 0
    # Uploads left with no run at all have nothing more to remove.
    empty = select(UPLOADS.c.id).where(~select(UPLOAD_RUNS.c.run_pk).where(
        UPLOAD_RUNS.c.upload_id == UPLOADS.c.id).exists())
    conn.execute(delete(UPLOADS).where(UPLOADS.c.id.in_(empty)))
    return {k: v for k, v in plan.items() if not k.startswith("_")} | {"removed": removed, "dry_run": False}


def public(plan: dict[str, Any]) -> dict[str, Any]:
    """A plan as pages and JSON show it (a dry run)."""
    return {k: v for k, v in plan.items() if not k.startswith("_")} | {"dry_run": True}


def after_upload(engine: Any, *, report: Any, files: list[tuple[str, str, int]],
                 rejected: Sequence[Any] = ()) -> dict[str, Any]:
    """What the upload result adds for remove and replace: the upload's number (to remove
    it later) and the runs it created that take another's place in comparisons."""
    try:
        with engine.begin() as conn:
            upload_id = record_upload(conn, files=[{"name": label, "bytes": size} for label, _p, size in files],
                                      labels=[label for label, _p, _s in files], records=report.records,
                                      created=report.created, touched=report.run_ids,
                                      report=upload_report([*rejected, *report.errors], report.warnings))
            replaced = replacements(conn, run_ids=report.created)
    except SQLAlchemyError:
        # The runs are in: an upload that cannot be remembered is not a failed upload.
        log.exception("could not remember an upload")
        return {"upload_id": None, "upload_url": None, "replacements": []}
    return {"upload_id": upload_id, "upload_url": f"/uploads/{upload_id}" if upload_id else None,
            "replacements": replaced}
