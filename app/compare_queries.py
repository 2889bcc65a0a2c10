"""Read queries of the compare and pair views (keyword-only, like app.queries).

A comparison costs two queries (one per group, early-stop reason joined in), whatever
the number of pairs: no per-run query.
"""

from __future__ import annotations

from typing import Any, Optional

from sqlalchemy import and_, exists, func, select
from sqlmodel import Session

from .compare import Group
from .models import RUNS, EARLY, RUN_TAGS as TAGS


COLUMNS = [RUNS.c.id, RUNS.c.run_id, RUNS.c.task_id, RUNS.c.replicate, RUNS.c.experiment, RUNS.c.variant,
           RUNS.c.verdict, RUNS.c.state, RUNS.c.stop_reason, RUNS.c.early_stopped, RUNS.c.steps,
           RUNS.c.tokens_total, RUNS.c.elapsed_s, RUNS.c.cost_usd, RUNS.c.started_at]


def _condition(group: Group) -> Any:
    if group.kind == "variant":
        return and_(RUNS.c.experiment == group.experiment, RUNS.c.variant == group.value)
    if group.kind == "experiment":
        return RUNS.c.experiment == group.value
    return exists().where(and_(TAGS.c.run_pk == RUNS.c.id, TAGS.c.tag == group.value))


def group_runs(session: Session, *, group: Group) -> list[dict[str, Any]]:
    """Every run of one group, with its early-stop reason."""
    stmt = (select(*COLUMNS, EARLY.c.reason.label("early_stop_reason"))
            .select_from(RUNS.outerjoin(EARLY, EARLY.c.run_pk == RUNS.c.id))
            .where(_condition(group)).order_by(RUNS.c.id))
    return [dict(r) for r in session.execute(stmt).mappings()]


def group_exists(session: Session, *, group: Group) -> bool:
    """Whether any run belongs to the group (a comparison of an empty group answers nothing)."""
    return session.execute(select(RUNS.c.id).where(_condition(group)).limit(1)).first() is not None


def variants_by_experiment(session: Session, *, limit: int = 500) -> dict[str, list[str]]:
    """Each experiment's variants, for the chooser and the default comparison."""
    rows = session.execute(select(RUNS.c.experiment, RUNS.c.variant).where(
        RUNS.c.experiment.is_not(None), RUNS.c.variant.is_not(None)).distinct()
        .order_by(RUNS.c.experiment, RUNS.c.variant).limit(limit)).all()
    out: dict[str, list[str]] = {}
    for experiment, variant in rows:
        out.setdefault(experiment, []).append(variant)
    return out


def choices(session: Session) -> dict[str, list[str]]:
    """Experiments and tags the chooser offers."""
    experiments = list(session.execute(select(RUNS.c.experiment).where(RUNS.c.experiment.is_not(None))
                                       .distinct().order_by(RUNS.c.experiment).limit(500)).scalars())
    tags = list(session.execute(select(TAGS.c.tag).distinct().order_by(TAGS.c.tag).limit(500)).scalars())
    return {"experiments": experiments, "tags": tags}


def find_partner(session: Session, *, run: dict[str, Any]) -> Optional[str]:
    """The run of the same experiment, task and replicate in another variant (the e2e twin of a smoke run)."""
    if not run.get("experiment"):
        return None
    stmt = (select(RUNS.c.run_id, RUNS.c.variant).where(
        RUNS.c.experiment == run["experiment"], RUNS.c.task_id == run["task_id"],
        RUNS.c.replicate == run["replicate"], RUNS.c.run_id != run["run_id"],
        func.coalesce(RUNS.c.variant, "") != (run.get("variant") or ""))
        .order_by(RUNS.c.variant, RUNS.c.started_at.desc(), RUNS.c.id.desc()))
    rows = session.execute(stmt).all()
    if not rows:
        return None
    # Prefer e2e for a smoke run (the usual question), then any other variant.
    for run_id, variant in rows:
        if variant == "e2e":
            return run_id
    return rows[0][0]
