"""One run: its row, criteria, early-stop record, verdict lane, steps with their critic
outputs and events, run-level events, and single stored values addressed by JSON pointer."""

from __future__ import annotations

from typing import Any, Optional

from sqlalchemy import case, exists, func, select
from sqlmodel import Session

from qita.engine.critic import ACTION_RANK

from ..failures import classify_criteria
from ..jsontext import stored_value
from ..models import CRITERIA, CRITICS, EARLY, EVENTS, RUNS, STEPS
from ..present import critic_patches, live_verdict_items
from .pointers import parse_pointer, resolve_pointer


def get_run_row(session: Session, *, run_id: str) -> Optional[dict[str, Any]]:
    """The run's row, or None (also for an id holding NUL, which no run has and PostgreSQL
    refuses as a parameter)."""
    if "\x00" in run_id:
        return None
    row = session.execute(select(RUNS).where(RUNS.c.run_id == run_id)).mappings().first()
    return dict(row) if row else None


def get_criteria(session: Session, *, run_pk: int, early_stop_enabled: bool, early_stopped: bool,
                 armed_ids: Optional[list[str]] = None) -> list[dict[str, Any]]:
    """The run's criteria, with armed / advisory / informational flags and effective pass."""
    rows = [dict(r) for r in session.execute(
        select(CRITERIA).where(CRITERIA.c.run_pk == run_pk).order_by(CRITERIA.c.position, CRITERIA.c.id)).mappings()]
    return classify_criteria(rows, early_stop_enabled=early_stop_enabled, early_stopped=early_stopped,
                             armed_ids=armed_ids)


def get_early_stop(session: Session, *, run_pk: int) -> Optional[dict[str, Any]]:
    row = session.execute(select(EARLY).where(EARLY.c.run_pk == run_pk)).mappings().first()
    if not row:
        return None
    data = dict(row)
    data.pop("id", None)
    data.pop("run_pk", None)
    return data


