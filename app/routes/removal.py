"""Removing runs and uploads: what a delete would remove (`GET .../delete`, the confirmation
page and its JSON twin), the delete itself (the page's POST, `DELETE /api/...`), and the
uploads the board remembers (`/uploads`, `/uploads/{id}`).

Writes need the board's token when it has one (app.security guards every POST and
DELETE); they run on the writer thread, so they never meet an ingest half-way.
"""

from __future__ import annotations

from typing import Annotated, Any, Callable, Optional

from fastapi import APIRouter, Form, Path, Query, Request
from sqlalchemy.engine import Connection

from .. import removal
from ..deps import RunDep, SessionDep
from ..errors import BoardError
from ..notfound import missing_run
from ..render import JSONResponse, respond
from ..security import request_authorised

router = APIRouter(tags=["removal"])

UploadId = Annotated[int, Path(ge=1, le=2_000_000_000)]
DELETE_WAIT_S = 600.0


def _plan_run(run_id: str) -> Callable[[Connection], Optional[dict[str, Any]]]:
    def plan(conn: Connection) -> Optional[dict[str, Any]]:
        found = removal.plan_runs(conn, run_ids=[run_id])
        return found if found["runs"] else None
    return plan


def _plan_upload(upload_id: int) -> Callable[[Connection], Optional[dict[str, Any]]]:
    return lambda conn: removal.plan_upload(conn, upload_id=upload_id)


def _no_upload(upload_id: int) -> BoardError:
    return BoardError(f"no upload #{upload_id} (it was removed, or it added no run)", status=404,
                      details={"asked": {"upload_id": upload_id}, "uploads_url": "/uploads"})


def _carry_out(request: Request, label: str, plan: Callable[[Connection], Optional[dict[str, Any]]],
               missing: Callable[[], BoardError], *, upload_id: Optional[int] = None,
               stamp: Optional[str] = None) -> dict[str, Any]:
    """Plan again and delete in one transaction on the writer thread; the removed run ids are
    forgotten by the ingest's key cache so a later ingest creates them afresh. `stamp`: the
    upload the confirmation page showed (`removal.upload_stamp`); another one is not deleted."""
    def job(_job, ingestor) -> dict[str, Any]:
        with ingestor.engine.begin() as conn:
            found = plan(conn)
            if found is None:
                return {"missing": True}
            if stamp is not None and removal.upload_stamp(found["upload"]) != stamp:
                return {"changed": True}
            result = removal.execute(conn, found, upload_id=upload_id)
        for run in result["runs"]:
            ingestor.applier.forget(run["run_id"])
        return result

    done = request.app.state.writer.run(label, job, timeout=DELETE_WAIT_S)
    if done.state != "done":
        raise BoardError(done.error or "the delete did not finish: try again", status=503)
    if done.result.get("missing"):
        raise missing()
    if done.result.get("changed"):
        raise BoardError(f"upload #{upload_id} is not the upload the delete page showed: that one was deleted, and "
                         "its number now names a newer upload. Nothing was deleted.", status=409,
                         details={"confirm_url": f"/uploads/{upload_id}/delete"})
    return done.result


def _context(request: Request) -> dict[str, Any]:
    settings = request.app.state.settings
    return {"needs_sign_in": bool(settings.token) and not request_authorised(request)}


# -- runs ------------------------------------------------------------------------------------

def _lines(text: str) -> str:
    # A form sends every line break as CRLF (the HTML form data set's newline
    # normalization): a run id holding "\n" comes back as "\r\n" and could not be deleted.
    return text.replace("\r\n", "\n").replace("\r", "\n")


@router.get("/runs/{run_id:runid}/delete", include_in_schema=False)
@router.get("/api/runs/{run_id:runid}/delete", summary="What deleting a run would remove (nothing is removed)")
def confirm_run_delete(request: Request, session: SessionDep, _run: RunDep, run_id: str) -> Any:
    """The confirmation step: the run, the rows of each table that go with it, and nothing else."""
    conn = session.connection()
    plan = _plan_run(run_id)(conn)
    if plan is None:  # removed since the lookup
        raise missing_run(session, run_id)
    data = {**removal.public(plan), "kind": "run", "target": run_id}
    return respond(request, "delete.html", data, context=_context(request))


@router.post("/runs/{run_id:runid}/delete", include_in_schema=False)
def run_delete_form(request: Request, session: SessionDep, run_id: str,
                    confirm: Annotated[str, Form(max_length=1000)] = "") -> Any:
    """The confirmation form's post: deletes when `confirm` repeats the run id."""
    if _lines(confirm) != _lines(run_id):
        raise BoardError("to delete, confirm on the run's delete page (the form repeats the run id)",
                         details={"confirm_url": request.url.path})
    result = _carry_out(request, f"delete run {run_id}"[:200], _plan_run(run_id), lambda: missing_run(session, run_id))
    return respond(request, "delete.html", {**result, "kind": "run", "target": run_id}, context=_context(request))


