"""What open pages poll: a cheap stamp of one run or of the whole store that changes when
the data does, and the run lookup every route naming a run goes through."""

from __future__ import annotations

import hashlib
from typing import Any, Optional

from sqlalchemy import select
from sqlmodel import Session

from ..models import RUNS
from ..search import escape_like
from ..secrets import PLACEHOLDER_PREFIX, mask_text
from .cache import data_version


def find_run(session: Session, *, run_id: str) -> Optional[dict[str, Any]]:
    """The run named `run_id` as routes look it up (key, state, step count, last write) with
    the stamp that changes when it gets new records or changes state; None when there is
    no such run. Cheap: one row, none of its large columns."""
    if "\x00" in run_id:
        return None  # no run id holds NUL; PostgreSQL refuses one as a parameter
    row = session.execute(select(RUNS.c.id, RUNS.c.steps, RUNS.c.state, RUNS.c.last_seen_at, RUNS.c.verdict,
                                 RUNS.c.has_end, RUNS.c.updated_at).where(RUNS.c.run_id == run_id)).mappings().first()
    if row is None:
        return None
    return {"pk": row["id"], "run_id": run_id, "state": row["state"], "steps": row["steps"],
            "updated_at": row["updated_at"], "stamp": run_stamp(row)}


#: Runs sharing the text before a masked part of an id that are masked and compared.
_MASKED_CANDIDATES = 2000


def unmask_run_id(session: Session, *, run_id: str) -> Optional[str]:
    """The run id a masked one stands for, when exactly one run's id masks to it.

    A run id can hold a secret's shape (`deploy token=…`): pages show it masked, and their
    links carry the masked id. It is resolved here by masking the ids that share its text
    before the first placeholder (never by showing the raw id to whoever asks)."""
    return unmask_name(session, RUNS.c.run_id, run_id)


def named(session: Optional[Session], column: Any, value: Any) -> Any:
    """The name a filter or comparison asks for: itself, or the one its masked form (a
    link's) stands for (`unmask_name`); empty and None as they are."""
    if not value or session is None:
        return value
    return unmask_name(session, column, value) or value


def unmask_name(session: Session, column: Any, value: str) -> Optional[str]:
    """The value of `column` (a run id, experiment, variant, model, task or tag) that a
    masked one stands for, when exactly one value masks to it; None otherwise.

    Names are shown masked like any trace text, and the links and filter menus built from
    them carry the masked name: a filter or comparison by such a name matched nothing and
    answered "0 runs" or a 404 (seen in an audit)."""
    start = value.find(PLACEHOLDER_PREFIX)
    if start < 0:
        return None
    head = value[:start]
    stmt = select(column).where(column.like(escape_like(head) + "%", escape="\\")).distinct() \
        .order_by(column).limit(_MASKED_CANDIDATES)
    found = [v for v in session.execute(stmt).scalars() if v != value and mask_text(v) == value]
    return found[0] if len(found) == 1 else None


def run_stamp(row: Any) -> str:
    """The live stamp of a run row (the cheap one `find_run` reads, or the whole row)."""
    return _digest(f"{row['steps']}|{row['state']}|{row['last_seen_at']}|{row['verdict']}|{row['has_end']}")


def runs_live_stamp(session: Session) -> str:
    """What changes when any run is added, grows, or changes state.

    Every write to a run (ingest recompute, abandon sweep) moves its `updated_at`, so the
    data version the list cache uses (newest `updated_at`, run count: two index reads)
    says it without scanning the table.
    """
    return _digest("|".join(str(v) for v in data_version(session)))


def _digest(text: str) -> str:
    # A short opaque token: travels in URLs untouched and says nothing about the data.
    return hashlib.sha1(text.encode()).hexdigest()[:16]


