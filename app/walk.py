"""Walking a long run: which steps deserve a look, and the one-line summary of a step.

Three kinds of step are worth jumping to (the run page's filter and its `n` / `p` keys):

- `critic`: a critic said retry or stop (the step's strongest effective action);
- `decided`: a criterion's live verdict was decided there, or the run was cut there
  (`decided_at_step` of a criterion, `step` of the early-stop record);
- `errors`: something failed: an event of the step has `ok: false`, a tool invocation
  has an `error` or a failing `status`, or an action result has an `error`, `ok: false`
  or a non-zero exit code (app.step_failures, the one rule for "did this step fail").

The lists are read per run state and cached until the run changes (`app.queries.cache.run_cached`),
so a long run's page does not rescan it on every view.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

import orjson
from sqlalchemy import select
from sqlmodel import Session

from qita.engine.critic import ACTION_RANK

from .models import CRITERIA, EARLY, EVENTS, STEPS
from .queries import run_detail
from .queries.cache import run_cached
from .step_failures import MAY_FAIL, step_errors

KINDS = ("critic", "decided", "errors")
KIND_LABELS = {
    "critic": "a critic said retry or stop",
    "decided": "a criterion was decided",
    "errors": "with errors",
}


def clean_kinds(values: Optional[Iterable[str]]) -> list[str]:
    """The known kinds among `values`, in their fixed order (unknown ones are ignored)."""
    given = set(values or ())
    return [k for k in KINDS if k in given]


def event_failed(event: dict[str, Any]) -> bool:
    """An event that reports a failure (`ok: false`, as the format says)."""
    return event.get("ok") is False


def _loads(text: Optional[str]) -> Any:
    try:
        return orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return None


def _error_steps(session: Session, *, run_pk: int) -> list[int]:
    steps = set(session.execute(
        select(EVENTS.c.step).where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.is_not(None), EVENTS.c.ok.is_(False))
        .distinct()).scalars())
    existing = set()
    for step, text in session.execute(select(STEPS.c.step, STEPS.c.record).where(STEPS.c.run_pk == run_pk)):
        existing.add(step)
        if step not in steps and text and MAY_FAIL.search(text) and step_errors(_loads(text)):
            steps.add(step)
    return sorted(steps & existing)


def _flagged(session: Session, run_pk: int) -> dict[str, list[int]]:
    critic = list(session.execute(select(STEPS.c.step).where(STEPS.c.run_pk == run_pk,
                                                             STEPS.c.critic_action.in_(("retry", "stop")))
                                  .order_by(STEPS.c.step)).scalars())
    decided_at = set(session.execute(select(CRITERIA.c.decided_at_step).where(
        CRITERIA.c.run_pk == run_pk, CRITERIA.c.decided_at_step.is_not(None))).scalars())
    decided_at |= set(session.execute(select(EARLY.c.step).where(EARLY.c.run_pk == run_pk,
                                                                 EARLY.c.step.is_not(None))).scalars())
    decided = sorted(session.execute(select(STEPS.c.step).where(STEPS.c.run_pk == run_pk,
                                                                STEPS.c.step.in_(decided_at))).scalars()) \
        if decided_at else []
    return {"critic": critic, "decided": decided, "errors": _error_steps(session, run_pk=run_pk)}


def flagged_steps(session: Session, *, run_pk: int, updated_at: Any) -> dict[str, list[int]]:
    """The run's step numbers of each kind, ascending (cached until the run changes)."""
    return run_cached(session, run_pk=run_pk, updated_at=updated_at, name="walk",
                              compute=lambda: _flagged(session, run_pk))


def union(flagged: dict[str, list[int]], kinds: Iterable[str]) -> list[int]:
    """The steps of any of `kinds` (all kinds when none is given), ascending."""
    chosen = list(kinds) or list(KINDS)
    return sorted(set().union(*(flagged.get(k, []) for k in chosen)))


def step_block(session: Session, *, run_pk: int, updated_at: Any, kinds: list[str], offset: int,
               limit: int) -> tuple[list[dict[str, Any]], int]:
    """A block of steps: of the whole run, or only those of `kinds` (offset counts those)."""
    if not kinds:
        return run_detail.get_steps(session, run_pk=run_pk, offset=offset, limit=limit)
    chosen = union(flagged_steps(session, run_pk=run_pk, updated_at=updated_at), kinds)
    wanted = chosen[max(0, offset): max(0, offset) + limit]
    if not wanted:
        return [], len(chosen)
    steps, _total = run_detail.get_steps(session, run_pk=run_pk, steps=wanted, limit=len(wanted))
    return steps, len(chosen)