@router.delete("/api/runs/{run_id:runid}", summary="Delete a run and every row of it (token required when set)")
def run_delete_api(request: Request, session: SessionDep, _run: RunDep, run_id: str,
                   dry_run: Annotated[bool, Query(description="Only say what would be removed")] = False) -> Any:
    """Removes the run's steps, critic outputs, events, criteria, early-stop record and tags, then the run."""
    if dry_run:
        conn = session.connection()
        plan = _plan_run(run_id)(conn)
        if plan is None:  # removed since the lookup
            raise missing_run(session, run_id)
        return JSONResponse({**removal.public(plan), "kind": "run", "target": run_id})
    result = _carry_out(request, f"delete run {run_id}"[:200], _plan_run(run_id), lambda: missing_run(session, run_id))
    return JSONResponse({**result, "kind": "run", "target": run_id})


# -- uploads ---------------------------------------------------------------------------------

@router.get("/uploads", include_in_schema=False)
@router.get("/api/uploads", summary="The latest uploads, with the runs each created and added to")
def list_uploads(request: Request, session: SessionDep) -> Any:
    """Uploads through this board, newest first (each can be removed from its page)."""
    conn = session.connection()
    rows = removal.list_uploads(conn)
    return respond(request, "uploads.html", {"data": rows, "count": len(rows)})


@router.get("/uploads/{upload_id}", include_in_schema=False)
@router.get("/api/uploads/{upload_id}", summary="One upload: its files, the runs it created and added to")
def get_upload(request: Request, session: SessionDep, upload_id: UploadId) -> Any:
    """What one upload added."""
    conn = session.connection()
    upload = removal.get_upload(conn, upload_id=upload_id)
    if upload is None:
        raise _no_upload(upload_id)
    upload.pop("_created_pks")
    return respond(request, "upload_record.html", upload, context=_context(request))


@router.get("/uploads/{upload_id}/delete", include_in_schema=False)
@router.get("/api/uploads/{upload_id}/delete", summary="What deleting an upload would remove (nothing is removed)")
def confirm_upload_delete(request: Request, session: SessionDep, upload_id: UploadId) -> Any:
    """The confirmation step: the runs the upload created go; runs it only added to stay."""
    conn = session.connection()
    plan = removal.plan_upload(conn, upload_id=upload_id)
    if plan is None:
        raise _no_upload(upload_id)
    data = {**removal.public(plan), "kind": "upload", "target": upload_id, "stamp": removal.upload_stamp(plan["upload"])}
    return respond(request, "delete.html", data, context=_context(request))


@router.post("/uploads/{upload_id}/delete", include_in_schema=False)
def upload_delete_form(request: Request, upload_id: UploadId,
                       confirm: Annotated[str, Form(max_length=100)] = "",
                       stamp: Annotated[str, Form(max_length=100)] = "") -> Any:
    """The confirmation form's post: deletes when `confirm` repeats the upload number and `stamp` names that upload."""
    if confirm != str(upload_id) or not stamp:
        raise BoardError("to delete, confirm on the upload's delete page (the form repeats its number)",
                         details={"confirm_url": request.url.path})
    result = _carry_out(request, f"delete upload #{upload_id}", _plan_upload(upload_id), lambda: _no_upload(upload_id),
                        upload_id=upload_id, stamp=stamp)
    return respond(request, "delete.html", {**result, "kind": "upload", "target": upload_id}, context=_context(request))


@router.delete("/api/uploads/{upload_id}", summary="Delete the runs an upload created (token required when set)")
def upload_delete_api(request: Request, session: SessionDep, upload_id: UploadId,
                      dry_run: Annotated[bool, Query(description="Only say what would be removed")] = False) -> Any:
    """Removes every run the upload created with all its rows; runs it only added records to are kept."""
    if dry_run:
        conn = session.connection()
        plan = removal.plan_upload(conn, upload_id=upload_id)
        if plan is None:
            raise _no_upload(upload_id)
        return JSONResponse({**removal.public(plan), "kind": "upload", "target": upload_id})
    result = _carry_out(request, f"delete upload #{upload_id}", _plan_upload(upload_id), lambda: _no_upload(upload_id),
                        upload_id=upload_id)
    return JSONResponse({**result, "kind": "upload", "target": upload_id})