def get_lane(session: Session, *, run_pk: int, max_marks: int = 400) -> dict[str, Any]:
    """The verdict lane: one mark per step (or per bucket of steps in a long run).

    Each mark carries the strongest critic action in it (stop > retry > continue), the
    mean critic score, and whether it holds a retried step.
    """
    n = session.execute(select(func.count()).select_from(STEPS).where(STEPS.c.run_pk == run_pk)).scalar_one()
    if n == 0:
        return {"steps": 0, "bucket": 1, "marks": []}
    bucket = max(1, -(-n // max_marks))
    rank = case(*((STEPS.c.critic_action == action, r) for action, r in ACTION_RANK.items()), else_=-1)
    if bucket == 1:
        rows = session.execute(select(STEPS.c.step, STEPS.c.step, rank, STEPS.c.critic_score, STEPS.c.retry.cast(RUNS.c.steps.type))
                               .where(STEPS.c.run_pk == run_pk).order_by(STEPS.c.step)).all()
    else:
        # Buckets by position so a long run keeps a bounded page size. `pos / bucket` would
        # be true division in SQLAlchemy 2 (one bucket per step) and FLOOR is missing from
        # some SQLite builds: the bucket's first position, pos - pos % bucket, is exact.
        pos = func.row_number().over(order_by=STEPS.c.step) - 1
        inner = select(STEPS.c.step.label("step"), (pos - pos % bucket).label("b"), rank.label("rank"),
                       STEPS.c.critic_score.label("score"), STEPS.c.retry.cast(RUNS.c.steps.type).label("retry")) \
            .where(STEPS.c.run_pk == run_pk).subquery()
        rows = session.execute(select(func.min(inner.c.step), func.max(inner.c.step), func.max(inner.c.rank),
                                      func.avg(inner.c.score), func.max(inner.c.retry))
                               .group_by(inner.c.b).order_by(func.min(inner.c.step))).all()
    names = {r: action for action, r in ACTION_RANK.items()}
    marks = [{"step": a, "last": b, "action": names.get(r, None), "score": s, "retry": bool(rt)}
             for a, b, r, s, rt in rows]
    return {"steps": n, "bucket": bucket, "marks": marks}


#: What pages read of a step or event: the preview of a large record (app.previews), else the
#: record. COALESCE stops at the preview, so the large record itself is never read.
_STEP_VIEW = (*[c for c in STEPS.c if c.name not in ("record", "preview")],
              func.coalesce(STEPS.c.preview, STEPS.c.record).label("record"))
_EVENT_RECORD = func.coalesce(EVENTS.c.preview, EVENTS.c.record).label("record")


def get_steps(session: Session, *, run_pk: int, offset: int = 0, limit: int = 25,
              steps: Optional[list[int]] = None) -> tuple[list[dict[str, Any]], int]:
    """A block of steps with their critic outputs and events, and the run's step count.

    `steps` picks the block by step number instead of by offset (a filtered walk, app.walk).
    """
    total = session.execute(select(func.count()).select_from(STEPS).where(STEPS.c.run_pk == run_pk)).scalar_one()
    stmt = select(*_STEP_VIEW).where(STEPS.c.run_pk == run_pk).order_by(STEPS.c.step)
    stmt = stmt.where(STEPS.c.step.in_(steps)) if steps is not None else stmt.offset(max(0, offset))
    rows = [dict(r) for r in session.execute(stmt.limit(max(1, min(limit, 200)))).mappings()]
    if not rows:
        return [], total
    idxs = [r["step"] for r in rows]
    critics: dict[int, list[dict[str, Any]]] = {}
    for c in session.execute(select(CRITICS).where(CRITICS.c.run_pk == run_pk, CRITICS.c.step.in_(idxs))
                             .order_by(CRITICS.c.step, CRITICS.c.idx)).mappings():
        critics.setdefault(c["step"], []).append({
            # QitOS critic outputs carry no name: number them in the order they ran.
            "critic": c["critic"], "name": c["critic"] if c["critic"] else f"critic #{c['idx'] + 1}",
            "action": c["action"], "effective_action": c["effective_action"],
            "reason": c["reason"], "score": c["score"], "details": c["details"]})
    events: dict[int, list[dict[str, Any]]] = {}
    for e in session.execute(select(EVENTS.c.step, EVENTS.c.phase, EVENTS.c.ok, EVENTS.c.ts, _EVENT_RECORD)
                             .where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.in_(idxs))
                             .order_by(EVENTS.c.step, EVENTS.c.ts, EVENTS.c.id)).mappings():
        events.setdefault(e["step"], []).append(dict(e))
    out = []
    for r in rows:
        record = stored_value(r["record"])
        # Patches are not columns: they come from the stored record, output by output.
        patches = critic_patches(record)
        outputs = [dict(c, patches=patches[i] if i < len(patches) else None)
                   for i, c in enumerate(critics.get(r["step"], []))]
        step_events = [{"phase": e["phase"], "ok": e["ok"], "ts": e["ts"], "record": stored_value(e["record"])}
                       for e in events.get(r["step"], [])]
        out.append({
            "step": r["step"],
            "ts": r["ts"],
            "duration_s": r["duration_s"],
            "tokens": {"input": r["tokens_input"], "output": r["tokens_output"], "total": r["tokens_total"]},
            "cost_usd": r["cost_usd"],
            "retry": r["retry"],
            "critic_action": r["critic_action"],
            "critic_score": r["critic_score"],
            "critic_outputs": outputs,
            "live_verdicts": live_verdict_items(record),
            "events": step_events,
            "extras": step_extras(step_events),
            "record": record,
        })
    return out, total


def get_run_events(session: Session, *, run_pk: int, without_step: bool = True, limit: int = 500) -> list[dict[str, Any]]:
    """Events not tied to a step (run-level phases and unknown record types)."""
    stmt = select(EVENTS.c.step, EVENTS.c.phase, EVENTS.c.ok, EVENTS.c.ts, _EVENT_RECORD).where(EVENTS.c.run_pk == run_pk)
    if without_step:
        stmt = stmt.where(EVENTS.c.step.is_(None))
    rows = session.execute(stmt.order_by(EVENTS.c.ts, EVENTS.c.id).limit(limit)).mappings()
    return [{"step": r["step"], "phase": r["phase"], "ok": r["ok"], "ts": r["ts"], "record": stored_value(r["record"])} for r in rows]


def count_run_events(session: Session, *, run_pk: int) -> int:
    """How many run-level events and unknown records the run has (the page shows a bounded number)."""
    return session.execute(select(func.count()).select_from(EVENTS)
                           .where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.is_(None))).scalar_one()


def get_stepless_events(session: Session, *, run_pk: int, limit: int = 500) -> list[dict[str, Any]]:
    """Events naming a step that has no step record (a QitOS folder with events only),
    grouped by step number; each event keeps its index among its step's events."""
    no_step = ~exists().where(STEPS.c.run_pk == run_pk, STEPS.c.step == EVENTS.c.step)
    rows = session.execute(select(EVENTS.c.step, EVENTS.c.phase, EVENTS.c.ok, EVENTS.c.ts, _EVENT_RECORD)
                           .where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.is_not(None), no_step)
                           .order_by(EVENTS.c.step, EVENTS.c.ts, EVENTS.c.id).limit(limit)).mappings()
    groups: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["step"], []).append(
            {"phase": r["phase"], "ok": r["ok"], "ts": r["ts"], "record": stored_value(r["record"])})
    return [{"step": k, "events": v} for k, v in groups.items()]


#: Run-level JSON columns a page may show cut and load whole through get_run_field.
RUN_VALUE_COLUMNS = ("critics", "stop_criteria", "meta", "failure_report", "start_record", "end_record",
                     # texts the run page cuts past a few thousand characters (templates/_macros.html clipped)
                     "objective", "final_result", "stop_detail")