def position_of(session: Session, *, run_pk: int, updated_at: Any, kinds: list[str], step: int) -> int:
    """The offset of the first step >= `step` in the run (or among the steps of `kinds`)."""
    if not kinds:
        return run_detail.steps_after(session, run_pk=run_pk, after=step - 1)
    chosen = union(flagged_steps(session, run_pk=run_pk, updated_at=updated_at), kinds)
    return sum(1 for s in chosen if s < step)


def step_at(session: Session, *, run_pk: int, updated_at: Any, kinds: list[str], position: int) -> Optional[int]:
    """The step number at `position` (in the run, or among the steps of `kinds`)."""
    if not kinds:
        return run_detail.step_at(session, run_pk=run_pk, position=position)
    chosen = union(flagged_steps(session, run_pk=run_pk, updated_at=updated_at), kinds)
    return chosen[position] if 0 <= position < len(chosen) else None


def summary(step: dict[str, Any]) -> dict[str, Any]:
    """The one line a collapsed step shows: each critic action with its count, the reason
    and score of the worst critic (strongest action, then lowest score), and what failed.
    The score shown is the worst critic's, beside its reason (the step's stored score, the
    critics' mean, read beside the worst reason, said "0.45" of a critic that scored 0.10)."""
    outs = step.get("critic_outputs") or []
    counts: dict[str, int] = {}
    for o in outs:
        eff = o.get("effective_action") or "continue"
        counts[eff] = counts.get(eff, 0) + 1
    actions = [{"action": a, "count": counts[a]} for a in sorted(counts, key=lambda a: -ACTION_RANK.get(a, 0))]
    worst = None
    if outs:
        def badness(o: dict[str, Any]) -> tuple:
            score = o.get("score")
            return (ACTION_RANK.get(o.get("effective_action") or "continue", 0),
                    -(score if isinstance(score, (int, float)) else 2.0))
        worst = max(outs, key=badness)
    errors = step_errors(step.get("record"))
    for e in step.get("events") or []:
        if event_failed(e):
            rec = e.get("record") if isinstance(e.get("record"), dict) else {}
            errors.append(f"{e.get('phase') or 'event'}: {rec.get('error') or 'failed'}")
    worst_score = worst.get("score") if worst else None
    return {"actions": actions, "worst_reason": worst.get("reason") if worst else None,
            "worst_critic": worst.get("name") if worst else None,
            "worst_score": worst_score if isinstance(worst_score, (int, float)) and not isinstance(worst_score, bool)
            else None, "errors": errors}


def _calls_in(record: Any) -> tuple[list[int], int]:
    """(the call indexes a step's tool invocations name, how many actions it dispatched)."""
    if not isinstance(record, dict):
        return [], 0
    named = [inv["call_index"] for inv in record.get("tool_invocations") or []
             if isinstance(inv, dict) and isinstance(inv.get("call_index"), int) and not isinstance(inv.get("call_index"), bool)] \
        if isinstance(record.get("tool_invocations"), list) else []
    decision = record.get("decision") if isinstance(record.get("decision"), dict) else {}
    actions = record.get("actions") or decision.get("actions") or []
    return named, len(actions) if isinstance(actions, list) else 0


def step_of_call(session: Session, *, run_pk: int, call: int, batch: int = 200) -> tuple[Optional[int], int]:
    """(the step that made tool call `call` (1-based across the run), how many calls were seen).

    A step's tool invocations name their `call_index`; a step without them counts one call
    per action it dispatched, continuing from the calls before it. Steps are read in order,
    a block at a time, only as far as the call.
    """
    seen = 0
    last = -1
    while True:
        rows = session.execute(select(STEPS.c.step, STEPS.c.record).where(STEPS.c.run_pk == run_pk, STEPS.c.step > last)
                               .order_by(STEPS.c.step).limit(batch)).all()
        if not rows:
            return None, seen
        for step, text in rows:
            named, actions = _calls_in(_loads(text))
            if named:
                if call in named:
                    return step, max(seen, max(named))
                seen = max(seen, max(named))
            else:
                if seen < call <= seen + actions:
                    return step, seen + actions
                seen += actions
        last = rows[-1][0]
