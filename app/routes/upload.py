"""Upload traces: the page (`/upload`), the form post, and `POST /api/traces` for scripts.

Both posts answer as soon as the files are stored: `POST /api/traces` with 202 and the
job to poll (`?wait=true` waits for the result instead), the form with a component
that polls the job, showing bytes read and records written, with a Cancel button.
The ingest runs on the writer's fair queue (app.jobs), owned by the client's address.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse

from ..errors import BoardError
from ..render import JSONResponse, is_htmx, respond, wants_json
from ..secrets import mask_data
from ..uploads import ingest_job, receive_files

router = APIRouter(tags=["upload"])

#: How long the form post waits for a small upload's result before answering with the poller.
PAGE_WAIT_S = 2.0
#: Longest `?wait=true` waits before answering 202 anyway.
API_WAIT_S = 600.0


class _Receiving:
    """Counts uploads being received at once (QITA_MAX_CONCURRENT_UPLOADS)."""

    def __init__(self) -> None:
        self.n = 0


async def _submit(request: Request):
    settings = request.app.state.settings
    receiving = getattr(request.app.state, "receiving", None)
    if receiving is None:
        receiving = request.app.state.receiving = _Receiving()
    if receiving.n >= settings.max_concurrent_uploads:
        raise BoardError(f"the board is receiving {receiving.n} uploads already (QITA_MAX_CONCURRENT_UPLOADS): "
                         "try again in a moment", status=503)
    receiving.n += 1
    try:
        received = await receive_files(request, max_bytes=settings.max_upload_bytes)
    finally:
        receiving.n -= 1
    names = ", ".join(label for label, _p, _s in received.files)[:200] or "nothing"
    owner = "upload:" + str(request.scope.get("state", {}).get("qita_peer", ""))
    return request.app.state.writer.submit(f"upload of {names}", ingest_job(received), owner=owner,
                                           total_bytes=sum(s for _l, _p, s in received.files),
                                           cleanup=received.remove, budget_s=settings.job_budget_s)


async def _wait(request: Request, job, timeout: float) -> bool:
    """Wait for the job without holding a thread, and never past the board's shutdown."""
    deadline = time.monotonic() + timeout
    while not job.finished.is_set() and time.monotonic() < deadline:
        if getattr(request.app.state, "stopping", False) or await request.is_disconnected():
            break
        await asyncio.sleep(0.05)
    return job.finished.is_set()


def job_data(request: Request, job) -> dict[str, Any]:
    """A job as the pages and the API show it (trace text in it masked by `respond` / here)."""
    data = job.to_json()
    data["job_url"] = f"/upload/jobs/{job.id}"
    data["poll"] = f"/api/jobs/{job.id}"
    data["cancel_url"] = f"/api/jobs/{job.id}/cancel"
    data["job_id"] = job.id
    data["queued_before"] = request.app.state.writer.queued_before(job)
    return data


@router.get("/upload", include_in_schema=False)
def upload_page(request: Request) -> Any:
    """The upload form (drag and drop or file picker)."""
    return respond(request, "upload.html", {"job": None})


@router.post("/upload", include_in_schema=False)
async def upload_form(request: Request) -> Any:
    """The form's post: the result when ingest finishes quickly, else a component that polls it."""
    job = await _submit(request)
    await _wait(request, job, PAGE_WAIT_S)
    job_url = f"/upload/jobs/{job.id}"
    if not wants_json(request) and not is_htmx(request):
        # Post/Redirect/Get: a reload or Back shows the job's page, never posts the files again
        return RedirectResponse(job_url, status_code=303)
    response = respond(request, "upload.html", {"job": job_data(request, job)}, fragment="_upload_result.html")
    if is_htmx(request):
        # The address becomes the job's: a reload, or Back from a run it links to, shows this
        # result (or the progress) again instead of an empty form.
        response.headers["HX-Push-Url"] = job_url
    return response


@router.get("/upload/jobs/{job_id}", include_in_schema=False)
def upload_job(request: Request, job_id: int) -> Any:
    """An upload's progress, then its result."""
    job = request.app.state.writer.upload(job_id)
    if job is None:
        raise BoardError("no such upload (results are kept for a while only)", status=404)
    return respond(request, "upload.html", {"job": job_data(request, job)}, fragment="_upload_result.html")


@router.post("/upload/jobs/{job_id}/cancel", include_in_schema=False)
def upload_cancel(request: Request, job_id: int) -> Any:
    """The component's Cancel button."""
    job = request.app.state.writer.cancel(job_id) if request.app.state.writer.upload(job_id) else None
    if job is None:
        raise BoardError("no such upload (results are kept for a while only)", status=404)
    return respond(request, "upload.html", {"job": job_data(request, job)}, fragment="_upload_result.html")


@router.post("/api/traces", status_code=202, summary="Upload trace files (.jsonl, .jsonl.gz, .zip), several at once",
             responses={202: {"description": "Stored; ingesting in the background: poll `poll`"},
                        200: {"description": "With ?wait=true: the result"},
                        413: {"description": "Upload larger than the configured limit"}})
async def upload_api(request: Request,
                     wait: Annotated[bool, Query(description="Wait for the ingest and answer with its result")] = False) -> Any:
    """Multipart field `files`. Answers 202 with the job (`poll` it for progress and the result:
    runs created/updated and every rejected line as FILE:LINE: reason) as soon as the files are stored."""
    job = await _submit(request)
    if not wait or not await _wait(request, job, API_WAIT_S):
        return JSONResponse(mask_data(job_data(request, job)), status_code=202)
    if job.state != "done":
        raise BoardError(job.error or "upload failed", status=409 if job.state == "cancelled" else 503)
    return JSONResponse(mask_data({"job": job.id, **job.to_json()["result"]}))
