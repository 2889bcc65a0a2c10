"""A run's records in the v1 order, for the JSONL export (read in batches, never whole)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlmodel import Session

from ..jsontext import stored_value
from ..models import CRITERIA, EARLY, EVENTS, RUNS, STEPS


def export_records(session: Session, *, run_pk: int, batch: int = 500):
    """The run's records in v1 order for export: run_start, each step followed by its events,
    run-level events, criteria results, early_stop, run_end."""
    run = session.execute(select(RUNS.c.run_id, RUNS.c.start_record, RUNS.c.end_record)
                          .where(RUNS.c.id == run_pk)).mappings().first()
    if run is None:
        return
    if run["start_record"]:
        yield run["start_record"]
    last = -1
    while True:
        rows = session.execute(select(STEPS.c.step, STEPS.c.record).where(STEPS.c.run_pk == run_pk, STEPS.c.step > last)
                               .order_by(STEPS.c.step).limit(batch)).all()
        if not rows:
            break
        idxs = [r[0] for r in rows]
        events: dict[int, list[Any]] = {}
        for st, rec in session.execute(select(EVENTS.c.step, EVENTS.c.record)
                                       .where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.in_(idxs))
                                       .order_by(EVENTS.c.step, EVENTS.c.ts, EVENTS.c.id)):
            events.setdefault(st, []).append(stored_value(rec))
        for st, rec in rows:
            yield stored_value(rec)
            yield from events.get(st, [])
        last = idxs[-1]
    for rec in session.execute(select(EVENTS.c.record).where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.is_(None))
                               .order_by(EVENTS.c.ts, EVENTS.c.id)).scalars():
        yield stored_value(rec)
    for rec in session.execute(select(CRITERIA.c.result).where(CRITERIA.c.run_pk == run_pk, CRITERIA.c.result.is_not(None))
                               .order_by(CRITERIA.c.position, CRITERIA.c.id)).scalars():
        if rec:
            yield rec
    early = session.execute(select(EARLY.c.record).where(EARLY.c.run_pk == run_pk)).scalar_one_or_none()
    if early:
        yield early
    if run["end_record"]:
        yield run["end_record"]


