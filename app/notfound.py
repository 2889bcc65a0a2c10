"""Not-found answers that help: they name what was asked for and offer what exists.

A run id that is not there comes back with the nearest ids (by shared prefix, by
containing what was typed, by similarity, and the runs of a task when the text is a
task id) and the experiments the board holds. A compare group that names a variant,
experiment or tag that is not there is answered with the valid ones. Every answer is
a `BoardError`, so pages, htmx fragments and JSON twins all carry the same details.
"""

from __future__ import annotations

import difflib
from typing import Any, Optional

from sqlalchemy import func, select
from sqlmodel import Session

from .errors import BoardError
from .models import RUN_TAGS as TAGS
from .models import RUNS
from .search import escape_like

#: How many suggestions an answer offers, and how many names of things that exist.
NEAREST = 5
LISTED = 30
#: Runs sharing the first characters of the asked id that are ranked by similarity.
_PREFIX_CANDIDATES = 2000


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def nearest_run_ids(session: Session, *, run_id: str, limit: int = NEAREST) -> list[str]:
    """Existing run ids closest to `run_id`: a longer shared prefix first, then similarity."""
    # Run ids never hold NUL (ingest refuses them), and PostgreSQL refuses one in a query
    # parameter: the nearest ids are looked for without it.
    asked = run_id[:200].replace("\x00", "")
    candidates: set[str] = set()
    if asked:
        head = asked[:3]
        candidates.update(session.execute(
            select(RUNS.c.run_id).where(func.substr(RUNS.c.run_id, 1, len(head)) == head)
            .order_by(RUNS.c.run_id).limit(_PREFIX_CANDIDATES)).scalars())
    if len(asked) >= 3:
        candidates.update(session.execute(
            select(RUNS.c.run_id).where(RUNS.c.run_id.like(f"%{escape_like(asked)}%", escape="\\"))
            .order_by(RUNS.c.run_id).limit(50)).scalars())
        # A task id typed where a run id belongs: its runs are what was meant.
        candidates.update(session.execute(
            select(RUNS.c.run_id).where(RUNS.c.task_id == asked).order_by(RUNS.c.run_id).limit(limit)).scalars())
    if not candidates:
        # Nothing shares even the first characters: rank a bounded sample by similarity alone.
        candidates.update(session.execute(select(RUNS.c.run_id).order_by(RUNS.c.run_id).limit(_PREFIX_CANDIDATES)).scalars())
    low = asked.lower()

    def rank(candidate: str) -> tuple:
        contains = low in candidate.lower() if low else False
        ratio = difflib.SequenceMatcher(None, low, candidate.lower()).ratio()
        return (-_common_prefix(low, candidate.lower()), not contains, -ratio, candidate)

    ranked = sorted(candidates, key=rank)
    keep = [c for c in ranked if _common_prefix(low, c.lower()) >= 3 or low in c.lower()
            or difflib.SequenceMatcher(None, low, c.lower()).ratio() >= 0.5]
    return keep[:limit]


def experiments(session: Session, *, limit: int = LISTED) -> list[str]:
    """The experiments the board holds (alphabetical, at most `limit`)."""
    return list(session.execute(select(RUNS.c.experiment).where(RUNS.c.experiment.is_not(None)).distinct()
                                .order_by(RUNS.c.experiment).limit(limit)).scalars())


def variants(session: Session, *, experiment: str, limit: int = LISTED) -> list[str]:
    """The variants of one experiment (alphabetical)."""
    return list(session.execute(select(RUNS.c.variant).where(RUNS.c.experiment == experiment,
                                                             RUNS.c.variant.is_not(None)).distinct()
                                .order_by(RUNS.c.variant).limit(limit)).scalars())


def tags(session: Session, *, limit: int = LISTED) -> list[str]:
    """The tags the board holds (alphabetical)."""
    return list(session.execute(select(TAGS.c.tag).distinct().order_by(TAGS.c.tag).limit(limit)).scalars())


def missing_run(session: Session, run_id: str) -> BoardError:
    """The 404 for a run id that is not in the store, with the nearest ids and the experiments."""
    nearest = nearest_run_ids(session, run_id=run_id)
    shown = run_id if len(run_id) <= 200 else run_id[:200] + "…"
    message = f"no run with id {shown!r}"
    if nearest:
        message += f"; nearest: {', '.join(nearest)}"
    return BoardError(message, status=404, details={
        "asked": {"run_id": run_id[:1000]}, "nearest_run_ids": nearest, "experiments": experiments(session)})


def missing_groups(session: Session, *, kind: str, asked: dict[str, Any], missing: list[str],
                   experiment: Optional[str] = None) -> BoardError:
    """The 404 for compare groups that name something absent, naming the valid choices."""
    if kind == "variant" and experiment is not None:
        valid = variants(session, experiment=experiment)
        where = f"experiment {experiment!r} has no variant {', '.join(repr(m) for m in missing)}"
        message = f"{where}; its variants: {', '.join(valid) or 'none'}"
        details = {"asked": asked, "variants": {experiment: valid}, "valid": valid}
    elif kind == "tag":
        valid = tags(session)
        message = f"no run has tag {', '.join(repr(m) for m in missing)}; tags: {', '.join(valid) or 'none'}"
        details = {"asked": asked, "valid": valid}
    else:
        valid = experiments(session)
        message = (f"no experiment {', '.join(repr(m) for m in missing)}; "
                   f"experiments: {', '.join(valid) or 'none (ingest or upload runs first)'}")
        details = {"asked": asked, "valid": valid}
    return BoardError(message, status=404, details={**details, "experiments": experiments(session)})
