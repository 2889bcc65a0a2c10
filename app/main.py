"""The FastAPI application: `create_app(settings)` wires store, writer, routes and guards.

Nothing touches a database at import time; each app opens (and upgrades) its own.
"""

from __future__ import annotations

import logging
import threading
from contextlib import asynccontextmanager
from typing import Any, Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import tempfiles, urls  # noqa: F401  (registers the runid convertor before routes are built)
from .db import open_database
from .errors import BoardError
from .jobs import Writer
from .lab.index import LabIndexer
from .paths import STATIC
from .render import JSONResponse, is_htmx, make_templates, wants_json
from .secrets import mask_data, mask_text
from .security import Guard, SecurityMiddleware
from .settings import Settings
from .urls import RawPathMiddleware
from .warm import Warmer
from .watch import Watcher

log = logging.getLogger("qita")


def _error_response(request: Request, exc: BoardError):
    # Messages and their details may quote trace text (a run id, a bad value): masked like any page.
    exc = BoardError(mask_text(exc.message), status=exc.status, title=exc.title, details=mask_data(exc.details))
    if wants_json(request):
        return JSONResponse({**exc.details, "error": exc.message, "status": exc.status}, status_code=exc.status)
    templates = request.app.state.templates
    name = "_error.html" if is_htmx(request) else "error.html"
    ctx = {"request": request, "error": exc, "settings": request.app.state.settings}
    response = templates.TemplateResponse(request, name, ctx, status_code=exc.status)
    if is_htmx(request):
        # Show the error where the user is looking, not inside the swapped element.
        response.headers["HX-Retarget"] = "#flash"
        response.headers["HX-Reswap"] = "innerHTML"
    return response


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p not in ("query", "path", "body"))
        parts.append(f"{loc}: {err.get('msg', 'invalid')}" if loc else str(err.get("msg", "invalid")))
    return "invalid request: " + "; ".join(parts)


class _Sweeper:
    """Queues a sweep now and then, so silent runs turn abandoned while the board is open."""

    def __init__(self, writer: Writer, interval: float):
        self.writer = writer
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="qita-sweep", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.writer.submit("sweep", lambda job, ingestor: ingestor.sweep(), owner="board")


def _nul_refused(exc: BaseException) -> bool:
    """Whether the database refused a NUL character in a query parameter."""
    from sqlalchemy.exc import DataError

    return isinstance(exc, DataError) and "NUL" in str(getattr(exc, "orig", exc))


def create_app(settings: Optional[Settings] = None) -> FastAPI:
    """Build the board for `settings` (from the environment when not given)."""
    settings = settings or Settings()
    engine = open_database(settings)
    writer = Writer(engine, settings)
    watcher = Watcher(writer, list(settings.watch))
    sweeper = _Sweeper(writer, interval=max(1.0, min(30.0, settings.abandon_after_s / 4)))
    warmer = Warmer(engine)
    lab_indexer = LabIndexer(engine, writer, background=settings.lab_index)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        tempfiles.remove_stale()  # what a crashed board left behind
        writer.start()
        watcher.start()
        sweeper.start()
        warmer.start()
        lab_indexer.start()
        app.state.stopping = False
        try:
            yield
        finally:
            # Stop means stop: requests waiting on a job give up, jobs stop at their next
            # line, and the whole shutdown fits in the 5 s a stop signal is given.
            app.state.stopping = True
            lab_indexer.stop()
            warmer.stop()
            sweeper.stop()
            watcher.stop()
            writer.stop(timeout=1.5)
            tempfiles.remove_own()
            engine.dispose()

    app = FastAPI(
        title="qita board",
        summary="A trace viewer for AI-agent runs: runs, steps, critic outputs, stop reasons, early stop, "
                "smoke-vs-e2e comparison.",
        version="0.1.0",
        lifespan=lifespan,
        # FastAPI's page loads Swagger UI from a CDN: app.routes.docs serves the vendored one
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.writer = writer
    app.state.warmer = warmer
    app.state.lab_indexer = lab_indexer
    app.state.templates = make_templates()

    @app.exception_handler(BoardError)
    async def board_error(request: Request, exc: BoardError):
        return _error_response(request, exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else "error"
        if exc.status_code == 404 and message == "Not Found":
            message = "no such page"
        return _error_response(request, BoardError(message, status=exc.status_code))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        return _error_response(request, BoardError(_validation_message(exc), status=400))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception):
        if _nul_refused(exc):
            # PostgreSQL refuses NUL in a parameter (SQLite just finds nothing): a request
            # that asks for a value holding one asks for what no stored value holds.
            return _error_response(request, BoardError(
                "a value in the request holds the NUL character (\\u0000), which no stored value does", status=400))
        log.exception("unhandled error on %s", request.url.path)
        return _error_response(request, BoardError("internal error: the board could not answer this request",
                                                   status=500))

    from .routes import ROUTERS

    for router in ROUTERS:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        """The board's icon where a browser looks for one unasked: on the JSON and Markdown
        twins, which carry no `<link rel=icon>` (each used to log a 404)."""
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml",
                            headers={"cache-control": "public, max-age=86400"})

    app.state.security = guard = Guard(settings)
    app.add_middleware(SecurityMiddleware, settings=settings, guard=guard)
    app.add_middleware(RawPathMiddleware)
    app.add_middleware(HeadAsGet)
    return app


class HeadAsGet:
    """HEAD answered as the GET of the same address, headers and all, without its body:
    FastAPI's routes declare GET alone, so HEAD was a 405 for link checkers and monitors."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD":
            await self.app(scope, receive, send)
            return

        async def without_body(message: Any) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body"):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        # The server keeps its own scope (it knows the request was HEAD); the app sees a GET.
        await self.app({**scope, "method": "GET"}, receive, without_body)

