"""The API reference: Swagger UI over the board's OpenAPI document, served from `static/`.

FastAPI's own docs page loads Swagger UI from a CDN and starts it with an inline script;
the board's content security policy allows neither (script-src 'self'), so that page
was blank. This one loads the vendored copy (static/vendor/README.md) and starts it from
`static/api-docs.js`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

router = APIRouter(tags=["docs"])


@router.get("/api/docs", include_in_schema=False, response_class=HTMLResponse)
def api_docs(request: Request) -> HTMLResponse:
    """Swagger UI for /api/openapi.json."""
    templates = request.app.state.templates
    return templates.TemplateResponse(request, "api_docs.html", {"openapi_url": request.app.openapi_url})