def get_run_field(session: Session, *, run_pk: int, pointer: str) -> Any:
    """One value of the run outside its steps, addressed by a JSON pointer whose first
    token says where: `/run/<column>/...` (RUN_VALUE_COLUMNS), `/criteria/<id>/details|result|description/...`
    or `/run_events/<n>/...` (the n-th run-level event or unknown record, in page order).

    Raises KeyError when it is not there, ValueError when the path is malformed.
    """
    tokens = parse_pointer(pointer)
    if len(tokens) < 2:
        raise KeyError("path names no value")
    root, key, rest = tokens[0], tokens[1], tokens[2:]
    if root == "run" and key in RUN_VALUE_COLUMNS:
        value = session.execute(select(RUNS.c[key]).where(RUNS.c.id == run_pk)).scalar_one_or_none()
    elif root == "criteria":
        row = session.execute(select(CRITERIA.c.details, CRITERIA.c.result, CRITERIA.c.description)
                              .where(CRITERIA.c.run_pk == run_pk, CRITERIA.c.criterion_id == key)).mappings().first()
        if row is None:
            raise KeyError(key)
        value = dict(row)
    elif root == "run_events" and key.isdigit():
        text = session.execute(select(EVENTS.c.record).where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.is_(None))
                               .order_by(EVENTS.c.ts, EVENTS.c.id).offset(int(key)).limit(1)).scalar_one_or_none()
        if text is None:
            raise KeyError(key)
        value = stored_value(text)
    else:
        raise KeyError(root)
    return resolve_pointer(value, rest)


def record_is_large(session: Session, *, run_pk: int, step: int, event: Optional[int] = None) -> bool:
    """Whether a step's (or its `event`-th event's) stored record is a large one (it has a
    preview), found without reading the record: length() would load all of it."""
    if event is None:
        stmt = select(STEPS.c.preview.is_not(None)).where(STEPS.c.run_pk == run_pk, STEPS.c.step == step)
    else:
        stmt = (select(EVENTS.c.preview.is_not(None)).where(EVENTS.c.run_pk == run_pk, EVENTS.c.step == step)
                .order_by(EVENTS.c.ts, EVENTS.c.id).offset(max(0, event)).limit(1))
    return bool(session.execute(stmt).scalar_one_or_none())


def get_step_field(session: Session, *, run_pk: int, step: int, pointer: str, event: Optional[int] = None) -> Any:
    """One value inside a stored step record (or inside the step's `event`-th event record).

    Raises KeyError when the step, event or path does not exist, ValueError when the
    path is malformed.
    """
    tokens = parse_pointer(pointer)
    if event is None:
        text = session.execute(select(STEPS.c.record).where(STEPS.c.run_pk == run_pk, STEPS.c.step == step)).scalar_one_or_none()
    else:
        text = session.execute(select(EVENTS.c.record).where(EVENTS.c.run_pk == run_pk, EVENTS.c.step == step)
                               .order_by(EVENTS.c.ts, EVENTS.c.id).offset(max(0, event)).limit(1)).scalar_one_or_none()
    if text is None:
        raise KeyError("no such step or event")
    return resolve_pointer(stored_value(text), tokens)


def step_extras(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a QitOS-style run keeps only in its events: the model's thought (DECIDE
    `raw_output`) and the memory it observed (OBSERVE `memory`), with where they live so a
    long value can be loaded on demand."""
    out = []
    for i, e in enumerate(events):
        payload = e["record"].get("payload") if isinstance(e.get("record"), dict) else None
        if not isinstance(payload, dict):
            continue
        phase = (e.get("phase") or "").upper()
        if phase == "DECIDE" and payload.get("raw_output") is not None:
            out.append({"label": "thought", "event": i, "path": "/payload/raw_output", "value": payload["raw_output"]})
        elif phase == "OBSERVE" and payload.get("memory") not in (None, {}, []):
            out.append({"label": "memory", "event": i, "path": "/payload/memory", "value": payload["memory"]})
    return out

def steps_after(session: Session, *, run_pk: int, after: int) -> int:
    """How many steps of the run have an index <= `after` (the offset of the next step)."""
    return session.execute(select(func.count()).select_from(STEPS)
                           .where(STEPS.c.run_pk == run_pk, STEPS.c.step <= after)).scalar_one()


def step_at(session: Session, *, run_pk: int, position: int) -> Optional[int]:
    """The step index at `position` in step order (0 is the first step), or None."""
    if position < 0:
        return None
    return session.execute(select(STEPS.c.step).where(STEPS.c.run_pk == run_pk).order_by(STEPS.c.step)
                           .offset(position).limit(1)).scalar_one_or_none()


def get_step_events(session: Session, *, run_pk: int, step: int) -> list[dict[str, Any]]:
    """One step's events in order (the same order the field loader's `event` index counts)."""
    rows = session.execute(select(EVENTS.c.phase, EVENTS.c.ok, EVENTS.c.ts, _EVENT_RECORD)
                           .where(EVENTS.c.run_pk == run_pk, EVENTS.c.step == step)
                           .order_by(EVENTS.c.ts, EVENTS.c.id)).mappings()
    return [{"phase": r["phase"], "ok": r["ok"], "ts": r["ts"], "record": stored_value(r["record"])} for r in rows]
