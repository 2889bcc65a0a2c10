"""The experiments overview: the landing page (`/`, JSON `/api/experiments`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse

from ..deps import SessionDep
from ..queries.experiments import experiments_overview
from ..render import respond
from .runs import LIST_PARAMS

router = APIRouter(tags=["experiments"])


@router.get("/", include_in_schema=False)
@router.get("/api/experiments", summary="Experiments with per-variant figures and their default comparison")
def experiments(request: Request, session: SessionDep) -> Any:
    """Each experiment's variants: runs, pass rate with its 95% interval, median cost, failure reasons, latest activity."""
    if request.url.path == "/" and any(k in LIST_PARAMS for k in request.query_params):
        # The runs list lived at / before the overview did: its shared links keep working.
        return RedirectResponse("/runs?" + request.url.query, status_code=307)
    return respond(request, "experiments.html", experiments_overview(session))
