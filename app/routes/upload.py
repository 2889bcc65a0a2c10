"""Upload traces: the page (`/upload`), the form post, and `POST /api/traces` for scripts."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from ..errors import QitaError
from ..render import JSONResponse, respond
from ..uploads import ingest_job, receive_files

router = APIRouter(tags=["upload"])

#: How long the form post waits for its ingest before answering with a progress poller.
PAGE_WAIT_S = 3.0
API_WAIT_S = 3600.0


async def _submit(request: Request):
    settings = request.app.state.settings
    received = await receive_files(request, max_bytes=settings.max_upload_bytes)
    names = ", ".join(label for label, _p, _s in received.files)[:200] or "nothing"
    return request.app.state.writer.submit(f"upload of {names}", ingest_job(received),
                                           total_bytes=sum(s for _l, _p, s in received.files))


async def _wait(job, timeout: float) -> bool:
    return await asyncio.to_thread(job.finished.wait, timeout)


def _job_data(job) -> dict[str, Any]:
    data = job.to_json()
    data["job_url"] = f"/upload/jobs/{job.id}"
    return data


@router.get("/upload", include_in_schema=False)
def upload_page(request: Request) -> Any:
    """The upload form (drag and drop or file picker)."""
    return respond(request, "upload.html", {"job": None})


@router.post("/upload", include_in_schema=False)
async def upload_form(request: Request) -> Any:
    """The form's post: the result when ingest finishes quickly, else a component that polls it."""
    job = await _submit(request)
    await _wait(job, PAGE_WAIT_S)
    return respond(request, "upload.html", {"job": _job_data(job)}, fragment="_upload_result.html")


@router.get("/upload/jobs/{job_id}", include_in_schema=False)
def upload_job(request: Request, job_id: int) -> Any:
    """An upload's progress, then its result."""
    job = request.app.state.writer.get(job_id)
    if job is None:
        raise QitaError("no such upload (results are kept for a while only)", status=404)
    return respond(request, "upload.html", {"job": _job_data(job)}, fragment="_upload_result.html")


@router.post("/api/traces", summary="Upload trace files (.jsonl, .jsonl.gz, .zip), several at once",
             responses={413: {"description": "Upload larger than the configured limit"}})
async def upload_api(request: Request, wait: Annotated[bool, Query(description="Wait for ingest to finish")] = True) -> Any:
    """Multipart field `files`; answers with the runs created/updated and every rejected line (FILE:LINE: reason)."""
    job = await _submit(request)
    if not wait or not await _wait(job, API_WAIT_S):
        return JSONResponse({**_job_data(job), "poll": f"/api/jobs/{job.id}"}, status_code=202)
    data = job.to_json()
    if job.state == "failed":
        raise QitaError(job.error or "upload failed", status=500 if not job.error else 503)
    return JSONResponse({"job": job.id, **data["result"]})
