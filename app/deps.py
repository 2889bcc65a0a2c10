"""FastAPI dependencies: the settings, a session per request, and the run a path names.

Every route that names a run in its path looks it up through `RunDep` (the cheap row:
key, state, step count, live stamp) or `RunRowDep` (the whole row): this is where
"no run with this id" is raised, as the 404 that names the id and the nearest ones.
"""

from __future__ import annotations

from typing import Annotated, Any, Iterator, Optional

from fastapi import Depends, Request
from sqlmodel import Session

from .notfound import missing_run
from .queries.live import find_run, unmask_run_id
from .queries.run_detail import get_run_row
from .settings import Settings


def get_settings(request: Request) -> Settings:
    """The board's settings."""
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """One session for the request (FastAPI shares it between the route and its dependencies)."""
    with Session(request.app.state.engine) as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session)]


def _found(session: Session, run_id: str, row: Optional[dict[str, Any]]) -> dict[str, Any]:
    if row is None:
        raise missing_run(session, run_id)
    return row


def _real_id(session: Session, run_id: str) -> str:
    """The id itself, or the one a masked id in a page's link stands for (app.queries.live.unmask_run_id)."""
    return unmask_run_id(session, run_id=run_id) or run_id


def run_ref(session: SessionDep, run_id: str) -> dict[str, Any]:
    """The run `run_id` names, as `app.queries.live.find_run` reads it; a 404 naming the id when absent."""
    row = find_run(session, run_id=run_id)
    if row is None:
        row = find_run(session, run_id=_real_id(session, run_id))
    return _found(session, run_id, row)


def run_row(session: SessionDep, run_id: str) -> dict[str, Any]:
    """The run's whole row (`app.queries.run_detail.get_run_row`); a 404 naming the id when absent."""
    row = get_run_row(session, run_id=run_id)
    if row is None:
        row = get_run_row(session, run_id=_real_id(session, run_id))
    return _found(session, run_id, row)


RunDep = Annotated[dict[str, Any], Depends(run_ref)]
RunRowDep = Annotated[dict[str, Any], Depends(run_row)]
