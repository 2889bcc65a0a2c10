"""Health and write-job status."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from ..errors import BoardError
from ..render import respond
from .upload import job_data

router = APIRouter(tags=["health"])


@router.get("/api/health", summary="Liveness")
def health() -> dict[str, str]:
    """`{"status": "ok"}` while the board serves."""
    return {"status": "ok"}


@router.get("/jobs/{job_id}", include_in_schema=False)
@router.get("/api/jobs/{job_id}", summary="Progress of a write job (an upload or an ingest pass)")
def job_status(request: Request, job_id: int) -> Any:
    """A queued, running or finished write job; the page polls until it is done."""
    job = request.app.state.writer.get(job_id)
    if job is None:
        raise BoardError("no such job (finished jobs are kept for a while only)", status=404)
    return respond(request, "job.html", job_data(request, job), fragment="_job.html")


@router.post("/api/jobs/{job_id}/cancel", summary="Cancel a write job (an upload): at once when queued, "
                                                  "at its next batch when running; what was written stays")
def job_cancel(request: Request, job_id: int) -> Any:
    found = request.app.state.writer.get(job_id)
    if found is not None and not found.is_upload:
        raise BoardError(f"job {job_id} is the board's own ({found.label}), not an upload: only an upload can be "
                         "cancelled", status=409)
    job = request.app.state.writer.cancel(job_id)
    if job is None:
        raise BoardError("no such job (finished jobs are kept for a while only)", status=404)
    return respond(request, "job.html", job_data(request, job), fragment="_job.html")
